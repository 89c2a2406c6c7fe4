"""One-step replica-symmetry breaking (1RSB) at zero temperature (derivation: docs/rsb.md).

The Parisi parameter is kept finite as β → ∞ through y = βm. The order parameters are

    q1 (r, r)  self-overlap of a minimum (= within-state overlap at zero temperature)
    q0 (r, r)  overlap between two different minima (q0 ≼ q1; Δ = q1 − q0)
    V  (r, r)  within-state response,  θ (r, r_t),  μ (L, r)  as in the RS theory

with conjugates q̂1, q̂0, V̂, θ̂, μ̂. The potential (Φ = −e_t at the saddle) is

    Φ = ½Tr(V̂ q1) − ½Tr(q̂1 V) − (y/2)[Tr(q̂1 q1) − Tr(q̂0 q0)] − Σ_l μ_l·μ̂_l − Tr(θᵀθ̂)
        + Ψ_w + α Φ_ℓ

    Ψ_w = −(1/2y)[log det A − log det K] + ½ Tr[A⁻¹ (σ² q̂0 + σ⁴ θ̂θ̂ᵀ + M̂ G M̂ᵀ)],
          K = λI + σ² V̂,   A = K − y σ² (q̂1 − q̂0)
    Φ_ℓ = (1/y) E_{ξ0, η} log E_{ξ1} exp(−y M(ω, h*; V)),
          ω_l = μ_l + C0 ξ0_l + C1 ξ1_l,  h*_l = Bᵀ ξ0_l + D η_l,
          C0 = chol(q0), C1 = chol(q1 − q0), B = C0⁻¹θ, D = chol(ρ − BᵀB)

with M the Moreau envelope of the RS theory. Everything here is generic in the per-sample loss
(a :class:`Channel`: the global prox and ∂ℓ/∂h*), so that the same code solves the attention
model and the perceptron checks of the tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dotattn.core.status import CONVERGED, INVALID, NOT_CONVERGED
from dotattn.core.validation import ParameterError, check_alpha, check_instance, check_int, check_number
from dotattn.positional_semantic.loss import teacher_attention, teacher_gradient
from dotattn.positional_semantic.loss_channel import test_error
from dotattn.positional_semantic.overlaps import (
    FieldFactors,
    InvalidOverlaps,
    Overlaps,
    _ArrayState,
    _chol,
    factor_jvp,
    field_factors,
    symmetric_basis,
)
from dotattn.positional_semantic.problem import Problem, require_variant
from dotattn.positional_semantic.prox import prox
from dotattn.positional_semantic.quadrature import GaussianRule, gauss_hermite
from dotattn.positional_semantic.state_evolution import FixedPoint, _Anderson

__all__ = [
    "RSBOverlaps",
    "RSBHats",
    "Channel",
    "NodeAverages",
    "LossChannel1RSB",
    "AttentionChannel",
    "RSBPoint",
    "RSBOptions",
    "RSBResult",
    "HingeChannel",
    "StepChannel",
    "SphericalWeights",
    "spherical_1rsb_root",
    "rsb_loss_channel",
    "hats_from_channel",
    "rsb_regulariser",
    "rsb_overlap_update",
    "rsb_potential",
    "potential_y_derivative",
    "iterate_rsb",
    "solve_rsb",
    "COLLAPSED",
    "REPLICA_SYMMETRIC",
    "NOT_BRACKETED",
]


@dataclass(frozen=True)
class RSBOverlaps(_ArrayState):
    """q0, q1, V (r, r), θ (r, r_t), μ (L, r)."""

    q0: np.ndarray
    q1: np.ndarray
    V: np.ndarray
    theta: np.ndarray
    mu: np.ndarray

    def vector(self) -> np.ndarray:
        return np.concatenate([np.ravel(x) for x in (self.q0, self.q1, self.V, self.theta, self.mu)])

    def from_vector(self, x: np.ndarray) -> RSBOverlaps:
        out: list[np.ndarray] = []
        i = 0
        for a in (self.q0, self.q1, self.V, self.theta, self.mu):
            a = np.asarray(a)
            b = np.asarray(x[i : i + a.size]).reshape(a.shape)
            if a.ndim == 2 and a.shape[0] == a.shape[1] and len(out) < 3:
                b = 0.5 * (b + b.T)
            out.append(b)
            i += a.size
        return RSBOverlaps(*out)

    @property
    def delta(self) -> np.ndarray:
        return self.q1 - self.q0

    def rs(self) -> Overlaps:
        """The RS overlaps of one minimum (q = q1): what the test error of a minimum depends on."""
        return Overlaps(q=self.q1, V=self.V, theta=self.theta, mu=self.mu)

    @classmethod
    def from_rs(cls, rs: Overlaps, split: float) -> RSBOverlaps:
        """q1 = q, q0 = (1 − split) q: a start next to the RS point (split = 0 is RS itself)."""
        return cls(
            q0=(1.0 - split) * np.asarray(rs.q),
            q1=np.asarray(rs.q),
            V=np.asarray(rs.V),
            theta=np.asarray(rs.theta),
            mu=np.asarray(rs.mu),
        )


@dataclass(frozen=True)
class RSBHats(_ArrayState):
    """q̂0, q̂1, V̂ (r, r), θ̂ (r, r_t), μ̂ (L, r)."""

    q0_hat: np.ndarray
    q1_hat: np.ndarray
    V_hat: np.ndarray
    theta_hat: np.ndarray
    mu_hat: np.ndarray


@dataclass(frozen=True)
class NodeAverages:
    """The prox at N nodes, averaged over each node's global minimisers (equal weights).

    value (N,) = M;  h (N, L, r) one minimiser (for warm starts);  f (N, L, r) mean of
    V⁻¹(ĥ − ω);  ff (N, r, r) mean of Σ_l f_l f_lᵀ;  g (N, L, r_t) mean of ∂ℓ/∂h* at ĥ.
    """

    value: np.ndarray
    h: np.ndarray
    f: np.ndarray
    ff: np.ndarray
    g: np.ndarray


class Channel(Protocol):
    """A per-sample loss with its global prox. shape: (L, r, r_t), the fields' shapes."""

    @property
    def shape(self) -> tuple[int, int, int]: ...

    def prox(
        self, centre: np.ndarray, h_star: np.ndarray, V: np.ndarray, warm: np.ndarray | None = None
    ) -> NodeAverages: ...


