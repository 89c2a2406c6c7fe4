"""Experiment sweeps: the ω column, α_c(ω), α_lin(ω), executors and cache of the phase diagram.

SPEC sections 4 and 5. The unit of work is one ω *column* (:func:`omega_column`, a pure
function of plain arguments, so that a process pool or a Dask cluster can run it):

1. each informed branch (:mod:`dotattn.positional_semantic.branch`) (positional, semantic) is seeded from its informed initialisation at
   the end of the α grid where it is expected (positional: smallest α, semantic: largest α;
   other α if that fails) and followed along the grid in both directions by continuation
   (warm start from the neighbouring α) until it ceases to exist (no convergence, invalid, or
   it flows to another branch);
2. each end inside the grid is bracketed by bisection to ``spinodal_tol`` in α (the spinodal);
3. α_c: the root of e_t(semantic) − e_t(positional), bracketed on the grid and polished by
   Brent's method to ``critical_tol``;
4. the boundaries between the globally minimal phases (:func:`phase_boundaries`): the phase at
   each α is the followed branch of lowest e_t (positional, semantic and, for r >= 2, mixed);
   where it changes between grid neighbours, the root of the two phases' e_t difference by
   Brent's method (α_c itself where it is that root), or the spinodal where a phase starts or
   ends (one :class:`dotattn.positional_semantic.records.PhaseBoundary` each, in the column's summary);
5. α_lin: the smallest α at which ε_g of the selected branch drops below the linear baseline,
   by Brent's method on the branch's ε_g (or α_c itself where the switch of branch crosses it).
6. the quadrature errors of α_c, α_lin and the Brent boundaries: each branch's fixed point at the evaluation nearest
   the root solved again on the coarse rule, |fine − coarse| of e_t (ε_g) divided by the slope of
   the gap over the bracketing grid cell (:func:`root_uncertainty`).

With fewer columns than workers the branches of a column are followed as separate tasks
(:func:`column_branch`) and the column finished by :func:`finish_column` (same result).

"None in range" is reported as None. The selected branch at each α is the lowest e_t among the
branches that exist there (:func:`dotattn.positional_semantic.branch.selected_at`). Reading and writing the
outputs: :mod:`dotattn.theory_vs_erm.output`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import brentq

from dotattn.core.io import read_cache_unit, remove_stale_tmp, write_cache_unit
from dotattn.core.progress import Cost
from dotattn.core.rows import read_float
from dotattn.core.runner import (
    Interrupted,
    ProgressState,
    RunLock,
    as_interrupted,
    check_dask_address,
    check_workers,
    run_tasks,
)
from dotattn.core.validation import ParameterError, check_alpha, check_number
from dotattn.positional_semantic import compiled
from dotattn.positional_semantic.baseline import linear_baseline_test_error
from dotattn.positional_semantic.branch import (
    FOLLOWED_BRANCHES,
    Branch,
    branch_names,
    branch_records,
    follow_branches,
    selected_at,
)
from dotattn.positional_semantic.catalogue import QuadratureSpec, default_quadrature
from dotattn.positional_semantic.labels import NO_BRANCH
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.records import BOUNDARY_COLUMNS, BRANCH_POINT_COLUMNS, BranchPoint, PhaseBoundary
from dotattn.positional_semantic.refine import RefinedRoot, RefineSpec, envelope_slope, refine_root
from dotattn.positional_semantic.state_evolution import FixedPoint, SolverOptions

__all__ = [
    "SweepSettings",
    "ColumnSummary",
    "omega_column",
    "column_branch",
    "finish_column",
    "branch_points",
    "PhaseDiagram",
    "run_phase_diagram",
    "check_grids",
    "check_figure_omega",
    "cached_columns",
    "root_uncertainty",
    "column_fixed_points_estimate",
    "refine_fixed_points",
    "estimate_seconds",
    "DEFAULT_OMEGAS",
    "DEFAULT_ALPHAS",
    "ROW_COLUMNS",
    "BOUNDARY_ROW_COLUMNS",
    "FOLLOWED_BRANCHES",
    "phase_boundaries",
]

DEFAULT_OMEGAS = tuple(round(0.05 * i, 10) for i in range(10))  # 0, 0.05, ..., 0.45
DEFAULT_ALPHAS = tuple(round(0.1 * i, 10) for i in range(1, 26))  # 0.1, ..., 2.5
EXTRA_FIXED_POINTS_PER_COLUMN = 21
"""Fixed points a column solves besides the grid (Brent for α_c and α_lin, spinodals, the coarse
solves of the α_c and α_lin errors): rough (measured 21 for the toy model at ω = 0.1…0.4 on the
default grid and rule, 25 at ω <= 0.05, 10 at ω = 0.45)."""
SECONDS_PER_FIXED_POINT_NODE = 4.3e-6
"""Rough CPU seconds per fixed point per node of the fine rule: the default phase diagram took
74.7 s of column CPU time for 707 fixed points (0.106 s each) on 20,736 nodes, at load average
1.1-1.6 on the 2-core machine (commit after 280bf8d, token symmetry on)."""
SECONDS_PER_FIXED_POINT = 0.017
"""Rough CPU seconds per fixed point besides the nodes (from the ω = 0.3 column on Gauss-Hermite 8,
4,096 nodes: 0.032 s per fixed point)."""
REFINE_COST_PER_NODE = 4.0
"""A refinement solve costs about this many times a sweep solve per node: a QMC rule has no token
symmetry to fold (the sweep's Gauss–Hermite rule is folded 2-8x) and a cold prox needs more
iterations (measured at ω = 0.1: 0.6 s for 2^13 x 2 QMC nodes against 0.19 s for 12^4 GH nodes)."""
SECONDS_PER_STABILITY = 0.065
"""Rough CPU seconds of the RS stability of one grid record (:func:`dotattn.positional_semantic.stability.rs_stability` on
its 2^11 x 4 Sobol rule, toy model): the ω = 0.3 column took 13.7 s of user time with it and 9.5 s
without (50 records, 1 worker, load average ≈ 7, so ≈ 0.085 s each loaded), against ≈ 1.3x less quiet."""
STUDENT_COST_FACTORS = {"tied": 1.0, "untied": 4.6}
"""CPU time per node of each student over the tied one (the constants above describe the tied student).
The untied student (docs/untied.md) solves 2r field variables per token: one fixed point costs 3.8-5.0x a
tied one per node of a rule of the same size (``benchmarks/untied.py --cost``), and a whole 7-column
phase diagram (ω = 0.05:0.35:7, α = 0.2:4.0:20, default rules and refinement, 1 worker) took 4.6x the
tied one's column time per estimated unit (1912 s against 255 s, run one after the other at the same
load, about 5 on 2 cores)."""
COMPILED_FACTORS = {"sweep": 0.58, "refine": 0.37, "stability": 0.26}
"""CPU time of each part with the compiled prox kernel (:mod:`dotattn.positional_semantic.compiled`, numba) over
that of the vectorised kernel before it (which the constants above describe), measured on the default ω = 0.3
column in one session at load average 19-25 on 2 cores:
sweep solves 0.198 -> 0.115 s each, refinement solves 0.568 -> 0.212 s, stability 0.178 -> 0.046 s per
record (42.3 -> 18.5 s for the column, the same α_c and α_lin to every printed digit)."""

PHASE_DIAGRAM_COST = Cost(
    SECONDS_PER_FIXED_POINT_NODE, "dotattn/positional_semantic/phase_diagram.py and benchmarks/README.md (main_job.py)"
)
"""The calibration :func:`estimate_seconds` multiplies out (its constants above); checked again on the default
ω = 0.3 column with refinement: 10.3 CPU-s measured against 9.3 estimated (26.6 s wall at load 5 on 2 cores,
where the start line says 28 s)."""

SOLVE_COST = Cost(1.3e-4, 'benchmarks/README.md "Start-line estimates"')
"""CPU seconds per node of the fine rule per start of a catalogue, for a student of rank 2, besides
:data:`SOLVE_START_OVERHEAD`: a straight line through the rank-2 catalogue at α = 2 on the default 46,656-node rule
(66 CPU-s for 10 starts, see the comment in :func:`dotattn.positional_semantic.catalogue.solve`) and on Gauss-Hermite
order 5, 15,625 nodes (5 starts: 12.1 and 13.4 CPU-s in one process, nice 5, load average 7 on 2 cores). Order 4
(4,096 nodes) then comes out at 0.75x of its 6.9 CPU-s; coarser rules converge more slowly: order 3 (729 nodes)
took 9.9 CPU-s, about 3x the estimate."""
SOLVE_START_OVERHEAD = 0.5
"""CPU seconds per start besides the nodes (the coarse pass, the RS stability, Python): the same line."""


def start_seconds(problem: Problem, nodes: int) -> float:
    """Rough CPU seconds of one start of a catalogue on a fine rule of ``nodes`` nodes: :data:`SOLVE_START_OVERHEAD`
    + :data:`SOLVE_COST` × nodes, times the student's cost per node (untied: 4.6, ``phase_diagram.STUDENT_COST_FACTORS``)."""
    return (SOLVE_START_OVERHEAD + SOLVE_COST.seconds * nodes) * STUDENT_COST_FACTORS[problem.student]


