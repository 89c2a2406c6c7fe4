"""Typed records of the restarts study (torch-free): one :class:`RestartRecord` per restart, one
:class:`PairRecord` per pair of restarts on the same branch (see :mod:`dotattn.erm.restarts`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dotattn.core.rows import matrix_cell, read_flat, read_float, read_int, read_matrix, read_text
from dotattn.core.status import CONVERGED

__all__ = [
    "RestartRecord",
    "PairRecord",
    "RestartSummary",
    "POOLED_SEED",
    "RESTART_SUMMARY_DOCS",
    "RESTART_COLUMNS",
    "PAIR_COLUMNS",
    "RESTART_SUMMARY_COLUMNS",
    "SAME_MINIMUM",
    "summarise_restarts",
]

_R_MATRICES = ("mu", "theta", "q", "teacher_rho", "teacher_nu")
_R_FLOATS = ("alpha", "stationarity", "train_loss", "train_error", "test_error", "test_error_se")
RESTART_COLUMNS: tuple[str, ...] = (
    "d",
    "alpha",
    "n",
    "seed",
    "restart",
    "start",
    "status",
    "steps",
    "stationarity",
    "train_loss",
    "train_error",
    "test_error",
    "test_error_se",
    "branch",
    "mu",
    "theta",
    "q",
    "teacher_rho",
    "teacher_nu",
)


@dataclass(frozen=True, eq=False)
class RestartRecord:
    """One restart: e_t = ``train_loss`` (R/d, ridge included), ``train_error`` (data term per sample),
    ε_g = ``test_error`` ± ``test_error_se``; overlaps in SPEC's conventions ``q = σ²QᵀQ/d`` (r×r),
    ``theta = σ²QᵀQ*/d`` (r×r_t), ``mu = PQ/√d`` (L×r); the teacher's ``teacher_rho = σ²Q*ᵀQ*/d``
    (r_t×r_t) and ``teacher_nu = Q*ᵀPᵀ/√d`` (r_t×L); ``stationarity`` the relative stationarity
    reached; ``branch`` from :func:`dotattn.erm.records.run_branch`."""

    d: int
    alpha: float
    n: int
    seed: int
    restart: int
    start: str
    status: str
    steps: int
    stationarity: float
    train_loss: float
    train_error: float
    test_error: float
    test_error_se: float
    branch: str
    mu: np.ndarray
    theta: np.ndarray
    q: np.ndarray
    teacher_rho: np.ndarray
    teacher_nu: np.ndarray

    def to_row(self) -> dict[str, Any]:
        return {k: (matrix_cell(getattr(self, k)) if k in _R_MATRICES else getattr(self, k)) for k in RESTART_COLUMNS}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RestartRecord:
        kw: dict[str, Any] = {k: read_float(row[k]) for k in _R_FLOATS}
        kw.update({k: read_matrix(row[k]) for k in _R_MATRICES})
        kw.update({k: read_int(row[k]) for k in ("d", "n", "seed", "restart", "steps")})
        kw.update({k: read_text(row[k]) for k in ("start", "status", "branch")})
        return cls(**kw)


PAIR_COLUMNS: tuple[str, ...] = ("d", "alpha", "seed", "a", "b", "branch", "distance", "overlap", "train_loss_diff")


@dataclass(frozen=True)
class PairRecord:
    """Two converged restarts ``a < b`` of one seed on the same ``branch``: ``distance`` D_ab and
    ``overlap`` (module docstring), ``train_loss_diff`` = |e_t(a) − e_t(b)|."""

    d: int
    alpha: float
    seed: int
    a: int
    b: int
    branch: str
    distance: float
    overlap: float
    train_loss_diff: float

    def to_row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in PAIR_COLUMNS}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PairRecord:
        return cls(**read_flat(row, PAIR_COLUMNS, ints=("d", "seed", "a", "b"), texts=("branch",)))


SAME_MINIMUM = 1e-4
"""Two converged restarts count as the same minimum when their distance D_ab < SAME_MINIMUM."""
POOLED_SEED = -1
"""The ``seed`` of the summary rows that pool every seed of a branch (tables print it as 'all')."""
RESTART_SUMMARY_DOCS: dict[str, str] = {
    "seed": f"data seed (teacher + data) of the row; {POOLED_SEED}: every seed of the branch pooled",
    "minima": f"distinct minima among the converged runs (runs closer than D = {SAME_MINIMUM:g} are one); "
    f"pooled rows: summed over the seeds",
    "distance_mean": "mean distance D_ab between two converged restarts of one seed on the branch",
}
"""Column notes of ``summary.csv`` written into ``summary.json["columns"]``."""
RESTART_SUMMARY_COLUMNS: tuple[str, ...] = (
    "d",
    "alpha",
    "seed",
    "branch",
    "runs",
    "converged",
    "minima",
    "train_loss_mean",
    "train_loss_std",
    "train_loss_min",
    "train_loss_max",
    "test_error_mean",
    "test_error_std",
    "pairs",
    "distance_mean",
    "distance_max",
    "distance_min",
    "overlap_mean",
)


@dataclass(frozen=True)
class RestartSummary:
    """Per (seed, branch) — ``seed =`` :data:`POOLED_SEED` (-1) pools the seeds — the converged runs on that branch: count,
    distinct ``minima`` (clusters of D_ab < :data:`SAME_MINIMUM`, single linkage; pooled: summed over
    seeds), e_t and ε_g mean / std (ddof = 1) / extremes, and D_ab over its pairs."""

    d: int
    alpha: float
    seed: int
    branch: str
    runs: int
    converged: int
    minima: int
    train_loss_mean: float
    train_loss_std: float
    train_loss_min: float
    train_loss_max: float
    test_error_mean: float
    test_error_std: float
    pairs: int
    distance_mean: float
    distance_max: float
    distance_min: float
    overlap_mean: float

    def to_row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in RESTART_SUMMARY_COLUMNS}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RestartSummary:
        return cls(
            **read_flat(
                row,
                RESTART_SUMMARY_COLUMNS,
                ints=("d", "seed", "runs", "converged", "minima", "pairs"),
                texts=("branch",),
            )
        )


def _clusters(members: list[int], pairs: list[PairRecord]) -> int:
    """Number of single-linkage clusters of ``members`` joined by pairs with D < SAME_MINIMUM."""
    parent = {m: m for m in members}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        if p.distance < SAME_MINIMUM and p.a in parent and p.b in parent:
            parent[find(p.a)] = find(p.b)
    return len({find(m) for m in members})


def _stats(x: list[float]) -> tuple[float, float, float, float]:
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return (float("nan"),) * 4
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else float("nan"), float(a.min()), float(a.max())


def summarise_restarts(runs: list[RestartRecord], pairs: list[PairRecord]) -> list[RestartSummary]:
    """One :class:`RestartSummary` per (seed, branch) of the converged runs, then one per branch pooling the seeds."""
    if not runs:
        return []
    d, alpha = runs[0].d, runs[0].alpha
    out = []
    branches = sorted({r.branch for r in runs})
    seeds = sorted({r.seed for r in runs})
    for branch in branches:
        pooled_minima = 0
        for seed in seeds + [POOLED_SEED]:
            pooled = seed == POOLED_SEED
            mine = [r for r in runs if r.branch == branch and (pooled or r.seed == seed)]
            conv = [r for r in mine if r.status == CONVERGED]
            prs = [p for p in pairs if p.branch == branch and (pooled or p.seed == seed)]
            if not mine:
                continue
            if pooled:
                minima = pooled_minima
            else:
                minima = _clusters([r.restart for r in conv], prs)
                pooled_minima += minima
            et = _stats([r.train_loss for r in conv])
            eg = _stats([r.test_error for r in conv])
            D = _stats([p.distance for p in prs])
            ov = _stats([p.overlap for p in prs])
            out.append(
                RestartSummary(
                    d=d,
                    alpha=alpha,
                    seed=seed,
                    branch=branch,
                    runs=len(mine),
                    converged=len(conv),
                    minima=minima,
                    train_loss_mean=et[0],
                    train_loss_std=et[1],
                    train_loss_min=et[2],
                    train_loss_max=et[3],
                    test_error_mean=eg[0],
                    test_error_std=eg[1],
                    pairs=len(prs),
                    distance_mean=D[0],
                    distance_max=D[3],
                    distance_min=D[2],
                    overlap_mean=ov[0],
                )
            )
    return out
