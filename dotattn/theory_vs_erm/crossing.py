"""The finite-size α_c estimator: per-seed crossings of Δe_t(α), intervals over seeds, and d → ∞.

Pure, vectorised numpy (no torch, no theory solver), so that it can be tested on synthetic curves.

Per seed ``s`` the ERM gives, on an α grid ``α_1 < … < α_A``, the training losses of the two
informed starts on the same data; ``Δ_s(α) = e_t(semantic) − e_t(positional)``. Grid points where
either run is not stationary, or where both runs ended in the same minimum (Δ is then rounding
noise), are *invalid* and skipped. The seed's α_c is the root of the first sign change of Δ from
``+`` (positional lower) to ``−`` (semantic lower) between consecutive valid points, by linear
interpolation. A seed without such a change has *no crossing*; a seed with more than one change
of sign (either direction) has *several* (its first ``+ → −`` root is still its α_c).

Over seeds: mean, standard error and a percentile bootstrap interval of the mean (seeded, so
reproducible). Finite-size extrapolation: weighted least squares of the per-d means against
``x = d^(−ν)`` (``ν = 1`` by default: ``α_c(d) = α_c(∞) + a/d``), with a bootstrap over seeds
(resampled independently within each d) for the interval of ``α_c(∞)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any

import numpy as np

__all__ = [
    "CROSSING",
    "NO_CROSSING",
    "SEVERAL",
    "SeedCrossing",
    "CellSummary",
    "FiniteSizeFit",
    "FIT_MODELS",
    "crossings",
    "bootstrap_mean_ci",
    "summarise_cell",
    "fit_finite_size",
]

CROSSING, NO_CROSSING, SEVERAL = "crossing", "no_crossing", "several_crossings"
"""Per-seed outcome: exactly one sign change (``+ → −``), none ``+ → −``, more than one change."""
FIT_MODELS: dict[str, float] = {"1/d": 1.0, "1/sqrt(d)": 0.5}
"""Finite-size models ``α_c(d) = α_c(∞) + a · d^(−ν)``: name -> ν."""


class _FlatRecord:
    """``to_row`` / ``from_row`` for frozen dataclasses of int, float and str fields."""

    def to_row(self) -> dict[str, Any]:
        if not is_dataclass(self) or isinstance(self, type):
            raise TypeError(f"{type(self).__name__} must be a dataclass to use _FlatRecord")
        return asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Any:
        """Rebuild from a CSV/JSON row (strings or numbers); '' and None -> NaN (floats) or '' (str);
        a missing int field is a ValueError naming it."""
        if not is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass to use _FlatRecord")
        out: dict[str, Any] = {}
        for f in fields(cls):
            v = row.get(f.name)
            kind = str(f.type)
            if kind.startswith("int"):
                if v is None or v == "":
                    raise ValueError(f"{f.name} is missing (an integer)")
                out[f.name] = int(float(v))
            elif kind.startswith("float"):
                out[f.name] = float("nan") if v is None or v == "" else float(v)
            else:
                out[f.name] = "" if v is None else str(v)
        return cls(**out)


@dataclass(frozen=True)
class SeedCrossing(_FlatRecord):
    """One seed's crossing at one (ω, d).

    ``alpha_c`` is NaN without a ``+ → −`` change; ``lo, hi`` the grid points that bracket it;
    ``changes`` the number of sign changes (either direction) between valid points; ``valid``
    the number of valid grid points; ``excluded`` the invalid points as ``alpha:reason`` items
    joined by ``;`` (reasons: a run's status, or ``same_minimum``).
    """

    omega: float
    d: int
    seed: int
    outcome: str
    alpha_c: float
    lo: float
    hi: float
    changes: int
    valid: int
    excluded: str


@dataclass(frozen=True)
class CellSummary(_FlatRecord):
    """α_c over the seeds of one (ω, d) cell: mean, standard error, bootstrap interval (``level``).

    ``seeds`` is the number of seeds run, ``crossings`` how many have an α_c (they enter the
    mean), ``no_crossing`` / ``several`` the counts of those outcomes, ``excluded_points`` the
    number of invalid (seed, α) grid points, ``seconds`` the cell's compute time.
    """

    omega: float
    d: int
    seeds: int
    crossings: int
    no_crossing: int
    several: int
    alpha_c: float
    se: float
    sd: float
    ci_lo: float
    ci_hi: float
    level: float
    excluded_points: int
    seconds: float


@dataclass(frozen=True)
class FiniteSizeFit(_FlatRecord):
    """``α_c(d) = alpha_inf + slope · d^(−nu)`` fitted to per-d means; bootstrap interval at ``level``.

    ``chi2`` is the weighted residual sum of squares (weights 1/se²) with ``dof`` degrees of freedom.
    """

    model: str
    nu: float
    alpha_inf: float
    ci_lo: float
    ci_hi: float
    slope: float
    chi2: float
    dof: int
    level: float


def crossings(
    alphas: Sequence[float], delta: np.ndarray, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """First ``+ → −`` crossing of every row of ``delta``.

    ``alphas (A,)`` increasing; ``delta (S, A)``; ``valid (S, A)`` bool (default: finite ``delta``).
    Returns ``(alpha_c, lo, hi, changes, n_valid)``, each ``(S,)``: the interpolated root (NaN if
    none), its bracketing grid points (NaN if none), the number of sign changes of any direction
    between consecutive valid points, and the number of valid points. A value of exactly 0 counts
    as ``−`` (semantic not higher).
    """
    a = np.asarray(alphas, dtype=float)
    D = np.atleast_2d(np.asarray(delta, dtype=float))
    S, A = D.shape
    ok = np.isfinite(D) if valid is None else (np.asarray(valid, dtype=bool) & np.isfinite(D))
    idx = np.where(ok, np.arange(A)[None, :], -1)
    last = np.maximum.accumulate(idx, axis=1)  # last valid index <= j
    prev = np.concatenate([np.full((S, 1), -1), last[:, :-1]], axis=1)  # last valid index < j
    has_prev = ok & (prev >= 0)
    p = np.clip(prev, 0, A - 1)
    Dp = np.take_along_axis(D, p, axis=1)
    pos_prev, pos_here = Dp > 0, D > 0
    down = has_prev & pos_prev & ~pos_here
    change = has_prev & (pos_prev != pos_here)
    first = np.argmax(down, axis=1)
    any_down = down.any(axis=1)
    rows = np.arange(S)
    j, i = first, p[rows, first]
    dj, di = D[rows, j], D[rows, i]
    with np.errstate(invalid="ignore", divide="ignore"):
        root = a[i] + di * (a[j] - a[i]) / (di - dj)
    nan = np.full(S, np.nan)
    return (
        np.where(any_down, root, nan),
        np.where(any_down, a[i], nan),
        np.where(any_down, a[j], nan),
        change.sum(axis=1),
        ok.sum(axis=1),
    )


def bootstrap_mean_ci(
    values: np.ndarray, level: float = 0.95, n_boot: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values (n,)`` (NaN, NaN for n < 2)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    tail = 0.5 * (1.0 - level)
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def summarise_cell(
    omega: float,
    d: int,
    records: Sequence[SeedCrossing],
    excluded_points: int = 0,
    seconds: float = 0.0,
    level: float = 0.95,
    n_boot: int = 4000,
    seed: int = 0,
) -> CellSummary:
    """:class:`CellSummary` of the per-seed crossings of one cell (seeds without α_c are counted, not averaged)."""
    vals = np.array([r.alpha_c for r in records], dtype=float)
    vals = vals[np.isfinite(vals)]
    n = vals.size
    mean = float(vals.mean()) if n else float("nan")
    sd = float(vals.std(ddof=1)) if n > 1 else float("nan")
    se = sd / math.sqrt(n) if n > 1 else float("nan")
    lo, hi = bootstrap_mean_ci(vals, level, n_boot, seed)
    return CellSummary(
        omega=float(omega),
        d=int(d),
        seeds=len(records),
        crossings=n,
        no_crossing=sum(r.outcome == NO_CROSSING for r in records),
        several=sum(r.outcome == SEVERAL for r in records),
        alpha_c=mean,
        se=se,
        sd=sd,
        ci_lo=lo,
        ci_hi=hi,
        level=level,
        excluded_points=int(excluded_points),
        seconds=float(seconds),
    )


def _wls(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted straight-line fits ``y ≈ c0 + c1 x`` for rows of ``y (B, K)``; returns ``(c0, c1)`` each ``(B,)``."""
    W = w.sum()
    xm = (w * x).sum() / W
    ym = (y * w).sum(axis=-1) / W
    sxx = (w * (x - xm) ** 2).sum()
    c1 = ((y - ym[..., None]) * (w * (x - xm))).sum(axis=-1) / sxx
    return ym - c1 * xm, c1


def fit_finite_size(
    ds: Sequence[int],
    per_d: Sequence[np.ndarray],
    model: str = "1/d",
    level: float = 0.95,
    n_boot: int = 4000,
    seed: int = 0,
) -> FiniteSizeFit:
    """Fit ``α_c(d) = α_c(∞) + a d^(−ν)`` to the means of ``per_d[k]`` (per-seed α_c at ``ds[k]``).

    Weighted least squares with weights ``1/se_k²`` (standard errors of the per-d means, fixed
    across bootstrap replicas); the interval of ``α_c(∞)`` is the percentile interval of the fits
    to ``n_boot`` replicas in which the seeds of every d are resampled with replacement.
    Needs at least two d with two finite values each (else NaN).
    """
    if model not in FIT_MODELS:
        raise ValueError(f"model must be one of {', '.join(FIT_MODELS)}, got {model!r}")
    nu = FIT_MODELS[model]
    groups = [np.asarray(v, dtype=float)[np.isfinite(np.asarray(v, dtype=float))] for v in per_d]
    keep = [k for k, g in enumerate(groups) if g.size >= 2]
    nan = float("nan")
    if len(keep) < 2:
        return FiniteSizeFit(model, nu, nan, nan, nan, nan, nan, 0, level)
    x = np.array([float(ds[k]) ** (-nu) for k in keep])
    gs = [groups[k] for k in keep]
    means = np.array([g.mean() for g in gs])
    se = np.array([g.std(ddof=1) / math.sqrt(g.size) for g in gs])
    w = 1.0 / np.maximum(se, 1e-12) ** 2
    c0, c1 = _wls(x, means[None, :], w)
    chi2 = float((w * (means - c0[0] - c1[0] * x) ** 2).sum())
    rng = np.random.default_rng(seed)
    boot = np.stack([g[rng.integers(0, g.size, size=(n_boot, g.size))].mean(axis=1) for g in gs], axis=1)
    b0, _ = _wls(x, boot, w)
    tail = 0.5 * (1.0 - level)
    lo, hi = np.quantile(b0, [tail, 1.0 - tail])
    return FiniteSizeFit(
        model=model,
        nu=nu,
        alpha_inf=float(c0[0]),
        ci_lo=float(lo),
        ci_hi=float(hi),
        slope=float(c1[0]),
        chi2=chi2,
        dof=len(keep) - 2,
        level=level,
    )
