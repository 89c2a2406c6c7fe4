"""The per-sample attention loss of SPEC section 1 and its derivatives, batched over nodes.

    ℓ(h, h*) = (σ²/2) ‖softmax(h hᵀ) − T(h*)‖²_F,   T(h*) = (1−ω) softmax(h* h*ᵀ) + ω A

Shapes: h (N, L, r) student fields, h* (N, L, r_t) teacher fields. All functions are pure and
vectorised over the leading node axis N. Two implementations of the same maths:

* a general one (any L, r, r_t), with the analytic gradient and an analytic Hessian built from
  Hessian-vector products of the softmax;
* the L = 2 fast path in the scalar scores a = h₁·(h₁−h₂), b = h₂·(h₂−h₁), where
  ℓ = σ²[(s(a) − T₁₁)² + (s(b) − T₂₂)²] with s the logistic function (scalar code for r = 1,
  vectors h_l ∈ R^r otherwise).

Untied student (``problem.student == "untied"``, docs/untied.md): the fields are g (N, L, 2r) with
g_l = (h_l, k_l) (query and key), the scores h kᵀ instead of h hᵀ; the same public functions
dispatch on the problem, with an L = 2 path in the scores a = h₁·(k₁−k₂), b = h₂·(k₂−k₁) and a
general one.

The student-side functions take the target matrix T(h*) (N, L, L), computed once per node by
:func:`teacher_attention`, rather than h* itself: the proximal solver never needs more.

:func:`loss_derivatives` picks the fast path when it applies; tests check both against each
other and against finite differences.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from dotattn.positional_semantic.problem import Problem

__all__ = [
    "LossDerivatives",
    "softmax_rows",
    "teacher_attention",
    "attention_loss",
    "loss_derivatives",
    "teacher_gradient",
    "untied_split",
]


@dataclass(frozen=True)
class LossDerivatives:
    """ℓ and its derivatives at N points: value (N,), grad (N, L, r), hess (N, L·r, L·r) or None."""

    value: np.ndarray
    grad: np.ndarray
    hess: np.ndarray | None

    def hessian(self) -> np.ndarray:
        """``hess`` (ValueError if these derivatives were computed with ``hessian=False``)."""
        if self.hess is None:
            raise ValueError("the Hessian was not computed (loss_derivatives(..., hessian=False))")
        return self.hess


def softmax_rows(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (..., L, L) scores, numerically stable."""
    Z = Z - Z.max(axis=-1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=-1, keepdims=True)