COLUMN_FORMAT = 3
"""Version of a column result's content (part of the cache key): 2 added the α_c, α_lin errors,
3 the phase boundaries and the mixed branch's spinodals."""
ROW_COLUMNS = list(BRANCH_POINT_COLUMNS)
"""Columns of ``phase_diagram.csv``: one :class:`dotattn.positional_semantic.records.BranchPoint` per row."""
BOUNDARY_ROW_COLUMNS = list(BOUNDARY_COLUMNS)
"""Columns of ``boundaries.csv``: one :class:`dotattn.positional_semantic.records.PhaseBoundary` per row."""


@dataclass(frozen=True)
class SweepSettings:
    """Everything besides (problem, ω, α grid) that defines a column's result (validated)."""

    quadrature: QuadratureSpec
    options: SolverOptions = SolverOptions()
    spinodal_tol: float = 1e-3
    critical_tol: float = 1e-4
    refine: RefineSpec | None = None
    """Re-solve the fixed points at the α_c and α_lin roots on independent QMC rules
    (:func:`dotattn.positional_semantic.refine.refine_root`); None: the sweep rule's roots with the coarse-rule bound."""

    def __post_init__(self) -> None:
        if self.refine is not None and not isinstance(self.refine, RefineSpec):
            raise ParameterError(
                f"refine must be a dotattn.positional_semantic.refine.RefineSpec or None, got {type(self.refine).__name__}"
            )
        if not isinstance(self.quadrature, QuadratureSpec):
            raise ParameterError(f"quadrature must be a QuadratureSpec, got {type(self.quadrature).__name__}")
        if not isinstance(self.options, SolverOptions):
            raise ParameterError(f"options must be SolverOptions, got {type(self.options).__name__}")
        for name in ("spinodal_tol", "critical_tol"):
            object.__setattr__(self, name, check_number(name, getattr(self, name), 0.0, True, None, "> 0"))

    def check(self, problem: Problem) -> None:
        """Checks that involve the problem (ParameterError)."""
        self.quadrature.check(problem)
        self.options.check(problem)

    def to_dict(self) -> dict[str, Any]:
        return {
            "quadrature": self.quadrature.to_dict(),
            "options": asdict(self.options),
            "spinodal_tol": self.spinodal_tol,
            "critical_tol": self.critical_tol,
            **({} if self.refine is None else {"refine": self.refine.to_dict()}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepSettings:
        q = d["quadrature"]
        quad = QuadratureSpec(q["kind"], q["order"], q.get("coarse_order"), q.get("scramblings", 8), q.get("seed", 0))
        return cls(
            quad,
            SolverOptions(**d["options"]),
            d["spinodal_tol"],
            d["critical_tol"],
            RefineSpec.from_dict(d.get("refine")),
        )


def check_figure_omega(figure_omega: float | None, omegas: Iterable[float]) -> None:
    """ParameterError unless ``figure_omega`` is None or one of the computed ``omegas`` (to 1e-9)."""
    omegas = list(omegas)
    if figure_omega is not None and not any(abs(figure_omega - w) < 1e-9 for w in omegas):
        raise ParameterError(
            f"figure_omega must be one of the computed omega values "
            f"({', '.join(f'{w:g}' for w in omegas)}), got {figure_omega:g}"
        )


def check_grids(omegas: Iterable[float], alphas: Iterable[float]) -> tuple[list[float], list[float]]:
    """The sorted, distinct ω and α grids (ParameterError unless non-empty and finite, α in (0, ALPHA_MAX]
    and ω in [0, 1])."""
    try:
        omegas = sorted(set(check_number("omega", w, 0.0, False, 1.0, "in [0, 1]") for w in omegas))
        alphas = sorted(set(check_alpha(a) for a in alphas))
    except ParameterError:  # a TypeError too: its own message names the value
        raise
    except TypeError:
        raise ParameterError("omega and alpha grids must be lists of numbers") from None
    if not omegas or not alphas:
        raise ParameterError("the omega and alpha grids must not be empty")
    return omegas, alphas


@dataclass(frozen=True)
class ColumnSummary:
    """What one ω column found: α_c, α_lin, the spinodals (None: none in range) and the baseline.

    ``spinodals``: branch -> {"lower": α or None, "upper": α or None};
    ``spinodal_semantic`` = the semantic branch's lower end, ``spinodal_positional`` = the
    positional branch's upper end; ``seconds``: compute time of the column.
    ``alpha_c_error``, ``alpha_lin_error``: quadrature-error estimates of α_c and α_lin
    (:func:`root_uncertainty` of the e_t gap, resp. of ε_g, with the fixed points' quadrature
    errors from :meth:`dotattn.positional_semantic.branch.Branch.quadrature_error`); None where the root is None or
    no estimate is available (no coarse rule). ``boundaries``: every boundary between globally
    minimal phases found in the α range (:func:`phase_boundaries`), sorted by α (α_c is one of
    them where the positional phase gives way to the semantic one). ``spinodals`` has every
    followed branch (mixed too for r >= 2).

    With refinement (:attr:`SweepSettings.refine`): ``alpha_c`` and ``alpha_lin`` are the means of
    the roots on the independent QMC rules and their errors the standard errors of those means
    (:class:`dotattn.positional_semantic.refine.RefinedRoot`, in ``refined``: name -> its row); ``alpha_c_sweep``,
    ``alpha_lin_sweep`` (and ``*_sweep_error``) keep the sweep rule's Brent roots and their
    coarse-rule bounds. Without it the ``*_sweep`` fields are None and ``refined`` is empty. The
    phase boundaries are always the sweep rule's.
    """

    omega: float
    alpha_c: float | None
    alpha_lin: float | None
    spinodal_semantic: float | None
    spinodal_positional: float | None
    spinodals: dict
    linear_baseline_test_error: float
    seconds: float
    alpha_c_error: float | None = None
    alpha_lin_error: float | None = None
    boundaries: tuple[PhaseBoundary, ...] = ()
    alpha_c_sweep: float | None = None
    alpha_c_sweep_error: float | None = None
    alpha_lin_sweep: float | None = None
    alpha_lin_sweep_error: float | None = None
    refined: dict = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {
            "omega": self.omega,
            "alpha_c": self.alpha_c,
            "alpha_c_error": self.alpha_c_error,
            "spinodal_semantic": self.spinodal_semantic,
            "spinodal_positional": self.spinodal_positional,
            "alpha_lin": self.alpha_lin,
            "alpha_lin_error": self.alpha_lin_error,
            "linear_baseline_test_error": self.linear_baseline_test_error,
            "spinodals": self.spinodals,
            "boundaries": [b.to_row() for b in self.boundaries],
            "seconds": self.seconds,
            **(
                {}
                if not self.refined and self.alpha_c_sweep is None and self.alpha_lin_sweep is None
                else {
                    "alpha_c_sweep": self.alpha_c_sweep,
                    "alpha_c_sweep_error": self.alpha_c_sweep_error,
                    "alpha_lin_sweep": self.alpha_lin_sweep,
                    "alpha_lin_sweep_error": self.alpha_lin_sweep_error,
                    "refined": dict(self.refined),
                }
            ),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ColumnSummary:
        opt = lambda x: None if x is None else float(x)  # noqa: E731
        return cls(
            omega=float(row["omega"]),
            alpha_c=opt(row["alpha_c"]),
            alpha_lin=opt(row["alpha_lin"]),
            spinodal_semantic=opt(row["spinodal_semantic"]),
            spinodal_positional=opt(row["spinodal_positional"]),
            spinodals=dict(row["spinodals"]),
            linear_baseline_test_error=float(row["linear_baseline_test_error"]),
            seconds=read_float(row.get("seconds")),
            alpha_c_error=opt(row.get("alpha_c_error")),
            alpha_lin_error=opt(row.get("alpha_lin_error")),
            boundaries=tuple(PhaseBoundary.from_row(b) for b in row.get("boundaries") or ()),
            alpha_c_sweep=opt(row.get("alpha_c_sweep")),
            alpha_c_sweep_error=opt(row.get("alpha_c_sweep_error")),
            alpha_lin_sweep=opt(row.get("alpha_lin_sweep")),
            alpha_lin_sweep_error=opt(row.get("alpha_lin_sweep_error")),
            refined=dict(row.get("refined") or {}),
        )


# ----------------------------------------------------------------------------------------------
# one ω column
# ----------------------------------------------------------------------------------------------
def _follow(
    problem: Problem, alphas: list[float], settings: SweepSettings, report: Callable[[], None] | None = None
) -> dict[str, Branch]:
    return follow_branches(problem, alphas, settings.quadrature, settings.options, report)


def branch_points(
    problem_dict: dict[str, Any],
    omega: float,
    alphas: list[float],
    settings_dict: dict[str, Any],
    at: list[float] | None = None,
) -> list[BranchPoint]:
    """The branch records (no spinodals, α_c or α_lin): what a comparison with ERM needs. The branches are
    followed along ``alphas``; the records are those at ``at`` (a subset of ``alphas``; default all of them)."""
    problem = Problem.from_dict({**problem_dict, "omega": omega})
    alphas = sorted(alphas)
    keep = alphas if at is None else sorted(a for a in alphas if any(abs(a - b) < 1e-9 for b in at))
    return branch_records(_follow(problem, alphas, SweepSettings.from_dict(settings_dict)), omega, keep)


def omega_column(
    problem_dict: dict[str, Any],
    omega: float,
    alphas: list[float],
    settings_dict: dict[str, Any],
    report: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Everything the phase diagram needs at one ω (plain JSON-ready dict in and out, for process
    pools, Dask and the cache): ``{"omega", "rows": [BranchPoint rows], "summary": ColumnSummary row,
    "fixed_points": number solved, "cpu_seconds": CPU seconds by stage}`` (stages: ``follow``, ``two_sided``
    (:meth:`Branch.lowest_of_both_sides`), ``spinodals``, ``alpha_c``, ``alpha_lin`` (Brent and their coarse-rule
    errors), ``boundaries``, ``refine``, ``stability`` (RS stability of the records), ``records``). ``report()`` is called after every fixed point (progress)."""
    t0 = time.perf_counter()
    problem = Problem.from_dict({**problem_dict, "omega": omega})
    settings = SweepSettings.from_dict(settings_dict)
    alphas = sorted(alphas)
    count = _Counter(report)
    branches = _follow(problem, alphas, settings, count)
    return _finish(problem, omega, alphas, settings, branches, count, t0)


def column_branch(
    problem_dict: dict[str, Any],
    omega: float,
    alphas: list[float],
    settings_dict: dict[str, Any],
    name: str,
    report: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """First stage of a column split by branch (when there are fewer ω columns than workers): the
    branch ``name`` followed along the α grid, as ``{"branch": Branch, "seconds", "fixed_points"}``
    (picklable; :func:`finish_column` is the second stage)."""
    t0 = time.perf_counter()
    problem = Problem.from_dict({**problem_dict, "omega": omega})
    settings = SweepSettings.from_dict(settings_dict)
    count = _Counter(report)
    branch = follow_branches(problem, sorted(alphas), settings.quadrature, settings.options, count, (name,))[name]
    branch.report = None
    return {"branch": branch, "seconds": time.perf_counter() - t0, "fixed_points": count.n}


def finish_column(
    problem_dict: dict[str, Any],
    omega: float,
    alphas: list[float],
    settings_dict: dict[str, Any],
    parts: list[dict[str, Any]],
    report: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Second stage of a split column: spinodals, α_c, α_lin and the records from the followed
    branches (the :func:`column_branch` results of every branch of :func:`dotattn.positional_semantic.branch.branch_names`);
    the same result as :func:`omega_column` (its ``seconds`` counts both stages)."""
    t0 = time.perf_counter() - sum(p["seconds"] for p in parts)
    problem = Problem.from_dict({**problem_dict, "omega": omega})
    count = _Counter(report, sum(p["fixed_points"] for p in parts))
    by_name = {p["branch"].name: p["branch"] for p in parts}
    branches = {name: by_name[name] for name in branch_names(problem)}
    for b in branches.values():
        b.report = count
    return _finish(problem, omega, sorted(alphas), SweepSettings.from_dict(settings_dict), branches, count, t0)


class _Counter:
    """Progress callback that counts the fixed points solved and passes each on to ``report``."""

    def __init__(self, report: Callable[[], None] | None, n: int = 0) -> None:
        self.report, self.n = report, n

    def __call__(self) -> None:
        self.n += 1
        if self.report is not None:
            self.report()


def _finish(
    problem: Problem,
    omega: float,
    alphas: list[float],
    settings: SweepSettings,
    branches: dict[str, Branch],
    count: _Counter,
    t0: float,
) -> dict[str, Any]:
    """Spinodals, α_c, α_lin (with their quadrature errors) and the records of a column whose
    branches are followed; the column result of :func:`omega_column`."""
    clock = _StageClock()
    spinodals = {name: branches[name].spinodals(alphas, settings.spinodal_tol) for name in branches}
    eps_lin = linear_baseline_test_error(problem)
    clock.lap("spinodals")
    critical = _critical_root(branches, alphas, settings.critical_tol)
    alpha_c = critical.alpha if critical is not None else None
    alpha_c_error = _root_error(branches, critical, "train_loss")
    clock.lap("alpha_c")
    alpha_lin, alpha_lin_error, lin_root = _baseline_alpha(
        branches, alphas, critical, alpha_c_error, eps_lin, settings.critical_tol
    )
    clock.lap("alpha_lin")
    boundaries = phase_boundaries(branches, alphas, omega, settings, known=(critical, alpha_c_error))
    clock.lap("boundaries")
    sweep: dict[str, Any] = {}
    if settings.refine is not None:
        refined = _refine(problem, branches, critical, lin_root, eps_lin, settings, count)
        sweep = {
            "alpha_c_sweep": alpha_c,
            "alpha_c_sweep_error": alpha_c_error,
            "alpha_lin_sweep": alpha_lin,
            "alpha_lin_sweep_error": alpha_lin_error,
            "refined": {k: v.to_row() for k, v in refined.items()},
        }
        if "alpha_c" in refined:  # else the sweep's root and bound stay
            alpha_c, alpha_c_error = refined["alpha_c"].alpha, refined["alpha_c"].standard_error
        if "alpha_lin" in refined:
            alpha_lin, alpha_lin_error = refined["alpha_lin"].alpha, refined["alpha_lin"].standard_error
    clock.lap("refine")
    summary = ColumnSummary(
        omega=omega,
        alpha_c=alpha_c,
        alpha_lin=alpha_lin,
        alpha_c_error=alpha_c_error,
        alpha_lin_error=alpha_lin_error,
        boundaries=tuple(boundaries),
        **sweep,
        spinodal_semantic=spinodals["semantic"]["lower"],
        spinodal_positional=spinodals["positional"]["upper"],
        spinodals=spinodals,
        linear_baseline_test_error=eps_lin,
        seconds=time.perf_counter() - t0,
    )
    rows = [p.to_row() for p in branch_records(branches, omega, alphas)]
    clock.lap("records")
    cpu = {stage: sum(b.cpu[stage] for b in branches.values()) for stage in ("follow", "two_sided", "stability")}
    cpu.update(clock.seconds)
    cpu["records"] -= cpu["stability"]
    return {"omega": omega, "rows": rows, "summary": summary.to_row(), "fixed_points": count.n, "cpu_seconds": cpu}


class _StageClock:
    """CPU seconds (process time) of consecutive stages: :meth:`lap` closes the stage that ran since the last lap."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.t = time.process_time()

    def lap(self, stage: str) -> None:
        now = time.process_time()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self.t
        self.t = now


@dataclass(frozen=True)
class _Root:
    """A root found by Brent's method: α, the slope of the function there (the secant over the
    grid cell that bracketed it) and, per branch, the fixed point at the evaluated α nearest the root."""

    alpha: float
    slope: float
    nearest: dict[str, FixedPoint]
    bracket: tuple[float, float] = (float("nan"), float("nan"))


def root_uncertainty(errors: Sequence[float | None], slope: float) -> float | None:
    """First-order shift of a simple root of f(α) when f is perturbed by at most Σ|errors_i|
    (the quadrature errors of the terms of f): Σ|δ_i| / |f'(root)|. None if an error is unknown
    or the slope is zero or not finite."""
    known = [e for e in errors if e is not None]
    if len(known) < len(errors) or not all(np.isfinite(e) for e in known) or not np.isfinite(slope) or slope == 0:
        return None
    return float(sum(abs(e) for e in known) / abs(slope))


def _brent(f: Callable[[float], tuple[float, dict[str, FixedPoint]]], a: float, b: float, tol: float) -> _Root:
    """Brent's method on f(x) = (value, fixed points behind it) over [a, b] to ``tol`` in x (each x
    evaluated once); ValueError unless f(a), f(b) have opposite signs, :class:`_BranchLost` propagates."""
    seen: dict[float, tuple[float, dict[str, FixedPoint]]] = {}

    def value(x: float) -> float:
        if x not in seen:
            seen[x] = f(x)
        return seen[x][0]

    root = float(brentq(value, a, b, xtol=tol, rtol=4 * np.finfo(float).eps))
    nearest = seen[min(seen, key=lambda x: abs(x - root))][1]
    return _Root(alpha=root, slope=(seen[b][0] - seen[a][0]) / (b - a), nearest=nearest, bracket=(a, b))


def _root_error(branches: dict[str, Branch], root: _Root | None, key: str) -> float | None:
    """Quadrature-error estimate of a root of a difference of the branches' ``key`` (train_loss or
    test_error): :func:`root_uncertainty` with each branch's error at the fixed point nearest the root."""
    if root is None:
        return None
    errors = [(branches[name].quadrature_error(fp) or {}).get(key) for name, fp in root.nearest.items()]
    return root_uncertainty(errors, root.slope)


def _critical_root(branches: dict[str, Branch], alphas: list[float], tol: float) -> _Root | None:
    """Root of e_t(sem) − e_t(pos) from positional-lower to semantic-lower, by Brent's method."""
    pos, sem = branches["positional"], branches["semantic"]
    both = [a for a in alphas if a in pos.points and a in sem.points]
    gap = {a: sem.points[a].train_loss - pos.points[a].train_loss for a in both}
    for a, b in zip(both, both[1:], strict=False):
        if gap[a] > 0 >= gap[b] and alphas.index(b) - alphas.index(a) == 1:

            def f(x: float, a: float = a, b: float = b) -> tuple[float, dict[str, FixedPoint]]:
                p, s = (pos.points[x], sem.points[x]) if x in (a, b) else (pos.at(x), sem.at(x))
                if p is None or s is None:
                    raise _BranchLost(x)
                return s.train_loss - p.train_loss, {"positional": p, "semantic": s}

            try:
                return _brent(f, a, b, tol)
            except _BranchLost:
                return None
    return None


def _critical_alpha(branches: dict[str, Branch], alphas: list[float], tol: float) -> float | None:
    """α_c: the root of e_t(sem) − e_t(pos) (:func:`_critical_root`), or None."""
    root = _critical_root(branches, alphas, tol)
    return root.alpha if root is not None else None


class _BranchLost(RuntimeError):
    pass


def _branch_root(branch: Branch, key: str, level: float, a: float, b: float, tol: float) -> _Root | None:
    """Root in [a, b] of (``key`` of the branch's fixed point) − ``level`` by Brent's method."""

    def f(x: float) -> tuple[float, dict[str, FixedPoint]]:
        fp = branch.points[x] if x in branch.points else branch.at(x)
        if fp is None:
            raise _BranchLost(x)
        return getattr(fp, key) - level, {branch.name: fp}

    try:
        return _brent(f, a, b, tol)
    except (_BranchLost, ValueError):
        return None


def _baseline_alpha(
    branches: dict[str, Branch],
    alphas: list[float],
    critical: _Root | None,
    alpha_c_error: float | None,
    eps_lin: float,
    tol: float,
) -> tuple[float | None, float | None, _Root | str | None]:
    """Smallest α where ε_g of the selected branch falls below ε_lin (None if not in range), its
    quadrature-error estimate (that of α_c where the switch of branch at α_c crosses the line), and
    how it was found: the Brent root on one branch, ``"alpha_c"``, or None (none, or a grid point)."""
    alpha_c = critical.alpha if critical is not None else None
    selected = {a: name for a in alphas if (name := selected_at(branches, a)) is not None}
    grid = list(selected)
    if not grid:
        return None, None, None
    first = selected[grid[0]]
    if branches[first].points[grid[0]].test_error < eps_lin:
        return None, None, None  # already below at the smallest α: the crossing is not in range
    for a, b in zip(grid, grid[1:], strict=False):
        sa, sb = selected[a], selected[b]
        eb = branches[sb].points[b].test_error - eps_lin
        if eb >= 0:
            continue
        if sa == sb:
            root = _branch_root(branches[sa], "test_error", eps_lin, a, b, tol)
        # the selected branch switches inside (a, b): at α_c if the switch crosses the line
        elif alpha_c is not None and a <= alpha_c <= b:
            fp = branches[sb].at(alpha_c)
            if fp is not None and fp.test_error < eps_lin:
                return alpha_c, alpha_c_error, "alpha_c"
            root = _branch_root(branches[sb], "test_error", eps_lin, alpha_c, b, tol)
        else:
            return b, None, None
        if root is None:
            return None, None, None
        return root.alpha, _root_error(branches, root, "test_error"), root
    return None, None, None


def _refine(
    problem: Problem,
    branches: dict[str, Branch],
    critical: _Root | None,
    lin_root: _Root | str | None,
    eps_lin: float,
    settings: SweepSettings,
    count: Callable[[], None],
) -> dict[str, RefinedRoot]:
    """α_c and α_lin re-evaluated on the refinement rules (:func:`dotattn.positional_semantic.refine.refine_root`):
    name -> :class:`dotattn.positional_semantic.refine.RefinedRoot` for each root that has one (α_lin = α_c where the
    switch of branch crosses the baseline)."""
    spec, options = settings.refine, settings.options
    if spec is None:
        raise ValueError("_refine needs settings.refine (the caller checks it)")
    on_branch = lambda name, fp: branches[name].on_branch(fp)  # noqa: E731
    out: dict[str, RefinedRoot] = {}
    if critical is not None:
        root = refine_root(
            problem,
            critical.alpha,
            critical.nearest,
            lambda fps: fps["semantic"].train_loss - fps["positional"].train_loss,
            critical.slope,
            spec,
            options,
            on_branch,
            count,
            slope_of=lambda fps, rule: envelope_slope(problem, fps, "semantic", "positional", rule, options),
        )
        if root is not None:
            out["alpha_c"] = root
    if lin_root == "alpha_c" and "alpha_c" in out:
        out["alpha_lin"] = out["alpha_c"]
    elif isinstance(lin_root, _Root):
        ((name, _),) = lin_root.nearest.items()
        root = refine_root(
            problem,
            lin_root.alpha,
            lin_root.nearest,
            lambda fps: fps[name].test_error - eps_lin,
            lin_root.slope,
            spec,
            options,
            on_branch,
            count,
        )
        if root is not None:
            out["alpha_lin"] = root
    return out


class _PhaseProbe:
    """The followed branches' fixed points at any α of one column, each solved at most once
    (grid points and the last points of the spinodal bisections are known already)."""

    def __init__(self, branches: dict[str, Branch]) -> None:
        self.branches = branches
        self.cache: dict[tuple[str, float], FixedPoint | None] = {}
        for name, b in branches.items():
            for good, _, fp in b.ends.values():
                self.cache[(name, good)] = fp

    def extent(self, name: str) -> tuple[float, float] | None:
        """[first, last] α known to be on the branch (grid points or bisection ends), or None."""
        b = self.branches[name]
        if not b.points:
            return None
        lo = b.ends["lower"][0] if "lower" in b.ends else min(b.points)
        hi = b.ends["upper"][0] if "upper" in b.ends else max(b.points)
        return lo, hi

    def present(self, lo: float, hi: float) -> list[str]:
        """The branches that exist on all of [lo, hi] (between their known ends)."""
        out = []
        for name in self.branches:
            e = self.extent(name)
            if e is not None and e[0] <= lo and hi <= e[1]:
                out.append(name)
        return out

    def at(self, name: str, alpha: float) -> FixedPoint | None:
        """The branch at α: :meth:`Branch.at` (from its grid neighbours), else continued from the
        nearest end of its spinodal bisection (which can lie closer than any grid point)."""
        key = (name, alpha)
        if key not in self.cache:
            b = self.branches[name]
            fp = b.points[alpha] if alpha in b.points else b.at(alpha)
            if fp is None and b.ends:
                good, _, start = min(b.ends.values(), key=lambda e: abs(e[0] - alpha))
                fp = b.solve_from(alpha, start)
                fp = fp if b.on_branch(fp) else None
            self.cache[key] = fp
        return self.cache[key]

    def phase(self, alpha: float, names: Sequence[str]) -> str:
        """The branch of lowest e_t among ``names`` found at α (``none`` if none is found)."""
        found = {n: fp for n in names if (fp := self.at(n, alpha)) is not None}
        return min(found, key=lambda n: found[n].train_loss) if found else NO_BRANCH

    def gap(self, lower: str, upper: str) -> Callable[[float], tuple[float, dict[str, FixedPoint]]]:
        """x -> (e_t(upper) − e_t(lower) at x, the two fixed points), for :func:`_brent`."""

        def f(x: float) -> tuple[float, dict[str, FixedPoint]]:
            p, q = self.at(lower, x), self.at(upper, x)
            if p is None or q is None:
                raise _BranchLost(x)
            return q.train_loss - p.train_loss, {lower: p, upper: q}

        return f


def phase_boundaries(
    branches: dict[str, Branch],
    alphas: list[float],
    omega: float,
    settings: SweepSettings,
    known: tuple[_Root | None, float | None] = (None, None),
) -> list[PhaseBoundary]:
    """Every boundary between globally minimal phases in the α range of one column, sorted by α.

    The phase at α is the followed branch of lowest e_t among those that exist there. Each grid
    cell [a, b] is cut at the spinodals inside it (after :meth:`Branch.spinodals`, whose bracket
    ends are used: the last α on the branch and the first off it), so that the set of existing
    branches is constant on each piece. A piece whose ends have different phases P, Q holds the
    root of e_t(Q) − e_t(P), found by Brent's method to ``critical_tol`` (``brent``, with the
    quadrature-error estimate of :func:`root_uncertainty`; if a third branch is lower at that
    root, each side is searched again, at most three levels deep); if a branch is lost inside
    the bracket, the boundary is ``unresolved`` at its midpoint. Neighbouring pieces whose phases
    differ give a ``spinodal`` boundary at the spinodal between them. Two crossings inside one
    grid cell with the same phase at both ends are not seen. ``known``: α_c's root and error
    (:func:`_critical_root`), reused where the same bracket is asked for (no solve repeated).
    """
    probe = _PhaseProbe(branches)
    out: list[PhaseBoundary] = []

    def brent(lo: float, hi: float, names: list[str], depth: int) -> list[PhaseBoundary]:
        p, q = probe.phase(lo, names), probe.phase(hi, names)
        if p == q:
            return []
        if NO_BRANCH in (p, q):  # a branch present on the piece was not found at an end
            return [PhaseBoundary(omega, 0.5 * (lo + hi), p, q, "unresolved", bracket=0.5 * (hi - lo))]
        root, error = known
        if not (root is not None and (p, q) == ("positional", "semantic") and root.bracket == (lo, hi)):
            try:
                root = _brent(probe.gap(p, q), lo, hi, settings.critical_tol)
            except (_BranchLost, ValueError):
                return [PhaseBoundary(omega, 0.5 * (lo + hi), p, q, "unresolved", bracket=0.5 * (hi - lo))]
            error = _root_error(branches, root, "train_loss")
        others = [n for n in names if n not in (p, q)]
        if others and depth < 3:
            for n, fp in root.nearest.items():
                probe.cache.setdefault((n, root.alpha), fp)
            middle = probe.phase(root.alpha, names)
            if middle not in (p, q):
                return brent(lo, root.alpha, names, depth + 1) + brent(root.alpha, hi, names, depth + 1)
        return [
            PhaseBoundary(omega, root.alpha, p, q, "brent", np.nan if error is None else error, settings.critical_tol)
        ]

    for a, b in zip(alphas, alphas[1:], strict=False):
        # cuts inside (a, b): (first α of the piece to the right, last α of the piece to the left, spinodal)
        cuts = sorted(
            (max(good, bad), min(good, bad), 0.5 * (good + bad))
            for br in branches.values()
            for good, bad, _ in br.ends.values()
            if a < 0.5 * (good + bad) < b
        )
        pieces = []  # [lo, hi] between the cuts (a piece shorter than nothing is skipped)
        lo = a
        for c in cuts + [None]:
            hi = b if c is None else c[1]
            if lo <= hi:
                pieces.append((lo, hi))
            if c is not None:
                lo = c[0]
        previous = None  # (hi, phase at hi) of the previous piece
        for lo, hi in pieces:
            names = probe.present(lo, hi)
            if previous is not None:
                before, here = previous[1], probe.phase(lo, names)
                if before != here:  # the spinodal bracket [previous hi, lo] holds the change
                    out.append(
                        PhaseBoundary(
                            omega,
                            0.5 * (previous[0] + lo),
                            before,
                            here,
                            "spinodal",
                            bracket=max(0.5 * (lo - previous[0]), 0.0),
                        )
                    )
            out.extend(brent(lo, hi, names, 0))
            previous = (hi, probe.phase(hi, names))
    return sorted(out, key=lambda x: x.alpha)


# ----------------------------------------------------------------------------------------------
# the whole diagram: executors and cache (files: dotattn.theory_vs_erm.output)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PhaseDiagram:
    """Records (one per ω, α, branch), one summary per ω, and how they were computed."""

    problem: Problem
    omegas: tuple[float, ...]
    alphas: tuple[float, ...]
    settings: SweepSettings
    rows: tuple[BranchPoint, ...]
    summaries: tuple[ColumnSummary, ...]
    seconds: float
    from_cache: int = 0

    @property
    def alpha_c_refined(self) -> dict[float, float | None]:
        """ω -> α_c refined on the independent QMC rules (the mean of their roots: what the CLI, the README and
        the headline quote); None at every ω when the settings have no refinement, or where there is no root."""
        return {s.omega: (s.alpha_c if self.settings.refine is not None else None) for s in self.summaries}

    @property
    def alpha_c_sweep(self) -> dict[float, float | None]:
        """ω -> α_c as the Brent root on the sweep's own rule (the default Gauss-Hermite rule), before any
        refinement; None where there is no root in the α grid."""
        return {s.omega: (s.alpha_c_sweep if self.settings.refine is not None else s.alpha_c) for s in self.summaries}


def _cache_key(problem: Problem, omega: float, alphas: list[float], settings: SweepSettings) -> str:
    from dotattn.core.version import __version__

    blob = json.dumps(
        {
            "problem": {**problem.to_dict(), "omega": omega},
            "alphas": alphas,
            "settings": settings.to_dict(),
            "version": __version__,
            "format": COLUMN_FORMAT,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def refine_fixed_points(refine: RefineSpec | None) -> int:
    """Fixed points the refinement of one column solves (:func:`_refine`): α_c re-solves both
    branches on each of the R rules (2R; its slope comes from the envelope theorem, no solve); α_lin
    re-solves one branch on each rule plus one solve for its slope on the first rule (R + 1). At
    most 3R + 1 (fewer where α_lin is α_c or either root is out of range); 0 without refinement."""
    return 0 if refine is None else 3 * refine.rules + 1


def column_fixed_points_estimate(problem: Problem, alphas: Sequence[float], refine: RefineSpec | None = None) -> int:
    """Rough number of fixed points one ω column solves: every followed branch at every α, plus
    the positional branch's second pass (:meth:`dotattn.positional_semantic.branch.Branch.lowest_of_both_sides`), the Brent
    evaluations of α_c and α_lin and the spinodal bisections (measured: about
    :data:`EXTRA_FIXED_POINTS_PER_COLUMN` on the toy model), plus those of the refinement
    (:func:`refine_fixed_points`, counted in full)."""
    return (
        len(branch_names(problem)) * len(alphas)
        + max(len(alphas) - 1, 0)
        + EXTRA_FIXED_POINTS_PER_COLUMN
        + refine_fixed_points(refine)
    )


def estimate_seconds(
    problem: Problem, alphas: Sequence[float], settings: SweepSettings, columns: int, workers: int
) -> float:
    """Rough wall time (s) of ``columns`` ω columns on ``workers`` processes: the sweep's fixed points ×
    (:data:`SECONDS_PER_FIXED_POINT` + :data:`SECONDS_PER_FIXED_POINT_NODE` × nodes of the fine
    rule), the refinement's (:func:`refine_fixed_points`) at :data:`REFINE_COST_PER_NODE` times that
    per node of their rules, plus the RS stability of every grid record (:data:`SECONDS_PER_STABILITY`),
    each times its :data:`COMPILED_FACTORS` entry where the compiled prox kernel runs (toy model, numba
    installed) and the student's :data:`STUDENT_COST_FACTORS`, with whole columns spread over the workers."""
    if columns <= 0:
        return 0.0
    q = settings.quadrature
    nodes = q.order**problem.gaussian_dim if q.kind == "gauss-hermite" else 2**q.order * q.scramblings
    toy = problem.L == 2 and problem.rank == 1 and compiled.AVAILABLE  # the compiled kernel is the toy model's
    factor = {
        k: v * STUDENT_COST_FACTORS[problem.student]
        for k, v in (COMPILED_FACTORS if toy else dict.fromkeys(COMPILED_FACTORS, 1.0)).items()
    }
    per_column = (
        column_fixed_points_estimate(problem, alphas)
        * (SECONDS_PER_FIXED_POINT + SECONDS_PER_FIXED_POINT_NODE * nodes)
        * factor["sweep"]
        + len(branch_names(problem)) * len(alphas) * SECONDS_PER_STABILITY * factor["stability"]
    )
    if settings.refine is not None:
        r = settings.refine
        per_column += (
            refine_fixed_points(r)
            * REFINE_COST_PER_NODE
            * SECONDS_PER_FIXED_POINT_NODE
            * 2**r.log2_points
            * r.scramblings
            * factor["refine"]
        )
    return per_column * -(-columns // max(1, min(workers, columns)))


def cached_columns(
    problem: Problem,
    omegas: Iterable[float],
    alphas: Iterable[float],
    settings: SweepSettings,
    cache_dir: str | os.PathLike | None,
) -> dict[float, dict]:
    """ω -> the cached column result in ``cache_dir`` whose key matches (problem, ω, α grid, settings)."""
    out: dict[float, dict] = {}
    if cache_dir is None:
        return out
    alphas = sorted(set(float(a) for a in alphas))
    for w in sorted(set(float(w) for w in omegas)):
        cached = read_cache_unit(_cache_file(cache_dir, w), _cache_key(problem, w, alphas, settings))
        if cached is not None and isinstance(cached.get("result"), dict):
            out[w] = cached["result"]
    return out


def _cache_file(cache_dir: str | os.PathLike, omega: float) -> Path:
    return Path(cache_dir) / f"omega_{omega:.6f}.json"


def run_phase_diagram(
    problem: Problem,
    omegas: Iterable[float],
    alphas: Iterable[float],
    *,
    settings: SweepSettings | None = None,
    cache_dir: str | os.PathLike | None = None,
    workers: int = 1,
    dask_address: Any = None,
    progress: Callable[[ProgressState], None] | None = None,
) -> PhaseDiagram:
    """Compute every ω column (in parallel), reusing finished columns from ``cache_dir``.

    ``settings`` default to those of ``dotattn phase-diagram``: the problem's default rule with α_c and α_lin
    refined on the independent QMC rules (:class:`dotattn.positional_semantic.refine.RefineSpec`). The result
    names both roots: :attr:`PhaseDiagram.alpha_c_refined` (what the CLI and README quote) and
    :attr:`PhaseDiagram.alpha_c_sweep` (the Brent root on the sweep's rule).

    Each column is cached (atomically) as soon as it finishes. With a ``cache_dir``, one run at a
    time may use it (:class:`dotattn.core.runner.RunLock`; :class:`dotattn.core.runner.RunLockedError`
    otherwise) and stale temporary files of killed writes are removed first.
    ``progress(state)`` gets a :class:`dotattn.core.runner.ProgressState` at the start, after every
    fixed point (process pool or in-process; per column on Dask) and after every column.
    ``dask_address`` is a scheduler address or an existing ``distributed.Client``.
    SIGINT (KeyboardInterrupt) or :class:`dotattn.core.runner.Interrupted` while running: pending
    columns are cancelled, workers terminated, and :class:`~dotattn.core.runner.Interrupted` is
    raised with a one-line ``detail`` saying how many columns are cached where.
    """
    t0 = time.perf_counter()
    if not isinstance(problem, Problem):
        raise ParameterError(f"problem must be a Problem, got {type(problem).__name__}")
    omegas, alphas = check_grids(omegas, alphas)
    workers = check_workers(workers)
    if settings is not None and not isinstance(settings, SweepSettings):
        raise ParameterError(
            f"settings must be a dotattn.positional_semantic.phase_diagram.SweepSettings, got {type(settings).__name__}"
        )
    if isinstance(dask_address, str):
        check_dask_address(dask_address)
    settings = settings or SweepSettings(default_quadrature(problem), refine=RefineSpec())  # as the CLI's default
    settings.check(problem)
    if cache_dir is not None and (isinstance(cache_dir, bytes) or not isinstance(cache_dir, (str, os.PathLike))):
        raise ParameterError(f"cache_dir must be a folder path or None, got {type(cache_dir).__name__}")
    cache = Path(cache_dir) if cache_dir is not None else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    with RunLock(cache, "phase-diagram") if cache is not None else contextlib.nullcontext():
        if cache is not None:
            remove_stale_tmp(cache)
        results = cached_columns(problem, omegas, alphas, settings, cache)
        from_cache = len(results)
        todo = [w for w in omegas if w not in results]
        estimate = column_fixed_points_estimate(problem, alphas, settings.refine)
        units = [0] * len(todo)
        finished: dict[int, int] = {}

        def emit() -> None:
            if progress is not None:
                # the denominator is fixed at the start (estimate x columns to do): a column counts at most its
                # estimate while it runs and exactly its estimate once finished, so the total never grows
                done = sum(estimate if i in finished else min(units[i], estimate - 1) for i in range(len(todo)))
                progress(
                    ProgressState(
                        units_done=done,
                        units_total=estimate * len(todo),
                        tasks_done=len(results),
                        tasks_total=len(omegas),
                        tasks_cached=from_cache,
                        elapsed=time.perf_counter() - t0,
                    )
                )

        def on_unit(i: int) -> None:
            units[i] += 1
            emit()

        def on_result(i: int, res: dict) -> None:
            w = todo[i]
            if cache is not None:
                write_cache_unit(_cache_file(cache, w), _cache_key(problem, w, alphas, settings), result=res)
            results[w] = res
            finished[i] = units[i] = max(units[i], int(res.get("fixed_points", units[i])))
            emit()

        emit()
        try:
            if dask_address is None and 1 < workers and 0 < len(todo) < workers:
                _run_split(problem, todo, alphas, settings, workers, on_result, on_unit)
            else:
                tasks = [(problem.to_dict(), w, alphas, settings.to_dict()) for w in todo]
                run_tasks(
                    omega_column,
                    tasks,
                    workers=workers,
                    dask_address=dask_address,
                    on_result=on_result,
                    on_unit=on_unit,
                )
        except (KeyboardInterrupt, Interrupted) as err:
            kept = (
                f"{len(results)} of {len(omegas)} columns cached in {cache}"
                if cache is not None
                else f"{len(results)} of {len(omegas)} columns done, not kept (no cache_dir)"
            )
            raise Interrupted(as_interrupted(err).signum, kept) from None
    rows = tuple(BranchPoint.from_row(r) for w in omegas for r in results[w]["rows"])
    summaries = tuple(ColumnSummary.from_row(results[w]["summary"]) for w in omegas)
    return PhaseDiagram(
        problem=problem,
        omegas=tuple(omegas),
        alphas=tuple(alphas),
        settings=settings,
        rows=rows,
        summaries=summaries,
        seconds=time.perf_counter() - t0,
        from_cache=from_cache,
    )


def _run_split(
    problem: Problem,
    todo: list[float],
    alphas: list[float],
    settings: SweepSettings,
    workers: int,
    on_result: Callable[[int, dict], None],
    on_unit: Callable[[int], None],
) -> None:
    """Fewer ω columns than workers: each column's branches followed as separate pool tasks
    (:func:`column_branch`), then each column finished in this process (:func:`finish_column`),
    so that a single column keeps two cores busy for most of its time."""
    names = branch_names(problem)
    tasks = [(problem.to_dict(), w, alphas, settings.to_dict(), name) for w in todo for name in names]
    parts: dict[int, list[dict]] = {i: [] for i in range(len(todo))}
    run_tasks(
        column_branch,
        tasks,
        workers=workers,
        on_result=lambda j, res: parts[j // len(names)].append(res),
        on_unit=lambda j: on_unit(j // len(names)),
    )
    for i, w in enumerate(todo):
        on_result(
            i,
            finish_column(
                problem.to_dict(), w, alphas, settings.to_dict(), parts[i], report=functools.partial(on_unit, i)
            ),
        )
