"""The runs behind an ``erm-alpha-c`` cell: per seed, α and start, its overlaps and branch label (``starts.csv``).

Torch-free. A row holds what :class:`dotattn.erm.records.RunRecord` measured of one informed start's
run: status, training loss, the query's overlaps (``mu`` L×r, ``theta_over_sigma2`` r×r_t,
``q_over_sigma2`` r×r), the untied student's key overlaps when present (``mu_k``, ``theta_k``,
``q_kk``, ``q_qk``) and the branch label :func:`dotattn.erm.records.run_branch` gives the run.
These rows let a reader tell *which* branch each start ended on, so that a second crossing estimator
can use only the points where the two starts ended on different branches (:func:`different_branches`).

Folders written before these rows existed hold no ``starts.csv``; their cells carry no runs and the
second estimator is not computed for them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.io import IntegrityError
from dotattn.core.rows import matrix_cell, read_matrix
from dotattn.erm.records import run_branch

__all__ = [
    "STARTS",
    "START_MATRICES",
    "KEY_MATRICES",
    "STARTS_COLUMNS",
    "start_row",
    "starts_columns",
    "branch_grid",
    "different_branches",
    "check_start_rows",
]

STARTS = ("semantic", "positional")
"""The two informed starts of a paired cell, in the order of ``et_sem``, ``et_pos``."""
START_MATRICES = ("mu", "theta_over_sigma2", "q_over_sigma2")
"""The query's overlaps of a run (SPEC section 2 conventions, :class:`dotattn.erm.records.RunRecord`)."""
KEY_MATRICES = ("mu_k", "theta_k", "q_kk", "q_qk")
"""The untied student's key overlaps (absent for the tied student)."""
STARTS_COLUMNS = ("omega", "d", "seed", "alpha", "init", "status", "train_loss", "m", "branch", *START_MATRICES)
"""Columns of ``starts.csv`` (then the :data:`KEY_MATRICES` present in any row)."""


def start_row(omega: float, d: int, run: Any) -> dict[str, Any]:
    """The row of one run (a :class:`dotattn.erm.records.RunRecord`) of the cell (ω, d); matrices as nested lists."""
    row: dict[str, Any] = {
        "omega": float(omega),
        "d": int(d),
        "seed": int(run.seed),
        "alpha": float(run.alpha),
        "init": str(run.init),
        "status": str(run.status),
        "train_loss": float(run.train_loss),
        "m": float(run.m),
        "branch": str(run.branch),
    }
    for k in START_MATRICES:
        row[k] = matrix_cell(getattr(run, k))
    for k in KEY_MATRICES:
        v = getattr(run, k, None)
        if v is not None:
            row[k] = matrix_cell(v)
    return row


def starts_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """:data:`STARTS_COLUMNS` and the :data:`KEY_MATRICES` that any row has."""
    return STARTS_COLUMNS + tuple(k for k in KEY_MATRICES if any(r.get(k) not in (None, "") for r in rows))


def _index(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int], alphas: Sequence[float]) -> dict:
    """(seed index, α index, start) -> row; KeyError naming the first run that is missing or repeated."""
    out: dict[tuple[int, int, str], Mapping[str, Any]] = {}
    s_idx = {int(s): k for k, s in enumerate(seeds)}
    for r in rows:
        a = float(r["alpha"])
        j = next((j for j, b in enumerate(alphas) if abs(a - b) < 1e-9), None)
        k = s_idx.get(int(r["seed"]))
        if j is None or k is None or r["init"] not in STARTS:
            raise KeyError(f"run seed {r['seed']}, alpha {a:g}, start {r['init']!r} is not in the cell's grid")
        key = (k, j, str(r["init"]))
        if key in out:
            raise KeyError(f"run seed {r['seed']}, alpha {a:g}, start {r['init']} is listed twice")
        out[key] = r
    want = len(seeds) * len(alphas) * len(STARTS)
    if len(out) != want:
        raise KeyError(f"{len(out)} runs, the cell's grid has {want}")
    return out


