"""Verification of output folders read back: the manifest (:mod:`dotattn.io`) and the rows' own
consistency — matrix shapes that fit the problem, finite values where a result is claimed, the
expected rows for the grid or runs the folder says it holds, and a provenance line that agrees
with the folder's parameters. Every failure is an :class:`dotattn.io.IntegrityError` whose one
line names the file and the mismatch.

Folder kinds (:func:`folder_kind`): ``phase-diagram`` (phase_diagram.csv, boundaries.csv,
summary.json), ``erm`` (runs.csv, summary.csv, summary.json), ``restarts`` (pairs.csv, runs.csv, summary.csv,
summary.json), ``comparison`` (comparison.csv,
comparison.json), ``alpha-c`` (crossings.csv, cells.csv, delta.csv, summary.json), ``paths-theory``
(``dotattn paths theory``: points.csv, heads.csv, alignment.csv, summary.json), ``paths-sample``
(``dotattn paths sample``: sample.json, U_draws.csv).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from dotattn.io import (MANIFEST_NAME, IntegrityError, csv_comment, read_csv, read_json_if_valid, verify_manifest,
                        write_manifest)
from dotattn.problem import ParameterError, Problem

__all__ = ["FOLDER_FILES", "folder_kind", "read_verified_csv", "read_verified_json", "check_matrix",
           "check_branch_rows", "check_run_rows", "check_erm_provenance", "verify_folder", "seal_folder",
           "read_record"]

FOLDER_FILES: dict[str, tuple[str, ...]] = {
    "aim-algorithms": ("alphas.csv", "runs.csv", "summary.json"),
    "restarts": ("pairs.csv", "runs.csv", "summary.json"),
    "phase-diagram": ("phase_diagram.csv", "summary.json"),
    "erm": ("runs.csv", "summary.json"),
    "comparison": ("comparison.csv", "comparison.json"),
    "alpha-c": ("crossings.csv", "cells.csv", "delta.csv", "summary.json"),
    "aim-state-evolution": ("points.csv", "summary.json"),
    "paths-theory": ("points.csv", "summary.json"),
    "paths-sample": ("sample.json", "U_draws.csv"),
}
"""The data files each folder kind must hold (the first one names the kind); :func:`verify_folder`
checks them and every other file the manifest lists (summary.csv, boundaries.csv, figures)."""

MATRIX_BOUND = 1e12
"""Largest overlap entry a row may hold: the overlaps are O(σ²) and O(1), V ≤ 1/λ ≤ 1e8 for the
smallest ridge allowed (:data:`dotattn.problem.LAMBDA_RANGE`); 1e12 leaves room and still refuses
an overflowed or edited value."""

ALL_BRANCHES: tuple[str, ...] = ("positional", "semantic", "mixed", "uninformative", "none")
"""Branch labels a theory row may carry (``none``: a catalogue entry that did not converge)."""

_TOL = 1e-9  # grid points are compared to 1e-9: they are written with repr() and read back exactly


def folder_kind(folder: str | os.PathLike) -> str:
    """The kind of a dotattn output folder, from its files; IntegrityError when none fits."""
    folder = Path(folder)
    for kind, files in FOLDER_FILES.items():
        if (folder / files[0]).is_file() and (kind != "aim-state-evolution" or _header_has(folder / files[0], "mmse")):
            return kind
    raise IntegrityError(f"{folder}: not a dotattn output folder (none of "
                         f"{', '.join(f[0] for f in FOLDER_FILES.values())})")


def _header_has(path: Path, column: str) -> bool:
    """Whether the first non-comment line of a CSV names ``column`` (tells an AIM state-evolution
    points.csv from an attention-paths one: the two kinds share the file name)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith("#"):
                    return column in line.strip().split(",")
    except (OSError, UnicodeDecodeError):
        return False
    return False


