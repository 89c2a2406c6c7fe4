"""Stability of a replica-symmetric fixed point against replica-symmetry breaking (zero temperature).

Derivation: ``docs/rs_stability.md`` (notation of ``docs/theory.md``). Two conditions, both needed:

1. **Replicon (de Almeida–Thouless) of the smooth part.** With the prox Jacobian
   A = ∂ĥ/∂ω − I (per node an (L r) × (L r) matrix, blocks A_lk of size r × r), the replicon map
   on r × r matrices X is

       R(X) = α E[ Σ_{l,k} A_lk X A_lkᵀ ],      A = −(I_L ⊗ V⁻¹ + ∇²ℓ(ĥ))⁻¹ ∇²ℓ(ĥ),

   (the regulariser channel contributes the factor V on each side, which turns V⁻¹(∂ĥ/∂ω − I)
   into A). RS is stable only if the spectral radius ρ(R) < 1. R is completely positive, so ρ(R)
   is its largest eigenvalue and its eigenvector is a positive semi-definite matrix.
2. **Continuity of the global prox.** Where the global minimiser ĥ(ω) jumps between basins on a
   surface of positive measure, the zero-temperature limit of the replicon diverges (the jump
   contributes a term ∝ β |Δĥ|³ per unit surface density), so RS is unstable whatever ρ(R). The
   loss is even, ℓ(−h) = ℓ(h), hence ĥ(−ω) = −ĥ(ω) and ĥ is continuous at ω = 0 only if the
   origin is the unique global minimiser of the prox objective with centre 0. The *mirror-jump
   weight* is the probability (over the teacher fields h*) that it is not.

For tokens correlated across positions both conditions hold as written in the whitened fields
(h̃ = C^{-1/2} h, loss ℓ̃: docs/correlated_tokens.md), which is what the loss channel's fields and
:func:`dotattn.positional_semantic.prox.point_loss` provide.

Functions are pure and vectorised over quadrature nodes.
"""

from __future__ import annotations

import numpy as np

from dotattn.positional_semantic.loss_channel import local_fields
from dotattn.positional_semantic.overlaps import InvalidOverlaps, Overlaps
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.prox import (
    minimise_envelope,
    point_loss,
    point_loss_bound,
    prox,
    quadratic_hessian,
    random_ball_points,
)
from dotattn.positional_semantic.quadrature import GaussianRule, sobol_qmc
from dotattn.positional_semantic.records import Stability
from dotattn.positional_semantic.tokens import teacher_target

__all__ = [
    "prox_jacobian",
    "replicon_operator",
    "spectral_radius",
    "mirror_jump_weight",
    "Stability",
    "rs_stability",
    "replicon",
    "replicon_rule",
    "teacher_field_rule",
    "REPLICON_RULE_SIZES",
]


