"""Batched global proximal operator (Moreau envelope) of the attention loss.

For every node n (SPEC section 3)

    M(c, T; V) = min_h  Σ_l ½ (h_l − c_l)ᵀ V⁻¹ (h_l − c_l) + ℓ(h, T)

with c (N, L, r) the Gaussian centres (SPEC's ω_l), T = T(h*) (N, L, L) the teacher's attention
(:func:`dotattn.positional_semantic.loss.teacher_attention`) and V
(r, r) the response matrix. The objective is non-convex, so the minimiser is found by damped
Newton from several starts at once (all nodes × all starts in one vectorised loop) and the
lowest value is kept:

* the canonical starts: c, 0, −c and, for every cyclic shift of the token order, the shifted
  c and its negative (ℓ is invariant under h → −h and under joint token permutations);
* ``random_starts`` points drawn uniformly in the ball ‖h − c‖ ≤ R that must contain the global
  minimiser (the quadratic alone exceeds ℓ(c) outside it).

Newton steps use the analytic Hessian with eigenvalues reflected and floored (positive-definite
safeguard) and an Armijo backtracking line search, so every step decreases the objective.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeGuard

import numpy as np
from scipy.special import expit

from dotattn.positional_semantic import compiled
from dotattn.positional_semantic.loss import LossDerivatives, attention_loss, loss_derivatives
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.tokens import is_correlated, loss_scale, mix_tokens, token_power

__all__ = [
    "ProxResult",
    "PointLoss",
    "AttentionPointLoss",
    "CorrelatedAttentionLoss",
    "point_loss",
    "point_loss_bound",
    "prox_objective",
    "prox",
    "minimise_envelope",
    "multistart_points",
    "random_ball_points",
    "quadratic_hessian",
    "default_random_starts",
    "objective_symmetries",
    "symmetric_minimisers",
]


class PointLoss(Protocol):
    """A per-node loss ℓ(h; data) with data (M, ...) carried along with the points."""

    def value(self, h: np.ndarray, data: np.ndarray) -> np.ndarray: ...

    def derivatives(self, h: np.ndarray, data: np.ndarray) -> LossDerivatives: ...


@dataclass(frozen=True)
class AttentionPointLoss:
    """The attention loss of SPEC section 1 with data = T(h*) (M, L, L)."""

    problem: Problem

    def value(self, h: np.ndarray, data: np.ndarray) -> np.ndarray:
        return attention_loss(h, data, self.problem)

    def derivatives(self, h: np.ndarray, data: np.ndarray) -> LossDerivatives:
        return loss_derivatives(h, data, self.problem, hessian=True)

    def gradient(self, h: np.ndarray, data: np.ndarray) -> np.ndarray:
        """∇ℓ alone (the same numbers as ``derivatives(h, data).grad``, without the Hessian)."""
        return loss_derivatives(h, data, self.problem, hessian=False).grad


@dataclass(frozen=True)
class CorrelatedAttentionLoss:
    """The attention loss of tokens correlated across positions, in whitened fields h̃ = C^{-1/2} h
    (:mod:`dotattn.positional_semantic.tokens`): ℓ̃(h̃; T) = (1 − c) ℓ(C^{1/2} h̃; T), data = T (M, L, L).
    Gradient (1 − c) C^{1/2} ∇ℓ, Hessian (1 − c) (C^{1/2} ⊗ I_r) ∇²ℓ (C^{1/2} ⊗ I_r)."""

    problem: Problem

    def value(self, h: np.ndarray, data: np.ndarray) -> np.ndarray:
        return loss_scale(self.problem) * attention_loss(mix_tokens(h, self.problem, 0.5), data, self.problem)

    def derivatives(self, h: np.ndarray, data: np.ndarray) -> LossDerivatives:
        p, s = self.problem, loss_scale(self.problem)
        der = loss_derivatives(mix_tokens(h, p, 0.5), data, p, hessian=True)
        K = np.kron(token_power(p, 0.5), np.eye(h.shape[-1]))
        return LossDerivatives(
            value=s * der.value, grad=s * mix_tokens(der.grad, p, 0.5), hess=s * (K @ der.hessian() @ K)
        )


def point_loss(problem: Problem) -> PointLoss:
    """The per-node loss of the replica theory's prox: :class:`AttentionPointLoss`, or
    :class:`CorrelatedAttentionLoss` (in whitened fields) when the tokens are correlated."""
    return CorrelatedAttentionLoss(problem) if is_correlated(problem) else AttentionPointLoss(problem)


def point_loss_bound(problem: Problem) -> float:
    """An upper bound of :func:`point_loss`: (1 − c) σ² L (each row of S − T has squared norm ≤ 2)."""
    return loss_scale(problem) * problem.sigma**2 * problem.L


_EIG_FLOOR = 1e-8
_ARMIJO = 1e-4
_DISTINCT = 1e-6
"""Minimisers closer than this (max-norm, relative to 1 + |ĥ|) are the same point."""


@dataclass(frozen=True)
class ProxResult:
    """Global proximal points for N nodes.

    h : (N, L, r) minimiser ĥ.    value : (N,) envelope M.    f : (N, L, r) V⁻¹(ĥ − c).
    iterations : Newton iterations of the slowest start.    grad_norm : max ∞-norm of the
    objective's gradient at ĥ (a diagnostic, computed on first use from ``residual``).    n_starts :
    starts per node.
    alts, alts_f : (K, N, L, r) the other global minimisers g ĥ of a node whose objective has an
    exact symmetry g (:func:`symmetric_minimisers`) and their V⁻¹(ĥ − c); NaN where a node has
    fewer; None if no node has any. The loss channel averages over all global minimisers of a node (:meth:`minima_count`).
    """

    h: np.ndarray
    value: np.ndarray
    f: np.ndarray
    iterations: int
    n_starts: int
    alts: np.ndarray | None = None
    alts_f: np.ndarray | None = None
    residual: Callable[[], float] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def grad_norm(self) -> float:
        """max ∞-norm of the prox objective's gradient at ĥ (NaN if unknown); computed when first read,
        since no step of the solver needs it."""
        return float(self.residual()) if self.residual is not None else float("nan")

    def __post_init__(self) -> None:
        if (self.alts is None) != (self.alts_f is None):
            raise ValueError("ProxResult: alts and alts_f must be given together (both None or both arrays)")

    def minima_count(self) -> np.ndarray:
        """Number of global minimisers kept per node, (N,) (1 + the alternatives)."""
        if self.alts is None:
            return np.ones(len(self.value))
        return 1.0 + np.sum(~np.isnan(self.alts[:, :, 0, 0]), axis=0)


def _apply_right(x: np.ndarray, mat: np.ndarray) -> np.ndarray:
    """x @ mat for x (..., r) and a small (r, k) matrix, as one 2-D product (a scalar product for 1 x 1)."""
    if mat.shape == (1, 1):
        return x * mat[0, 0]
    return (x.reshape(-1, x.shape[-1]) @ mat).reshape(x.shape[:-1] + (mat.shape[1],))


def _row_sum(x: np.ndarray) -> np.ndarray:
    """Σ over all but the first axis; unrolled for two entries (numpy reductions over tiny axes are slow)."""
    x = x.reshape(len(x), -1)
    if x.shape[1] == 2:
        return x[:, 0] + x[:, 1]
    return x.sum(axis=1)


def _row_absmax(x: np.ndarray) -> np.ndarray:
    x = np.abs(x.reshape(len(x), -1))
    if x.shape[1] == 2:
        return np.maximum(x[:, 0], x[:, 1])
    return x.max(axis=1)


def prox_objective(
    h: np.ndarray, centre: np.ndarray, data: np.ndarray, V_inv: np.ndarray, loss: PointLoss
) -> np.ndarray:
    """Objective Σ_l ½ (h_l − c_l)ᵀ V⁻¹ (h_l − c_l) + ℓ(h; data), shape (N,)."""
    d = h - centre
    quad = _row_sum(_apply_right(d, V_inv) * d)
    return 0.5 * quad + loss.value(h, data)


def _solve_safeguarded(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """−H₊⁻¹ g with H₊ = H with eigenvalues |λ| floored at 1e-8 relative; H (M, n, n), g (M, n).

    H₊ = H where H is positive definite (Cholesky, the common case); eigendecomposition elsewhere.
    """
    n = H.shape[-1]
    if n == 2:  # closed-form symmetric 2 x 2 eigen-decomposition
        return np.stack(_solve_2x2(H[:, 0, 0], H[:, 0, 1], H[:, 1, 1], g[:, 0], g[:, 1]), axis=1)
    step, pd = _cholesky_solve(H, g)
    bad = np.flatnonzero(~pd)
    if bad.size:  # indefinite or nearly singular Hessians: reflected and floored eigenvalues
        Hb, gb = H[bad], g[bad]
        lam, U = np.linalg.eigh(Hb)
        floor = _EIG_FLOOR * np.max(np.abs(lam), axis=-1, keepdims=True)
        lam = np.maximum(np.abs(lam), floor)
        coef = np.einsum("mji,mj->mi", U, gb) / lam
        step[bad] = -np.einsum("mij,mj->mi", U, coef)
    return step


def _solve_2x2(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, g1: np.ndarray, g2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """−H₊⁻¹g for symmetric 2 x 2 H = [[a, b], [b, c]] (columns).

    Where H is safely positive definite (a > 0 and det H > 1e-6 (a + c)², so that
    λ_min/λ_max > 1e-6 and the floor cannot apply) H₊ = H and the step is Cramer's rule;
    elsewhere the closed-form eigendecomposition with reflected, floored eigenvalues.
    """
    det = a * c - b * b
    pd = (a > 0) & (det > 1e-6 * (a + c) ** 2)
    if np.all(pd):
        return -(c * g1 - b * g2) / det, -(a * g2 - b * g1) / det
    p1, p2 = -(c * g1 - b * g2) / np.where(pd, det, 1.0), -(a * g2 - b * g1) / np.where(pd, det, 1.0)
    bad = np.flatnonzero(~pd)
    p1[bad], p2[bad] = _solve_2x2_eigen(a[bad], b[bad], c[bad], g1[bad], g2[bad])
    return p1, p2


def _solve_2x2_eigen(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, g1: np.ndarray, g2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """−H₊⁻¹g for symmetric 2 x 2 H by the closed-form eigendecomposition (eigenvalues reflected and floored)."""
    mean, half = 0.5 * (a + c), np.sqrt(0.25 * (a - c) ** 2 + b * b)
    lam1, lam2 = mean - half, mean + half
    # eigenvector of lam2: (b, lam2 - a) or (lam2 - c, b), the better conditioned one
    v1, v2 = b, lam2 - a
    alt = np.abs(a - c) > 0
    use_alt = (np.abs(v1) + np.abs(v2)) < 1e-300
    v1 = np.where(use_alt, np.where(alt & (a > c), 1.0, 0.0), v1)
    v2 = np.where(use_alt, np.where(alt & (a > c), 0.0, 1.0), v2)
    nrm = np.hypot(v1, v2)
    v1, v2 = v1 / nrm, v2 / nrm  # unit eigenvector of lam2; (−v2, v1) for lam1
    scale = np.maximum(np.abs(lam2), np.abs(lam1))
    floor = _EIG_FLOOR * np.maximum(scale, 1e-300)
    l1 = np.maximum(np.abs(lam1), floor)
    l2 = np.maximum(np.abs(lam2), floor)
    p2 = (v1 * g1 + v2 * g2) / l2
    p1 = (-v2 * g1 + v1 * g2) / l1
    return -(p2 * v1 - p1 * v2), -(p2 * v2 + p1 * v1)


def _cholesky_solve(H: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(−H⁻¹g, ok) by a Cholesky factorisation unrolled over the n columns (vectorised over M).

    ``ok`` (M,) is False where a pivot is below 1e-8 of the largest diagonal entry (H not safely
    positive definite); those rows of the step are garbage and must be recomputed. For the
    small n here this is several times faster than a batched eigendecomposition.
    """
    M, n, _ = H.shape
    Lf = np.zeros_like(H)
    scale = np.max(np.abs(np.diagonal(H, axis1=1, axis2=2)), axis=1)
    ok = np.ones(M, dtype=bool)
    for j in range(n):
        piv = H[:, j, j] - np.einsum("mk,mk->m", Lf[:, j, :j], Lf[:, j, :j])
        ok &= piv > _EIG_FLOOR * scale
        d = np.sqrt(np.where(ok, piv, 1.0))
        Lf[:, j, j] = d
        if j + 1 < n:
            Lf[:, j + 1 :, j] = (H[:, j + 1 :, j] - np.einsum("mik,mk->mi", Lf[:, j + 1 :, :j], Lf[:, j, :j])) / d[
                :, None
            ]
    y = np.zeros_like(g)
    for j in range(n):  # L y = g
        y[:, j] = (g[:, j] - np.einsum("mk,mk->m", Lf[:, j, :j], y[:, :j])) / Lf[:, j, j]
    x = np.zeros_like(g)
    for j in reversed(range(n)):  # Lᵀ x = y
        x[:, j] = (y[:, j] - np.einsum("mk,mk->m", Lf[:, j + 1 :, j], x[:, j + 1 :])) / Lf[:, j, j]
    return -x, ok


