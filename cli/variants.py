"""``dotattn variants``: α_c(ω) of several variants side by side, and their shift from a baseline.

A thin shell over :func:`dotattn.theory_vs_erm.variants.compare_variants` and
:func:`dotattn.theory_vs_erm.output.write_variants`: every input folder is read and verified before the
output folder is made.
"""

from __future__ import annotations

import math
import shlex
import sys
import time

import click

from dotattn.core.validation import ParameterError, check_int

from .main import cli
from .options import output_folder


def _labelled(option: str, items: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        label, sep, folder = item.partition("=")
        if not sep or not label.strip() or not folder.strip():
            raise ParameterError(f"{option} must be LABEL=FOLDER, got {item!r}")
        out.append((label.strip(), folder.strip()))
    return out


def _fmt(x: float, spec: str = ".3f") -> str:
    return "-" if not math.isfinite(x) else format(x, spec)


@cli.command("variants")
@click.option(
    "--theory",
    "theory",
    multiple=True,
    help="LABEL=FOLDER: a phase-diagram folder (its alpha_c(omega)) for the variant LABEL; repeat.",
)
@click.option(
    "--erm",
    "erm",
    multiple=True,
    help="LABEL=FOLDER: an erm-alpha-c folder (its crossings) for the variant LABEL; repeat.",
)
@click.option("--baseline", required=True, help="The label every shift is measured from.")
@click.option(
    "--d-max",
    type=int,
    default=None,
    help="Show each ERM study at its largest d not above this (default: its largest d), >= 1.",
)
@click.option("--out", required=True, help="Output folder (variants.csv, summary.json, variants.png).")
def variants_command(theory, erm, baseline, d_max, out):
    """alpha_c(omega) of several variants side by side (theory, ERM) and each one's shift from a baseline.

    Theory: phase-diagram folders, the shift is the difference at the same omega. ERM: erm-alpha-c
    folders at their largest d (not above --d-max), the shift is paired per seed at the same d. Every
    folder is read through its verifying reader (an erm-alpha-c folder's crossings are recomputed from
    delta.csv) before the output folder is made.
    """
    from dotattn.theory_vs_erm.output import write_variants
    from dotattn.theory_vs_erm.variants import compare_variants

    t0 = time.perf_counter()
    if not theory and not erm:
        raise ParameterError("give at least one --theory or --erm LABEL=FOLDER")
    if d_max is not None:
        check_int("d-max", d_max, 1)
    th, em = _labelled("--theory", theory), _labelled("--erm", erm)
    points = compare_variants(th, em, baseline, d_max)
    params = {"theory": dict(th), "erm": dict(em), "baseline": baseline, "d_max": d_max}
    command = "dotattn " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    with output_folder(out, "variants", kind="variants", made_for=params) as folder:
        paths = write_variants(points, folder, params, command=command, seconds=time.perf_counter() - t0)
    click.echo(
        f"{'variant':<14} {'source':<7} {'omega':>6} {'d':>5} {'alpha_c':>8} {'+-se':>7} "
        f"{'interval':>17} {'crossing':>8} {'shift':>8} {'+-se':>7} {'paired':>6}"
    )
    for p in points:
        click.echo(
            f"{p.label:<14} {p.source:<7} {p.omega:>6g} {p.d or '-':>5} {_fmt(p.alpha_c, '.4f'):>8} "
            f"{_fmt(p.se, '.4f'):>7} [{_fmt(p.ci_lo)}, {_fmt(p.ci_hi)}]".ljust(68)
            + f" {(f'{p.crossings}/{p.seeds}' if p.seeds else '-'):>8} {_fmt(p.shift, '+.3f'):>8} "
            f"{_fmt(p.shift_se, '.4f'):>7} {p.paired_seeds or '-':>6}"
        )
    for path in paths.values():
        click.echo(f"  wrote {path}")
