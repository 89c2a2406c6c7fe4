"""Output channels of the attention-indexed model: output functions and the state-evolution q̂.

Per sample the attention index is a symmetric T × T matrix h; it is flattened to its upper
triangle, K = T(T+1)/2 entries in the order of ``np.triu_indices(T)`` (row-major: (0,0), (0,1), …,
(0,T−1), (1,1), …). Given the estimate, h = ω + noise with noise covariance V·diag(D), D_k = 2 on
the diagonal entries (h_aa) and 1 off it (Var h_aa = 2 Q0, Var h_ab = Q0 for the teacher).

* ``output_function(channel, y, omega, V, T)`` -> (g_out, dg_out): g_out = ∂_ω log Z_out, shape
  (n, K), and its Jacobian ∂_ω g_out, shape (n, K, K), per sample; ``omega`` has shape (n, K),
  ``y`` shape (n, T, T) (the model's outputs: softmax rows, or one-hot hardmax rows), V > 0 a scalar.
* ``log_z_out(channel, y, omega, V, T)``: log Z_out (n,), up to a y-dependent constant for softmax
  (a noiseless channel: Z_out is a density in the observed row differences).
* ``q_hat(channel, alpha, q, rho, T)``: q̂ = 2α E[g_outᵀ diag(D) g_out] with ω ~ N(0, q diag(D)),
  V = Q0 − q (docs/aim.md, section 3); softmax: q̂ = ᾱ/(Q0 − q), ᾱ = α(T² + T − 2).

Hardmax is implemented for T = 2 (Z_out is a bivariate normal orthant probability, computed with
relative accuracy in log space); for T ≥ 3 it is a T(T−1)-dimensional orthant probability and is
not implemented (ParameterError).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import log_ndtr, ndtr

from dotattn.aim.prior import prior_second_moment
from dotattn.core.validation import ParameterError, check_alpha, check_int, check_number

__all__ = [
    "CHANNELS",
    "n_entries",
    "flat_index",
    "noise_weights",
    "flatten",
    "unflatten",
    "alpha_bar",
    "softmax_rows",
    "output_function",
    "log_z_out",
    "log_bvn",
    "bvn_partials",
    "q_hat",
    "hardmax_fisher_at_zero",
    "psi_out",
    "HARDMAX_NODES",
]

CHANNELS = ("softmax", "hardmax")
HARDMAX_NODES = 48
"""Nodes per dimension of the tensor rule for the hardmax q̂ (against 64, 96 and 192 nodes the change is below
1e-8 for q/V in [1e-6, 1e3], measured in docs/aim.md; about 40 ms per q̂)."""
_LOG_2PI = math.log(2.0 * math.pi)
_SE_BVN_NODES = 24  # Gauss–Legendre nodes of log Φ₂ inside the q̂ quadrature (q̂ changes < 2e-13 vs 32 or 64)


def n_entries(T: int) -> int:
    """K = T(T+1)/2, the free entries of a symmetric T × T index."""
    return T * (T + 1) // 2


@lru_cache(maxsize=64)
def flat_index(T: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the flattened entries: ``np.triu_indices(T)``."""
    i, j = np.triu_indices(T)
    i.setflags(write=False)
    j.setflags(write=False)
    return i, j


def noise_weights(T: int) -> np.ndarray:
    """D (K,): 2 for diagonal entries, 1 for off-diagonal ones (variance of h_k in units of V)."""
    i, j = flat_index(T)
    return np.where(i == j, 2.0, 1.0)


def flatten(h: np.ndarray) -> np.ndarray:
    """(…, T, T) symmetric -> (…, K) upper triangle."""
    T = h.shape[-1]
    i, j = flat_index(T)
    return h[..., i, j]


def unflatten(v: np.ndarray, T: int) -> np.ndarray:
    """(…, K) -> (…, T, T) symmetric."""
    i, j = flat_index(T)
    out = np.zeros(v.shape[:-1] + (T, T), dtype=v.dtype)
    out[..., i, j] = v
    out[..., j, i] = v
    return out


def alpha_bar(alpha: float, T: int) -> float:
    """ᾱ = α (T² + T − 2) = 2α (K − 1): twice the noiseless measurements per sample, per d²."""
    return float(alpha) * (T * T + T - 2)


