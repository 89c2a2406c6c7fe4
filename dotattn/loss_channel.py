"""Loss channel: the Moreau envelope averaged over the Gaussian fields, and the hat updates.

SPEC section 3. For a quadrature rule with nodes x = (ξ, η) ∈ R^{L r} × R^{L r_t} the fields are
built by :mod:`dotattn.overlaps` (Cholesky parametrisation), the global prox is taken at every
node at once (:func:`dotattn.prox.prox`), and

    E[M] ≈ Σ_n w_n M(ω(x_n), T(h*(x_n)); V).

Hat updates (stationarity of Φ in the overlaps), two forms:

* ``"gradient"`` (default, any r, r_t): the exact gradient of the discretised −α E[M] in
  (q, V, μ, θ) by the envelope theorem (∂M/∂p = ∂objective/∂p at fixed ĥ), chained through the
  Cholesky factors. The fixed point is then an exact stationary point of the discretised Φ.
* ``"stein"`` (r = r_t = 1, any L): the Gaussian integration-by-parts form written in SPEC.

Both agree up to quadrature error (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dotattn.loss import attention_loss, teacher_attention, teacher_gradient
from dotattn.overlaps import FieldFactors, Hats, Overlaps, factor_jvp, field_factors, symmetric_basis
from dotattn.problem import Problem
from dotattn.prox import ProxResult, prox
from dotattn.quadrature import GaussianRule

__all__ = ["Fields", "LossChannelResult", "local_fields", "hat_update", "test_error", "HAT_FORMS"]

HAT_FORMS = ("gradient", "stein")


@dataclass(frozen=True)
class Fields:
    """Fields at the N nodes: xi (N, L, r), eta (N, L, r_t), centre ω (N, L, r), h_star (N, L, r_t)."""

    xi: np.ndarray
    eta: np.ndarray
    centre: np.ndarray
    h_star: np.ndarray
    factors: FieldFactors


@dataclass(frozen=True)
class LossChannelResult:
    """Hats, E[M] (scalar, per sample), the prox solution at every node, and the fields used."""

    hats: Hats
    envelope: float
    prox: ProxResult
    fields: Fields


def local_fields(overlaps: Overlaps, rule: GaussianRule, problem: Problem) -> Fields:
    """Student centres ω_l = μ_l + C ξ_l and teacher fields h*_l = Bᵀξ_l + D η_l at every node."""
    L, r, rt = problem.L, problem.rank, problem.teacher_rank
    if rule.dim != L * (r + rt):
        raise ValueError(f"quadrature rule has dimension {rule.dim}, the problem needs L(r + r_t) = {L * (r + rt)}")
    f = field_factors(overlaps, problem)
    N = rule.size
    xi = rule.nodes[:, : L * r].reshape(N, L, r)
    eta = rule.nodes[:, L * r:].reshape(N, L, rt)
    centre = overlaps.mu[None] + xi @ f.C.T
    h_star = xi @ f.B + eta @ f.D.T
    return Fields(xi=xi, eta=eta, centre=centre, h_star=h_star, factors=f)


def _expect(rule: GaussianRule, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E[Σ_l a_l b_lᵀ] for a (N, L, i), b (N, L, j): shape (i, j)."""
    return np.einsum("n,nli,nlj->ij", rule.weights, a, b)


def hat_update(overlaps: Overlaps, alpha: float, rule: GaussianRule, problem: Problem, *,
               search: str = "global", warm: np.ndarray | None = None, form: str = "gradient",
               random_starts: int | None = None) -> LossChannelResult:
    """Hats from the overlaps (one loss-channel step).

    ``search='global'``: multi-start global prox. ``search='local'``: one Newton run from
    ``warm`` (N, L, r; a previous ĥ) or, if None, from the centres ω. Raises InvalidOverlaps if
    the fields cannot be formed.
    """
    if search not in ("global", "local"):
        raise ValueError(f"search must be 'global' or 'local', got {search!r}")
    if form not in HAT_FORMS:
        raise ValueError(f"hat form must be one of {HAT_FORMS}, got {form!r}")
    fl = local_fields(overlaps, rule, problem)
    target = teacher_attention(fl.h_star, problem)
    if search == "local" and warm is None:
        warm = fl.centre
    px = prox(fl.centre, target, overlaps.V, problem, warm=warm if search == "local" else None,
              random_starts=random_starts)
    f = px.f  # V⁻¹(ĥ − ω), (N, L, r)
    w = rule.weights
    envelope = float(w @ px.value)
    mu_hat = alpha * np.einsum("n,nlr->lr", w, f)
    q_hat = alpha * _expect(rule, f, f)
    q_hat = 0.5 * (q_hat + q_hat.T)
    if form == "stein":
        if problem.rank != 1 or problem.teacher_rank != 1:
            raise ValueError("the Stein form of the hats is implemented for r = r_t = 1 only")
        q, th = overlaps.q[0, 0], overlaps.theta[0, 0]
        v_star = fl.factors.D[0, 0]
        theta_hat = alpha * _expect(rule, f, fl.eta) / v_star
        V_hat = -alpha * _expect(rule, f, fl.xi) / np.sqrt(q) + th * theta_hat / q
    else:
        g_star = teacher_gradient(px.h, fl.h_star, problem)  # ∂ℓ/∂h* at ĥ
        G_C = -_expect(rule, f, fl.xi)  # ∂E/∂C (r, r)
        G_B = _expect(rule, fl.xi, g_star)  # ∂E/∂B (r, r_t)
        G_D = _expect(rule, g_star, fl.eta)  # ∂E/∂D (r_t, r_t)

        def directional(dq: np.ndarray, dth: np.ndarray) -> float:
            d = factor_jvp(fl.factors, dq, dth)
            return float(np.sum(G_C * d.C) + np.sum(G_B * d.B) + np.sum(G_D * d.D))

        r, rt = problem.rank, problem.teacher_rank
        grad_q = np.zeros((r, r))
        for i, j, E in symmetric_basis(r):
            val = directional(E, np.zeros((r, rt)))
            grad_q[i, j] = grad_q[j, i] = val if i == j else 0.5 * val
        grad_theta = np.zeros((r, rt))
        for i in range(r):
            for k in range(rt):
                E = np.zeros((r, rt))
                E[i, k] = 1.0
                grad_theta[i, k] = directional(np.zeros((r, r)), E)
        V_hat = 2 * alpha * grad_q
        theta_hat = -alpha * grad_theta
    V_hat = 0.5 * (V_hat + V_hat.T)
    hats = Hats(q_hat=q_hat, V_hat=V_hat, theta_hat=theta_hat, mu_hat=mu_hat)
    return LossChannelResult(hats=hats, envelope=envelope, prox=px, fields=fl)


def test_error(overlaps: Overlaps, rule: GaussianRule, problem: Problem) -> tuple[float, float]:
    """ε_g = E[ℓ(h, h*)] with h_l = μ_l + C ξ_l (no prox), and its quadrature standard error."""
    fl = local_fields(overlaps, rule, problem)
    values = attention_loss(fl.centre, teacher_attention(fl.h_star, problem), problem)
    return float(rule.expect(values)), float(rule.standard_error(values))
