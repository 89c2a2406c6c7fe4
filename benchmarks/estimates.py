"""Start-line estimates against measured CPU time, one small case per command (the target: within 1.5x).

Each case runs the library call a command runs, in this process on one thread, and compares its CPU time
with the CPU seconds the command's start line multiplies out (before the load and the cores stretch it to a
wall time): ``estimate / measured`` per case, and whether it is within a factor 1.5. CPU time, not wall time,
so the comparison does not depend on the load of a shared machine. Output: a table on stdout and
``benchmarks/results/estimates.json`` (``--out``).

    OMP_NUM_THREADS=1 python benchmarks/estimates.py [--out FILE] [--only train-erm,phase-diagram,...]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FACTOR = 1.5
"""The issue's bound on estimate / measured (either way)."""


def cpu(fn: Callable[[], Any]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def case_train_erm() -> tuple[float, float, str]:
    import torch

    from dotattn.erm.config import ErmConfig
    from dotattn.erm.experiment import config_units, erm_unit_seconds, run_config_cached
    from dotattn.positional_semantic.problem import Problem

    torch.set_num_threads(1)
    problem = Problem(omega=0.3)
    config = ErmConfig(d=400, alphas=(0.5, 1.0, 1.5, 2.0), seeds=2, steps=300, lr=0.15, tol=0.0, test_samples=2000)
    units = config_units(config)
    estimate = sum(erm_unit_seconds(problem, u) for u in units)
    return estimate, cpu(lambda: run_config_cached(problem, config)), "d = 400, 4 alpha x 2 inits x 2 seeds, 300 steps"


def case_erm_restarts() -> tuple[float, float, str]:
    import torch

    from dotattn.erm.restarts import RestartConfig, restart_seconds, run_restarts
    from dotattn.positional_semantic.problem import Problem

    torch.set_num_threads(1)
    problem = Problem(omega=0.3, teacher_rank=2)
    config = RestartConfig(d=400, alpha=2.0, seeds=(0, 1), starts=("random",) * 6 + ("semantic",) * 6)
    estimate = restart_seconds(problem, config) * len(config.seeds) * len(config.starts)
    return estimate, cpu(lambda: run_restarts(problem, config)), "d = 400, alpha = 2, 2 seeds x 12 restarts"


def case_phase_diagram() -> tuple[float, float, str]:
    from dotattn.positional_semantic.catalogue import default_quadrature
    from dotattn.positional_semantic.phase_diagram import (
        DEFAULT_ALPHAS,
        SweepSettings,
        estimate_seconds,
        run_phase_diagram,
    )
    from dotattn.positional_semantic.problem import Problem
    from dotattn.positional_semantic.refine import RefineSpec

    problem = Problem(omega=0.3)
    settings = SweepSettings(default_quadrature(problem), refine=RefineSpec())
    estimate = estimate_seconds(problem, DEFAULT_ALPHAS, settings, 1, 1)
    measured = cpu(lambda: run_phase_diagram(problem, [0.3], DEFAULT_ALPHAS, settings=settings))
    return estimate, measured, "the default omega = 0.3 column with refinement"


def case_aim_amp() -> tuple[float, float, str]:
    from dotattn.aim.algo_study import StudySpec, run_amp_study, run_seconds
    from dotattn.aim.amp import AMPConfig

    spec = StudySpec(d=40, rho=0.5, T=2, alphas=(0.1, 0.2), seeds=2)
    config = AMPConfig(max_iter=100)
    estimate = run_seconds(spec, config, "amp") * len(spec.alphas) * spec.seeds
    return estimate, cpu(lambda: run_amp_study(spec, config)), "d = 40, 2 alpha x 2 seeds, max_iter 100"


CASES = {
    "train-erm": case_train_erm,
    "erm-restarts": case_erm_restarts,
    "phase-diagram": case_phase_diagram,
    "aim amp": case_aim_amp,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "estimates.json"))
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(CASES)
    rows = []
    for name in names:
        estimate, measured, what = CASES[name]()
        ratio = estimate / measured if measured > 0 else float("nan")
        ok = 1 / FACTOR <= ratio <= FACTOR
        rows.append({"command": name, "case": what, "estimate_cpu_s": estimate, "measured_cpu_s": measured,
                     "ratio": ratio, "within_1.5x": ok})  # fmt: skip
        print(f"{name:<14} {what:<48} estimate {estimate:8.2f} CPU-s  measured {measured:8.2f}  "
              f"ratio {ratio:5.2f}  {'ok' if ok else 'OUTSIDE 1.5x'}", flush=True)  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from dotattn.core.io import provenance

    prov = provenance({"cases": names})  # the commit (and whether the tree was clean), version, machine
    Path(args.out).write_text(json.dumps({"cases": rows, "load_average": load, **prov}, indent=2) + "\n")


if __name__ == "__main__":
    main()
