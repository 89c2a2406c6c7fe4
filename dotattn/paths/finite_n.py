"""The posterior mean of U to first order in 1/N (Laplace, in the solver's log-Cholesky coordinates).

Derivation: docs/attention_paths.md §10. In the coordinates θ of :func:`dotattn.paths.theory.theta_from_levels`
(U_k = L_k L_kᵀ, diagonals of L_k as logarithms) the exact collapsed posterior is

    p(θ) ∝ exp[−N φ(θ) + ψ(θ)],   φ = S/2,   ψ(θ) = Σ_k Σ_i (1 − i) ln (L_k)_ii   (i = 1..d_k),

ψ being what the Wishart normalisation (−(d_k+1)/2 ln det U_k) and the Jacobian of U_k → θ_k
(2^{d_k} Π_i (L_k)_ii^{d_k−i+2}) leave. Expanding about the saddle point θ̂ (the minimum of S) with
Σ = (N ∇²φ)⁻¹:

    E[θ] − θ̂ = Σ ∇ψ − ½ Σ (N ∇³φ : Σ) + O(N⁻²),
    E[U_1] = U_1(θ̂) + ∇U_1 · (E[θ] − θ̂) + ½ tr(∇²U_1 Σ) + O(N⁻²).

The Hessian is :func:`dotattn.paths.theory.theta_hessian`; the third derivatives are central differences of the
analytic gradient (no JAX).
It holds where every U_k is full rank (N ≥ d_k) and the posterior is concentrated about one minimum
(N ≫ d_k; the O(N⁻²) rest is not estimated here: compare with :mod:`dotattn.paths.collapsed`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dotattn.core.status import CONVERGED, INVALID
from dotattn.core.validation import ParameterError
from dotattn.paths.network import FactoredKernels
from dotattn.paths.theory import (
    PathsModel,
    TheoryResult,
    _theta_objective,
    level_dims,
    levels_from_theta,
    theta_from_levels,
    theta_hessian,
)

__all__ = ["MeanEstimate", "laplace_mean", "psi_gradient", "COORDINATES"]

COORDINATES = "log-Cholesky factors of every U_k (the saddle-point solver's coordinates)"
STEP = 1e-3
"""Central-difference step along unit eigenvectors of Σ for the second and third derivatives: truncation
O(STEP²) ≈ 1e-6 relative, round-off ≈ 1e-16/STEP² = 1e-10 relative."""


@dataclass(frozen=True)
class MeanEstimate:
    """E[U_1] to first order in 1/N, the saddle point it corrects, and a status (``invalid`` when the
    saddle point is not converged, N < max d_k, or the Hessian of S is not positive definite)."""

    status: str
    U_mean: np.ndarray
    U_saddle: np.ndarray
    message: str = ""


def psi_gradient(heads: tuple[int, ...]) -> np.ndarray:
    """∇ψ in θ: 1 − i on the log-diagonal of row i (1-based) of each level's factor, 0 elsewhere."""
    parts = []
    for d in level_dims(heads):
        i, j = np.tril_indices(d)
        parts.append(np.where(i == j, -i.astype(float), 0.0))
    return np.concatenate(parts)


def laplace_mean(
    result: TheoryResult, C: np.ndarray | FactoredKernels, y: np.ndarray, model: PathsModel
) -> MeanEstimate:
    """The first-order (1/N) posterior mean of U_1 about the saddle point ``result`` (module docstring)."""
    U0 = np.asarray(result.U)
    if model.outputs != 1:
        raise ParameterError(f"outputs (M) of the first-order mean must be 1, got {model.outputs}")
    if result.status != CONVERGED:
        return MeanEstimate(INVALID, np.full_like(U0, np.nan), U0, "saddle point not converged")
    if model.N < max(level_dims(model.heads)):
        return MeanEstimate(
            INVALID,
            np.full_like(U0, np.nan),
            U0,
            f"N = {model.N:g} < {max(level_dims(model.heads))}: some U_k is rank-deficient",
        )
    N = model.N
    theta = theta_from_levels(result.levels)
    grad = lambda th: 0.5 * _theta_objective(th, C, y, model)[1]  # ∇φ  # noqa: E731
    U1 = lambda th: levels_from_theta(th, model.heads)[0]  # noqa: E731
    hess = 0.5 * N * theta_hessian(theta, C, y, model)  # N ∇²φ
    lam, vec = np.linalg.eigh(hess)
    if not np.all(np.isfinite(lam)) or lam[0] <= 0:
        return MeanEstimate(INVALID, np.full_like(U0, np.nan), U0, "Hessian of S not positive definite")
    sig = 1.0 / lam  # eigenvalues of Σ
    g0 = grad(theta)
    third = np.zeros_like(theta)  # N ∇³φ : Σ
    curv = np.zeros_like(U0)  # ½ tr(∇²U_1 Σ)
    u0 = U1(theta)
    for s, v in zip(sig, vec.T, strict=True):
        tp, tm = theta + STEP * v, theta - STEP * v
        third += N * s * (grad(tp) - 2 * g0 + grad(tm)) / STEP**2
        curv += 0.5 * s * (U1(tp) - 2 * u0 + U1(tm)) / STEP**2
    Sigma = (vec * sig) @ vec.T
    shift = Sigma @ (psi_gradient(model.heads) - 0.5 * third)
    size = max(float(np.linalg.norm(shift)), 1e-300)
    e = min(STEP / size, 1.0)
    first = (U1(theta + e * shift) - U1(theta - e * shift)) / (2 * e)
    mean = u0 + first + curv
    return MeanEstimate(CONVERGED, 0.5 * (mean + mean.T), u0)