def _chol_jvp(C: np.ndarray, dX: np.ndarray) -> np.ndarray:
    """d chol(X) along dX (symmetric) at X = C Cᵀ."""
    f = FieldFactors(C=C, B=np.zeros((C.shape[0], 1)), D=np.eye(1))
    return factor_jvp(f, dX, np.zeros((C.shape[0], 1))).C


@dataclass(frozen=True)
class LossChannel1RSB:
    """One evaluation of the 1RSB loss channel at fixed overlaps and y.

    phi : Φ_ℓ.  log_z : E_0 log Z1 (Z1 = E_1 e^{−yM}).  mean_m : E_0⟨M⟩ (tilted inner average).
    grads: ∂Φ_ℓ/∂(V, q1 at fixed q0, q0 at fixed q1, θ, μ), symmetric-matrix convention
    (dΦ_ℓ = Tr(G dq)).  h : (No·Ni, L, r) prox points (warm starts).
    """

    phi: float
    log_z: float
    mean_m: float
    grad_V: np.ndarray
    grad_q1: np.ndarray
    grad_q0: np.ndarray
    grad_theta: np.ndarray
    grad_mu: np.ndarray
    h: np.ndarray
    inner_weight_max: float


def _sym_grad(directional, r: int) -> np.ndarray:
    g = np.zeros((r, r))
    for i, j, E in symmetric_basis(r):
        v = directional(E)
        g[i, j] = g[j, i] = v if i == j else 0.5 * v
    return g


def rsb_loss_channel(
    ov: RSBOverlaps,
    y: float,
    outer: GaussianRule,
    inner: GaussianRule,
    channel: Channel,
    rho: np.ndarray,
    warm: np.ndarray | None = None,
    form: str = "stein",
) -> LossChannel1RSB:
    """Φ_ℓ and its gradients (envelope theorem: derivatives of M at fixed ĥ) on outer × inner rules.

    outer: L(r + r_t)-dimensional rule for (ξ0, η); inner: L r-dimensional rule for ξ1.
    """
    L, r, rt = channel.shape
    if outer.dim != L * (r + rt) or inner.dim != L * r:
        raise ValueError("rule dimensions do not match the channel's shape")
    outer_f = field_factors(Overlaps(q=ov.q0, V=ov.V, theta=ov.theta, mu=ov.mu), _RhoOnly(rho))
    C0, B, D = outer_f.C, outer_f.B, outer_f.D
    C1 = _chol("q1 - q0", ov.delta)
    No, Ni = outer.size, inner.size
    xi0 = outer.nodes[:, : L * r].reshape(No, L, r)
    eta = outer.nodes[:, L * r :].reshape(No, L, rt)
    xi1 = inner.nodes.reshape(Ni, L, r)
    c_out = ov.mu[None] + xi0 @ C0.T  # (No, L, r)
    h_star = xi0 @ B + eta @ D.T  # (No, L, rt)
    centre = (c_out[:, None] + (xi1 @ C1.T)[None]).reshape(No * Ni, L, r)
    hs = np.broadcast_to(h_star[:, None], (No, Ni, L, rt)).reshape(No * Ni, L, rt)
    px = channel.prox(centre, hs, ov.V, warm)
    M = px.value.reshape(No, Ni)
    m0 = M.min(axis=1, keepdims=True)
    tilt = np.expm1(-y * (M - m0))  # e^{−y(M − min M)} − 1: log1p below keeps small y exact
    wts = inner.weights[None] * (1.0 + tilt)
    Z = wts.sum(axis=1, keepdims=True)
    p = wts / Z  # tilted inner weights (No, Ni)
    # log Σ_j w_j e^{−y(M_j − min M)}: through log1p where the sum is near 1 (small y), else directly (the
    # minimising node can carry a tiny weight, and 1 + Σ w (e^{…} − 1) would round to 0)
    tilt_sum = (inner.weights[None] * tilt).sum(axis=1)
    log_z1 = -y * m0[:, 0] + np.where(
        Z[:, 0] < 0.5, np.log(np.maximum(Z[:, 0], 1e-300)), np.log1p(np.maximum(tilt_sum, -0.5))
    )
    W = outer.weights[:, None] * p  # joint weights (No, Ni)
    Wf = W.reshape(-1)
    f = px.f
    g = px.g
    xi1_all = np.broadcast_to(xi1[None], (No, Ni, L, r)).reshape(No * Ni, L, r)
    xi0_all = np.broadcast_to(xi0[:, None], (No, Ni, L, r)).reshape(No * Ni, L, r)
    eta_all = np.broadcast_to(eta[:, None], (No, Ni, L, rt)).reshape(No * Ni, L, rt)
    grad_V = 0.5 * np.einsum("n,nij->ij", Wf, px.ff)
    centre_k = getattr(channel, "dilation_centre", None)
    if form == "stein" and centre_k is not None:
        grad_V = _dilation_grad_V(
            float(ov.V[0, 0]) if r == 1 else None, y, outer.weights, p, c_out, xi1, float(C1[0, 0]), centre_k
        )
    if form == "stein":
        # value-only forms: ⟨f_l⟩ = C1⁻ᵀ⟨ξ1_l⟩ / y and ∂F/∂Δ = C1⁻ᵀ⟨Σ_l(ξ1_l ξ1_lᵀ − I)⟩C1⁻¹ / (2y)
        # (Gaussian integration by parts in ξ1): continuous in the overlaps even where ĥ jumps
        C1i = np.linalg.inv(C1)
        f = np.broadcast_to((np.einsum("oj,jli->oli", p, xi1) @ C1i / y)[:, None], (No, Ni, L, r)).reshape(
            No * Ni, L, r
        )
        second = np.einsum("o,oj,jli,jlk->ik", outer.weights, p, xi1, xi1) - L * np.eye(r)
        grad_delta = C1i.T @ second @ C1i / (2 * y)
        grad_delta = 0.5 * (grad_delta + grad_delta.T)
    G_C1 = np.einsum("n,nli,nlj->ij", Wf, f, xi1_all)
    G_C0 = np.einsum("n,nli,nlj->ij", Wf, f, xi0_all)
    G_B = -np.einsum("n,nli,nlk->ik", Wf, xi0_all, g)
    G_D = -np.einsum("n,nlk,nlj->kj", Wf, g, eta_all)
    grad_mu = np.einsum("n,nli->li", Wf, f)

    def d_q1(E: np.ndarray) -> float:
        if form == "stein":
            return float(np.sum(grad_delta * E))
        return float(np.sum(G_C1 * _chol_jvp(C1, E)))

    def d_q0(E: np.ndarray) -> float:
        d = factor_jvp(outer_f, E, np.zeros((r, rt)))
        return float(np.sum(G_C0 * d.C) + np.sum(G_B * d.B) + np.sum(G_D * d.D) - d_q1(E))

    grad_theta = np.zeros((r, rt))
    for i in range(r):
        for k in range(rt):
            E = np.zeros((r, rt))
            E[i, k] = 1.0
            d = factor_jvp(outer_f, np.zeros((r, r)), E)
            grad_theta[i, k] = np.sum(G_C0 * d.C) + np.sum(G_B * d.B) + np.sum(G_D * d.D)
    grad_V = 0.5 * (grad_V + grad_V.T)
    return LossChannel1RSB(
        phi=float(outer.weights @ log_z1) / y,
        log_z=float(outer.weights @ log_z1),
        mean_m=float(np.sum(W * M)),
        grad_V=grad_V,
        grad_q1=_sym_grad(d_q1, r),
        grad_q0=_sym_grad(d_q0, r),
        grad_theta=grad_theta,
        grad_mu=grad_mu,
        h=px.h,
        inner_weight_max=float(np.max(p)),
    )


