"""The record of one variant point (α_c at one ω of one variant from one source) and its verified reader.

Below :mod:`dotattn.theory_vs_erm.variants` (which computes the points), so that the folder check
(:mod:`dotattn.theory_vs_erm.integrity`), the writer (:mod:`dotattn.theory_vs_erm.output`) and the figure
(:mod:`dotattn.theory_vs_erm.plotting`) read the record without importing the computation.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from dotattn.core.integrity import read_records
from dotattn.core.io import IntegrityError
from dotattn.theory_vs_erm.crossing import _FlatRecord

__all__ = ["VariantPoint", "VARIANT_COLUMNS", "THEORY", "ERM", "read_variant_points"]

THEORY, ERM = "theory", "erm"
"""The two sources of a point."""


@dataclass(frozen=True)
class VariantPoint(_FlatRecord):
    """α_c at one ω of one variant from one source, and its shift from the baseline.

    ``source``: ``theory`` or ``erm``; ``d``: the ERM cell's dimension (0 for theory); ``alpha_c``,
    ``se``, ``ci_lo``, ``ci_hi``: the estimate, its standard error and interval (theory: ± 2 s.e.;
    ERM: bootstrap of the mean over seeds at ``level``); ``seeds`` / ``crossings``: seeds run and
    seeds with a crossing (0 for theory); ``shift``, ``shift_se``, ``shift_ci_lo``, ``shift_ci_hi``:
    variant − baseline (NaN for the baseline itself or where the baseline lacks the cell);
    ``paired_seeds``: the seeds the ERM shift is averaged over; ``shift_alphas``: the α points the
    baseline's crossings were computed on for it (those of its grid that the variant's grid has; 0 for
    theory); ``folder``: the input folder.
    """

    label: str
    source: str
    omega: float
    d: int
    alpha_c: float
    se: float
    ci_lo: float
    ci_hi: float
    level: float
    seeds: int
    crossings: int
    shift: float
    shift_se: float
    shift_ci_lo: float
    shift_ci_hi: float
    paired_seeds: int
    shift_alphas: int
    folder: str


VARIANT_COLUMNS: tuple[str, ...] = tuple(VariantPoint.__dataclass_fields__)


def read_variant_points(path: str | os.PathLike) -> list[VariantPoint]:
    """The rows of a verified ``variants.csv`` (IntegrityError at the first unreadable row)."""
    points = read_records(Path(path), VariantPoint)
    for i, p in enumerate(points, start=1):
        if p.source not in (THEORY, ERM):
            raise IntegrityError(f"{path}: row {i}: source {p.source!r} is not theory or erm")
        if math.isfinite(p.alpha_c) and not (p.ci_lo <= p.alpha_c <= p.ci_hi or not math.isfinite(p.ci_lo)):
            raise IntegrityError(f"{path}: row {i}: alpha_c outside its interval")
    return points