def read_verified_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV whose folder manifest was verified; IntegrityError if unreadable or empty."""
    try:
        rows = read_csv(path)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise IntegrityError(f"{path}: unreadable ({err})") from None
    return rows


def read_verified_json(path: Path) -> dict[str, Any]:
    obj = read_json_if_valid(path)
    if not isinstance(obj, dict):
        raise IntegrityError(f"{path}: unreadable or not a JSON object")
    return obj


def check_matrix(path: Path, row: int, name: str, value: Any, shape: tuple[int, int], finite: bool) -> None:
    """A matrix cell of data row ``row`` (1-based) must have ``shape`` and, if ``finite``, finite entries."""
    if value is None:
        if finite:
            raise IntegrityError(f"{path}: row {row}: {name} is missing")
        return
    a = np.asarray(value, dtype=float)
    if a.shape != shape:
        raise IntegrityError(f"{path}: row {row}: {name} has shape {a.shape}, the problem needs {shape}")
    if finite and not np.all(np.isfinite(a)):
        raise IntegrityError(f"{path}: row {row}: {name} has non-finite entries")
    if np.any(np.abs(a[np.isfinite(a)]) > MATRIX_BOUND):
        raise IntegrityError(f"{path}: row {row}: {name} has entries beyond {MATRIX_BOUND:g}")


def _finite(path: Path, row: int, name: str, x: float, bound: float = 1e6) -> None:
    if not math.isfinite(x) or abs(x) > bound:
        raise IntegrityError(f"{path}: row {row}: {name} = {x!r} is not a finite number within ±{bound:g}")


def _on_grid(x: float, grid: Sequence[float]) -> bool:
    return any(abs(x - g) <= _TOL * max(1.0, abs(g)) for g in grid)


def check_branch_rows(path: Path, points: Sequence[Any], problem: Problem, omegas: Sequence[float],
                      alphas: Sequence[float], branches: Sequence[str] | None = None,
                      grid_complete: bool = True) -> None:
    """Theory rows (:class:`dotattn.records.BranchPoint`) against their problem and grid: shapes of
    q, V (r×r), θ (r×r_t), μ (L×r); finite overlaps, e_t and ε_g for converged points; branch
    labels among ``branches``; every (ω, α) of the grid present (if ``grid_complete``); nothing off
    the ω grid."""
    from dotattn.status import CONVERGED
    r, rt, L = problem.rank, problem.teacher_rank, problem.L
    if not points:
        raise IntegrityError(f"{path}: no data rows")
    seen: set[tuple[int, int]] = set()
    for i, p in enumerate(points, start=1):
        conv = p.status == CONVERGED
        _finite(path, i, "omega", p.omega, 1.0)
        _finite(path, i, "alpha", p.alpha, 1e4)
        if not _on_grid(p.omega, omegas):
            raise IntegrityError(f"{path}: row {i}: omega = {p.omega:g} is not among the folder's omegas")
        for name, val, shape in (("q", p.q, (r, r)), ("V", p.V, (r, r)), ("theta", p.theta, (r, rt)),
                                 ("mu", p.mu, (L, r))):
            check_matrix(path, i, name, val, shape, finite=conv)
        if conv:
            _finite(path, i, "train_loss", p.train_loss)
            _finite(path, i, "test_error", p.test_error)
        iw = min(range(len(omegas)), key=lambda k: abs(omegas[k] - p.omega))
        ia = min(range(len(alphas)), key=lambda k: abs(alphas[k] - p.alpha)) if alphas else -1
        if ia >= 0 and _on_grid(p.alpha, alphas):
            seen.add((iw, ia))
        if branches is not None and p.branch not in branches:
            raise IntegrityError(f"{path}: row {i}: branch {p.branch!r} is not one of {', '.join(branches)}")
    if grid_complete:
        for iw, w in enumerate(omegas):
            for ia, a in enumerate(alphas):
                if (iw, ia) not in seen:
                    raise IntegrityError(f"{path}: no row at omega = {w:g}, alpha = {a:g} (rows removed?)")


def check_run_rows(path: Path, runs: Sequence[Any], problem: Problem, erm: Mapping[str, Any]) -> None:
    """ERM rows (:class:`dotattn.erm.records.RunRecord`) against the folder's ERM parameters: one row
    per (α, init, seed) of the run, n = round(α d), shapes of μ (L×r), θ (r×r_t), q (r×r), finite
    measurements."""
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
        if not _on_grid(run.alpha, alphas):
            raise IntegrityError(f"{path}: row {i}: alpha = {run.alpha:g} is not among the run's alphas")
        ia = min(range(len(alphas)), key=lambda k: abs(alphas[k] - run.alpha))
        if run.init not in inits or run.seed not in seeds:
            raise IntegrityError(f"{path}: row {i}: init {run.init!r} / seed {run.seed} not in the run's parameters")
        if run.n != max(1, round(alphas[ia] * d)) and run.n != round(alphas[ia] * d):
            raise IntegrityError(f"{path}: row {i}: n = {run.n} but alpha d = {alphas[ia] * d:g}")
        key = (ia, run.init, run.seed)
        if key in seen:
            raise IntegrityError(f"{path}: row {i}: a second row for alpha = {run.alpha:g}, init {run.init}, "
                                 f"seed {run.seed}")
        seen.add(key)
        for name, val, shape in (("mu", run.mu, (L, r)), ("theta", run.theta, (r, rt)), ("q", run.q, (r, r))):
            check_matrix(path, i, name, val, shape, finite=True)
        for name in ("train_loss", "test_error"):
            _finite(path, i, name, float(getattr(run, name)))
    missing = want - seen
    if missing:
        ia, init, s = sorted(missing)[0]
        raise IntegrityError(f"{path}: {len(runs)} rows, the run's parameters need {len(want)} (no row for "
                             f"alpha = {alphas[ia]:g}, init {init}, seed {s})")


def check_erm_provenance(path: Path, parameters: Mapping[str, Any]) -> None:
    """The provenance comment of an ERM (or attention-paths) CSV, ``...; provenance: {JSON}``, must carry
    the same parameters as the folder's summary.json (sample.json)."""
    comment = csv_comment(path)
    start = comment.find("{")
    if start < 0:
        return
    try:
        prov = json.loads(comment[start:])
    except ValueError:
        raise IntegrityError(f"{path}: its provenance line is not valid JSON") from None
    theirs = prov.get("parameters") if isinstance(prov, dict) else None
    if not isinstance(theirs, dict):
        return
    from dotattn.comparison import first_difference
    diff = first_difference(dict(parameters), theirs)
    if diff is not None:
        raise IntegrityError(f"{path}: its provenance line was made for {diff[0]} = {diff[2]}, summary.json says "
                             f"{diff[1]} (a file from another run)")


