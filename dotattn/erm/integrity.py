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
    same_number,
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


def _strict_erm(folder: Path) -> None:
    """``verify --strict``: every row of summary.csv (the ``selected`` rows too) recomputed from runs.csv
    (:func:`dotattn.erm.records.summarise_group`): the counts per status, the branch counts, the selected
    inits, and each metric's mean and sample std (to :data:`dotattn.core.integrity.STRICT_RTOL`). A summary.csv written before the
    ``m_norm`` column existed holds ‖μ₁‖ as ``m`` (what ``m`` meant then): its m is compared with m_norm."""
    from dotattn.erm.records import summarise_group

    path = folder / "summary.csv"
    if not path.is_file():
        return
    runs = read_records(folder / "runs.csv", RunRecord)
    for i, row in enumerate(read_verified_csv(path), start=1):
        try:
            alpha, init, n, d = float(row["alpha"]), str(row["init"]), int(row["n"]), int(row["d"])
        except (KeyError, TypeError, ValueError) as err:
            raise IntegrityError(f"{path}: row {i} cannot be read ({type(err).__name__}: {err})") from None
        group = [
            r for r in runs if on_grid(r.alpha, [alpha]) and (r.selected if init == "selected" else r.init == init)
        ]
        if not group:
            raise IntegrityError(f"{path}: row {i}: no runs at alpha = {alpha:g}, init {init} in runs.csv")
        mine = summarise_group(group, alpha, n, d, init).to_row()
        if "m_norm_mean" not in row:  # written before m_norm existed, when m was ||mu_1|| (m_norm now)
            mine["m_mean"], mine["m_std"] = mine["m_norm_mean"], mine["m_norm_std"]
        for column, stored in row.items():
            if column not in mine:
                continue
            want = mine[column]
            ok = stored == str(want) if isinstance(want, str) else same_number(stored, want)
            if not ok:
                raise IntegrityError(
                    f"{path}: row {i}: {column} = {stored} at alpha = {alpha:g}, init {init}; recomputed from "
                    f"runs.csv: {want!r} (verify --strict)"
                )


def _pair_key(seed: int, a: int, b: int) -> tuple[int, int, int]:
    return (seed, a, b)


def _check_restart_files(folder: Path, runs: Sequence[Any], pairs: Sequence[Any]) -> None:
    """The files of an erm-restarts folder against each other: summary.json's runs, summary and diagnostics
    are runs.csv's, summary.csv's and diagnostics.csv's rows; pairs.csv holds exactly the pairs a < b of
    converged restarts of one seed on one branch, each with |e_t(a) − e_t(b)|; summary.csv's runs, converged
    and pairs counts per (seed, branch) are those of runs.csv and pairs.csv."""
    from dotattn.erm.restart_records import POOLED_SEED

    meta = read_verified_json(folder / "summary.json")
    for key, name in (("runs", "runs.csv"), ("summary", "summary.csv"), ("diagnostics", "diagnostics.csv")):
        stored = meta.get(key)
        if not (folder / name).is_file():
            if isinstance(stored, list) and stored:
                raise IntegrityError(f"{folder / 'summary.json'}: holds {key} but the folder has no {name}")
            continue
        rows = read_verified_csv(folder / name)
        if not isinstance(stored, list) or len(stored) != len(rows):
            raise IntegrityError(
                f"{folder / 'summary.json'}: '{key}' has {len(stored) if isinstance(stored, list) else 'no'} "
                f"entries, {name} {len(rows)} rows"
            )
        for i, (row, item) in enumerate(zip(rows, stored, strict=True), start=1):
            if not isinstance(item, dict):
                raise IntegrityError(f"{folder / 'summary.json'}: {key} entry {i} is not an object")
            for column, cell in row.items():
                value = item.get(column)
                same = (
                    str(value) == cell or (value is None and cell == "")
                    if isinstance(value, (str, bool)) or value is None
                    else same_number(cell, value, rtol=1e-12)
                )
                if not same:
                    raise IntegrityError(
                        f"{folder / 'summary.json'}: {key} entry {i}: {column} = {value!r}, row {i} of {name} "
                        f"says {cell}"
                    )
    by_seed = {(r.seed, r.restart): r for r in runs}
    want = {
        _pair_key(a.seed, a.restart, b.restart)
        for a in runs
        for b in runs
        if a.seed == b.seed
        and a.restart < b.restart
        and a.status == CONVERGED
        and b.status == CONVERGED
        and a.branch == b.branch
    }
    path = folder / "pairs.csv"
    seen = set()
    for i, p in enumerate(pairs, start=1):
        pk = _pair_key(p.seed, p.a, p.b)
        if pk not in want:
            raise IntegrityError(
                f"{path}: row {i}: seed {p.seed}, restarts {p.a} and {p.b} are not two converged restarts of "
                f"one branch in runs.csv"
            )
        if pk in seen:
            raise IntegrityError(f"{path}: row {i}: a second row for seed {p.seed}, restarts {p.a} and {p.b}")
        seen.add(pk)
        ra, rb = by_seed[(p.seed, p.a)], by_seed[(p.seed, p.b)]
        if p.branch != ra.branch or not same_number(p.train_loss_diff, abs(ra.train_loss - rb.train_loss), 1e-12):
            raise IntegrityError(
                f"{path}: row {i}: branch {p.branch} / train_loss_diff {p.train_loss_diff!r} are not those of "
                f"restarts {p.a} and {p.b} of seed {p.seed} in runs.csv"
            )
    if want - seen:
        s0, a0, b0 = sorted(want - seen)[0]
        raise IntegrityError(
            f"{path}: no row for seed {s0}, restarts {a0} and {b0} (two converged restarts of a branch)"
        )
    if not (folder / "summary.csv").is_file():
        return
    path = folder / "summary.csv"
    for i, row in enumerate(read_verified_csv(path), start=1):
        try:
            seed, branch = int(row["seed"]), str(row["branch"])
            counts = (int(row["runs"]), int(row["converged"]), int(row["pairs"]))
        except (KeyError, TypeError, ValueError) as err:
            raise IntegrityError(f"{path}: row {i} cannot be read ({type(err).__name__}: {err})") from None
        mine = [r for r in runs if r.branch == branch and (seed == POOLED_SEED or r.seed == seed)]
        prs = [p for p in pairs if p.branch == branch and (seed == POOLED_SEED or p.seed == seed)]
        want_counts = (len(mine), sum(r.status == CONVERGED for r in mine), len(prs))
        if counts != want_counts:
            raise IntegrityError(
                f"{path}: row {i}: seed {seed}, branch {branch}: runs, converged, pairs = {counts}; runs.csv and "
                f"pairs.csv have {want_counts}"
            )


