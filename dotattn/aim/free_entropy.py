"""Replica-symmetric free entropy of the attention-indexed model (L = 1) along the state evolution.

Derivation and checks: docs/aim_algorithms.md, section 9. Per d², with Δ = 1/q̂ and V = Q0 − q,

    Φ(q, q̂) = −q q̂/4 + ψ_S(q̂) + α Ψ_out(q),     ψ_S(q̂) = q̂ Q0/4 − I(q̂),

I(q̂) the mutual information of the denoising channel (:func:`dotattn.aim.prior.mutual_information`,
dI/dq̂ = MMSE_S/4) and Ψ_out the output free entropy (:func:`dotattn.aim.channels.psi_out`,
∂Ψ_out/∂q = q̂_out/(4α)). Its stationary points are the fixed points of the state evolution
q = Q0 − MMSE_S(1/q̂), q̂ = q̂_out(α, q). The Bayes-optimal fixed point is the stationary point of
largest Φ; approximate message passing from the prior mean follows the state evolution from the
uninformed start V⁰ = 1 (q⁰ = ρ).

The state-evolution map F(V) = MMSE_S(1/q̂_out(α, Q0 − V)) is increasing in V (q̂_out decreases with V,
MMSE_S increases with Δ), so its iteration moves monotonically from V⁰ to the first fixed point met in the
direction of F(V⁰) − V⁰. :func:`fixed_points` finds that point from both ends by a scan of
G(V) = V − F(V) in log V and Brent's method on the first sign change (what the iteration would reach,
to 1e-12 in log V, without its slow approach near a threshold), and every sign change of the scan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq

from dotattn.aim.channels import alpha_bar, psi_out, q_hat
from dotattn.aim.prior import mmse_prior, mutual_information, prior_second_moment
from dotattn.aim.state_evolution import check_inputs
from dotattn.core.rows import read_bool, read_float, read_int, read_text

__all__ = [
    "free_entropy",
    "se_map",
    "iterate_se",
    "fixed_points",
    "FreeEntropyPoint",
    "FREE_ENTROPY_COLUMNS",
    "solve_free_entropy",
    "V_MIN",
    "SCAN_POINTS",
    "STARTS",
]

V_MIN = 1e-12
"""The informed start: V⁰ = V_MIN (q⁰ = Q0 − 1e-12, an estimate that is the teacher up to 1e-12)."""
SCAN_POINTS = 49
"""Points of the scan of G(V) = V − F(V) in log V ∈ [log V_MIN, 0] (steps of 0.58 in log V)."""
STARTS = ("uninformed", "informed")


def free_entropy(channel: str, alpha: float, q: float, q_hat_value: float, rho: float, T: int) -> float:
    """Φ(q, q̂) = −q q̂/4 + q̂ Q0/4 − I(q̂) + α Ψ_out(q) per d² (softmax: up to α times a y-dependent
    constant per sample; the same for every fixed point of one α, so differences select)."""
    Q0 = prior_second_moment(rho)
    return (Q0 - q) * q_hat_value / 4.0 - mutual_information(q_hat_value, rho) + alpha * psi_out(channel, q, rho, T)


def se_map(channel: str, alpha: float, rho: float, T: int, V: float) -> tuple[float, float]:
    """One state-evolution step: (F(V), q̂) with q̂ = q̂_out(α, Q0 − V), F(V) = MMSE_S(1/q̂)."""
    qh = q_hat(channel, alpha, prior_second_moment(rho) - V, rho, T)
    return mmse_prior(1.0 / qh, rho), qh


def iterate_se(channel: str, alpha: float, rho: float, T: int, V0: float, steps: int) -> list[float]:
    """V⁰, V¹ = F(V⁰), …: ``steps`` iterations of the state evolution (the dynamics of AMP at d → ∞)."""
    V = [float(V0)]
    for _ in range(int(steps)):
        V.append(float(se_map(channel, alpha, rho, T, V[-1])[0]))
    return V


def fixed_points(channel: str, alpha: float, rho: float, T: int) -> dict:
    """The fixed points reached from the uninformed (V⁰ = 1) and informed (V⁰ = :data:`V_MIN`) starts and
    the number of sign changes of G(V) = V − F(V) on the scan. A start whose direction never meets a sign
    change runs to the end of the range: V = 0 (perfect recovery, softmax) is reported as V = 0."""
    u = np.linspace(0.0, math.log(V_MIN), SCAN_POINTS)  # from V = 1 downwards

    def G(x):
        V = math.exp(x)
        return V - se_map(channel, alpha, rho, T, V)[0]

    g = np.array([G(x) for x in u])
    changes = [k for k in range(len(u) - 1) if g[k] == 0 or g[k] * g[k + 1] < 0]

    def root(k):
        if g[k] == 0:
            return math.exp(u[k])
        return math.exp(brentq(G, u[k + 1], u[k], xtol=1e-12, rtol=1e-14))

    # uninformed: G(1) = 1 − F(1) ≥ 0, V decreases to the first sign change below 1
    unin = root(changes[0]) if changes else 0.0
    # informed: from V_MIN upwards; G(V_MIN) < 0 means V grows to the first sign change above
    if g[-1] < 0:
        inf_ = root(changes[-1]) if changes else math.nan
    else:  # V − F(V) ≥ 0 at V_MIN: the iteration goes down, to perfect recovery
        inf_ = 0.0
    return {"uninformed": unin, "informed": inf_, "sign_changes": len(changes)}


@dataclass(frozen=True)
class FreeEntropyPoint:
    """The fixed point reached from one start at one α: MMSE = V, q, q̂, the free entropy Φ (NaN at
    perfect recovery, where the noiseless softmax Φ diverges), ``selected``: this fixed point has the
    largest Φ at this α (the Bayes-optimal one; both rows are selected when the two starts agree);
    ``fixed_points``: sign changes of V − F(V) on the scan; ``test_error``: the Bayes-optimal test error
    (1/T) E‖ŷ − y‖²_F at this q and its Monte-Carlo standard error (0 for the hardmax closed form)."""

    channel: str
    rho: float
    tokens: int
    beta: float
    alpha: float
    alpha_bar: float
    start: str
    mmse: float
    q: float
    q_hat: float
    phi: float
    selected: bool
    fixed_points: int
    test_error: float
    test_error_se: float

    def to_row(self) -> dict:
        return asdict(self)

    @classmethod
    def from_row(cls, row) -> FreeEntropyPoint:
        conv: dict[str, Callable[[Any], Any]] = {
            "channel": read_text,
            "tokens": read_int,
            "start": read_text,
            "selected": read_bool,
            "fixed_points": read_int,
        }
        return cls(**{k: conv.get(k, read_float)(row[k]) for k in cls.__dataclass_fields__})


FREE_ENTROPY_COLUMNS = tuple(FreeEntropyPoint.__dataclass_fields__)


def solve_free_entropy(
    channel: str, alpha: float, rho: float, T: int, beta: float = 1.0, test_samples: int = 200_000, seed: int = 0
) -> list[FreeEntropyPoint]:
    """Both starts at one α: two :class:`FreeEntropyPoint` rows (uninformed first)."""
    from dotattn.aim.test_error import bayes_test_error

    channel, rho, T, (alpha,) = check_inputs(channel, rho, T, [alpha])
    Q0 = prior_second_moment(rho)
    fp = fixed_points(channel, alpha, rho, T)
    rows = []
    for start in STARTS:
        V = fp[start]
        q = Q0 - V
        if V > 0 and math.isfinite(V):
            qh = q_hat(channel, alpha, q, rho, T)
            phi = free_entropy(channel, alpha, q, qh, rho, T)
        else:
            qh, phi = math.inf, math.nan
        err, se = bayes_test_error(channel, q, rho, T, beta, samples=test_samples, seed=seed)
        rows.append(dict(start=start, mmse=V, q=q, q_hat=qh, phi=phi, test_error=err, test_error_se=se))
    same = abs(rows[0]["mmse"] - rows[1]["mmse"]) <= 1e-9 * max(rows[0]["mmse"], rows[1]["mmse"], 1e-300)
    finite = [r["phi"] for r in rows if math.isfinite(r["phi"])]
    out = []
    for r in rows:
        sel = same or (math.isfinite(r["phi"]) and r["phi"] == max(finite))
        out.append(
            FreeEntropyPoint(
                channel=channel,
                rho=rho,
                tokens=T,
                beta=float(beta),
                alpha=alpha,
                alpha_bar=alpha_bar(alpha, T),
                selected=bool(sel),
                fixed_points=fp["sign_changes"],
                **r,
            )
        )
    return out
