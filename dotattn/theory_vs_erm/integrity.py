"""The folder kinds of the theory–ERM studies, registered with :mod:`dotattn.core.integrity`:
``comparison`` (``dotattn compare``: comparison.csv, comparison.json), ``alpha-c``
(``dotattn erm-alpha-c``: crossings.csv, cells.csv, delta.csv, summary.json; its rows are re-derived
and checked by :func:`dotattn.theory_vs_erm.output.read_alpha_c_part`, which every reader of the
kind uses), ``variants`` (``dotattn variants``: variants.csv, summary.json) and ``landscape`` (``dotattn landscape``:
best.csv, crossings.csv, crossing_by_k.csv, summary.json)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.integrity import (
    FolderKind,
    first_difference,
    read_record,
    read_verified_csv,
    read_verified_json,
    register_kind,
    same_number,
)
from dotattn.core.io import IntegrityError, to_jsonable
from dotattn.positional_semantic.integrity import check_branch_rows
from dotattn.positional_semantic.problem import problem_of
from dotattn.positional_semantic.records import BranchPoint

__all__ = ["COMPARISON", "ALPHA_C", "VARIANTS", "LANDSCAPE"]


def _check_comparison(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    meta = read_verified_json(folder / "comparison.json")
    params = meta.get("parameters")
    if not isinstance(params, dict):
        raise IntegrityError(f"{folder / 'comparison.json'}: no 'parameters'")
    problem = problem_of(folder / "comparison.json", params)
    theory = meta.get("theory")
    if not isinstance(theory, list):
        raise IntegrityError(f"{folder / 'comparison.json'}: no 'theory' rows")
    path = folder / "comparison.json"
    points = [read_record(path, i, BranchPoint, r) for i, r in enumerate(theory, start=1)]
    check_branch_rows(path, points, problem, [problem.omega], sorted({p.alpha for p in points}))
    if not read_verified_csv(folder / "comparison.csv"):
        raise IntegrityError(f"{folder / 'comparison.csv'}: no data rows")
    _comparison_table(folder, meta, points, problem.sigma)


def _comparison_table(folder: Path, meta: Mapping[str, Any], points: list[Any], sigma: float) -> list[Any]:
    """comparison.json's table is comparison.csv's rows (every column, the same numbers), and each row's
    theory values are those of the converged theory point of comparison.json at its (α, branch)."""
    from dotattn.theory_vs_erm.comparison import QUANTITIES, ComparisonRow, _values

    path = folder / "comparison.csv"
    rows = read_verified_csv(path)
    table = meta.get("table")
    if not isinstance(table, list) or len(table) != len(rows):
        n = len(table) if isinstance(table, list) else "no"
        raise IntegrityError(f"{folder / 'comparison.json'}: 'table' has {n} rows, comparison.csv {len(rows)}")
    out = []
    theory = {(round(p.alpha, 9), p.branch): p for p in points if p.converged}
    for i, (row, item) in enumerate(zip(rows, table, strict=True), start=1):
        rec = read_record(path, i, ComparisonRow, row)
        if not isinstance(item, dict):
            raise IntegrityError(f"{folder / 'comparison.json'}: table row {i} is not an object")
        mine = to_jsonable(rec.to_row())
        for column, value in mine.items():
            stored = item.get(column)
            same = (
                str(stored) == str(value) if isinstance(value, (str, bool)) else same_number(stored, value, rtol=1e-12)
            )
            if not same:
                raise IntegrityError(
                    f"{folder / 'comparison.json'}: table row {i}: {column} = {stored!r}, comparison.csv's row {i} "
                    f"says {value!r}"
                )
        t = theory.get((round(rec.alpha, 9), rec.branch))
        if t is None:
            raise IntegrityError(
                f"{path}: row {i}: no converged {rec.branch} theory point at alpha = {rec.alpha:g} in comparison.json"
            )
        want = _values(t, sigma)
        for k in QUANTITIES:
            if not same_number(rec.theory[k], want[k], rtol=1e-12):
                raise IntegrityError(
                    f"{path}: row {i}: theory_{k} = {rec.theory[k]!r}; comparison.json's {rec.branch} point at "
                    f"alpha = {rec.alpha:g} gives {want[k]!r}"
                )
        out.append(rec)
    return out


def _strict_comparison(folder: Path) -> None:
    """``verify --strict``: each row's differences re-derived from its theory value and ERM mean (abs_diff =
    mean − theory, rel_diff = abs_diff/|theory|, diff_kind from the quantity's scale over the converged theory
    points, :data:`dotattn.theory_vs_erm.comparison.NEAR_ZERO`), max_rel_diff over the branch's compared
    quantities and ``agrees`` at the tolerance comparison.json records."""
    import math

    from dotattn.theory_vs_erm.comparison import (
        ABSOLUTE,
        COMPARED,
        NEAR_ZERO,
        RELATIVE,
        _values,
        quantity_scales,
    )

    meta = read_verified_json(folder / "comparison.json")
    params = meta["parameters"]
    problem = problem_of(folder / "comparison.json", params)
    path = folder / "comparison.json"
    points = [read_record(path, i, BranchPoint, r) for i, r in enumerate(meta["theory"], start=1)]
    try:
        tolerance = float(params["tolerance"])
    except (KeyError, TypeError, ValueError):
        raise IntegrityError(f"{path}: parameters lack the tolerance") from None
    scale = quantity_scales([_values(p, problem.sigma) for p in points if p.converged])
    path = folder / "comparison.csv"
    for i, rec in enumerate(_comparison_table(folder, meta, points, problem.sigma), start=1):
        compared = COMPARED.get(rec.branch, ())
        ok, rels = [], []
        for k in rec.theory:
            t, m = rec.theory[k], rec.erm_mean[k]
            absd = m - t
            zero = abs(t) < NEAR_ZERO * scale[k] or abs(t) < 1e-12
            kind = ABSOLUTE if zero else RELATIVE
            rel = math.nan if zero else absd / abs(t)
            got = (rec.abs_diff[k], rec.rel_diff[k], rec.diff_kind[k])
            if not (same_number(got[0], absd) and same_number(got[1], rel) and got[2] == kind):
                raise IntegrityError(
                    f"{path}: row {i}: {k}'s differences {got} are not those of its theory value and ERM mean "
                    f"({absd!r}, {rel!r}, {kind}) (verify --strict)"
                )
            if k in compared:
                ok.append(abs(rel) <= tolerance if kind == RELATIVE else abs(absd) <= tolerance * scale[k])
                if kind == RELATIVE:
                    rels.append(abs(rel))
        want_max = max(rels) if rels else math.nan
        if not same_number(rec.max_rel_diff, want_max) or rec.agrees != all(ok):
            raise IntegrityError(
                f"{path}: row {i}: max_rel_diff = {rec.max_rel_diff!r}, agrees = {rec.agrees}; recomputed at "
                f"tolerance {tolerance:g}: {want_max!r}, {all(ok)} (verify --strict)"
            )


def _check_alpha_c(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """crossings.csv, cells.csv and delta.csv of ``dotattn erm-alpha-c`` against each other and the study's
    grid (:func:`dotattn.theory_vs_erm.alpha_c_reader.alpha_c_rows`: every cell rebuilt from delta.csv, its crossings
    recomputed and compared with crossings.csv, its seed count with cells.csv)."""
    from dotattn.theory_vs_erm.alpha_c_reader import alpha_c_rows

    for name in ("crossings.csv", "cells.csv", "delta.csv"):
        if not read_verified_csv(folder / name):
            raise IntegrityError(f"{folder / name}: no data rows")
    alpha_c_rows(folder)


COMPARISON = register_kind(
    FolderKind(
        "comparison",
        ("comparison.csv", "comparison.json"),
        _check_comparison,
        meta_file="comparison.json",
        optional=("finite_size.json",),
        strict=_strict_comparison,
    )
)


def _strict_alpha_c(folder: Path) -> None:
    """``verify --strict`` for an erm-alpha-c study: every row of cells.csv recomputed from its seeds' rows in
    crossings.csv (:func:`dotattn.theory_vs_erm.crossing.summarise_cell`, bootstrap-free part): the seed
    count, the crossings (seeds with an α_c, which enter the mean), the no-crossing and several-crossings
    counts, and the mean, sd (ddof = 1) and standard error of α_c. The bootstrap interval is not recomputed."""
    import math

    import numpy as np

    from dotattn.theory_vs_erm.crossing import NO_CROSSING, SEVERAL

    by_cell: dict[tuple[float, int], list[dict[str, str]]] = {}
    for row in read_verified_csv(folder / "crossings.csv"):
        by_cell.setdefault((round(float(row["omega"]), 12), int(row["d"])), []).append(row)
    path = folder / "cells.csv"
    for i, row in enumerate(read_verified_csv(path), start=1):
        w, d = float(row["omega"]), int(row["d"])
        mine = by_cell.get((round(w, 12), d), [])
        vals = np.array([float(r["alpha_c"]) if r["alpha_c"] not in ("", None) else math.nan for r in mine])
        vals = vals[np.isfinite(vals)]
        n = int(vals.size)
        sd = float(vals.std(ddof=1)) if n > 1 else math.nan
        want = {
            "seeds": len(mine),
            "crossings": n,
            "no_crossing": sum(r["outcome"] == NO_CROSSING for r in mine),
            "several": sum(r["outcome"] == SEVERAL for r in mine),
            "alpha_c": float(vals.mean()) if n else math.nan,
            "sd": sd,
            "se": sd / math.sqrt(n) if n > 1 else math.nan,
        }
        for column, value in want.items():
            if not same_number(row.get(column), value):
                raise IntegrityError(
                    f"{path}: row {i}: {column} = {row.get(column)} at omega = {w:g}, d = {d}; recomputed from "
                    f"crossings.csv: {value!r} (verify --strict)"
                )


ALPHA_C = register_kind(
    FolderKind(
        "alpha-c",
        ("crossings.csv", "cells.csv", "delta.csv", "summary.json"),
        _check_alpha_c,
        optional=("starts.csv", "branch_crossings.csv"),
        strict=_strict_alpha_c,
    )
)


def _check_variants(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    from dotattn.theory_vs_erm.variant_records import read_variant_points

    points = read_variant_points(folder / "variants.csv")
    if not points:
        raise IntegrityError(f"{folder / 'variants.csv'}: no data rows")
    stored = read_verified_json(folder / "summary.json").get("points")
    if not isinstance(stored, list) or len(stored) != len(points):
        raise IntegrityError(f"{folder / 'summary.json'}: 'points' is not the rows of variants.csv")
    for i, (point, row) in enumerate(zip(points, stored, strict=True), start=1):
        mine = to_jsonable(point.to_row())
        if not isinstance(row, dict) or first_difference(mine, row) is not None or first_difference(row, mine):
            raise IntegrityError(f"{folder / 'summary.json'}: point {i} differs from row {i} of variants.csv")


VARIANTS = register_kind(FolderKind("variants", ("variants.csv", "summary.json"), _check_variants))


def _landscape_rows(folder: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """study_runs.csv, best.csv, crossings.csv and crossing_by_k.csv of a ``dotattn landscape`` folder, checked against each
    other: best.csv the best of K of study_runs.csv's runs (:func:`dotattn.theory_vs_erm.landscape.best_from_runs`, K_max per d
    the largest K of best.csv), a full grid per d (both branches, every seed at every α, K = 1, 2, …, K_max and every start), best
    of K never rising with K and never below the every-start value; crossings.csv the crossings recomputed from
    best.csv (:func:`dotattn.theory_vs_erm.landscape.crossings_by_k`); crossing_by_k.csv one row per (d, search,
    K) with the seed and outcome counts of crossings.csv."""
    import math

    from dotattn.core.integrity import read_records
    from dotattn.core.validation import ParameterError
    from dotattn.theory_vs_erm.landscape import (
        BRANCHES,
        BestOfK,
        KCrossing,
        KSummary,
        StudyRun,
        best_from_runs,
        crossings_by_k,
        loss_grid,
    )

    best = read_records(folder / "best.csv", BestOfK)
    if not best:
        raise IntegrityError(f"{folder / 'best.csv'}: no data rows")
    runs = read_records(folder / "study_runs.csv", StudyRun)
    k_max = {d: max(r.k for r in best if r.d == d) for d in {r.d for r in best}}
    try:
        derived = best_from_runs(runs, k_max)
    except ParameterError as err:
        raise IntegrityError(f"{folder / 'study_runs.csv'}: {err}") from None
    if len(derived) != len(best):
        raise IntegrityError(f"{folder / 'best.csv'}: {len(best)} rows; study_runs.csv gives {len(derived)}")
    for i, (got, want) in enumerate(zip(best, derived, strict=True), start=1):
        if (got.d, got.seed, got.branch, got.k, got.runs, got.valid, got.excluded) != (
            want.d,
            want.seed,
            want.branch,
            want.k,
            want.runs,
            want.valid,
            want.excluded,
        ) or not all(same_number(getattr(got, f), getattr(want, f), rtol=1e-12) for f in ("alpha", "train_loss")):
            raise IntegrityError(
                f"{folder / 'best.csv'}: row {i} (d = {got.d}, alpha = {got.alpha:g}, seed {got.seed}, {got.branch}, K = {got.k}) "
                "is not the best of K of study_runs.csv"
            )
    for d in sorted({r.d for r in best}):
        try:
            grid = loss_grid(best, d)
        except ParameterError as err:
            raise IntegrityError(f"{folder / 'best.csv'}: {err}") from None
        for b in BRANCHES:
            L = grid.loss[b]
            seq, every = L[:, :, :-1], L[:, :, -1]
            rising = (seq[:, :, 1:] > seq[:, :, :-1]) & (grid.valid[:, :, None])
            below = (every > seq[:, :, -1]) & grid.valid
            if rising.any() or below.any():
                i, j = np.argwhere(rising.any(axis=2) | below)[0]
                raise IntegrityError(
                    f"{folder / 'best.csv'}: d = {d}, alpha = {grid.alphas[j]:g}, seed {grid.seeds[i]}, {b}: the best "
                    f"of K rises with K or lies below the every-start value"
                )
    stored = read_records(folder / "crossings.csv", KCrossing)
    mine = crossings_by_k(best)
    if len(stored) != len(mine):
        raise IntegrityError(f"{folder / 'crossings.csv'}: {len(stored)} rows; best.csv gives {len(mine)}")
    for i, (s, m) in enumerate(zip(stored, mine, strict=True), start=1):
        same = (s.d, s.search, s.k, s.seed, s.outcome, s.changes, s.valid, s.excluded) == (
            m.d,
            m.search,
            m.k,
            m.seed,
            m.outcome,
            m.changes,
            m.valid,
            m.excluded,
        ) and all(same_number(getattr(s, f), getattr(m, f), rtol=1e-12) for f in ("alpha_c", "lo", "hi"))
        if not same:
            raise IntegrityError(
                f"{folder / 'crossings.csv'}: row {i} (d = {s.d}, {s.search}, K = {s.k}, seed {s.seed}) is not the "
                f"crossing of best.csv's rows"
            )
    by_k = read_records(folder / "crossing_by_k.csv", KSummary)
    groups: dict[tuple[int, str, int], list[Any]] = {}
    for x in stored:
        groups.setdefault((x.d, x.search, x.k), []).append(x)
    if len(by_k) != len(groups):
        raise IntegrityError(
            f"{folder / 'crossing_by_k.csv'}: {len(by_k)} rows; crossings.csv has {len(groups)} groups"
        )
    for i, s in enumerate(by_k, start=1):
        group = groups.get((s.d, s.search, s.k))
        counts = None
        if group is not None:
            counts = (
                len(group),
                sum(math.isfinite(x.alpha_c) for x in group),
                sum(x.outcome == "no_crossing" for x in group),
                sum(x.outcome == "several_crossings" for x in group),
            )
        if counts != (s.seeds, s.crossings, s.no_crossing, s.several):
            raise IntegrityError(
                f"{folder / 'crossing_by_k.csv'}: row {i} (d = {s.d}, {s.search}, K = {s.k}): counts "
                f"{(s.seeds, s.crossings, s.no_crossing, s.several)}; crossings.csv has {counts}"
            )
    return best, stored, by_k


def _first_tree_difference(a: Any, b: Any, where: str = "") -> str | None:
    """The first place (dotted path) where two JSON trees differ: numbers to STRICT_RTOL (null = NaN), the rest exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}.{k}".lstrip(".")
            sub = _first_tree_difference(a[k], b[k], f"{where}.{k}")
            if sub is not None:
                return sub
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return where.lstrip(".")
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            sub = _first_tree_difference(x, y, f"{where}[{i}]")
            if sub is not None:
                return sub
        return None
    number = (int, float)
    if (a is None or (isinstance(a, number) and not isinstance(a, bool))) and (
        b is None or (isinstance(b, number) and not isinstance(b, bool))
    ):
        return None if same_number(a, b) else where.lstrip(".")
    return None if a == b else where.lstrip(".")


