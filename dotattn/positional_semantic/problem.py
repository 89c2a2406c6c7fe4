"""The problem specification: everything that defines one teacher-student attention model.

SPEC section 1. A :class:`Problem` is a frozen, validated value object; arrays are exposed as
read-only numpy views. Invalid input raises :class:`ParameterError` with one line naming the
field and its allowed range.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.validation import ParameterError, check_instance, check_int, check_number, readonly_array

__all__ = [
    "check_problem",
    "problem_of",
    "Problem",
    "TOY_A",
    "TOY_GRAM",
    "SIGMA_RANGE",
    "LAMBDA_RANGE",
    "SHAPE_MAX",
    "GRAM_MAX",
    "PROBLEM_KEYS",
    "OPTIONAL_PROBLEM_KEYS",
    "STUDENTS",
    "require_variant",
    "require_replica_theory",
]

TOY_A: tuple[tuple[float, ...], ...] = ((0.6, 0.4), (0.4, 0.6))
TOY_GRAM: tuple[tuple[float, ...], ...] = ((1.0, -1.0), (-1.0, 1.0))
_STOCHASTIC_TOL = 1e-9

SIGMA_RANGE: tuple[float, float] = (1e-2, 2.0)
"""Allowed token noise σ. The attention scores are O(σ²): below 1e-2 they are below 1e-4 and every
softmax is uniform to that accuracy (the global minimum is Q = 0 and all branches coincide with
the uninformative one). Above 2 the scores are large enough that the solver's informed starts
(scaled for the toy model's σ = 0.5) no longer reach a fixed point: measured for the toy model at
α = 1 (Gauss-Hermite 6), σ = 1 converges on both branches, σ = 2 on the semantic branch only, and
σ = 3, 10, 100 on none; so σ is refused there rather than answered with "no fixed point"."""
LAMBDA_RANGE: tuple[float, float] = (1e-8, 1e4)
"""Allowed ridge λ. Below 1e-8 the ridge is under the solver's tolerance on the overlaps (the
problem is the unregularised one, whose V = 1/(λ + σ²V̂) diverges); above 1e4 the ridge dominates
a loss of size O(σ²) ≤ 1e4 and the only fixed point is Q = 0."""
SHAPE_MAX: int = 64
"""Largest L, r and r_t: the theory integrates over L(r + r_t) Gaussian dimensions (QMC beyond 6)
and ERM stores L x L matrices per sample; 64 keeps every array bounded."""
GRAM_MAX: float = 4.0
"""Largest |G_ll'| of the positional Gram matrix (‖p_l‖²/d is at most this; the token noise adds
σ² per entry). Measured for the toy model (G = g [[1, -1], [-1, 1]], Gauss-Hermite 6, ω ∈ {0, 0.3},
α ∈ {0.5, 1, 2}): the informed positional start converges at every point for g ≤ 4; for g = 8 and
beyond the positional fixed point is lost at some (ω, α) (the iteration runs out of budget or
leaves the admissible set with |μ| growing: the positional scores grow with g until the softmax
saturates), and entries of 1e100 overflow (|μ| ~ 1e162) and from 1e150 LAPACK fails in the
least-squares step. So larger Gram matrices are refused rather than answered with "no positional
fixed point". (A is row-stochastic, so its entries are in [0, 1] and need no bound.)"""
PROBLEM_KEYS: tuple[str, ...] = ("L", "rank", "teacher_rank", "sigma", "lambda", "omega", "A", "positional_gram")
"""The keys every :meth:`Problem.to_dict` has (and :meth:`Problem.from_dict` needs)."""
OPTIONAL_PROBLEM_KEYS: tuple[str, ...] = ("student", "token_correlation")
"""Keys :meth:`Problem.to_dict` writes only when they differ from their default (tied student,
uncorrelated tokens), so folders written before these variants existed still describe their problem."""
STUDENTS: tuple[str, ...] = ("tied", "untied")
"""Student architectures: ``tied`` ŷ = softmax(X Q Qᵀ Xᵀ/d) X, ``untied`` ŷ = softmax(X Q Kᵀ Xᵀ/d) X
with Q, K ∈ R^{d×r} (both ridge-regularised)."""


