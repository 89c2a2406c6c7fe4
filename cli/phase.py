"""``dotattn phase-diagram``: the positional-to-semantic phase diagram in one command."""

from __future__ import annotations

import os
import sys
import time

import click

from dotattn.cli.main import cli
from dotattn.cli.options import parse_grid, problem_from_options, problem_options
from dotattn.cli.solve import build_quadrature, build_solver_options, quadrature_options, solver_options
from dotattn.io import ensure_writable_dir
from dotattn.problem import ParameterError


@cli.command("phase-diagram")
@click.option("--omega", "omegas", multiple=True,
              help="omega values: repeat, comma list or start:stop:count (default 0:0.45:10).")
@click.option("--alpha", "alphas", multiple=True,
              help="alpha grid: repeat, comma list or start:stop:count (default 0.1:2.5:25).")
@problem_options
@quadrature_options
@solver_options
@click.option("--out", "out_dir", default="results/phase_diagram", show_default=True, help="Output folder.")
@click.option("--workers", type=int, default=None, help="Worker processes, in [1, 1024] (default: all cores).")
@click.option("--dask", "dask_address", default=None, help="Address [tcp://]host:port of a running Dask scheduler (connect timeout 5 s).")
@click.option("--figure-omega", type=float, default=None, help="omega of figures (a) and (b): one of the computed omega (default 0.3 or the middle one).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def phase_diagram_command(omegas, alphas, L, rank, teacher_rank, sigma, ridge, A, positional_gram, quad_kind,
                          quad_order, coarse_order, tol, damping, max_iter, hat_form, out_dir, workers,
                          dask_address, figure_omega, quiet):
    """alpha sweeps of both branches, spinodals, alpha_c(omega), alpha_lin(omega) and figures."""
    from dotattn.phase_diagram import (DEFAULT_ALPHAS, DEFAULT_OMEGAS, SweepSettings, check_figure_omega, check_grids, check_workers,
                                       connect_dask, run_phase_diagram)
    from dotattn.results_io import write_phase_diagram

    omega_grid, alpha_grid = check_grids(parse_grid("omega", omegas) if omegas else DEFAULT_OMEGAS,
                                         parse_grid("alpha", alphas) if alphas else DEFAULT_ALPHAS)
    problem = problem_from_options(omega_grid[0], L, rank, teacher_rank, sigma, ridge, A, positional_gram)
    quad = build_quadrature(problem, quad_kind, quad_order, coarse_order)
    options = build_solver_options(tol, damping, max_iter, hat_form, problem)
    workers = check_workers(os.cpu_count() or 1 if workers is None else workers)
    check_figure_omega(figure_omega, omega_grid)
    dask = connect_dask(dask_address) if dask_address is not None else None  # before any folder is made
    out = ensure_writable_dir(out_dir)
    settings = SweepSettings(quad, options)

    show = not quiet and sys.stderr.isatty()
    bar = click.progressbar(length=len(omega_grid), label="omega columns", file=sys.stderr, show_eta=True,
                            show_pos=True) if show else None
    state = {"done": 0}

    def progress(done: int, total: int, omega: float) -> None:
        if bar is not None:
            bar.update(done - state["done"])
        state["done"] = done

    t0 = time.perf_counter()
    try:
        pd = run_phase_diagram(problem, omega_grid, alpha_grid, settings=settings, cache_dir=out / "cache",
                               workers=workers, dask_address=dask, progress=progress)
    finally:
        if bar is not None:
            bar.render_finish()
    paths = write_phase_diagram(pd, out, figure_omega)
    click.echo(f"phase diagram: {len(omega_grid)} omega x {len(alpha_grid)} alpha in {time.perf_counter() - t0:.1f} s"
               f" ({pd.from_cache} columns from cache)")
    for s in pd.summaries:
        fmt = lambda x: "none in range" if x is None else f"{x:.4f}"  # noqa: E731
        click.echo(f"  omega = {s.omega:<5g} alpha_c = {fmt(s.alpha_c):<14} alpha_lin = {fmt(s.alpha_lin):<14}"
                   f" spinodal(sem) = {fmt(s.spinodal_semantic):<14} spinodal(pos) = {fmt(s.spinodal_positional)}")
    for name, path in paths.items():
        click.echo(f"  wrote {path}")
