"""Bayes-optimal state evolution of the attention-indexed model (L = 1): fixed points and thresholds.

The fixed point couples the prior channel (matrix denoising at Δ = 1/q̂, :mod:`dotattn.aim.prior`)
and the output channel (q̂ from the overlap q, :mod:`dotattn.aim.channels`):

    q = Q0 − MMSE_S(1/q̂),   q̂ = q̂_out(α, q),   MMSE = Q0 − q   (docs/aim.md, section 4).

Both channels are solved as one scalar equation with a bracketing root-finder (Brent), never by
damped iteration: softmax in u = log Δ, MMSE_S(e^u)/e^u = ᾱ (ᾱ = α(T² + T − 2)); hardmax in
u = log V (V = Q0 − q), e^u = MMSE_S(1/q̂(Q0 − e^u)), scanning u for every sign change first.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq

from dotattn.aim.channels import CHANNELS, HARDMAX_NODES, alpha_bar, hardmax_fisher_at_zero, q_hat
from dotattn.aim.prior import DEFAULT_NODES, mmse_prior, prior_second_moment
from dotattn.core.rows import read_float, read_int, read_text
from dotattn.core.status import CONVERGED, NOT_CONVERGED
from dotattn.core.validation import ParameterError, check_alpha, check_int, check_number

__all__ = [
    "SEPoint",
    "POINT_COLUMNS",
    "RHO_RANGE",
    "T_MAX",
    "check_inputs",
    "check_quadrature",
    "perfect_recovery_alpha_bar",
    "solve_point",
    "solve_curve",
    "thresholds",
    "DELTA_MIN",
]

RHO_RANGE = (1e-4, 1e4)
"""Accepted ρ = r/d. Below 1e-4 the teacher's spectrum is a narrow bulk at 1/√ρ ≥ 100 of mass ρ and
the quartic whose roots are the edges loses digits; above 1e4 the problem is the Wigner limit to
within 1e-6 (the MMSE's gap to Δ/(1 + Δ) is ~7e-5/ρ, measured) and √ρ ≫ 1 costs digits too."""
T_MAX = 64
"""Largest number of tokens (softmax only needs the count of revealed combinations)."""
DELTA_MIN = 1e-14
"""Smallest Δ the softmax root-finder explores; an MMSE below ᾱ·1e-14 is reported as not converged."""
_SCAN = 7  # hardmax: points of the scan in log V ∈ [log 1e-8, 0] before Brent (steps of 3.1 in log V)


def check_inputs(channel: str, rho: float, T: int, alphas) -> tuple[str, float, int, list[float]]:
    """Validate (ParameterError, one line naming the parameter and its allowed range)."""
    if channel not in CHANNELS:
        raise ParameterError(f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
    lo, hi = RHO_RANGE
    rho = check_number("rho", rho, lo, False, hi, f"in [{lo:g}, {hi:g}]")
    T = check_int("tokens", T, 2, T_MAX)
    if channel == "hardmax" and T != 2:
        raise ParameterError(f"tokens must be 2 for the hardmax channel (implemented for T = 2 only), got {T}")
    alphas = [check_alpha(a) for a in np.atleast_1d(alphas)]
    return channel, rho, T, alphas


@dataclass(frozen=True)
class SEPoint:
    """One state-evolution fixed point. ``mmse`` = Q0 − ``q``; ``delta`` = 1/``q_hat`` (0 at perfect
    recovery, q̂ = inf); ``residual``: |equation| at the root; ``uncertainty``: |change of the MMSE|
    with every quadrature refined (prior nodes ×2, hardmax nodes ×1.5); ``fixed_points``: roots found."""

    channel: str
    rho: float
    tokens: int
    alpha: float
    alpha_bar: float
    mmse: float
    q: float
    q_hat: float
    delta: float
    status: str
    regime: str
    iterations: int
    residual: float
    uncertainty: float
    fixed_points: int
    seconds: float

    def to_row(self) -> dict:
        return asdict(self)

    @classmethod
    def from_row(cls, row) -> SEPoint:
        return cls(
            channel=read_text(row["channel"]),
            rho=read_float(row["rho"]),
            tokens=read_int(row["tokens"]),
            alpha=read_float(row["alpha"]),
            alpha_bar=read_float(row["alpha_bar"]),
            mmse=read_float(row["mmse"]),
            q=read_float(row["q"]),
            q_hat=read_float(row["q_hat"]),
            delta=read_float(row["delta"]),
            status=read_text(row["status"]),
            regime=read_text(row["regime"]),
            iterations=read_int(row["iterations"]),
            residual=read_float(row["residual"]),
            uncertainty=read_float(row["uncertainty"]),
            fixed_points=read_int(row["fixed_points"]),
            seconds=read_float(row["seconds"]),
        )


POINT_COLUMNS = tuple(SEPoint.__dataclass_fields__)


def perfect_recovery_alpha_bar(rho: float) -> float:
    """lim_{Δ→0} MMSE_S(Δ)/Δ = degrees of freedom of S per d²/2: 2ρ − ρ² (ρ ≤ 1), 1 (ρ ≥ 1)."""
    return 2 * rho - rho * rho if rho < 1 else 1.0


def _softmax_root(ab: float, rho: float, nodes: int):
    """log Δ solving MMSE_S(Δ)/Δ = ᾱ (MMSE_S(Δ)/Δ decreases from the parameter count to 0)."""

    def f(u):
        d = math.exp(u)
        return math.log(max(mmse_prior(d, rho, nodes=nodes), 1e-300) / d) - math.log(ab)

    u_hi = math.log(2.0 / ab)  # MMSE_S ≤ 1 so the ratio is ≤ ab/2 there
    u_lo = u_hi - 2.0
    while f(u_lo) <= 0:
        u_lo -= 4.0
        if u_lo < math.log(DELTA_MIN):
            return None, 0, f(math.log(DELTA_MIN))
    u, res = brentq(f, u_lo, u_hi, xtol=1e-13, rtol=1e-15, full_output=True)
    return u, res.iterations, abs(f(u))


def _softmax_point(alpha, rho, T, nodes):
    ab = alpha_bar(alpha, T)
    Q0 = prior_second_moment(rho)
    if ab >= perfect_recovery_alpha_bar(rho):
        return dict(
            mmse=0.0,
            q=Q0,
            q_hat=math.inf,
            delta=0.0,
            status=CONVERGED,
            regime="perfect_recovery",
            iterations=0,
            residual=0.0,
            uncertainty=0.0,
            fixed_points=1,
        )
    u, it, resid = _softmax_root(ab, rho, nodes)
    if u is None:
        return dict(
            mmse=math.nan,
            q=math.nan,
            q_hat=math.nan,
            delta=math.nan,
            status=NOT_CONVERGED,
            regime="partial",
            iterations=it,
            residual=resid,
            uncertainty=math.nan,
            fixed_points=0,
        )
    delta = math.exp(u)
    mmse = mmse_prior(delta, rho, nodes=nodes)
    u2, _, _ = _softmax_root(ab, rho, 2 * nodes)
    unc = abs(mmse_prior(math.exp(u2), rho, nodes=2 * nodes) - mmse) if u2 is not None else math.nan
    return dict(
        mmse=mmse,
        q=Q0 - mmse,
        q_hat=1.0 / delta,
        delta=delta,
        status=CONVERGED,
        regime="partial",
        iterations=it,
        residual=resid,
        uncertainty=unc,
        fixed_points=1,
    )


def _hardmax_eq(rho, alpha, nodes, hnodes, derivative):
    Q0 = prior_second_moment(rho)

    def G(u):
        V = math.exp(u)
        qh = q_hat("hardmax", alpha, Q0 - V, rho, 2, nodes=hnodes, derivative=derivative)
        return V - mmse_prior(1.0 / qh, rho, nodes=nodes), qh

    return G


def _hardmax_point(alpha, rho, nodes, hnodes, derivative):
    Q0 = prior_second_moment(rho)
    G = _hardmax_eq(rho, alpha, nodes, hnodes, derivative)
    us = np.linspace(0.0, math.log(1e-8), _SCAN)
    vals = [G(u)[0] for u in us]
    roots = []
    iters = 0
    for a, b, fa, fb in zip(us[:-1], us[1:], vals[:-1], vals[1:], strict=True):
        if fa == 0:
            roots.append(a)
        elif fa * fb < 0:
            u, res = brentq(lambda x: G(x)[0], b, a, xtol=1e-12, rtol=1e-14, full_output=True)
            roots.append(u)
            iters += res.iterations
    if not roots:
        return dict(
            mmse=math.nan,
            q=math.nan,
            q_hat=math.nan,
            delta=math.nan,
            status=NOT_CONVERGED,
            regime="partial",
            iterations=iters,
            residual=math.nan,
            uncertainty=math.nan,
            fixed_points=0,
        )
    # several roots would need the free entropy to select; none were found on the grids we ran
    # (docs/aim.md); the smallest-MMSE one is returned and fixed_points says how many there were
    u = min(roots)
    g, qh = G(u)
    V = math.exp(u)
    # uncertainty: one secant step of the equation on refined rules from the root (prior nodes ×2,
    # hardmax nodes ×1.5): the change of V it implies
    G2 = _hardmax_eq(rho, alpha, 2 * nodes, int(1.5 * hnodes), derivative)
    h = 1e-4
    g0, g1 = G2(u)[0], G2(u + h)[0]
    unc = abs(math.exp(u - g0 * h / (g1 - g0)) - V) if g1 != g0 else math.nan
    return dict(
        mmse=V,
        q=Q0 - V,
        q_hat=qh,
        delta=1.0 / qh,
        status=CONVERGED,
        regime="partial",
        iterations=iters,
        residual=abs(g),
        uncertainty=unc,
        fixed_points=len(roots),
    )


def solve_point(
    channel: str,
    alpha: float,
    rho: float,
    T: int,
    nodes: int = DEFAULT_NODES,
    hardmax_nodes: int = HARDMAX_NODES,
    hardmax_derivative: str = "gradient",
) -> SEPoint:
    """The Bayes-optimal fixed point at one α (n = α d² samples), ρ = r/d, T tokens.

    ``hardmax_derivative="published"`` solves the same equations with the public script's output
    function (φ₂/Φ₂ for both partials; not the gradient of log Z_out), to measure its effect."""
    channel, rho, T, (alpha,) = check_inputs(channel, rho, T, [alpha])
    nodes, hardmax_nodes, hardmax_derivative = check_quadrature(channel, nodes, hardmax_nodes, hardmax_derivative)
    t0 = time.perf_counter()
    out = (
        _softmax_point(alpha, rho, T, nodes)
        if channel == "softmax"
        else _hardmax_point(alpha, rho, nodes, hardmax_nodes, hardmax_derivative)
    )
    return SEPoint(
        channel=channel,
        rho=rho,
        tokens=T,
        alpha=alpha,
        alpha_bar=alpha_bar(alpha, T),
        seconds=time.perf_counter() - t0,
        **out,
    )


def check_quadrature(
    channel: str, nodes: Any = DEFAULT_NODES, hardmax_nodes: Any = HARDMAX_NODES, hardmax_derivative: Any = "gradient"
) -> tuple[int, int, str]:
    """(nodes, hardmax_nodes, hardmax_derivative) validated (ParameterError, one line): the prior's
    Gauss-Legendre nodes per panel in [8, 512] (fewer do not resolve the bulk: 1 node gave a wrong MMSE
    reported as converged), the hardmax quadrature's nodes per axis in [16, 512], and the derivative
    ``gradient`` or ``published`` (hardmax only). The CLI and :func:`solve_point` use this one check."""
    nodes = check_int("nodes", nodes, 8, 512)
    hardmax_nodes = check_int("hardmax_nodes", hardmax_nodes, 16, 512)
    if hardmax_derivative not in ("gradient", "published"):
        raise ParameterError(f"hardmax_derivative must be 'gradient' or 'published', got {hardmax_derivative!r}")
    if hardmax_derivative != "gradient" and channel != "hardmax":
        raise ParameterError("hardmax_derivative 'published' applies to the hardmax channel only")
    return nodes, hardmax_nodes, hardmax_derivative


def solve_curve(channel: str, alphas, rho: float, T: int, progress=None, **kw) -> list[SEPoint]:
    """:func:`solve_point` for every α of the grid (validated first, before any computation)."""
    channel, rho, T, alphas = check_inputs(channel, rho, T, alphas)
    check_quadrature(channel, **kw)
    points = []
    for a in alphas:
        points.append(solve_point(channel, a, rho, T, **kw))
        if progress is not None:
            progress(points[-1])
    return points


def thresholds(channel: str, rho: float, T: int) -> dict:
    """Thresholds of the channel at (ρ, T), in α and in ᾱ = α(T² + T − 2) (docs/aim.md, section 6).

    softmax: perfect recovery at ᾱ_PR = 2ρ − ρ² (ρ ≤ 1) or 1 (ρ ≥ 1), with the numerical limit of
    MMSE_S(Δ)/Δ at Δ = 1e-10 beside it; the small-ρ weak-recovery point ᾱ_WR ≈ ρ.
    hardmax (T = 2): no perfect recovery at finite α; weak recovery as ρ → 0 at α_WR ≈ ρ/(2 F0),
    F0 = V E[g_outᵀ D g_out] at ω = 0 (closed form), leading order in ρ.
    """
    channel, rho, T, _ = check_inputs(channel, rho, T, [1.0])
    count = T * T + T - 2
    if channel == "softmax":
        abar = perfect_recovery_alpha_bar(rho)
        return {
            "alpha_bar_perfect_recovery": abar,
            "alpha_perfect_recovery": abar / count,
            "alpha_bar_perfect_recovery_numeric": mmse_prior(1e-10, rho) / 1e-10,
            "alpha_bar_weak_recovery_small_rho": rho,
            "alpha_weak_recovery_small_rho": rho / count,
        }
    F0 = hardmax_fisher_at_zero()
    return {
        "alpha_perfect_recovery": None,
        "fisher_at_zero": F0,
        "alpha_weak_recovery_small_rho": rho / (2.0 * F0),
        "alpha_bar_weak_recovery_small_rho": count * rho / (2.0 * F0),
    }