def _dilation_grad_V(
    v: float | None,
    y: float,
    w_out: np.ndarray,
    p: np.ndarray,
    c_out: np.ndarray,
    xi1: np.ndarray,
    s: float,
    kappa: float,
) -> np.ndarray:
    """∂Φ_ℓ/∂V (1, 1) in values only, for a loss whose envelope is M(ω; V) = m((ω − κ)/√V) (r = 1): the
    inner variable rescaled to u = (ω − κ)/√V leaves V in the Gaussian weight alone, so
    ∂Φ_ℓ/∂V = (1/2Vy) E_0⟨Σ_l (1 − ξ1_l² − ξ1_l a_l/s)⟩, a = μ + C0ξ0 − κ, s = C1
    (docs/rsb.md section 10).

    v = V (None unless r = 1); w_out (No,) outer weights; p (No, Ni) tilted inner weights; c_out (No, L, 1);
    xi1 (Ni, L, 1)."""
    if v is None:
        raise ValueError("the dilation form of dPhi/dV needs r = 1")
    a = (c_out[..., 0] - kappa) / s  # (No, L)
    x = xi1[..., 0]  # (Ni, L)
    term = x.shape[1] - np.sum(x**2, axis=1)[None] - np.einsum("jl,ol->oj", x, a)  # (No, Ni)
    return np.array([[float(np.sum(w_out[:, None] * p * term)) / (2 * v * y)]])


@dataclass(frozen=True)
class _RhoOnly:
    rho: np.ndarray


def hats_from_channel(ch: LossChannel1RSB, y: float, alpha: float) -> RSBHats:
    """Stationarity of Φ in (V, q1, q0, θ, μ)."""
    q1_hat = 2 * alpha * ch.grad_V
    return RSBHats(
        q0_hat=-(2 * alpha / y) * ch.grad_q0,
        q1_hat=q1_hat,
        V_hat=y * q1_hat - 2 * alpha * ch.grad_q1,
        theta_hat=alpha * ch.grad_theta,
        mu_hat=alpha * ch.grad_mu,
    )


def _reg_matrices(hats: RSBHats, y: float, sigma: float, ridge: float, G: np.ndarray):
    r = hats.V_hat.shape[0]
    s2 = sigma**2
    K = ridge * np.eye(r) + s2 * 0.5 * (hats.V_hat + hats.V_hat.T)
    A = K - y * s2 * (hats.q1_hat - hats.q0_hat)
    A = 0.5 * (A + A.T)
    for name, X in (("K = lambda I + sigma^2 V_hat", K), ("A = K - y sigma^2 (q1_hat - q0_hat)", A)):
        if np.min(np.linalg.eigvalsh(X)) <= 0:
            raise InvalidOverlaps(f"{name} is not positive definite")
    Mh = hats.mu_hat.T
    B0 = s2 * hats.q0_hat + s2**2 * hats.theta_hat @ hats.theta_hat.T + Mh @ G @ Mh.T
    return K, A, 0.5 * (B0 + B0.T)


def rsb_regulariser(hats: RSBHats, y: float, sigma: float, ridge: float, G: np.ndarray) -> float:
    """Ψ_w (scalar)."""
    K, A, B0 = _reg_matrices(hats, y, sigma, ridge, G)
    ld = np.linalg.slogdet(A)[1] - np.linalg.slogdet(K)[1]
    return float(-ld / (2 * y) + 0.5 * np.trace(np.linalg.solve(A, B0)))


def rsb_overlap_update(hats: RSBHats, y: float, sigma: float, ridge: float, G: np.ndarray) -> RSBOverlaps:
    """Stationarity of Φ in the hats: V = σ²K⁻¹, q1 − q0 = (σ²/y)(A⁻¹ − K⁻¹), q0 = σ²A⁻¹B0A⁻¹,
    θ = σ⁴A⁻¹θ̂, μ = G μ̂ A⁻¹."""
    s2 = sigma**2
    K, A, B0 = _reg_matrices(hats, y, sigma, ridge, G)
    Ki, Ai = np.linalg.inv(K), np.linalg.inv(A)
    q0 = s2 * Ai @ B0 @ Ai
    q0 = 0.5 * (q0 + q0.T)
    dq = (s2 / y) * (Ai - Ki)
    return RSBOverlaps(
        q0=q0,
        q1=q0 + 0.5 * (dq + dq.T),
        V=s2 * 0.5 * (Ki + Ki.T),
        theta=s2**2 * Ai @ hats.theta_hat,
        mu=(G @ hats.mu_hat) @ Ai.T,
    )


