"""Token contents correlated across positions: the whitened coordinates of the replica theory.

Derivation: ``docs/correlated_tokens.md``. The contents have E[z_l z_l'ᵀ] = σ² C_ll' I_d with
C = (1 − c) I_L + c 1 1ᵀ (:attr:`Problem.token_correlation` c). The theory works in whitened
fields h̃ = C^{-1/2} h (the token axis mixed by C^{-1/2}), in which the content parts are i.i.d.
over positions exactly as for c = 0, and

* the student centres are ω̃ = C^{-1/2} μ + ξ q^{1/2}ᵀ, the teacher fields h̃* = the c = 0 ones;
* the per-sample loss is ℓ̃(h̃, h̃*) = (1 − c) ℓ(C^{1/2} h̃, C^{1/2} h̃*) (ℓ the c = 0 loss: for
  row-stochastic S and T, Tr[(S − T) C (S − T)ᵀ] = (1 − c) ‖S − T‖²_F);
* the positional conjugate pairs with μ as μ̂ = C^{-1/2} μ̂̃ (so the regulariser channel and Φ
  keep their c = 0 form in μ, μ̂ and G).

At c = 0 every function here returns its argument unchanged (no array is mixed), so the c = 0
path is the uncorrelated theory's code path. Arrays are (..., L, k) with the token axis second
to last.
"""

from __future__ import annotations

import numpy as np

from dotattn.positional_semantic.loss import teacher_attention, teacher_gradient
from dotattn.positional_semantic.problem import Problem

__all__ = [
    "is_correlated",
    "token_covariance",
    "token_power",
    "mix_tokens",
    "loss_scale",
    "teacher_target",
    "whitened_teacher_gradient",
]


def is_correlated(problem: Problem) -> bool:
    """True if the token contents are correlated across positions (c ≠ 0)."""
    return problem.token_correlation != 0.0


def token_power(problem: Problem, power: float) -> np.ndarray:
    """C^power (L, L) for C = (1 − c) I + c 1 1ᵀ: (1 − c)^power on 1^⊥ and (1 + (L − 1) c)^power on 1
    (closed form; read-only, cached on the problem)."""

    def build() -> np.ndarray:
        L, c = problem.L, problem.token_correlation
        J = np.full((L, L), 1.0 / L)
        return (1.0 - c) ** power * (np.eye(L) - J) + (1.0 + (L - 1) * c) ** power * J

    return problem._array(("token_power", float(power)), build)


def token_covariance(problem: Problem) -> np.ndarray:
    """C = (1 − c) I_L + c 1 1ᵀ, shape (L, L)."""
    return token_power(problem, 1.0)


def mix_tokens(x: np.ndarray, problem: Problem, power: float) -> np.ndarray:
    """C^power applied on the token axis of x (..., L, k): (C^power x)_l = Σ_l' (C^power)_ll' x_l';
    x itself at c = 0."""
    if not is_correlated(problem):
        return x
    return np.einsum("lm,...mk->...lk", token_power(problem, power), x)


def loss_scale(problem: Problem) -> float:
    """1 − c: the correlated per-sample loss over the uncorrelated one at equal attention matrices."""
    return 1.0 - problem.token_correlation


def teacher_target(h_star: np.ndarray, problem: Problem) -> np.ndarray:
    """T(C^{1/2} h̃*) (N, L, L) from whitened teacher fields h̃* (N, L, r_t)."""
    return teacher_attention(mix_tokens(h_star, problem, 0.5), problem)


def whitened_teacher_gradient(h: np.ndarray, h_star: np.ndarray, problem: Problem) -> np.ndarray:
    """∂ℓ̃/∂h̃* (N, L, r_t) at whitened fields h̃ (N, L, r), h̃* (N, L, r_t):
    (1 − c) C^{1/2} ∂ℓ/∂h* at (C^{1/2} h̃, C^{1/2} h̃*) (C^{1/2} symmetric)."""
    if not is_correlated(problem):
        return teacher_gradient(h, h_star, problem)
    g = teacher_gradient(mix_tokens(h, problem, 0.5), mix_tokens(h_star, problem, 0.5), problem)
    return loss_scale(problem) * mix_tokens(g, problem, 0.5)
