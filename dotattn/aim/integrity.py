"""The folder kinds of the AIM theory, registered with :mod:`dotattn.core.integrity`:
``aim-state-evolution`` (``dotattn aim state-evolution``: points.csv with an ``mmse`` column,
summary.json) and ``aim-algorithms`` (``dotattn aim amp|gd``: alphas.csv, runs.csv, summary.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from dotattn.aim.algo_study import AlphaRow, RunRow
from dotattn.aim.state_evolution import SEPoint
from dotattn.core.integrity import FolderKind, check_finite, header_has, on_grid, read_records, register_kind
from dotattn.core.io import IntegrityError
from dotattn.core.status import CONVERGED, DIVERGED, STATUSES

__all__ = ["AIM_STATE_EVOLUTION", "AIM_ALGORITHMS"]


def _check_aim_state_evolution(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """points.csv of ``dotattn aim state-evolution``: every row readable, one channel, ρ and T; α > 0;
    status in the vocabulary; a converged point has 0 <= MMSE <= Q0 = 1 + ρ (the prior's error); the
    α of the rows are those the manifest was made for."""
    path = folder / "points.csv"
    points = read_records(path, SEPoint)
    if not points:
        raise IntegrityError(f"{path}: no data rows")
    first = points[0]
    for i, p in enumerate(points, start=1):
        if (p.channel, p.rho, p.tokens) != (first.channel, first.rho, first.tokens):
            raise IntegrityError(f"{path}: row {i}: channel/rho/tokens differ from row 1")
        check_finite(path, i, "alpha", p.alpha, 1e6)
        if p.alpha <= 0 or p.status not in STATUSES:
            raise IntegrityError(f"{path}: row {i}: alpha = {p.alpha!r} or status {p.status!r} is not valid")
        if p.status == CONVERGED:
            check_finite(path, i, "mmse", p.mmse, 1.0 + p.rho + 1e-9)
            if p.mmse < -1e-12:
                raise IntegrityError(f"{path}: row {i}: mmse = {p.mmse!r} < 0")
    made_for = (manifest or {}).get("made_for") or {}
    alphas = made_for.get("alpha")
    if isinstance(alphas, list) and sorted(p.alpha for p in points) != sorted(float(a) for a in alphas):
        if len(alphas) != len(points) or not all(on_grid(p.alpha, alphas) for p in points):
            raise IntegrityError(f"{path}: its alpha values are not the {len(alphas)} the manifest was made for")
    for name in ("channel", "rho", "tokens"):
        if name in made_for and made_for[name] != getattr(first, name):
            raise IntegrityError(f"{path}: {name} = {getattr(first, name)!r}, the manifest says {made_for[name]!r}")


def _check_aim_algorithms(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """runs.csv and alphas.csv of ``dotattn aim amp|gd``: every row readable; errors finite (or NaN for a
    diverged run); every (estimator, α) of runs.csv summarised in alphas.csv with its number of data sets
    (seeds; GD has several initialisations per seed)."""
    runs = read_records(folder / "runs.csv", RunRow)
    alphas = read_records(folder / "alphas.csv", AlphaRow)
    if not runs or not alphas:
        raise IntegrityError(f"{folder}: runs.csv or alphas.csv has no data rows")
    seeds: dict[tuple[str, float], set[int]] = {}
    for i, r in enumerate(runs, start=1):
        if r.status not in STATUSES:
            raise IntegrityError(f"{folder / 'runs.csv'}: row {i}: status {r.status!r} is not valid")
        if r.status != DIVERGED:
            check_finite(folder / "runs.csv", i, "mse", r.mse, 1e6)
        seeds.setdefault((r.estimator, r.alpha), set()).add(r.seed)
    for i, a in enumerate(alphas, start=1):
        have = len(seeds.get((a.estimator, a.alpha), ()))
        if have != a.runs:
            raise IntegrityError(f"{folder / 'alphas.csv'}: row {i}: {a.runs} data sets of {a.estimator} at alpha = "
                                 f"{a.alpha:g}, runs.csv has {have}")


AIM_STATE_EVOLUTION = register_kind(FolderKind("aim-state-evolution", ("points.csv", "summary.json"),
                                               _check_aim_state_evolution,
                                               recognise=lambda folder: header_has(folder / "points.csv", "mmse")))
AIM_ALGORITHMS = register_kind(FolderKind("aim-algorithms", ("alphas.csv", "runs.csv", "summary.json"),
                                          _check_aim_algorithms))