def _as_matrix(name: str, value: Any, L: int) -> tuple[tuple[float, ...], ...]:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a {L} x {L} matrix of real numbers") from None
    if arr.shape != (L, L):
        raise ParameterError(f"{name} must be a {L} x {L} matrix (L = {L}), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(f"{name} must be finite (no NaN or inf)")
    return tuple(tuple(float(x) for x in row) for row in arr)


def check_problem(value: Any, name: str = "problem") -> Problem:
    """``value`` if it is a :class:`Problem` (ParameterError naming ``name`` otherwise, e.g. for
    ``dotattn.solve("toy", alpha=2)``: build one with ``dotattn.Problem(...)``)."""
    return check_instance(name, value, Problem, "dotattn.Problem (e.g. dotattn.Problem(omega=0.3))")


@dataclass(frozen=True)
class Problem:
    """One teacher-student model (SPEC section 1).

    Attributes
    ----------
    L : sequence length (number of tokens), >= 2.
    rank : student rank r, >= 1.
    teacher_rank : teacher rank r_t, >= 1.
    sigma : token noise standard deviation σ > 0.
    ridge : ridge strength λ > 0.
    omega : positional fraction ω of the target, in [0, 1].
    student : the student architecture, one of :data:`STUDENTS` (default ``tied``).
    token_correlation : correlation c between the token contents of two positions,
        E[z_l z_l'ᵀ] = σ² C_ll' I_d with C = (1 − c) I_L + c 1 1ᵀ; c in (−1/(L−1), 1), default 0.
    positional_attention : the teacher's positional attention A (L x L, row-stochastic).
    positional_gram : Gram matrix G_ll' = p_l . p_l' of the positional embeddings (L x L, PSD).
    """

    L: int = 2
    rank: int = 1
    teacher_rank: int = 1
    sigma: float = 0.5
    ridge: float = 0.01
    omega: float = 0.3
    positional_attention: tuple[tuple[float, ...], ...] | None = None
    positional_gram: tuple[tuple[float, ...], ...] | None = None
    student: str = "tied"
    token_correlation: float = 0.0
    _arrays: dict[Hashable, np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        L = check_int("L", self.L, 2, SHAPE_MAX)
        object.__setattr__(self, "L", L)
        object.__setattr__(self, "rank", check_int("rank", self.rank, 1, SHAPE_MAX))
        object.__setattr__(self, "teacher_rank", check_int("teacher_rank", self.teacher_rank, 1, SHAPE_MAX))
        lo, hi = SIGMA_RANGE
        object.__setattr__(self, "sigma", check_number("sigma", self.sigma, lo, False, hi, f"in [{lo:g}, {hi:g}]"))
        lo, hi = LAMBDA_RANGE
        object.__setattr__(self, "ridge", check_number("lambda", self.ridge, lo, False, hi, f"in [{lo:g}, {hi:g}]"))
        object.__setattr__(self, "omega", check_number("omega", self.omega, 0.0, False, 1.0, "in [0, 1]"))
        if not isinstance(self.student, str) or self.student not in STUDENTS:
            raise ParameterError(f"student must be one of {', '.join(STUDENTS)}, got {self.student!r}")
        c_lo = -1.0 / (L - 1)
        object.__setattr__(
            self,
            "token_correlation",
            check_number(
                "token_correlation",
                self.token_correlation,
                c_lo,
                True,
                1.0,
                f"in ({c_lo:g}, 1) (the token covariance (1 - c) I + c 1 1^T must be positive definite)",
                high_open=True,
            ),
        )

        A_in: Any = self.positional_attention  # any L x L array-like until validated
        if A_in is None:
            if L != 2:
                raise ParameterError(f"A (positional attention) must be given for L = {L}; only L = 2 has a default")
            A_in = TOY_A
        A = _as_matrix("A", A_in, L)
        arrA = np.array(A)
        if np.any(arrA < 0):
            raise ParameterError("A must be row-stochastic: entries >= 0 and rows summing to 1")
        if np.any(np.abs(arrA.sum(axis=1) - 1.0) > _STOCHASTIC_TOL):
            raise ParameterError("A must be row-stochastic: rows must sum to 1 (tolerance 1e-9)")
        object.__setattr__(self, "positional_attention", A)

        G_in: Any = self.positional_gram
        if G_in is None:
            G_in = TOY_GRAM if L == 2 else np.eye(L)
        G = _as_matrix("positional_gram", G_in, L)
        arrG = np.array(G)
        if np.max(np.abs(arrG - arrG.T)) > 1e-12 * max(1.0, np.max(np.abs(arrG))):
            raise ParameterError("positional_gram must be symmetric positive semi-definite")
        if np.min(np.linalg.eigvalsh(arrG)) < -1e-10 * max(1.0, np.max(np.abs(arrG))):
            raise ParameterError("positional_gram must be symmetric positive semi-definite (an eigenvalue is < 0)")
        if np.max(np.abs(arrG)) > GRAM_MAX:
            raise ParameterError(
                f"positional_gram entries must be in [-{GRAM_MAX:g}, {GRAM_MAX:g}], got max "
                f"|G| = {np.max(np.abs(arrG)):.3g}: beyond it the positional scores saturate the "
                f"softmax and the solver loses the positional fixed point (1e150 overflows LAPACK)"
            )
        object.__setattr__(self, "positional_gram", G)

    # -- derived, read-only arrays ---------------------------------------------------------
    def _array(self, key: Hashable, build: Callable[[], Any]) -> np.ndarray:
        if key not in self._arrays:
            self._arrays[key] = readonly_array(build())
        return self._arrays[key]

    @property
    def A(self) -> np.ndarray:
        """Positional attention matrix A, shape (L, L)."""
        return self._array("A", lambda: self.positional_attention)

    @property
    def G(self) -> np.ndarray:
        """Positional Gram matrix G, shape (L, L)."""
        return self._array("G", lambda: self.positional_gram)

    @property
    def rho(self) -> np.ndarray:
        """Teacher self-overlap ρ = σ² I_{r_t}, shape (r_t, r_t)."""
        return self._array("rho", lambda: self.sigma**2 * np.eye(self.teacher_rank))

    @property
    def is_toy_layout(self) -> bool:
        """L = 2, r = r_t = 1, tied student, with the antisymmetric Gram [[g,-g],[-g,g]] (fast paths, scalar m)."""
        G = self.G
        return (
            self.L == 2
            and self.rank == 1
            and self.teacher_rank == 1
            and self.student == "tied"
            and np.isclose(G[0, 0], G[1, 1])
            and np.isclose(G[0, 1], -G[0, 0])
        )

    @property
    def field_rank(self) -> int:
        """Width of the student's field per token in the replica theory: r (tied: h_l = Qᵀx_l/√d) or
        2r (untied: (h_l, k_l) = [Q K]ᵀx_l/√d, docs/untied.md). The overlaps q, V are field_rank x field_rank."""
        return 2 * self.rank if self.student == "untied" else self.rank

    @property
    def gaussian_dim(self) -> int:
        """Dimension L (field_rank + r_t) of the Gaussian expectations (L (r + r_t) tied, L (2r + r_t) untied)."""
        return self.L * (self.field_rank + self.teacher_rank)

    def replace(self, **changes: Any) -> Problem:
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        values.update(changes)
        return Problem(**values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready parameters."""
        return {
            "L": self.L,
            "rank": self.rank,
            "teacher_rank": self.teacher_rank,
            "sigma": self.sigma,
            "lambda": self.ridge,
            "omega": self.omega,
            "A": self.A.tolist(),
            "positional_gram": self.G.tolist(),
            **({"student": self.student} if self.student != "tied" else {}),
            **({"token_correlation": self.token_correlation} if self.token_correlation != 0.0 else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Problem:
        """The problem of :meth:`to_dict`'s keys (:data:`PROBLEM_KEYS`; ParameterError naming a missing
        or unknown key, or a value out of range)."""
        if not isinstance(d, Mapping):
            raise ParameterError(f"problem must be a dict with keys {', '.join(PROBLEM_KEYS)}, got {type(d).__name__}")
        missing = [k for k in PROBLEM_KEYS if k not in d]
        if missing:
            raise ParameterError(
                f"problem dict is missing the key(s) {', '.join(missing)} "
                f"(needs {', '.join(PROBLEM_KEYS)}; as written by Problem.to_dict())"
            )
        allowed = PROBLEM_KEYS + OPTIONAL_PROBLEM_KEYS
        unknown = sorted(str(k) for k in d if k not in allowed)
        if unknown:
            raise ParameterError(
                f"problem dict has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})"
            )
        return cls(
            L=d["L"],
            rank=d["rank"],
            teacher_rank=d["teacher_rank"],
            sigma=d["sigma"],
            ridge=d["lambda"],
            omega=d["omega"],
            positional_attention=d["A"],
            positional_gram=d["positional_gram"],
            student=d.get("student", "tied"),
            token_correlation=d.get("token_correlation", 0.0),
        )


def require_variant(
    problem: Problem, where: str, students: tuple[str, ...] = ("tied",), correlated: bool = False
) -> None:
    """ParameterError (one line) if ``where`` (a computation) does not handle ``problem``'s student
    architecture or its token correlation; called before any computation."""
    if problem.student not in students:
        raise ParameterError(f"student must be one of {', '.join(students)} for {where}, got {problem.student!r}")
    if not correlated and problem.token_correlation != 0.0:
        raise ParameterError(f"token_correlation must be 0 for {where}, got {problem.token_correlation:g}")


def require_replica_theory(problem: Problem) -> None:
    """ParameterError (one line) unless the replica-symmetric theory handles ``problem``: either student,
    token correlation for the tied student only (the untied one with correlated tokens is not derived)."""
    require_variant(
        problem,
        "the replica theory" if problem.student == "tied" else f"the replica theory of the {problem.student} student",
        students=STUDENTS,
        correlated=problem.student == "tied",
    )


def problem_of(path: Path, params: Any) -> Problem:
    """The Problem a results file was made for (``params["problem"]``); IntegrityError naming ``path``
    if it is missing or invalid."""
    from dotattn.core.io import IntegrityError

    try:
        return Problem.from_dict(params["problem"])
    except (KeyError, TypeError, ParameterError) as err:
        raise IntegrityError(f"{path}: 'parameters' has no valid problem ({err})") from None
