"""The folder kinds of the theory–ERM studies, registered with :mod:`dotattn.core.integrity`:
``comparison`` (``dotattn compare``: comparison.csv, comparison.json), ``alpha-c``
(``dotattn erm-alpha-c``: crossings.csv, cells.csv, delta.csv, summary.json; its rows are re-derived
and checked by :func:`dotattn.theory_vs_erm.output.read_alpha_c_part`, which every reader of the
kind uses) and ``variants`` (``dotattn variants``: variants.csv, summary.json)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotattn.core.integrity import (
    FolderKind,
    first_difference,
    read_record,
    read_verified_csv,
    read_verified_json,
    register_kind,
)
from dotattn.core.io import IntegrityError, to_jsonable
from dotattn.positional_semantic.integrity import check_branch_rows
from dotattn.positional_semantic.problem import problem_of
from dotattn.positional_semantic.records import BranchPoint

__all__ = ["COMPARISON", "ALPHA_C", "VARIANTS"]


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
    )
)
ALPHA_C = register_kind(
    FolderKind("alpha-c", ("crossings.csv", "cells.csv", "delta.csv", "summary.json"), _check_alpha_c)
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
