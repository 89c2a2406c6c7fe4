"""GAMP with the rotationally invariant denoiser (GAMP-RIE) for the L = 1 AIM at finite d.

Derivation: docs/aim_algorithms.md. One iteration, with c_ab = 2 (a = b) and 1 (a ≠ b) the
variance of <Δ, Z_ab> per unit (1/d)‖Δ‖²_F:

    ω^μ_ab = h_ab(Ŝ^t) − c_ab V^t g^{t−1,μ}_ab                       (output step, Onsager term)
    g^μ, ∂g^μ = g_out(y^μ, ω^μ, V^t), its diagonal derivative ∂g_ab/∂ω_ab
    A^t = (1/d²) Σ_μ Σ_{a≤b} c_ab (−∂g^μ_ab)                           (an SNR per isometric coordinate / d)
    R^t = Ŝ^t + (1/(A^t d)) Σ_μ Σ_{a≤b} g^μ_ab Z^μ_ab                  (input step; R = S* + √Δ GOE)
    Δ^t = 1/(2 A^t),  Ŝ^{t+1} = RIE_Δ(R^t),  V^{t+1} = MMSE_S(Δ^t)

started from the prior mean Ŝ⁰ = √ρ I, V⁰ = Q0 − ρ = 1, g^{−1} = 0. The factor 2 in Δ = 1/(2A) is
the GOE convention (off-diagonal entries of variance Δ/d, diagonal 2Δ/d) against the isometric
coordinates of a symmetric matrix (S_ii, √2 S_ij), on which the GAMP noise is isotropic.

Memory: the data (n T d tokens) plus O(n T² + d²): the sensing operator and its adjoint are applied
through :func:`dotattn.aim.model.attention_index` / :func:`~dotattn.aim.model.sensing_adjoint`
in chunks of samples; no n × d × d array is built.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dotattn.aim.model import AIMData, attention_index, sensing_adjoint
from dotattn.core.status import CONVERGED, DIVERGED, NOT_CONVERGED
from dotattn.core.validation import check_int, check_number

__all__ = ["AMPConfig", "AMPResult", "run_amp", "c_weights", "amp_input_step", "se_trajectory"]


def c_weights(T: int) -> np.ndarray:
    """c_ab: 2 on the diagonal, 1 off it (T, T): Var <Δ, Z_ab> = c_ab (1/d)‖Δ‖²_F for Gaussian tokens."""
    return np.where(np.eye(T, dtype=bool), 2.0, 1.0)


@dataclass(frozen=True)
class AMPConfig:
    """Iteration budget, stopping rule and damping of GAMP-RIE.

    ``tol``: stop when ‖Ŝ^{t+1} − Ŝ^t‖_F/‖Ŝ^t‖_F < tol (status ``converged``); ``max_iter`` the budget
    (``not_converged``); ``damping`` in [0, 1): Ŝ ← (1 − damping) RIE(R) + damping Ŝ (0: none). The
    default 0.5 is needed: undamped, the iteration diverges at d = 100 and 200 (docs/aim_algorithms.md §4).
    """

    max_iter: int = 300
    tol: float = 1e-5
    damping: float = 0.5

    if TYPE_CHECKING:  # the constructor the dataclass generates: max_iter may be a whole float (checked, made int)

        def __init__(self, max_iter: float = ..., tol: float = ..., damping: float = ...) -> None: ...

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_iter", check_int("max_iter", self.max_iter, 1, 100_000))
        object.__setattr__(self, "tol", check_number("tol", self.tol, 0.0, True, 1.0, "in (0, 1]"))
        object.__setattr__(
            self, "damping", check_number("damping", self.damping, 0.0, False, 1.0, "in [0, 1)", high_open=True)
        )

    def to_dict(self) -> dict[str, Any]:
        return {"max_iter": self.max_iter, "tol": self.tol, "damping": self.damping}


@dataclass(frozen=True, eq=False)
class AMPResult:
    """One AMP run: the estimate Ŝ (d, d), its error (1/d)‖Ŝ − S*‖²_F, the status, the iterations, and
    per iteration the measured error, AMP's own variance V^t and the effective noise Δ^t."""

    S_hat: np.ndarray
    mse: float
    status: str
    iterations: int
    mse_path: tuple[float, ...]
    V_path: tuple[float, ...]
    Delta_path: tuple[float, ...]
    seconds: float
    message: str = ""


def amp_input_step(X: np.ndarray, S_hat: np.ndarray, g: np.ndarray, dg: np.ndarray) -> tuple[np.ndarray, float]:
    """R = Ŝ + (1/(A d)) Σ_μ Σ_{a≤b} g_ab Z_ab and Δ = 1/(2A), A = (1/d²) Σ_μ Σ_{a≤b} c_ab (−∂g_ab).

    X (n, T, d); g, dg (n, T, T) symmetric (dg the derivative of g_ab in ω_ab). Returns (R, Δ);
    Δ = inf when A <= 0 (no information)."""
    n, T, d = X.shape
    iu = np.triu_indices(T)
    A = float(np.sum((c_weights(T) * -dg)[:, iu[0], iu[1]])) / d**2
    if not A > 0:
        return S_hat.copy(), math.inf
    R = S_hat + sensing_adjoint(X, g) / (A * d)
    return R, 1.0 / (2.0 * A)


