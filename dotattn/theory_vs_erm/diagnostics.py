"""The theory's formulas evaluated at a finite-size run's exact overlaps (the restart diagnostics).

Given a run's overlaps ``q`` (r×r), ``θ`` (r×r_t), ``μ`` (L×r) and its teacher's exact overlaps
``ρ = σ² Q*ᵀQ*/d`` (r_t×r_t) and ``ν = Q*ᵀPᵀ/√d`` (r_t×L; the teacher's positional overlaps):

* :func:`test_error_at` — ε_g = E[ℓ(h, h*)] with the fields of covariance [[q, θ], [θᵀ, ρ]] and
  student means μ (:func:`dotattn.positional_semantic.loss_channel.test_error` with ρ = σ² I replaced by the run's ρ).

* :func:`train_loss_at` — the replica-symmetric training loss at those overlaps: −Φ with q, θ, μ
  held at the run's values and V and every conjugate stationary. The regulariser channel with a
  general teacher gives, at fixed (q, θ, μ) (K = λ I + σ² V̂ = σ² V⁻¹),

      q₀ ≡ q − σ² Y Ω⁺ Yᵀ = V q̂ V,      q̂ = α E[f fᵀ](q, V, θ, μ; ρ),
      Y = [θ/σ², μᵀ] (r×(r_t+L)),        Ω = [[ρ/σ², ν], [νᵀ, G]] (the Gram of [Q*/√d, Pᵀ]),

  (q₀ = σ² Q_⊥ᵀQ_⊥/d is the part of q outside the span of the teacher and the embeddings), and

      e_t = −Φ = α E[M](q, V, θ, μ; ρ) + λ Tr q / (2σ²) − ½ Tr(V⁻¹ q₀).

  For ρ = σ² I, ν = 0 and the overlaps of a fixed point this is the solver's e_t (tested). Only
  r = 1 is implemented (V is then the root of one monotone scalar equation, found by bisection in
  log V); larger r report status ``invalid`` with the reason.

:func:`diagnose_restarts` applies both to the records of ``dotattn erm-restarts``. Pure numpy;
no torch (the ERM records it reads are torch-free).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq

from dotattn.core.rows import read_float, read_int, read_text
from dotattn.core.status import CONVERGED, INVALID, NOT_CONVERGED
from dotattn.erm.restart_records import RestartRecord
from dotattn.positional_semantic.loss import attention_loss, teacher_attention
from dotattn.positional_semantic.overlaps import InvalidOverlaps
from dotattn.positional_semantic.problem import Problem, require_variant
from dotattn.positional_semantic.prox import prox
from dotattn.positional_semantic.quadrature import GaussianRule

__all__ = [
    "exact_fields",
    "test_error_at",
    "noise_overlap",
    "envelope_moments",
    "FixedOverlapLoss",
    "train_loss_at",
    "DiagnosticRecord",
    "DIAGNOSTIC_COLUMNS",
    "diagnose_restarts",
]


def _chol(name: str, a: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(0.5 * (a + a.T))
    except np.linalg.LinAlgError:
        raise InvalidOverlaps(f"{name} is not positive definite") from None


def exact_fields(
    q: np.ndarray, theta: np.ndarray, mu: np.ndarray, rho: np.ndarray, rule: GaussianRule, problem: Problem
) -> tuple[np.ndarray, np.ndarray]:
    """Student centres ω = μ + Cξ (N, L, r) and teacher fields h* = Bᵀξ + Dη (N, L, r_t) at the rule's
    nodes, C = chol(q), B = C⁻¹θ, D = chol(ρ − BᵀB) (InvalidOverlaps if they do not exist)."""
    require_variant(problem, "the restart diagnostics")
    L, r, rt = problem.L, problem.rank, problem.teacher_rank
    if rule.dim != L * (r + rt):
        raise ValueError(f"quadrature rule has dimension {rule.dim}, the problem needs L(r + r_t) = {L * (r + rt)}")
    q, theta, mu, rho = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, theta, mu, rho))
    C = _chol("q", q)
    B = np.linalg.solve(C, theta)
    D = _chol("rho - theta^T q^-1 theta", rho - B.T @ B)
    N = rule.size
    xi = rule.nodes[:, : L * r].reshape(N, L, r)
    eta = rule.nodes[:, L * r :].reshape(N, L, rt)
    centre = mu.reshape(L, r)[None] + np.einsum("nlj,ij->nli", xi, C)
    h_star = np.einsum("nlj,jk->nlk", xi, B) + np.einsum("nlj,kj->nlk", eta, D)
    return centre, h_star


def test_error_at(
    q: np.ndarray, theta: np.ndarray, mu: np.ndarray, rho: np.ndarray, rule: GaussianRule, problem: Problem
) -> tuple[float, float]:
    """ε_g = E[ℓ(h, h*)] at the given overlaps and teacher overlap ρ, and its quadrature standard error."""
    centre, h_star = exact_fields(q, theta, mu, rho, rule, problem)
    values = attention_loss(centre, teacher_attention(h_star, problem), problem)
    return float(rule.expect(values)), float(rule.standard_error(values))


def noise_overlap(
    q: np.ndarray, theta: np.ndarray, mu: np.ndarray, rho: np.ndarray, nu: np.ndarray, problem: Problem
) -> np.ndarray:
    """q₀ = q − σ² Y Ω⁺ Yᵀ (r×r): the self-overlap outside the span of the teacher and the embeddings
    (module docstring). ``nu`` (r_t×L) is the teacher's positional overlap Q*ᵀPᵀ/√d."""
    s2 = problem.sigma**2
    q, theta, mu, rho, nu = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, theta, mu, rho, nu))
    Y = np.hstack([theta / s2, mu.T])
    Omega = np.block([[rho / s2, nu], [nu.T, problem.G]])
    q0 = q - s2 * Y @ np.linalg.pinv(Omega, rcond=1e-12, hermitian=True) @ Y.T
    return 0.5 * (q0 + q0.T)


