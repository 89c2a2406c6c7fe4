"""α_c(ω) per quadrature rule with the refined-root method.

For each ω: both branches followed on a bracketing α grid on the default rule (Gauss–Hermite 12),
α_c by Brent's method there (the sweep root), then the fixed points at that root solved again on
each rule and the root taken by one linear step with the slope from the envelope theorem
(:func:`dotattn.positional_semantic.refine.root_on_rule`): Gauss–Hermite orders 12 … 32 one by one, and the refinement
of ``dotattn phase-diagram`` (:func:`dotattn.positional_semantic.refine.refine_root`: mean ± standard error over 8
independent scrambled Sobol rules of 2^13 x 2 points) with two disjoint seed sets, plus a reference
with 2^15 x 2 points per rule. Writes results/phase_diagram/alpha_c_refine.{csv,json}.

    python benchmarks/alpha_c_refine.py [--omegas 0.1,0.2,0.3] [--gh 12,16,20,24,28,32] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from dotattn.core.io import provenance, write_csv, write_json
from dotattn.positional_semantic.branch import follow_branches
from dotattn.positional_semantic.catalogue import branch_label, default_quadrature
from dotattn.positional_semantic.phase_diagram import _critical_root
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import gauss_hermite
from dotattn.positional_semantic.refine import RefineSpec, envelope_slope, refine_root, root_on_rule
from dotattn.positional_semantic.state_evolution import SolverOptions

BRACKETS = {0.1: (0.7, 0.8), 0.2: (0.9, 1.0), 0.3: (1.2, 1.3)}
"""Grid cells that hold the sweep root (from the default phase diagram); others: --alphas."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--omegas", default="0.1,0.2,0.3")
    ap.add_argument("--alphas", default=None, help="bracketing pair a,b for a single omega")
    ap.add_argument("--gh", default="12,16,20,24,28,32", help="Gauss-Hermite orders per axis")
    ap.add_argument("--reference", type=int, default=15, help="log2 points per scrambling of the reference (0: skip)")
    ap.add_argument("--out", default="results/phase_diagram")
    ap.add_argument("--quick", action="store_true", help="omega 0.3, GH 12 and 16, refinement 2^11, no reference")
    args = ap.parse_args()
    omegas = [0.3] if args.quick else [float(w) for w in args.omegas.split(",")]
    orders = [12, 16] if args.quick else [int(k) for k in args.gh.split(",")]
    specs = (
        [("refined 2^11 x 2 x 8, seeds 1000-1007", RefineSpec(11, 8, 2, 1000))]
        if args.quick
        else [
            ("refined 2^13 x 2 x 8, seeds 1000-1007 (phase-diagram default)", RefineSpec(13, 8, 2, 1000)),
            ("refined 2^13 x 2 x 8, seeds 2000-2007", RefineSpec(13, 8, 2, 2000)),
        ]
        + (
            [
                (
                    f"refined 2^{args.reference} x 2 x 8, seeds 3000-3007 (reference)",
                    RefineSpec(args.reference, 8, 2, 3000),
                )
            ]
            if args.reference
            else []
        )
    )
    options = SolverOptions()
    rows = []
    t_all = time.perf_counter()
    load = os.getloadavg()[0]
    for w in omegas:
        problem = Problem(omega=w)
        grid = [float(a) for a in args.alphas.split(",")] if args.alphas else list(BRACKETS[w])
        branches = follow_branches(problem, grid, default_quadrature(problem), options)
        root = _critical_root(branches, grid, 1e-4)
        on_branch = lambda name, fp, p=problem: fp.converged and branch_label(fp.overlaps, p) == name  # noqa: E731
        gap = lambda fps: fps["semantic"].train_loss - fps["positional"].train_loss  # noqa: E731
        slope_of = lambda fps, rule, p=problem: envelope_slope(p, fps, "semantic", "positional", rule, options)  # noqa: E731
        rows.append(
            {
                "omega": w,
                "rule": "sweep: Brent on Gauss-Hermite 12",
                "nodes": 12**4,
                "alpha_c": root.alpha,
                "standard_error": None,
                "seconds": None,
            }
        )
        for k in orders:
            t0 = time.perf_counter()
            a, _ = root_on_rule(
                problem,
                root.alpha,
                root.nearest,
                gap,
                root.slope,
                gauss_hermite(4, k),
                options,
                on_branch,
                slope_of=slope_of,
            )
            rows.append(
                {
                    "omega": w,
                    "rule": f"Gauss-Hermite {k}",
                    "nodes": k**4,
                    "alpha_c": a,
                    "standard_error": None,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(rows[-1], flush=True)
        for label, spec in specs:
            t0 = time.perf_counter()
            r = refine_root(
                problem, root.alpha, root.nearest, gap, root.slope, spec, options, on_branch, slope_of=slope_of
            )
            rows.append(
                {
                    "omega": w,
                    "rule": label,
                    "nodes": 2**spec.log2_points * spec.scramblings,
                    "alpha_c": None if r is None else r.alpha,
                    "standard_error": None if r is None else r.standard_error,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(rows[-1], flush=True)
    out = Path(args.out)
    cols = ["omega", "rule", "nodes", "alpha_c", "standard_error", "seconds"]
    prov = provenance(
        {
            "omegas": omegas,
            "gauss_hermite": orders,
            "refine": [s.to_dict() for _, s in specs],
            "load_average_at_start": load,
        },
        seconds=time.perf_counter() - t_all,
    )
    write_csv(
        out / "alpha_c_refine.csv",
        rows,
        cols,
        comment=f"dotattn {prov['dotattn_version']} "
        f"commit {prov['git_commit']} {prov['created_utc']}; nodes: per rule (refined: per each of the 8 rules)",
    )
    write_json(out / "alpha_c_refine.json", {"rows": rows, **prov})
    print(f"wrote {out / 'alpha_c_refine.csv'}")


if __name__ == "__main__":
    main()
