"""``dotattn erm-alpha-c``: the ERM crossing α_c per (ω, d), its finite-size scaling, and the theory's α_c.

A thin shell over :func:`dotattn.theory_vs_erm.alpha_c.run_study` and :func:`dotattn.theory_vs_erm.output.write_alpha_c_study`.
Everything is validated (torch-free, except the optimiser name) before any computation and
before the output folder is created.
"""

from __future__ import annotations

import shlex
import signal
import sys
import time

import click

from dotattn.core.io import remove_stale_tmp
from dotattn.core.runner import (
    Interrupted,
    ProgressReporter,
    ProgressState,
    check_workers,
    connect_dask,
)
from dotattn.core.validation import ParameterError
from dotattn.theory_vs_erm.alpha_c import (
    ALPHA_C_COST,
    AlphaCConfig,
    CellRuns,
    run_study,
    study_bound_seconds,
    study_seconds,
)
from dotattn.theory_vs_erm.crossing import FIT_MODELS
from dotattn.theory_vs_erm.output import write_alpha_c_study

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


@cli.command("erm-alpha-c")
@click.option(
    "--omega",
    "omegas",
    multiple=True,
    default=("0.3",),
    show_default=True,
    help="omega values: repeat, comma list or start:stop:count.",
)
@click.option(
    "--d",
    "ds",
    multiple=True,
    default=("250,500,1000",),
    show_default=True,
    help="Dimensions d (integers >= 2): repeat or comma list.",
)
@click.option(
    "--alpha",
    "alphas",
    multiple=True,
    default=("0.5:1.9:15",),
    show_default=True,
    help="alpha grid (>= 2 values): repeat, comma list or start:stop:count.",
)
@problem_options
@student_option
@correlation_option
@value_options
@click.option("--seeds", type=int, default=32, show_default=True, help="Seeds per (omega, d) cell (>= 2).")
@click.option("--first-seed", type=int, default=0, show_default=True, help="First seed (seeds are consecutive).")
@click.option(
    "--optimizer", default="batched-lbfgs", show_default=True, help="Optimiser (batched-lbfgs, gd, adam, lbfgs)."
)
@click.option("--steps", type=int, default=3000, show_default=True, help="Iteration budget per run (>= 1).")
@click.option(
    "--tol",
    type=float,
    default=1e-7,
    show_default=True,
    help="batched-lbfgs: relative stationarity |grad R|/(|grad D| + lambda |Q|) to reach (> 0).",
)
@click.option(
    "--teacher",
    default="gaussian",
    show_default=True,
    help="Teacher: gaussian (i.i.d. N(0, 1) entries, the model of docs/theory.md section 1) or orthonormal "
    "(Q*^T Q*/d = I exactly).",
)
@click.option(
    "--paired/--unpaired",
    default=True,
    show_default=True,
    help="Both starts on the same data (paired) or on independent seeds.",
)
@click.option(
    "--nested/--independent",
    default=True,
    show_default=True,
    help="Nested training sets across alpha, or an independent set per alpha (same teacher).",
)
@click.option(
    "--dtype",
    default="float64",
    show_default=True,
    help="float64 (float32 is refused: its runs stop at a relative stationarity of 1e-5 to 1e-3).",
)
@click.option(
    "--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N (auto: CUDA when present)."
)
@click.option("--seed-chunk", type=int, default=8, show_default=True, help="Seeds trained together (cached as a unit).")
@click.option("--model", default="1/d", show_default=True, help=f"Finite-size model: {', '.join(FIT_MODELS)}.")
@click.option("--level", type=float, default=0.95, show_default=True, help="Confidence level of the intervals.")
@click.option("--workers", type=int, default=1, show_default=True, help="Worker processes over cells (>= 1).")
@click.option(
    "--dask",
    "dask_address",
    default=None,
    help="Address [tcp://]host:port of a running Dask scheduler to run the cells on (workers need torch), or "
    "slurm[:JOBS] / pbs[:JOBS]: a Dask cluster of batch jobs (dotattn[jobqueue]; ~/.config/dask/jobqueue.yaml).",
)
@click.option(
    "--threads",
    type=int,
    default=0,
    show_default=True,
    help="torch CPU threads per process (0: cores // workers, so that the workers never share a core).",
)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option(
    "--theory/--no-theory",
    default=True,
    show_default=True,
    help="Compute the theory's alpha_c and Delta e_t on the alpha grid (about a minute per omega).",
)
@click.option(
    "--include",
    "includes",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A committed erm-alpha-c folder whose cells join this study (repeat): read from its verified "
    "rows (seal a folder without manifest.json first: dotattn verify --seal), not computed again; "
    "same problem, alpha grid, optimiser and estimator required.",
)
@click.option(
    "--phase-diagram",
    "phase_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="A phase-diagram folder: the theory (alpha_c and Delta e_t) is read from its records instead of "
    "computed, and OUT/headline.png is drawn (its alpha_c(omega), alpha_lin(omega) against the ERM "
    "crossings per d and d -> inf).",
)
@click.option("--quiet", is_flag=True, help="No progress bar and no table.")
def erm_alpha_c(
    omegas,
    ds,
    alphas,
    L,
    rank,
    teacher_rank,
    sigma,
    ridge,
    A,
    positional_gram,
    student,
    token_correlation,
    value,
    value_rank,
    seeds,
    first_seed,
    optimizer,
    steps,
    tol,
    teacher,
    paired,
    nested,
    dtype,
    device,
    seed_chunk,
    model,
    level,
    workers,
    dask_address,
    threads,
    out_dir,
    theory,
    includes,
    phase_dir,
    quiet,
):
    """Per-seed crossing of e_t(semantic start) - e_t(positional start) on paired data, per (omega, d);
    mean, bootstrap interval, no-crossing seeds; fit alpha_c(d) -> alpha_c(inf); the theory's alpha_c.

    Writes OUT/crossings.csv, cells.csv, delta.csv, summary.json, delta_et.png, alpha_c_vs_d.png and
    caches every finished chunk of seeds and cell under OUT/cache (rerun the same command to resume).
    Also OUT/starts.csv (every start's overlaps and branch label) and OUT/branch_crossings.csv (the
    crossing among points where the two starts ended on different branches), unless a cell was
    included from a folder written without them.
    """
    t0 = time.perf_counter()
    omega_grid = parse_grid("omega", omegas)
    d_grid = parse_grid("d", ds)
    if any(not float(d).is_integer() for d in d_grid):
        raise ParameterError("d values must be integers >= 2")
    workers = check_workers(workers)
    if threads < 0:
        raise ParameterError(f"threads must be an integer >= 0 (0: cores // workers), got {threads}")
    value_rank = value_rank_of(value, value_rank)
    problem = problem_from_options(
        omega_grid[0], L, rank, teacher_rank, sigma, ridge, A, positional_gram, student, token_correlation
    )
    if theory:  # a student or token correlation the replica theory does not handle: ERM only, said in one line
        from dotattn.theory_vs_erm.alpha_c import theory_refusal

        refusal = theory_refusal(problem)
        if refusal is not None:
            if phase_dir is not None:
                raise ParameterError(f"--phase-diagram: the replica theory does not handle this problem ({refusal})")
            theory = False
            click.echo(f"erm-alpha-c: no theory alpha_c, as with --no-theory: {refusal}", err=True)
    value_notice = None
    if theory and str(value).strip().lower() != "none":  # the theory's student has V = I
        value_notice = f"the replica theory is for a fixed value matrix V = I, not --value {value}"
        theory = False
    if dask_address is None:  # never oversubscribe by default: processes x threads <= cores
        tasks = len(omega_grid) * (len(d_grid) + (1 if theory else 0))  # (omega, d) cells and theory columns
        threads = threads_per_worker(threads, min(workers, tasks))
    if min(d_grid) < problem.L:
        raise ParameterError(f"d must be >= L = {problem.L}, got {int(min(d_grid))}")
    config = AlphaCConfig(
        omegas=tuple(omega_grid),
        ds=tuple(int(d) for d in d_grid),
        alphas=tuple(parse_grid("alpha", alphas)),
        seeds=seeds,
        first_seed=first_seed,
        optimizer=optimizer.strip().lower(),
        steps=steps,
        tol=tol,
        teacher=teacher,
        paired=paired,
        nested=nested,
        dtype=dtype,
        device=device,
        seed_chunk=seed_chunk,
        level=level,
        model=model,
        value=value,
        value_rank=value_rank,
    )
    if value_notice is not None:  # said once the value options are known to be valid
        if phase_dir is not None:
            raise ParameterError(f"--phase-diagram: {value_notice}")
        click.echo(f"erm-alpha-c: no theory alpha_c, as with --no-theory: {value_notice}", err=True)
    from dotattn.erm.experiment import resolve_device

    resolve_device(config.device)
    supplied: dict[tuple[float, int], CellRuns] = {}  # (omega, d) -> runs read from --include
    sources: dict[tuple[float, int], list[str]] = {}
    if includes:  # read and verified before any folder is made (IntegrityError / ParameterError: one line)
        from dotattn.core.io import IntegrityError
        from dotattn.theory_vs_erm.alpha_c import check_supplied, merge_parts
        from dotattn.theory_vs_erm.output import read_alpha_c_part

        try:
            parts = [read_alpha_c_part(f) for f in includes]
        except IntegrityError as err:
            raise ParameterError(f"--include: {err}") from None
        supplied, sources = merge_parts(problem, config, parts)
        check_supplied(config, supplied)
    theory_summaries = None
    if phase_dir is not None:
        from dotattn.core.io import IntegrityError
        from dotattn.positional_semantic.output import read_phase_summaries

        try:
            theory_summaries = read_phase_summaries(phase_dir)
        except IntegrityError as err:
            raise ParameterError(f"--phase-diagram: {err}") from None
    theory_columns = None
    if phase_dir is not None and theory:  # its problem and grid checked before anything is trained
        from dotattn.theory_vs_erm.output import theory_from_phase_diagram

        try:
            theory_columns = tuple(theory_from_phase_diagram(phase_dir, problem, config.omegas, config.alphas))
        except ParameterError as err:  # IntegrityError too
            raise ParameterError(f"--phase-diagram: {err}") from None
    dask = connect_dask(dask_address) if dask_address is not None else None  # before any folder is made
    included = {f"{w:g}/{d}": src for (w, d), src in sorted(sources.items())}
    made_for = {
        "problem": problem.to_dict(),
        "config": config.to_dict(),
        "included_cells": included,
        "phase_diagram": phase_dir,
    }

    n_cells = len(config.ds) * len(config.omegas)
    total = sum(config.cost(d) for d in config.ds) * len(config.omegas)
    total_runs = n_cells * config.seeds * config.runs_per_seed
    reporter = ProgressReporter("erm-alpha-c", quiet=quiet)
    done = [0.0, 0]
    start = time.monotonic()

    def progress(cost: float, runs: int) -> None:  # every finished run (its share of AlphaCConfig.cost)
        done[0] += cost
        done[1] += runs
        percent = min(100, int(100 * done[0] / total))
        reporter(
            ProgressState(
                units_done=percent,
                units_total=100,
                tasks_done=n_cells if percent >= 100 else 0,
                tasks_total=n_cells,
                tasks_cached=0,
                elapsed=time.monotonic() - start,
                unit=f"% of the work ({min(done[1], total_runs)}/{total_runs} runs)",
                task="cells",
            )
        )

    # the estimate before the folder is made: a signal after it reaches the interrupt handling below
    with_theory = theory and phase_dir is None
    typical_seconds = study_seconds(problem, config, with_theory)  # the runs stop at their tolerance
    bound = study_bound_seconds(problem, config, with_theory)  # every run to its step budget
    # created, locked and checked before anything is computed (not another command's folder, not a
    # finished study of other settings); removed again if still empty (an empty cache/ too) when stopped
    with output_folder(out_dir, "erm-alpha-c", "alpha-c", made_for) as out:
        remove_stale_tmp(out / "cache")
        from dotattn.core.progress import CommandProgress

        cells = CommandProgress("erm-alpha-c", total_runs, "runs", quiet=quiet)
        cells.start(
            f"{len(config.omegas)} omega x {len(config.ds)} d x {config.seeds} seeds x {len(config.alphas)} alpha x 2 "
            f"starts ({config.optimizer}, at most {config.steps} steps)"
            + (", and the theory alpha_c per omega" if theory and phase_dir is None else "")
            + "; every finished cell and chunk of seeds is cached",
            cells.estimate_line(
                bound / max(total_runs, 1),
                ALPHA_C_COST,
                typical=typical_seconds / bound if bound > 0 else 1.0,
                workers=1 if dask_address is not None else min(workers, n_cells),
                threads=threads,
            ),
            str(out),
            first_line=False,  # progress below: the share of the work done
        )
        try:
            study = run_study(
                problem,
                config,
                cache_dir=out / "cache",
                workers=workers,
                threads=threads,
                theory=theory and phase_dir is None,
                dask_address=dask,
                progress=progress,
                supplied=supplied,
            )
            if theory_columns is not None:  # the theory read from the phase diagram's records
                from dataclasses import replace

                study = replace(study, theory=theory_columns)
        except Interrupted as err:
            units = sorted((out / "cache").glob("*.json")) if (out / "cache").is_dir() else []
            raise Interrupted(
                err.signum,
                err.detail,
                f"erm-alpha-c: interrupted ({signal.Signals(err.signum).name}); "
                + (
                    f"{len(units)} finished cells and chunks of seeds are cached in {out / 'cache'}, run the same "
                    "command again to resume"
                    if units
                    else "no cell or chunk of seeds had finished, nothing is kept"
                ),
            ) from None
        else:  # the last line: every run done (the cost shares can sum to just under 100 %)
            if int(100 * done[0] / total) < 100:
                done[0] = total
                progress(0.0, 0)
        finally:
            reporter.close()
    command = "dotattn " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    paths = write_alpha_c_study(
        study,
        out,
        command=command,
        extra={
            "threads": threads,
            "workers": workers,
            "dask": dask_address,
            "included_cells": included,
            "phase_diagram": phase_dir,
        },
        theory_summaries=theory_summaries,
    )
    if quiet:
        return
    click.echo(
        f"erm-alpha-c: {len(config.omegas)} omega x {len(config.ds)} d x {config.seeds} seeds in "
        f"{time.perf_counter() - t0:.1f} s ({study.from_cache} units from cache)"
    )
    summ = study.summary_dict()["omegas"]
    for w in summ:
        th = w["theory_alpha_c"]
        th_text = "not computed" if not theory else ("none in range" if th is None else f"{th:.4f}")
        click.echo(f"omega = {w['omega']:g}: theory alpha_c = {th_text}")
        for b in w["by_d"]:
            click.echo(
                f"  d = {b['d']:<5d} alpha_c = {b['alpha_c']:.4f}  CI [{b['ci'][0]:.4f}, {b['ci'][1]:.4f}]"
                f"  seeds {b['seeds']}  no crossing {b['no_crossing']}  several {b['several_crossings']}"
            )
        e = w["extrapolated"]
        click.echo(f"  d -> inf ({e['model']}): {e['alpha_c']:.4f}  CI [{e['ci'][0]:.4f}, {e['ci'][1]:.4f}]")
    for path in paths.values():
        click.echo(f"  wrote {path}")
