"""Timing and accuracy of the attention-paths theory solve: the Markov task, P = 100,
4 paths, one core.

For each width N: CPU and wall time of ``minimise_action`` from the GP start (the kernels are computed
once, outside the timing), iterations, the relative stationarity, the independent saddle-point residual
of the U_1 equation, and the relative gradient error against central differences of S at the optimum
(``--fd``). Also the variant with the readout level frozen at its prior value (U_a = σ², i.e. the
readout not renormalised), to show what the nested entropy changes; the sampler decides between them
(docs/attention_paths.md §14).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/paths_theory.py            # N = 10, 30, 50, 100, 300, 500, 1000
    OMP_NUM_THREADS=1 python benchmarks/paths_theory.py --N 10,1000 --out benchmarks/results/paths_theory.json
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import optimize

from dotattn.core.io import provenance, write_json
from dotattn.paths.data import markov_path_data
from dotattn.paths.task import MarkovTask
from dotattn.paths.theory import (
    PathsModel,
    action,
    action_gradient,
    levels_from_theta,
    minimise_action,
    saddle_point_residual,
    theta_from_levels,
)


def frozen_readout(data, model, start) -> np.ndarray:
    """U_1 minimising S with U_a held at σ² (the readout not renormalised), BFGS on the other levels."""
    fixed = np.log(np.sqrt(model.sigma2))

    def f(th):
        return action(levels_from_theta(np.concatenate([th, [fixed]]), model.heads), data.C_train, data.y_train, model)

    r = optimize.minimize(f, theta_from_levels(start)[:-1], method="BFGS", options={"gtol": 1e-10})
    return levels_from_theta(np.concatenate([r.x, [fixed]]), model.heads)[0]


def fd_gradient_error(res, data, model, rng) -> float:
    """max over levels of |FD - analytic| / max(1, |analytic|) along random symmetric directions."""
    grads = action_gradient(res.levels, data.C_train, data.y_train, model)
    worst = 0.0
    for k, U in enumerate(res.levels):
        D = rng.standard_normal(U.shape)
        D = D + D.T
        h = 1e-6 * max(1.0, float(np.max(np.abs(U))))
        up = [V + (h * D if i == k else 0) for i, V in enumerate(res.levels)]
        dn = [V - (h * D if i == k else 0) for i, V in enumerate(res.levels)]
        fd = (action(up, data.C_train, data.y_train, model) - action(dn, data.C_train, data.y_train, model)) / (2 * h)
        an = float(np.sum(grads[k] * D))
        worst = max(worst, abs(fd - an) / max(1.0, abs(an)))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", default="10,30,50,100,300,500,1000")
    ap.add_argument("--out", default="benchmarks/results/paths_theory.json")
    args = ap.parse_args()
    widths = [float(x) for x in args.N.split(",")]
    data = markov_path_data(MarkovTask())
    rng = np.random.default_rng(0)
    rows = []
    print(
        f"{'N':>6s} {'status':>10s} {'iter':>5s} {'cpu s':>7s} {'wall s':>7s} {'stationarity':>12s} "
        f"{'saddle res':>10s} {'fd err':>8s} {'U_good':>8s} {'U_good frozen':>13s}"
    )
    for N in widths:
        model = PathsModel(N=N)
        c0, w0 = time.process_time(), time.perf_counter()
        res = minimise_action(data.C_train, data.y_train, model)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        saddle = saddle_point_residual(res.levels[0], res.levels[1], data.C_train, data.y_train, model)
        fd = fd_gradient_error(res, data, model, rng)
        Uf = frozen_readout(data, model, res.levels)
        rows.append(
            {
                "N": N,
                "status": res.status,
                "iterations": res.iterations,
                "cpu_seconds": cpu,
                "wall_seconds": wall,
                "stationarity": res.stationarity,
                "saddle_residual": saddle,
                "fd_gradient_error": fd,
                "U": res.U,
                "U_frozen_readout": Uf,
                "message": res.message,
            }
        )
        print(
            f"{N:6g} {res.status:>10s} {res.iterations:5d} {cpu:7.2f} {wall:7.2f} {res.stationarity:12.2e} "
            f"{saddle:10.2e} {fd:8.1e} {res.U[0, 0]:8.3f} {Uf[0, 0]:13.3f}"
        )
    write_json(
        args.out, {"provenance": provenance({"script": "benchmarks/paths_theory.py", "N": widths}), "rows": rows}
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
