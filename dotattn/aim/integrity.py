"""The folder kinds of the AIM theory, registered with :mod:`dotattn.core.integrity`:
``aim-state-evolution`` (``dotattn aim state-evolution``: points.csv with an ``mmse`` column,
summary.json), ``aim-algorithms`` (``dotattn aim amp|gd``: alphas.csv, runs.csv, summary.json) and
``aim-free-entropy`` (``dotattn aim free-entropy``: free_entropy.csv, summary.json)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from dotattn.aim.algo_study import AlphaRow, RunRow
from dotattn.aim.free_entropy import STARTS, FreeEntropyPoint
from dotattn.aim.state_evolution import SEPoint
from dotattn.core.integrity import FolderKind, check_finite, header_has, on_grid, read_records, register_kind
from dotattn.core.io import IntegrityError
from dotattn.core.status import CONVERGED, DIVERGED, STATUSES

__all__ = ["AIM_STATE_EVOLUTION", "AIM_ALGORITHMS", "AIM_FREE_ENTROPY"]


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
    made_for = (manifest or {}).get("made_for") or {}
    grid = made_for.get("alpha")
    seeds: dict[tuple[str, float], set[int]] = {}
    inits: dict[tuple[float, int], int] = {}
    for i, r in enumerate(runs, start=1):
        if r.status not in STATUSES:
            raise IntegrityError(f"{folder / 'runs.csv'}: row {i}: status {r.status!r} is not valid")
        if r.status != DIVERGED:
            check_finite(folder / "runs.csv", i, "mse", r.mse, 1e6)
        # (1/T)||g - y||^2 of rows of probabilities is at most 2; NaN where not measured (older folders)
        if not (math.isnan(r.test_error) or 0.0 <= r.test_error <= 2.0):
            raise IntegrityError(f"{folder / 'runs.csv'}: row {i}: test_error = {r.test_error!r} is not in [0, 2]")
        if isinstance(grid, list) and not on_grid(r.alpha, grid):
            raise IntegrityError(f"{folder / 'runs.csv'}: row {i}: alpha = {r.alpha:g} is not on the manifest's grid")
        if "seeds" in made_for and not 0 <= r.seed < int(made_for["seeds"]):
            raise IntegrityError(f"{folder / 'runs.csv'}: row {i}: seed {r.seed} outside the {made_for['seeds']} "
                                 f"the manifest was made for")
        if r.estimator == "gd":
            inits[(r.alpha, r.seed)] = inits.get((r.alpha, r.seed), 0) + 1
        seeds.setdefault((r.estimator, r.alpha), set()).add(r.seed)
    if "inits" in made_for and any(k != int(made_for["inits"]) for k in inits.values()):
        raise IntegrityError(f"{folder / 'runs.csv'}: a data set has a number of gd runs other than the "
                             f"{made_for['inits']} initialisations the manifest was made for")
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


def _check_aim_free_entropy(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """free_entropy.csv of ``dotattn aim free-entropy``: every row readable; one channel, ρ, T and β, those
    of the manifest; per α of the manifest's grid one row per start; 0 <= MMSE <= 1 (the prior mean's error);
    at least one selected row per α; a test error in [0, 2] with a non-negative standard error."""
    path = folder / "free_entropy.csv"
    rows = read_records(path, FreeEntropyPoint)
    if not rows:
        raise IntegrityError(f"{path}: no data rows")
    first = rows[0]
    made_for = (manifest or {}).get("made_for") or {}
    for name, attr in (("channel", "channel"), ("rho", "rho"), ("tokens", "tokens"), ("beta", "beta")):
        if name in made_for and made_for[name] != getattr(first, attr):
            raise IntegrityError(f"{path}: {attr} = {getattr(first, attr)!r}, the manifest says {made_for[name]!r}")
    starts: dict[float, list[str]] = {}
    selected: dict[float, bool] = {}
    for i, r in enumerate(rows, start=1):
        if (r.channel, r.rho, r.tokens, r.beta) != (first.channel, first.rho, first.tokens, first.beta):
            raise IntegrityError(f"{path}: row {i}: channel/rho/tokens/beta differ from row 1")
        if r.start not in STARTS:
            raise IntegrityError(f"{path}: row {i}: start {r.start!r} is not one of {', '.join(STARTS)}")
        check_finite(path, i, "mmse", r.mmse, 1.0 + 1e-9)
        if r.mmse < 0 or not 0.0 <= r.test_error <= 2.0 or not r.test_error_se >= 0:
            raise IntegrityError(f"{path}: row {i}: mmse {r.mmse!r} or test error {r.test_error!r} "
                                 f"(+- {r.test_error_se!r}) out of range")
        starts.setdefault(r.alpha, []).append(r.start)
        selected[r.alpha] = selected.get(r.alpha, False) or r.selected
    for a, st in starts.items():
        if sorted(st) != sorted(STARTS):
            raise IntegrityError(f"{path}: alpha = {a:g} has starts {st}, expected one row per start")
        if not selected[a]:
            raise IntegrityError(f"{path}: alpha = {a:g} has no selected fixed point")
    grid = made_for.get("alpha")
    if isinstance(grid, list) and (len(grid) != len(starts) or not all(on_grid(a, grid) for a in starts)):
        raise IntegrityError(f"{path}: its alpha values are not the {len(grid)} the manifest was made for")


AIM_FREE_ENTROPY = register_kind(FolderKind("aim-free-entropy", ("free_entropy.csv", "summary.json"),
                                            _check_aim_free_entropy,
                                            recognise=lambda folder: (folder / "free_entropy.csv").exists()))
