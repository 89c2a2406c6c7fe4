"""Time the zero-temperature 1RSB solver on the toy model (docs/rsb.md).

One RS fixed point (positional branch, ω = 0.3, α = 1.25, default rule), then one 1RSB fixed point at
y = 100 (the unit a scan is made of) and the whole `solve_rsb` (scan over y and root search), on the
default 1RSB rules (Gauss–Hermite 6 outer × 4 inner). Wall and CPU time, iterations; results with
provenance to benchmarks/results/rsb.json. Run from the repository root.

``--injectivity``: instead, one 1RSB point of the step-loss spherical perceptron (docs/rsb.md section 10,
κ = 0, α = 6.844745, the root y* of Σ(y) in [1.5, 10]) on rules 100 × 50, 400 × 200, 1600 × 800, to
benchmarks/results/rsb_injectivity.json.
"""

from __future__ import annotations

import argparse
import time

from dotattn.core.io import provenance, write_json
from dotattn.positional_semantic.catalogue import QuadratureSpec, solve
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.rsb import (
    AttentionChannel,
    RSBOptions,
    RSBOverlaps,
    StepChannel,
    iterate_rsb,
    solve_rsb,
    spherical_1rsb_root,
)


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


INJECTIVITY_ALPHA = 6.844744744744746
"""Entry 600 of the companion data's 1RSB scan (docs/rsb.md section 10): e_1RSB = 1.0367242061998647."""


def injectivity(out: str) -> None:
    """Time one 1RSB point of the injectivity problem per rule (every fixed-y solve of the root search)."""
    rows = {}
    for orders in ((100, 50), (400, 200), (1600, 800)):
        (y, point), wall, cpu = _timed(
            lambda orders=orders: spherical_1rsb_root(
                INJECTIVITY_ALPHA, StepChannel(0.0), orders, (1.5, 10.0), (0.78, 0.05)
            )
        )
        key = f"{orders[0]}x{orders[1]}"
        rows[key] = {
            "y": y,
            "train_loss": point.train_loss,
            "iterations_at_root": point.iterations,
            "wall_s": wall,
            "cpu_s": cpu,
        }
        print(orders, rows[key])
    write_json(out, {**provenance({"alpha": INJECTIVITY_ALPHA, "kappa": 0.0}), "results": rows})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--alpha", type=float, default=1.25)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--out", default=None, help="default benchmarks/results/rsb.json (rsb_injectivity.json)")
    ap.add_argument("--injectivity", action="store_true", help="time the injectivity problem instead")
    args = ap.parse_args()
    if args.injectivity:
        return injectivity(args.out or "benchmarks/results/rsb_injectivity.json")
    args.out = args.out or "benchmarks/results/rsb.json"
    problem = Problem(omega=args.omega)
    cat = solve(problem, args.alpha, n_random=0, stability=False, quadrature=QuadratureSpec("gauss-hermite", 12, 6))
    rs = next(e.result for e in cat.fixed_points if e.branch == "positional" and e.converged)
    options = RSBOptions()
    outer, inner = options.rules((problem.L, problem.rank, problem.teacher_rank))
    point, w1, c1 = _timed(
        lambda: iterate_rsb(
            100.0,
            args.alpha,
            RSBOverlaps.from_rs(rs.overlaps, options.split),
            outer,
            inner,
            AttentionChannel(problem),
            problem,
            options,
        )
    )
    res, w2, c2 = _timed(lambda: solve_rsb(problem, args.alpha, rs, options))
    rows = {
        "fixed_point_y100": {
            "status": point.status,
            "iterations": point.iterations,
            "wall_s": w1,
            "cpu_s": c1,
            "train_loss": point.train_loss,
            "complexity": point.complexity,
        },
        "solve_rsb": {
            "status": res.status,
            "y": res.y,
            "fixed_points": len(res.scan),
            "iterations": res.iterations,
            "wall_s": w2,
            "cpu_s": c2,
            "train_loss": res.train_loss,
            "small_y_train_loss": res.small_y_train_loss,
            "rs_train_loss": res.rs_train_loss,
        },
        "nodes_per_step": outer.size * inner.size,
    }
    for k, v in rows.items():
        print(k, v)
    write_json(args.out, {**provenance(vars(args)), "results": rows})


if __name__ == "__main__":
    main()