BLOWUP = 100.0
"""A run has diverged when (1/d)‖Ŝ‖²_F exceeds BLOWUP times the prior's second moment Q0 = 1 + ρ (an
estimate a hundred times larger than any teacher; its error is then reported but not averaged)."""

OutputFn = Callable[[np.ndarray, np.ndarray, float], tuple[np.ndarray, np.ndarray]]
DenoiseFn = Callable[[np.ndarray, float], tuple[np.ndarray, float]]


def run_amp(
    data: AIMData,
    output: OutputFn,
    denoise: DenoiseFn,
    config: AMPConfig = AMPConfig(),
    progress: Callable[[int, float, float], None] | None = None,
) -> AMPResult:
    """GAMP-RIE on one data set.

    ``output(y, omega, V) -> (g, dg)``: the output function of the data's channel and its diagonal
    derivative, (n, T, T) each; ``denoise(R, Delta) -> (S_hat, mmse)``: the RIE of the observation
    R = S* + √Δ Z (Z GOE, semicircle on [−2, 2]) and the prior channel's MMSE at Δ (the next V).
    ``progress(t, mse_t, V_t)`` after each iteration.
    """
    t0 = time.perf_counter()
    d, T = data.d, data.T
    c = c_weights(T)
    S_hat = math.sqrt(data.r / d) * np.eye(d)  # prior mean E S* = √ρ I
    V = 1.0  # the prior's MMSE: Q0 − ρ = (1 + ρ) − ρ
    g = np.zeros((data.n, T, T))
    mse_path, V_path = [data.mse(S_hat)], [V]
    D_path: list[float] = []
    blowup = BLOWUP * (1.0 + data.r / d)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # non-finite values are detected below
        status, message, it, S_hat, V = _iterate(
            data, output, denoise, config, progress, S_hat, V, g, c, blowup, mse_path, V_path, D_path
        )
    return AMPResult(
        S_hat=S_hat,
        mse=data.mse(S_hat),
        status=status,
        iterations=it,
        mse_path=tuple(mse_path),
        V_path=tuple(V_path),
        Delta_path=tuple(D_path),
        seconds=time.perf_counter() - t0,
        message=message,
    )


def _iterate(data, output, denoise, config, progress, S_hat, V, g, c, blowup, mse_path, V_path, D_path):
    X, d = data.X, data.d
    status, message = NOT_CONVERGED, f"max_iter = {config.max_iter} reached"
    it = 0
    for it in range(1, config.max_iter + 1):
        omega = attention_index(X, S_hat) - c * V * g
        g, dg = output(data.y, omega, V)
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(dg))):
            status, message = DIVERGED, f"non-finite output function at iteration {it}"
            break
        R, Delta = amp_input_step(X, S_hat, g, dg)
        if not math.isfinite(Delta):
            status, message = DIVERGED, f"no information in the output step at iteration {it} (A <= 0)"
            break
        S_new, V_new = denoise(R, Delta)
        if config.damping:
            S_new = (1 - config.damping) * S_new + config.damping * S_hat
        if not (np.all(np.isfinite(S_new)) and math.isfinite(V_new)):
            status, message = DIVERGED, f"non-finite estimate at iteration {it}"
            break
        if np.sum(S_new * S_new) / d > blowup:
            status, message = DIVERGED, f"(1/d)|S_hat|^2 > {BLOWUP:g} Q0 at iteration {it}"
            S_hat = S_new
            break
        change = float(np.linalg.norm(S_new - S_hat) / max(np.linalg.norm(S_hat), 1e-300))
        S_hat, V = S_new, float(V_new)
        mse_path.append(data.mse(S_hat))
        V_path.append(V)
        D_path.append(Delta)
        if progress is not None:
            progress(it, mse_path[-1], V)
        if change < config.tol:
            status, message = CONVERGED, f"relative change {change:.2e} < tol {config.tol:g}"
            break
    else:
        message += f" (last relative change {change:.2e})"
    return status, message, it, S_hat, V


def se_trajectory(
    q_hat_of_V: Callable[[float], float], mmse_of_Delta: Callable[[float], float], iterations: int, V0: float = 1.0
) -> tuple[float, ...]:
    """AMP's own state evolution V^{t+1} = MMSE_S(1/q̂(V^t)) from V⁰ (one value per iteration, V⁰ first).

    Once V reaches 0 (perfect recovery: above the threshold the prior channel's MMSE vanishes; ``q_hat_of_V``
    may say so by returning ∞) it stays 0: q̂ = ∞ there, and the update is not evaluated."""
    V = [float(V0)]
    for _ in range(int(iterations)):
        if not V[-1] > 0:
            V.append(0.0)
            continue
        qh = q_hat_of_V(V[-1])
        V.append(0.0 if qh == math.inf else float(mmse_of_Delta(1.0 / qh)) if qh > 0 else V[-1])
    return tuple(V)
