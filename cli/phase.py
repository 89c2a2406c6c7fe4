"""``dotattn phase-diagram``: the positional-to-semantic phase diagram in one command."""

from __future__ import annotations

import os
import time

import click

from dotattn.positional_semantic.problem import require_replica_theory

from .main import cli
from .options import (
    correlation_option,
    output_folder,
    parse_grid,
    problem_from_options,
    problem_options,
    student_option,
)
from .solve import build_quadrature, build_solver_options, quadrature_options, solver_options

DEFAULT_OUT = "dotattn-output/phase_diagram"
"""Default output folder: relative to the working directory, ignored by git in a clone."""


@cli.command("phase-diagram")
@click.option(
    "--omega", "omegas", multiple=True, help="omega values: repeat, comma list or start:stop:count (default 0:0.45:10)."
)
@click.option(
    "--alpha", "alphas", multiple=True, help="alpha grid: repeat, comma list or start:stop:count (default 0.1:2.5:25)."
)
@problem_options
@student_option
@correlation_option
@quadrature_options
@solver_options
@click.option(
    "--refine/--no-refine",
    default=True,
    show_default=True,
    help="Re-solve the fixed points at the alpha_c and alpha_lin roots on independent scrambled Sobol "
    "rules: the roots are their mean, the +- its standard error (off: the sweep rule's roots, "
    "+- the coarse-rule bound).",
)
@click.option(
    "--refine-rules",
    type=int,
    default=8,
    show_default=True,
    help="Independent QMC rules of the refinement, in [2, 64].",
)
@click.option(
    "--refine-order",
    type=int,
    default=13,
    show_default=True,
    help="log2 of the points per scrambling of each refinement rule (2 scramblings), in [4, 20].",
)
@click.option(
    "--out",
    "out_dir",
    default=DEFAULT_OUT,
    show_default=True,
    help="Output folder (the default is untracked; the committed study is results/phase_diagram).",
)
@click.option("--workers", type=int, default=None, help="Worker processes, in [1, 1024] (default: all cores).")
@click.option(
    "--dask",
    "dask_address",
    default=None,
    help="Address [tcp://]host:port of a running Dask scheduler (connect timeout 5 s), or slurm[:JOBS] / "
    "pbs[:JOBS]: a Dask cluster of that many batch jobs (dotattn[jobqueue]; job size from "
    "~/.config/dask/jobqueue.yaml).",
)
@click.option(
    "--figure-omega",
    type=float,
    default=None,
    help="omega of the single-omega figures test_error.png and overlaps.png: one of the computed omega "
    "(default 0.3 or the middle one).",
)
@click.option("--quiet", is_flag=True, help="No start line and no progress (bar or lines on stderr).")
def phase_diagram_command(
    omegas,
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
    quad_kind,
    quad_order,
    coarse_order,
    tol,
    damping,
    max_iter,
    hat_form,
    refine,
    refine_rules,
    refine_order,
    out_dir,
    workers,
    dask_address,
    figure_omega,
    quiet,
):
    """alpha sweeps of the informed branches (positional, semantic; mixed for rank >= 2), spinodals,
    phase boundaries, alpha_c(omega), alpha_lin(omega) and figures."""
    from dotattn.core.runner import check_workers, connect_dask
    from dotattn.positional_semantic.output import write_phase_diagram
    from dotattn.positional_semantic.phase_diagram import (
        DEFAULT_ALPHAS,
        DEFAULT_OMEGAS,
        SweepSettings,
        check_figure_omega,
        check_grids,
        run_phase_diagram,
    )
    from dotattn.positional_semantic.refine import RefineSpec

    omega_grid, alpha_grid = check_grids(
        parse_grid("omega", omegas) if omegas else DEFAULT_OMEGAS,
        parse_grid("alpha", alphas) if alphas else DEFAULT_ALPHAS,
    )
    problem = problem_from_options(
        omega_grid[0],
        L,
        rank,
        teacher_rank,
        sigma,
        ridge,
        A,
        positional_gram,
        student,
        token_correlation=token_correlation,
    )
    require_replica_theory(problem)
    quad = build_quadrature(problem, quad_kind, quad_order, coarse_order)
    options = build_solver_options(tol, damping, max_iter, hat_form, problem)
    workers = check_workers(os.cpu_count() or 1 if workers is None else workers)
    check_figure_omega(figure_omega, omega_grid)
    dask = connect_dask(dask_address) if dask_address is not None else None  # before any folder is made
    if refine:  # validated before any folder is made
        RefineSpec(refine_order, refine_rules)
    settings = SweepSettings(quad, options, refine=RefineSpec(refine_order, refine_rules) if refine else None)
    made_for = {
        "problem": problem.to_dict(),
        "omegas": list(omega_grid),
        "alphas": list(alpha_grid),
        **settings.to_dict(),
    }

    from dotattn.core.runner import Interrupted, ProgressReporter
    from dotattn.positional_semantic.phase_diagram import (
        PHASE_DIAGRAM_COST,
        cached_columns,
        column_fixed_points_estimate,
        estimate_seconds,
        refine_fixed_points,
    )

    t0 = time.perf_counter()
    reporter = ProgressReporter("phase-diagram", quiet=quiet)
    # created, locked and checked (not another command's folder, not a finished run of other settings)
    # before anything is computed; removed again if still empty (an empty cache/ too) when stopped
    with output_folder(out_dir, "phase-diagram", "phase-diagram", made_for) as out:
        from dotattn.core.progress import CommandProgress
        from dotattn.positional_semantic.branch import branch_names

        cached = len(cached_columns(problem, omega_grid, alpha_grid, settings, out / "cache"))
        todo = len(omega_grid) - cached
        per_column = column_fixed_points_estimate(problem, alpha_grid, settings.refine)
        n_refine = todo * refine_fixed_points(settings.refine)
        columns = CommandProgress("phase-diagram", len(omega_grid), "columns", cached=cached, quiet=quiet)
        columns.start(
            f"{len(omega_grid)} omega x {len(alpha_grid)} alpha, branches {', '.join(branch_names(problem))}; phase "
            f"boundaries, alpha_c and alpha_lin by Brent: about {todo * per_column} fixed points"
            + (f" ({n_refine} of them on the refinement rules)" if n_refine else "")
            + (" on Dask" if dask_address is not None else ""),
            columns.estimate_line(
                estimate_seconds(problem, alpha_grid, settings, 1, 1),
                PHASE_DIAGRAM_COST,
                workers=1 if dask_address is not None else min(workers, max(todo, 1)),
            ),
            str(out),
            first_line=False,  # progress counts fixed points (run_phase_diagram's reporter)
        )
        try:
            pd = run_phase_diagram(
                problem,
                omega_grid,
                alpha_grid,
                settings=settings,
                cache_dir=out / "cache",
                workers=workers,
                dask_address=dask,
                progress=reporter,
            )
        except Interrupted as err:
            raise Interrupted(
                err.signum,
                err.detail,
                f"phase-diagram: interrupted; {err.detail}, run the same command again to resume",
            ) from None
        finally:
            reporter.close()
        import shlex
        import sys

        paths = write_phase_diagram(
            pd, out, figure_omega, command="dotattn " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        )
    click.echo(
        f"phase diagram: {len(omega_grid)} omega x {len(alpha_grid)} alpha in {time.perf_counter() - t0:.1f} s"
        f" ({pd.from_cache} columns from cache)"
    )

    def fmt(x: float | None) -> str:
        return "none in range" if x is None else f"{x:.4f}"

    def pm(x: float | None, e: float | None) -> str:
        return fmt(x) + ("" if x is None or e is None else f" +- {e:.4f}")

    for s in pd.summaries:
        click.echo(
            f"  omega = {s.omega:<5g} alpha_c = {pm(s.alpha_c, s.alpha_c_error):<22} "
            f"alpha_lin = {pm(s.alpha_lin, s.alpha_lin_error):<22}"
            f" spinodal(sem) = {fmt(s.spinodal_semantic):<14} spinodal(pos) = {fmt(s.spinodal_positional)}"
        )
        if s.refined or s.alpha_c_sweep is not None:
            click.echo(
                f"      (sweep rule: alpha_c = {pm(s.alpha_c_sweep, s.alpha_c_sweep_error)}, alpha_lin = "
                f"{pm(s.alpha_lin_sweep, s.alpha_lin_sweep_error)}; +- above: standard error over the "
                f"refinement rules)"
            )
        for b in s.boundaries:
            pm_error = "" if b.error != b.error else f" +- {b.error:.4f}"
            click.echo(f"      boundary {b.below} -> {b.above} at alpha = {b.alpha:.4f}{pm_error} ({b.method})")
    for path in paths.values():
        click.echo(f"  wrote {path}")
