"""Collapsed NUTS with 16 paths at P = 600 on one trained network: per-gradient time, projection, and the
full run with the ESS stopping rule when the projection fits the time aimed for.

The network is a finished image study's (``--study``, default results/paths/omniglot: its gd_network.npz and
the data settings its summary.json records); the training set is the study's P theory episodes, their path
kernels factored from the trained queries and keys exactly as ``dotattn paths images`` builds them
(``path_data_sets``; all P episodes, so P = the study's P), the temperature the one the study chose on
validation at N = ``--N`` unless ``--temperature`` is given (N = 10: 𝒯 = 3; N = 100: 𝒯 = 1 for
results/paths/omniglot); ``--N`` 0 is the study's smallest width, as its sampling check.

1. Per-gradient time: the collapsed log density and its gradient for all chains at once (``--chains``
   points drawn from the prior) in this process, the median of ``--repeats`` calls after one compiling call.
2. Pilot: ``--pilot`` warm-up iterations and ``--pilot-draws`` draws of NUTS (compilation included in the
   warm-up), seconds per warm-up iteration and per draw iteration of all chains (vectorised chains move in
   step: an iteration costs the longest of their trajectories).
3. Projection: the warm-up at the pilot's warm-up rate plus ``--every`` draws at its draw rate, the least the
   full run can take (the stopping rule checks first after ``--every`` draws). The full run starts only with ``--full`` and a
   projection ≤ ``--budget`` seconds; otherwise the JSON records why not.
4. Full run: ``run_collapsed`` with StopRule(``--ess``, ``--rhat``, ``--every``), at most ``--draws`` draws per
   chain, the chains shared by ``--processes`` processes (one per core: 2 on the 2-core machine); then the
   saddle point at the same N and temperature, the relative error of the saddle point against the posterior
   mean ‖U* − E[U]‖_F / ‖E[U]‖_F beside the size Monte-Carlo noise alone would give it,
   √(Σ MCSE²) / ‖E[U]‖_F, the largest |z| = |E[U] − U*| / MCSE over the entries (the three matrices are
   kept), and the test
   accuracy of the sampled posterior-mean predictor against the saddle point's (the study's sampling check,
   on the study's test episodes).

Every timing has the load average (/proc/loadavg) read beside it. Run from a clean commit:

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/paths_collapsed_p600.py --processes 2 \\
        --omniglot ../shared/data/omniglot --out /tmp/paths_collapsed_p600.json [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.io import provenance, write_json


def load_average() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def library_versions() -> dict[str, str]:
    """Versions of the libraries the sampler's numbers depend on (the draws change with JAX and NumPyro)."""
    from importlib.metadata import version

    return {name: version(name) for name in ("numpy", "scipy", "jax", "jaxlib", "numpyro")}


def study_problem(study: Path, omniglot: str, N: int = 0) -> tuple[Any, Any, float, int]:
    """(sample PathData on all P theory episodes, ImageStudyConfig, the temperature the study chose at width
    ``N``, that width; N = 0: the smallest width) of a finished image study."""
    from dotattn.paths.images_gd import GDConfig
    from dotattn.paths.images_study import ImageStudyConfig, load_image_data, path_data_sets

    summary = json.loads((study / "summary.json").read_text())
    p = dict(summary["provenance"]["parameters"])
    gd = GDConfig(**p.pop("gd"))
    p.pop("command", None)
    p.update(omniglot=omniglot, widths=tuple(p["widths"]), temperatures=tuple(p["temperatures"]), sample_P=p["P"])
    config = ImageStudyConfig(**p, gd=gd)
    width = N or int(config.widths[0])
    if f"{width:g}" not in summary["per_N"]:
        raise SystemExit(f"--N must be one of the study's widths {[int(w) for w in config.widths]}, got {width}")
    with np.load(study / "gd_network.npz", allow_pickle=False) as z:
        weights = {k[2:]: np.array(z[k]) for k in z.files if k.startswith("w_")}
    data = load_image_data(config)
    sets = path_data_sets(data, weights, gd.layers, gd.heads, P_sample=config.P, sample_factored=True)
    return sets["sample"], config, float(summary["per_N"][f"{width:g}"]["temperature"]), width