def _problem_of(path: Path, params: Any) -> Problem:
    try:
        return Problem.from_dict(params["problem"])
    except (KeyError, TypeError, ParameterError) as err:
        raise IntegrityError(f"{path}: 'parameters' has no valid problem ({err})") from None


def _phase_diagram_parts(folder: Path) -> tuple[Problem, list[float], list[float], dict]:
    summary = read_verified_json(folder / "summary.json")
    params = summary.get("parameters")
    if not isinstance(params, dict):
        raise IntegrityError(f"{folder / 'summary.json'}: no 'parameters'")
    problem = _problem_of(folder / "summary.json", params)
    try:
        omegas = [float(w) for w in params["omegas"]]
        alphas = [float(a) for a in params["alphas"]]
    except (KeyError, TypeError, ValueError):
        raise IntegrityError(f"{folder / 'summary.json'}: 'parameters' lacks the omega and alpha grids") from None
    return problem, omegas, alphas, summary


def _erm_parts(folder: Path, csvs: Sequence[str]) -> tuple[Problem, dict[str, Any]]:
    """(problem, parameters) of a train-erm or erm-restarts folder, from summary.json's provenance,
    after the provenance line of each of ``csvs`` present is checked against them."""
    meta = read_verified_json(folder / "summary.json")
    params = (meta.get("provenance") or {}).get("parameters") if isinstance(meta.get("provenance"), dict) else None
    if not isinstance(params, dict):
        raise IntegrityError(f"{folder / 'summary.json'}: no provenance parameters")
    problem = _problem_of(folder / "summary.json", params)
    for name in csvs:
        if (folder / name).is_file():
            check_erm_provenance(folder / name, params)
    return problem, params


