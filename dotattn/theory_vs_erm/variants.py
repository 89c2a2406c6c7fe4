"""α_c(ω) of several variants of the problem side by side, and each variant's shift from a baseline.

Inputs are committed folders, read through their verifying readers: phase diagrams (``dotattn
phase-diagram``: the refined α_c(ω) and its standard error) for the theory, ``dotattn erm-alpha-c``
studies (per-seed crossings recomputed from ``delta.csv``) for ERM. Every input carries a label (e.g.
``tied``, ``untied``); one label is the baseline.

Per (label, source, ω) one :class:`VariantPoint`:

* theory: α_c ± its standard error (interval ± 2 s.e.); the shift is α_c − α_c(baseline) at the same
  ω (only where the baseline's phase diagram has that ω), its s.e. the two errors in quadrature;
* ERM: the study's cell at the largest d not above ``d_max`` that it holds at that ω: mean of the
  per-seed crossings, s.e., percentile bootstrap interval of the mean (the estimator of
  :mod:`dotattn.theory_vs_erm.crossing`, same seed and replicas as the study); the shift is the
  mean of the per-seed differences α_c(variant) − α_c(baseline) on the seeds both have a crossing for
  in the baseline's cell at the same (ω, d) (a seed is the same teacher, and for a student or value
  variant the same data, in both studies), with its s.e. and bootstrap interval. The baseline's
  crossings for the shift are recomputed on the α points its grid shares with the variant's, so that
  both are interpolated with the same step where one grid is a subset of the other.

Pure reading and statistics; plotting is :func:`dotattn.theory_vs_erm.plotting.figure_variants`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dotattn.core.status import STATUS_CONVERGED
from dotattn.core.validation import ParameterError, check_int
from dotattn.theory_vs_erm.crossing import SeedCrossing, bootstrap_mean_ci, summarise_cell
from dotattn.theory_vs_erm.variant_records import ERM, THEORY, VARIANT_COLUMNS, VariantPoint, read_variant_points

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.theory_vs_erm.alpha_c import CellRuns, StudyPart

__all__ = [
    "VariantPoint",
    "VARIANT_COLUMNS",
    "THEORY",
    "ERM",
    "theory_variant_points",
    "erm_variant_points",
    "compare_variants",
    "check_label",
    "read_variant_points",
]

NAN = float("nan")


def check_label(label: str) -> str:
    """A variant label: 1–40 characters of letters, digits, ``_ . + -`` (ParameterError otherwise)."""
    ok = isinstance(label, str) and 1 <= len(label) <= 40 and all(c.isalnum() or c in "_.+-" for c in label)
    if not ok:
        raise ParameterError(f"label must be 1-40 letters, digits or _ . + -, got {label!r}")
    return label


def _theory_columns(folder: str | os.PathLike) -> dict[float, tuple[float, float]]:
    """ω -> (α_c, s.e.) of a verified phase-diagram folder (columns without a crossing left out; s.e.
    NaN where the root was not refined)."""
    from dotattn.positional_semantic.output import read_phase_summaries

    return {
        round(s.omega, 9): (float(s.alpha_c), NAN if s.alpha_c_error is None else float(s.alpha_c_error))
        for s in read_phase_summaries(folder)
        if s.alpha_c is not None
    }


def theory_variant_points(
    label: str,
    folder: str | os.PathLike,
    columns: Mapping[float, tuple[float, float]],
    baseline: Mapping[float, tuple[float, float]] | None = None,
) -> list[VariantPoint]:
    """The theory's α_c(ω) of one phase-diagram folder (``columns``: its :func:`_theory_columns`); shifts
    against ``baseline`` (the baseline's columns) where it has the same ω."""
    out = []
    for w, (a, se) in sorted(columns.items()):
        half = 2 * se if math.isfinite(se) else 0.0
        shift = shift_se = NAN
        if baseline is not None and w in baseline:
            b, b_se = baseline[w]
            shift = a - b
            shift_se = math.hypot(se if math.isfinite(se) else 0.0, b_se if math.isfinite(b_se) else 0.0)
        out.append(
            VariantPoint(
                label=label,
                source=THEORY,
                omega=w,
                d=0,
                alpha_c=a,
                se=se,
                ci_lo=a - half,
                ci_hi=a + half,
                level=NAN,
                seeds=0,
                crossings=0,
                shift=shift,
                shift_se=shift_se,
                shift_ci_lo=shift - 2 * shift_se,
                shift_ci_hi=shift + 2 * shift_se,
                paired_seeds=0,
                shift_alphas=0,
                folder=str(folder),
            )
        )
    return out


def _crossings(cells: Iterable[CellRuns]) -> dict[tuple[float, int], list[SeedCrossing]]:
    """(ω, d) -> the per-seed crossings of each cell."""
    from dotattn.theory_vs_erm.alpha_c import cell_crossings

    return {(round(c.omega, 9), c.d): cell_crossings(c, STATUS_CONVERGED) for c in cells}


def erm_variant_points(
    label: str, part: StudyPart, baseline: StudyPart | None = None, d_max: int | None = None
) -> list[VariantPoint]:
    """The ERM crossing of one verified erm-alpha-c study (:func:`dotattn.theory_vs_erm.output.read_alpha_c_part`)
    at every ω, at its largest d ≤ ``d_max``, on its own grid; the paired shift from the ``baseline``
    study (None: no shift) at the same (ω, d), with the baseline's crossings recomputed on the α points
    both grids share (so that a baseline on a finer grid is interpolated with the variant's step;
    ``shift_alphas`` counts those points)."""
    cells, level, n_boot = _crossings(part.cells), part.config.level, part.config.n_boot
    base: dict[tuple[float, int], list[SeedCrossing]] = {}
    n_common = 0
    if baseline is not None:
        shared = [c.on_alphas(part.config.alphas) for c in baseline.cells]
        n_common = len(shared[0].alphas) if shared else 0
        base = _crossings(shared) if n_common >= 2 else {}
    out = []
    for w in sorted({w for w, _ in cells}):
        ds = [d for (x, d) in cells if x == w and (d_max is None or d <= d_max)]
        if not ds:
            continue
        d = max(ds)
        records = cells[(w, d)]
        cell = summarise_cell(w, d, records, level=level, n_boot=n_boot)
        shift = shift_se = lo = hi = NAN
        n_pair = 0
        other = base.get((w, d))
        if other is not None:
            theirs = {x.seed: x.alpha_c for x in other}
            diff = np.array(
                [
                    x.alpha_c - theirs[x.seed]
                    for x in records
                    if x.seed in theirs and math.isfinite(x.alpha_c) and math.isfinite(theirs[x.seed])
                ]
            )
            n_pair = int(diff.size)
            if n_pair >= 2:
                shift, shift_se = float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(n_pair))
                lo, hi = bootstrap_mean_ci(diff, level, n_boot)
        out.append(
            VariantPoint(
                label=label,
                source=ERM,
                omega=w,
                d=d,
                alpha_c=cell.alpha_c,
                se=cell.se,
                ci_lo=cell.ci_lo,
                ci_hi=cell.ci_hi,
                level=level,
                seeds=cell.seeds,
                crossings=cell.crossings,
                shift=shift,
                shift_se=shift_se,
                shift_ci_lo=lo,
                shift_ci_hi=hi,
                paired_seeds=n_pair,
                shift_alphas=n_common if other else 0,
                folder=part.source,
            )
        )
    return out


