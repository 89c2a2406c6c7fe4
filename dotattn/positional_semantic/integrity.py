"""The folder kinds of the positional–semantic theory, registered with :mod:`dotattn.core.integrity`:
``phase-diagram`` (``dotattn phase-diagram``: phase_diagram.csv, boundaries.csv, summary.json) and
``rsb`` (``dotattn solve --rsb 1 --out``: rsb.json) and ``complexity`` (``dotattn complexity``: summary.json,
one curve CSV per rule and alpha).
Also the row checks other packages reuse for theory records (:func:`check_branch_rows`)."""

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
    on_grid,
    read_records,
    read_verified_csv,
    read_verified_json,
    register_kind,
    same_number,
)
from dotattn.core.io import IntegrityError, read_json_if_valid, to_jsonable
from dotattn.core.status import CONVERGED
from dotattn.positional_semantic.problem import Problem, problem_of
from dotattn.positional_semantic.records import BranchPoint

__all__ = ["ALL_BRANCHES", "check_branch_rows", "check_selection", "PHASE_DIAGRAM", "RSB", "COMPLEXITY"]

ALL_BRANCHES: tuple[str, ...] = ("positional", "semantic", "mixed", "uninformative", "none")
"""Branch labels a theory row may carry (``none``: a catalogue entry that did not converge)."""


def check_branch_rows(
    path: Path,
    points: Sequence[Any],
    problem: Problem,
    omegas: Sequence[float],
    alphas: Sequence[float],
    branches: Sequence[str] | None = None,
    grid_complete: bool = True,
) -> None:
    """Theory rows (:class:`~dotattn.positional_semantic.records.BranchPoint`) against their problem and grid: shapes of
    q, V (r×r), θ (r×r_t), μ (L×r); finite overlaps, e_t and ε_g for converged points; branch
    labels among ``branches``; every (ω, α) of the grid present (if ``grid_complete``); nothing off
    the ω grid."""
    r, rt, L = problem.field_rank, problem.teacher_rank, problem.L
    if not points:
        raise IntegrityError(f"{path}: no data rows")
    seen: set[tuple[int, int]] = set()
    for i, p in enumerate(points, start=1):
        conv = p.status == CONVERGED
        check_finite(path, i, "omega", p.omega, 1.0)
        check_finite(path, i, "alpha", p.alpha, 1e4)
        if not on_grid(p.omega, omegas):
            raise IntegrityError(f"{path}: row {i}: omega = {p.omega:g} is not among the folder's omegas")
        for name, val, shape in (
            ("q", p.q, (r, r)),
            ("V", p.V, (r, r)),
            ("theta", p.theta, (r, rt)),
            ("mu", p.mu, (L, r)),
        ):
            check_matrix(path, i, name, val, shape, finite=conv)
        if conv:
            check_finite(path, i, "train_loss", p.train_loss)
            check_finite(path, i, "test_error", p.test_error)
        iw = min(range(len(omegas)), key=lambda k: abs(omegas[k] - p.omega))
        ia = min(range(len(alphas)), key=lambda k: abs(alphas[k] - p.alpha)) if alphas else -1
        if ia >= 0 and on_grid(p.alpha, alphas):
            seen.add((iw, ia))
        if branches is not None and p.branch not in branches:
            raise IntegrityError(f"{path}: row {i}: branch {p.branch!r} is not one of {', '.join(branches)}")
    if grid_complete:
        for iw, w in enumerate(omegas):
            for ia, a in enumerate(alphas):
                if (iw, ia) not in seen:
                    raise IntegrityError(f"{path}: no row at omega = {w:g}, alpha = {a:g} (rows removed?)")


def _phase_diagram_parts(folder: Path) -> tuple[Problem, list[float], list[float], dict]:
    summary = read_verified_json(folder / "summary.json")
    params = summary.get("parameters")
    if not isinstance(params, dict):
        raise IntegrityError(f"{folder / 'summary.json'}: no 'parameters'")
    problem = problem_of(folder / "summary.json", params)
    try:
        omegas = [float(w) for w in params["omegas"]]
        alphas = [float(a) for a in params["alphas"]]
    except (KeyError, TypeError, ValueError):
        raise IntegrityError(f"{folder / 'summary.json'}: 'parameters' lacks the omega and alpha grids") from None
    return problem, omegas, alphas, summary