def gradient_seconds(d: Any, model: Any, chains: int, repeats: int) -> tuple[float, list[float]]:
    """Median seconds of one value + gradient of the collapsed log density for ``chains`` points at once."""
    import jax
    import jax.numpy as jnp

    from dotattn.paths.collapsed import log_density_fn, prior_draw

    layout, logd = log_density_fn(d.C_train, d.y_train, model)
    rng = np.random.default_rng(0)
    z = jnp.asarray(np.stack([prior_draw(layout, rng) for _ in range(chains)]))
    f = jax.jit(jax.vmap(jax.value_and_grad(logd)))
    jax.block_until_ready(f(z))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(z))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", default="results/paths/omniglot")
    ap.add_argument("--omniglot", default="../shared/data/omniglot")
    ap.add_argument("--N", type=int, default=0, help="width (0: the study's smallest width, as its sampling check)")
    ap.add_argument(
        "--temperature", type=float, default=0.0, help="𝒯 (0: the one the study chose on validation at this N)"
    )
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--draws", type=int, default=2000, help="most draws per chain")
    ap.add_argument("--ess", type=float, default=400.0)
    ap.add_argument("--rhat", type=float, default=1.01)
    ap.add_argument("--every", type=int, default=100, help="draws per chain between two checks of the rule")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--pilot", type=int, default=200, help="warm-up iterations of the pilot (0: none)")
    ap.add_argument("--pilot-draws", type=int, default=50)
    ap.add_argument("--pooled-mass", action="store_true", help="run_collapsed(pooled_mass=True)")
    ap.add_argument(
        "--processes", type=int, default=1, help="run_collapsed(processes=...): processes sharing the chains"
    )
    ap.add_argument("--budget", type=float, default=600.0, help="seconds aimed for")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from dotattn.paths.collapsed import StopRule, collapsed_layout, run_collapsed
    from dotattn.paths.images_study import _evaluate
    from dotattn.paths.sampler import SamplerConfig, sampled_evaluation
    from dotattn.paths.theory import PathsModel, minimise_action

    rule = StopRule(ess_min=a.ess, rhat_max=a.rhat, every=a.every)
    config = SamplerConfig(chains=a.chains, warmup=a.warmup, draws=a.draws)
    t_load = time.perf_counter()
    d, study, T_chosen, N = study_problem(Path(a.study), a.omniglot, a.N)
    T = a.temperature or T_chosen
    heads = (study.gd.heads,) * study.gd.layers
    model = PathsModel(N=N, temperature=T, sigma2=study.sigma2, heads=heads)
    P = len(d.y_train)
    out: dict[str, Any] = {
        "N": N,
        "P": P,
        "paths": model.n_paths,
        "N0": int(d.C_train.xi_a.shape[2]),
        "temperature": T,
        "temperature_chosen_on_validation": T_chosen,
        "chains": a.chains,
        "processes": a.processes,
        "coordinates": collapsed_layout(heads, N).n_params,
        "stop_rule": {"ess_min": rule.ess_min, "rhat_max": rule.rhat_max, "every": rule.every},
        "threads": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")},
        "nice": os.nice(0),
        "libraries": library_versions(),
        "load_seconds": time.perf_counter() - t_load,
    }
    print(f"N={N} P={P} T={T:g} heads={heads}; data and kernels {out['load_seconds']:.0f} s", flush=True)
    load0 = load_average()
    per_grad, times = gradient_seconds(d, model, a.chains, a.repeats)
    out["gradient"] = {
        "seconds_all_chains": per_grad,
        "seconds_each_call": times,
        "load_average_before": load0,
        "load_average_after": load_average(),
    }
    print(f"value + gradient, {a.chains} chains: {1e3 * per_grad:.1f} ms (load {load0})", flush=True)
    if a.pilot:
        load0 = load_average()
        marks: list[tuple[float, str]] = []
        t0 = time.perf_counter()
        r = run_collapsed(
            d.C_train,
            d.y_train,
            model,
            SamplerConfig(chains=a.chains, warmup=a.pilot, draws=a.pilot_draws),
            progress=lambda m: marks.append((time.perf_counter() - t0, m)),
            pooled_mass=a.pooled_mass,
            processes=a.processes,
        )
        end_warm = next(t for t, m in marks if f"{a.pilot}/{a.pilot} warm-up and" in m)
        per_warm = end_warm / a.pilot
        per_draw = (r.seconds - end_warm) / a.pilot_draws
        projected = a.warmup * per_warm + rule.every * per_draw
        out["pilot"] = {
            "warmup": a.pilot,
            "draws": a.pilot_draws,
            "seconds": r.seconds,
            "seconds_per_warmup_iteration": per_warm,
            "seconds_per_draw_iteration": per_draw,
            "gradients_per_draw_iteration": per_draw / per_grad,
            "mean_leapfrog_steps_per_chain": r.mean_steps,
            "step_sizes": list(r.step_sizes),
            "divergences": r.divergences,
            "load_average_before": load0,
            "load_average_after": load_average(),
        }
        out["projected_seconds_least"] = projected
        out["projected_seconds_at_cap"] = a.warmup * per_warm + a.draws * per_draw
        print(
            f"pilot ({a.pilot} + {a.pilot_draws}): {per_warm:.2f} s per warm-up iteration, {per_draw:.2f} s per draw "
            f"(~{per_draw / per_grad:.0f} gradients, {r.mean_steps:.1f} leapfrog steps per chain); projected at least "
            f"{projected:.0f} s for {a.warmup} + {rule.every} iterations",
            flush=True,
        )
        if projected > a.budget:
            out["full_run"] = f"not launched: the projection {projected:.0f} s exceeds the {a.budget:.0f} s aimed for"
    if a.full and "full_run" not in out:
        load0 = load_average()
        res = run_collapsed(
            d.C_train,
            d.y_train,
            model,
            config,
            stop=rule,
            progress=lambda m: print(f"   {m}", flush=True),
            pooled_mass=a.pooled_mass,
            processes=a.processes,
        )
        out.update(
            wall_seconds=res.seconds,
            r_hat=res.rhat_max,
            ess=res.ess_min,
            draws=int(res.U.shape[1]),
            warmup=a.warmup,
            divergences=res.divergences,
            mean_leapfrog_steps=res.mean_steps,
            load_average_before=load0,
            load_average_after=load_average(),
        )
        th = minimise_action(d.C_train, d.y_train, model, tol=study.theory_tol)
        z = (res.U_mean - th.U) / res.U_mcse
        ev, acc_err, _ = sampled_evaluation(res, d, model)
        norm = float(np.linalg.norm(res.U_mean))
        out["saddle"] = {
            "status": th.status,
            "U_relative_error": float(np.linalg.norm(th.U - res.U_mean)) / norm,
            "U_relative_mcse": float(np.sqrt(np.sum(res.U_mcse**2))) / norm,
            "U_max_abs_z": float(np.nanmax(np.abs(z))),
            "accuracy_sampled": ev.accuracy,
            "accuracy_sampled_error": acc_err,
            "accuracy_saddle": _evaluate(th.U, d, model)["accuracy"],
            "test_episodes": len(d.y_test),
            "U_mean": res.U_mean.tolist(),
            "U_mcse": res.U_mcse.tolist(),
            "U_saddle": np.asarray(th.U).tolist(),
        }
        print(json.dumps({k: v for k, v in out["saddle"].items() if not isinstance(v, list)}), flush=True)
    elif not a.full:
        out.setdefault("full_run", "not requested (--full)")
    write_json(a.out, {"provenance": provenance(vars(a)), **out})


if __name__ == "__main__":
    main()