def rsb_potential(
    ov: RSBOverlaps, hats: RSBHats, phi_loss: float, y: float, alpha: float, sigma: float, ridge: float, G: np.ndarray
) -> float:
    """Φ (the 1RSB potential; e_t = −Φ at the saddle)."""
    return float(
        0.5 * np.sum(hats.V_hat * ov.q1)
        - 0.5 * np.sum(hats.q1_hat * ov.V)
        - 0.5 * y * (np.sum(hats.q1_hat * ov.q1) - np.sum(hats.q0_hat * ov.q0))
        - np.sum(ov.mu * hats.mu_hat)
        - np.sum(ov.theta * hats.theta_hat)
        + rsb_regulariser(hats, y, sigma, ridge, G)
        + alpha * phi_loss
    )


def potential_y_derivative(
    ov: RSBOverlaps,
    hats: RSBHats,
    ch: LossChannel1RSB,
    y: float,
    alpha: float,
    sigma: float,
    ridge: float,
    G: np.ndarray,
) -> float:
    """∂Φ/∂y at fixed order parameters (the total derivative along a line of saddles)."""
    s2 = sigma**2
    K, A, B0 = _reg_matrices(hats, y, sigma, ridge, G)
    Dh = hats.q1_hat - hats.q0_hat
    Ai = np.linalg.inv(A)
    ld = np.linalg.slogdet(A)[1] - np.linalg.slogdet(K)[1]
    d_psi = ld / (2 * y**2) + s2 / (2 * y) * np.trace(Ai @ Dh) + 0.5 * s2 * np.trace(Ai @ Dh @ Ai @ B0)
    d_loss = -ch.log_z / y**2 - ch.mean_m / y
    return float(-0.5 * (np.sum(hats.q1_hat * ov.q1) - np.sum(hats.q0_hat * ov.q0)) + d_psi + alpha * d_loss)


@dataclass(frozen=True)
class AttentionChannel:
    """The attention loss of the positional-semantic model as a :class:`Channel`."""

    problem: Problem
    random_starts: int | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        p = self.problem
        return p.L, p.rank, p.teacher_rank

    def prox(self, centre, h_star, V, warm=None) -> NodeAverages:
        p = self.problem
        target = teacher_attention(h_star, p)
        px = prox(centre, target, V, p, warm=warm, random_starts=self.random_starts, symmetric_nodes=True)
        hs = [px.h]
        fs = [px.f]
        if px.alts is not None and px.alts_f is not None:  # both or neither (ProxResult checks)
            hs += list(px.alts)
            fs += list(px.alts_f)
        count = np.zeros(len(px.value))
        f_sum = np.zeros_like(px.f)
        ff_sum = np.zeros((len(px.value), px.f.shape[2], px.f.shape[2]))
        g_sum = np.zeros(h_star.shape)
        for h, f in zip(hs, fs, strict=True):
            ok = ~np.isnan(h[:, 0, 0])
            hh = np.where(ok[:, None, None], h, px.h)
            ff_ = np.where(ok[:, None, None], f, 0.0)
            count += ok
            f_sum += ff_
            ff_sum += np.einsum("nli,nlj->nij", ff_, ff_)
            g_sum += np.where(ok[:, None, None], teacher_gradient(hh, h_star, p), 0.0)
        c = count[:, None, None]
        return NodeAverages(value=px.value, h=px.h, f=f_sum / c, ff=ff_sum / c, g=g_sum / c)


COLLAPSED = "collapsed"
"""Status of a fixed-y run whose q1 − q0 vanished: the saddle is the RS one."""
REPLICA_SYMMETRIC = "replica_symmetric"
"""Status of a 1RSB solve whose complexity is negative at every y scanned: the maximum of e(y)
is at y → 0, where the 1RSB potential is the RS one (e_t unchanged by 1RSB)."""
NOT_BRACKETED = "not_bracketed"
"""Status of a 1RSB solve whose complexity is positive at every y scanned (the root lies beyond)."""


@dataclass(frozen=True)
class RSBPoint:
    """A 1RSB saddle at fixed y: status, iterations, residual (max relative change of the overlaps),
    overlaps, hats, Φ and ∂Φ/∂y (NaN unless converged). e_t(y) = −Φ; complexity Σ(y) = −y² ∂Φ/∂y."""

    status: str
    message: str
    y: float
    iterations: int
    residual: float
    overlaps: RSBOverlaps
    hats: RSBHats | None
    potential: float
    dphi_dy: float
    seconds: float

    @property
    def converged(self) -> bool:
        return self.status == CONVERGED

    @property
    def train_loss(self) -> float:
        return -self.potential

    @property
    def complexity(self) -> float:
        """Σ(y) = −y² ∂Φ/∂y: the log-number of minima (per d) at the energy the tilt y selects."""
        return -(self.y**2) * self.dphi_dy


def _keep_subspace(new: RSBOverlaps, init: RSBOverlaps) -> RSBOverlaps:
    """μ = 0 and zero θ columns are invariant subspaces (as in the RS iteration): kept exactly."""
    mu = np.zeros_like(new.mu) if not np.any(init.mu) else new.mu
    theta = np.where(np.any(init.theta, axis=0)[None, :], new.theta, 0.0)
    return RSBOverlaps(q0=new.q0, q1=new.q1, V=new.V, theta=theta, mu=mu)


def _residual(a: RSBOverlaps, b: RSBOverlaps) -> float:
    x, z = a.vector(), b.vector()
    return float(np.max(np.abs(x - z) / np.maximum(1.0, np.abs(z))))


def _admissible(ov: RSBOverlaps) -> None:
    _chol("q0", ov.q0)
    _chol("q1 - q0", ov.delta)
    _chol("V", ov.V)


