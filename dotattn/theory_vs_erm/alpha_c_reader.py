"""The rows of an ``erm-alpha-c`` folder read and checked against each other: every cell rebuilt from
``delta.csv``, its crossings recomputed and compared with ``crossings.csv``, its seed count with ``cells.csv``.

Below both the folder kind's check (:mod:`dotattn.theory_vs_erm.integrity`) and the reader
(:func:`dotattn.theory_vs_erm.output.read_alpha_c_part`), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dotattn.core.integrity import read_verified_csv, read_verified_json
from dotattn.core.io import IntegrityError
from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.problem import Problem

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.theory_vs_erm.alpha_c import StudyPart
    from dotattn.theory_vs_erm.crossing import SeedCrossing

__all__ = ["alpha_c_rows"]


def alpha_c_rows(folder: Path) -> StudyPart:
    """The rows of an ``erm-alpha-c`` folder checked against each other (the part of
    :func:`read_alpha_c_part` after the manifest; the ``alpha-c`` folder kind's check, also before
    sealing): IntegrityError (one line) at the first row that cannot be read or does not agree."""
    try:
        return _alpha_c_rows(folder)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, ParameterError):
            raise
        raise IntegrityError(
            f"{folder}: a row of crossings.csv, cells.csv or delta.csv cannot be read "
            f"({type(err).__name__}: {err}; cut short or edited)"
        ) from None


def _alpha_c_rows(folder: Path) -> StudyPart:
    from dotattn.core.status import ERM_STATUSES, STATUS_CONVERGED
    from dotattn.theory_vs_erm.alpha_c import SAME_MINIMUM_TOL, AlphaCConfig, CellRuns, StudyPart, cell_crossings
    from dotattn.theory_vs_erm.alpha_c_starts import check_start_rows

    summary = read_verified_json(folder / "summary.json")
    params = (summary.get("provenance") or {}).get("parameters") or {}
    try:
        problem = Problem.from_dict(params["problem"])
        config = AlphaCConfig.from_dict(params["config"])
    except (KeyError, TypeError, ParameterError) as err:
        raise IntegrityError(f"{folder / 'summary.json'}: no readable problem and config ({err})") from None
    alphas = list(config.alphas)
    grid: dict[tuple[float, int], dict[int, dict[float, dict[str, str]]]] = {}
    path = folder / "delta.csv"
    for i, r in enumerate(read_verified_csv(path), start=1):
        try:
            key, seed, a = (float(r["omega"]), int(r["d"])), int(r["seed"]), float(r["alpha"])
            es, ep, dl = float(r["et_semantic"]), float(r["et_positional"]), float(r["delta"])
        except (KeyError, ValueError) as err:
            raise IntegrityError(f"{path}: row {i} cannot be read ({err})") from None
        if not any(abs(a - b) < 1e-9 for b in alphas):
            raise IntegrityError(f"{path}: row {i} has alpha = {a:g}, not on the study's grid")
        if np.isfinite(es) and np.isfinite(ep) and abs(dl - (es - ep)) > 1e-12 * max(abs(es), abs(ep), 1e-300):
            raise IntegrityError(f"{path}: row {i}: delta is not et_semantic - et_positional")
        bad = next((x for x in (r.get("status_semantic"), r.get("status_positional")) if x not in ERM_STATUSES), None)
        if bad is not None:
            raise IntegrityError(f"{path}: row {i}: status {bad!r} is not one of {', '.join(ERM_STATUSES)}")
        if seed in grid.setdefault(key, {}) and a in grid[key][seed]:
            raise IntegrityError(
                f"{path}: row {i} repeats omega = {key[0]:g}, d = {key[1]}, seed {seed}, alpha = {a:g}"
            )
        grid[key].setdefault(seed, {})[a] = r
    seconds = summary.get("cell_compute_seconds") or {}
    starts: dict[tuple[float, int], list[dict[str, str]]] | None = None
    if (folder / "starts.csv").is_file():
        starts = {}
        for r in read_verified_csv(folder / "starts.csv"):
            starts.setdefault((float(r["omega"]), int(r["d"])), []).append(r)
        extra_cells = sorted(set(starts) - set(grid))
        if extra_cells:
            raise IntegrityError(
                f"{folder / 'starts.csv'}: cell omega = {extra_cells[0][0]:g}, d = {extra_cells[0][1]} has no rows "
                "in delta.csv"
            )
    cells = []
    for (w, d), by_seed in sorted(grid.items()):
        seeds = sorted(by_seed)
        for s in seeds:
            if len(by_seed[s]) != len(alphas):
                raise IntegrityError(
                    f"{path}: cell omega = {w:g}, d = {d}, seed {s} has {len(by_seed[s])} of {len(alphas)} alpha values"
                )
        rows = [[by_seed[s][min(by_seed[s], key=lambda x: abs(x - a))] for a in alphas] for s in seeds]
        col = lambda name, conv, rows=rows: np.array([[conv(r[name]) for r in row] for row in rows])  # noqa: E731
        cell = CellRuns(
            omega=w,
            d=d,
            alphas=tuple(alphas),
            seeds=tuple(seeds),
            et_sem=col("et_semantic", float),
            et_pos=col("et_positional", float),
            status_sem=col("status_semantic", str).astype(object),
            status_pos=col("status_positional", str).astype(object),
            same=col("same_minimum", lambda x: x == "True"),
            seconds=float(seconds.get(f"{w:g}/{d}", 0.0)),
            device=f"read from {folder}",
        )
        if not np.array_equal(cell.valid(STATUS_CONVERGED), col("valid", lambda x: x == "True")):
            raise IntegrityError(f"{path}: cell omega = {w:g}, d = {d}: the valid flags are not those of its statuses")
        if starts is not None:
            rows_wd = starts.get((w, d), [])
            check_start_rows(folder / "starts.csv", rows_wd, cell, SAME_MINIMUM_TOL)
            cell = replace(cell, starts=tuple(rows_wd))
        cells.append(cell)
    committed = {
        (float(r["omega"]), int(r["d"]), int(r["seed"])): r for r in read_verified_csv(folder / "crossings.csv")
    }
    counts = {(float(r["omega"]), int(r["d"])): int(r["seeds"]) for r in read_verified_csv(folder / "cells.csv")}
    extra = sorted(set(counts) - {(c.omega, c.d) for c in cells})
    if extra:
        raise IntegrityError(
            f"{folder / 'cells.csv'}: cell omega = {extra[0][0]:g}, d = {extra[0][1]} has no rows in delta.csv"
        )
    for cell in cells:
        if counts.get((cell.omega, cell.d)) != len(cell.seeds):
            raise IntegrityError(
                f"{folder / 'cells.csv'}: cell omega = {cell.omega:g}, d = {cell.d} lists "
                f"{counts.get((cell.omega, cell.d))} seeds, delta.csv holds {len(cell.seeds)}"
            )
        for x in cell_crossings(cell, STATUS_CONVERGED):
            if not _same_crossing(committed.get((x.omega, x.d, x.seed)), x):
                raise IntegrityError(
                    f"{folder / 'crossings.csv'}: omega = {x.omega:g}, d = {x.d}, seed {x.seed} is not "
                    f"the crossing of its delta.csv rows"
                )
    if len(committed) != sum(len(c.seeds) for c in cells):
        raise IntegrityError(
            f"{folder / 'crossings.csv'}: {len(committed)} rows, delta.csv has {sum(len(c.seeds) for c in cells)} seeds"
        )
    _check_branch_crossings(folder, cells, starts is not None)
    return StudyPart(source=str(folder), problem=problem, config=config, cells=tuple(cells))


def _same_crossing(stored: dict[str, str] | None, x: SeedCrossing) -> bool:
    return (
        stored is not None
        and stored["outcome"] == x.outcome
        and int(stored["changes"]) == x.changes
        and int(stored["valid"]) == x.valid
        and (
            np.isnan(x.alpha_c)
            and stored["alpha_c"] in ("", "nan")
            or abs(float(stored["alpha_c"] or "nan") - x.alpha_c) <= 1e-12
        )
    )


def _check_branch_crossings(folder: Path, cells: list, have_starts: bool) -> None:
    """``branch_crossings.csv`` (the second estimator) recomputed from the cells and their starts."""
    from dotattn.core.status import STATUS_CONVERGED
    from dotattn.theory_vs_erm.alpha_c import cell_crossings

    path = folder / "branch_crossings.csv"
    if not path.is_file():
        return
    if not have_starts:
        raise IntegrityError(f"{path}: the folder has no starts.csv to recompute it from")
    stored = {(float(r["omega"]), int(r["d"]), int(r["seed"])): r for r in read_verified_csv(path)}
    n = 0
    for cell in cells:
        for x in cell_crossings(cell, STATUS_CONVERGED, by_branch=True):
            n += 1
            if not _same_crossing(stored.get((x.omega, x.d, x.seed)), x):
                raise IntegrityError(
                    f"{path}: omega = {x.omega:g}, d = {x.d}, seed {x.seed} is not the crossing of its delta.csv "
                    "and starts.csv rows"
                )
    if len(stored) != n:
        raise IntegrityError(f"{path}: {len(stored)} rows, delta.csv has {n} seeds")
