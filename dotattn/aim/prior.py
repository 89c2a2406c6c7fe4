"""Prior channel of the attention-indexed model: extensive-rank matrix denoising by free probability.

The teacher is S = W Wᵀ/√(r d), W ∈ ℝ^{d×r} i.i.d. N(0, 1), ρ = r/d. Its spectrum tends to
law(S) = √ρ · MP(1/ρ) (Marchenko–Pastur of aspect d/r and mean 1, scaled by √ρ; an atom 1 − ρ at 0
when ρ < 1). The observation is Y = S + √Δ Z with Z a GOE matrix (off-diagonal variance 1/d,
diagonal 2/d, semicircle on [−2, 2]); μ_Δ = law(S) ⊞ semicircle(Δ) is the spectrum of Y.

Stieltjes transform g(z) = ∫ μ_Δ(x)/(z − x) dx solves the cubic (docs/aim.md, section 2)

    (Δ/√ρ) g³ − (z/√ρ + Δ) g² + (z + 1/√ρ − √ρ) g − 1 = 0,

on the physical branch; on the real axis we return the x − i0⁺ limit (Im g = π μ_Δ ≥ 0). Inside the
support (cubic discriminant < 0) the physical root is the complex one with Im g > 0; outside it is
the real root on a decreasing branch of the inverse x(g) = 1/g + √ρ/(1 − g/√ρ) + Δ g (x'(g) < 0,
Biane's criterion). The MMSE is MMSE_S(Δ) = Δ − (4π²/3) Δ² ∫ μ_Δ³ (derived in docs/aim.md), the
integral taken bulk by bulk with x = centre + half-width · sin θ and Gauss–Legendre panels in θ.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.polynomial import Polynomial

from dotattn.core.validation import check_number

__all__ = [
    "prior_second_moment",
    "prior_mean",
    "stieltjes",
    "density",
    "support",
    "integrate_bulks",
    "free_fisher",
    "mmse_prior",
    "rie_eigenvalues",
    "rie_denoise",
    "rie_divergence",
    "sample_teacher",
    "sample_goe",
    "log_energy",
    "mutual_information",
    "DEFAULT_NODES",
    "DEFAULT_PANELS",
]

DEFAULT_NODES = 48
"""Gauss–Legendre nodes per panel in θ (the convergence in nodes is shown in docs/aim.md and tested)."""
DEFAULT_PANELS = 6
"""Panels per bulk in θ, graded geometrically towards both edges (narrow peaks near an edge, e.g.
ρ = 1 where the density of S diverges like x^(-1/2) at 0, are resolved without more nodes)."""


def prior_second_moment(rho: float) -> float:
    """Q0 = lim (1/d) Tr S² = 1 + ρ."""
    return 1.0 + float(rho)


def prior_mean(rho: float) -> float:
    """Mean eigenvalue of S, lim (1/d) Tr S = √ρ."""
    return math.sqrt(float(rho))


def _coefficients(z: np.ndarray, delta: float, rho: float):
    sr = math.sqrt(rho)
    a = np.full_like(z, delta / sr)
    b = -(z / sr + delta)
    c = z + 1.0 / sr - sr
    return a, b, c, -np.ones_like(z)


@lru_cache(maxsize=4096)
def _discriminant_poly(delta: float, rho: float) -> Polynomial:
    """Discriminant of the cubic in g as a polynomial in x (real x with disc < 0 lie in the support)."""
    sr = math.sqrt(rho)
    a = Polynomial([delta / sr])
    b = Polynomial([-delta, -1.0 / sr])
    c = Polynomial([1.0 / sr - sr, 1.0])
    d = Polynomial([-1.0])
    return 18 * a * b * c * d - 4 * b**3 * d + b**2 * c**2 - 4 * a * c**3 - 27 * a**2 * d**2


def _roots(z: np.ndarray, delta: float, rho: float) -> np.ndarray:
    """The three roots of the cubic at each z (shape z.shape + (3,)), polished by Newton steps."""
    a, b, c, d = _coefficients(z.astype(complex), delta, rho)
    n = z.size
    comp = np.zeros((n, 3, 3), dtype=complex)
    comp[:, 0, :] = -np.stack([b.ravel() / a.ravel(), c.ravel() / a.ravel(), d.ravel() / a.ravel()], axis=1)
    comp[:, 1, 0] = 1.0
    comp[:, 2, 1] = 1.0
    r = np.linalg.eigvals(comp).reshape(z.shape + (3,))
    A, B, C, D = (v[..., None] for v in (a, b, c, d))
    for _ in range(2):
        p = ((A * r + B) * r + C) * r + D
        dp = (3 * A * r + 2 * B) * r + C
        step = np.where(np.abs(dp) > 1e-300, p / np.where(dp == 0, 1, dp), 0)
        r = r - step
    return r


def stieltjes(z, delta: float, rho: float) -> np.ndarray:
    """g(z) = ∫ μ_Δ(x)/(z − x) dx on the physical branch, vectorised (complex array of z's shape).

    Real z: the x − i0⁺ limit (Im g = π μ_Δ(x) ≥ 0). Complex z: g(z̄) = conj g(z); for Im z < 0
    the root with the largest Im g (> 0). ``delta`` > 0 is the noise variance, ``rho`` > 0 = r/d.
    """
    z = np.asarray(z)
    real_input = not np.iscomplexobj(z) or np.all(np.imag(z) == 0)
    if real_input:
        x = np.real(z).astype(float)
        r = _roots(x, delta, rho)
        inside = _discriminant_poly(float(delta), float(rho))(x) < 0
        # inside: the complex root with Im > 0
        g_in = (
            r[..., np.argmax(r.imag, axis=-1)]
            if False
            else np.take_along_axis(r, np.argmax(r.imag, axis=-1)[..., None], axis=-1)[..., 0]
        )
        # outside: the real root with x'(g) < 0 (the most negative x'(g))
        gr = r.real
        sr = math.sqrt(rho)
        with np.errstate(divide="ignore", invalid="ignore"):
            xp = -1.0 / gr**2 + 1.0 / (1.0 - gr / sr) ** 2 + delta
        xp = np.where(np.isfinite(xp), xp, np.inf)
        g_out = np.take_along_axis(gr, np.argmin(xp, axis=-1)[..., None], axis=-1)[..., 0]
        return np.where(inside, g_in.real + 1j * np.abs(g_in.imag), g_out + 0j)
    zc = np.asarray(z, dtype=complex)
    upper = zc.imag > 0
    w = np.where(upper, np.conj(zc), zc)  # Im w <= 0: the physical g has Im g >= 0
    r = _roots(w, delta, rho)
    g = np.take_along_axis(r, np.argmax(r.imag, axis=-1)[..., None], axis=-1)[..., 0]
    return np.where(upper, np.conj(g), g)


def density(x, delta: float, rho: float) -> np.ndarray:
    """μ_Δ(x) = Im g(x − i0⁺)/π (float array of x's shape; 0 outside the support)."""
    x = np.asarray(x, dtype=float)
    mu = stieltjes(x, delta, rho).imag / math.pi
    return np.where(_discriminant_poly(float(delta), float(rho))(x) < 0, np.maximum(mu, 0.0), 0.0)


@lru_cache(maxsize=4096)
def _support_cached(delta: float, rho: float) -> tuple[tuple[float, float], ...]:
    poly = _discriminant_poly(delta, rho)
    roots = poly.roots()
    scale = 1.0 + max(1.0, math.sqrt(rho)) + math.sqrt(delta)
    real = np.sort(roots[np.abs(roots.imag) <= 1e-7 * scale].real)
    # polish each edge by Newton steps on the discriminant
    dpoly = poly.deriv()
    for _ in range(3):
        dv = dpoly(real)
        real = real - np.where(dv != 0, poly(real) / np.where(dv == 0, 1, dv), 0)
    real = np.sort(real)
    bulks: list[tuple[float, float]] = []
    for lo, hi in zip(real[:-1], real[1:], strict=True):
        if hi > lo and poly(0.5 * (lo + hi)) < 0:
            if bulks and abs(bulks[-1][1] - lo) <= 1e-12 * scale:  # a double root inside one bulk
                bulks[-1] = (bulks[-1][0], float(hi))
            else:
                bulks.append((float(lo), float(hi)))
    if not bulks:
        raise ArithmeticError(f"no bulk found for delta={delta!r}, rho={rho!r}")
    return tuple(bulks)


def support(delta: float, rho: float) -> list[tuple[float, float]]:
    """The bulks [(a, b), ...] of μ_Δ, sorted: edges are the real roots of the cubic's discriminant."""
    return list(_support_cached(float(delta), float(rho)))


@lru_cache(maxsize=4096)
def _pieces(delta: float, rho: float) -> tuple[tuple[float, float], ...]:
    """The bulks, each split at the interior local maxima of the discriminant (a neck of the density
    where two bulks have just merged; the sine map then clusters nodes on both sides of it)."""
    poly = _discriminant_poly(delta, rho)
    d1, d2 = poly.deriv(), poly.deriv(2)
    crit = d1.roots()
    crit = np.sort(crit[np.abs(crit.imag) < 1e-9].real)
    out: list[tuple[float, float]] = []
    for lo, hi in _support_cached(delta, rho):
        cuts = [c for c in crit if lo < c < hi and d2(c) < 0]
        edges = [lo, *cuts, hi]
        out.extend(zip(edges[:-1], edges[1:], strict=True))
    return tuple((float(a), float(b)) for a, b in out)


@lru_cache(maxsize=64)
def _theta_rule(nodes: int, panels: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes θ ∈ (−π/2, π/2) and weights: ``panels`` Gauss–Legendre panels graded towards the ends."""
    half = panels // 2
    # breakpoints in u = 2θ/π ∈ [−1, 1]: 0, ±(1 − 2^-k), ±1
    right = [0.0] + [1.0 - 2.0 ** (-k) for k in range(1, half)] + [1.0]
    pts = np.unique(np.concatenate([-np.array(right), np.array(right)]))
    t, w = np.polynomial.legendre.leggauss(nodes)
    us, ws = [], []
    for lo, hi in zip(pts[:-1], pts[1:], strict=True):
        us.append(0.5 * (hi - lo) * t + 0.5 * (hi + lo))
        ws.append(0.5 * (hi - lo) * w)
    u, wu = np.concatenate(us), np.concatenate(ws)
    return 0.5 * math.pi * u, 0.5 * math.pi * wu


def integrate_bulks(
    f, delta: float, rho: float, nodes: int = DEFAULT_NODES, panels: int = DEFAULT_PANELS
) -> float | complex:
    """∫ f(x, μ_Δ(x)) dx over the support, bulk by bulk (each split at a neck, :func:`_pieces`) with
    x = c + h sin θ (edge-absorbing); complex if f is."""
    theta, wt = _theta_rule(int(nodes), int(panels))
    total = 0.0 + 0.0j
    for lo, hi in _pieces(float(delta), float(rho)):
        c, h = 0.5 * (lo + hi), 0.5 * (hi - lo)
        x = c + h * np.sin(theta)
        mu = stieltjes(x, delta, rho).imag / math.pi
        mu = np.maximum(mu, 0.0)
        total += complex(np.sum(wt * h * np.cos(theta) * f(x, mu)))
    return total.real if total.imag == 0 else total


def free_fisher(delta: float, rho: float, nodes: int = DEFAULT_NODES, panels: int = DEFAULT_PANELS) -> float:
    """Free Fisher information Φ*(μ_Δ) = (4π²/3) ∫ μ_Δ³ dx."""
    integral = integrate_bulks(lambda x, mu: mu**3, delta, rho, nodes, panels)
    if isinstance(integral, complex):  # cannot happen: the integrand is real
        raise ArithmeticError(f"free Fisher information: complex integral {integral!r} of a real integrand")
    return 4.0 * math.pi**2 / 3.0 * integral


def mmse_prior(delta: float, rho: float, nodes: int = DEFAULT_NODES, panels: int = DEFAULT_PANELS) -> float:
    """MMSE_S(Δ) = (1/d) E‖E[S|Y] − S‖²_F = Δ (1 − Δ Φ*(μ_Δ)), for Y = S + √Δ Z (Z GOE).

    Absolute error ≈ Δ² × (quadrature error of Φ*); the factor 1 − ΔΦ* is in [0, 1] (free
    Cramér–Rao, Φ* ≥ 1/(1 + Δ)) and is clipped there against rounding.
    """
    delta = check_number("delta (noise variance)", delta, 0.0, False, None, ">= 0")
    rho = check_number("rho", rho, 0.0, True, None, "> 0")
    if delta == 0.0:  # noiseless observation: S is recovered exactly
        return 0.0
    phi = free_fisher(delta, rho, nodes, panels)
    return delta * min(1.0, max(0.0, 1.0 - delta * phi))


def rie_eigenvalues(lam, delta: float, rho: float) -> np.ndarray:
    """The RIE's eigenvalue map ξ(λ) = λ − 2Δ Re g(λ) (the Bayes-optimal shrinkage, d → ∞)."""
    lam = np.asarray(lam, dtype=float)
    return lam - 2.0 * delta * stieltjes(lam, delta, rho).real


def rie_denoise(Y: np.ndarray, delta: float, rho: float) -> np.ndarray:
    """Bayes-optimal rotationally invariant estimate of S from the symmetric (d, d) observation Y:
    the eigenvectors of Y, eigenvalues mapped by :func:`rie_eigenvalues`."""
    Y = np.asarray(Y, dtype=float)
    lam, U = np.linalg.eigh(0.5 * (Y + Y.T))
    return (U * rie_eigenvalues(lam, delta, rho)) @ U.T


def rie_divergence(delta: float, rho: float, **kw) -> float:
    """Onsager coefficient of the RIE: its divergence per degree of freedom, d → ∞.

    Normalisation: (1/N) Σ_k ∂Ŝ_k/∂Y_k over a Frobenius-orthonormal basis of the symmetric matrices
    (N = d(d+1)/2), which equals MMSE_S(Δ)/Δ (Gaussian-channel identity Cov(S|Y) = σ² ∂E[S|Y]/∂Y
    with σ² = 2Δ/d per basis direction; docs/aim.md). In matrix terms
    (2/d²)[Σ_i ξ'(λ_i) + Σ_{i<j} (ξ_i − ξ_j)/(λ_i − λ_j)] → MMSE_S(Δ)/Δ.
    """
    return mmse_prior(delta, rho, **kw) / float(delta)


def sample_teacher(d: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """S = W Wᵀ/√(r d) with W ∈ ℝ^{d×r} i.i.d. N(0, 1), r = round(ρ d) (at least 1)."""
    r = max(1, int(round(rho * d)))
    W = rng.standard_normal((d, r))
    return W @ W.T / math.sqrt(r * d)


def sample_goe(d: int, rng: np.random.Generator) -> np.ndarray:
    """GOE matrix with off-diagonal variance 1/d and diagonal variance 2/d (semicircle on [−2, 2])."""
    A = rng.standard_normal((d, d))
    return (A + A.T) / math.sqrt(2.0 * d)


# ----------------------------------------------------------------------------------------------
# free entropy of the prior channel (docs/aim_algorithms.md, section 9)
# ----------------------------------------------------------------------------------------------
def log_energy(
    delta: float, rho: float, nodes: int = DEFAULT_NODES, panels: int = DEFAULT_PANELS, sub: int = 8
) -> float:
    """Σ(μ_Δ) = ∬ log|x − y| μ_Δ(x) μ_Δ(y) dx dy, computed without the log singularity.

    With the logarithmic potential U(x) = ∫ log|x − y| μ_Δ(y) dy, U'(x) = Re g(x) (the principal value)
    and Σ = ∫ μ_Δ U. U is anchored at L = (right edge) + 1 + √Δ, where U(L) = ∫ log(L − y) μ_Δ is a
    smooth integral, and carried leftwards by integrating Re g: through each gap with a Gauss–Legendre
    rule in the sine map, through each bulk piece between consecutive quadrature nodes (``sub`` nodes
    per sub-interval, in θ). Σ of the semicircle of variance v is ½ log v − ¼ (a known answer)."""
    delta, rho = float(delta), float(rho)
    pieces = list(_pieces(delta, rho))
    right = pieces[-1][1]
    L = right + 1.0 + math.sqrt(delta)
    U = integrate_bulks(lambda x, mu: np.log(L - x) * mu, delta, rho, nodes, panels)
    theta, wt = _theta_rule(int(nodes), int(panels))
    tg, wg = np.polynomial.legendre.leggauss(int(sub))
    t64, w64 = np.polynomial.legendre.leggauss(64)

    def re_g(x):
        return stieltjes(x.ravel(), delta, rho).real.reshape(x.shape)

    def gap(lo, hi):  # ∫_lo^hi Re g, x = c + h sin θ (square-root behaviour at both ends)
        c, h = 0.5 * (lo + hi), 0.5 * (hi - lo)
        th = 0.5 * math.pi * t64
        return float(np.sum(0.5 * math.pi * w64 * h * np.cos(th) * re_g(c + h * np.sin(th))))

    total = 0.0
    hi_prev = L
    for lo, hi in reversed(pieces):
        if hi < hi_prev:
            U -= gap(hi, hi_prev)  # U(hi) = U(hi_prev) − ∫_hi^hi_prev Re g
        c, h = 0.5 * (lo + hi), 0.5 * (hi - lo)
        pts = np.concatenate([[-0.5 * math.pi], theta, [0.5 * math.pi]])
        a, b = pts[:-1], pts[1:]
        ths = 0.5 * (b - a)[:, None] * tg[None] + 0.5 * (b + a)[:, None]
        seg = np.sum(0.5 * (b - a)[:, None] * wg[None] * h * np.cos(ths) * re_g(c + h * np.sin(ths)), axis=1)
        tail = np.cumsum(seg[::-1])[::-1]  # tail[k] = ∫ from pts[k] to π/2 (in x: from node k − 1 to hi)
        U_nodes = U - tail[1:]
        mu = np.maximum(stieltjes(c + h * np.sin(theta), delta, rho).imag / math.pi, 0.0)
        total += float(np.sum(wt * h * np.cos(theta) * mu * U_nodes))
        U -= float(tail[0])
        hi_prev = lo
    return total


def mutual_information(q_hat: float, rho: float, **kw) -> float:
    """I(q̂) = lim (1/d²) I(S; Y) for Y = S + √Δ Z, Δ = 1/q̂ (Z GOE): ½ Σ(μ_Δ) − ¼ log Δ + ⅛.

    (The entropy of a rotationally invariant matrix is ½ Σ of its spectrum per d² plus a constant that
    cancels against the noise's, Σ(semicircle of variance Δ) = ½ log Δ − ¼.) I-MMSE: dI/dq̂ = MMSE_S(1/q̂)/4,
    checked by finite differences in tests/test_aim_free_entropy.py."""
    delta = 1.0 / float(q_hat)
    return 0.5 * log_energy(delta, rho, **kw) - 0.25 * math.log(delta) + 0.125