def quadratic_hessian(L: int, V_inv: np.ndarray) -> np.ndarray:
    """Hessian of the prox objective's quadratic term Σ_l ½ (h_l − c_l)ᵀ V⁻¹ (h_l − c_l): I_L ⊗ V⁻¹,
    (L r, L r) with index l·r + i as in :func:`dotattn.positional_semantic.loss.loss_derivatives`."""
    return np.kron(np.eye(L), V_inv)


def _newton(
    h0: np.ndarray,
    centre: np.ndarray,
    target: np.ndarray,
    V_inv: np.ndarray,
    loss: PointLoss,
    max_iter: int,
    gtol: float,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Damped safeguarded Newton from h0 (M, L, r); returns (h, value, iterations).

    Works on a compacted copy of the still-active points, so late iterations cost little.
    """
    M, L, r = h0.shape
    n = L * r
    block = quadratic_hessian(L, V_inv)
    h_out = h0.copy()
    v_out = prox_objective(h_out, centre, target, V_inv, loss)
    idx = np.arange(M)  # global index of each active point
    ha, ca, ta, fa = h_out.copy(), centre, target, v_out.copy()
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is read after the loop)
        der = loss.derivatives(ha, ta)
        g = (_apply_right(ha - ca, V_inv) + der.grad).reshape(-1, n)
        gsmall = _row_absmax(g) < gtol
        step = _solve_safeguarded(der.hess + block, g).reshape(-1, L, r)
        slope = _row_sum(g * step.reshape(-1, n))
        # full Newton step for everybody first (no gathering); a tiny Newton decrement means the
        # point is inside the quadratic basin, where objective differences drown in rounding
        trial = ha + step
        ft = prox_objective(trial, ca, ta, V_inv, loss)
        ok = (ft <= fa + _ARMIJO * slope) | (-slope < 1e-13 * (1.0 + np.abs(fa)))
        h_new = np.where(ok[:, None, None], trial, ha)
        f_new = np.where(ok, ft, fa)
        todo = np.flatnonzero(~ok)
        t = 0.5
        for _ in range(60):  # backtracking on the few points that need it
            if todo.size == 0:
                break
            h_sub, s_sub = np.take(ha, todo, axis=0), np.take(step, todo, axis=0)
            trial = h_sub + t * s_sub
            ft = prox_objective(trial, np.take(ca, todo, axis=0), np.take(ta, todo, axis=0), V_inv, loss)
            good = ft <= np.take(fa, todo) + _ARMIJO * t * np.take(slope, todo)
            h_new[todo[good]] = trial[good]
            f_new[todo[good]] = ft[good]
            ok[todo[good]] = True
            todo = todo[~good]
            t *= 0.5
        # finished: gradient below tolerance before the step (keep that point), or a failed
        # line search (a minimum to rounding precision)
        done = gsmall | ~ok
        if np.any(done):
            fin = np.flatnonzero(done)
            keep_old = gsmall[fin]
            h_out[idx[fin]] = np.where(keep_old[:, None, None], ha[fin], h_new[fin])
            v_out[idx[fin]] = np.where(keep_old, fa[fin], f_new[fin])
            keep = ~done
            if not np.any(keep):
                break
            idx = np.compress(keep, idx)
            ha, ca, ta, fa = (np.compress(keep, x, axis=0) for x in (h_new, ca, ta, f_new))
        else:
            ha, fa = h_new, f_new
    else:
        h_out[idx], v_out[idx] = ha, fa
    return h_out, v_out, it


def _toy_value(
    x1: np.ndarray, x2: np.ndarray, c1: np.ndarray, c2: np.ndarray, t1: np.ndarray, t2: np.ndarray, v: float, s2: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prox objective of the toy model (L = 2, r = 1) on columns, ½v[(x₁−c₁)² + (x₂−c₂)²] + ℓ,
    and the two logistic scores s(a), s(b) it used (reused by the next Newton step)."""
    d1, d2 = x1 - c1, x2 - c2
    sa = expit(x1 * (x1 - x2))
    sb = expit(x2 * (x2 - x1))
    ra, rb = sa - t1, sb - t2
    return 0.5 * (d1 * v * d1 + d2 * v * d2) + s2 * (ra * ra + rb * rb), sa, sb


def _newton_toy(
    h0: np.ndarray, centre: np.ndarray, target: np.ndarray, v: float, s2: float, max_iter: int, gtol: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`_newton` for the toy model (L = 2, r = 1, V⁻¹ = v scalar) written on the two
    coordinate columns: the same steps, safeguard, line search and stopping rule, without the
    (M, 2, 2) Hessian arrays. Returns (h (M, 2, 1), value (M,), iterations)."""
    M = h0.shape[0]
    x1o, x2o = h0[:, 0, 0].copy(), h0[:, 1, 0].copy()
    c1, c2 = centre[:, 0, 0], centre[:, 1, 0]
    t1, t2 = target[:, 0, 0], target[:, 1, 1]
    vo, sa, sb = _toy_value(x1o, x2o, c1, c2, t1, t2, v, s2)
    idx = np.arange(M)
    x1, x2, fa = x1o.copy(), x2o.copy(), vo.copy()
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is read after the loop)
        ra, rb = sa - t1, sb - t2
        da, db = sa * (1 - sa), sb * (1 - sb)
        ga, gb = 2 * s2 * ra * da, 2 * s2 * rb * db
        a1, a2, b1, b2 = 2 * x1 - x2, -x1, -x2, 2 * x2 - x1
        g1 = (x1 - c1) * v + (ga * a1 + gb * b1)
        g2 = (x2 - c2) * v + (ga * a2 + gb * b2)
        gsmall = np.maximum(np.abs(g1), np.abs(g2)) < gtol
        haa = 2 * s2 * (da * da + ra * da * (1 - 2 * sa))
        hbb = 2 * s2 * (db * db + rb * db * (1 - 2 * sb))
        H11 = (haa * a1 * a1 + hbb * b1 * b1 + 2 * ga) + v
        H22 = (haa * a2 * a2 + hbb * b2 * b2 + 2 * gb) + v
        H12 = haa * a1 * a2 + hbb * b1 * b2 - ga - gb
        p1, p2 = _solve_2x2(H11, H12, H22, g1, g2)
        slope = g1 * p1 + g2 * p2
        y1, y2 = x1 + p1, x2 + p2
        ft, sat, sbt = _toy_value(y1, y2, c1, c2, t1, t2, v, s2)
        ok = (ft <= fa + _ARMIJO * slope) | (-slope < 1e-13 * (1.0 + np.abs(fa)))
        n1, n2 = np.where(ok, y1, x1), np.where(ok, y2, x2)
        fn, sa, sb = np.where(ok, ft, fa), np.where(ok, sat, sa), np.where(ok, sbt, sb)
        todo = np.flatnonzero(~ok)
        t = 0.5
        for _ in range(60):  # backtracking on the few points that need it
            if todo.size == 0:
                break
            y1, y2 = x1[todo] + t * p1[todo], x2[todo] + t * p2[todo]
            fy, say, sby = _toy_value(y1, y2, c1[todo], c2[todo], t1[todo], t2[todo], v, s2)
            good = fy <= fa[todo] + _ARMIJO * t * slope[todo]
            sel = todo[good]
            n1[sel], n2[sel], fn[sel], sa[sel], sb[sel] = y1[good], y2[good], fy[good], say[good], sby[good]
            ok[sel] = True
            todo = todo[~good]
            t *= 0.5
        done = gsmall | ~ok
        if np.any(done):
            fin = np.flatnonzero(done)
            keep_old = gsmall[fin]
            x1o[idx[fin]] = np.where(keep_old, x1[fin], n1[fin])
            x2o[idx[fin]] = np.where(keep_old, x2[fin], n2[fin])
            vo[idx[fin]] = np.where(keep_old, fa[fin], fn[fin])
            keep = np.flatnonzero(~done)
            if keep.size == 0:
                break
            idx = idx[keep]
            x1, x2, fa, sa, sb, c1, c2, t1, t2 = (z[keep] for z in (n1, n2, fn, sa, sb, c1, c2, t1, t2))
        else:
            x1, x2, fa = n1, n2, fn
    else:
        x1o[idx], x2o[idx], vo[idx] = x1, x2, fa
    return np.stack([x1o, x2o], axis=1)[:, :, None], vo, it


def default_random_starts(L: int, r: int) -> int:
    """Random starts per node of the global search: none for L = 2, r = 1 (the canonical starts
    suffice there), 4 otherwise. Measured at the converged fixed points of (L, r, r_t) = (2, 2, 1)
    (all three branches) and (3, 1, 1) (benchmarks/README.md): 2 random starts already
    find the same global minimum as 16 at every node (hats equal to 2e-10), the canonical starts
    alone miss nodes of weight up to 1e-3 for r = 2; 4 keeps a factor 2 in hand (8 before)."""
    return 0 if (L == 2 and r == 1) else 4


def multistart_points(
    centre: np.ndarray, V: np.ndarray, loss_bound: float, random_starts: int = 0, seed: int = 0
) -> np.ndarray:
    """Starting points (S, N, L, r): canonical starts plus random points in the trust ball.

    ``loss_bound`` bounds ℓ from above (σ² L for the attention loss), so that the global
    minimiser lies within ‖h − c‖² ≤ 2 λ_max(V) · loss_bound.
    """
    N, L, r = centre.shape
    starts = [centre, np.zeros_like(centre), -centre]
    for shift in range(1, L):
        rolled = np.roll(centre, shift, axis=1)
        starts += [rolled, -rolled]
    if random_starts > 0:
        starts += list(random_ball_points(centre, V, loss_bound, random_starts, seed))
    return np.stack(starts)


def random_ball_points(centre: np.ndarray, V: np.ndarray, loss_bound: float, count: int, seed: int = 0) -> np.ndarray:
    """``count`` points per node (count, N, L, r), uniform in the ball ‖h − c‖² ≤ 2 λ_max(V) ·
    loss_bound around each centre (N, L, r), which must contain the global minimiser of the prox
    objective (the quadratic alone exceeds ℓ's upper bound ``loss_bound`` outside it)."""
    N, L, r = centre.shape
    rng = np.random.default_rng(seed)
    radius = np.sqrt(2.0 * np.max(np.linalg.eigvalsh(V)) * loss_bound)
    dim = L * r
    out = np.empty((count, N, L, r))
    for k in range(count):
        u = rng.normal(size=(N, dim))
        u *= (rng.random((N, 1)) ** (1.0 / dim)) * radius / np.linalg.norm(u, axis=1, keepdims=True)
        out[k] = centre + u.reshape(N, L, r)
    return out


def _is_toy(loss: PointLoss, L: int, r: int, data: np.ndarray) -> TypeGuard[AttentionPointLoss]:
    """The toy model's loss (tied student, L = 2, r = 1, targets (N, 2, 2)): the 2-D Newton kernels."""
    return (
        isinstance(loss, AttentionPointLoss)
        and loss.problem.student == "tied"
        and (L, r) == (2, 1)
        and data.shape[1:] == (2, 2)
    )


def _newton_starts(
    starts: np.ndarray,
    centre: np.ndarray,
    data: np.ndarray,
    V_inv: np.ndarray,
    loss: PointLoss,
    max_iter: int,
    gtol: float,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Safeguarded Newton from every start: (h (S, N, L, r), value (S, N), iterations)."""
    S, N, L, r = starts.shape
    flat_c = np.broadcast_to(centre, (S, N, L, r)).reshape(S * N, L, r)
    flat_d = np.broadcast_to(data, (S,) + data.shape).reshape((S * N,) + data.shape[1:])
    if _is_toy(loss, L, r, data):
        kernel = compiled.newton_toy if compiled.AVAILABLE else _newton_toy
        h, value, iters = kernel(
            starts.reshape(S * N, L, r), flat_c, flat_d, float(V_inv[0, 0]), loss.problem.sigma**2, max_iter, gtol
        )
    elif (
        compiled.AVAILABLE
        and isinstance(loss, AttentionPointLoss)
        and loss.problem.student == "untied"
        and (L, r) == (2, 2)
        and data.shape[1:] == (2, 2)
    ):
        h, value, iters = compiled.newton_untied_pair(
            starts.reshape(S * N, L, r), flat_c, flat_d, V_inv, loss.problem.sigma**2, max_iter, gtol
        )
    else:
        h, value, iters = _newton(starts.reshape(S * N, L, r), flat_c, flat_d, V_inv, loss, max_iter, gtol)
    return h.reshape(S, N, L, r), value.reshape(S, N), iters


def minimise_envelope(
    starts: np.ndarray,
    centre: np.ndarray,
    data: np.ndarray,
    V: np.ndarray,
    loss: PointLoss,
    *,
    max_iter: int = 100,
    gtol: float = 1e-11,
) -> ProxResult:
    """Best of safeguarded Newton runs from ``starts`` (S, N, L, r) for every node (the prox machinery).

    centre (N, L, r), data (N, ...) per-node loss data, V (r, r) symmetric positive definite.
    """
    N, L, r = centre.shape
    V_inv = np.linalg.inv(V)
    S = starts.shape[0]
    if compiled.AVAILABLE and _is_toy(loss, L, r, data):
        # the compiled runs fused with the choice of the best start and f: bit for bit the path below
        h_best, v_best, f, iters = compiled.newton_toy_best(
            starts, centre, data, float(V_inv[0, 0]), loss.problem.sigma**2, max_iter, gtol
        )
    else:
        h, value, iters = _newton_starts(starts, centre, data, V_inv, loss, max_iter, gtol)
        if S == 1:  # one start (the warm local search): its result, without the gather
            h_best, v_best = h[0], value[0]
        else:
            best = np.argmin(value, axis=0)
            idx = np.arange(N)
            h_best, v_best = h[best, idx], value[best, idx]
        f = _apply_right(h_best - centre, V_inv)

    def residual() -> float:
        """The stationarity residual max |V⁻¹(ĥ − c) + ∇ℓ(ĥ)| (the gradient alone where the loss offers it)."""
        if not N:
            return 0.0
        grad = (
            loss.gradient(h_best, data) if isinstance(loss, AttentionPointLoss) else loss.derivatives(h_best, data).grad
        )
        return float(np.max(np.abs(f + grad)))

    return ProxResult(h=h_best, value=v_best, f=f, iterations=iters, n_starts=S, residual=residual)


def objective_symmetries(L: int, V: np.ndarray, untied: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """The maps h → P h U (P (L, L) a token permutation, U (r, r) orthogonal with U V Uᵀ = V: sign
    flips in V's eigenbasis, −I included) other than the identity. ℓ(P h U, T) = ℓ(h, Pᵀ T P)
    (ℓ depends on h hᵀ only), so the prox objective of a node with P c U = c and P T Pᵀ = T is
    invariant under the map. Permutations only for L ≤ 4. ``untied``: the fields are (h, k) and ℓ
    depends on h kᵀ, which a sign flip of one eigendirection of V does not keep; only U = ±I."""
    r = V.shape[0]
    _, E = np.linalg.eigh(V)
    perms = list(itertools.permutations(range(L))) if L <= 4 else [tuple(range(L))]
    out = []
    for perm in perms:
        P = np.eye(L)[list(perm)]
        for signs in [(1.0,) * r, (-1.0,) * r] if untied else itertools.product((1.0, -1.0), repeat=r):
            if perm == tuple(range(L)) and all(x == 1.0 for x in signs):
                continue
            out.append((P, (E * np.array(signs)) @ E.T))
    return out


def symmetric_minimisers(
    h: np.ndarray, centre: np.ndarray, target: np.ndarray, V: np.ndarray, untied: bool = False
) -> np.ndarray | None:
    """The other global minimisers g ĥ of nodes whose prox objective is invariant under a map g of
    :func:`objective_symmetries` (g c = c and P T Pᵀ = T to 1e-12) with g ĥ ≠ ĥ: (K, N, L, r), NaN
    where a node has fewer than K; None if no node has any.

    Such a node's minimum is exactly degenerate. These nodes are common on a symmetric tensor rule
    (e.g. the rank-2 student's positional branch: ξ_{1,i} = ±ξ_{2,i} per column); which of the
    minimisers the search returns is decided by rounding, and a map that used only that one
    would jump between them from step to step (it never converges).
    """
    N, L, r = h.shape
    scale_c = 1e-12 * (1.0 + _row_absmax(centre))
    scale_h = _DISTINCT * (1.0 + _row_absmax(h))
    found: list[np.ndarray] = []  # images, NaN where not a new minimiser
    for P, U in objective_symmetries(L, V, untied):
        perm = np.argmax(P, axis=1)  # (P a)_l = a_perm[l]

        def image(x: np.ndarray, perm: np.ndarray = perm, U: np.ndarray = U) -> np.ndarray:
            return _apply_right(x[:, perm], U)

        gc = image(centre)
        fixed = _row_absmax(gc - centre) <= scale_c
        if not np.any(fixed):
            continue
        T = target[fixed]
        fixed[fixed] = _row_absmax(T[:, perm][:, :, perm] - T) <= 1e-12
        if not np.any(fixed):
            continue
        gh = image(h)
        new = fixed & (_row_absmax(gh - h) > scale_h)
        for prev in found:
            same = _row_absmax(gh - np.nan_to_num(prev, nan=np.inf)) <= scale_h
            new &= ~same
        if np.any(new):
            found.append(np.where(new[:, None, None], gh, np.nan))
    if not found:
        return None
    # compact: the k-th alternative of each node in slot k
    stack = np.stack(found)
    present = ~np.isnan(stack[:, :, 0, 0])
    order = np.argsort(~present, axis=0, kind="stable")
    stack = np.take_along_axis(stack, order[:, :, None, None], axis=0)
    K = int(np.max(np.sum(present, axis=0)))
    return stack[:K]


def prox(
    centre: np.ndarray,
    target: np.ndarray,
    V: np.ndarray,
    problem: Problem,
    *,
    warm: np.ndarray | None = None,
    random_starts: int | None = None,
    seed: int = 0,
    max_iter: int = 100,
    gtol: float = 1e-11,
    symmetric_nodes: bool = True,
) -> ProxResult:
    """Global proximal point for every node.

    centre (N, L, r), target (N, L, L) = T(h*), V (r, r) symmetric positive definite; for correlated
    tokens the centres and ĥ are whitened fields and the loss is :func:`point_loss`'s.
    ``warm`` (N, L, r): start only from these points (a previous iteration's ĥ), no global
    search; otherwise a multi-start search (``random_starts`` extra random starts per node;
    default 0 for L = 2, r = 1 and 4 otherwise). Nodes whose minimum is degenerate by an exact
    symmetry also return the other minimisers (:func:`symmetric_minimisers`), unless
    ``symmetric_nodes`` is False (the caller averages over those symmetries itself).
    """
    centre = np.asarray(centre, dtype=float)
    target = np.asarray(target, dtype=float)
    V = np.atleast_2d(np.asarray(V, dtype=float))
    N, L, r = centre.shape
    if warm is not None:
        starts = np.asarray(warm, dtype=float)[None]
    else:
        if random_starts is None:
            random_starts = default_random_starts(L, r)
        starts = multistart_points(centre, V, point_loss_bound(problem), random_starts, seed)
    res = minimise_envelope(starts, centre, target, V, point_loss(problem), max_iter=max_iter, gtol=gtol)
    alts = symmetric_minimisers(res.h, centre, target, V, problem.student == "untied") if symmetric_nodes else None
    if alts is None:
        return res
    return replace(res, alts=alts, alts_f=_apply_right(alts - centre[None], np.linalg.inv(V)))