def verify_folder(folder: str | os.PathLike, *, manifest: bool = True, kind: str | None = None) -> str:
    """Every check a reader makes, for a whole folder (manifest of every listed file, then the rows);
    returns the folder kind. ``manifest=False`` checks the rows only (used before sealing); ``kind``:
    the kind the caller needs (IntegrityError if the folder is another)."""
    from dotattn.erm.records import RunRecord
    from dotattn.erm.restart_records import PairRecord, RestartRecord
    from dotattn.records import BranchPoint
    folder = Path(folder)
    found = folder_kind(folder)
    if kind is not None and found != kind:
        raise IntegrityError(f"{folder}: a {found} folder, not a {kind} folder")
    kind = found
    if manifest:
        man = verify_manifest(folder, FOLDER_FILES[kind])
        verify_manifest(folder, tuple(man["files"]))
    if kind == "phase-diagram":
        problem, omegas, alphas, _ = _phase_diagram_parts(folder)
        path = folder / "phase_diagram.csv"
        points = _records(path, BranchPoint)
        check_branch_rows(path, points, problem, omegas, alphas, ALL_BRANCHES)
    elif kind == "erm":
        problem, params = _erm_parts(folder, ("runs.csv", "summary.csv"))
        path = folder / "runs.csv"
        check_run_rows(path, _records(path, RunRecord), problem, params.get("erm") or {})
    elif kind == "restarts":
        problem, _ = _erm_parts(folder, ("runs.csv", "pairs.csv", "summary.csv"))
        path = folder / "runs.csv"
        for i, run in enumerate(_records(path, RestartRecord), start=1):
            for name, val, shape in (("mu", run.mu, (problem.L, problem.rank)),
                                     ("theta", run.theta, (problem.rank, problem.teacher_rank)),
                                     ("q", run.q, (problem.rank, problem.rank))):
                check_matrix(path, i, name, val, shape, finite=True)
            _finite(path, i, "train_loss", float(run.train_loss))
        _records(folder / "pairs.csv", PairRecord)
    elif kind == "aim-state-evolution":
        _check_aim_state_evolution(folder, man if manifest else None)
    elif kind == "aim-algorithms":
        _check_aim_algorithms(folder)
    elif kind == "paths-theory":
        _check_paths_theory(folder)
    elif kind == "paths-sample":
        _check_paths_sample(folder)
    elif kind == "comparison":
        meta = read_verified_json(folder / "comparison.json")
        params = meta.get("parameters")
        if not isinstance(params, dict):
            raise IntegrityError(f"{folder / 'comparison.json'}: no 'parameters'")
        problem = _problem_of(folder / "comparison.json", params)
        theory = meta.get("theory")
        if not isinstance(theory, list):
            raise IntegrityError(f"{folder / 'comparison.json'}: no 'theory' rows")
        path = folder / "comparison.json"
        points = [read_record(path, i, BranchPoint, r) for i, r in enumerate(theory, start=1)]
        check_branch_rows(path, points, problem, [problem.omega], sorted({p.alpha for p in points}))
        if not read_verified_csv(folder / "comparison.csv"):
            raise IntegrityError(f"{folder / 'comparison.csv'}: no data rows")
    return kind


