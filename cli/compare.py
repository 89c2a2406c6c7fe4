"""``dotattn compare``: overlay the replica theory on finite-size ERM results."""

from __future__ import annotations

from pathlib import Path

import click

from dotattn.cli.main import cli
from dotattn.io import ensure_writable_dir
from dotattn.problem import ParameterError


@cli.command("compare")
@click.option("--erm", "erm_dir", required=True, help="Output folder of `dotattn train-erm`.")
@click.option("--theory", "theory_dir", default=None,
              help="Phase-diagram output folder to read the theory from (default: compute it now).")
@click.option("--finite-size", "finite_dirs", multiple=True,
              help="train-erm folders at several d (same alpha, omega) for the finite-size figure; repeatable.")
@click.option("--out", "out_dir", default=None, help="Output folder (default: the --erm folder).")
@click.option("--quad-order", type=int, default=None, help="Gauss-Hermite order for theory computed now.")
def compare_command(erm_dir, theory_dir, finite_dirs, out_dir, quad_order):
    """Theory curves against ERM means and error bars (eps_g and overlaps against alpha)."""
    from dotattn.catalogue import QuadratureSpec
    from dotattn.comparison import compare_and_write
    from dotattn.phase_diagram import SweepSettings

    out = ensure_writable_dir(out_dir or erm_dir)
    if quad_order is not None and quad_order < 1:
        raise ParameterError(f"quad-order must be >= 1, got {quad_order}")
    settings = None
    if quad_order is not None:
        settings = SweepSettings(QuadratureSpec("gauss-hermite", quad_order, None))
    paths, table = compare_and_write(Path(erm_dir), out, theory_dir, list(finite_dirs), settings)
    click.echo(f"{'alpha':>6} {'branch':<11} {'eps_g theory':>12} {'eps_g ERM':>20} {'rel diff':>9}")
    for r in table:
        click.echo(f"{r['alpha']:>6g} {r['branch']:<11} {r['theory_test_error']:>12.6f} "
                   f"{r['erm_test_error_mean']:>10.6f} ± {r['erm_test_error_std']:<8.6f} {r['test_error_rel_diff']:>+8.2%}")
    for name, path in paths.items():
        click.echo(f"  wrote {path}")
