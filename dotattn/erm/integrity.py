"""The folder kinds of the ERM experiments, registered with :mod:`dotattn.core.integrity`: ``erm``
(``dotattn train-erm``: runs.csv, summary.csv, summary.json) and ``restarts`` (``dotattn erm-restarts``:
pairs.csv, runs.csv, summary.csv, summary.json). Torch-free."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.integrity import (
    FolderKind,
    check_finite,
    check_matrix,
    check_provenance_line,
    on_grid,
    read_records,
    read_verified_csv,
    read_verified_json,
    register_kind,
)
from dotattn.core.io import IntegrityError
from dotattn.core.status import CONVERGED, DIVERGED, ERM_STATUSES
from dotattn.erm.records import RunRecord
from dotattn.erm.restart_records import PairRecord, RestartRecord
from dotattn.positional_semantic.problem import Problem, problem_of

__all__ = ["check_run_rows", "check_summary_rows", "erm_parts", "ERM", "RESTARTS"]


def check_run_rows(path: Path, runs: Sequence[Any], problem: Problem, erm: Mapping[str, Any]) -> None:
    """ERM rows (:class:`dotattn.erm.records.RunRecord`) against the folder's ERM parameters: one row
    per (α, init, seed) of the run, n = round(α d), a status of :data:`dotattn.core.status.ERM_STATUSES`,
    shapes of μ (L×r), θ (r×r_t), q (r×r), finite measurements."""
    try:
        d = int(erm["d"])
        alphas = [float(a) for a in erm["alphas"]]
        inits = [str(x) for x in erm["inits"]]
        seeds = [int(s) for s in erm["seeds"]]
    except (KeyError, TypeError, ValueError):
        raise IntegrityError(f"{path.parent / 'summary.json'}: ERM parameters lack d, alphas, inits or seeds") from None
    r, rt, L = problem.rank, problem.teacher_rank, problem.L
    want = {(ia, init, s) for ia in range(len(alphas)) for init in inits for s in seeds}
    seen: set[tuple[int, str, int]] = set()
    for i, run in enumerate(runs, start=1):
        if not on_grid(run.alpha, alphas):
            raise IntegrityError(f"{path}: row {i}: alpha = {run.alpha:g} is not among the run's alphas")
        ia = min(range(len(alphas)), key=lambda k: abs(alphas[k] - run.alpha))
        if run.init not in inits or run.seed not in seeds:
            raise IntegrityError(f"{path}: row {i}: init {run.init!r} / seed {run.seed} not in the run's parameters")
        if run.n != max(1, round(alphas[ia] * d)) and run.n != round(alphas[ia] * d):
            raise IntegrityError(f"{path}: row {i}: n = {run.n} but alpha d = {alphas[ia] * d:g}")
        _check_status(path, i, run.status)
        key = (ia, run.init, run.seed)
        if key in seen:
            raise IntegrityError(
                f"{path}: row {i}: a second row for alpha = {run.alpha:g}, init {run.init}, seed {run.seed}"
            )
        seen.add(key)
        # a diverged run's numbers are where it stopped, not finite or bounded: only their shapes are checked
        ok = run.status != DIVERGED
        for name, val, shape in (("mu", run.mu, (L, r)), ("theta", run.theta, (r, rt)), ("q", run.q, (r, r))):
            _matrix(path, i, name, val, shape, ok)
        untied = problem.student == "untied"
        for name, shape in (("mu_k", (L, r)), ("theta_k", (r, rt)), ("q_kk", (r, r)), ("q_qk", (r, r))):
            if (getattr(run, name) is None) == untied:
                raise IntegrityError(
                    f"{path}: row {i}: {name} is {'missing' if untied else 'present'} but the "
                    f"student is {problem.student}"
                )
            if untied:
                _matrix(path, i, name, getattr(run, name), shape, ok)
        value = str(erm.get("value", "none"))
        for name, wanted in (("value_scale", value != "none"), ("value_correction", value == "low-rank")):
            if (getattr(run, name) is None) == wanted:
                raise IntegrityError(
                    f"{path}: row {i}: {name} is {'missing' if wanted else 'present'} but the value option is {value}"
                )
            if wanted and ok:
                check_finite(path, i, name, float(getattr(run, name)))
        for name in ("train_loss", "test_error"):
            if ok:
                check_finite(path, i, name, float(getattr(run, name)))
    missing = want - seen
    if missing:
        ia, init, s = sorted(missing)[0]
        raise IntegrityError(
            f"{path}: {len(runs)} rows, the run's parameters need {len(want)} (no row for "
            f"alpha = {alphas[ia]:g}, init {init}, seed {s})"
        )


def _matrix(path: Path, row: int, name: str, value: Any, shape: tuple[int, int], checked: bool) -> None:
    """A matrix of a run: its shape always; finite and within bounds unless the run diverged."""
    if checked:
        check_matrix(path, row, name, value, shape, finite=True)
        return
    a = np.asarray(value if value is not None else np.zeros(shape), dtype=float)
    if a.shape != shape:
        raise IntegrityError(f"{path}: row {row}: {name} has shape {a.shape}, the problem needs {shape}")


def _check_status(path: Path, row: int, status: str) -> None:
    if status not in ERM_STATUSES:
        raise IntegrityError(f"{path}: row {row}: status {status!r} is not one of {', '.join(ERM_STATUSES)}")


def erm_parts(folder: Path, csvs: Sequence[str]) -> tuple[Problem, dict[str, Any]]:
    """(problem, parameters) of a train-erm or erm-restarts folder, from summary.json's provenance,
    after the provenance line of each of ``csvs`` present is checked against them."""
    meta = read_verified_json(folder / "summary.json")
    params = (meta.get("provenance") or {}).get("parameters") if isinstance(meta.get("provenance"), dict) else None
    if not isinstance(params, dict):
        raise IntegrityError(f"{folder / 'summary.json'}: no provenance parameters")
    problem = problem_of(folder / "summary.json", params)
    for name in csvs:
        if (folder / name).is_file():
            check_provenance_line(folder / name, params)
    return problem, params


def _check_erm(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    problem, params = erm_parts(folder, ("runs.csv", "summary.csv"))
    path = folder / "runs.csv"
    runs = read_records(path, RunRecord)
    check_run_rows(path, runs, problem, params.get("erm") or {})
    if (folder / "summary.csv").is_file():
        check_summary_rows(folder / "summary.csv", runs)


SUMMARY_RTOL = 1e-9
"""summary.csv's mean train_loss per (α, init) against the mean of runs.csv's rows: both from the same
float64 values (written with repr(), read back exactly), summed in the same order; 1e-9 leaves room."""


def check_summary_rows(path: Path, runs: Sequence[Any]) -> None:
    """summary.csv against runs.csv: per (α, init) group (``selected`` aside) the number of runs, of converged
    runs and (where the column exists: older folders lack it) of diverged runs, and the mean training loss
    are those of its rows in runs.csv, and every group of runs.csv has its summary row."""
    groups: dict[tuple[float, str], list[Any]] = {}
    for run in runs:
        groups.setdefault((run.alpha, run.init), []).append(run)
    seen = set()
    for i, row in enumerate(read_verified_csv(path), start=1):
        try:
            alpha, init = float(row["alpha"]), str(row["init"])
            n_runs, n_conv = int(row["runs"]), int(row["converged"])
            n_div = int(row["diverged"]) if row.get("diverged") not in (None, "") else None
            stored = float(row["train_loss_mean"]) if row.get("train_loss_mean") not in (None, "") else math.nan
        except (KeyError, TypeError, ValueError) as err:
            raise IntegrityError(f"{path}: row {i} cannot be read ({type(err).__name__}: {err})") from None
        if init == "selected":
            continue
        key = next((k for k in groups if k[1] == init and on_grid(alpha, [k[0]])), None)
        if key is None:
            raise IntegrityError(f"{path}: row {i}: no runs at alpha = {alpha:g}, init {init} in runs.csv")
        seen.add(key)
        rows = groups[key]
        counts = (len(rows), sum(r.status == CONVERGED for r in rows), sum(r.status == DIVERGED for r in rows))
        if (n_runs, n_conv) != counts[:2] or (n_div is not None and n_div != counts[2]):
            raise IntegrityError(
                f"{path}: row {i}: {n_runs} runs ({n_conv} converged, {n_div} diverged) at alpha = {alpha:g}, "
                f"init {init}; runs.csv has {counts[0]} ({counts[1]}, {counts[2]})"
            )
        losses = np.array([float(r.train_loss) for r in rows])
        if np.all(np.isfinite(losses)) and math.isfinite(stored):
            mean = float(losses.mean())
            if abs(stored - mean) > SUMMARY_RTOL * max(abs(mean), abs(stored), 1e-300):
                raise IntegrityError(
                    f"{path}: row {i}: train_loss_mean = {stored!r} at alpha = {alpha:g}, init {init} is not the "
                    f"mean of its runs in runs.csv ({mean!r})"
                )
    missing = sorted(set(groups) - seen)
    if missing:
        raise IntegrityError(
            f"{path}: no row for alpha = {missing[0][0]:g}, init {missing[0][1]} (runs.csv has its runs)"
        )


def _check_restarts(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    problem, _ = erm_parts(folder, ("runs.csv", "pairs.csv", "summary.csv"))
    path = folder / "runs.csv"
    for i, run in enumerate(read_records(path, RestartRecord), start=1):
        _check_status(path, i, run.status)
        for name, val, shape in (
            ("mu", run.mu, (problem.L, problem.rank)),
            ("theta", run.theta, (problem.rank, problem.teacher_rank)),
            ("q", run.q, (problem.rank, problem.rank)),
        ):
            check_matrix(path, i, name, val, shape, finite=True)
        check_finite(path, i, "train_loss", float(run.train_loss))
    read_records(folder / "pairs.csv", PairRecord)


ERM = register_kind(FolderKind("erm", ("runs.csv", "summary.json"), _check_erm, optional=("summary.csv",)))
RESTARTS = register_kind(
    FolderKind(
        "restarts",
        ("pairs.csv", "runs.csv", "summary.json"),
        _check_restarts,
        optional=("summary.csv", "diagnostics.csv"),
    )
)
