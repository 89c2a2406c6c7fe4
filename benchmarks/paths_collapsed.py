"""Collapsed NUTS on the attention-paths posterior: wall time, ESS and R-hat per width.

Markov task (P = 100, 4 paths; target ≤ 60 s per N with 4 chains and ESS ≥ 400 on every entry of U)
and, with ``--paths16``, 16 paths as H = (4, 4) on random path kernels at P = 600 (target ≤ 10 min per N;
the chain has 126 coordinates at N = 10). The wall time includes compiling the NUTS kernel.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/paths_collapsed.py --N 10,100,1000
    OPENBLAS_NUM_THREADS=1 python benchmarks/paths_collapsed.py --paths16 --N 10 --out benchmarks/results/paths16.json
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from dotattn.core.io import provenance, write_json
from dotattn.paths.collapsed import collapsed_layout, run_collapsed
from dotattn.paths.sampler import SamplerConfig
from dotattn.paths.theory import PathsModel


def markov_kernels() -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    from dotattn.paths.data import markov_path_data
    from dotattn.paths.task import MarkovTask

    data = markov_path_data(MarkovTask())
    return data.C_train, data.y_train, data.heads


def random_kernels(P: int, N0: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """16 paths (H = (4, 4)) with correlated random path inputs ξ^π ∈ ℝ^{N0}; labels the sign of a
    random linear function of path 0's input (so the likelihood is informative)."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((P, N0))
    xi = np.stack([base + 0.7 * rng.standard_normal((P, N0)) for _ in range(16)])
    y = np.sign(xi[0] @ rng.standard_normal(N0))
    return np.einsum("api,bqi->abpq", xi, xi, optimize=True) / N0, y, (4, 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", default="10,100,1000")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--paths16", action="store_true")
    ap.add_argument("--P", type=int, default=600, help="training points of the 16-path case")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    C, y, heads = random_kernels(args.P) if args.paths16 else markov_kernels()
    rows = []
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, load {os.getloadavg()[0]:.1f}")
    print(f"{'N':>7} {'dim':>4} {'wall s':>7} {'ESS min':>8} {'R-hat':>7} {'div':>4} {'steps':>6}")
    for N in [int(float(v)) for v in args.N.split(",")]:
        model = PathsModel(N=N, temperature=0.01, heads=heads)
        res = run_collapsed(C, y, model, SamplerConfig(chains=args.chains, warmup=args.warmup, draws=args.draws))
        row = {
            "N": N,
            "dim": collapsed_layout(heads, N).n_params,
            "seconds": res.seconds,
            "ess_min": res.ess_min,
            "rhat_max": res.rhat_max,
            "divergences": res.divergences,
            "mean_leapfrog_steps": res.mean_steps,
            "load_average": os.getloadavg()[0],
        }
        rows.append(row)
        print(
            f"{N:>7} {row['dim']:>4} {res.seconds:>7.1f} {res.ess_min:>8.0f} {res.rhat_max:>7.4f} "
            f"{res.divergences:>4} {res.mean_steps:>6.1f}",
            flush=True,
        )
    if args.out:
        write_json(args.out, {"provenance": provenance(vars(args)), "rows": rows})


if __name__ == "__main__":
    main()
