"""The folder kinds of the positional–semantic theory, registered with :mod:`dotattn.core.integrity`:
``phase-diagram`` (``dotattn phase-diagram``: phase_diagram.csv, boundaries.csv, summary.json) and
``rsb`` (``dotattn solve --rsb 1 --out``: rsb.json).
Also the row checks other packages reuse for theory records (:func:`check_branch_rows`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dotattn.core.integrity import (
    FolderKind,
    check_finite,
    check_matrix,
    on_grid,
    read_records,
    read_verified_json,
    register_kind,
)
from dotattn.core.io import IntegrityError
from dotattn.core.status import CONVERGED
from dotattn.positional_semantic.problem import Problem, problem_of
from dotattn.positional_semantic.records import BranchPoint

__all__ = ["ALL_BRANCHES", "check_branch_rows", "check_selection", "PHASE_DIAGRAM", "RSB"]

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


PHASE_DIAGRAM = register_kind(
    FolderKind(
        "phase-diagram",
        ("phase_diagram.csv", "summary.json"),
        _check_phase_diagram,
        optional=("boundaries.csv",),
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
