"""``dotattn compare``: overlay the replica theory on finite-size ERM results."""

from __future__ import annotations

from pathlib import Path

import click

from dotattn.core.validation import check_number

from .main import cli
from .solve import build_quadrature, build_solver_options, quadrature_options, solver_options


def _fmt(x: float, spec: str) -> str:
    return "-" if x != x else format(x, spec)  # NaN -> "-"


def _max_rel(row) -> str:
    """``max rel diff`` and the quantity that sets it, e.g. ``26.69% (theta_norm)``."""
    k = row.max_rel_quantity()
    return "-" if k is None else f"{_fmt(row.max_rel_diff, '.2%')} ({'eps_g' if k == 'test_error' else k})"


def default_out(erm_dir: str) -> Path:
    """The output folder when --out is not given: ``<ERM folder>-compare`` beside the ERM folder (a
    comparison written into the ERM folder would make it hold two folder kinds, and fail ``verify``)."""
    erm = Path(erm_dir).resolve()
    return erm.parent / f"{erm.name}-compare"


@cli.command("compare")
@click.option("--erm", "erm_dir", required=True, help="Output folder of `dotattn train-erm`.")
@click.option(
    "--theory",
    "theory_dir",
    default=None,
    help="Read the theory from a phase-diagram folder or an earlier compare output for the same "
    "problem (default: compute it now).",
)
@click.option(
    "--finite-size",
    "finite_dirs",
    multiple=True,
    help="train-erm folders at several d (same alpha, omega) for the finite-size figure; repeatable.",
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    help="Output folder (default: a folder of its own beside the --erm folder, named after it with "
    "'-compare' appended; never the ERM folder itself).",
)
@quadrature_options
@solver_options
@click.option(
    "--tolerance",
    type=float,
    default=0.05,
    show_default=True,
    help="Relative tolerance, in (0, 1], on eps_g and the branch's overlaps for the 'agrees' column "
    "(absolute, times the quantity's scale, where the theory is ~0).",
)
def compare_command(
    erm_dir,
    theory_dir,
    finite_dirs,
    out_dir,
    quad_kind,
    quad_order,
    coarse_order,
    tol,
    damping,
    max_iter,
    hat_form,
    tolerance,
):
    """Theory against ERM: eps_g, overlaps and training loss per alpha and informed branch.

    Overlaps are compared through gauge invariants: ||mu_1||, ||theta||_F/sigma^2 and
    Tr q/sigma^2; ERM runs count for a branch when they started and ended on it.
    """
    from dotattn.positional_semantic.phase_diagram import SweepSettings
    from dotattn.theory_vs_erm.output import compare_and_write, load_erm

    check_number("tolerance", tolerance, 0.0, True, 1.0, "in (0, 1]")
    problem = load_erm(erm_dir).problem
    settings = SweepSettings(
        build_quadrature(problem, quad_kind, quad_order, coarse_order),
        build_solver_options(tol, damping, max_iter, hat_form, problem),
    )
    paths, table = compare_and_write(
        Path(erm_dir),
        Path(out_dir) if out_dir else default_out(erm_dir),
        theory_dir,
        list(finite_dirs),
        settings,
        tolerance,
    )
    click.echo(
        f"{'alpha':>6} {'init':<11} {'branch':<11} {'runs':>5} {'eps_g theory':>12} {'eps_g ERM':>22} "
        f"{'eps_g rel':>9}  {'max rel diff (quantity)':<25}  agrees  abs diff where the theory is ~0"
    )
    for r in table:
        near = ", ".join(f"{k} {r.abs_diff[k]:+.3g} (theory {r.theory[k]:.2g})" for k in r.near_zero())
        click.echo(
            f"{r.alpha:>6g} {r.init:<11} {r.branch:<11} {r.erm_runs_on_branch:>2}/{r.erm_runs:<2} "
            f"{r.theory['test_error']:>12.6f} {_fmt(r.erm_mean['test_error'], '>10.6f')} ± "
            f"{_fmt(r.erm_std['test_error'], '.6f'):<9} {_fmt(r.rel_diff['test_error'], '>9.2%')}  "
            f"{_max_rel(r):<25}  {'yes' if r.agrees else 'no':<6}  {near}".rstrip()
        )
    click.echo(
        f"  max rel diff: the largest relative difference over eps_g and the branch's overlaps, and which "
        f"quantity it is (m_norm = ||mu_1||, theta_norm = ||theta||_F/sigma^2, q_trace = Tr q/sigma^2); "
        f"agrees: each of them within --tolerance {tolerance:g}"
    )
    for path in paths.values():
        click.echo(f"  wrote {path}")