def softmax_rows(h: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """Row-wise softmax_β of (…, T, T)."""
    z = beta * h
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _check(channel: str, T: int) -> int:
    """T as an integer >= 2 for ``channel`` (ParameterError, one line, otherwise)."""
    if channel not in CHANNELS:
        raise ParameterError(f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
    T = check_int("T (tokens)", T, 2)
    if channel == "hardmax" and T != 2:
        raise ParameterError(f"T (tokens) must be 2 for the hardmax channel (implemented for T = 2 only), got {T}")
    return T


# ----------------------------------------------------------------------------------------------
# softmax: noiseless observation of h modulo the all-ones direction
# ----------------------------------------------------------------------------------------------
def _softmax_h0(y: np.ndarray, beta: float) -> np.ndarray:
    """A symmetric h consistent with y = softmax_β(h) (flattened, (n, K)); h is fixed up to c·1."""
    ell = np.log(np.clip(y, 1e-300, None)) / beta  # ell_ab = h_ab − m_a
    # symmetry: m_a − m_b = ell_ba − ell_ab; least squares with Σ m = 0
    m = np.mean(np.swapaxes(ell, -1, -2) - ell, axis=-1)
    h = ell + m[..., :, None]
    h = 0.5 * (h + np.swapaxes(h, -1, -2))
    return flatten(h)


def _softmax(y, omega, V, T, beta):
    Dinv = 1.0 / noise_weights(T)
    h0 = _softmax_h0(y, beta)
    diff = h0 - omega
    t = -(diff @ Dinv) / Dinv.sum()  # argmin_t (diff + t 1)ᵀ D⁻¹ (diff + t 1)
    res = diff + t[:, None]
    g = Dinv * res / V
    K = len(Dinv)
    jac = (np.outer(Dinv, Dinv) / Dinv.sum() - np.diag(Dinv)) / V
    dg = np.broadcast_to(jac, (omega.shape[0], K, K)).copy()
    logz = -0.5 * np.sum(res * Dinv * res, axis=-1) / V - 0.5 * (K - 1) * math.log(2 * math.pi * V)
    return g, dg, logz


# ----------------------------------------------------------------------------------------------
# bivariate normal orthant probability in log space
# ----------------------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _gl(n: int) -> tuple[np.ndarray, np.ndarray]:
    t, w = np.polynomial.legendre.leggauss(n)
    return t, np.log(w)


def _log_bvn_lower(m: np.ndarray, M: np.ndarray, r: float, nodes: int = 64) -> np.ndarray:
    """log ∫_{−∞}^{m} φ(x) Φ((M − r x)/s) dx for m ≤ 0 (s = √(1 − r²)): the integrand is log-concave,
    integrated with Gauss–Legendre nodes on x = m − t, t ∈ [0, t_max] (tail beyond ≤ e^-40)."""
    s = math.sqrt(1.0 - r * r)
    w = (M - r * m) / s
    lam = np.exp(-0.5 * w * w - 0.5 * _LOG_2PI - log_ndtr(w))  # inverse Mills ratio φ(w)/Φ(w)
    c = -m - (r / s) * lam  # decay rate of log f at x = m (x decreasing)
    tmax = np.where(c > 0, np.minimum(45.0 / np.maximum(c, 1e-300), 12.0), np.abs(c) + 12.0)
    gt, lgw = _gl(nodes)
    t = 0.5 * tmax[..., None] * (gt + 1.0)
    x = m[..., None] - t
    logf = -0.5 * x * x + log_ndtr((M[..., None] - r * x) / s) + lgw
    top = logf.max(axis=-1)
    return top + np.log(np.exp(logf - top[..., None]).sum(axis=-1)) + np.log(0.5 * tmax) - 0.5 * _LOG_2PI


def log_bvn(h, k, r: float, nodes: int = 64) -> np.ndarray:
    """log Φ₂(h, k; r) = log P(X ≤ h, Y ≤ k), (X, Y) standard normal with correlation r, |r| < 1;
    relative accuracy in both tails (vectorised over h, k; ``nodes`` Gauss–Legendre nodes)."""
    h, k = np.broadcast_arrays(np.asarray(h, dtype=float), np.asarray(k, dtype=float))
    m, M = np.minimum(h, k), np.maximum(h, k)
    lower = m <= 0
    # m > 0: Φ₂ = 1 − Φ(−h) − Φ(−k) + Φ₂(−h, −k), the last with min(−h, −k) = −M ≤ 0
    a = np.where(lower, m, -M)
    b = np.where(lower, M, -m)
    la = _log_bvn_lower(a, b, r, nodes)
    upper = 1.0 - ndtr(-h) - ndtr(-k) + np.exp(la)
    return np.where(lower, la, np.log(np.where(lower, 1.0, upper)))


def bvn_partials(h, k, r: float, nodes: int = 64):
    """log Φ₂ and the first and second derivatives of log Φ₂(h, k; r) in (h, k):
    returns (logZ, gh, gk, Hhh, Hhk, Hkk)."""
    s = math.sqrt(1.0 - r * r)
    logz = log_bvn(h, k, r, nodes)
    log_phi2 = -(h * h - 2 * r * h * k + k * k) / (2 * s * s) - _LOG_2PI - math.log(s)
    gh = np.exp(-0.5 * h * h - 0.5 * _LOG_2PI + log_ndtr((k - r * h) / s) - logz)
    gk = np.exp(-0.5 * k * k - 0.5 * _LOG_2PI + log_ndtr((h - r * k) / s) - logz)
    p = np.exp(log_phi2 - logz)
    Hhh = -h * gh - r * p - gh * gh
    Hkk = -k * gk - r * p - gk * gk
    Hhk = p - gh * gk
    return logz, gh, gk, Hhh, Hhk, Hkk


_B = np.array([[1.0, -1.0, 0.0], [0.0, -1.0, 1.0]])  # (h00 − h01, h11 − h01) in triu order (00, 01, 11)


def _hardmax_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s1 = +1 if row 0 picks token 0 (h00 > h01), s2 = +1 if row 1 picks token 1 (h11 > h10)."""
    arg = np.argmax(y, axis=-1)
    return np.where(arg[:, 0] == 0, 1.0, -1.0), np.where(arg[:, 1] == 1, 1.0, -1.0)


def _hardmax(y, omega, V, T):
    s1, s2 = _hardmax_labels(y)
    sc = math.sqrt(3.0 * V)
    a = omega @ _B.T
    k1, k2 = s1 * a[:, 0] / sc, s2 * a[:, 1] / sc
    n = omega.shape[0]
    g = np.empty((n, 3))
    dg = np.empty((n, 3, 3))
    logz = np.empty(n)
    for sign in (1.0, -1.0):  # correlation s1 s2/3
        sel = s1 * s2 == sign
        if not np.any(sel):
            continue
        lz, gh, gk, Hhh, Hhk, Hkk = bvn_partials(k1[sel], k2[sel], sign / 3.0)
        J = np.stack([s1[sel], s2[sel]], axis=1)[:, :, None] * _B[None] / sc  # (m, 2, 3)
        gk_ = np.stack([gh, gk], axis=1)
        H = np.stack([np.stack([Hhh, Hhk], -1), np.stack([Hhk, Hkk], -1)], -2)
        g[sel] = np.einsum("mij,mi->mj", J, gk_)
        dg[sel] = np.einsum("mia,mij,mjb->mab", J, H, J)
        logz[sel] = lz
    return g, dg, logz


def _prepare(channel, y, omega, V, T):
    T = _check(channel, T)
    omega = np.atleast_2d(np.asarray(omega, dtype=float))
    y = np.asarray(y, dtype=float).reshape(omega.shape[0], T, T)
    if omega.shape[1] != n_entries(T):
        raise ParameterError(f"omega must have shape (n, {n_entries(T)}) for T = {T}, got {omega.shape}")
    if not V > 0:
        raise ParameterError(f"V must be > 0, got {V}")
    return y, omega


def output_function(channel: str, y, omega, V: float, T: int, beta: float = 1.0):
    """(g_out (n, K), dg_out (n, K, K)) = (∂_ω log Z_out, ∂²_ω log Z_out) per sample.

    ``y`` (n, T, T): outputs (softmax_β rows, or one-hot hardmax rows); ``omega`` (n, K) flattened
    as :func:`flat_index`; ``V`` > 0: noise covariance V·diag(D). ``beta`` is used by softmax only
    (to read h back from y; the results do not depend on it for exact y)."""
    y, omega = _prepare(channel, y, omega, V, T)
    g, dg, _ = _softmax(y, omega, V, T, beta) if channel == "softmax" else _hardmax(y, omega, V, T)
    return g, dg


def log_z_out(channel: str, y, omega, V: float, T: int, beta: float = 1.0) -> np.ndarray:
    """log Z_out(y | ω, V) per sample (n,). Hardmax: log P(hardmax(h) = y); softmax: the log density
    of the observed h modulo the all-ones direction (up to a y-dependent constant)."""
    y, omega = _prepare(channel, y, omega, V, T)
    return (_softmax(y, omega, V, T, beta) if channel == "softmax" else _hardmax(y, omega, V, T))[2]


# ----------------------------------------------------------------------------------------------
# state evolution: q̂
# ----------------------------------------------------------------------------------------------
@lru_cache(maxsize=16)
def _sinh_rule(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes u ∈ [−1, 1] (weights sum 2), used with κ = L sinh(u t_max)."""
    u = np.linspace(-1.0, 1.0, nodes)
    w = np.full(nodes, 2.0 / (nodes - 1))
    w[[0, -1]] *= 0.5
    return u, w


def _kappa_rule(ratio: float, nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(κ⁰_1, κ⁰_2, weights) of the tensor rule for E over κ⁰ ~ N(0, ratio·[[1, 1/3], [1/3, 1]]): the
    trapezoid rule in t with κ⁰ = L sinh(t), L = min(1, σ), σ = √ratio, |κ⁰| ≤ 10 σ (flattened)."""
    sigma = math.sqrt(ratio)
    L = min(1.0, sigma)
    tmax = math.asinh(10.0 * sigma / L)
    u, w = _sinh_rule(int(nodes))
    t = u * tmax
    kap = L * np.sinh(t)
    jac = L * np.cosh(t) * tmax * w
    K1, K2 = np.meshgrid(kap, kap, indexing="ij")
    r0 = 1.0 / 3.0
    quad = (K1 * K1 - 2 * r0 * K1 * K2 + K2 * K2) / (ratio * (1 - r0 * r0))
    dens = np.exp(-0.5 * quad) / (2 * math.pi * ratio * math.sqrt(1 - r0 * r0))
    return K1.ravel(), K2.ravel(), (np.outer(jac, jac) * dens).ravel()


def _hardmax_fisher(ratio: float, nodes: int, derivative: str = "gradient") -> float:
    """E_ω Σ_y Z g_κᵀ diag(s) C diag(s) g_κ / 3 (= V E[g_ωᵀ D g_ω]) for T = 2 at q/V = ratio.

    ``derivative="published"`` replaces both partials of log Φ₂ by φ₂/Φ₂, the expression of the public
    script SE_hardmax.py (not the gradient; kept only to measure its effect, docs/aim.md section 5).

    κ⁰ = (ω00 − ω01, ω11 − ω01)/√(3V) is N(0, ratio·[[1, 1/3], [1/3, 1]]); the tensor rule is the
    trapezoid rule in t with κ⁰ = L sinh(t), L = min(1, σ), σ = √ratio, |κ⁰| ≤ 10 σ."""
    if math.sqrt(ratio) < 1e-8:
        return hardmax_fisher_at_zero()
    K1, K2, W = _kappa_rule(ratio, nodes)
    total = 0.0
    # labels (−,−) and (−,+) mirror (+,+) and (+,−) (κ⁰ -> −κ⁰, a symmetric grid and density)
    for s1, s2 in ((1, 1), (1, -1)):
        lz, gh, gk, *_ = bvn_partials(s1 * K1, s2 * K2, s1 * s2 / 3.0, nodes=_SE_BVN_NODES)
        if derivative == "published":
            r = s1 * s2 / 3.0
            log_phi2 = -(K1 * K1 - 2 * r * s1 * s2 * K1 * K2 + K2 * K2) / (2 * (1 - r * r)) - math.log(
                2 * math.pi * math.sqrt(1 - r * r)
            )
            gh = gk = np.exp(log_phi2 - lz)
        f = (3 * gh * gh + 3 * gk * gk + 2 * s1 * s2 * gh * gk) / 3.0
        total += 2.0 * float(np.sum(W * np.exp(lz) * f))
    return total


def hardmax_fisher_at_zero() -> float:
    """V E[g_ωᵀ D g_ω] at ω = 0 (q = 0), T = 2, in closed form: Σ_s (1/(8π)) (6 + 2 s1 s2)/(3 Z_s),
    Z_s = 1/4 + asin(s1 s2/3)/(2π) (docs/aim.md, section 5)."""
    total = 0.0
    for c in (1.0, -1.0):
        Z = 0.25 + math.asin(c / 3.0) / (2 * math.pi)
        total += 2 * (6 + 2 * c) / (3 * Z) / (8 * math.pi)
    return total


def q_hat(
    channel: str, alpha: float, q: float, rho: float, T: int, nodes: int = HARDMAX_NODES, derivative: str = "gradient"
) -> float:
    """State-evolution update q̂ = 2α E[g_outᵀ diag(D) g_out], ω ~ N(0, q D), V = Q0 − q.

    softmax: ᾱ/(Q0 − q) exactly (independent of β); hardmax (T = 2): deterministic quadrature
    (``derivative="published"``: the public script's φ₂/Φ₂ in place of the gradient, for comparison)."""
    if derivative not in ("gradient", "published"):
        raise ParameterError(f"derivative must be 'gradient' or 'published', got {derivative!r}")
    T = _check(channel, T)
    alpha = check_alpha(alpha)
    rho = check_number("rho", rho, 0.0, True, None, "> 0")
    q = check_number("q", q, None, False)
    V = prior_second_moment(rho) - q
    if not V > 0:
        raise ParameterError(f"q must be < Q0 = 1 + rho = {prior_second_moment(rho):g}, got q = {q}")
    if channel == "softmax":
        return alpha_bar(alpha, T) / V
    return 2.0 * alpha * _hardmax_fisher(max(q, 0.0) / V, nodes, derivative) / V


# ----------------------------------------------------------------------------------------------
# free entropy of the output channel
# ----------------------------------------------------------------------------------------------
def _hardmax_entropy(ratio: float, nodes: int) -> float:
    """E_ω Σ_y Z log Z for T = 2 at q/V = ratio (the negative conditional entropy of the two labels),
    on the tensor rule of :func:`_hardmax_fisher`."""
    if math.sqrt(ratio) < 1e-8:
        total = 0.0
        for c in (1.0, -1.0):
            Z = 0.25 + math.asin(c / 3.0) / (2 * math.pi)
            total += 2 * Z * math.log(Z)
        return total
    K1, K2, W = _kappa_rule(ratio, nodes)
    total = 0.0
    for s1, s2 in ((1, 1), (1, -1)):  # (−,−), (−,+) mirror these
        lz = log_bvn(s1 * K1, s2 * K2, s1 * s2 / 3.0, nodes=_SE_BVN_NODES)
        total += 2.0 * float(np.sum(W * np.exp(lz) * lz))
    return total


def psi_out(channel: str, q: float, rho: float, T: int, nodes: int = HARDMAX_NODES) -> float:
    """Ψ_out(q) = E_{ω, y} log Z_out(y | ω, V), ω ~ N(0, q D), V = Q0 − q: the output part of the free
    entropy per sample; ∂Ψ_out/∂q = ½ E[g_outᵀ D g_out] = q̂/(4α) (checked by finite differences).

    softmax: −((K − 1)/2)(1 + log 2πV), the log density of the K − 1 revealed combinations with the
    y-dependent Jacobian dropped (a constant per sample, the same for every q; it shifts Φ by the same
    amount at every fixed point of one α); hardmax (T = 2): E Σ_y Z log Z ≤ 0 by quadrature."""
    _check(channel, T)
    V = prior_second_moment(rho) - q
    if not V > 0:
        raise ValueError(f"q must be < Q0 = 1 + rho, got q = {q}")
    if channel == "softmax":
        return -0.5 * (n_entries(T) - 1) * (1.0 + math.log(2.0 * math.pi * V))
    return _hardmax_entropy(max(q, 0.0) / V, int(nodes))
