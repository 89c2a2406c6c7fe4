"""Order parameters (SPEC section 2) and the Gaussian parametrisation of the local fields.

State lives in two small frozen dataclasses, :class:`Overlaps` (q, V, θ, μ) and :class:`Hats`
(their conjugates). The local fields of SPEC section 3 are generated with Cholesky factors,

    ω_l  = μ_l + C ξ_l,                 C = chol(q)
    h*_l = Bᵀ ξ_l + D η_l,              B = C⁻¹ θ,   D = chol(ρ − θᵀ q⁻¹ θ)

which reproduces the joint covariance [[q, θ], [θᵀ, ρ]] of SPEC's q^{1/2} form (identical for
r = 1) and is smooth in (q, θ) everywhere, including at degenerate eigenvalues.
:func:`factor_jvp` gives the directional derivatives of (C, B, D) used by the gradient form
of the hat updates.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from typing import Protocol

import numpy as np

from dotattn.core.validation import readonly_array
from dotattn.positional_semantic.problem import Problem

__all__ = [
    "Overlaps",
    "Hats",
    "FieldFactors",
    "InvalidOverlaps",
    "field_factors",
    "factor_jvp",
    "positional_direction",
    "symmetric_basis",
    "overlaps_from_scalars",
    "untied_lift",
    "UNTIED_START_CROSS",
]


class InvalidOverlaps(ArithmeticError):
    """Overlaps outside the admissible set (q not PD, ρ − θᵀq⁻¹θ not PD, K not PD)."""


class _ArrayState:
    """Frozen-dataclass mixin: every field is stored as a read-only float array."""

    def __post_init__(self) -> None:
        if not is_dataclass(self):
            raise TypeError(f"{type(self).__name__} must be a dataclass to use _ArrayState")
        for f in fields(self):
            object.__setattr__(self, f.name, readonly_array(getattr(self, f.name)))


@dataclass(frozen=True)
class Overlaps(_ArrayState):
    """q (r, r) self-overlap, V (r, r) response, θ (r, r_t) semantic overlap, μ (L, r) positional
    (r is the problem's :attr:`~Problem.field_rank`: 2r for the untied student, query block first)."""

    q: np.ndarray
    V: np.ndarray
    theta: np.ndarray
    mu: np.ndarray

    def vector(self) -> np.ndarray:
        """All entries in one flat vector (for residuals and damping)."""
        return np.concatenate([self.q.ravel(), self.V.ravel(), self.theta.ravel(), self.mu.ravel()])

    @classmethod
    def from_vector(cls, x: np.ndarray, problem: Problem) -> Overlaps:
        """Inverse of :meth:`vector` (q and V symmetrised)."""
        r, rt, L = problem.field_rank, problem.teacher_rank, problem.L
        sizes = np.cumsum([r * r, r * r, r * rt])
        q, V, th, mu = np.split(np.asarray(x, dtype=float), sizes)
        q, V = q.reshape(r, r), V.reshape(r, r)
        return cls(q=0.5 * (q + q.T), V=0.5 * (V + V.T), theta=th.reshape(r, rt), mu=mu.reshape(L, r))

    def mix(self, other: Overlaps, weight_self: float) -> Overlaps:
        """weight_self * self + (1 − weight_self) * other (damping)."""
        w = weight_self
        return Overlaps(
            q=w * self.q + (1 - w) * other.q,
            V=w * self.V + (1 - w) * other.V,
            theta=w * self.theta + (1 - w) * other.theta,
            mu=w * self.mu + (1 - w) * other.mu,
        )

    def canonical(self, untied: bool = False) -> Overlaps:
        """The same physical state in a canonical student frame.

        Everything is invariant under Q → QU (U orthogonal r x r), which maps
        (q, V, θ, μ) → (Uᵀ q U, Uᵀ V U, Uᵀ θ, μ U). The frame here diagonalises q (eigenvalues in
        decreasing order) and makes the largest entry of each row of [θ, μᵀ] positive (for r = 1
        only that sign). Used for initial states, so that gauge copies start alike.
        ``untied``: the state is that of W = [Q K] (2r wide), whose gauge group is only
        (Q, K) → (QU, KU); the frame diagonalises the query block q_QQ and rotates both blocks alike.
        """
        r = self.q.shape[0]
        if untied and r > 2:
            return self._canonical_pairs()
        if r == 1 or untied:  # only the sign: Q → −Q (untied r = 1: (Q, K) → (−Q, −K))
            M = np.concatenate([self.theta.ravel(), self.mu.ravel()])
            if M.size and M[np.argmax(np.abs(M))] < 0:
                return Overlaps(q=self.q, V=self.V, theta=-self.theta, mu=-self.mu)
            return self
        w, U = np.linalg.eigh(self.q)
        U = U[:, ::-1]
        M = U.T @ np.hstack([self.theta, self.mu.T])
        idx = np.argmax(np.abs(M), axis=1)
        signs = np.sign(M[np.arange(r), idx])
        signs[signs == 0] = 1.0
        U = U * signs
        return Overlaps(q=U.T @ self.q @ U, V=U.T @ self.V @ U, theta=U.T @ self.theta, mu=self.mu @ U)

    def _canonical_pairs(self) -> Overlaps:
        """:meth:`canonical` for an untied state of rank r >= 2 (see there)."""
        r = self.q.shape[0] // 2
        w, U = np.linalg.eigh(self.q[:r, :r])
        U = U[:, ::-1]
        M = U.T @ np.hstack([self.theta[:r], self.mu[:, :r].T])
        idx = np.argmax(np.abs(M), axis=1)
        signs = np.sign(M[np.arange(r), idx])
        signs[signs == 0] = 1.0
        U = U * signs
        W = np.kron(np.eye(2), U)
        return Overlaps(q=W.T @ self.q @ W, V=W.T @ self.V @ W, theta=W.T @ self.theta, mu=self.mu @ W)

    @property
    def m(self) -> float:
        """Scalar positional overlap μ_1 (the toy model's m, μ_1 = −μ_2) for r = 1."""
        return float(self.mu[0, 0])


@dataclass(frozen=True)
class Hats(_ArrayState):
    """Conjugates: q̂ (r, r), V̂ (r, r), θ̂ (r, r_t), μ̂ (L, r)."""

    q_hat: np.ndarray
    V_hat: np.ndarray
    theta_hat: np.ndarray
    mu_hat: np.ndarray


def overlaps_from_scalars(problem: Problem, q: float, m: float, V: float, theta: float) -> Overlaps:
    """Overlaps with q I, V I, θ on the leading diagonal, and μ = m along the top eigenvector of G.

    For the toy model this gives μ_1 = −μ_2 = m.
    """
    r, rt, L = problem.rank, problem.teacher_rank, problem.L
    th = np.zeros((r, rt))
    th[np.arange(min(r, rt)), np.arange(min(r, rt))] = theta
    mu = np.zeros((L, r))
    mu[:, 0] = m * positional_direction(problem)
    return Overlaps(q=q * np.eye(r), V=V * np.eye(r), theta=th, mu=mu)


UNTIED_START_CROSS = 0.5
"""Query-key correlation of an untied start lifted from a tied one (:func:`untied_lift`): q_QK = 0.5 q."""


def untied_lift(overlaps: Overlaps) -> Overlaps:
    """The untied state (2r wide, docs/untied.md) with query and key alike, from a tied state:
    q_W = [[q, c q], [c q, q]] (c = :data:`UNTIED_START_CROSS`), V_W = diag(V, V), μ_W = [μ, μ] and
    θ_W = s [θ; θ] with s = √((1 + c)/2), which keeps the teacher's residual covariance:
    θ_Wᵀ q_W⁻¹ θ_W = θᵀ q⁻¹ θ, so every admissible tied start lifts to an admissible untied one.
    Used for the untied solver's starts."""
    q, V = overlaps.q, overlaps.V
    c = UNTIED_START_CROSS
    s = np.sqrt(0.5 * (1.0 + c))
    return Overlaps(
        q=np.block([[q, c * q], [c * q, q]]),
        V=np.kron(np.eye(2), V),
        theta=s * np.vstack([overlaps.theta, overlaps.theta]),
        mu=np.hstack([overlaps.mu, overlaps.mu]),
    )


def positional_direction(problem: Problem) -> np.ndarray:
    """Direction of the informed positional init, (L,): G^{1/2} applied to alternating signs
    (1, −1, 1, …), scaled to max |entry| = 1. For the toy Gram [[1,−1],[−1,1]] it is (1, −1),
    so μ_1 = −μ_2 = m; it is well defined for any PSD G, also with repeated eigenvalues."""
    w, U = np.linalg.eigh(problem.G)
    G_half = (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T
    v = G_half @ np.array([(-1.0) ** l for l in range(problem.L)])
    if np.max(np.abs(v)) < 1e-12:  # alternating signs in the null space of G: use the top eigenvector
        v = U[:, -1]
    v = v / np.max(np.abs(v))
    first = v[np.flatnonzero(np.abs(v) > 1e-12)[0]]
    return v * np.sign(first)


@dataclass(frozen=True)
class FieldFactors:
    """C = chol(q) (r, r), B = C⁻¹θ (r, r_t), D = chol(ρ − BᵀB) (r_t, r_t)."""

    C: np.ndarray
    B: np.ndarray
    D: np.ndarray


def _chol(name: str, a: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(0.5 * (a + a.T))
    except np.linalg.LinAlgError:
        raise InvalidOverlaps(f"{name} is not positive definite") from None


class TeacherOverlap(Protocol):
    """What :func:`field_factors` reads of a problem: the teacher self-overlap ρ (r_t, r_t)."""

    @property
    def rho(self) -> np.ndarray: ...


def field_factors(overlaps: Overlaps, problem: TeacherOverlap) -> FieldFactors:
    """Cholesky factors of the field covariance; raises InvalidOverlaps when they do not exist
    (``problem``: a :class:`Problem`, or anything with its ``rho``)."""
    C = _chol("q", overlaps.q)
    B = np.linalg.solve(C, overlaps.theta)
    D = _chol("rho - theta^T q^-1 theta", problem.rho - B.T @ B)
    return FieldFactors(C=C, B=B, D=D)


def _phi(X: np.ndarray) -> np.ndarray:
    """Lower triangle with the diagonal halved (Cholesky differential)."""
    return np.tril(X) - 0.5 * np.diag(np.diag(X))


def factor_jvp(f: FieldFactors, dq: np.ndarray, dtheta: np.ndarray) -> FieldFactors:
    """Directional derivative (dC, dB, dD) of the factors along (dq symmetric, dθ)."""
    Ci = np.linalg.inv(f.C)
    dC = f.C @ _phi(Ci @ dq @ Ci.T)
    dB = Ci @ (dtheta - dC @ f.B)
    dS = -(dB.T @ f.B + f.B.T @ dB)
    Di = np.linalg.inv(f.D)
    dD = f.D @ _phi(Di @ dS @ Di.T)
    return FieldFactors(C=dC, B=dB, D=dD)


def symmetric_basis(r: int) -> list[tuple[int, int, np.ndarray]]:
    """Basis (i, j, E) of symmetric r x r matrices: E = e_i e_jᵀ + e_j e_iᵀ (i < j) or e_i e_iᵀ."""
    out = []
    for i in range(r):
        for j in range(i, r):
            E = np.zeros((r, r))
            E[i, j] = E[j, i] = 1.0
            out.append((i, j, E))
    return out