def _check_phase_diagram(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    problem, omegas, alphas, _ = _phase_diagram_parts(folder)
    path = folder / "phase_diagram.csv"
    points = read_records(path, BranchPoint)
    check_branch_rows(path, points, problem, omegas, alphas, ALL_BRANCHES)
    check_selection(path, points)


def check_selection(path: Path, points: Sequence[Any]) -> None:
    """Per grid point (ω, α): one row per branch, one selected row where any converged (none elsewhere),
    and the selected row is the converged one of lowest e_t there (the selection rule of
    :func:`dotattn.positional_semantic.branch.selected_at`), so a deleted or relabelled row is refused."""
    by: dict[tuple[float, float], list[tuple[int, Any]]] = {}
    for i, p in enumerate(points, start=1):
        by.setdefault((p.omega, p.alpha), []).append((i, p))
    for (w, a), rows in by.items():
        names = [p.branch for _, p in rows if p.branch != "none"]
        if len(names) != len(set(names)):
            raise IntegrityError(f"{path}: omega = {w:g}, alpha = {a:g} holds a branch twice")
        chosen = [(i, p) for i, p in rows if p.selected]
        if len(chosen) > 1:
            raise IntegrityError(f"{path}: omega = {w:g}, alpha = {a:g} has {len(chosen)} selected rows")
        if not chosen and any(p.status == CONVERGED for _, p in rows):
            raise IntegrityError(
                f"{path}: omega = {w:g}, alpha = {a:g} has converged rows but none selected (a row removed?)"
            )
        if chosen:
            i, best = chosen[0]
            lower = [
                p
                for _, p in rows
                if p.status == CONVERGED and best.train_loss is not None and p.train_loss < best.train_loss
            ]
            if best.status != CONVERGED or lower:
                raise IntegrityError(
                    f"{path}: row {i}: the selected {best.branch} row at omega = {w:g}, alpha = {a:g} is not "
                    f"the converged row of lowest train_loss there"
                )


def _strict_phase_diagram(folder: Path) -> None:
    """``verify --strict`` for a phase diagram: boundaries.csv is every column's ``boundaries`` in summary.json;
    every boundary lies inside the column's α grid, and the selected rows bracket it: in each grid cell the
    phases (selected branch) at its two ends are joined by its boundaries (``below`` of the first is the phase
    at the left end, ``above`` of one the ``below`` of the next, ``above`` of the last the phase at the right
    end), and a cell whose ends differ holds a boundary; a column's α_c of the sweep is the α of its
    positional → semantic Brent boundary; a refined α_c (α_lin) is the mean of its independent roots and its
    error their standard error (std, ddof = 1, over √n), as the column records them."""
    from dotattn.core.integrity import same_number

    _, omegas, alphas, summary = _phase_diagram_parts(folder)
    sj = folder / "summary.json"
    columns = summary.get("omegas")
    if not isinstance(columns, list):
        raise IntegrityError(f"{sj}: no per-omega columns")
    stored = []
    for c in columns:
        for b in c.get("boundaries") or []:
            stored.append((float(b["omega"]), float(b["alpha"]), b["below"], b["above"], b["method"]))
    if (folder / "boundaries.csv").is_file():
        rows = [
            (float(r["omega"]), float(r["alpha"]), r["below"], r["above"], r["method"])
            for r in read_verified_csv(folder / "boundaries.csv")
        ]
        if sorted(rows) != sorted(stored):
            raise IntegrityError(
                f"{folder / 'boundaries.csv'}: its rows are not summary.json's boundaries (verify --strict)"
            )
    points = read_records(folder / "phase_diagram.csv", BranchPoint)
    grid = sorted(alphas)
    for c in columns:
        w = float(c["omega"])
        phase = {round(p.alpha, 12): p.branch for p in points if abs(p.omega - w) <= 1e-12 and p.selected}
        bounds = sorted((b for b in stored if abs(b[0] - w) <= 1e-12), key=lambda b: b[1])
        for b in bounds:
            if not grid[0] <= b[1] <= grid[-1]:
                raise IntegrityError(f"{sj}: omega = {w:g}: a boundary at alpha = {b[1]:g} outside the alpha grid")
        for lo, hi in zip(grid, grid[1:], strict=False):
            inside = [b for b in bounds if lo < b[1] < hi]
            left, right = phase.get(round(lo, 12)), phase.get(round(hi, 12))
            if left is None or right is None:
                continue
            chain = [left] + [x for b in inside for x in (b[2], b[3])] + [right]
            if any(chain[k] != chain[k + 1] for k in range(0, len(chain), 2)):
                raise IntegrityError(
                    f"{sj}: omega = {w:g}: the selected rows at alpha = {lo:g} ({left}) and {hi:g} ({right}) do not "
                    f"bracket the boundaries between them ({', '.join(f'{b[2]}->{b[3]}' for b in inside) or 'none'}) "
                    f"(verify --strict)"
                )
        sweep = c.get("alpha_c_sweep")
        if sweep is not None and not any(
            b[2:] == ("positional", "semantic", "brent") and same_number(b[1], sweep) for b in bounds
        ):
            raise IntegrityError(
                f"{sj}: omega = {w:g}: alpha_c_sweep = {sweep!r} is not a positional -> semantic boundary (verify --strict)"
            )
        for name, ref in (c.get("refined") or {}).items():
            roots = ref.get("roots") if isinstance(ref, dict) else None
            if not roots:
                continue
            x = np.asarray(roots, dtype=float)
            mean, se = float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else math.nan
            if not (same_number(ref.get("alpha"), mean) and same_number(ref.get("standard_error"), se)):
                raise IntegrityError(
                    f"{sj}: omega = {w:g}: refined {name} = {ref.get('alpha')!r} +- {ref.get('standard_error')!r} is not "
                    f"the mean and standard error of its {len(x)} roots ({mean!r} +- {se!r}) (verify --strict)"
                )
            if name in c and not (
                same_number(c[name], ref["alpha"]) and same_number(c.get(f"{name}_error"), ref["standard_error"])
            ):
                raise IntegrityError(f"{sj}: omega = {w:g}: {name} is not its refined value (verify --strict)")


PHASE_DIAGRAM = register_kind(
    FolderKind(
        "phase-diagram",
        ("phase_diagram.csv", "summary.json"),
        _check_phase_diagram,
        optional=("boundaries.csv",),
        strict=_strict_phase_diagram,
        # the benchmark tables of benchmarks/alpha_c_refine.py and alpha_c_quadrature.py, written beside
        # the committed phase diagram and read by no command
        companions=("alpha_c_refine.csv", "alpha_c_refine.json", "alpha_c_quadrature.csv", "alpha_c_quadrature.json"),
    )
)


def _check_rsb(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """rsb.json: a problem and alpha; per result a known status, finite RS e_t and ε_g, and for a converged
    1RSB result finite y > 0, e_t, ε_g and the overlaps' shapes."""
    from dotattn.positional_semantic.rsb import RESULT_STATUSES, RSB_FILE

    path = folder / RSB_FILE
    body = read_verified_json(path)
    params = body.get("parameters")
    if not isinstance(params, dict) or not isinstance(params.get("problem"), dict):
        raise IntegrityError(f"{path}: no 'parameters' with the problem")
    problem = problem_of(path, params)
    results = body.get("results")
    if not isinstance(results, list) or not results:
        raise IntegrityError(f"{path}: no results")
    r, rt, L = problem.rank, problem.teacher_rank, problem.L
    for i, item in enumerate(results, start=1):
        try:
            rs, rsb = item["rs"], item["rsb"]
            status = rsb["status"]
        except (KeyError, TypeError):
            raise IntegrityError(f"{path}: result {i} lacks 'rs' or 'rsb'") from None
        if status not in RESULT_STATUSES:
            raise IntegrityError(f"{path}: result {i}: status {status!r} is not one of {', '.join(RESULT_STATUSES)}")
        check_finite(path, i, "rs train_loss", float(rs["train_loss"]))
        check_finite(path, i, "rs test_error", float(rs["test_error"]))
        if status == CONVERGED:
            check_finite(path, i, "y", float(rsb["y"]))
            if not float(rsb["y"]) > 0:
                raise IntegrityError(f"{path}: result {i}: y = {rsb['y']} is not positive")
            check_finite(path, i, "train_loss", float(rsb["train_loss"]))
            check_finite(path, i, "test_error", float(rsb["test_error"]))
            for name, shape in (("q0", (r, r)), ("q1", (r, r)), ("V", (r, r)), ("theta", (r, rt)), ("mu", (L, r))):
                check_matrix(path, i, name, rsb[name], shape, finite=True)


RSB = register_kind(FolderKind("rsb", ("rsb.json",), _check_rsb, meta_file="rsb.json"))


def _complexity_parts(folder: Path):
    """(summary, problem, alphas, rules, y_grid, points per (rule name, alpha)) of a complexity folder."""
    from dotattn.positional_semantic.complexity import (
        CURVE_STATUSES,
        SUMMARY_FILE,
        CurvePoint,
        check_alphas,
        check_rules,
        curve_file,
        rule_name,
    )

    path = folder / SUMMARY_FILE
    body = read_verified_json(path)
    params = body.get("parameters")
    if not isinstance(params, dict) or not isinstance(params.get("problem"), dict):
        raise IntegrityError(f"{path}: no 'parameters' with the problem")
    problem = problem_of(path, params)
    try:
        alphas = check_alphas(params["alphas"])
        rules = check_rules(params["options"]["rules"])
        y_grid = sorted(float(y) for y in params["options"]["y_grid"])
    except (KeyError, TypeError, ValueError) as err:
        raise IntegrityError(f"{path}: parameters lack valid alphas, rules or y_grid ({err})") from None
    rs = body.get("rs")
    if not isinstance(rs, list) or len(rs) != len(alphas):
        raise IntegrityError(f"{path}: 'rs' must hold one row per alpha ({len(alphas)})")
    for i, (row, a) in enumerate(zip(rs, alphas, strict=True), start=1):
        if not on_grid(float(row.get("alpha", "nan")), [a]):
            raise IntegrityError(f"{path}: rs row {i} is not alpha = {a:g}")
        check_finite(path, i, "positional_train_loss", float(row["positional_train_loss"]))
        check_finite(path, i, "semantic_train_loss", float(row["semantic_train_loss"]))
    points = {}
    for rule in rules:
        for a in alphas:
            csv_path = folder / curve_file(rule, a)
            if not csv_path.is_file():
                raise IntegrityError(f"{csv_path}: missing (one curve per rule and alpha)")
            rows = read_verified_csv(csv_path)
            pts = [CurvePoint.from_row(r) for r in rows]
            if sorted(p.y for p in pts) != y_grid:
                raise IntegrityError(f"{csv_path}: its y values are not the y_grid of summary.json")
            for i, p in enumerate(pts, start=1):
                if p.status not in CURVE_STATUSES:
                    raise IntegrityError(f"{csv_path}: row {i}: status {p.status!r} is not one of {CURVE_STATUSES}")
                if p.status == CONVERGED:
                    for name in ("train_loss", "complexity", "energy", "q0", "q1"):
                        check_finite(csv_path, i, name, getattr(p, name))
                    if not abs(p.energy - (p.train_loss + p.complexity / p.y)) <= 1e-12 * max(1.0, abs(p.energy)):
                        raise IntegrityError(f"{csv_path}: row {i}: energy is not e_t + complexity / y")
                    if not p.q1 > p.q0:
                        raise IntegrityError(f"{csv_path}: row {i}: a converged saddle needs q1 > q0")
            points[(rule_name(rule), a)] = pts
    return body, problem, alphas, rules, y_grid, points


def _check_complexity(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """summary.json: the problem, alphas, rules, y grid and one RS row per alpha; a curve CSV per (rule, alpha) on
    that y grid, with known statuses, finite values where converged and e = e_t + Σ/y; alpha_equilibrium and
    alpha_threshold present."""
    body = _complexity_parts(folder)[0]
    for name in ("alpha_equilibrium", "alpha_threshold"):
        item = body.get(name)
        if not isinstance(item, dict) or "value" not in item or "method" not in item:
            raise IntegrityError(f"{folder / 'summary.json'}: no {name} with its value and method")


def _strict_complexity(folder: Path) -> None:
    """The features, crossings and alpha_equilibrium / alpha_threshold re-derived from the curve rows."""
    from dotattn.positional_semantic.complexity import summarise

    body, _, alphas, rules, _, points = _complexity_parts(folder)
    again = summarise(alphas, rules, body["rs"], points)
    sj = folder / "summary.json"
    for key in ("alpha_equilibrium", "alpha_threshold", "crossings", "curves"):
        if not same_tree(to_jsonable(again[key]), body.get(key)):
            raise IntegrityError(f"{sj}: {key} is not what the curve rows give (verify --strict)")


def same_tree(a: Any, b: Any) -> bool:
    """Nested dicts / lists equal, numbers to :data:`STRICT_RTOL` (NaN equals NaN)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(same_tree(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same_tree(x, z) for x, z in zip(a, b, strict=True))
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return same_number(a, b)


COMPLEXITY = register_kind(
    FolderKind(
        "complexity",
        ("summary.json",),
        _check_complexity,
        recognise=lambda folder: "alpha_threshold" in (read_json_if_valid(folder / "summary.json") or {}),
        optional=("curve_*.csv",),
        strict=_strict_complexity,
    )
)
