"""Convergence of the critical sample complexity alpha_c(omega) over quadrature rules.

Solves one omega column (both branches at two bracketing alphas, then Brent's method on
e_t(semantic) - e_t(positional) to 1e-4 in alpha) with several Gauss-Hermite orders and a
scrambled-Sobol QMC rule, and writes a table to results/phase_diagram/alpha_c_quadrature.{csv,json}.

    python benchmarks/alpha_c_quadrature.py [--omega 0.3] [--orders 8,10,12,14,16] [--qmc 14] [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from dotattn.core.io import provenance, write_csv, write_json
from dotattn.positional_semantic.catalogue import QuadratureSpec
from dotattn.positional_semantic.phase_diagram import SweepSettings, omega_column
from dotattn.positional_semantic.problem import Problem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--alphas", default="1.2,1.3", help="bracketing alpha grid (comma list)")
    ap.add_argument("--orders", default="8,10,12,14,16", help="Gauss-Hermite orders per axis")
    ap.add_argument("--qmc", type=int, default=14, help="log2 of the QMC points per scrambling (0: skip)")
    ap.add_argument("--out", default="results/phase_diagram")
    ap.add_argument("--quick", action="store_true", help="orders 6,8 and no QMC")
    args = ap.parse_args()
    orders = [6, 8] if args.quick else [int(k) for k in args.orders.split(",")]
    rules = [QuadratureSpec("gauss-hermite", k, None) for k in orders]
    if args.qmc and not args.quick:
        rules.append(QuadratureSpec("qmc", args.qmc, None, scramblings=8, seed=0))
    alphas = [float(a) for a in args.alphas.split(",")]
    problem = Problem(omega=args.omega)
    rows = []
    t_all = time.perf_counter()
    for spec in rules:
        t0 = time.perf_counter()
        col = omega_column(problem.to_dict(), args.omega, alphas, SweepSettings(spec).to_dict())
        s = col["summary"]
        nodes = spec.rule(problem.gaussian_dim).size
        row = {
            "rule": spec.kind,
            "order": spec.order,
            "nodes": nodes,
            "alpha_c": s["alpha_c"],
            "alpha_lin": s["alpha_lin"],
            "seconds": round(time.perf_counter() - t0, 1),
        }
        rows.append(row)
        print(
            f"{spec.kind:>14} order {spec.order:>2} ({nodes:>7} nodes): alpha_c = {s['alpha_c']}, "
            f"alpha_lin = {s['alpha_lin']}  [{row['seconds']} s]",
            flush=True,
        )
    ref = next((r["alpha_c"] for r in reversed(rows) if r["rule"] == "gauss-hermite" and r["alpha_c"]), None)
    for r in rows:
        r["alpha_c_minus_finest_gh"] = None if (r["alpha_c"] is None or ref is None) else r["alpha_c"] - ref
    out = Path(args.out)
    cols = ["rule", "order", "nodes", "alpha_c", "alpha_c_minus_finest_gh", "alpha_lin", "seconds"]
    prov = provenance(
        {"omega": args.omega, "alphas": alphas, "rules": [r.to_dict() for r in rules]},
        seconds=time.perf_counter() - t_all,
    )
    write_csv(
        out / "alpha_c_quadrature.csv",
        rows,
        cols,
        comment=f"dotattn {prov['dotattn_version']} commit {prov['git_commit']} {prov['created_utc']}",
    )
    write_json(out / "alpha_c_quadrature.json", {"rows": rows, **prov})
    print(f"wrote {out / 'alpha_c_quadrature.csv'}")


if __name__ == "__main__":
    main()