def envelope_moments(
    centre: np.ndarray, h_star: np.ndarray, V: np.ndarray, rule: GaussianRule, problem: Problem
) -> tuple[float, np.ndarray]:
    """(E[M], E[Σ_l f_l f_lᵀ]) with the global prox at every node, f = V⁻¹(ĥ − ω); shapes () and (r, r)."""
    px = prox(centre, teacher_attention(h_star, problem), np.atleast_2d(V), problem)
    ff = np.einsum("n,nli,nlj->ij", rule.weights, px.f, px.f)
    return float(rule.expect(px.value)), 0.5 * (ff + ff.T)


@dataclass(frozen=True)
class FixedOverlapLoss:
    """Result of :func:`train_loss_at`: ``status`` (converged / not_converged / invalid) and ``message``;
    ``V`` and ``q_hat`` (r×r) at the stationary point, ``q0`` the noise overlap, ``envelope`` E[M],
    ``train_loss`` e_t (NaN unless converged), ``iterations`` evaluations of the envelope and
    ``residual`` the last relative residual of V q̂ V = q₀."""

    status: str
    message: str
    V: np.ndarray | None
    q_hat: np.ndarray | None
    q0: np.ndarray | None
    envelope: float
    train_loss: float
    iterations: int
    residual: float

    @property
    def converged(self) -> bool:
        return self.status == CONVERGED


def train_loss_at(
    problem: Problem,
    alpha: float,
    q: np.ndarray,
    theta: np.ndarray,
    mu: np.ndarray,
    rho: np.ndarray,
    nu: np.ndarray,
    rule: GaussianRule,
    *,
    xtol: float = 1e-10,
    max_evaluations: int = 60,
) -> FixedOverlapLoss:
    """e_t of the replica-symmetric theory at fixed (q, θ, μ) with the teacher's ρ and ν (module
    docstring): V solves V q̂(V) V = q₀ (r = 1: bisection in log V to relative ``xtol``)."""
    nan = float("nan")

    def fail(status: str, message: str, it: int = 0, q0: np.ndarray | None = None) -> FixedOverlapLoss:
        return FixedOverlapLoss(
            status=status,
            message=message,
            V=None,
            q_hat=None,
            q0=q0,
            envelope=nan,
            train_loss=nan,
            iterations=it,
            residual=nan,
        )

    if problem.rank != 1:
        return fail(INVALID, f"e_t at fixed overlaps is implemented for rank 1 only (rank = {problem.rank})")
    q0 = noise_overlap(q, theta, mu, rho, nu, problem)
    if not q0[0, 0] > 0:
        return fail(INVALID, f"noise overlap q0 = {q0[0, 0]:.3e} is not positive", q0=q0)
    try:
        centre, h_star = exact_fields(q, theta, mu, rho, rule, problem)
    except InvalidOverlaps as err:
        return fail(INVALID, f"invalid overlaps: {err}", q0=q0)
    target = q0[0, 0]
    cache: dict[float, tuple[float, np.ndarray]] = {}

    def moments(logV: float) -> tuple[float, np.ndarray]:
        if logV not in cache:
            cache[logV] = envelope_moments(centre, h_star, np.array([[math.exp(logV)]]), rule, problem)
        return cache[logV]

    def F(logV: float) -> float:  # V² α E[f²] / q₀ − 1: increasing in V, −1 at V → 0
        V = math.exp(logV)
        return V * V * alpha * float(moments(logV)[1][0, 0]) / target - 1.0

    lo, hi = math.log(1e-3), math.log(1.0)
    f_lo, f_hi = F(lo), F(hi)
    while f_lo > 0 and lo > math.log(1e-12):
        lo, hi, f_hi = lo - 3.0, lo, f_lo
        f_lo = F(lo)
    while f_hi < 0 and hi < math.log(1e8):
        lo, f_lo, hi = hi, f_hi, hi + 3.0
        f_hi = F(hi)
    if not (f_lo <= 0 <= f_hi):
        return fail(NOT_CONVERGED, f"no bracket for V in [1e-12, 1e8] (F = {f_lo:.2e}, {f_hi:.2e})", len(cache), q0)
    try:
        logV = brentq(F, lo, hi, xtol=xtol, rtol=xtol, maxiter=max_evaluations)
    except RuntimeError as err:
        return fail(NOT_CONVERGED, f"V root not found: {err}", len(cache), q0)
    V = math.exp(logV)
    envelope, ff = moments(logV)
    q_hat = alpha * ff
    e_t = (
        alpha * envelope + problem.ridge * float(np.trace(np.atleast_2d(q))) / (2 * problem.sigma**2) - 0.5 * target / V
    )
    return FixedOverlapLoss(
        status=CONVERGED,
        message="V stationary",
        V=np.array([[V]]),
        q_hat=q_hat,
        q0=q0,
        envelope=envelope,
        train_loss=float(e_t),
        iterations=len(cache),
        residual=abs(F(logV)),
    )