def prox_jacobian(hessian: np.ndarray, V: np.ndarray) -> np.ndarray:
    """A = ∂ĥ/∂ω − I = −(I_L ⊗ V⁻¹ + H)⁻¹ H at a minimiser, for H = ∇²ℓ(ĥ) (N, L r, L r), V (r, r).

    Index l·r + i as in :func:`dotattn.positional_semantic.loss.loss_derivatives`. Returns (N, L r, L r). Raises
    numpy.linalg.LinAlgError if the prox objective's Hessian is singular at some node.
    """
    P = quadratic_hessian(hessian.shape[-1] // V.shape[0], np.linalg.inv(V))[None] + hessian
    return -np.linalg.solve(P, hessian)


def replicon_operator(jacobian: np.ndarray, weights: np.ndarray, alpha: float, r: int) -> np.ndarray:
    """Matrix (r², r²) of R(X) = α Σ_n w_n Σ_{l,k} A_lk X A_lkᵀ on row-major vec(X).

    jacobian (N, L r, L r): A per node; weights (N,) of the quadrature rule.
    """
    N, n, _ = jacobian.shape
    L = n // r
    blocks = jacobian.reshape(N, L, r, L, r).transpose(0, 1, 3, 2, 4).reshape(N * L * L, r, r)
    w = np.repeat(np.asarray(weights, dtype=float), L * L)
    R = np.einsum("b,bij,bkl->ikjl", w, blocks, blocks).reshape(r * r, r * r)
    return alpha * R


def spectral_radius(operator: np.ndarray) -> float:
    """max |eigenvalue| of a square matrix."""
    return float(np.max(np.abs(np.linalg.eigvals(operator))))


_SOBOL_RULES: dict[tuple[int, int, int, int], GaussianRule] = {}


def _fixed_sobol(dim: int, log2_points: int, scramblings: int, seed: int) -> GaussianRule:
    """:func:`sobol_qmc` made once per process and kept (read-only arrays): the stability rules are the
    same for every record, so a phase diagram need not draw and transform them 500 times."""
    key = (dim, log2_points, scramblings, seed)
    if key not in _SOBOL_RULES:
        rule = sobol_qmc(dim, log2_points, scramblings, seed)
        for a in (rule.nodes, rule.weights, rule.groups):
            if a is not None:  # a QMC rule always has its groups
                a.setflags(write=False)
        _SOBOL_RULES[key] = rule
    return _SOBOL_RULES[key]


def teacher_field_rule(problem: Problem, log2_points: int = 10, scramblings: int = 4) -> GaussianRule:
    """Randomised QMC rule (scrambled Sobol) for the teacher fields alone, h* (L, r_t) ~ N(0, ρ)
    i.i.d. over tokens, in L·r_t dimensions: the jump weight is the probability of a set, whose
    indicator a Gauss-Hermite rule integrates poorly; the scramblings give its standard error."""
    return _fixed_sobol(problem.L * problem.teacher_rank, log2_points, scramblings, 0)


def mirror_jump_weight(
    V: np.ndarray,
    problem: Problem,
    rule: GaussianRule | None = None,
    *,
    random_starts: int = 4,
    seed: int = 1,
    rtol: float = 1e-9,
) -> tuple[float, np.ndarray]:
    """Probability over the teacher fields h* ~ N(0, ρ) that the origin is not the global minimiser
    of E_0(h) = Σ_l ½ h_lᵀV⁻¹h_l + ℓ(h, h*) (the prox objective with centre 0), and the per-node
    flags (N,) on ``rule`` (default :func:`teacher_field_rule`; nodes are standard normal, scaled by ρ^{1/2}).

    A node counts when the Hessian of E_0 at 0 has a negative eigenvalue, or when some start ends
    ``rtol`` (relative to σ²) below E_0(0) = ℓ(0, h*). Starts: ± half the trust radius along the
    two lowest eigenvectors of that Hessian and ``random_starts`` points in the ball that must
    contain the minimiser.
    """
    rule = rule or teacher_field_rule(problem)
    L, rt = problem.L, problem.teacher_rank
    V = np.atleast_2d(V)
    r = V.shape[0]
    N = rule.size
    h_star = rule.nodes.reshape(N, L, rt) @ np.linalg.cholesky(problem.rho).T
    target = teacher_target(h_star, problem)
    zero = np.zeros((N, L, r))
    loss = point_loss(problem)
    at_zero = loss.derivatives(zero, target)
    lam, U = np.linalg.eigh(quadratic_hessian(L, np.linalg.inv(V))[None] + at_zero.hessian())
    loss_bound = point_loss_bound(problem)
    radius = np.sqrt(2.0 * np.max(np.linalg.eigvalsh(V)) * loss_bound)
    directed = [s * 0.5 * radius * U[:, :, j].reshape(N, L, r) for j in range(min(2, L * r)) for s in (1, -1)]
    random = random_ball_points(zero, V, loss_bound, random_starts, seed)
    best = minimise_envelope(np.concatenate([np.stack(directed), random]), zero, target, V, loss)
    moved = (best.value < at_zero.value - rtol * problem.sigma**2) | (lam[:, 0] < 0)
    return float(np.sum(rule.weights[moved])), moved


REPLICON_RULE_SIZES: tuple[int, ...] = (11, 14)
"""log2 of the QMC points per scrambling (4 scramblings) tried in turn by :func:`rs_stability`: the
larger rule only where the smaller one leaves the AT verdict undecided (docs/rs_stability.md)."""


def replicon_rule(
    problem: Problem, log2_points: int = REPLICON_RULE_SIZES[0], scramblings: int = 4, seed: int = 0
) -> GaussianRule:
    """Scrambled Sobol rule in D = L(r + r_t) dimensions for the replicon (see :func:`replicon`)."""
    return _fixed_sobol(problem.gaussian_dim, log2_points, scramblings, seed)


def replicon(
    overlaps: Overlaps,
    alpha: float,
    rule: GaussianRule,
    problem: Problem,
    *,
    prox_h: np.ndarray | None = None,
    random_starts: int | None = None,
) -> tuple[float, float] | str:
    """(ρ(R), its standard error) on ``rule``, or a string saying why it cannot be computed.

    ρ(R) is from the global prox at every node (``prox_h`` (N, L, r), the global prox at these nodes,
    polished by one local Newton run; else a multi-start search). On a QMC rule the standard error
    is the spread of ρ over the scramblings / √R; on a deterministic rule it is NaN. The integrand
    of E[A ⊗ A] is unbounded near the nodes where the origin is a degenerate minimiser of the prox
    objective (ω ≈ 0, a pitchfork of ĥ), integrably so; a tensor Gauss-Hermite rule with a node at
    or near ω = 0 then gives erratic values (docs/rs_stability.md), which is why the default rule is QMC.
    """
    try:
        fl = local_fields(overlaps, rule, problem)
    except InvalidOverlaps as exc:
        return f"fields cannot be formed: {exc}"
    V = np.atleast_2d(overlaps.V)
    target = teacher_target(fl.h_star, problem)
    warm = prox_h if prox_h is not None and np.shape(prox_h) == fl.centre.shape else None
    px = prox(fl.centre, target, V, problem, warm=warm, random_starts=random_starts)
    hess = point_loss(problem).derivatives(px.h, target).hessian()
    try:
        A = prox_jacobian(hess, V)
    except np.linalg.LinAlgError:
        return "the prox objective's Hessian is singular at some node (degenerate minimiser)"
    if not np.all(np.isfinite(A)):
        return "the prox Jacobian is not finite at some node"
    r = problem.field_rank
    rho = spectral_radius(replicon_operator(A, rule.weights, alpha, r))
    if rule.groups is None:
        return rho, float("nan")
    groups = np.unique(rule.groups)
    per = [
        spectral_radius(replicon_operator(A[rule.groups == g], rule.weights[rule.groups == g] * len(groups), alpha, r))
        for g in groups
    ]
    return rho, float(np.std(per, ddof=1) / np.sqrt(len(groups)))


def rs_stability(
    overlaps: Overlaps,
    alpha: float,
    problem: Problem,
    *,
    rule: GaussianRule | None = None,
    prox_h: np.ndarray | None = None,
    random_starts: int | None = None,
) -> Stability:
    """The two RS-stability conditions at a fixed point's ``overlaps`` (docs/rs_stability.md).

    The replicon is computed on ``rule`` (``prox_h``: the global prox at its nodes, if known), by
    default on scrambled Sobol rules (:func:`replicon_rule`; the scramblings give its standard
    error) of 2^11 x 4 points, then 2^14 x 4 if that leaves the verdict undecided.
    ``at_stable`` is None (undecided, never a guess) where |replicon − 1| ≤ 2 standard errors.
    """
    V = np.atleast_2d(overlaps.V)
    if not np.all(np.linalg.eigvalsh(V) > 0):
        return Stability.unavailable("V is not positive definite")
    rules = [rule] if rule is not None else (replicon_rule(problem, m) for m in REPLICON_RULE_SIZES)
    for used in rules:  # a larger rule (made only then) only while the verdict is undecided
        result = replicon(
            overlaps, alpha, used, problem, prox_h=prox_h if rule is not None else None, random_starts=random_starts
        )
        if isinstance(result, str):
            return Stability.unavailable(result)
        rho, error = result
        undecided = bool(np.isfinite(error) and abs(rho - 1.0) <= 2.0 * error)
        if not undecided:
            break
    jump, _ = mirror_jump_weight(V, problem)
    at_stable = None if undecided else bool(rho < 1.0)
    shown = f"{rho:.4g}" + (f" +- {error:.2g}" if np.isfinite(error) else "")
    if undecided:
        reason = f"replicon {shown}: 1 is within two standard errors, AT condition undecided"
    elif not at_stable:
        reason = f"replicon {shown} >= 1 (AT condition violated)"
    elif jump > 0.0:
        reason = (
            f"replicon {shown} < 1, but the global prox jumps at omega = 0 with probability {jump:.3g}, "
            "so the T = 0 replicon diverges"
        )
    else:
        reason = f"replicon {shown} < 1 and the global prox is continuous at omega = 0"
    rs_stable = False if (at_stable is False or jump > 0.0) else (None if undecided else True)
    return Stability(
        status="computed",
        replicon=rho,
        replicon_error=error,
        jump_weight=jump,
        at_stable=at_stable,
        rs_stable=rs_stable,
        reason=reason,
    )
