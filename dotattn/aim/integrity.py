"""The folder kinds of the AIM theory, registered with :mod:`dotattn.core.integrity`:
``aim-state-evolution`` (``dotattn aim state-evolution``: points.csv with an ``mmse`` column,
summary.json), ``aim-algorithms`` (``dotattn aim amp|gd``: alphas.csv, runs.csv, summary.json) and
``aim-free-entropy`` (``dotattn aim free-entropy``: free_entropy.csv, summary.json)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.aim.algo_study import BOUND_Z, AlphaRow, RunRow, gap_in_se
from dotattn.aim.channels import alpha_bar
from dotattn.aim.free_entropy import STARTS, FreeEntropyPoint
from dotattn.aim.prior import prior_second_moment
from dotattn.aim.state_evolution import SEPoint
from dotattn.core.integrity import FolderKind, check_finite, header_has, on_grid, read_records, register_kind
from dotattn.core.io import IntegrityError
from dotattn.core.status import CONVERGED, DIVERGED, STATUSES

__all__ = ["AIM_STATE_EVOLUTION", "AIM_ALGORITHMS", "AIM_FREE_ENTROPY"]


IDENTITY_TOL = 1e-9
"""Relative tolerance of the identities rows must satisfy (MMSE + q = Q0, the means of alphas.csv): both
sides are written with repr() from one float64 computation, so they agree to rounding (~1e-15)."""


def _close(a: float, b: float, scale: float = 1.0) -> bool:
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= IDENTITY_TOL * max(scale, abs(a), abs(b))


def _made_for(manifest: Mapping[str, Any] | None) -> dict[str, Any]:
    """The manifest's ``made_for`` (empty when the rows are checked before sealing)."""
    made_for = (manifest or {}).get("made_for")
    return made_for if isinstance(made_for, dict) else {}


def _number_list(path: Path, name: str, value: Any) -> list[float]:
    """A manifest list of finite numbers (IntegrityError, one line, for anything else)."""
    ok = (
        isinstance(value, list)
        and value
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    )
    if not ok:
        raise IntegrityError(f"{path}: the manifest's {name} is not a list of finite numbers")
    return [float(v) for v in value]


