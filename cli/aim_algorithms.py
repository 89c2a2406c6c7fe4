"""``dotattn aim amp`` and ``dotattn aim gd``: the AIM algorithms at finite d against the state evolution.

Two standalone click commands (:data:`amp_command`, :data:`gd_command`), attached to the ``aim``
group as ``amp`` and ``gd``. They only parse options and map them onto
:mod:`dotattn.aim.algo_study`; bad input ends with one line and exit status 2 before anything is
computed or created.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Callable

import click

from dotattn.problem import ParameterError

__all__ = ["amp_command", "gd_command"]


class BadInput(click.ClickException):
    """Invalid input: one line, exit status 2 (as :func:`dotattn.cli.main.main` does for ParameterError)."""

    exit_code = 2


def _command_line() -> str | None:
    """The command line: as the ``dotattn`` console script, or as ``python -m dotattn.cli.aim_algorithms``
    (before the commands are attached to the ``aim`` group); None under a test runner."""
    from dotattn.io import invocation

    line = invocation()
    if line is None and sys.argv and Path(sys.argv[0]).name == "aim_algorithms.py":
        line = " ".join(["python -m dotattn.cli.aim_algorithms", *(shlex.quote(a) for a in sys.argv[1:])])
    return line


def study_options(func: Callable) -> Callable:
    """The problem, grid and output options shared by amp and gd."""
    opts = [
        click.option("--d", "d", type=str, default="100", show_default=True, help="Dimension d, an integer in [2, 2000]."),
        click.option("--rho", type=str, default="0.5", show_default=True, help="Width ratio rho = r/d, in [1e-4, 1e4] (and rho d >= 1/2)."),
        click.option("--tokens", "T", type=str, default="2", show_default=True, help="Tokens T, an integer in [2, 64]."),
        click.option("--alpha", multiple=True, required=True,
                     help="Sample ratios alpha = n/d^2: comma lists or start:stop:count ranges, each in (0, 1e4] (and within memory)."),
        click.option("--channel", type=str, default="softmax", show_default=True, help="Output: softmax or hardmax (T = 2)."),
        click.option("--beta", type=str, default="1", show_default=True, help="Softmax inverse temperature, in (0, 1000]."),
        click.option("--seeds", type=str, default="8", show_default=True, help="Data sets (seeds 0..K-1), in [1, 10000]."),
        click.option("--out", type=click.Path(file_okay=False), required=True,
                     help="Output folder (runs.csv, alphas.csv, summary.json, manifest.json)."),
        click.option("--quiet", is_flag=True, help="No progress lines and no table."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def _spec(d, rho, T, alpha, channel, beta, seeds):
    from dotattn.aim.algo_study import StudySpec
    from dotattn.cli.options import parse_grid

    return StudySpec(d=_number("d", d), rho=rho, T=_number("tokens (T)", T), alphas=tuple(parse_grid("alpha", alpha)),
                     channel=channel, beta=beta, seeds=_number("seeds", seeds))


def _number(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ParameterError(f"{name} must be a number, got {text!r}") from None


def _table(summary: dict) -> str:
    lines = [f"{'estimator':<12} {'alpha':>8} {'mse':>9} {'+-':>8} {'SE mmse':>9} {'gap/se':>8} {'conv':>6} "
             f"{'div':>4}  flag"]
    for a in summary["alphas"]:
        z, m, e = (float("nan") if a[k] is None else a[k] for k in ("gap_in_se", "mse_mean", "mse_se"))
        lines.append(f"{a['estimator']:<12} {a['alpha']:>8.4g} {m:>9.5f} {e:>8.5f} "
                     f"{a['mmse_se_theory']:>9.5f} {z:>8.2f} "
                     f"{a['converged']:>3}/{a['runs']:<3} {a['diverged']:>4}  {'BEATS BOUND' if a['beats_bound'] else ''}")
    return "\n".join(lines)


@click.command("amp")
@study_options
@click.option("--max-iter", type=str, default="300", show_default=True, help="AMP iterations at most, in [1, 100000].")
@click.option("--tol", type=str, default="1e-5", show_default=True,
              help="Stop when the relative change of S_hat per iteration is below tol, in (0, 1].")
@click.option("--damping", type=str, default="0.5", show_default=True,
              help="Damping of S_hat, in [0, 1) (0: none; undamped AMP diverges at d = 100-200).")
def amp_command(d, rho, T, alpha, channel, beta, seeds, out, quiet, max_iter, tol, damping) -> None:
    """GAMP with the rotationally invariant denoiser on n = alpha d^2 samples, against the state evolution.

    Per (alpha, seed) one seeded data set and AMP's error (1/d)||S_hat - S*||_F^2; per alpha the mean
    over seeds, its standard error, the Bayes-optimal MMSE and the gap in standard errors; per
    iteration the error beside AMP's own state evolution (iterations.csv).
    """
    try:
        from dotattn.aim.algo_study import check_memory, run_amp_study, write_study
        from dotattn.aim.amp import AMPConfig

        spec = _spec(d, rho, T, alpha, channel, beta, seeds)
        config = AMPConfig(max_iter=_number("max_iter", max_iter), tol=_number("tol", tol),
                           damping=_number("damping", damping))
        check_memory(spec)
    except ParameterError as err:
        raise BadInput(str(err)) from None
    from dotattn.cli.options import output_folder

    say = None if quiet else (lambda line: click.echo(line, err=True))
    command = _command_line()
    with output_folder(out) as folder:
        runs, rows, iters, seconds = run_amp_study(spec, config, progress=say)
        summary = write_study(folder, spec, {"estimator": "amp", **config.to_dict()}, runs, rows, command, seconds,
                              iterations=iters)
    if not quiet:
        click.echo(_table(summary))
        click.echo(f"wrote {Path(folder) / 'summary.json'} ({seconds:.1f} s)")


@click.command("gd")
@study_options
@click.option("--inits", type=str, default="4", show_default=True,
              help="Random initialisations per data set (their mean S is the averaged estimator), in [1, 1000].")
@click.option("--optimizer", type=str, default="adam", show_default=True, help="adam or gd (full batch).")
@click.option("--steps", type=str, default="3000", show_default=True, help="Optimiser steps, in [1, 1e6].")
@click.option("--lr", type=str, default="0.05", show_default=True, help="Learning rate, in (0, 100].")
@click.option("--grad-tol", type=str, default="1e-7", show_default=True,
              help="A run is converged when its RMS gradient per weight is at most this, in (0, 1].")
@click.option("--device", type=str, default="auto", show_default=True, help="Torch device: auto, cpu, cuda, cuda:N.")
def gd_command(d, rho, T, alpha, channel, beta, seeds, out, quiet, inits, optimizer, steps, lr, grad_tol,
               device) -> None:
    """Gradient descent on the tied student S = W W^T/sqrt(r d) (squared loss, full batch), and the
    averaged estimator (mean of S over initialisations on the same data), against the MMSE.

    Needs the erm extra (PyTorch). Reports per run the error, final loss and RMS gradient; per alpha
    the mean errors, their standard errors and any point below the Bayes-optimal MMSE.
    """
    try:
        from dotattn.aim.algo_study import check_memory

        spec = _spec(d, rho, T, alpha, channel, beta, seeds)
        if spec.channel != "softmax":
            raise ParameterError(f"channel must be softmax for gd (a softmax student), got {spec.channel!r}")
        n_inits = _number("inits", inits)
        settings = dict(optimizer=optimizer, steps=_number("steps", steps), lr=_number("lr", lr), inits=n_inits,
                        grad_tol=_number("grad_tol", grad_tol))
        from dotattn.erm.config import check_device_name

        check_device_name(device)
        # autograd keeps a few (n, T, r) and (n, T, T) tensors and a float64 copy of the tokens
        check_memory(spec, extra_per_sample=8 * (spec.T * spec.d + 6 * spec.T * spec.r + 10 * spec.T ** 2))
    except ParameterError as err:
        raise BadInput(str(err)) from None
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as err:
        from dotattn.cli.main import missing_extra

        extra = missing_extra("aim gd", err)
        if extra is None:
            raise
        raise extra from None
    try:
        from dotattn.aim.gd import GDConfig
        from dotattn.erm.experiment import resolve_device

        config = GDConfig(**settings)
        dev = resolve_device(device)
    except ParameterError as err:
        raise BadInput(str(err)) from None
    from dotattn.aim.algo_study import run_gd_study, write_study
    from dotattn.cli.options import output_folder

    say = None if quiet else (lambda line: click.echo(line, err=True))
    command = _command_line()
    with output_folder(out) as folder:
        runs, rows, seconds = run_gd_study(spec, config, device=str(dev), progress=say)
        summary = write_study(folder, spec, {"estimator": "gd", "device": str(dev), **config.to_dict()}, runs, rows,
                              command, seconds)
    if not quiet:
        click.echo(_table(summary))
        click.echo(f"wrote {Path(folder) / 'summary.json'} ({seconds:.1f} s)")


@click.group("aim-algorithms")
def _standalone() -> None:
    """amp and gd, runnable as ``python -m dotattn.cli.aim_algorithms amp|gd ...``."""


_standalone.add_command(amp_command)
_standalone.add_command(gd_command)

if __name__ == "__main__":  # pragma: no cover
    _standalone()
