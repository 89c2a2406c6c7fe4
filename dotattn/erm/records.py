"""Typed records of ERM results (torch-free): one :class:`RunRecord` per run, its row columns
(:data:`RUN_COLUMNS`), the summary columns and the column documentation (:data:`COLUMN_DOCS`).

Rows follow the codec of :mod:`dotattn.core.rows` (matrices always nested lists; in CSV their JSON
text). Statuses are the shared vocabulary of :mod:`dotattn.core.status` (training's ``max_steps`` is
``not_converged``); branch labels come from :func:`dotattn.core.status.branch_label` with the
finite-size thresholds :data:`BRANCH_THETA` and :data:`BRANCH_M`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dotattn.core.rows import matrix_cell, read_bool, read_float, read_int, read_matrix, read_text
from dotattn.core.status import CONVERGED, DIVERGED, NOT_CONVERGED, STALLED
from dotattn.positional_semantic.labels import branch_label

__all__ = [
    "RunRecord",
    "SummaryRecord",
    "summarise_group",
    "RUN_COLUMNS",
    "VARIANT_COLUMNS",
    "run_columns",
    "SUMMARY_COLUMNS",
    "SUMMARY_METRICS",
    "COLUMN_DOCS",
    "BRANCH_THETA",
    "BRANCH_M",
    "run_branch",
]

BRANCH_THETA = 0.1
"""A run counts as semantic when ``‖QᵀQ*‖_F/d = ‖θ‖_F/σ² ≥ BRANCH_THETA``."""
BRANCH_M = 0.05
"""A run counts as positional when ``max_l ‖μ_l‖ ≥ BRANCH_M``."""


def run_branch(theta_over_sigma2: np.ndarray, mu: np.ndarray) -> str:
    """Branch a run ended on, from ``θ/σ²`` (r×r_t) and ``μ`` (L×r), with the thresholds above.

    The student's rank is ``mu``'s column count. A rank-1 run above both thresholds (at finite d
    the other overlap is noise: e.g. θ/σ² = 0.22 on a positional run at d = 100) is labelled by
    the overlap that is further above its own threshold, in units of that threshold; "mixed"
    needs r >= 2 (one positional and one semantic column).
    """
    mu = np.asarray(mu, dtype=float)
    m_ratio = float(np.linalg.norm(mu, axis=1).max()) / BRANCH_M
    theta_ratio = float(np.linalg.norm(theta_over_sigma2)) / BRANCH_THETA
    return branch_label(
        positional=m_ratio >= 1, semantic=theta_ratio >= 1, rank=mu.shape[1], positional_dominant=m_ratio >= theta_ratio
    )


_MATRICES = ("mu", "theta", "q", "theta_over_sigma2", "q_over_sigma2")
_VARIANT_MATRICES = ("mu_k", "theta_k", "q_kk", "q_qk")
_VARIANT_FLOATS = ("value_scale", "value_correction")
_FLOATS = (
    "alpha",
    "rel_change",
    "grad_norm",
    "train_loss",
    "train_error",
    "test_error",
    "test_error_se",
    "linear_train_error",
    "linear_test_error",
)


@dataclass(frozen=True, eq=False)
class RunRecord:
    """Measurements of one run (one alpha, initialisation and seed) at dimension ``d``.

    Overlaps use SPEC section 2's conventions: ``theta = σ² QᵀQ*/d`` (r×r_t), ``q = σ² QᵀQ/d``
    (r×r), ``mu[l] = Qᵀp_l/√d`` (L×r); ``m`` = the signed μ₁ = ``mu[0, 0]`` and ``m_norm`` = ‖μ₁‖
    (derived from ``mu``). ``train_loss = R(Q)/d`` (ridge included), ``train_error`` the mean of
    ``‖ŷ−y‖²/(2d)`` over the training set, ``test_error`` (± standard error ``test_error_se``) the
    same on the fresh test set; ``linear_*`` the baseline's. ``status``: :mod:`dotattn.core.status`.
    The untied student's key overlaps (``mu_k`` L×r, ``theta_k = σ² KᵀQ*/d`` r×r_t, ``q_kk = σ² KᵀK/d``,
    ``q_qk = σ² QᵀK/d``, r×r; the query's are ``mu``, ``theta``, ``q``) and the value option's ``value_scale`` v
    and ``value_correction`` ‖U Wᵥᵀ‖_F/d are None for runs without them (and their columns are absent).
    """

    alpha: float
    n: int
    init: str
    seed: int
    status: str
    steps: int
    rel_change: float
    grad_norm: float
    train_loss: float
    train_error: float
    test_error: float
    test_error_se: float
    linear_train_error: float
    linear_test_error: float
    mu: np.ndarray
    theta: np.ndarray
    q: np.ndarray
    theta_over_sigma2: np.ndarray
    q_over_sigma2: np.ndarray
    branch: str
    selected: bool
    d: int | None = None
    mu_k: np.ndarray | None = None
    theta_k: np.ndarray | None = None
    q_kk: np.ndarray | None = None
    q_qk: np.ndarray | None = None
    value_scale: float | None = None
    value_correction: float | None = None

    @property
    def m(self) -> float:
        """Signed μ₁ = ``mu[0, 0]``."""
        return float(self.mu[0, 0])

    @property
    def m_norm(self) -> float:
        """‖μ₁‖ over the student directions."""
        return float(np.linalg.norm(self.mu[0]))

    def to_row(self) -> dict[str, Any]:
        """The row of ``runs.csv`` / ``summary.json["runs"]`` (columns :data:`RUN_COLUMNS`)."""
        out: dict[str, Any] = {}
        for k in RUN_COLUMNS:
            v = getattr(self, k)
            out[k] = matrix_cell(v) if k in _MATRICES else v
        for k in VARIANT_COLUMNS:
            v = getattr(self, k)
            if v is not None:
                out[k] = matrix_cell(v) if k in _VARIANT_MATRICES else v
        return out

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        """Inverse of :meth:`to_row` for JSON and CSV rows (``m``, ``m_norm`` are recomputed from ``mu``)."""
        kw: dict[str, Any] = {k: read_float(row[k]) for k in _FLOATS}
        kw.update({k: read_matrix(row[k], column=(k == "mu")) for k in _MATRICES})
        kw.update(
            n=read_int(row["n"]),
            seed=read_int(row["seed"]),
            steps=read_int(row["steps"]),
            d=read_int(row["d"]) if row.get("d") not in (None, "") else None,
            init=read_text(row["init"]),
            status=read_text(row["status"]),
            branch=read_text(row["branch"]),
            selected=read_bool(row["selected"]),
        )
        present = lambda k: row.get(k) not in (None, "")  # noqa: E731
        kw.update({k: read_matrix(row[k], column=(k == "mu_k")) for k in _VARIANT_MATRICES if present(k)})
        kw.update({k: read_float(row[k]) for k in _VARIANT_FLOATS if present(k)})
        return cls(**kw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunRecord) and self.to_row() == other.to_row()

    __hash__ = None  # type: ignore[assignment]


RUN_COLUMNS: tuple[str, ...] = (
    "alpha",
    "n",
    "d",
    "init",
    "seed",
    "status",
    "steps",
    "rel_change",
    "grad_norm",
    "train_loss",
    "train_error",
    "test_error",
    "test_error_se",
    "linear_train_error",
    "linear_test_error",
    "m",
    "m_norm",
    "mu",
    "theta_over_sigma2",
    "q_over_sigma2",
    "theta",
    "q",
    "branch",
    "selected",
)
VARIANT_COLUMNS: tuple[str, ...] = _VARIANT_MATRICES + _VARIANT_FLOATS
"""Columns written after :data:`RUN_COLUMNS` when the runs have them (untied student, value option);
folders written without them read back with these fields None."""


def run_columns(runs: Any) -> tuple[str, ...]:
    """:data:`RUN_COLUMNS` and the :data:`VARIANT_COLUMNS` that any of ``runs`` (records) has."""
    runs = list(runs)
    return RUN_COLUMNS + tuple(k for k in VARIANT_COLUMNS if any(getattr(r, k) is not None for r in runs))


SUMMARY_METRICS: tuple[str, ...] = (
    "m",
    "m_norm",
    "theta_over_sigma2",
    "q_over_sigma2",
    "theta",
    "q",
    "train_loss",
    "train_error",
    "test_error",
    "linear_train_error",
    "linear_test_error",
    "steps",
    "grad_norm",
)
SUMMARY_COLUMNS: tuple[str, ...] = (
    "alpha",
    "n",
    "d",
    "init",
    "runs",
    "converged",
    "not_converged",
    "diverged",
    "stalled",
    "branches",
    "selected_inits",
) + tuple(f"{k}_{s}" for k in SUMMARY_METRICS for s in ("mean", "std"))


@dataclass(frozen=True, eq=False)
class SummaryRecord:
    """Mean and sample std (ddof = 1; NaN for one run) over the runs of one (alpha, init) group
    (``init = "selected"``: per seed the informed run of lower train_loss).

    ``mean``, ``std``: metric (:data:`SUMMARY_METRICS`) -> a number, or a nested list for a matrix;
    ``branches``, ``selected_inits``: ``label:count`` pairs joined by ``;``.
    """

    alpha: float
    n: int
    d: int
    init: str
    runs: int
    converged: int
    not_converged: int
    diverged: int
    branches: str
    selected_inits: str
    mean: dict
    std: dict
    stalled: int = 0

    def to_row(self) -> dict[str, Any]:
        """The flat row of ``summary.csv`` (columns :data:`SUMMARY_COLUMNS`)."""
        row: dict[str, Any] = {k: getattr(self, k) for k in SUMMARY_COLUMNS[:11]}
        for k in SUMMARY_METRICS:
            row[f"{k}_mean"], row[f"{k}_std"] = self.mean[k], self.std[k]
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SummaryRecord:
        """Inverse of :meth:`to_row` (JSON or CSV cells; rows written before the ``stalled`` column have none)."""

        def metric(x: Any) -> Any:  # a nested list (matrix metric) or a number
            if isinstance(x, list) or str(x).lstrip().startswith("["):
                m = read_matrix(x)
                if m is None:  # cannot happen: a list, or the JSON text of one, is a matrix
                    raise ValueError(f"not a matrix cell: {x!r}")
                return m.tolist()
            return read_float(x)

        return cls(
            alpha=read_float(row["alpha"]),
            init=read_text(row["init"]),
            branches=read_text(row["branches"]),
            selected_inits=read_text(row["selected_inits"]),
            **{k: read_int(row[k]) for k in ("n", "d", "runs", "converged", "not_converged", "diverged")},
            stalled=read_int(row["stalled"]) if row.get("stalled") not in (None, "") else 0,
            mean={k: metric(row[f"{k}_mean"]) for k in SUMMARY_METRICS},
            std={k: metric(row[f"{k}_std"]) for k in SUMMARY_METRICS},
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SummaryRecord) and json.dumps(self.to_row()) == json.dumps(other.to_row())

    __hash__ = None  # type: ignore[assignment]


COLUMN_DOCS: dict[str, str] = {
    "alpha": "sample ratio; n = round(alpha*d) training samples",
    "init": "initialisation (semantic: Q=Q*, positional: Q along p_1, random: small N(0,1)); "
    "'selected' rows: per seed, the informed run of lower train_loss",
    "status": "converged (gd, adam: |dR|/|R| <= tol; lbfgs, batched-lbfgs: relative stationarity <= tol), "
    "not_converged (step budget spent; training's max_steps), stalled (the line search found no lower "
    "risk before tol was met) or diverged (R not finite); the vocabulary of dotattn.core.status",
    "steps": "optimisation steps applied",
    "rel_change": "last relative change of R per step",
    "grad_norm": "||grad_Q R||_F at the final Q",
    "train_loss": "R(Q)/d = sum_mu ||yhat-y||^2/(2d^2) + lambda ||Q||^2/(2d)  (SPEC e_t)",
    "train_error": "mean over training samples of ||yhat-y||^2/(2d)",
    "test_error": "mean over test_samples fresh samples of ||yhat-y||^2/(2d)  (SPEC eps_g)",
    "test_error_se": "standard error of test_error from the test-set sample",
    "linear_train_error": "linear baseline yhat = B X (least squares, ridge baseline_ridge) on the training set",
    "linear_test_error": "linear baseline's test error on the same test set",
    "m": "signed mu_1 = mu[0][0] = (Q^T p_1)_1/sqrt(d) (first student direction; the toy model's m)",
    "m_norm": "||mu_1|| = ||Q^T p_1||/sqrt(d) (gauge invariant)",
    "mu": "mu_l = Q^T p_l/sqrt(d): L x r nested list (rows l = 1..L)",
    "matrices": "mu, theta, q, theta_over_sigma2, q_over_sigma2 are nested lists (rows of columns; 1x1 as [[x]]); "
    "in CSV cells their JSON text",
    "d": "token dimension",
    "theta_over_sigma2": "Q^T Q*/d (r x r_t)",
    "q_over_sigma2": "Q^T Q/d (r x r)",
    "theta": "SPEC theta = sigma^2 Q^T Q*/d",
    "q": "SPEC q = sigma^2 Q^T Q/d",
    "branch": f"semantic if ||theta||_F/sigma^2 >= {BRANCH_THETA}, positional if max_l ||mu_l|| >= {BRANCH_M}, "
    "mixed if both, uninformative if neither",
    "selected": "this run is the informed run of lower train_loss at its (alpha, seed)",
    "mu_k, theta_k, q_kk, q_qk": "untied student only: mu_k[l] = K^T p_l/sqrt(d) (L x r), theta_k = sigma^2 K^T Q*/d "
    "(r x r_t), q_kk = sigma^2 K^T K/d, q_qk = sigma^2 Q^T K/d (r x r); the query's are "
    "mu, theta, q",
    "value_scale": "value option scalar or low-rank: v of the value matrix V = v I (+ U W^T/d)",
    "value_correction": "value option low-rank: ||U W^T||_F/d, the Frobenius norm of the correction of V",
    "runs": "number of seeds aggregated",
    "converged, not_converged, diverged, stalled": "how many of the aggregated runs ended with that status",
    "branches": "count of runs per reached branch",
    "selected_inits": "selected rows: how many seeds selected each informed initialisation",
    "*_mean, *_std": "mean and sample standard deviation (ddof=1) over seeds; empty std for one seed",
}


def _counts(labels: Sequence[str]) -> str:
    """``label:count`` pairs joined by ``;``, in the order the labels first appear."""
    keys = sorted(set(labels), key=list(labels).index)
    return ";".join(f"{k}:{list(labels).count(k)}" for k in keys)


def summarise_group(runs: Sequence[RunRecord], alpha: float, n: int, d: int, init: str) -> SummaryRecord:
    """The :class:`SummaryRecord` of one (alpha, init) group of runs (``init = "selected"``: the selected
    runs): counts per status, branches, and per metric of :data:`SUMMARY_METRICS` the mean and the sample
    std (ddof = 1; NaN for one run). Written by ``train-erm`` and recomputed by ``verify --strict``."""
    mean, std = {}, {}
    for k in SUMMARY_METRICS:
        vals = np.stack([np.asarray(getattr(r, k), dtype=float) for r in runs])
        sd = vals.std(axis=0, ddof=1) if len(runs) > 1 else np.full(vals.shape[1:], np.nan)
        cell = (lambda a: float(a)) if vals.ndim == 1 else matrix_cell  # noqa: E731
        mean[k], std[k] = cell(vals.mean(axis=0)), cell(sd)
    return SummaryRecord(
        alpha=alpha,
        n=n,
        d=d,
        init=init,
        runs=len(runs),
        converged=sum(r.status == CONVERGED for r in runs),
        not_converged=sum(r.status == NOT_CONVERGED for r in runs),
        diverged=sum(r.status == DIVERGED for r in runs),
        stalled=sum(r.status == STALLED for r in runs),
        branches=_counts([r.branch for r in runs]),
        selected_inits=_counts([r.init for r in runs]) if init == "selected" else "",
        mean=mean,
        std=std,
    )
