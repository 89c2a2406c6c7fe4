"""Benchmark: full-batch GD against the per-run batched L-BFGS, to the same final loss.

Problem: the toy model at ω = 0.3, d = 1000, α = 1.25, both informed starts, ``--seeds`` seeds
(one teacher and data set per seed, shared by the two starts), float64, all runs batched as in
:func:`dotattn.erm.run_erm`.

1. Reference: ``batched-lbfgs`` to relative stationarity 1e-8 (the float64 floor of the Armijo test is a few 1e-9); ``R*`` per run.
2. ``batched-lbfgs`` at the study's tolerance (``--tol``, default 1e-7): time, batched gradient
   evaluations, and the largest ``|R − R*|/R*`` over runs.
3. GD (``Q ← Q − lr ∇R``, ``--lr``, default 1.5: the largest stable step found in
   results/erm) until every run has ``|R − R*| ≤ 1e-9 R*`` (checked every ``--check`` steps):
   time and gradient evaluations (one per step).

Target: batched-lbfgs at least 10× faster than GD. Usage::

    python benchmarks/erm_optimizer.py                  # d = 1000 (a few minutes on 2 cores)
    python benchmarks/erm_optimizer.py --d 250 --seeds 2
"""

from __future__ import annotations

import argparse
import time

import torch

from dotattn import Problem
from dotattn.core.training import relative_stationarity, train
from dotattn.erm.data import STREAM_TRAIN, make_dataset, positional_embeddings, teacher_weights
from dotattn.erm.experiment import INFORMED, _risk_function, initial_weights
from dotattn.erm.models import sample_stats


def setup(d: int, alpha: float, seeds: int, omega: float, teacher: str):
    """(risk, W0, ridge): the batched risk of ``seeds × 1 α × 2 inits`` runs and their starts."""
    pb = Problem(omega=omega)
    n = int(round(alpha * d))
    P = positional_embeddings(pb.G, d)
    G = P @ P.T
    Qs = torch.stack([teacher_weights(d, 1, s, kind=teacher) for s in range(seeds)])
    parts = [make_dataset(pb, Qs[s], P, n, s, STREAM_TRAIN) for s in range(seeds)]
    X = torch.stack([p.X for p in parts])
    T, Cpz, Czz = (torch.stack([getattr(p, k) for p in parts]) for k in ("T", "Cpz", "Czz"))
    Cxx, Cyx, cyy = sample_stats(T, G, Cpz, Czz)
    pf = lambda M: M.permute(2, 3, 0, 1).contiguous()
    risk = _risk_function(X, pf(Cxx), pf(Cyx), cyy, [n], pb.ridge)
    W0 = (
        torch.stack([torch.stack([initial_weights(k, Qs[s], P, 1, s) for k in INFORMED]) for s in range(seeds)])
        .transpose(-1, -2)[:, None]
        .contiguous()
    )  # (S, 1, 2, 1, d)
    return risk, W0, pb.ridge


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=1.25)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--teacher", default="orthonormal")
    ap.add_argument("--tol", type=float, default=1e-7)
    ap.add_argument("--lr", type=float, default=1.5)
    ap.add_argument("--check", type=int, default=50)
    ap.add_argument("--max-steps", type=int, default=200_000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    risk, W0, ridge = setup(args.d, args.alpha, args.seeds, args.omega, args.teacher)
    runs = W0.shape[0] * W0.shape[2]

    ref = train(risk, W0, optimizer="batched-lbfgs", steps=3000, tol=1e-8, lr=1.0, ridge=ridge)
    R_star = ref.loss

    t0 = time.perf_counter()
    lb = train(risk, W0, optimizer="batched-lbfgs", steps=5000, tol=args.tol, lr=1.0, ridge=ridge)
    t_lb = time.perf_counter() - t0
    gap_lb = float(((lb.loss - R_star).abs() / R_star).max())

    Q, steps, t_gd = W0.clone(), 0, 0.0
    gap_gd = float("inf")
    while steps < args.max_steps:
        t0 = time.perf_counter()
        out = train(risk, Q, optimizer="gd", steps=args.check, lr=args.lr, tol=0.0)
        t_gd += time.perf_counter() - t0
        Q, steps = out.Q, steps + args.check
        gap_gd = float(((out.loss - R_star).abs() / R_star).max())
        if gap_gd <= 1e-9:
            break
    gd_stat = float(relative_stationarity(*_grad(risk, Q), ridge).max())

    print(
        f"ERM optimiser benchmark: d={args.d}, alpha={args.alpha}, omega={args.omega}, {runs} runs "
        f"({args.seeds} seeds x 2 informed starts, {args.teacher} teacher), float64, {args.threads} thread(s)"
    )
    print(
        f"reference: batched-lbfgs to stationarity 1e-8 in {int(ref.steps.max())} iterations; "
        f"statuses {sorted(set(ref.status_names()))}"
    )
    print(f"{'method':<28s}{'time [s]':>10s}{'grad evals':>12s}{'max |R-R*|/R*':>16s}{'max stationarity':>18s}")
    print(
        f"{'batched-lbfgs tol ' + format(args.tol, 'g'):<28s}{t_lb:10.2f}{lb.evaluations:12d}{gap_lb:16.2e}"
        f"{float(lb.stationarity.max()):18.2e}"
    )
    print(
        f"{'gd lr ' + format(args.lr, 'g'):<28s}{t_gd:10.2f}{steps:12d}{gap_gd:16.2e}{gd_stat:18.2e}"
        + ("" if gap_gd <= 1e-9 else "  (did not reach 1e-9)")
    )
    print(f"speed-up (time) {t_gd / t_lb:.1f}x, (gradient evaluations) {steps / lb.evaluations:.1f}x")


def _grad(risk, Q):
    Qg = Q.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(risk(Qg).sum(), Qg)
    return g, Q


if __name__ == "__main__":
    main()
