"""Regulariser channel (ridge penalty, isotropic tokens), SPEC section 3.

For the untied student the channel is this one at rank 2r (a ridge on W = [Q K], docs/untied.md):
every matrix below is then :attr:`~dotattn.positional_semantic.problem.Problem.field_rank` wide.
For tokens correlated across positions it is unchanged, in μ, μ̂ and G (docs/correlated_tokens.md).

With K = λ I + σ² V̂ and M̂ = [μ̂_1 … μ̂_L] (r × L):

    Ψ_w = ½ Tr[K⁻¹ (σ² q̂ + σ⁴ θ̂θ̂ᵀ + M̂ G M̂ᵀ)]

and its stationarity in the hats gives the overlap updates

    V = σ² K⁻¹,   q = σ² K⁻¹ X K⁻¹ (X the bracket above),   θ = σ⁴ K⁻¹ θ̂,   μ_l = K⁻¹ Σ_l' G_ll' μ̂_l'.
"""

from __future__ import annotations

import numpy as np

from dotattn.positional_semantic.overlaps import Hats, InvalidOverlaps, Overlaps
from dotattn.positional_semantic.problem import Problem, require_replica_theory

__all__ = ["regulariser_potential", "overlap_update"]


def _K_inv(hats: Hats, problem: Problem) -> np.ndarray:
    require_replica_theory(problem)
    r = problem.field_rank
    K = problem.ridge * np.eye(r) + problem.sigma**2 * 0.5 * (hats.V_hat + hats.V_hat.T)
    if np.min(np.linalg.eigvalsh(K)) <= 0:
        raise InvalidOverlaps("K = lambda I + sigma^2 V_hat is not positive definite")
    return np.linalg.inv(K)


def _bracket(hats: Hats, problem: Problem) -> np.ndarray:
    """X = σ² q̂ + σ⁴ θ̂θ̂ᵀ + M̂ G M̂ᵀ, shape (r, r)."""
    s2 = problem.sigma**2
    M_hat = hats.mu_hat.T  # (r, L)
    return s2 * hats.q_hat + s2**2 * hats.theta_hat @ hats.theta_hat.T + M_hat @ problem.G @ M_hat.T


def regulariser_potential(hats: Hats, problem: Problem) -> float:
    """Ψ_w (scalar)."""
    return 0.5 * float(np.trace(_K_inv(hats, problem) @ _bracket(hats, problem)))


def overlap_update(hats: Hats, problem: Problem) -> Overlaps:
    """Overlaps at the stationary point of Φ in the hats."""
    s2 = problem.sigma**2
    Ki = _K_inv(hats, problem)
    q = s2 * Ki @ _bracket(hats, problem) @ Ki
    return Overlaps(
        q=0.5 * (q + q.T), V=s2 * Ki, theta=s2**2 * Ki @ hats.theta_hat, mu=(problem.G @ hats.mu_hat) @ Ki.T
    )