@dataclass(frozen=True)
class RSBOptions:
    """Controls of the 1RSB solve.

    outer_order, inner_order: Gauss–Hermite points per axis of the outer (ξ0, η: L(r + r_t) axes)
    and inner (ξ1: L r axes) rules. y_grid: the Parisi parameters scanned, in any order (the scan
    runs from the largest down, each fixed point warm-started from the previous one). y_rtol: relative
    accuracy of the root of Σ(y). split: the first start is q1 = q_RS, q0 = (1 − split) q_RS.
    tol, damping, anderson, max_iter: the fixed-y iteration (as in the RS solver).
    """

    outer_order: int = 6
    inner_order: int = 4
    y_grid: tuple[float, ...] = (300.0, 100.0, 30.0, 10.0, 3.0)
    y_rtol: float = 1e-2
    split: float = 0.3
    tol: float = 1e-8
    damping: float = 0.8
    anderson: int = 3
    max_iter: int = 300

    def __post_init__(self) -> None:
        object.__setattr__(self, "outer_order", check_int("outer_order", self.outer_order, 2, 16))
        object.__setattr__(self, "inner_order", check_int("inner_order", self.inner_order, 2, 16))
        try:
            grid = tuple(float(y) for y in self.y_grid)
        except (TypeError, ValueError):
            raise ParameterError(f"y_grid must be a list of numbers in (0, 1e6], got {self.y_grid!r}") from None
        if len(grid) < 1 or not all(np.isfinite(y) and 0 < y <= 1e6 for y in grid):
            raise ParameterError(f"y_grid must be a non-empty list of numbers in (0, 1e6], got {self.y_grid!r}")
        object.__setattr__(self, "y_grid", tuple(sorted(set(grid), reverse=True)))
        object.__setattr__(self, "y_rtol", check_number("y_rtol", self.y_rtol, 1e-6, False, 0.5, "in [1e-6, 0.5]"))
        object.__setattr__(
            self, "split", check_number("split", self.split, 0.0, True, 1.0, "in (0, 1)", high_open=True)
        )
        object.__setattr__(self, "tol", check_number("tol", self.tol, 1e-14, False, 1e-1, "in [1e-14, 0.1]"))
        object.__setattr__(
            self, "damping", check_number("damping", self.damping, 0.0, False, 1.0, "in [0, 1)", high_open=True)
        )
        object.__setattr__(self, "anderson", check_int("anderson", self.anderson, 0, 20))
        object.__setattr__(self, "max_iter", check_int("max_iter", self.max_iter, 1, 100_000))

    def rules(self, shape: tuple[int, int, int]) -> tuple[GaussianRule, GaussianRule]:
        """(outer, inner) Gauss–Hermite rules for fields of shape (L, r, r_t)."""
        L, r, rt = shape
        return gauss_hermite(L * (r + rt), self.outer_order), gauss_hermite(L * r, self.inner_order)


def iterate_rsb(
    y: float,
    alpha: float,
    init: RSBOverlaps,
    outer: GaussianRule,
    inner: GaussianRule,
    channel: Channel,
    ridge_channel,
    options: RSBOptions = RSBOptions(),
    *,
    form: str = "stein",
    collapse: float = 1e-9,
    progress=None,
) -> RSBPoint:
    """Fixed point at one y: damped (Anderson-mixed) iteration of hats ← loss channel (global prox at
    every step, so that the map is a function of the overlaps) and overlaps ← regulariser channel.

    ``ridge_channel``: the weight channel, an object with sigma, ridge, G (L, L) and rho (r_t, r_t) (a
    Problem), or one with a method ``ridge_at(hats, y)`` in place of a fixed ridge (a norm constraint whose
    Lagrange multiplier is the ridge, e.g. :class:`SphericalWeights`) and ``potential_shift(ridge)``.
    Status: converged, not_converged, invalid (an iterate left the admissible set), or collapsed
    (q1 − q0 fell below ``collapse`` · q1: the RS saddle)."""
    t0 = time.perf_counter()
    sigma, G, rho = ridge_channel.sigma, ridge_channel.G, ridge_channel.rho
    ridge_at = getattr(ridge_channel, "ridge_at", None)
    ov, residual = init, np.inf
    mixer = _Anderson(options.anderson, 1.0 - options.damping) if options.anderson else None
    for it in range(1, options.max_iter + 1):
        try:
            ch = rsb_loss_channel(ov, y, outer, inner, channel, rho, form=form)
            hats = hats_from_channel(ch, y, alpha)
            ridge = ridge_channel.ridge if ridge_at is None else ridge_at(hats, y)
            new = _keep_subspace(rsb_overlap_update(hats, y, sigma, ridge, G), init)
        except InvalidOverlaps as err:
            return RSBPoint(INVALID, str(err), y, it, residual, ov, None, np.nan, np.nan, time.perf_counter() - t0)
        residual = _residual(ov, new)
        if progress is not None:
            progress(it, residual, new)
        if np.min(np.linalg.eigvalsh(new.delta)) < collapse * np.max(np.abs(np.linalg.eigvalsh(new.q1))):
            # Δ ⪰ 0 is a constraint of the ansatz: an update that reaches its boundary is the RS saddle
            return RSBPoint(
                COLLAPSED,
                f"q1 - q0 fell below {collapse:g} q1 (the RS saddle)",
                y,
                it,
                residual,
                new,
                hats,
                np.nan,
                np.nan,
                time.perf_counter() - t0,
            )
        if residual < options.tol:
            phi = rsb_potential(ov, hats, ch.phi, y, alpha, sigma, ridge, G)
            if ridge_at is not None:  # Φ of the constrained weights: Φ(λ) + λ·(norm)/(2σ²) at the multiplier λ
                phi += ridge_channel.potential_shift(ridge)
            dphi = potential_y_derivative(ov, hats, ch, y, alpha, sigma, ridge, G)
            return RSBPoint(
                CONVERGED,
                f"converged to {residual:.1e}",
                y,
                it,
                residual,
                ov,
                hats,
                phi,
                dphi,
                time.perf_counter() - t0,
            )
        damped = ov.from_vector(options.damping * ov.vector() + (1 - options.damping) * new.vector())
        proposal = damped if mixer is None else ov.from_vector(mixer.step(ov.vector(), new.vector()))
        try:
            _admissible(proposal)
            ov = proposal
        except InvalidOverlaps:  # the extrapolation left the admissible set: plain damped step
            if mixer is not None:
                mixer.reset()
            ov = damped
    return RSBPoint(
        NOT_CONVERGED,
        f"residual {residual:.1e} after {options.max_iter} steps",
        y,
        options.max_iter,
        residual,
        ov,
        None,
        np.nan,
        np.nan,
        time.perf_counter() - t0,
    )