def _strict_restarts(folder: Path) -> None:
    """``verify --strict``: summary.csv recomputed from runs.csv and pairs.csv
    (:func:`dotattn.erm.restart_records.summarise_restarts`: per (seed, branch) and pooled, the distinct
    minima, e_t and ε_g mean / std / extremes, D_ab and overlap statistics), every row and column."""
    from dotattn.erm.restart_records import summarise_restarts

    path = folder / "summary.csv"
    if not path.is_file():
        return
    runs = read_records(folder / "runs.csv", RestartRecord)
    pairs = read_records(folder / "pairs.csv", PairRecord)
    mine = [s.to_row() for s in summarise_restarts(runs, pairs)]
    rows = read_verified_csv(path)
    if len(rows) != len(mine):
        raise IntegrityError(f"{path}: {len(rows)} rows; recomputed from runs.csv and pairs.csv: {len(mine)}")
    for i, (row, want) in enumerate(zip(rows, mine, strict=True), start=1):
        for column, stored in row.items():
            if column not in want:
                continue
            w = want[column]
            ok = stored == str(w) if isinstance(w, str) else same_number(stored, w)
            if not ok:
                raise IntegrityError(
                    f"{path}: row {i}: {column} = {stored}; recomputed from runs.csv and pairs.csv: {w!r} "
                    f"(verify --strict)"
                )


def _check_restarts(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    problem, _ = erm_parts(folder, ("runs.csv", "pairs.csv", "summary.csv"))
    path = folder / "runs.csv"
    runs = read_records(path, RestartRecord)
    for i, run in enumerate(runs, start=1):
        _check_status(path, i, run.status)
        for name, val, shape in (
            ("mu", run.mu, (problem.L, problem.rank)),
            ("theta", run.theta, (problem.rank, problem.teacher_rank)),
            ("q", run.q, (problem.rank, problem.rank)),
        ):
            check_matrix(path, i, name, val, shape, finite=True)
        check_finite(path, i, "train_loss", float(run.train_loss))
    pairs = read_records(folder / "pairs.csv", PairRecord)
    _check_restart_files(folder, runs, pairs)


ERM = register_kind(
    FolderKind("erm", ("runs.csv", "summary.json"), _check_erm, optional=("summary.csv",), strict=_strict_erm)
)
RESTARTS = register_kind(
    FolderKind(
        "restarts",
        ("pairs.csv", "runs.csv", "summary.json"),
        _check_restarts,
        optional=("summary.csv", "diagnostics.csv"),
        strict=_strict_restarts,
    )
)
