"""Cost of the one-shot image study (`dotattn paths images`): the theory per width at P training
episodes with 16 paths, and the whole study.

1. Theory: Omniglot tokens (training characters), queries and keys as the trained network starts them
   (W_K = W_Q, entries N(0, 1/N0), G = 16), 16 paths. For each P: the time of one action + gradient
   evaluation with the factored kernels, the peak memory of building them and of one solve, the memory
   the dense (16, 16, P, P) float64 kernels would take, and (``--solve``) the wall time and iterations of
   the saddle point at N = 10 and N = 10000 (temperature 0.01, relative stationarity ``--tol``).
2. Whole study: the timings a finished ``dotattn paths images`` run recorded in its summary.json.
3. ``--sample GD_NETWORK``: collapsed NUTS (``dotattn.paths.collapsed.run_collapsed``) at each P on the
   same training episodes, attention from the queries and keys of a trained network (a study's
   ``gd_network.npz``), at N = ``--sample-N`` and temperature ``--sample-T``: wall time, leapfrog steps
   per iteration, R-hat, ESS, divergences (the 16-path target of docs/benchmarks: ≤ 10 min per N at P = 600).

Run: python benchmarks/paths_images.py --omniglot ../shared/data/omniglot [--P 100,300,600] [--solve]
     [--summary results/paths/omniglot/summary.json]
     [--sample results/paths/omniglot/gd_network.npz --sample-N 10 --sample-T 3 --chains 4 --warmup 500 --draws 1000]
Times depend on the machine's load: say what else ran when quoting them.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc

import numpy as np

from dotattn.paths.collapsed import run_collapsed
from dotattn.paths.images import episode_tokens, make_episodes, read_omniglot, split_characters
from dotattn.paths.images_gd import GDConfig, key_query_matrices
from dotattn.paths.network import FactoredKernels, attention, path_inputs
from dotattn.paths.sampler import SamplerConfig
from dotattn.paths.theory import PathsModel, _theta_objective, gp_order_parameters, minimise_action, theta_from_levels


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--omniglot", default="../shared/data/omniglot")
    ap.add_argument("--P", default="100,300,600")
    ap.add_argument("--solve", action="store_true")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--summary", default=None)
    ap.add_argument("--sample", default=None, metavar="GD_NETWORK_NPZ")
    ap.add_argument("--sample-N", type=float, default=10.0)
    ap.add_argument("--sample-T", type=float, default=1.0)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--draws", type=int, default=1000)
    a = ap.parse_args()
    om = read_omniglot(a.omniglot)
    sp = split_characters(om.n_classes)
    rng = np.random.default_rng(0)
    N0 = om.images.shape[1] ** 2 // 16 + 19
    wq = rng.standard_normal((2, 4, 16, N0)) / np.sqrt(N0)
    Ws = key_query_matrices({"WQ": wq, "WK": wq})
    if a.sample:
        with np.load(a.sample, allow_pickle=False) as z:
            Ws_trained = key_query_matrices({"WQ": z["w_WQ"], "WK": z["w_WK"]})
    print(f"GD network defaults: {GDConfig()}")
    for P in [int(p) for p in a.P.split(",")]:
        ep = make_episodes(om, sp.train, P, np.random.default_rng(1))
        x = episode_tokens(om, ep)
        tracemalloc.start()
        t0 = time.perf_counter()
        xi = path_inputs(x, [np.stack([attention(x, W) for W in layer]) for layer in Ws], "mean")
        C = FactoredKernels(xi, xi)
        t_build = time.perf_counter() - t0
        model = PathsModel(N=10, temperature=0.01, heads=(4, 4))
        theta = theta_from_levels(gp_order_parameters(model))
        t0 = time.perf_counter()
        reps = 3
        for _ in range(reps):
            _theta_objective(theta, C, ep.y, model)
        t_eval = (time.perf_counter() - t0) / reps
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        dense = 16 * 16 * P * P * 8 / 1e6
        print(
            f"P={P}: path inputs + factored kernels {t_build:.2f} s; one action+gradient {t_eval:.3f} s; "
            f"traced peak {peak / 1e6:.0f} MB (dense kernels would be {dense:.0f} MB)",
            flush=True,
        )
        if a.solve:
            for N in (10.0, 1e4):
                r = minimise_action(C, ep.y, PathsModel(N=N, temperature=0.01, heads=(4, 4)), tol=a.tol)
                print(
                    f"   N={N:g}: {r.status}, {r.iterations} iterations, stationarity {r.stationarity:.1e}, "
                    f"{r.seconds:.1f} s",
                    flush=True,
                )
        if a.sample:
            xi = path_inputs(x, [np.stack([attention(x, W) for W in layer]) for layer in Ws_trained], "mean")
            sc = SamplerConfig(chains=a.chains, warmup=a.warmup, draws=a.draws)
            r = run_collapsed(
                FactoredKernels(xi, xi),
                ep.y,
                PathsModel(N=a.sample_N, temperature=a.sample_T, heads=(4, 4)),
                sc,
                progress=lambda m: print(f"   {m}", flush=True),
            )
            print(
                f"   collapsed NUTS N={a.sample_N:g} T={a.sample_T:g}, {a.chains} chains x ({a.warmup} + {a.draws}): "
                f"{r.seconds:.0f} s, {r.mean_steps:.1f} leapfrog steps per iteration, max R-hat {r.rhat_max:.4f}, "
                f"min ESS {r.ess_min:.0f}, {r.divergences} divergences",
                flush=True,
            )
    print(f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if a.summary:
        s = json.load(open(a.summary))
        t = s["timings"]
        n = len(s["provenance"]["parameters"]["widths"]) * len(s["provenance"]["parameters"]["temperatures"])
        print(
            f"study {a.summary}: total {t['total_seconds']:.0f} s; GD {t['gd_seconds']:.0f} s; theory "
            f"{t['theory_seconds']:.0f} s for {n} saddle points ({t['theory_seconds'] / n:.1f} s each) plus the "
            f"GP; sampling check {t.get('sampling_seconds', 0):.0f} s"
        )


if __name__ == "__main__":
    main()