def _setting(path: Path, made_for: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = made_for.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise IntegrityError(f"{path}: the manifest's {name} is {value!r}, not a {getattr(kind, '__name__', kind)}")
    return value


def _check_aim_state_evolution(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """points.csv of ``dotattn aim state-evolution``: every row readable, one channel, ρ and T; α > 0;
    status in the vocabulary; ᾱ = α (T² + T − 2); a converged point has 0 <= MMSE <= Q0 = 1 + ρ (the
    prior's error) and MMSE + q = Q0; the rows' α, channel, ρ and T are those the manifest was made for."""
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
        if not _close(p.alpha_bar, alpha_bar(p.alpha, p.tokens)):
            raise IntegrityError(
                f"{path}: row {i}: alpha_bar = {p.alpha_bar!r}, alpha (T^2 + T - 2) = {alpha_bar(p.alpha, p.tokens)!r}"
            )
        if p.status == CONVERGED:
            q0 = prior_second_moment(p.rho)
            check_finite(path, i, "mmse", p.mmse, q0 + 1e-9)
            if p.mmse < -1e-12:
                raise IntegrityError(f"{path}: row {i}: mmse = {p.mmse!r} < 0")
            if not _close(p.mmse + p.q, q0):
                raise IntegrityError(f"{path}: row {i}: mmse + q = {p.mmse + p.q!r}, not Q0 = 1 + rho = {q0!r}")
    made_for = _made_for(manifest)
    if "alpha" in made_for:
        alphas = _number_list(path, "alpha", made_for["alpha"])
        if (
            len(alphas) != len(points)
            or not all(on_grid(p.alpha, alphas) for p in points)
            or not all(on_grid(a, [p.alpha for p in points]) for a in alphas)
        ):
            raise IntegrityError(f"{path}: its alpha values are not the {len(alphas)} the manifest was made for")
    for name in ("channel", "rho", "tokens"):
        if name in made_for and made_for[name] != getattr(first, name):
            raise IntegrityError(f"{path}: {name} = {getattr(first, name)!r}, the manifest says {made_for[name]!r}")


ESTIMATORS = {"amp": ("amp",), "gd": ("gd", "gd_averaged")}
"""The estimators whose rows an ``aim amp`` / ``aim gd`` folder holds."""


def _nanmean(values: list[float]) -> float:
    """Mean of the finite values (NaN when none): GD's per-seed error over initialisations, as written."""
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def _check_aim_algorithms(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """runs.csv and alphas.csv of ``dotattn aim amp|gd``: every row readable; statuses in the vocabulary;
    errors finite (or NaN for a diverged run); every (estimator, α) of runs.csv summarised in alphas.csv,
    whose counts (runs, converged, diverged) and mean error are those of runs.csv's rows (GD: per seed the
    mean over its initialisations), with gap = mean − MMSE. Against the manifest: the estimators, the α
    grid, the seeds 0..seeds−1 (each (α, seed) once; GD with its ``inits`` initialisations) and
    n = round(α d²) of every row."""
    runs_path, alphas_path = folder / "runs.csv", folder / "alphas.csv"
    runs = read_records(runs_path, RunRow)
    alphas = read_records(alphas_path, AlphaRow)
    if not runs or not alphas:
        raise IntegrityError(f"{folder}: runs.csv or alphas.csv has no data rows")
    by: dict[tuple[str, float], list[RunRow]] = {}
    for i, r in enumerate(runs, start=1):
        if r.status not in STATUSES:
            raise IntegrityError(f"{runs_path}: row {i}: status {r.status!r} is not valid")
        if r.status != DIVERGED:
            check_finite(runs_path, i, "mse", r.mse, 1e6)
        by.setdefault((r.estimator, r.alpha), []).append(r)
        # (1/T)||g - y||^2 of rows of probabilities is at most 2; NaN where not measured (older folders)
        if not (math.isnan(r.test_error) or 0.0 <= r.test_error <= 2.0):
            raise IntegrityError(f"{runs_path}: row {i}: test_error = {r.test_error!r} is not in [0, 2]")
    for i, a in enumerate(alphas, start=1):
        rows = by.get((a.estimator, a.alpha), [])
        per_seed = sorted({r.seed for r in rows})
        if len(per_seed) != a.runs:
            raise IntegrityError(
                f"{alphas_path}: row {i}: {a.runs} data sets of {a.estimator} at alpha = "
                f"{a.alpha:g}, runs.csv has {len(per_seed)}"
            )
        if a.estimator == "gd":  # per seed the mean over initialisations; statuses of the averaged rows
            statuses = {r.seed: r.status for r in by.get(("gd_averaged", a.alpha), [])}
            values = [(_nanmean([r.mse for r in rows if r.seed == s]), statuses.get(s, "")) for s in per_seed]
        else:
            values = [(r.mse, r.status) for r in sorted(rows, key=lambda r: r.seed)]
        kept = [m for m, st in values if st != DIVERGED]
        mean = float(np.mean(kept)) if kept else float("nan")
        counts = (sum(st == CONVERGED for _, st in values), sum(st == DIVERGED for _, st in values))
        if (a.converged, a.diverged) != counts:
            raise IntegrityError(
                f"{alphas_path}: row {i}: {a.converged} converged and {a.diverged} diverged runs of "
                f"{a.estimator} at alpha = {a.alpha:g}, runs.csv has {counts[0]} and {counts[1]}"
            )
        if not (_close(a.mse_mean, mean) or (math.isnan(a.mse_mean) and math.isnan(mean))):
            raise IntegrityError(
                f"{alphas_path}: row {i}: mse_mean = {a.mse_mean!r} of {a.estimator} at alpha = "
                f"{a.alpha:g} is not the mean of its runs in runs.csv ({mean!r})"
            )
        if math.isfinite(a.mse_mean) and not _close(a.gap, a.mse_mean - a.mmse_se_theory):
            raise IntegrityError(f"{alphas_path}: row {i}: gap = {a.gap!r} is not mse_mean - mmse_se_theory")
        _check_flags(alphas_path, i, a)
    missing = [key for key in by if key[0] != "gd_averaged" or ("gd", key[1]) not in by]
    summarised = {(a.estimator, a.alpha) for a in alphas}
    for key in missing:
        if key not in summarised:
            raise IntegrityError(f"{alphas_path}: no row for {key[0]} at alpha = {key[1]:g} (runs.csv has its runs)")
    _check_algorithm_settings(folder, runs, _made_for(manifest))


def _check_flags(path: Path, i: int, a: AlphaRow) -> None:
    """The gaps in standard errors and the lower-bound flags of one alphas.csv row, recomputed from its own
    columns (the test gap combines the Bayes-optimal value's Monte-Carlo error where the row records it)."""
    checks = [("gap_in_se", a.gap_in_se, a.mse_mean - a.mmse_se_theory, a.mse_se, "beats_bound", a.beats_bound)]
    if not math.isnan(a.test_error_bo):
        bo_se = 0.0 if math.isnan(a.test_error_bo_se) else a.test_error_bo_se
        checks.append(
            (
                "test_gap_in_se",
                a.test_gap_in_se,
                a.test_mean - a.test_error_bo,
                math.hypot(a.test_se, bo_se),
                "test_beats_bound",
                a.test_beats_bound,
            )
        )
    for name, stored, gap, se, flag_name, flag in checks:
        want = gap_in_se(gap, se)
        same = (math.isnan(stored) and math.isnan(want)) or stored == want or _close(stored, want)
        if not same:
            raise IntegrityError(
                f"{path}: row {i}: {name} = {stored!r} of {a.estimator} at alpha = {a.alpha:g}, "
                f"its columns give {want!r}"
            )
        if flag != bool(want < -BOUND_Z):
            raise IntegrityError(
                f"{path}: row {i}: {flag_name} = {flag} of {a.estimator} at alpha = {a.alpha:g}, "
                f"but its gap is {want:.3g} standard errors (the rule: below -{BOUND_Z:g})"
            )


def _check_algorithm_settings(folder: Path, runs: list[RunRow], made_for: Mapping[str, Any]) -> None:
    """The rows of runs.csv against the settings the manifest was made for (nothing when it has none)."""
    if not made_for:
        return
    path = folder / "runs.csv"
    estimator = _setting(path, made_for, "estimator", str)
    if estimator not in ESTIMATORS:
        raise IntegrityError(f"{path}: the manifest's estimator {estimator!r} is not one of {', '.join(ESTIMATORS)}")
    d = _setting(path, made_for, "d", int)
    seeds = _setting(path, made_for, "seeds", int)
    grid = _number_list(path, "alpha", made_for.get("alpha"))
    inits = _setting(path, made_for, "inits", int) if estimator == "gd" else 1
    want: dict[tuple[str, int, int, int], int] = {}
    for i, r in enumerate(runs, start=1):
        if r.estimator not in ESTIMATORS[estimator]:
            raise IntegrityError(f"{path}: row {i}: estimator {r.estimator!r} in a folder made for {estimator}")
        if not on_grid(r.alpha, grid):
            raise IntegrityError(f"{path}: row {i}: alpha = {r.alpha:g} is not among the manifest's alpha")
        if not 0 <= r.seed < seeds:
            raise IntegrityError(f"{path}: row {i}: seed {r.seed} is not among the manifest's seeds 0..{seeds - 1}")
        if r.n != max(1, int(round(r.alpha * d**2))):
            raise IntegrityError(
                f"{path}: row {i}: n = {r.n}, but alpha d^2 = {r.alpha * d**2:g} for the manifest's d = {d}"
            )
        ia = min(range(len(grid)), key=lambda k: abs(grid[k] - r.alpha))
        key = (r.estimator, ia, r.seed, r.init)
        want[key] = want.get(key, 0) + 1
        if want[key] > 1:
            raise IntegrityError(
                f"{path}: row {i}: a second row for {r.estimator} at alpha = {r.alpha:g}, seed {r.seed}, init {r.init}"
            )
    expected = len(grid) * seeds * (1 if estimator == "amp" else inits + 1)
    if len(runs) != expected:
        raise IntegrityError(
            f"{path}: {len(runs)} rows, the manifest's settings ({len(grid)} alpha x {seeds} seeds"
            + (f" x ({inits} initialisations + their average)" if estimator == "gd" else "")
            + f") need {expected}"
        )


AIM_STATE_EVOLUTION = register_kind(
    FolderKind(
        "aim-state-evolution",
        ("points.csv", "summary.json"),
        _check_aim_state_evolution,
        recognise=lambda folder: header_has(folder / "points.csv", "mmse"),
    )
)
AIM_ALGORITHMS = register_kind(
    FolderKind(
        "aim-algorithms",
        ("alphas.csv", "runs.csv", "summary.json"),
        _check_aim_algorithms,
        optional=("iterations.csv",),
    )
)


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
            raise IntegrityError(
                f"{path}: row {i}: mmse {r.mmse!r} or test error {r.test_error!r} (+- {r.test_error_se!r}) out of range"
            )
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


AIM_FREE_ENTROPY = register_kind(
    FolderKind(
        "aim-free-entropy",
        ("free_entropy.csv", "summary.json"),
        _check_aim_free_entropy,
        recognise=lambda folder: (folder / "free_entropy.csv").exists(),
    )
)