def _check_aim_state_evolution(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """points.csv of ``dotattn aim state-evolution``: every row readable, one channel, ρ and T; α > 0;
    status in the vocabulary; a converged point has 0 <= MMSE <= Q0 = 1 + ρ (the prior's error); the
    α of the rows are those the manifest was made for."""
    from dotattn.aim.state_evolution import SEPoint
    from dotattn.status import CONVERGED, STATUSES
    path = folder / "points.csv"
    points = _records(path, SEPoint)
    if not points:
        raise IntegrityError(f"{path}: no data rows")
    first = points[0]
    for i, p in enumerate(points, start=1):
        if (p.channel, p.rho, p.tokens) != (first.channel, first.rho, first.tokens):
            raise IntegrityError(f"{path}: row {i}: channel/rho/tokens differ from row 1")
        _finite(path, i, "alpha", p.alpha, 1e6)
        if p.alpha <= 0 or p.status not in STATUSES:
            raise IntegrityError(f"{path}: row {i}: alpha = {p.alpha!r} or status {p.status!r} is not valid")
        if p.status == CONVERGED:
            _finite(path, i, "mmse", p.mmse, 1.0 + p.rho + 1e-9)
            if p.mmse < -1e-12:
                raise IntegrityError(f"{path}: row {i}: mmse = {p.mmse!r} < 0")
    made_for = (manifest or {}).get("made_for") or {}
    alphas = made_for.get("alpha")
    if isinstance(alphas, list) and sorted(p.alpha for p in points) != sorted(float(a) for a in alphas):
        if len(alphas) != len(points) or not all(_on_grid(p.alpha, alphas) for p in points):
            raise IntegrityError(f"{path}: its alpha values are not the {len(alphas)} the manifest was made for")
    for name in ("channel", "rho", "tokens"):
        if name in made_for and made_for[name] != getattr(first, name):
            raise IntegrityError(f"{path}: {name} = {getattr(first, name)!r}, the manifest says {made_for[name]!r}")


def _check_aim_algorithms(folder: Path) -> None:
    """runs.csv and alphas.csv of ``dotattn aim amp|gd``: every row readable; errors finite (or NaN for a
    diverged run); every (estimator, α) of runs.csv summarised in alphas.csv with its number of data sets
    (seeds; GD has several initialisations per seed)."""
    from dotattn.aim.algo_study import AlphaRow, RunRow
    from dotattn.status import DIVERGED, STATUSES
    runs = _records(folder / "runs.csv", RunRow)
    alphas = _records(folder / "alphas.csv", AlphaRow)
    if not runs or not alphas:
        raise IntegrityError(f"{folder}: runs.csv or alphas.csv has no data rows")
    seeds: dict[tuple[str, float], set[int]] = {}
    for i, r in enumerate(runs, start=1):
        if r.status not in STATUSES:
            raise IntegrityError(f"{folder / 'runs.csv'}: row {i}: status {r.status!r} is not valid")
        if r.status != DIVERGED:
            _finite(folder / "runs.csv", i, "mse", r.mse, 1e6)
        seeds.setdefault((r.estimator, r.alpha), set()).add(r.seed)
    for i, a in enumerate(alphas, start=1):
        have = len(seeds.get((a.estimator, a.alpha), ()))
        if have != a.runs:
            raise IntegrityError(f"{folder / 'alphas.csv'}: row {i}: {a.runs} data sets of {a.estimator} at alpha = "
                                 f"{a.alpha:g}, runs.csv has {have}")


def _paths_parameters(path: Path, csvs: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, provenance parameters) of an attention-paths JSON file, after the provenance line of each
    of ``csvs`` (beside it) is checked against them."""
    meta = read_verified_json(path)
    prov = meta.get("provenance")
    params = prov.get("parameters") if isinstance(prov, dict) else None
    if not isinstance(params, dict):
        raise IntegrityError(f"{path}: no provenance parameters")
    for name in csvs:
        if (path.parent / name).is_file():
            check_erm_provenance(path.parent / name, params)
    return meta, params


def _check_paths_u(path: Path, row: int, U: Any, n: int) -> None:
    check_matrix(path, row, "U", U, (n, n), finite=True)
    if not np.allclose(U, np.transpose(U), rtol=1e-9, atol=1e-12):  # U is an order parameter, symmetric
        raise IntegrityError(f"{path}: row {row}: U is not symmetric")


def _check_paths_theory(folder: Path) -> None:
    """points.csv of ``dotattn paths theory``: every row readable, accuracy in [0, 1], finite loss, U
    symmetric with one row and column per path of summary.json."""
    from dotattn.paths.analysis import PathsPoint
    meta, _ = _paths_parameters(folder / "summary.json", ("points.csv", "heads.csv", "alignment.csv"))
    path = folder / "points.csv"
    points = _records(path, PathsPoint)
    if not points:
        raise IntegrityError(f"{path}: no data rows")
    for i, p in enumerate(points, start=1):
        _finite(path, i, "accuracy", p.accuracy, 1.0)
        if p.accuracy < 0:
            raise IntegrityError(f"{path}: row {i}: accuracy = {p.accuracy!r} is not in [0, 1]")
        _finite(path, i, "loss", p.loss)
        _check_paths_u(path, i, p.U, len(p.paths))
    if isinstance(meta.get("paths"), list) and points[0].subset == "all" and len(points[0].paths) != len(meta["paths"]):
        raise IntegrityError(f"{path}: row 1 has {len(points[0].paths)} paths, summary.json {len(meta['paths'])}")


def _check_paths_sample(folder: Path) -> None:
    """U_draws.csv of ``dotattn paths sample``: the draws sample.json counts, each a finite U with one
    entry per pair of its paths."""
    meta, _ = _paths_parameters(folder / "sample.json", ("U_draws.csv",))
    try:
        n, total = len(meta["paths"]), int(meta["draws_total"])
    except (KeyError, TypeError, ValueError):
        raise IntegrityError(f"{folder / 'sample.json'}: lacks paths or draws_total") from None
    path = folder / "U_draws.csv"
    rows = read_verified_csv(path)
    if len(rows) != total:
        raise IntegrityError(f"{path}: {len(rows)} draws, sample.json counts {total} (rows removed or added?)")
    cols = [f"U_{i}_{j}" for i in range(n) for j in range(i, n)]
    for k, row in enumerate(rows, start=1):
        try:
            vals = [float(row[c]) for c in cols]
        except (KeyError, TypeError, ValueError):
            raise IntegrityError(f"{path}: row {k}: lacks the U entries of {n} paths or holds a non-number") from None
        for c, v in zip(cols, vals):
            _finite(path, k, c, v, MATRIX_BOUND)


def read_record(path: Path, i: int, cls: Any, row: Mapping[str, Any]) -> Any:
    try:
        return cls.from_row(row)
    except (KeyError, TypeError, ValueError) as err:
        raise IntegrityError(f"{path}: row {i} cannot be read ({type(err).__name__}: {err})") from None


def _records(path: Path, cls: Any) -> list[Any]:
    return [read_record(path, i, cls, r) for i, r in enumerate(read_verified_csv(path), start=1)]


def seal_folder(folder: str | os.PathLike, command: str | None = None) -> Path:
    """Write the manifest of a folder made before manifests existed, after its rows pass every
    consistency check; the manifest says it was sealed after the fact, by which commit."""
    folder = Path(folder)
    if (folder / MANIFEST_NAME).exists():
        raise ParameterError(f"{folder / MANIFEST_NAME} exists already; verify the folder instead")
    kind = verify_folder(folder, manifest=False)
    meta = read_verified_json(folder / {"comparison": "comparison.json", "paths-sample": "sample.json"}.get(
        kind, "summary.json"))
    prov = meta.get("provenance") if isinstance(meta.get("provenance"), dict) else meta
    made_for = prov.get("parameters") if isinstance(prov.get("parameters"), dict) else {}
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".csv", ".json", ".png")
                   and p.name != MANIFEST_NAME and not p.name.startswith("."))
    from dotattn.io import provenance
    sealer = provenance({})
    return write_manifest(folder, files, made_for, command=command,
                          provenance_record={"git_commit": prov.get("git_commit"),
                                             "dotattn_version": prov.get("dotattn_version"),
                                             "created_utc": prov.get("created_utc")},
                          note=f"sealed after the fact by dotattn verify --seal at commit {sealer['git_commit']} "
                               f"({sealer['created_utc']}); the rows passed every consistency check then")

