"""Linear positional baseline (SPEC section 5).

ŷ = B X with B ∈ R^{L×L} reaches the population optimum B = E[T(h*)] for every α > 0, so

    ε_lin = (σ²/2) E ‖T(h*) − E[T(h*)]‖²_F,   h*_l ~ N(0, ρ) i.i.d.,

an L·r_t-dimensional Gaussian expectation, computed with a tensor Gauss-Hermite rule. For tokens
correlated across positions (docs/correlated_tokens.md) the optimum is still B = E[T(h*)], now with
h* = C^{1/2} h̃*, h̃*_l ~ N(0, ρ) i.i.d., and the loss gains the factor 1 − c:

    ε_lin = (1 − c) (σ²/2) E ‖T(h*) − E[T(h*)]‖²_F.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from dotattn.positional_semantic.problem import STUDENTS, Problem, require_variant
from dotattn.positional_semantic.quadrature import gauss_hermite
from dotattn.positional_semantic.tokens import loss_scale, teacher_target

__all__ = ["linear_baseline_test_error", "baseline_order"]


def baseline_order(dim: int, max_nodes: int = 400_000) -> int:
    """Gauss-Hermite order per axis for the baseline: at most 60, at most ``max_nodes`` nodes."""
    return int(min(60, np.floor(max_nodes ** (1.0 / dim) + 1e-9)))


@lru_cache(maxsize=64)
def linear_baseline_test_error(problem: Problem, order: int | None = None) -> float:
    """ε_lin for the problem (per sample, same normalisation as ε_g)."""
    require_variant(problem, "the linear baseline", students=STUDENTS, correlated=True)
    D = problem.L * problem.teacher_rank
    rule = gauss_hermite(D, order or baseline_order(D))
    h_star = problem.sigma * rule.nodes.reshape(-1, problem.L, problem.teacher_rank)
    T = teacher_target(h_star, problem)
    mean = rule.expect(T)
    return float(loss_scale(problem) * 0.5 * problem.sigma**2 * rule.expect(np.sum((T - mean) ** 2, axis=(1, 2))))