def branch_grid(
    rows: Sequence[Mapping[str, Any]], seeds: Sequence[int], alphas: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """The branch labels ``(semantic start, positional start)``, each ``(S, A)`` object arrays."""
    idx = _index(rows, seeds, alphas)
    shape = (len(seeds), len(alphas))
    out = {s: np.empty(shape, dtype=object) for s in STARTS}
    for (k, j, s), r in idx.items():
        out[s][k, j] = str(r["branch"])
    return out["semantic"], out["positional"]


def different_branches(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int], alphas: Sequence[float]) -> np.ndarray:
    """``(S, A)`` bool: the two starts ended on different branches by their labels."""
    sem, pos = branch_grid(rows, seeds, alphas)
    return np.asarray(sem != pos, dtype=bool)


def _invariants(r: Mapping[str, Any]) -> np.ndarray:
    """‖θ‖/σ², m, Tr q/σ² of a row (the quantities :data:`dotattn.theory_vs_erm.alpha_c.SAME_MINIMUM_TOL` compares)."""
    th = read_matrix(r["theta_over_sigma2"])
    mu = read_matrix(r["mu"], column=True)
    q = read_matrix(r["q_over_sigma2"])
    if th is None or mu is None or q is None:
        raise ValueError("a run lacks its overlaps")
    return np.array([float(np.linalg.norm(th)), float(mu[0, 0]), float(np.trace(q))])


def check_start_rows(
    path: Path,
    rows: Sequence[Mapping[str, Any]],
    cell: Any,
    same_tol: float,
) -> None:
    """IntegrityError (one line) unless ``rows`` are the runs of ``cell`` (a
    :class:`dotattn.theory_vs_erm.alpha_c.CellRuns` rebuilt from ``delta.csv``): one row per seed, α and
    start; its training loss and status those of ``delta.csv``; its branch label the one
    :func:`dotattn.erm.records.run_branch` gives its overlaps; the cell's ``same_minimum`` flags those
    of the two starts' overlaps at ``same_tol``."""
    where = f"{path}: cell omega = {cell.omega:g}, d = {cell.d}"
    try:
        idx = _index(rows, cell.seeds, cell.alphas)
    except (KeyError, ValueError) as err:
        raise IntegrityError(f"{where}: {err}") from None
    et = {"semantic": cell.et_sem, "positional": cell.et_pos}
    st = {"semantic": cell.status_sem, "positional": cell.status_pos}
    for (k, j, s), r in sorted(idx.items()):
        at = f"{where}, seed {cell.seeds[k]}, alpha = {cell.alphas[j]:g}, {s} start"
        loss, want = float(r["train_loss"]), float(et[s][k, j])
        if not (loss == want or (math.isnan(loss) and math.isnan(want)) or abs(loss - want) <= 1e-12 * abs(want)):
            raise IntegrityError(f"{at}: train_loss {loss!r} is not the e_t of delta.csv ({want!r})")
        if str(r["status"]) != str(st[s][k, j]):
            raise IntegrityError(f"{at}: status {r['status']!r} is not that of delta.csv ({st[s][k, j]!r})")
        th, mu = read_matrix(r["theta_over_sigma2"]), read_matrix(r["mu"], column=True)
        if th is None or mu is None:
            raise IntegrityError(f"{at}: no overlaps")
        if run_branch(th, mu) != str(r["branch"]):
            raise IntegrityError(
                f"{at}: branch {r['branch']!r} is not the label of its overlaps ({run_branch(th, mu)!r})"
            )
    for k in range(len(cell.seeds)):
        for j in range(len(cell.alphas)):
            gap = np.max(np.abs(_invariants(idx[(k, j, "semantic")]) - _invariants(idx[(k, j, "positional")])))
            if bool(gap < same_tol) != bool(cell.same[k, j]):
                raise IntegrityError(
                    f"{where}, seed {cell.seeds[k]}, alpha = {cell.alphas[j]:g}: same_minimum is not what the "
                    f"two starts' overlaps give (they differ by {gap:.3g}, tolerance {same_tol:g})"
                )
