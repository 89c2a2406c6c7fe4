"""Time and memory of one gradient-descent point of the AIM (all initialisations of one data set trained
as one batched float64 tensor program): softmax, ρ = 0.5, T = 2, ᾱ = 0.45 (α = 0.1125, inside partial
recovery), Adam lr 0.1, 16 initialisations, one core.

Per d: CPU and wall seconds of the training (data generation apart), CPU seconds per step and the CPU
time of the full 1000-step protocol extrapolated linearly from the steps run (the cost per step is
constant: same tensors every step), the peak resident memory of the process after the run (torch's
baseline included; d runs in increasing order, so each peak is that d's), and the n × d × d tensor a
naive implementation would build.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/aim_gd.py --d 100,200 --steps 1000,20 --out benchmarks/results/aim_gd.json
"""

from __future__ import annotations

import argparse
import resource
import time

from dotattn.aim.gd import GDConfig, gd_bytes, run_gd
from dotattn.aim.model import make_data
from dotattn.core.io import provenance, write_json

PROTOCOL_STEPS = 1000


def one(d: int, steps: int, inits: int, alpha_bar: float = 0.45, rho: float = 0.5, T: int = 2) -> dict:
    import torch

    torch.set_num_threads(1)
    alpha = alpha_bar / (T * T + T - 2)
    data = make_data(d, rho, T, alpha, seed=0)
    c0, w0 = time.process_time(), time.perf_counter()
    res = run_gd(data, GDConfig(steps=steps, inits=inits, lr=0.1))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "d": d,
        "n": data.n,
        "T": T,
        "alpha": alpha,
        "alpha_bar": alpha_bar,
        "rho": rho,
        "inits": inits,
        "steps": steps,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_s_per_step": cpu / steps,
        "cpu_s_for_1000_steps": cpu / steps * PROTOCOL_STEPS,
        "peak_rss_MiB": peak,
        "program_MiB_estimate": gd_bytes(data.n, T, d, data.r, inits) / 2**20,
        "naive_n_d_d_tensor_MiB": 8 * data.n * d * d / 2**20,
        "mse_mean": sum(r.mse for r in res.runs) / len(res.runs),
        "mse_averaged": res.mse_averaged,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", default="100,200")
    ap.add_argument("--steps", default="1000,20", help="steps per d (same order as --d)")
    ap.add_argument("--inits", type=int, default=16)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    ds = [int(x) for x in args.d.split(",")]
    steps = [int(x) for x in args.steps.split(",")]
    rows = []
    for d, s in zip(ds, steps, strict=True):
        r = one(d, s, args.inits)
        rows.append(r)
        print(
            f"d={d}: n={r['n']}, {s} steps x {args.inits} initialisations: {r['cpu_s']:.1f} s CPU "
            f"({r['wall_s']:.1f} s wall), {r['cpu_s_per_step'] * 1e3:.0f} ms/step, 1000 steps = "
            f"{r['cpu_s_for_1000_steps'] / 60:.1f} CPU-min; peak RSS {r['peak_rss_MiB']:.0f} MiB (program "
            f"~{r['program_MiB_estimate']:.0f} MiB; an n x d x d tensor would be {r['naive_n_d_d_tensor_MiB']:.0f} "
            f"MiB); mse {r['mse_mean']:.4f}, averaged {r['mse_averaged']:.4f}",
            flush=True,
        )
    if args.out:
        write_json(args.out, {"rows": rows, "provenance": provenance(vars(args))})


if __name__ == "__main__":
    main()
