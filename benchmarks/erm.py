"""Benchmark of the batched ERM: 2 initialisations x 8 alphas (0.25:2:8) x 4 seeds at d = 1000, 5000 GD steps.

Usage::

    python benchmarks/erm.py                       # full size (target: <= 15 min on a 2-core CPU)
    python benchmarks/erm.py --d 200 --steps 500   # quick check
    python benchmarks/erm.py --threads 1           # when other jobs share the cores

Prints the wall time, split into setup (data generation and the first chunk of steps), the
optimisation (time per step, all runs together), and evaluation (10,000 test samples per seed),
plus a one-line summary of the selected branch at the largest alpha.
"""

from __future__ import annotations

import argparse
import time

import torch
from dotattn.cli.options import parse_grid

from dotattn import Problem
from dotattn.erm import run_erm


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--alpha", default="0.25:2:8")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--optimizer", default="gd")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--test-samples", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    stamps: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    res = run_erm(
        Problem(omega=args.omega),
        d=args.d,
        alphas=parse_grid("alpha", [args.alpha]),
        inits="both",
        seeds=args.seeds,
        optimizer=args.optimizer,
        steps=args.steps,
        test_samples=args.test_samples,
        dtype=args.dtype,
        device=args.device,
        progress=lambda k: stamps.append((time.perf_counter(), k)),
    )
    wall = time.perf_counter() - t0
    steps_done = sum(k for _, k in stamps)
    runs = len(res.runs)
    if len(stamps) > 1:
        per_step = (stamps[-1][0] - stamps[0][0]) / (steps_done - stamps[0][1])
    else:
        per_step = (stamps[-1][0] - t0) / steps_done
    print(
        f"dotattn ERM benchmark: d={args.d}, {len(res.config.alphas)} alphas x 2 inits x {args.seeds} seeds "
        f"= {runs} runs, {args.optimizer}, {steps_done} steps, {args.dtype}, device {res.device}, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"wall time            {wall:9.1f} s")
    print(f"setup + first chunk  {stamps[0][0] - t0:9.1f} s")
    print(f"per step (all runs)  {1e3 * per_step:9.2f} ms   ({1e3 * per_step / runs:.3f} ms per run-step)")
    print(f"evaluation           {wall - (stamps[-1][0] - t0):9.1f} s   ({args.test_samples} test samples per seed)")
    print(
        "status               "
        + ", ".join(f"{s}: {sum(r.status == s for r in res.runs)}" for s in ("converged", "not_converged", "diverged"))
    )
    top = res.select(alpha=max(res.config.alphas), init="selected")
    print(
        f"alpha={max(res.config.alphas):g} selected: " + ", ".join(f"{r.init} (eps_g {r.test_error:.5f})" for r in top)
    )


if __name__ == "__main__":
    main()
