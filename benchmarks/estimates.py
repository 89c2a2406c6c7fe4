"""Start-line estimates against measured CPU time, one small case per long command (the target: within 1.5x).

Each case runs the library call a command runs, in this process on one thread (``paths sample``: the command
itself, whose sampler runs in a process of its own), and compares its CPU time with the CPU seconds the command's
start line multiplies out before the load and the cores stretch them to a wall time: the typical estimate (what
the line says first) and, where units may stop short of their budget, the bound (``at most ...``). Printed per
command: ``typical / measured`` and whether it is within a factor 1.5, and ``bound / measured``. CPU time, not wall
time, so the comparison depends little on the load of a shared machine; the load (the one-minute average and the
threads runnable) is recorded before and after. Output: a table on stdout and ``benchmarks/results/estimates.json``
(``--out``).

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/estimates.py [--out FILE] [--only train-erm,aim gd,...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FACTOR = 1.5
"""The target bound on estimate / measured (either way)."""


def cpu(fn: Callable[[], Any]) -> float:
    """CPU seconds of ``fn``: this process's and those of the child processes it waits for (a study may run its
    cells in processes of their own)."""
    t0 = time.process_time()
    children = children_cpu(fn)
    return time.process_time() - t0 + children


def children_cpu(fn: Callable[[], Any]) -> float:
    """CPU seconds (user + system) of the child processes ``fn`` runs and waits for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    fn()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def load_now() -> dict[str, float]:
    """The one-minute load average and the threads runnable now besides this one."""
    from dotattn.core.progress import present_load

    return {"one_minute": os.getloadavg()[0], "runnable": present_load()}


def case_train_erm() -> tuple[float, float, float, str]:
    import torch

    from dotattn.erm.config import ErmConfig
    from dotattn.erm.experiment import ERM_COST, config_units, erm_unit_seconds, run_config_cached
    from dotattn.positional_semantic.problem import Problem

    torch.set_num_threads(1)
    problem = Problem(omega=0.3)
    config = ErmConfig(d=400, alphas=(0.5, 1.0, 1.5, 2.0), seeds=2, steps=300, lr=1.5, test_samples=2000)
    units = config_units(config)
    bound = sum(erm_unit_seconds(problem, u) for u in units)
    measured = cpu(lambda: run_config_cached(problem, config))
    return bound * ERM_COST.typical, bound, measured, "d = 400, 4 alpha x 2 inits x 2 seeds, 300 steps, lr 1.5"


def case_erm_restarts() -> tuple[float, float, float, str]:
    import torch

    from dotattn.erm.restarts import RestartConfig, restart_seconds, run_restarts
    from dotattn.positional_semantic.problem import Problem

    torch.set_num_threads(1)
    problem = Problem(omega=0.3, teacher_rank=2)
    config = RestartConfig(d=400, alpha=2.0, seeds=(0, 1), starts=("random",) * 6 + ("semantic",) * 6)
    per, typical = restart_seconds(problem, config)
    bound = per * len(config.seeds) * len(config.starts)
    measured = cpu(lambda: run_restarts(problem, config))
    return bound * typical, bound, measured, "d = 400, alpha = 2, 2 seeds x 12 restarts"


def case_phase_diagram() -> tuple[float, float, float, str]:
    from dotattn.positional_semantic.catalogue import default_quadrature
    from dotattn.positional_semantic.phase_diagram import (
        DEFAULT_ALPHAS,
        PHASE_DIAGRAM_COST,
        SweepSettings,
        estimate_seconds,
        run_phase_diagram,
    )
    from dotattn.positional_semantic.problem import Problem
    from dotattn.positional_semantic.refine import RefineSpec

    problem = Problem(omega=0.3)
    settings = SweepSettings(default_quadrature(problem), refine=RefineSpec())
    bound = estimate_seconds(problem, DEFAULT_ALPHAS, settings, 1, 1)
    measured = cpu(lambda: run_phase_diagram(problem, [0.3], DEFAULT_ALPHAS, settings=settings))
    return bound * PHASE_DIAGRAM_COST.typical, bound, measured, "the default omega = 0.3 column with refinement"


def case_aim_amp() -> tuple[float, float, float, str]:
    from dotattn.aim.algo_study import AMP_COST, StudySpec, run_amp_study, run_seconds
    from dotattn.aim.amp import AMPConfig

    spec = StudySpec(d=40, rho=0.5, T=2, alphas=(0.1, 0.2), seeds=2)
    config = AMPConfig(max_iter=100)
    bound = run_seconds(spec, config, "amp") * len(spec.alphas) * spec.seeds
    measured = cpu(lambda: run_amp_study(spec, config))
    return bound * AMP_COST.typical, bound, measured, "d = 40, 2 alpha x 2 seeds, max_iter 100"