def _softmax_vjp(S: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Pull a gradient G = ∂f/∂S back through S = softmax_rows(Z): returns ∂f/∂Z, (..., L, L)."""
    return S * (G - np.sum(G * S, axis=-1, keepdims=True))


def teacher_attention(h_star: np.ndarray, problem: Problem) -> np.ndarray:
    """T(h*) = (1−ω) softmax(h* h*ᵀ) + ω A, shape (N, L, L)."""
    if h_star.shape[-2] == 2:  # L = 2: logistic of the score differences
        a_star, b_star = _pair_scores(h_star)
        s1, s2 = expit(a_star), expit(b_star)
        # the entries of (1 − ω) S* + ω A written in place (the same operations entry by entry as
        # stacking S* and mixing: (1 − ω) s + ω A_ij)
        w, A = problem.omega, problem.A
        out = np.empty(s1.shape + (2, 2))
        for (i, j), s in (((0, 0), s1), ((0, 1), 1 - s1), ((1, 0), 1 - s2), ((1, 1), s2)):
            np.multiply(1.0 - w, s, out=out[..., i, j])
            out[..., i, j] += w * A[i, j]
        return out
    S_star = softmax_rows(h_star @ np.swapaxes(h_star, -1, -2))
    return (1.0 - problem.omega) * S_star + problem.omega * problem.A


def attention_loss(h: np.ndarray, target: np.ndarray, problem: Problem, general: bool | None = None) -> np.ndarray:
    """ℓ for N points, shape (N,). h (N, L, r); target T(h*) (N, L, L) from :func:`teacher_attention`.
    ``general=True`` forces the general (N, L, L) path."""
    if problem.student == "untied":
        return (
            _untied_loss(h, target, problem)
            if not general
            else _untied_general_derivatives(h, target, problem, False).value
        )
    auto = general is None
    if general is None:
        general = not _is_fast(h)
    if not general:
        a, b = _pair_scores(h)
        ra = expit(a) - target[:, 0, 0]
        rb = expit(b) - target[:, 1, 1]
        return problem.sigma**2 * (ra * ra + rb * rb)
    if auto and h.shape[-1] == 1:  # r = 1, L >= 3: node-length columns
        _, _, Rc = _rank1_columns(h, target)
        return 0.5 * problem.sigma**2 * functools.reduce(np.add, [r * r for row in Rc for r in row])
    R = softmax_rows(h @ np.swapaxes(h, -1, -2)) - target
    return 0.5 * problem.sigma**2 * np.sum(R * R, axis=(-2, -1))


def _is_fast(h: np.ndarray) -> bool:
    return h.shape[-2] == 2


def _dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise dot product of (N, k) arrays, (N,)."""
    return np.einsum("nk,nk->n", x, y)


def _pair_scores(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a = h₁·(h₁−h₂), b = h₂·(h₂−h₁) for h (N, 2, r)."""
    if h.shape[-1] == 1:
        h1, h2 = h[:, 0, 0], h[:, 1, 0]
        return h1 * (h1 - h2), h2 * (h2 - h1)
    h1, h2 = h[:, 0], h[:, 1]
    return _dot(h1, h1 - h2), _dot(h2, h2 - h1)


# ----------------------------------------------------------------------------------------------
# L = 2 fast path (scalar code for r = r_t = 1)
# ----------------------------------------------------------------------------------------------
def _toy_derivatives(h: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool) -> LossDerivatives:
    h1, h2 = h[:, 0, 0], h[:, 1, 0]
    t1, t2 = target[:, 0, 0], target[:, 1, 1]
    s2 = problem.sigma**2
    a = h1 * (h1 - h2)
    b = h2 * (h2 - h1)
    sa, sb = expit(a), expit(b)
    ra, rb = sa - t1, sb - t2
    da, db = sa * (1 - sa), sb * (1 - sb)  # s'
    ga, gb = 2 * s2 * ra * da, 2 * s2 * rb * db  # ∂ℓ/∂a, ∂ℓ/∂b
    value = s2 * (ra * ra + rb * rb)
    a1, a2 = 2 * h1 - h2, -h1  # ∇a
    b1, b2 = -h2, 2 * h2 - h1  # ∇b
    grad = np.stack([ga * a1 + gb * b1, ga * a2 + gb * b2], axis=1)[:, :, None]
    hess = None
    if hessian:
        haa = 2 * s2 * (da * da + ra * da * (1 - 2 * sa))
        hbb = 2 * s2 * (db * db + rb * db * (1 - 2 * sb))
        H11 = haa * a1 * a1 + hbb * b1 * b1 + 2 * ga
        H22 = haa * a2 * a2 + hbb * b2 * b2 + 2 * gb
        H12 = haa * a1 * a2 + hbb * b1 * b2 - ga - gb
        hess = np.stack([np.stack([H11, H12], -1), np.stack([H12, H22], -1)], -2)
    return LossDerivatives(value=value, grad=grad, hess=hess)


def _pair_derivatives(h: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool) -> LossDerivatives:
    """L = 2, any r: the toy formulas with ∇a = (2h₁−h₂, −h₁), ∇b = (−h₂, 2h₂−h₁) and the
    constant score Hessians [[2I, −I], [−I, 0]] and [[0, −I], [−I, 2I]]."""
    r = h.shape[-1]
    h1, h2 = h[:, 0], h[:, 1]
    a, b = _pair_scores(h)
    grad_a = np.stack([2 * h1 - h2, -h1], axis=1)  # (N, 2, r)
    grad_b = np.stack([-h2, 2 * h2 - h1], axis=1)
    eye = np.eye(r)
    Ha = np.block([[2 * eye, -eye], [-eye, 0 * eye]])
    Hb = np.block([[0 * eye, -eye], [-eye, 2 * eye]])
    return _pair_core(a, b, grad_a, grad_b, Ha, Hb, target, problem.sigma**2, hessian)


def _pair_core(
    a: np.ndarray,
    b: np.ndarray,
    grad_a: np.ndarray,
    grad_b: np.ndarray,
    Ha: np.ndarray,
    Hb: np.ndarray,
    target: np.ndarray,
    s2: float,
    hessian: bool,
) -> LossDerivatives:
    """ℓ = σ²[(s(a) − T₁₁)² + (s(b) − T₂₂)²] and its derivatives for L = 2 from the two scores a, b (N,),
    their gradients (N, 2, w) in the fields (N, 2, w) and their constant Hessians (2w, 2w)."""
    N, _, w = grad_a.shape
    sa, sb = expit(a), expit(b)
    ra, rb = sa - target[:, 0, 0], sb - target[:, 1, 1]
    da, db = sa * (1 - sa), sb * (1 - sb)
    ga, gb = 2 * s2 * ra * da, 2 * s2 * rb * db
    value = s2 * (ra * ra + rb * rb)
    grad = ga[:, None, None] * grad_a + gb[:, None, None] * grad_b
    hess = None
    if hessian:
        haa = 2 * s2 * (da * da + ra * da * (1 - 2 * sa))
        hbb = 2 * s2 * (db * db + rb * db * (1 - 2 * sb))
        va, vb = grad_a.reshape(N, 2 * w), grad_b.reshape(N, 2 * w)
        hess = (
            haa[:, None, None] * va[:, :, None] * va[:, None, :]
            + hbb[:, None, None] * vb[:, :, None] * vb[:, None, :]
            + ga[:, None, None] * Ha
            + gb[:, None, None] * Hb
        )
    return LossDerivatives(value=value, grad=grad, hess=hess)


def _pair_teacher_gradient(h: np.ndarray, h_star: np.ndarray, problem: Problem) -> np.ndarray:
    """L = 2, any r and r_t: ∂ℓ/∂h* through the teacher scores a* = u₁·(u₁−u₂), b* = u₂·(u₂−u₁)."""
    w, A, s2 = problem.omega, problem.A, problem.sigma**2
    a, b = _pair_scores(h)
    u1, u2 = h_star[:, 0], h_star[:, 1]
    a_star, b_star = _pair_scores(h_star)
    sa_, sb_ = expit(a_star), expit(b_star)
    ra = expit(a) - ((1 - w) * sa_ + w * A[0, 0])
    rb = expit(b) - ((1 - w) * sb_ + w * A[1, 1])
    gA = (-2 * s2 * ra * (1 - w) * sa_ * (1 - sa_))[:, None]  # ∂ℓ/∂a*
    gB = (-2 * s2 * rb * (1 - w) * sb_ * (1 - sb_))[:, None]
    return np.stack([gA * (2 * u1 - u2) - gB * u2, -gA * u1 + gB * (2 * u2 - u1)], axis=1)


def _toy_teacher_gradient(h: np.ndarray, h_star: np.ndarray, problem: Problem) -> np.ndarray:
    h1, h2 = h[:, 0, 0], h[:, 1, 0]
    u1, u2 = h_star[:, 0, 0], h_star[:, 1, 0]
    w, A = problem.omega, problem.A
    sa_, sb_ = expit(u1 * (u1 - u2)), expit(u2 * (u2 - u1))
    t1 = (1 - w) * sa_ + w * A[0, 0]
    t2 = (1 - w) * sb_ + w * A[1, 1]
    s2 = problem.sigma**2
    ra = expit(h1 * (h1 - h2)) - t1
    rb = expit(h2 * (h2 - h1)) - t2
    gA = -2 * s2 * ra * (1 - w) * sa_ * (1 - sa_)  # ∂ℓ/∂a*
    gB = -2 * s2 * rb * (1 - w) * sb_ * (1 - sb_)
    g1 = gA * (2 * u1 - u2) + gB * (-u2)
    g2 = gA * (-u1) + gB * (2 * u2 - u1)
    return np.stack([g1, g2], axis=1)[:, :, None]


# ----------------------------------------------------------------------------------------------
# general path
# ----------------------------------------------------------------------------------------------
def _general_derivatives(h: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool) -> LossDerivatives:
    N, L, r = h.shape
    s2 = problem.sigma**2
    S = softmax_rows(h @ np.swapaxes(h, -1, -2))
    R = S - target
    value = 0.5 * s2 * np.sum(R * R, axis=(-2, -1))
    P = _softmax_vjp(S, s2 * R)  # ∂ℓ/∂Z, Z = h hᵀ
    Psym = P + np.swapaxes(P, -1, -2)
    grad = Psym @ h
    hess = None
    if hessian:
        n = L * r
        E = np.eye(n).reshape(n, L, r)  # basis directions
        # dZ = E hᵀ + h Eᵀ for every direction: (N, n, L, L)
        EhT = np.einsum("klr,nmr->nklm", E, h)
        dZ = EhT + np.swapaxes(EhT, -1, -2)
        dP = _score_gradient_jvp(S, R, dZ, s2)
        dG = (dP + np.swapaxes(dP, -1, -2)) @ h[:, None] + np.einsum("nlm,kmr->nklr", Psym, E)
        hess = dG.reshape(N, n, n)
        hess = 0.5 * (hess + np.swapaxes(hess, -1, -2))
    return LossDerivatives(value=value, grad=grad, hess=hess)


def _score_gradient_jvp(S: np.ndarray, R: np.ndarray, dZ: np.ndarray, s2: float) -> np.ndarray:
    """Directional derivatives dP (N, n, L, L) of P = ∂ℓ/∂Z (Z the student scores, S = softmax_rows(Z),
    R = S − T, both (N, L, L)) along the n score directions dZ (N, n, L, L)."""
    Sx = S[:, None]
    Rx = R[:, None]
    dS = Sx * (dZ - np.sum(Sx * dZ, axis=-1, keepdims=True))
    c = np.sum(Rx * Sx, axis=-1, keepdims=True)
    dc = np.sum(dS * (Sx + Rx), axis=-1, keepdims=True)
    return s2 * (dS * (Rx - c) + Sx * (dS - dc))


def _rank1_columns(h: np.ndarray, target: np.ndarray) -> tuple[list, list, list]:
    """r = 1: the columns x_l = h_l (N,), and S_lm = softmax_rows(h hᵀ)_lm, R_lm = S_lm − T_lm as
    nested lists of (N,) columns."""
    L = h.shape[1]
    x = [h[:, l, 0] for l in range(L)]
    S, R = [], []
    for l in range(L):
        z = [x[l] * x[m] for m in range(L)]
        zmax = functools.reduce(np.maximum, z)
        e = [np.exp(zm - zmax) for zm in z]
        tot = functools.reduce(np.add, e)
        S.append([em / tot for em in e])
        R.append([S[l][m] - target[:, l, m] for m in range(L)])
    return x, S, R


def _rank1_derivatives(h: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool) -> LossDerivatives:
    """r = 1, any L: the general path's maths on the L node-length columns h_l (no (N, L, L) or
    (N, L·r, L, L) arrays), with the Hessian in closed form instead of L·r directional derivatives.

    With Z = h hᵀ, S = softmax_rows(Z), R = S − T, P = ∂ℓ/∂Z, c_l = R_l·S_l, W = S + R and
    σ_l = |S_l|² + 2c_l, row l's Hessian in its scores is
    σ²[δ_ab S_la(W_la − c_l) + S_la S_lb(σ_l − W_la − W_lb)] =: σ² Hz_l, and
    ∂²ℓ/∂h² = P + Pᵀ + σ² Σ_l [(hᵀHz_l h) e_l e_lᵀ + h_l (e_l u_lᵀ + u_l e_lᵀ) + h_l² Hz_l],
    u_l = Hz_l h (scores z_lm = h_l h_m, so ∂z_l/∂h = h e_lᵀ + h_l I)."""
    N, L, _ = h.shape
    s2 = problem.sigma**2
    x, S, R = _rank1_columns(h, target)
    value = 0.5 * s2 * functools.reduce(np.add, [R[l][m] * R[l][m] for l in range(L) for m in range(L)])
    c = [functools.reduce(np.add, [R[l][m] * S[l][m] for m in range(L)]) for l in range(L)]
    P = [[s2 * S[l][m] * (R[l][m] - c[l]) for m in range(L)] for l in range(L)]
    Ps = [[P[k][m] + P[m][k] for m in range(L)] for k in range(L)]
    grad = np.stack([functools.reduce(np.add, [Ps[k][m] * x[m] for m in range(L)]) for k in range(L)], axis=1)[
        :, :, None
    ]
    hess = None
    if hessian:
        W = [[S[l][m] + R[l][m] for m in range(L)] for l in range(L)]
        sig = [functools.reduce(np.add, [S[l][m] * S[l][m] for m in range(L)]) + 2 * c[l] for l in range(L)]
        p = [functools.reduce(np.add, [S[l][b] * x[b] for b in range(L)]) for l in range(L)]
        qv = [functools.reduce(np.add, [S[l][b] * W[l][b] * x[b] for b in range(L)]) for l in range(L)]
        dg = [[S[l][a] * (W[l][a] - c[l]) for a in range(L)] for l in range(L)]
        U = [[dg[l][a] * x[a] + S[l][a] * ((sig[l] - W[l][a]) * p[l] - qv[l]) for a in range(L)] for l in range(L)]
        X = [xl * xl for xl in x]
        hess = np.empty((N, L, L))
        for k in range(L):
            for j in range(k, L):
                acc = functools.reduce(
                    np.add, [X[l] * S[l][k] * S[l][j] * (sig[l] - W[l][k] - W[l][j]) for l in range(L)]
                )
                acc = acc + x[k] * U[k][j] + x[j] * U[j][k]
                if k == j:
                    acc = acc + functools.reduce(np.add, [X[l] * dg[l][k] for l in range(L)])
                    acc = acc + functools.reduce(np.add, [U[k][a] * x[a] for a in range(L)])
                hess[:, k, j] = hess[:, j, k] = s2 * acc + Ps[k][j]
    return LossDerivatives(value=value, grad=grad, hess=hess)


def _general_teacher_gradient(h: np.ndarray, h_star: np.ndarray, problem: Problem) -> np.ndarray:
    return _teacher_gradient_given(softmax_rows(h @ np.swapaxes(h, -1, -2)), h_star, problem)


def _teacher_gradient_given(S: np.ndarray, h_star: np.ndarray, problem: Problem) -> np.ndarray:
    """∂ℓ/∂h* (N, L, r_t) for the student's attention S (N, L, L) held fixed."""
    s2, w = problem.sigma**2, problem.omega
    S_star = softmax_rows(h_star @ np.swapaxes(h_star, -1, -2))
    R = S - ((1 - w) * S_star + w * problem.A)
    P_star = _softmax_vjp(S_star, -(1 - w) * s2 * R)
    return (P_star + np.swapaxes(P_star, -1, -2)) @ h_star


# ----------------------------------------------------------------------------------------------
# public entry points
# ----------------------------------------------------------------------------------------------
def loss_derivatives(
    h: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool = True, general: bool | None = None
) -> LossDerivatives:
    """ℓ, ∂ℓ/∂h (N, L, r) and optionally ∂²ℓ/∂h² (N, L·r, L·r; index l·r + i).

    target : T(h*) (N, L, L) from :func:`teacher_attention`.
    ``general=True`` forces the general path (used by tests to check the L = 2 fast path and the
    closed-form r = 1 Hessian of :func:`_rank1_derivatives`, the default for r = 1, L ≥ 3).
    """
    if problem.student == "untied":
        return _untied_derivatives(h, target, problem, hessian, general)
    if general is None:
        general = not _is_fast(h)
        if general and h.shape[-1] == 1:
            return _rank1_derivatives(h, target, problem, hessian)
    if general:
        return _general_derivatives(h, target, problem, hessian)
    if h.shape[-1] == 1:
        return _toy_derivatives(h, target, problem, hessian)
    return _pair_derivatives(h, target, problem, hessian)


def teacher_gradient(h: np.ndarray, h_star: np.ndarray, problem: Problem, general: bool | None = None) -> np.ndarray:
    """∂ℓ/∂h* at fixed h, shape (N, L, r_t)."""
    if problem.student == "untied":
        return _teacher_gradient_given(softmax_rows(_untied_scores(h)), h_star, problem)
    if general is None:
        general = not _is_fast(h)
    if general:
        return _general_teacher_gradient(h, h_star, problem)
    if h.shape[-1] == 1 and h_star.shape[-1] == 1:
        return _toy_teacher_gradient(h, h_star, problem)
    return _pair_teacher_gradient(h, h_star, problem)


# ----------------------------------------------------------------------------------------------
# untied student (docs/untied.md): fields g (N, L, 2r), g_l = (h_l, k_l), scores Z = h kᵀ
# ----------------------------------------------------------------------------------------------
def untied_split(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(h, k), each (N, L, r), from the untied fields g (N, L, 2r): query and key fields."""
    r = g.shape[-1] // 2
    return g[..., :r], g[..., r:]


def _untied_scores(g: np.ndarray) -> np.ndarray:
    """Z = h kᵀ (N, L, L), Z_ll' = h_l·k_l'."""
    h, k = untied_split(g)
    return h @ np.swapaxes(k, -1, -2)


def _untied_pair_scores(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L = 2: a = Z₁₁ − Z₁₂ = h₁·(k₁ − k₂), b = Z₂₂ − Z₂₁ = h₂·(k₂ − k₁) (softmax row l is s of them)."""
    h, k = untied_split(g)
    dk = k[:, 0] - k[:, 1]
    return _dot(h[:, 0], dk), -_dot(h[:, 1], dk)


def _untied_loss(g: np.ndarray, target: np.ndarray, problem: Problem) -> np.ndarray:
    if g.shape[-2] == 2:
        a, b = _untied_pair_scores(g)
        ra, rb = expit(a) - target[:, 0, 0], expit(b) - target[:, 1, 1]
        return problem.sigma**2 * (ra * ra + rb * rb)
    R = softmax_rows(_untied_scores(g)) - target
    return 0.5 * problem.sigma**2 * np.sum(R * R, axis=(-2, -1))


def _untied_pair_derivatives(g: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool) -> LossDerivatives:
    """L = 2: ∇a = (k₁ − k₂, h₁, 0, −h₁), ∇b = (0, −h₂, k₂ − k₁, h₂) in (h₁, k₁, h₂, k₂), and the constant
    score Hessians ∂²a/∂h₁∂k₁ = I, ∂²a/∂h₁∂k₂ = −I, ∂²b/∂h₂∂k₂ = I, ∂²b/∂h₂∂k₁ = −I."""
    h, k = untied_split(g)
    r = h.shape[-1]
    a, b = _untied_pair_scores(g)
    dk = k[:, 0] - k[:, 1]
    zero = np.zeros_like(dk)
    grad_a = np.stack([np.concatenate([dk, h[:, 0]], -1), np.concatenate([zero, -h[:, 0]], -1)], axis=1)
    grad_b = np.stack([np.concatenate([zero, -h[:, 1]], -1), np.concatenate([-dk, h[:, 1]], -1)], axis=1)
    Ha, Hb = np.zeros((4 * r, 4 * r)), np.zeros((4 * r, 4 * r))
    eye = np.eye(r)
    for H, (hq, kp, kn) in ((Ha, (0, 1, 3)), (Hb, (2, 3, 1))):  # blocks of (h₁, k₁, h₂, k₂)
        for kk, sign in ((kp, 1.0), (kn, -1.0)):
            H[hq * r : (hq + 1) * r, kk * r : (kk + 1) * r] = sign * eye
            H[kk * r : (kk + 1) * r, hq * r : (hq + 1) * r] = sign * eye
    return _pair_core(a, b, grad_a, grad_b, Ha, Hb, target, problem.sigma**2, hessian)


def _untied_general_derivatives(g: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool) -> LossDerivatives:
    """Any L: P = ∂ℓ/∂Z, ∂ℓ/∂h = P k, ∂ℓ/∂k = Pᵀ h; the Hessian from the directional derivatives
    dZ = E_h kᵀ + h E_kᵀ of the scores along every basis direction E = (E_h, E_k)."""
    N, L, w = g.shape
    r = w // 2
    s2 = problem.sigma**2
    h, k = untied_split(g)
    S = softmax_rows(h @ np.swapaxes(k, -1, -2))
    R = S - target
    value = 0.5 * s2 * np.sum(R * R, axis=(-2, -1))
    P = _softmax_vjp(S, s2 * R)
    PT = np.swapaxes(P, -1, -2)
    grad = np.concatenate([P @ k, PT @ h], axis=-1)
    hess = None
    if hessian:
        n = L * w
        E = np.eye(n).reshape(n, L, w)
        Eh, Ek = E[..., :r], E[..., r:]
        dZ = np.einsum("clr,nmr->nclm", Eh, k) + np.einsum("nlr,cmr->nclm", h, Ek)
        dP = _score_gradient_jvp(S, R, dZ, s2)  # (N, n, L, L)
        dgh = dP @ k[:, None] + np.einsum("nlm,cmr->nclr", P, Ek)
        dgk = np.swapaxes(dP, -1, -2) @ h[:, None] + np.einsum("nlm,cmr->nclr", PT, Eh)
        hess = np.concatenate([dgh, dgk], axis=-1).reshape(N, n, n)
        hess = 0.5 * (hess + np.swapaxes(hess, -1, -2))
    return LossDerivatives(value=value, grad=grad, hess=hess)


def _untied_derivatives(
    g: np.ndarray, target: np.ndarray, problem: Problem, hessian: bool, general: bool | None
) -> LossDerivatives:
    if general or (general is None and g.shape[-2] != 2):
        return _untied_general_derivatives(g, target, problem, hessian)
    return _untied_pair_derivatives(g, target, problem, hessian)