def _check_landscape(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """The rows against each other (:func:`_landscape_rows`) and summary.json's ``crossing_by_K`` against
    crossing_by_k.csv (mean, se, n, counts of every row, and no other entry)."""
    _, _, by_k = _landscape_rows(folder)
    summary = read_verified_json(folder / "summary.json")
    stored = summary.get("crossing_by_K")
    if not isinstance(stored, dict):
        raise IntegrityError(f"{folder / 'summary.json'}: no 'crossing_by_K'")
    mine: dict[str, dict[str, dict[str, Any]]] = {}
    for s in by_k:
        mine.setdefault(str(s.d), {}).setdefault(s.search, {})["every" if s.k == 0 else str(s.k)] = to_jsonable(
            s.as_dict()
        )
    diff = _first_tree_difference(stored, mine)
    if diff is not None:
        raise IntegrityError(f"{folder / 'summary.json'}: crossing_by_K.{diff} is not that of crossing_by_k.csv")


def _strict_landscape(folder: Path) -> None:
    """``verify --strict``: the whole analysis recomputed from best.csv (:func:`dotattn.theory_vs_erm.landscape.analyse`,
    with the replica α_c and the bootstrap size summary.json records; the bootstrap is seeded, so its intervals
    are recomputed exactly): crossing_by_k.csv's means, sd and se; summary.json's ``crossing_by_K``, ``k_max``,
    ``k_infinity`` (estimates, intervals, saturation), ``d_infinity``, ``verdict`` and ``beside``."""
    from dotattn.theory_vs_erm.landscape import analyse

    best, _, by_k = _landscape_rows(folder)
    summary = read_verified_json(folder / "summary.json")
    ref = summary.get("replica_alpha_c") or {}
    boot = summary.get("bootstrap") or {}
    nan = float("nan")
    alpha_c = ref.get("alpha_c")
    err = ref.get("error")
    study = analyse(
        best, nan if alpha_c is None else float(alpha_c), nan if err is None else float(err), int(boot["replicas"])
    )
    for i, (s, m) in enumerate(zip(by_k, study.summaries, strict=True), start=1):
        for f in ("mean", "sd", "se"):
            if not same_number(getattr(s, f), getattr(m, f)):
                raise IntegrityError(
                    f"{folder / 'crossing_by_k.csv'}: row {i}: {f} = {getattr(s, f)!r}; recomputed from crossings: "
                    f"{getattr(m, f)!r} (verify --strict)"
                )
    mine = to_jsonable(study.summary_dict())
    for key in ("crossing_by_K", "k_max", "k_infinity", "d_infinity", "verdict", "beside"):
        diff = _first_tree_difference(summary.get(key), mine[key], key)
        if diff is not None:
            raise IntegrityError(
                f"{folder / 'summary.json'}: {diff} is not what best.csv gives (recomputed; verify --strict)"
            )


LANDSCAPE = register_kind(
    FolderKind(
        "landscape",
        ("best.csv", "study_runs.csv", "crossings.csv", "crossing_by_k.csv", "summary.json"),
        _check_landscape,
        strict=_strict_landscape,
    )
)
