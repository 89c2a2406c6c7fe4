"""``dotattn landscape``: best-of-K paired crossings from ``erm-restarts`` folders, K → ∞, d → ∞ and the verdict.

A thin shell over :mod:`dotattn.theory_vs_erm.landscape_output` (reading, writing) and
:func:`dotattn.theory_vs_erm.landscape.analyse` (the estimator). Every input folder is checked against the
others before anything is read, verified before its runs are read, and the output folder is created only
after every input has passed.
"""

from __future__ import annotations

import shlex
import sys
import time

import click

from dotattn.core.progress import Cost

from .main import cli
from .options import output_folder

LANDSCAPE_COST = Cost(2.2e-5, 'docs/cli.md "dotattn landscape"')
"""CPU seconds per data row (runs.csv and pairs.csv) of an input folder verified and read: a restarts folder at
d = 500 (16 seeds x 134 starts: 2144 runs, 69,550 pairs) took 1.57 s to verify; the 28 folders of the d = 500
part of the omega = 0.1 study (about 1e6 rows) took 26 CPU-s in all, imports and analysis included."""


@cli.command("landscape")
@click.option(
    "--runs",
    "roots",
    multiple=True,
    required=True,
    type=click.Path(file_okay=False),
    help="A study root ROOT/d{d}/alpha{alpha}/{informed,restarts}/ of erm-restarts folders (repeat for more "
    "seeds); every (d, alpha, seed) point once.",
)
@click.option(
    "--phase-diagram",
    "phase_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="A phase-diagram folder made for the same problem: the replica alpha_c at the runs' omega is read from it.",
)
@click.option(
    "--alpha-c",
    "alpha_c_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="An erm-alpha-c folder of the same problem: its informed-start crossings are recorded beside the study "
    "and, with the phase diagram, OUT/headline.png is drawn (alpha_c(omega), informed-start and best-of-K crossings).",
)
@click.option(
    "--rsb",
    "rsb_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="A complexity folder (dotattn complexity) at the runs' omega: its alpha_threshold and alpha_equilibrium "
    "are recorded beside the verdict and drawn on the headline.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder (best.csv, crossings.csv, crossing_by_k.csv, summary.json, crossing_vs_K.png).",
)
@click.option("--quiet", is_flag=True, help="No progress and no table.")
def landscape(roots, phase_dir, alpha_c_dir, rsb_dir, out_dir, quiet):
    """Best-of-K crossings of e_t(semantic) - e_t(positional) from erm-restarts folders, per d and search;
    K -> inf, d -> inf and the verdict against the replica alpha_c.

    Per (d, alpha, seed) and branch the lowest e_t of the informed run and its first K - 1 noisy copies
    (K = 1, 2, 4, ..., K_max) and of every start; per seed the first + to - crossing in alpha for the
    positional, semantic and both searches; per (d, search, K) mean, se and n; the fits in 1/ln K and 1/d
    with seed bootstraps; the rule is results/landscape/README.md's.
    """
    t0 = time.perf_counter()
    from dotattn.core.progress import CommandProgress
    from dotattn.positional_semantic.output import read_phase_summaries
    from dotattn.theory_vs_erm.landscape import analyse
    from dotattn.theory_vs_erm.landscape_output import (
        made_for,
        plan_inputs,
        read_best,
        read_references,
        replica_alpha_c,
        write_landscape,
    )

    plan = plan_inputs(roots)  # every refusal of mismatched folders, before anything is verified or created
    alpha_c, alpha_c_error = replica_alpha_c(phase_dir, plan.problem)
    references = read_references(alpha_c_dir, rsb_dir, plan.problem)  # verified, before OUT exists
    theory = read_phase_summaries(phase_dir) if references.erm_omegas else []
    params = {**made_for(plan, phase_dir, alpha_c, alpha_c_error), "references": dict(references.folders or {})}
    progress = CommandProgress("landscape", len(plan.folders), "folders", quiet=quiet)
    rows = sum(_rows(f.path) for f in plan.folders)
    progress.start(
        f"{len(plan.pairs)} (d, alpha) cells of {', '.join(f'd = {d} (K_max {k})' for d, k in plan.k_max.items())}, "
        "each folder verified before it is read",
        progress.estimate_line(rows * LANDSCAPE_COST.seconds / max(len(plan.folders), 1), LANDSCAPE_COST),
        out_dir,
    )
    try:
        runs, best = read_best(plan, progress.unit_done)  # IntegrityError (one line, exit 2) before OUT exists
    finally:
        progress.close()
    study = analyse(best, alpha_c, alpha_c_error)
    command = "dotattn " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    with output_folder(out_dir, "landscape", "landscape", params) as out:
        paths = write_landscape(
            study,
            runs,
            out,
            params,
            command=command,
            seconds=time.perf_counter() - t0,
            references=references,
            theory=theory,
        )
    if quiet:
        return
    summary = study.summary_dict()
    click.echo(f"replica alpha_c = {alpha_c:.4f} +- {alpha_c_error:.4f} (from {phase_dir})")
    click.echo(
        f"{'d':>5s} {'search':>10s} {'K=1':>16s} {'K_max':>16s} {'every':>16s} {'K->inf [95 %]':>26s} {'sat.':>5s}"
    )
    for d in study.ds:
        k_top = str(study.k_max(d))
        for search, by_k in summary["crossing_by_K"][str(d)].items():
            fit = summary["k_infinity"][str(d)][search]
            click.echo(
                f"{d:5d} {search:>10s} {_cell(by_k['1']):>16s} {_cell(by_k[k_top]):>16s} {_cell(by_k['every']):>16s} "
                f"{_num(fit['c_inf'])} [{_num(fit['ci'][0])}, {_num(fit['ci'][1])}] "
                f"{'yes' if fit['saturation']['saturated'] else 'no':>5s}"
            )
    for search, fit in summary["d_infinity"].items():
        click.echo(f"d -> inf, K -> inf ({search}): {_num(fit['c_inf'])} [{_num(fit['ci'][0])}, {_num(fit['ci'][1])}]")
    v = summary["verdict"]
    click.echo(f"verdict (search both): {v['outcome']} ({v['reason']})")
    click.echo(f"wrote {paths['summary']} ({time.perf_counter() - t0:.1f} s)")


def _num(x) -> str:
    return "nan" if x is None else f"{x:.4f}"


def _cell(entry) -> str:
    return f"{_num(entry['mean'])}+-{_num(entry['se'])} ({entry['n']})"


def _rows(folder) -> int:
    """Data rows (runs and pairs) of a folder, from its manifest (for the start line's estimate)."""
    import json

    try:
        files = json.loads((folder / "manifest.json").read_text())["files"]
        return sum(int(files[name]["rows"] or 0) for name in ("runs.csv", "pairs.csv") if name in files)
    except (OSError, ValueError, KeyError, TypeError):
        return 0