DIAGNOSTIC_COLUMNS: tuple[str, ...] = (
    "d",
    "alpha",
    "seed",
    "restart",
    "start",
    "branch",
    "status",
    "erm_test_error",
    "erm_test_error_se",
    "theory_test_error",
    "theory_test_error_rho_sigma2",
    "test_error_rel_diff",
    "erm_train_loss",
    "theory_train_loss",
    "train_loss_rel_diff",
    "V",
    "q0",
    "message",
)


@dataclass(frozen=True)
class DiagnosticRecord:
    """One run's diagnostic: ``theory_test_error`` (ε_g formula at the run's q, θ, μ, ρ),
    ``theory_test_error_rho_sigma2`` (the same with ρ = σ² I), ``theory_train_loss`` (e_t at the
    run's overlaps, :func:`train_loss_at`; ``status``/``message`` its outcome), the ERM values and
    relative differences (theory − ERM)/ERM; ``V``, ``q0`` of the stationary point (r = 1: scalars)."""

    d: int
    alpha: float
    seed: int
    restart: int
    start: str
    branch: str
    status: str
    erm_test_error: float
    erm_test_error_se: float
    theory_test_error: float
    theory_test_error_rho_sigma2: float
    erm_train_loss: float
    theory_train_loss: float
    V: float
    q0: float
    message: str

    @property
    def test_error_rel_diff(self) -> float:
        return (self.theory_test_error - self.erm_test_error) / self.erm_test_error

    @property
    def train_loss_rel_diff(self) -> float:
        return (self.theory_train_loss - self.erm_train_loss) / self.erm_train_loss

    def to_row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in DIAGNOSTIC_COLUMNS}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DiagnosticRecord:
        ints, texts = ("d", "seed", "restart"), ("start", "branch", "status", "message")
        kw: dict[str, Any] = {
            k: (read_int(row[k]) if k in ints else read_text(row[k]) if k in texts else read_float(row[k]))
            for k in DIAGNOSTIC_COLUMNS
            if not k.endswith("_rel_diff")
        }
        return cls(**kw)


def diagnose_restarts(
    problem: Problem, runs: Sequence[RestartRecord], rule: GaussianRule, progress: Callable[[int], None] | None = None
) -> list[DiagnosticRecord]:
    """:func:`test_error_at` and :func:`train_loss_at` for every converged run (α = n/d of the run)."""
    out = []
    rho_rs = problem.rho
    for run in runs:
        if run.status != CONVERGED:
            continue
        alpha = run.n / run.d
        try:
            eps, _ = test_error_at(run.q, run.theta, run.mu, run.teacher_rho, rule, problem)
            eps_rs, _ = test_error_at(run.q, run.theta, run.mu, rho_rs, rule, problem)
        except InvalidOverlaps as err:
            eps = eps_rs = float("nan")
            res = FixedOverlapLoss(
                INVALID, f"invalid overlaps: {err}", None, None, None, float("nan"), float("nan"), 0, float("nan")
            )
        else:
            res = train_loss_at(problem, alpha, run.q, run.theta, run.mu, run.teacher_rho, run.teacher_nu, rule)
        out.append(
            DiagnosticRecord(
                d=run.d,
                alpha=run.alpha,
                seed=run.seed,
                restart=run.restart,
                start=run.start,
                branch=run.branch,
                status=res.status,
                erm_test_error=run.test_error,
                erm_test_error_se=run.test_error_se,
                theory_test_error=eps,
                theory_test_error_rho_sigma2=eps_rs,
                erm_train_loss=run.train_loss,
                theory_train_loss=res.train_loss,
                V=float(res.V[0, 0]) if res.V is not None else float("nan"),
                q0=float(res.q0[0, 0]) if res.q0 is not None else float("nan"),
                message=res.message,
            )
        )
        if progress is not None:
            progress(1)
    return out