@dataclass(frozen=True)
class HingeChannel:
    """The quadratic hinge ℓ(h) = ½ max(0, κ − h)² of the perceptron as a :class:`Channel` (L = r = 1 and no
    teacher field, r_t = 0: random labels are absorbed into the patterns). Prox in closed form:
    ĥ = ω + V(κ − ω)₊/(1 + V), M = (κ − ω)₊²/(2(1 + V)) (docs/rsb.md section 9)."""

    kappa: float
    shape: tuple[int, int, int] = (1, 1, 0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kappa", check_number("kappa", self.kappa, -1e3, False, 1e3, "in [-1e3, 1e3]"))

    def prox(self, centre, h_star, V, warm=None) -> NodeAverages:
        v = float(np.asarray(V)[0, 0])
        f = np.maximum(self.kappa - centre, 0.0) / (1 + v)
        return NodeAverages(
            value=0.5 * (1 + v) * f[:, 0, 0] ** 2,
            h=centre + v * f,
            f=f,
            ff=np.einsum("nli,nlj->nij", f, f),
            g=np.zeros(np.shape(h_star)),
        )


@dataclass(frozen=True)
class StepChannel:
    """The error-counting loss ℓ(h) = θ(κ − h) of the perceptron (L = r = 1, r_t = 0) as a :class:`Channel`:
    the energy is the number of violated constraints (docs/rsb.md section 10). Prox in closed form: ĥ = ω
    for ω ≥ κ or ω ≤ κ − √(2V), ĥ = κ between, and M = min(1, (κ − ω)²/(2V)) for ω < κ, 0 above.
    M(ω; V) depends on (ω − κ)/√V only, so ``dilation_centre`` = κ: ∂Φ_ℓ/∂V has a value-only form."""

    kappa: float
    shape: tuple[int, int, int] = (1, 1, 0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kappa", check_number("kappa", self.kappa, -1e3, False, 1e3, "in [-1e3, 1e3]"))

    @property
    def dilation_centre(self) -> float:
        return self.kappa

    def prox(self, centre: np.ndarray, h_star: np.ndarray, V, warm: np.ndarray | None = None) -> NodeAverages:
        """centre (N, 1, 1), h_star (N, 1, 0), V (1, 1); ``warm`` is not needed (closed form)."""
        v = float(np.asarray(V)[0, 0])
        gap = self.kappa - centre  # (N, 1, 1)
        moved = (gap > 0) & (gap < np.sqrt(2 * v))  # pushed onto the margin
        f = np.where(moved, gap / v, 0.0)
        value = np.where(gap <= 0, 0.0, np.minimum(1.0, gap**2 / (2 * v)))[:, 0, 0]
        return NodeAverages(
            value=value, h=centre + v * f, f=f, ff=np.einsum("nli,nlj->nij", f, f), g=np.zeros(np.shape(h_star))
        )


@dataclass(frozen=True)
class SphericalWeights:
    """The weight channel of a norm constraint σ²|w|²/d = ``norm`` (r = 1; no teacher (r_t = 0), no positional part),
    as used by the spherical perceptron (docs/rsb.md section 9).

    The constraint is a ridge λ that is a Lagrange multiplier: at every step λ solves q1(λ) = norm in
    the closed-form overlap update (for q̂1 ⪰ q̂0, q1(λ) decreases strictly from +∞ where A reaches 0 to 0
    as λ → ∞, so the root is unique; otherwise a sign change above the edge of K, A ≻ 0 is taken),
    and the potential gains λ·norm/(2σ²)."""

    norm: float = 1.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "norm", check_number("norm", self.norm, 0.0, True, 1e6, "in (0, 1e6]"))
        object.__setattr__(self, "sigma", check_number("sigma", self.sigma, 0.0, True, 1e3, "in (0, 1e3]"))

    @property
    def G(self) -> np.ndarray:
        return np.zeros((1, 1))

    @property
    def rho(self) -> np.ndarray:
        """No teacher field (r_t = 0)."""
        return np.zeros((0, 0))

    def ridge_at(self, hats: RSBHats, y: float) -> float:
        """λ with q1(λ) = norm, q1 = q0 + (σ²/y)(A⁻¹ − K⁻¹), q0 = σ⁴q̂0/A² (θ̂ = μ̂ = 0), K = λ + σ²V̂,
        A = K − yσ²(q̂1 − q̂0).  Raises InvalidOverlaps if q̂0 < 0 (no root)."""
        from scipy.optimize import brentq

        s2 = self.sigma**2
        vh, dh, q0h = (float(np.asarray(x)[0, 0]) for x in (hats.V_hat, hats.q1_hat - hats.q0_hat, hats.q0_hat))
        if q0h < 0:
            raise InvalidOverlaps("q0_hat < 0: no multiplier gives q1 = norm")
        b0 = s2 * q0h + s2**2 * float(np.sum(np.asarray(hats.theta_hat) ** 2))

        shift = y * s2 * dh  # K − A

        def gap(d: float) -> float:  # q1 − norm at λ = edge + d, with K, A > 0 written without cancellation
            K, A = (d + shift, d) if shift > 0 else (d, d - shift)
            return s2 * b0 / A**2 + (s2 / y) * (1 / A - 1 / K) - self.norm

        edge = max(-s2 * vh, shift - s2 * vh)  # K > 0 and A > 0 above it
        scale = max(1.0, abs(edge))
        lo = next((scale * 2.0**-k for k in range(8, 200) if gap(scale * 2.0**-k) > 0), None)
        hi = next((scale * 2.0**k for k in range(0, 200) if gap(scale * 2.0**k) < 0), None)
        if lo is None or hi is None:  # q1 stays below (or above) the norm on the whole admissible range
            raise InvalidOverlaps("no multiplier gives q1 = norm")
        return float(edge + brentq(gap, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps))

    def potential_shift(self, ridge: float) -> float:
        """λ·norm/(2σ²): −e_t of the constraint term λ(σ²|w|²/d − norm)/(2σ²) removed from the ridge potential."""
        return ridge * self.norm / (2 * self.sigma**2)


def spherical_1rsb_root(
    alpha: float,
    channel: Channel,
    orders: tuple[int, int],
    bracket: tuple[float, float],
    start: tuple[float, float],
    options: RSBOptions = RSBOptions(max_iter=5000),
    y_rtol: float = 1e-7,
) -> tuple[float, RSBPoint]:
    """The spherical perceptron's 1RSB saddle (L = r = 1, r_t = 0, σ²|w|²/d = 1; docs/rsb.md sections 9, 10) at
    the root y* of Σ(y) in ``bracket`` (Brent to ``y_rtol``), each fixed-y solve from q1 = 1, (q0, V) = ``start``,
    on Gauss–Hermite rules of ``orders`` = (outer, inner) points. Returns (y*, the saddle at y*); raises
    InvalidOverlaps if a fixed-y solve does not converge."""
    from scipy.optimize import brentq

    outer, inner = gauss_hermite(1, orders[0]), gauss_hermite(1, orders[1])
    init = RSBOverlaps(
        q0=np.array([[start[0]]]),
        q1=np.array([[1.0]]),
        V=np.array([[start[1]]]),
        theta=np.zeros((1, 0)),
        mu=np.zeros((1, 1)),
    )
    points: dict[float, RSBPoint] = {}

    def sigma(y: float) -> float:
        points[y] = iterate_rsb(y, alpha, init, outer, inner, channel, SphericalWeights(), options)
        if not points[y].converged:
            raise InvalidOverlaps(f"y = {y:g}: {points[y].message}")
        return points[y].complexity

    y_star = brentq(sigma, *bracket, rtol=y_rtol)
    return y_star, points[y_star]


@dataclass(frozen=True)
class RSBResult:
    """The 1RSB answer beside the RS fixed point it started from.

    status: converged (y* is the root of Σ(y), found to ``y_rtol``), replica_symmetric (Σ < 0 at every
    y scanned where q1 − q0 stays > 0, or that gap vanishes at every y: e_t(y) = −Φ(y) is largest as
    y → 0, where it is the RS e_t, so 1RSB leaves e_t and ε_g at their RS values), not_bracketed
    (Σ > 0 at the largest y scanned and no sign change below), not_converged / invalid (a fixed-y
    run failed; its message). y, complexity, overlaps, iterations, residual: at y* (the smallest y of
    the scan for replica_symmetric). train_loss, test_error: the 1RSB e_t and ε_g (NaN unless
    converged; the RS values for replica_symmetric). rs_train_loss, rs_test_error: the RS fixed point.
    scan: every fixed-y point computed, in order.
    """

    status: str
    message: str
    alpha: float
    y: float
    complexity: float
    train_loss: float
    test_error: float
    rs_train_loss: float
    rs_test_error: float
    overlaps: RSBOverlaps | None
    iterations: int
    residual: float
    seconds: float
    scan: tuple[RSBPoint, ...]
    rules: dict

    @property
    def small_y_train_loss(self) -> float:
        """e_t(y) at the smallest y of the scan: the RS e_t on this same pair of rules, up to
        ∫_0^y Σ/y'² dy' (section 4 of docs/rsb.md), the reference for the 1RSB shift of e_t."""
        done = [p for p in self.scan if p.converged]
        return min(done, key=lambda p: p.y).train_loss if done else np.nan

    def to_row(self) -> dict:
        """One flat row (CSV/JSON): scalars, and the overlaps as nested lists."""
        ov = self.overlaps
        mat = (lambda a: None) if ov is None else (lambda a: np.asarray(a).tolist())
        return {
            "status": self.status,
            "message": self.message,
            "alpha": self.alpha,
            "y": self.y,
            "complexity": self.complexity,
            "train_loss": self.train_loss,
            "test_error": self.test_error,
            "rs_train_loss": self.rs_train_loss,
            "rs_test_error": self.rs_test_error,
            "q0": mat(ov and ov.q0),
            "q1": mat(ov and ov.q1),
            "V": mat(ov and ov.V),
            "theta": mat(ov and ov.theta),
            "mu": mat(ov and ov.mu),
            "iterations": self.iterations,
            "residual": self.residual,
            "seconds": self.seconds,
            "small_y_train_loss": self.small_y_train_loss,
            "scan": [
                {
                    "y": p.y,
                    "status": p.status,
                    "train_loss": p.train_loss,
                    "complexity": p.complexity,
                    "iterations": p.iterations,
                }
                for p in self.scan
            ],
            "rules": self.rules,
        }


def solve_rsb(
    problem: Problem, alpha: float, rs: FixedPoint, options: RSBOptions = RSBOptions(), *, progress=None
) -> RSBResult:
    """The zero-temperature 1RSB saddle next to a converged RS fixed point ``rs``.

    Scans all of ``options.y_grid`` (largest y first, each point warm-started from the previous),
    computes the complexity Σ(y) at each, and where it changes sign from positive (small y) to
    negative (large y) solves Σ(y*) = 0 by Brent's method; y* maximises e_t(y) = −Φ(y). ε_g at y* is the
    test error of one minimum, E ℓ with the fields of self-overlap q1 (the RS formula at q = q1),
    on the default RS rule.
    """
    t0 = time.perf_counter()
    require_variant(problem, "the 1RSB theory")
    check_instance("options", options, RSBOptions, "RSBOptions")
    alpha = check_alpha(alpha)
    if not isinstance(rs, FixedPoint) or not rs.converged:
        raise ParameterError("rs must be a converged RS FixedPoint (dotattn.solve(...).fixed_points[i].result)")
    channel = AttentionChannel(problem)
    outer, inner = options.rules(channel.shape)
    rules = {
        "kind": "gauss-hermite",
        "outer_order": options.outer_order,
        "inner_order": options.inner_order,
        "nodes": outer.size * inner.size,
    }
    start = RSBOverlaps.from_rs(rs.overlaps, options.split)
    scan: list[RSBPoint] = []

    def run(y: float, init: RSBOverlaps) -> RSBPoint:
        pt = iterate_rsb(y, alpha, init, outer, inner, channel, problem, options)
        scan.append(pt)
        if progress is not None:
            progress(pt)
        return pt

    def finish(status: str, message: str, pt: RSBPoint | None, y: float, e_t: float, eps: float) -> RSBResult:
        return RSBResult(
            status=status,
            message=message,
            alpha=alpha,
            y=y,
            complexity=np.nan if pt is None or not pt.converged else pt.complexity,
            train_loss=e_t,
            test_error=eps,
            rs_train_loss=rs.train_loss,
            rs_test_error=rs.test_error,
            overlaps=None if pt is None else pt.overlaps,
            iterations=int(sum(p.iterations for p in scan)),
            residual=np.nan if pt is None else pt.residual,
            seconds=time.perf_counter() - t0,
            scan=tuple(scan),
            rules=rules,
        )

    init = start
    for y in options.y_grid:  # the whole scan: e_t(y) at the smallest y is the RS value on this same rule
        pt = run(y, init)
        if pt.converged:  # a failed y (the map amplifies as y → 0) is kept in the scan and skipped;
            init = pt.overlaps  # a collapsed one is the RS saddle at that y (Δ = 0, Σ = 0)
    done = [p for p in scan if p.converged]
    if not done:
        if all(p.status == COLLAPSED for p in scan):
            return finish(
                REPLICA_SYMMETRIC,
                "q1 - q0 vanished at every y scanned: the 1RSB saddle is the RS one",
                scan[-1],
                0.0,
                rs.train_loss,
                rs.test_error,
            )
        bad = next(p for p in scan if p.status != COLLAPSED)
        return finish(bad.status, f"no y converged; y = {bad.y:g}: {bad.message}", bad, bad.y, np.nan, np.nan)
    for high, low in zip(done, done[1:], strict=False):  # y decreasing: Σ ≤ 0 at the larger y, > 0 at the smaller
        if high.complexity <= 0 < low.complexity:
            return _root(high, low, run, finish, options, problem)
    last = done[-1]
    if done[0].complexity > 0:
        return finish(
            NOT_BRACKETED,
            f"complexity > 0 at every y scanned (largest y = {options.y_grid[0]:g})",
            done[0],
            np.nan,
            np.nan,
            np.nan,
        )
    return finish(
        REPLICA_SYMMETRIC,
        f"complexity < 0 at every y where q1 > q0 (down to y = {last.y:g}): e_t(y) is largest as y -> 0, the RS value",
        last,
        0.0,
        rs.train_loss,
        rs.test_error,
    )


def _root(high: RSBPoint, low: RSBPoint, run, finish, options: RSBOptions, problem: Problem) -> RSBResult:
    """Brent's method on Σ(y) between ``low`` (Σ > 0) and ``high`` (Σ ≤ 0), warm-started from the
    nearer end; each evaluation is one fixed-y solve."""
    from scipy.optimize import brentq

    points: dict[float, RSBPoint] = {high.y: high, low.y: low}
    failure: list[RSBPoint] = []

    def sigma_of(y: float) -> float:
        if y in points:
            return points[y].complexity
        near = min(points.values(), key=lambda p: abs(np.log(p.y / y)))
        pt = run(y, near.overlaps)
        if not pt.converged:
            failure.append(pt)
            raise _RootFailure
        points[y] = pt
        return pt.complexity

    try:
        y_star = brentq(sigma_of, low.y, high.y, rtol=options.y_rtol, xtol=1e-12)
    except _RootFailure:
        pt = failure[0]
        return finish(pt.status, f"y = {pt.y:g}: {pt.message}", pt, pt.y, np.nan, np.nan)
    pt = points.get(y_star) or min(points.values(), key=lambda p: abs(p.y - y_star))
    rule = gauss_hermite(problem.gaussian_dim, TEST_ERROR_ORDER)
    eps, _ = test_error(pt.overlaps.rs(), rule, problem)
    return finish(CONVERGED, f"complexity changes sign at y = {y_star:.4g}", pt, pt.y, pt.train_loss, eps)


class _RootFailure(Exception):
    """A fixed-y solve inside the root search did not converge."""


TEST_ERROR_ORDER = 12
"""Gauss–Hermite points per axis for ε_g at the 1RSB point (the RS default for the toy model)."""


RSB_FILE = "rsb.json"
RESULT_STATUSES: tuple[str, ...] = (CONVERGED, REPLICA_SYMMETRIC, NOT_BRACKETED, NOT_CONVERGED, INVALID)


def rsb_made_for(problem: Problem, alpha: float, options: RSBOptions) -> dict[str, Any]:
    """The settings an ``rsb`` folder is made for (its manifest's ``made_for`` and rsb.json's parameters):
    known before anything is computed, so that ``solve --rsb 1 --out`` can refuse a folder of other settings."""
    return {
        "problem": problem.to_dict(),
        "alpha": float(alpha),
        "options": {k: getattr(options, k) for k in options.__dataclass_fields__},
    }


def write_rsb(
    folder,
    problem: Problem,
    alpha: float,
    entries: list[tuple[str, FixedPoint, RSBResult]],
    options: RSBOptions,
    seconds: float,
) -> None:
    """``folder/rsb.json`` (the RS fixed points and their 1RSB results, with provenance) and its manifest."""
    from pathlib import Path

    from dotattn.core.io import ensure_writable_dir, provenance, write_json, write_manifest

    folder = ensure_writable_dir(folder)
    made_for = rsb_made_for(problem, alpha, options)
    prov = provenance(made_for, seconds)
    body = dict(prov)
    body["results"] = [
        {
            "branch": branch,
            "rs": {
                "train_loss": rs.train_loss,
                "test_error": rs.test_error,
                "q": rs.overlaps.q.tolist(),
                "V": rs.overlaps.V.tolist(),
                "theta": rs.overlaps.theta.tolist(),
                "mu": rs.overlaps.mu.tolist(),
            },
            "rsb": res.to_row(),
        }
        for branch, rs, res in entries
    ]
    write_json(Path(folder) / RSB_FILE, body)
    write_manifest(folder, [RSB_FILE], made_for, provenance_record=prov)