def case_aim_gd() -> tuple[float, float, float, str]:
    import torch

    from dotattn.aim.algo_study import GD_COST, GD_START, StudySpec, run_gd_study, run_seconds
    from dotattn.aim.gd import GDConfig

    torch.set_num_threads(1)
    spec = StudySpec(d=30, rho=0.5, T=2, alphas=(0.05, 0.2), seeds=2)
    config = GDConfig(steps=300, inits=4)
    per_runs = run_seconds(spec, config, "gd") * len(spec.alphas) * spec.seeds
    measured = cpu(lambda: run_gd_study(spec, config))  # the first GD study in this process: GD_START once
    return (
        per_runs * GD_COST.typical + GD_START,
        per_runs + GD_START,
        measured,
        "d = 30, 2 alpha x 2 seeds x 4 inits, 300 steps",
    )


def case_erm_alpha_c() -> tuple[float, float, float, str]:
    import torch

    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, run_study, study_bound_seconds, study_seconds

    torch.set_num_threads(1)
    problem = Problem(omega=0.3)
    config = AlphaCConfig(omegas=(0.3,), ds=(100,), alphas=(0.8, 1.2, 1.6), seeds=4)
    typical, bound = study_seconds(problem, config, False), study_bound_seconds(problem, config, False)
    measured = cpu(lambda: run_study(problem, config, workers=1, threads=1, theory=False))
    return typical, bound, measured, "omega = 0.3, d = 100, 3 alpha x 4 seeds, no theory"


def case_solve() -> tuple[float, float, float, str]:
    from dotattn.positional_semantic.catalogue import QuadratureSpec, default_quadrature, initialisations, solve
    from dotattn.positional_semantic.phase_diagram import SOLVE_COST, start_seconds
    from dotattn.positional_semantic.problem import Problem

    problem = Problem(omega=0.3, rank=2)
    base = default_quadrature(problem)  # as `solve --quad-order 4` builds it: the default kind, order 4
    coarse = base.coarse_order if base.coarse_order is not None and base.coarse_order < 4 else None
    quad = QuadratureSpec(base.kind, 4, coarse)
    starts = len(initialisations(problem, 1, 0))
    bound = starts * start_seconds(problem, quad.rule(problem.gaussian_dim).size)
    measured = cpu(lambda: solve(problem, 2.0, quadrature=quad, n_random=1))
    return bound * SOLVE_COST.typical, bound, measured, f"rank 2, alpha = 2, Gauss-Hermite order 4, {starts} starts"


def case_paths_sample() -> tuple[float, float, float, str]:
    from dotattn.paths.sampler import NUTS_COST, SAMPLER_START, SamplerConfig, chain_seconds

    chains, warmup, draws, P = 2, 150, 150, 40
    config = SamplerConfig(chains=chains, warmup=warmup, draws=draws)
    bound = chains * chain_seconds(config, P, 10.0) + SAMPLER_START
    with tempfile.TemporaryDirectory() as tmp:
        command = [str(Path(sys.executable).with_name("dotattn")), "paths", "sample", "--task", "markov", "--N", "10"]
        command += ["--P", str(P), "--chains", str(chains), "--warmup", str(warmup), "--draws", str(draws)]
        measured = children_cpu(lambda: subprocess.run([*command, "--quiet", "--out", f"{tmp}/s"], check=True))
    typical = (bound - SAMPLER_START) * NUTS_COST.typical + SAMPLER_START
    return typical, bound, measured, f"the command: N = 10, P = {P}, {chains} chains x {warmup} + {draws}"


CASES = {
    "train-erm": case_train_erm,
    "erm-restarts": case_erm_restarts,
    "phase-diagram": case_phase_diagram,
    "aim amp": case_aim_amp,
    "aim gd": case_aim_gd,
    "erm-alpha-c": case_erm_alpha_c,
    "solve": case_solve,
    "paths sample": case_paths_sample,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "estimates.json"))
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(CASES)
    load_before, rows = load_now(), []
    for name in names:
        typical, bound, measured, what = CASES[name]()
        ratio = typical / measured if measured > 0 else float("nan")
        ok = 1 / FACTOR <= ratio <= FACTOR
        rows.append({"command": name, "case": what, "estimate_cpu_s": typical, "bound_cpu_s": bound,
                     "measured_cpu_s": measured, "ratio": ratio, "bound_ratio": bound / measured if measured > 0
                     else float("nan"), "within_1.5x": ok})  # fmt: skip
        print(f"{name:<14} {what:<52} estimate {typical:7.2f} CPU-s (bound {bound:7.2f})  measured {measured:7.2f}  "
              f"estimate/measured {ratio:5.2f}  {'ok' if ok else 'OUTSIDE 1.5x'}", flush=True)  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from dotattn.core.io import provenance

    prov = provenance({"cases": names})  # the commit (and whether the tree was clean), version, machine
    load = {"before": load_before, "after": load_now(), "nice": os.nice(0)}
    Path(args.out).write_text(json.dumps({"cases": rows, "load": load, **prov}, indent=2) + "\n")


if __name__ == "__main__":
    main()
