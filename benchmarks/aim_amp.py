"""Time and memory of one GAMP-RIE run at d = 100 and 200: softmax, ρ = 0.5, T = 2,
α = 0.15 (below perfect recovery), damping 0.5, a fixed number of iterations (tol = 1e-12 so that
every d runs the same count), one core.

Per d: CPU and wall seconds (data generation apart), seconds per iteration, the peak of Python heap
allocations during the run (tracemalloc: numpy arrays included) against the size of the data (the
tokens, n T d floats) and against the n × d × d tensor a naive implementation would build.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/aim_amp.py --out benchmarks/results/aim_amp.json
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from dotattn.aim.algo_study import StudySpec, _theory
from dotattn.aim.amp import AMPConfig, run_amp
from dotattn.aim.model import make_data
from dotattn.core.io import provenance, write_json


def one(d: int, iterations: int, alpha: float = 0.15, rho: float = 0.5) -> dict:
    spec = StudySpec(d=d, rho=rho, T=2, alphas=(alpha,))
    output, denoise, _, mmse_of, _ = _theory(spec)
    data = make_data(d, rho, 2, alpha, seed=0)
    config = AMPConfig(max_iter=iterations, tol=1e-12, damping=0.5)
    tracemalloc.start()
    c0, w0 = time.process_time(), time.perf_counter()
    res = run_amp(data, output, denoise, config)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "d": d,
        "n": data.n,
        "alpha": alpha,
        "rho": rho,
        "T": 2,
        "iterations": res.iterations,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_s_per_iteration": cpu / res.iterations,
        "peak_heap_MiB": peak / 2**20,
        "data_MiB": data.X.nbytes / 2**20,
        "naive_n_d_d_tensor_MiB": 8 * data.n * d * d / 2**20,
        "mse": res.mse,
        "mmse_se": mmse_of(alpha),
        "status": res.status,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", default="100,200")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for d in (int(x) for x in args.d.split(",")):
        r = one(d, args.iterations)
        rows.append(r)
        print(
            f"d={d}: n={r['n']}, {r['iterations']} iterations, {r['cpu_s']:.1f} s CPU ({r['wall_s']:.1f} s wall, "
            f"{r['cpu_s_per_iteration'] * 1e3:.0f} ms/iteration), peak heap {r['peak_heap_MiB']:.0f} MiB "
            f"(tokens {r['data_MiB']:.0f} MiB; an n x d x d tensor would be {r['naive_n_d_d_tensor_MiB']:.0f} MiB); "
            f"mse {r['mse']:.4f} vs SE {r['mmse_se']:.4f}",
            flush=True,
        )
    if args.out:
        write_json(args.out, {"rows": rows, "provenance": provenance(vars(args))})


if __name__ == "__main__":
    main()
