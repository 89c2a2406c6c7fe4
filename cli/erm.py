"""``dotattn train-erm``: finite-size ERM of low-rank attention (tied or untied) (a thin shell over :func:`dotattn.erm.run_erm`)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import click
import numpy as np

from dotattn.core.optimizers import DEFAULT_LR, OPTIMIZERS
from dotattn.core.validation import check_int
from dotattn.erm.config import DEVICE_CHOICES, INIT_CHOICES, ErmConfig

from .main import cli
from .options import (
    correlation_option,
    output_folder,
    parse_grid,
    problem_from_options,
    problem_options,
    student_option,
    threads_per_worker,
    value_options,
    value_rank_of,
)


@cli.command("train-erm")
@click.option(
    "--d",
    "d",
    type=int,
    default=1000,
    show_default=True,
    help="Token dimension d (>= 2, >= L; the runs must fit in memory).",
)
@click.option(
    "--alpha",
    "alpha",
    multiple=True,
    default=("0.25:2:8",),
    show_default=True,
    help="Sample ratios alpha = n/d: values, comma lists or start:stop:count (repeatable).",
)
@click.option("--omega", type=float, default=0.3, show_default=True, help="Positional fraction omega in [0, 1].")
@problem_options
@student_option
@correlation_option
@value_options
@click.option(
    "--init",
    "init",
    type=str,
    default="both",
    show_default=True,
    help=f"Initialisations: {', '.join(INIT_CHOICES)} (both = semantic + positional).",
)
@click.option("--seeds", type=int, default=4, show_default=True, help="Number of seeds, in [1, 10000].")
@click.option("--first-seed", type=int, default=0, show_default=True, help="First seed (seeds are consecutive).")
@click.option(
    "--optimizer", type=str, default="gd", show_default=True, help=f"Optimiser: {', '.join(OPTIMIZERS)} (full-batch)."
)
@click.option("--steps", type=int, default=5000, show_default=True, help="Step budget per run, in [1, 1e8].")
@click.option(
    "--lr",
    type=float,
    default=None,
    help="Learning rate (> 0); default "
    + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_LR.items())
    + ". GD step: Q <- Q - lr grad_Q R(Q), i.e. lr on R/d w.r.t. Q/sqrt(d).",
)
@click.option(
    "--tol",
    type=float,
    default=None,
    help="A run stops when its relative change of R per step (gd, adam; default 1e-9) or its relative "
    "stationarity |grad R|/(|grad D| + lambda |Q|) (lbfgs, batched-lbfgs; default 1e-7) is <= tol (>= 0).",
)
@click.option(
    "--test-samples", type=int, default=10_000, show_default=True, help="Fresh samples for the test error, in [1, 1e7]."
)
@click.option("--dtype", type=str, default="float64", show_default=True, help="float64 or float32.")
@click.option(
    "--device",
    type=str,
    default="auto",
    show_default=True,
    help=f"Torch device: {DEVICE_CHOICES} (auto: CUDA when available).",
)
@click.option(
    "--threads",
    type=int,
    default=0,
    show_default=True,
    help="CPU threads for torch, in [0, 1024] (0: the cores not already busy, by the load average; at least 1).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    required=True,
    help="Output folder (runs.csv, summary.csv, summary.json).",
)
@click.option("--quiet", is_flag=True, help="No progress bar and no summary table.")
def train_erm(
    d: int,
    alpha: tuple[str, ...],
    omega: float,
    L: int,
    rank: int,
    teacher_rank: int,
    sigma: float,
    ridge: float,
    A: str | None,
    positional_gram: str | None,
    student: str,
    token_correlation: float,
    value: str,
    value_rank: int | None,
    init: str,
    seeds: int,
    first_seed: int,
    optimizer: str,
    steps: int,
    lr: float | None,
    tol: float | None,
    test_samples: int,
    dtype: str,
    device: str,
    threads: int,
    out: str,
    quiet: bool,
) -> None:
    """Train low-rank attention (tied or untied) by ERM on n = alpha*d samples, for all (alpha, init, seed) at once.

    Writes OUT/runs.csv (one row per run), OUT/summary.csv (mean and std over seeds per alpha x init,
    plus 'selected' rows: the informed initialisation of lower training loss) and OUT/summary.json
    (provenance, column descriptions, summary and runs).
    """
    problem = problem_from_options(
        omega, L, rank, teacher_rank, sigma, ridge, A, positional_gram, student, token_correlation
    )
    check_int("threads (0: the free cores)", threads, 0, 1024)
    config = ErmConfig(
        d=d,
        alphas=tuple(parse_grid("alpha", alpha)),
        inits=init,
        seeds=seeds,
        first_seed=first_seed,
        optimizer=optimizer,
        steps=steps,
        lr=lr,
        tol=tol,
        test_samples=test_samples,
        dtype=dtype,
        device=device,
        value=value,
        value_rank=value_rank_of(value, value_rank),
    )
    config.check(problem)
    import torch  # only now: invalid input above is rejected without importing torch

    from dotattn.core.runner import Interrupted
    from dotattn.erm.experiment import ERM_COST, erm_unit_seconds, resolve_device
    from dotattn.theory_vs_erm.output import write_erm

    resolve_device(config.device)  # is the requested device there? (before any folder is made)

    threads = threads_per_worker(threads, 1)  # never more threads than free cores by default
    torch.set_num_threads(threads)
    from dotattn.core.progress import CommandProgress
    from dotattn.erm.experiment import cached_units, config_units, run_config_cached

    ctx = click.get_current_context()
    made_for = {"problem": problem.to_dict(), "erm": config.to_dict()}  # a finished run of other settings refused
    with output_folder(
        out, "train-erm", "erm", made_for
    ) as folder:  # removed again if still empty when the run is interrupted
        units = config_units(config)
        cache = Path(folder) / "cache"
        progress = CommandProgress(
            "train-erm",
            len(units),
            "seeds" if len(units) > 1 else "batches",
            cached=cached_units(problem, config, cache),
            quiet=quiet,
        )
        per_unit = erm_unit_seconds(problem, units[0])
        progress.start(
            f"{len(config.alphas)} alpha x {len(config.inits)} inits x {len(config.seeds)} seeds = "
            f"{len(config.alphas) * len(config.inits) * len(config.seeds)} runs at d = {d}, at most {config.steps} "
            f"{config.optimizer} steps each, one batch per seed",
            progress.estimate_line(per_unit, ERM_COST, 1, threads),
            str(folder),
        )
        try:
            result = run_config_cached(problem, config, cache, on_unit=lambda cached: progress.unit_done())
        except Interrupted as err:
            raise Interrupted(
                err.signum,
                err.detail,
                f"train-erm: interrupted ({signal.Signals(err.signum).name}); {progress.kept(str(cache))}"
                + (", run the same command again to resume" if progress.done else ""),
            ) from None
        finally:
            progress.close()
        summary = write_erm(folder, result, {"command": "train-erm", "cli": dict(ctx.params)})
    if not quiet:
        _echo_table(summary)
        click.echo(
            f"wrote {Path(folder) / 'runs.csv'}, summary.csv, summary.json  ({result.seconds:.1f} s, {result.device})"
        )


def _number(v: Any) -> str:
    """A table cell: a number to 5 significant digits, a matrix as its Frobenius norm, '-' if missing."""
    if v is None or v == "":
        return "-"
    if isinstance(v, (list, tuple)):
        v = float(np.linalg.norm(np.asarray(v, dtype=float)))
    return "-" if v != v else f"{v:.5g}"


def _echo_table(summary: list) -> None:
    """The summary records as a table (mean over seeds; matrices as their Frobenius norm), then a
    warning on stderr if runs stopped on the step budget or diverged."""
    cols = [
        ("|mu_1|", "m_norm"),
        ("|theta|/s2", "theta_over_sigma2"),
        ("train_loss", "train_loss"),
        ("eps_g", "test_error"),
        ("eps_lin", "linear_test_error"),
    ]
    click.echo(
        f"{'alpha':>7s}  {'init':<10s}  " + "  ".join(f"{h:>11s}" for h, _ in cols) + f"  {'converged':>9s}  branches"
    )
    for rec in summary:
        click.echo(
            f"{rec.alpha:>7g}  {rec.init:<10s}  "
            + "  ".join(f"{_number(rec.mean[k]):>11s}" for _, k in cols)
            + f"  {f'{rec.converged}/{rec.runs}':>9s}  {rec.branches}"
        )
    runs = [r for r in summary if r.init != "selected"]
    total, stopped, stalled, diverged = (
        sum(r.runs for r in runs),
        sum(r.not_converged for r in runs),
        sum(r.stalled for r in runs),
        sum(r.diverged for r in runs),
    )
    if stopped or stalled or diverged:
        click.echo(
            f"warning: {stopped + stalled + diverged} of {total} runs did not converge ({stopped} spent the step "
            f"budget --steps without reaching --tol, {stalled} stalled (the line search found no lower risk), "
            f"{diverged} diverged); their numbers are where they stopped, not necessarily minima: raise "
            f"--steps, or use --optimizer batched-lbfgs (runs.csv: column status)",
            err=True,
        )
