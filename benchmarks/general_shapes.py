"""Time of one fixed point for the general shapes of the validation against ERM (issues 5, 14).

Cases (ω = 0.3, σ = 0.5, λ = 0.01), each at α = 2 and one other α of ``results/general``:

* L = 2, r = 2, r_t = 1 (toy A and G), branches positional, semantic, mixed; α = 2, 1;
* L = 3, r = 1, r_t = 1, A = [[.55,.15,.3],[.15,.55,.3],[.3,.3,.4]], G = [[1,-1,0],[-1,1,0],[0,0,0]];
  α = 2, 1.25;
* L = 2, r = 1, r_t = 2 (toy A and G); α = 2, 1.5;
* and the toy model L = 2, r = r_t = 1 at α = 2 for reference (its speed must not change).

Each fixed point is the public path ``solve(problem, alpha, inits=[(branch, informed init)],
n_random=0)`` on the package's default rule for the shape (Gauss-Hermite 6 per axis after a
coarse Gauss-Hermite 4 pass in 6 dimensions, 12 after 6 in 4 dimensions), tol 1e-8. Wall and
CPU (process) time are both recorded: on a shared machine the CPU time is the one to compare.
``--symmetry off`` and ``--random-starts N`` switch levers off for before/after measurements;
``--compare FILE`` prints the change of every result against an earlier run of this script.

Usage::

    python benchmarks/general_shapes.py                         # all cases (a few minutes)
    python benchmarks/general_shapes.py --quick                 # Gauss-Hermite 4, no coarse pass, alpha = 2
    python benchmarks/general_shapes.py --cases L2_r2_rt1 --alphas 2 --compare benchmarks/results/general_shapes.json

Writes ``benchmarks/results/general_shapes.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from dotattn.core.io import provenance, write_json
from dotattn.positional_semantic.catalogue import QuadratureSpec, default_quadrature, initialisations, solve
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.state_evolution import SolverOptions

RESULTS = Path(__file__).resolve().parent / "results"

L3_A = ((0.55, 0.15, 0.3), (0.15, 0.55, 0.3), (0.3, 0.3, 0.4))
L3_G = ((1.0, -1.0, 0.0), (-1.0, 1.0, 0.0), (0.0, 0.0, 0.0))
CASES = {
    "L2_r2_rt1": (Problem(L=2, rank=2, teacher_rank=1, omega=0.3), (2.0, 1.0), ("positional", "semantic", "mixed")),
    "L3_r1_rt1": (
        Problem(L=3, omega=0.3, positional_attention=L3_A, positional_gram=L3_G),
        (2.0, 1.25),
        ("positional", "semantic"),
    ),
    "L2_r1_rt2": (Problem(L=2, rank=1, teacher_rank=2, omega=0.3), (2.0, 1.5), ("positional", "semantic")),
    "toy": (Problem(omega=0.3), (2.0,), ("positional", "semantic")),
}


def run_case(
    problem: Problem, alpha: float, branches: tuple[str, ...], quad: QuadratureSpec, options: SolverOptions
) -> list[dict]:
    """One fixed point per informed branch: wall and CPU seconds, iterations, e_t, ε_g, overlaps."""
    inits = dict(initialisations(problem, 0))
    out = []
    for b in branches:
        t, c = time.perf_counter(), time.process_time()
        cat = solve(problem, alpha, quadrature=quad, n_random=0, inits=[(b, inits[b])], options=options)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        e = cat.fixed_points[0]
        o = e.overlaps
        s2 = problem.sigma**2
        out.append(
            {
                "alpha": alpha,
                "branch": b,
                "label": e.branch,
                "status": e.status,
                "iterations": e.result.iterations,
                "seconds": wall,
                "cpu_seconds": cpu,
                "nodes": cat.quadrature["nodes"],
                "quadrature": quad.to_dict(),
                "train_loss": e.train_loss,
                "test_error": e.test_error,
                "overlaps": o.vector().tolist(),
                "m": float(np.linalg.norm(o.mu[0])),
                "theta_over_sigma2": float(np.linalg.norm(o.theta)) / s2,
                "q_trace_over_sigma2": float(np.trace(o.q)) / s2,
            }
        )
    return out


def _changes(row: dict, ref: dict) -> str:
    """Largest overlap change and the e_t, ε_g changes against an earlier row."""
    if ref is None:
        return ""
    d_o = float(np.max(np.abs(np.array(row["overlaps"]) - np.array(ref["overlaps"]))))
    return (
        f"  vs ref: {ref['cpu_seconds']:.1f} s CPU, {ref['iterations']} it, {ref['status']}; "
        f"max |Δoverlap| {d_o:.1e}, Δe_t {row['train_loss'] - ref['train_loss']:+.1e}, "
        f"Δε_g {row['test_error'] - ref['test_error']:+.1e}"
    )


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Gauss-Hermite 4, no coarse pass, alpha = 2 only")
    ap.add_argument(
        "--gh-order",
        type=int,
        default=None,
        help="Gauss-Hermite order for every case, no coarse pass (default: the package default rule)",
    )
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    ap.add_argument("--alphas", default=None, help="comma-separated alphas for every case (default: the case's)")
    ap.add_argument("--branches", default=None, help="comma-separated informed branches (default: the case's)")
    ap.add_argument("--symmetry", choices=("on", "off"), default="on", help="token-symmetry fold of the rule")
    ap.add_argument("--random-starts", type=int, default=None, help="random prox starts (default: the package's)")
    ap.add_argument("--compare", default=None, help="an earlier output of this script to compare with")
    ap.add_argument("--out", default=str(RESULTS / "general_shapes.json"))
    args = ap.parse_args(argv)
    gh = 4 if args.quick and args.gh_order is None else args.gh_order
    options = SolverOptions(symmetry=args.symmetry == "on", random_starts=args.random_starts)
    ref = {}
    if args.compare:
        for name, case in json.load(open(args.compare))["cases"].items():
            for r in case["fixed_points"]:
                ref[(name, r["alpha"], r["branch"])] = r
    t0 = time.perf_counter()
    params = {
        "gh_order": gh,
        "cases": args.cases,
        "alphas": args.alphas,
        "branches": args.branches,
        "symmetry": args.symmetry,
        "random_starts": args.random_starts,
    }
    started = provenance(params)  # the commit the code was imported from, not the one at the end
    results = {}
    for name in args.cases.split(","):
        problem, alphas, branches = CASES[name]
        if args.alphas:
            alphas = tuple(float(a) for a in args.alphas.split(","))
        elif args.quick:
            alphas = alphas[:1]
        if args.branches:
            branches = tuple(b for b in args.branches.split(",") if b in branches)
        quad = default_quadrature(problem) if gh is None else QuadratureSpec("gauss-hermite", gh, None)
        rows = []
        for alpha in alphas:
            for r in run_case(problem, alpha, branches, quad, options):
                rows.append(r)
                print(
                    f"{name:<10} alpha={alpha:<5g} {r['branch']:<11} -> {r['label']:<11} {r['status']:<13} "
                    f"{r['iterations']:>4d} it {r['seconds']:>7.1f} s wall {r['cpu_seconds']:>7.1f} s CPU "
                    f"({r['nodes']:,} nodes)  e_t={r['train_loss']:.8f} eps_g={r['test_error']:.8f}"
                    + _changes(r, ref.get((name, alpha, r["branch"]))),
                    flush=True,
                )
        results[name] = {"problem": problem.to_dict(), "fixed_points": rows}
    payload = {
        "cases": results,
        **started,
        "seconds": round(time.perf_counter() - t0, 3),
        "load_average": list(os.getloadavg()),
    }
    write_json(args.out, payload)
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