def compare_variants(
    theory: Sequence[tuple[str, str]], erm: Sequence[tuple[str, str]], baseline: str, d_max: int | None = None
) -> list[VariantPoint]:
    """Every point of the (label, folder) inputs; shifts against the inputs labelled ``baseline``
    (its theory for theory points, its ERM study for ERM points; the baseline's own shifts are NaN).

    ParameterError (one line) for a repeated (label, source), a baseline label absent from both
    lists, or ``d_max`` < 1; IntegrityError from the readers for a folder that fails verification."""
    if d_max is not None:
        check_int("d_max", d_max, 1)
    for source, items in ((THEORY, theory), (ERM, erm)):
        labels = [check_label(lab) for lab, _ in items]
        dup = next((lab for lab in labels if labels.count(lab) > 1), None)
        if dup is not None:
            raise ParameterError(f"label {dup!r} is given twice for {source}")
    th = dict(theory)
    em = dict(erm)
    if baseline not in th and baseline not in em:
        raise ParameterError(f"baseline must be one of the labels ({', '.join(sorted({*th, *em}))}), got {baseline!r}")
    for folder in (*th.values(), *em.values()):
        if not Path(folder).is_dir():
            raise ParameterError(f"folder {folder} does not exist")
    from dotattn.theory_vs_erm.output import read_alpha_c_part

    columns = {label: _theory_columns(folder) for label, folder in theory}  # each folder read once
    studies = {label: read_alpha_c_part(folder) for label, folder in erm}
    if d_max is not None:  # a study with no cell at d <= d_max would leave its rows out without a word
        for label, study in studies.items():
            ds = sorted({c.d for c in study.cells})
            if not ds or ds[0] > d_max:
                raise ParameterError(
                    f"d-max = {d_max}: the ERM study {label!r} ({em[label]}) has no cell at "
                    f"d <= {d_max} (its d: {', '.join(map(str, ds))})"
                )
    points: list[VariantPoint] = []
    for label, folder in theory:
        base = None if label == baseline else columns.get(baseline)
        points += theory_variant_points(label, folder, columns[label], base)
    for label, _ in erm:
        points += erm_variant_points(label, studies[label], None if label == baseline else studies.get(baseline), d_max)
    return points
