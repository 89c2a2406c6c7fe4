"""``dotattn erm-restarts``: many optimiser restarts on the same data and teacher (a thin shell over
:func:`dotattn.erm.restarts.run_restarts`), optionally with the theory evaluated at each run's
overlaps (:func:`dotattn.theory_vs_erm.diagnostics.diagnose_restarts`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from dotattn.core.io import provenance, write_csv, write_json, write_manifest
from dotattn.core.validation import ParameterError, check_int
from dotattn.erm.config import DEVICE_CHOICES, TEACHERS
from dotattn.erm.restart_records import (
    PAIR_COLUMNS,
    POOLED_SEED,
    RESTART_COLUMNS,
    RESTART_SUMMARY_COLUMNS,
    RESTART_SUMMARY_DOCS,
    SAME_MINIMUM,
    summarise_restarts,
)
from dotattn.positional_semantic.problem import require_variant

from .main import cli
from .options import correlation_option, output_folder, problem_from_options, problem_options, threads_per_worker

MAX_QUAD_ORDER = 16


@cli.command("erm-restarts")
@click.option("--d", "d", type=int, default=500, show_default=True, help="Token dimension d (>= 2, >= L).")
@click.option("--alpha", type=float, default=2.0, show_default=True, help="Sample ratio alpha = n/d, in (0, 1e4].")
@click.option("--omega", type=float, default=0.3, show_default=True, help="Positional fraction omega in [0, 1].")
@problem_options
@correlation_option
@click.option(
    "--seeds", type=int, default=2, show_default=True, help="Number of data seeds (teacher + data), in [1, 10000]."
)
@click.option("--first-seed", type=int, default=0, show_default=True, help="First seed (seeds are consecutive), >= 0.")
@click.option("--random", "n_random", type=int, default=8, show_default=True, help="Random restarts per seed, >= 0.")
@click.option(
    "--semantic",
    "n_semantic",
    type=int,
    default=8,
    show_default=True,
    help="Semantic restarts per seed (Q* column + noise), >= 0.",
)
@click.option(
    "--positional",
    "n_positional",
    type=int,
    default=0,
    show_default=True,
    help="Positional restarts per seed (positional direction + noise), >= 0.",
)
@click.option(
    "--sector",
    type=click.Choice(["free", "semantic"]),
    default="free",
    show_default=True,
    help="free, or semantic: the student restricted to mu = 0 (Q orthogonal to the embeddings).",
)
@click.option(
    "--teacher",
    type=click.Choice(list(TEACHERS)),
    default="gaussian",
    show_default=True,
    help="Teacher Q*: i.i.d. N(0,1) entries or exactly orthonormal columns (Q*^T Q*/d = I).",
)
@click.option("--steps", type=int, default=20000, show_default=True, help="batched-lbfgs step budget per run, >= 1.")
@click.option(
    "--tol", type=float, default=1e-7, show_default=True, help="Relative stationarity at which a run stops, > 0."
)
@click.option("--lr", type=float, default=1.0, show_default=True, help="Initial inverse-Hessian scale of L-BFGS, > 0.")
@click.option(
    "--random-scale", type=float, default=0.1, show_default=True, help="Entry std of the random starts, >= 0."
)
@click.option(
    "--informed-noise",
    type=float,
    default=0.3,
    show_default=True,
    help="Entry std of the noise added to the informed starts, >= 0.",
)
@click.option("--test-samples", type=int, default=10_000, show_default=True, help="Fresh test samples, in [2, 1e7].")
@click.option(
    "--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True, help="Torch dtype."
)
@click.option(
    "--device",
    type=str,
    default="auto",
    show_default=True,
    help=f"Torch device: {DEVICE_CHOICES} (auto: CUDA when available).",
)
@click.option(
    "--threads", type=int, default=0, show_default=True, help="CPU threads for torch (0: default), in [0, 1024]."
)
@click.option(
    "--diagnose/--no-diagnose",
    default=False,
    show_default=True,
    help="Evaluate the theory's eps_g and e_t at each converged run's overlaps (diagnostics.csv).",
)
@click.option(
    "--quad-order",
    type=int,
    default=0,
    show_default=True,
    help=f"Gauss-Hermite order per axis for --diagnose (0: the solver's default), in [0, {MAX_QUAD_ORDER}].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    required=True,
    help="Output folder (runs.csv, pairs.csv, summary.csv, summary.json[, diagnostics.csv]).",
)
@click.option("--quiet", is_flag=True, help="No progress and no table.")
def erm_restarts(
    d: int,
    alpha: float,
    omega: float,
    L: int,
    rank: int,
    teacher_rank: int,
    sigma: float,
    ridge: float,
    A: str | None,
    positional_gram: str | None,
    token_correlation: float,
    seeds: int,
    first_seed: int,
    n_random: int,
    n_semantic: int,
    n_positional: int,
    sector: str,
    teacher: str,
    steps: int,
    tol: float,
    lr: float,
    random_scale: float,
    informed_noise: float,
    test_samples: int,
    dtype: str,
    device: str,
    threads: int,
    diagnose: bool,
    quad_order: int,
    out: str,
    quiet: bool,
) -> None:
    """Many optimiser restarts on the same data and teacher: minima, their spread and mutual distances.

    Per data seed, random and informed starts are converged with batched-lbfgs; writes per run e_t,
    eps_g and overlaps (runs.csv), D_ab and overlaps of pairs on one branch (pairs.csv) and per
    (seed, branch) spreads (summary.csv, summary.json with provenance).
    """
    problem = problem_from_options(
        omega, L, rank, teacher_rank, sigma, ridge, A, positional_gram, token_correlation=token_correlation
    )
    check_int("threads (0: the free cores)", threads, 0, 1024)
    check_int("seeds", seeds, 1, 10_000)
    check_int("first_seed", first_seed, 0)
    for name, v in (("random", n_random), ("semantic", n_semantic), ("positional", n_positional)):
        check_int(name, v, 0, 4096)
    check_int("quad_order (0: default)", quad_order, 0, MAX_QUAD_ORDER)
    if n_random + n_semantic + n_positional < 1:
        raise ParameterError("restarts must be >= 1: give --random, --semantic or --positional >= 1")
    from dotattn.erm.restarts import RestartConfig  # torch-free validation first

    config = RestartConfig(
        d=d,
        alpha=alpha,
        seeds=tuple(range(first_seed, first_seed + seeds)),
        starts=("random",) * n_random + ("semantic",) * n_semantic + ("positional",) * n_positional,
        sector=sector,
        steps=steps,
        tol=tol,
        lr=lr,
        random_scale=random_scale,
        informed_noise=informed_noise,
        test_samples=test_samples,
        teacher=teacher,
        dtype=dtype,
        device=device,
    )
    config.check(problem)
    order = None
    if diagnose:
        if problem.rank != 1:
            raise ParameterError(f"--diagnose needs rank = 1 (e_t at fixed overlaps), got rank = {problem.rank}")
        require_variant(problem, "--diagnose (the theory at fixed overlaps)")
        from dotattn.positional_semantic.catalogue import default_quadrature

        order = quad_order or default_quadrature(problem).order
    import torch

    from dotattn.erm.experiment import resolve_device

    resolve_device(config.device)
    threads = threads_per_worker(threads, 1)  # never more threads than free cores by default
    torch.set_num_threads(threads)
    with output_folder(
        out, "erm-restarts", "restarts"
    ) as folder:  # removed again if still empty when the run is interrupted
        _run_and_write(problem, config, folder, threads, order, quiet)


def _run_and_write(problem, config, folder: Path, threads: int, order: int | None, quiet: bool) -> None:
    """Train, measure, write runs.csv, pairs.csv, summary.csv, summary.json (and diagnostics.csv with
    the theory at each run's overlaps on Gauss-Hermite ``order``, unless None); print the table."""
    from dotattn.core.progress import CommandProgress
    from dotattn.erm.restarts import RESTART_COST, restart_seconds, run_restarts

    diagnose = order is not None
    quadrature: dict[str, Any] | None = None  # the rule of the diagnostics, when asked for
    runs_total = len(config.seeds) * len(config.starts)
    bound, typical = restart_seconds(problem, config)
    progress = CommandProgress("erm-restarts", runs_total, "runs", quiet=quiet)
    progress.start(
        f"{len(config.seeds)} seeds x {len(config.starts)} restarts at d = {config.d}, alpha = {config.alpha:g} "
        f"(batched-lbfgs, at most {config.steps} steps, all in one batch: nothing is kept if stopped)",
        progress.estimate_line(bound, RESTART_COST, 1, threads, typical=typical),
        str(folder),
    )
    try:
        result = run_restarts(problem, config, finished=progress.unit_done)
    finally:
        progress.close()
    runs, pairs = list(result.runs), list(result.pairs)
    summary = summarise_restarts(runs, pairs)
    diag_rows, diag_seconds = None, 0.0
    if order is not None:
        from dotattn.positional_semantic.quadrature import make_rule
        from dotattn.theory_vs_erm.diagnostics import DIAGNOSTIC_COLUMNS, diagnose_restarts

        t0 = time.perf_counter()
        rule = make_rule(problem.gaussian_dim, "gauss-hermite", order)
        diag = diagnose_restarts(problem, runs, rule)
        diag_seconds = time.perf_counter() - t0
        diag_rows = [r.to_row() for r in diag]
        quadrature = rule.describe()
    ctx = click.get_current_context()
    params = {
        **result.parameters(),
        "command": "erm-restarts",
        "cli": dict(ctx.params),
        "same_minimum_distance": SAME_MINIMUM,
        "diagnose": ({"quadrature": quadrature, "seconds": round(diag_seconds, 3)} if diagnose else None),
    }
    prov = provenance(params, seconds=result.seconds + diag_seconds)
    import json

    comment = "dotattn erm-restarts; provenance: " + json.dumps(prov, separators=(",", ":"))
    run_rows = [r.to_row() for r in runs]
    write_csv(folder / "runs.csv", run_rows, RESTART_COLUMNS, comment=comment)
    write_csv(folder / "pairs.csv", [p.to_row() for p in pairs], PAIR_COLUMNS, comment=comment)
    summary_rows = [s.to_row() for s in summary]
    write_csv(folder / "summary.csv", summary_rows, RESTART_SUMMARY_COLUMNS, comment=comment)
    payload = {"provenance": prov, "columns": RESTART_SUMMARY_DOCS, "summary": summary_rows, "runs": run_rows}
    if diag_rows is not None:
        write_csv(folder / "diagnostics.csv", diag_rows, DIAGNOSTIC_COLUMNS, comment=comment)
        payload["diagnostics"] = diag_rows
    write_json(folder / "summary.json", payload)
    write_manifest(
        folder,
        [
            f
            for f in ("runs.csv", "pairs.csv", "summary.csv", "diagnostics.csv", "summary.json")
            if (folder / f).is_file()
        ],
        params,
        provenance_record=prov,
    )
    if not quiet:
        click.echo(
            f"{'seed':>5s} {'branch':>13s} {'conv':>5s} {'minima':>6s} {'e_t mean':>10s} {'e_t std':>9s} "
            f"{'eps_g mean':>10s} {'D mean':>9s} {'D max':>9s}"
        )
        for s in summary:
            seed = "all" if s.seed == POOLED_SEED else str(s.seed)
            click.echo(
                f"{seed:>5s} {s.branch:>13s} {s.converged:5d} {s.minima:6d} {s.train_loss_mean:10.6g} "
                f"{s.train_loss_std:9.3g} {s.test_error_mean:10.5g} {s.distance_mean:9.3g} {s.distance_max:9.3g}"
            )
        click.echo(
            f"(seed 'all': the seeds pooled per branch, written as seed = {POOLED_SEED} in summary.csv; "
            "D: distance D_ab between two restarts of one seed on that branch)"
        )
        click.echo(
            f"wrote {Path(folder) / 'summary.json'} ({result.seconds:.1f} s training"
            + (f", {diag_seconds:.1f} s diagnostics)" if diagnose else ")")
        )
