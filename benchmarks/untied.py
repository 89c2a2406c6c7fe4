"""Untied student (docs/untied.md): cost of a fixed point against the tied one, and alpha_c(omega) of both.

``--cost``: one fixed point per informed branch at alpha = 2, omega = 0.3, tied and untied on Gauss-Hermite
rules of (nearly) the same number of nodes (4-D order 8 / 6-D order 4: 4096 each; 4-D order 15 / 6-D order 6:
50625 / 46656), CPU seconds of this process after a warm-up run (numba compilation), iterations.

``--alpha-c``: the crossing alpha_c of the positional and semantic branches' training losses (the package's
branch following and Brent root, tolerance 1e-4) on the alpha grid 0.4, 0.6, ..., 4 at the given omegas,
for the students and Gauss-Hermite orders given; the tied student also at ridge 2 lambda (the untied model
restricted to Q = K), on its default rule.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from dotattn.core.io import provenance, write_json
from dotattn.positional_semantic.branch import follow_branches
from dotattn.positional_semantic.catalogue import QuadratureSpec, initialisations
from dotattn.positional_semantic.phase_diagram import _critical_alpha
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import gauss_hermite
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate

RESULTS = Path(__file__).parent / "results"
COST_RULES = ((8, 4), (15, 6))  # (tied order in 4-D, untied order in 6-D)
ALPHAS = [round(a, 4) for a in np.arange(0.4, 4.001, 0.2)]


def cost() -> list[dict]:
    rows = []
    for tied_order, untied_order in COST_RULES:
        for problem, order in ((Problem(), tied_order), (Problem(student="untied"), untied_order)):
            rule = gauss_hermite(problem.gaussian_dim, order)
            for name, init in initialisations(problem, 0)[:2]:
                iterate(problem, 2.0, init, rule)  # warm-up: compilation, caches
                t = time.process_time()
                fp = iterate(problem, 2.0, init, rule)
                row = {
                    "student": problem.student,
                    "order": order,
                    "nodes": rule.size,
                    "branch": name,
                    "status": fp.status,
                    "iterations": fp.iterations,
                    "cpu_seconds": round(time.process_time() - t, 4),
                    "train_loss": fp.train_loss,
                }
                rows.append(row)
                print(row, flush=True)
    return rows


def alpha_c(cases: list[tuple[str, int, float]], omegas: list[float]) -> list[dict]:
    """alpha_c at every omega for every (student, Gauss-Hermite order, ridge)."""
    rows = []
    for student, order, ridge in cases:
        for omega in omegas:
            problem = Problem(omega=omega, student=student, ridge=ridge)
            t = time.process_time()
            branches = follow_branches(problem, ALPHAS, QuadratureSpec("gauss-hermite", order, None), SolverOptions())
            row = {
                "student": student,
                "ridge": ridge,
                "order": order,
                "nodes": order**problem.gaussian_dim,
                "omega": omega,
                "alpha_c": _critical_alpha(branches, ALPHAS, 1e-4),
                "cpu_seconds": round(time.process_time() - t, 1),
            }
            rows.append(row)
            print(row, flush=True)
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cost", action="store_true", help="the cost table")
    ap.add_argument("--alpha-c", action="store_true", help="alpha_c(omega) tied and untied")
    ap.add_argument("--omegas", default="0.1,0.2,0.3")
    ap.add_argument("--untied-orders", default="4,5,6", help="Gauss-Hermite orders (6-D) for the untied student")
    ap.add_argument("--tied-orders", default="12", help="Gauss-Hermite orders (4-D) for the tied student")
    ap.add_argument("--out", default=str(RESULTS / "untied.json"))
    args = ap.parse_args(argv)
    params = {
        "cost": args.cost,
        "alpha_c": args.alpha_c,
        "omegas": args.omegas,
        "untied_orders": args.untied_orders,
        "tied_orders": args.tied_orders,
    }
    started = provenance(params)
    t0 = time.perf_counter()
    payload: dict = {**started}
    if args.cost:
        payload["cost"] = cost()
    if args.alpha_c:
        lam = Problem().ridge
        cases = (
            [("untied", int(o), lam) for o in args.untied_orders.split(",")]
            + [("tied", int(o), lam) for o in args.tied_orders.split(",")]
            + [("tied", 12, 2 * lam)]
        )
        payload["alpha_c"] = alpha_c(cases, [float(w) for w in args.omegas.split(",")])
    payload.update(seconds=round(time.perf_counter() - t0, 3), load_average=list(os.getloadavg()))
    write_json(args.out, payload)
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
