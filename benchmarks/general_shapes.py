"""Time of one fixed point for the general shapes of the validation against ERM (issue 5).

Cases (ω = 0.3, σ = 0.5, λ = 0.01):

* L = 2, r = 2, r_t = 1 (toy A and G), branches positional, semantic, mixed;
* L = 3, r = 1, r_t = 1, A = [[.55,.15,.3],[.15,.55,.3],[.3,.3,.4]], G = [[1,-1,0],[-1,1,0],[0,0,0]];
* L = 2, r = 1, r_t = 2 (toy A and G);
* and the toy model L = 2, r = r_t = 1 for reference (its speed must not change).

Each fixed point is the public path ``solve(problem, alpha, inits=[(branch, informed init)],
n_random=0)`` on the rule given by ``--rule`` (default: the package's default rule for the shape,
i.e. Gauss-Hermite 6 per axis after a coarse Gauss-Hermite 4 pass in 6 dimensions, 12 after 6 in
4 dimensions), tol 1e-8. The Gaussian integrals are L(r + r_t) = 6-dimensional for the three
general cases.

Usage::

    python benchmarks/general_shapes.py                    # default rules (several minutes)
    python benchmarks/general_shapes.py --gh-order 4       # Gauss-Hermite 4, no coarse pass (quick)

Writes ``benchmarks/results/general_shapes.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from dotattn.catalogue import QuadratureSpec, default_quadrature, initialisations, solve
from dotattn.io import provenance, write_json
from dotattn.problem import Problem

RESULTS = Path(__file__).resolve().parent / "results"

L3_A = ((0.55, 0.15, 0.3), (0.15, 0.55, 0.3), (0.3, 0.3, 0.4))
L3_G = ((1.0, -1.0, 0.0), (-1.0, 1.0, 0.0), (0.0, 0.0, 0.0))
CASES = {
    "L2_r2_rt1": (Problem(L=2, rank=2, teacher_rank=1, omega=0.3), 2.0, ("positional", "semantic", "mixed")),
    "L3_r1_rt1": (Problem(L=3, omega=0.3, positional_attention=L3_A, positional_gram=L3_G), 1.25,
                  ("positional", "semantic")),
    "L2_r1_rt2": (Problem(L=2, rank=1, teacher_rank=2, omega=0.3), 2.0, ("positional", "semantic")),
    "L2_r1_rt1 (toy)": (Problem(omega=0.3), 2.0, ("positional", "semantic")),
}


def run_case(problem: Problem, alpha: float, branches: tuple[str, ...], quad: QuadratureSpec) -> list[dict]:
    inits = dict(initialisations(problem, 0))
    out = []
    for b in branches:
        t = time.perf_counter()
        cat = solve(problem, alpha, quadrature=quad, n_random=0, inits=[(b, inits[b])])
        wall = time.perf_counter() - t
        e = cat.fixed_points[0]
        o = e.overlaps
        s2 = problem.sigma**2
        out.append({"branch": b, "label": e.branch, "status": e.status, "iterations": e.result.iterations,
                    "seconds": wall, "nodes": cat.quadrature["nodes"], "quadrature": quad.to_dict(),
                    "train_loss": e.train_loss, "test_error": e.test_error,
                    "m": float(np.linalg.norm(o.mu[0])), "theta_over_sigma2": float(np.linalg.norm(o.theta)) / s2,
                    "q_trace_over_sigma2": float(np.trace(o.q)) / s2})
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gh-order", type=int, default=None,
                    help="Gauss-Hermite order for every case, no coarse pass (default: the package default rule)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    ap.add_argument("--out", default=str(RESULTS / "general_shapes.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = {}
    for name in args.cases.split(","):
        problem, alpha, branches = CASES[name]
        quad = (default_quadrature(problem) if args.gh_order is None
                else QuadratureSpec("gauss-hermite", args.gh_order, None))
        results[name] = {"alpha": alpha, "problem": problem.to_dict(), "fixed_points": run_case(problem, alpha, branches, quad)}
        for r in results[name]["fixed_points"]:
            print(f"{name:<16} alpha={alpha:<5g} {r['branch']:<11} -> {r['label']:<11} {r['status']:<10} "
                  f"{r['iterations']:>4d} it {r['seconds']:>7.1f} s  ({r['nodes']:,} nodes)  e_t={r['train_loss']:.6f} "
                  f"eps_g={r['test_error']:.6f}  m={r['m']:.4f} |theta|/s2={r['theta_over_sigma2']:.4f} "
                  f"Tr q/s2={r['q_trace_over_sigma2']:.4f}", flush=True)
    payload = {"cases": results, **provenance({"gh_order": args.gh_order, "cases": args.cases},
                                              seconds=time.perf_counter() - t0),
               "load_average": list(os.getloadavg())}
    write_json(args.out, payload)
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
