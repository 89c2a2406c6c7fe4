"""Typed records of the theory's results as they cross a stage boundary (catalogue, sweeps,
comparison, plotting, files). Each has exactly one ``to_row`` / ``from_row`` pair (codec:
:mod:`dotattn.core.rows`).

Columns of a :class:`BranchPoint` row (:data:`BRANCH_POINT_COLUMNS`; SPEC section 2 conventions):

* ``omega``, ``alpha``: the point (ω, α); ``branch``: positional / semantic / mixed /
  uninformative (``none`` for a catalogue entry that did not converge); ``status``: see
  :mod:`dotattn.core.status`; ``message``: why (e.g. ``flows to semantic`` for an absent branch);
* ``q`` (r×r), ``V`` (r×r), ``theta`` (r×r_t), ``mu`` (L×r): overlaps, always nested lists; for a
  result that did not converge, its last iterate;
* ``m``: the signed μ₁ = ``mu[0][0]`` (first position, first student direction; the toy model's m);
  ``m_norm``: ‖μ₁‖ = the norm of ``mu[0]`` over the student directions (gauge invariant);
* ``train_loss`` e_t, ``test_error`` ε_g (empty unless converged); ``selected``: lowest e_t among
  the converged points at this (ω, α); ``iterations``, ``residual``: of the solver run;
* ``stability`` (computed / unavailable; empty if not computed), ``replicon``, ``jump_weight``,
  ``at_stable``, ``rs_stable``, ``stability_reason``: RS stability (:class:`Stability`);
* JSON only: ``init`` (the start it came from), ``quadrature_error`` (estimated errors of e_t, ε_g).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dotattn.core.rows import matrix_cell, read_bool, read_float, read_int, read_matrix, read_text
from dotattn.core.status import CONVERGED

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.positional_semantic.state_evolution import FixedPoint

__all__ = [
    "BranchPoint",
    "BRANCH_POINT_COLUMNS",
    "PhaseBoundary",
    "BOUNDARY_COLUMNS",
    "BOUNDARY_METHODS",
    "Stability",
    "STABILITY_COLUMNS",
]

STABILITY_COLUMNS: tuple[str, ...] = (
    "stability",
    "replicon",
    "replicon_error",
    "jump_weight",
    "at_stable",
    "rs_stable",
    "stability_reason",
)
BRANCH_POINT_COLUMNS: tuple[str, ...] = (
    "omega",
    "alpha",
    "branch",
    "status",
    "q",
    "m",
    "m_norm",
    "mu",
    "theta",
    "V",
    "train_loss",
    "test_error",
    "selected",
    "iterations",
    "residual",
    "message",
) + STABILITY_COLUMNS


@dataclass(frozen=True, eq=False)
class BranchPoint:
    """One fixed point (or failed solve) on a branch at (ω, α); see the module docstring for the fields."""

    omega: float
    alpha: float
    branch: str
    status: str
    selected: bool
    iterations: int
    residual: float
    q: np.ndarray | None
    V: np.ndarray | None
    theta: np.ndarray | None
    mu: np.ndarray | None
    train_loss: float = float("nan")
    test_error: float = float("nan")
    message: str = ""
    init: str = ""
    quadrature_error: dict = field(default_factory=dict)
    stability: Stability | None = None

    @classmethod
    def of(
        cls,
        fp: FixedPoint,
        *,
        omega: float,
        branch: str,
        selected: bool,
        init: str = "",
        status: str | None = None,
        message: str | None = None,
        stability: Stability | None = None,
    ) -> BranchPoint:
        """The record of a solver result (``status`` / ``message`` override the solver's)."""
        o = fp.overlaps
        return cls(
            omega=float(omega),
            alpha=float(fp.alpha),
            branch=branch,
            status=status or fp.status,
            selected=bool(selected),
            iterations=int(fp.iterations),
            residual=float(fp.residual),
            q=None if o is None else o.q,
            V=None if o is None else o.V,
            theta=None if o is None else o.theta,
            mu=None if o is None else o.mu,
            train_loss=float(fp.train_loss),
            test_error=float(fp.test_error),
            message=fp.message if message is None else message,
            init=init,
            quadrature_error=dict(fp.quadrature_error),
            stability=stability,
        )

    @property
    def converged(self) -> bool:
        return self.status == CONVERGED

    @property
    def m(self) -> float:
        """Signed μ₁: ``mu[0, 0]`` (NaN without overlaps)."""
        return float(self.mu[0, 0]) if self.mu is not None else float("nan")

    @property
    def m_norm(self) -> float:
        """‖μ₁‖ over the student directions (gauge invariant)."""
        return float(np.linalg.norm(self.mu[0])) if self.mu is not None else float("nan")

    @property
    def theta_fro(self) -> float:
        """‖θ‖_F (|θ| for r = r_t = 1)."""
        return float(np.linalg.norm(self.theta)) if self.theta is not None else float("nan")

    def to_row(self) -> dict[str, Any]:
        """JSON-ready row (matrices as nested lists, NaN as None)."""
        num = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        return {
            "omega": self.omega,
            "alpha": self.alpha,
            "branch": self.branch,
            "status": self.status,
            "q": matrix_cell(self.q),
            "m": num(self.m),
            "m_norm": num(self.m_norm),
            "mu": matrix_cell(self.mu),
            "theta": matrix_cell(self.theta),
            "V": matrix_cell(self.V),
            "train_loss": num(self.train_loss),
            "test_error": num(self.test_error),
            "selected": self.selected,
            "iterations": self.iterations,
            "residual": num(self.residual),
            "message": self.message,
            **(self.stability.to_row() if self.stability is not None else dict.fromkeys(STABILITY_COLUMNS)),
            "init": self.init,
            "quadrature_error": self.quadrature_error,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> BranchPoint:
        """Inverse of :meth:`to_row`, for JSON rows and CSV rows (:mod:`dotattn.core.rows`); derived columns
        (``m``, ``m_norm``) are recomputed from ``mu``."""
        qe = row.get("quadrature_error") or {}
        return cls(
            omega=read_float(row["omega"]),
            alpha=read_float(row["alpha"]),
            branch=read_text(row["branch"]),
            status=read_text(row["status"]),
            selected=read_bool(row["selected"]),
            iterations=read_int(row["iterations"]),
            residual=read_float(row["residual"]),
            q=read_matrix(row.get("q")),
            V=read_matrix(row.get("V")),
            theta=read_matrix(row.get("theta")),
            mu=read_matrix(row.get("mu"), column=True),
            train_loss=read_float(row.get("train_loss")),
            test_error=read_float(row.get("test_error")),
            message=read_text(row.get("message")),
            init=read_text(row.get("init")),
            quadrature_error=qe if isinstance(qe, dict) else {},
            stability=Stability.from_row(row) if read_text(row.get("stability")) else None,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BranchPoint) and self.to_row() == other.to_row()

    # unhashable, Python's way; typeshed declares object.__hash__ a method, so mypy rejects None
    __hash__ = None  # type: ignore[assignment]


BOUNDARY_METHODS: tuple[str, ...] = ("brent", "spinodal", "unresolved")
"""How a :class:`PhaseBoundary` was found: ``brent`` (root of the e_t difference of the two
phases by Brent's method), ``spinodal`` (the phase below ends, or the phase above starts, at a
spinodal of its branch, bracketed by bisection; the other phase is the minimum right after it),
``unresolved`` (a branch was lost inside the bracket: α is the midpoint of the bracket)."""

BOUNDARY_COLUMNS: tuple[str, ...] = ("omega", "alpha", "below", "above", "method", "error", "bracket")
"""Columns of ``boundaries.csv`` (one :class:`PhaseBoundary` per row)."""


@dataclass(frozen=True, eq=False)  # eq=False: keeps the __eq__ and __hash__ below (as BranchPoint)
class PhaseBoundary:
    """A boundary between two globally minimal phases (lowest e_t among the converged fixed points
    of the followed branches) at one ω.

    ``alpha``: where it lies; ``below`` / ``above``: the phase just below / above it in α
    (positional, semantic, mixed, or ``none`` where no followed branch exists); ``method``: one of
    :data:`BOUNDARY_METHODS`; ``error``: quadrature-error estimate of α (Brent roots with a coarse
    rule or QMC errors: Σ|δe_t| / |slope|, :func:`dotattn.positional_semantic.phase_diagram.root_uncertainty`), NaN
    where unknown (no coarse rule, spinodals, unresolved); ``bracket``: half-width of the α
    interval that holds the root for the solver (Brent: its x tolerance; spinodal: half the
    bisection bracket; unresolved: half the bracket).
    """

    omega: float
    alpha: float
    below: str
    above: str
    method: str
    error: float = float("nan")
    bracket: float = float("nan")

    def __post_init__(self) -> None:
        if self.method not in BOUNDARY_METHODS:
            raise ValueError(f"method must be one of {', '.join(BOUNDARY_METHODS)}, got {self.method!r}")

    def to_row(self) -> dict[str, Any]:
        """JSON-ready row (NaN as None)."""
        num = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        return {
            "omega": self.omega,
            "alpha": self.alpha,
            "below": self.below,
            "above": self.above,
            "method": self.method,
            "error": num(self.error),
            "bracket": num(self.bracket),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PhaseBoundary:
        """Inverse of :meth:`to_row`, for JSON rows and CSV rows."""
        return cls(
            omega=read_float(row["omega"]),
            alpha=read_float(row["alpha"]),
            below=read_text(row["below"]),
            above=read_text(row["above"]),
            method=read_text(row["method"]),
            error=read_float(row.get("error")),
            bracket=read_float(row.get("bracket")),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PhaseBoundary) and self.to_row() == other.to_row()

    # unhashable (equal rows hold NaN objects of different hashes), Python's way; typeshed declares
    # object.__hash__ a method, so mypy rejects None
    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Stability:
    """RS stability of one fixed point (zero temperature; ``docs/rs_stability.md``).

    status: 'computed' or 'unavailable' (then ``reason`` says why and the numbers are NaN/None).
    replicon: spectral radius ρ(R) of the replicon map of the smooth part (AT condition: < 1);
    replicon_error: its standard error over the QMC scramblings (NaN on a deterministic rule).
    jump_weight: probability that the global prox jumps at ω = 0 (> 0: the T = 0 replicon diverges).
    at_stable: replicon < 1 (None when 1 is within two standard errors).  rs_stable: at_stable and
    jump_weight == 0 (False if either fails, None if undecided).  reason: one line.
    """

    status: str
    replicon: float
    replicon_error: float
    jump_weight: float
    at_stable: bool | None
    rs_stable: bool | None
    reason: str

    @classmethod
    def unavailable(cls, reason: str) -> Stability:
        nan = float("nan")
        return cls(
            status="unavailable",
            replicon=nan,
            replicon_error=nan,
            jump_weight=nan,
            at_stable=None,
            rs_stable=None,
            reason=reason,
        )

    def to_row(self) -> dict[str, Any]:
        """JSON/CSV-ready columns (NaN as None)."""
        num = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        return {
            "stability": self.status,
            "replicon": num(self.replicon),
            "replicon_error": num(self.replicon_error),
            "jump_weight": num(self.jump_weight),
            "at_stable": self.at_stable,
            "rs_stable": self.rs_stable,
            "stability_reason": self.reason,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Stability:
        """Inverse of :meth:`to_row` (JSON rows and CSV rows)."""

        def flag(x: Any) -> bool | None:
            return None if x in (None, "") else read_bool(x)

        return cls(
            status=read_text(row.get("stability")),
            replicon=read_float(row.get("replicon")),
            replicon_error=read_float(row.get("replicon_error")),
            jump_weight=read_float(row.get("jump_weight")),
            at_stable=flag(row.get("at_stable")),
            rs_stable=flag(row.get("rs_stable")),
            reason=read_text(row.get("stability_reason")),
        )

    @property
    def label(self) -> str:
        """One word for tables: stable / AT-unstable / AT-undecided / jumps / unknown."""
        if self.status != "computed":
            return "unknown"
        if self.at_stable is None:
            return "AT-undecided"
        return "stable" if self.rs_stable else ("jumps" if self.at_stable else "AT-unstable")
