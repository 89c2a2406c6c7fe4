"""The finite-width theory: the action S(U) = 𝓛(U) + α 𝓔(U), its minimiser, the predictor, the GP limit.

Derivation and notation: docs/attention_paths.md. Levels k = 1..L+1: U_k is the order parameter
of layer k (dimension d_k = H_k ⋯ H_L, indices (h_k, …, h_L) with h_k most significant), U_1 = U
is the H^L × H^L path-path matrix and U_{L+1} = U_a the readout's scalar (a 1 × 1 matrix). With
M_k = σ² I_{H_k} ⊗ U_{k+1} (M_{L+1} = σ²) and D(U‖M) = tr(M⁻¹U) − ln det(M⁻¹U) − dim ≥ 0,

    S = Σ_k D(U_k ‖ M_k) + N⁻¹ [ln det(K + 𝒯 I) + Yᵀ (K + 𝒯 I)⁻¹ Y],
    K_μν = c Σ_ππ' U^{ππ'} C_ππ'(x^μ, x^ν),  c = σ² / ∏_ℓ H_ℓ,

(N⁻¹ [...] = α 𝓔 with α = P/N). S is minimised over all levels jointly on Cholesky factors
(log diagonals), by Newton steps on the Hessian (the energy's part analytic, the entropy's a
central difference of its analytic gradient), with L-BFGS where they stall.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy
from scipy import linalg, optimize

from dotattn.core.rows import matrix_cell, read_float, read_int, read_matrix, read_text
from dotattn.core.status import CONVERGED, INVALID, NOT_CONVERGED
from dotattn.core.validation import ParameterError, check_int, check_number
from dotattn.paths.network import FactoredKernels, OutputKernels

Kernels = np.ndarray | FactoredKernels | OutputKernels
"""Path kernels (n, n, P_a, P_b): dense, factored, or the extended kernels of M outputs."""

__all__ = [
    "PathsModel",
    "TheoryResult",
    "level_dims",
    "gp_order_parameters",
    "action",
    "action_gradient",
    "minimise_action",
    "saddle_point_residual",
    "predict",
    "scalar_renormalisation",
    "kernel",
    "N_RANGE",
    "TEMPERATURE_RANGE",
    "SIGMA2_RANGE",
    "MAX_PATHS",
    "GRAD_TOL",
    "theta_from_levels",
    "levels_from_theta",
    "energy_hessian",
    "theta_hessian",
    "MAX_OUTPUTS",
    "MAX_EXTENDED_PATHS",
    "output_labels",
]

N_RANGE: tuple[float, float] = (1.0, 1e12)
"""Width N: the theory is the large-N saddle point (its error is O(1/N)); N = 1e12 is already the GP
limit to 1e-12 relative, far beyond what the float64 action resolves."""
TEMPERATURE_RANGE: tuple[float, float] = (1e-8, 1e4)
"""𝒯: below 1e-8 K + 𝒯I is singular to float64 for P ≥ N0 kernels; above 1e4 the labels are noise."""
SIGMA2_RANGE: tuple[float, float] = (1e-4, 1e4)
MAX_HEADS = 16
MAX_LAYERS = 6
MAX_PATHS = 64
"""Most paths ∏ H_ℓ: U has MAX_PATHS² entries and the kernel MAX_PATHS² P × P blocks."""
MAX_OUTPUTS = 64
"""Most outputs M (N-way episodes have M = N)."""
MAX_EXTENDED_PATHS = 320
"""Most paths times outputs n M: U_1 is (n M) × (n M) (docs/attention_paths.md §16)."""
GRAD_TOL = 1e-8
"""Relative stationarity of the returned optimum (see :func:`stationarity`)."""


@dataclass(frozen=True)
class PathsModel:
    """Width N, temperature 𝒯, prior variance σ² of every weight, heads per layer (H_1, …, H_L), outputs M
    (the readout a is M × N; every order parameter gains the output index, docs/attention_paths.md §16)."""

    N: float
    temperature: float = 0.01
    sigma2: float = 1.0
    heads: tuple[int, ...] = (2, 2)
    outputs: int = 1

    def __post_init__(self) -> None:
        lo, hi = N_RANGE
        object.__setattr__(self, "N", check_number("N (width)", self.N, lo, False, hi, f"in [{lo:g}, {hi:g}]"))
        lo, hi = TEMPERATURE_RANGE
        object.__setattr__(
            self, "temperature", check_number("temperature", self.temperature, lo, False, hi, f"in [{lo:g}, {hi:g}]")
        )
        lo, hi = SIGMA2_RANGE
        object.__setattr__(
            self, "sigma2", check_number("sigma2 (prior variance)", self.sigma2, lo, False, hi, f"in [{lo:g}, {hi:g}]")
        )
        heads = tuple(self.heads) if isinstance(self.heads, (list, tuple)) else None
        if not heads or not 1 <= len(heads) <= MAX_LAYERS:
            raise ParameterError(f"L (layers) must be in [1, {MAX_LAYERS}], got heads {self.heads!r}")
        heads = tuple(check_int("H (heads per layer)", h, 1, MAX_HEADS) for h in heads)
        if math.prod(heads) > MAX_PATHS:
            raise ParameterError(f"number of paths prod(H) must be <= {MAX_PATHS}, got {math.prod(heads)}")
        object.__setattr__(self, "heads", heads)
        M = check_int("outputs (M)", self.outputs, 1, MAX_OUTPUTS)
        if math.prod(heads) * M > MAX_EXTENDED_PATHS:
            raise ParameterError(
                f"outputs (M) times paths prod(H) must be <= {MAX_EXTENDED_PATHS}, got {M} x {math.prod(heads)}"
            )
        object.__setattr__(self, "outputs", M)

    @property
    def L(self) -> int:
        return len(self.heads)

    @property
    def n_paths(self) -> int:
        return math.prod(self.heads)

    @property
    def kernel_scale(self) -> float:
        """c = σ² / ∏ H_ℓ (the prior variance of V⁰ over the head normalisations)."""
        return self.sigma2 / self.n_paths

    @property
    def dims(self) -> list[int]:
        """d_k of every level (:func:`level_dims`)."""
        return level_dims(self.heads, self.outputs)

    def to_dict(self) -> dict[str, Any]:
        out = {"N": self.N, "temperature": self.temperature, "sigma2": self.sigma2, "heads": list(self.heads)}
        if self.outputs != 1:  # one output: the record of every earlier run, unchanged
            out["outputs"] = self.outputs
        return out


def level_dims(heads: Sequence[int], outputs: int = 1) -> list[int]:
    """d_k = H_k ⋯ H_L · M for k = 1..L, and M for the readout level L+1 (M = ``outputs``)."""
    return [math.prod(heads[k:]) * outputs for k in range(len(heads))] + [outputs]


def gp_order_parameters(model: PathsModel) -> list[np.ndarray]:
    """The GP (N → ∞) values U_k = σ^{2(L+2−k)} I_{d_k}, k = 1..L+1 (the prior means)."""
    dims = model.dims
    L = model.L
    return [model.sigma2 ** (L + 2 - (k + 1)) * np.eye(d) for k, d in enumerate(dims)]


# -- parametrisation --------------------------------------------------------------------------------


def theta_from_levels(levels: Sequence[np.ndarray]) -> np.ndarray:
    """Cholesky factors of the U_k, lower triangles row by row, diagonals as logarithms."""
    parts = []
    for U in levels:
        Lc = np.linalg.cholesky(U)
        i, j = np.tril_indices(U.shape[0])
        v = Lc[i, j].copy()
        v[i == j] = np.log(Lc[i, i][i == j])
        parts.append(v)
    return np.concatenate(parts)


def _factors(theta: np.ndarray, dims: Sequence[int]) -> list[np.ndarray]:
    out, pos = [], 0
    for d in dims:
        i, j = np.tril_indices(d)
        n = len(i)
        v = theta[pos : pos + n]
        pos += n
        Lc = np.zeros((d, d))
        Lc[i, j] = np.where(i == j, np.exp(np.clip(v, -350.0, 350.0)), v)
        out.append(Lc)
    return out


def levels_from_theta(theta: np.ndarray, heads: Sequence[int], outputs: int = 1) -> list[np.ndarray]:
    """U_k = L_k L_kᵀ, k = 1..L+1."""
    return [Lc @ Lc.T for Lc in _factors(theta, level_dims(heads, outputs))]


def output_labels(y: np.ndarray, outputs: int) -> np.ndarray:
    """Labels as the theory's vector: y (P,) for one output; Y (P, M) stacked output by output, vec Y (M P,)."""
    y = np.asarray(y, dtype=float)
    if outputs == 1 and y.ndim == 2 and y.shape[1] == 1:
        return y[:, 0]
    if outputs == 1 and y.ndim == 1:
        return y
    if y.ndim != 2 or y.shape[1] != outputs:
        raise ParameterError(f"labels must have shape (P, {outputs}) for {outputs} outputs, got {y.shape}")
    return y.T.reshape(-1)


def _prepared(C: Kernels, y: np.ndarray, model: PathsModel) -> tuple[Kernels, np.ndarray]:
    """(kernels, labels) as the one-output formulas take them: for M > 1 the extended paths
    (:class:`OutputKernels`) and vec Y. Idempotent."""
    M = model.outputs
    if isinstance(C, OutputKernels):
        if C.outputs != M:
            raise ParameterError(f"kernels of {C.outputs} outputs for a model of {M} outputs")
        return C, (np.asarray(y, dtype=float) if np.ndim(y) == 1 else output_labels(y, M))
    if M == 1:
        return C, output_labels(y, 1)
    return OutputKernels(C, M), output_labels(y, M)


# -- the action ------------------------------------------------------------------------------------


def _partial_trace(U: np.ndarray, H: int) -> np.ndarray:
    """Tr over the most significant index (of size H) of a (H d) × (H d) matrix: a d × d matrix."""
    d = U.shape[0] // H
    return np.einsum("hahb->ab", U.reshape(H, d, H, d))


def kernel(U: np.ndarray, C: Kernels, scale: float) -> np.ndarray:
    """K = c Σ_ππ' U^{ππ'} C_ππ', shape C.shape[2:] (C: (n, n, P_a, P_b), dense, factored, or the extended
    kernels of M outputs, :class:`OutputKernels`, with U of shape (n M, n M))."""
    if isinstance(C, (FactoredKernels, OutputKernels)):
        return scale * C.contract(U)
    return scale * np.tensordot(U, C, axes=([0, 1], [0, 1]))


def _kernel_adjoint(C: Kernels, B: np.ndarray) -> np.ndarray:
    """Σ_μν B_μν C_ππ'[μ, ν], shape (n, n)."""
    if isinstance(C, (FactoredKernels, OutputKernels)):
        return C.adjoint(B)
    return np.tensordot(C, B, axes=([2, 3], [0, 1]))


def _energy(U: np.ndarray, C: Kernels, y: np.ndarray, model: PathsModel) -> tuple[float, np.ndarray]:
    """ln det(K + 𝒯I) + Yᵀ(K + 𝒯I)⁻¹Y and its gradient in U: c Σ_μν (A − A Y Yᵀ A)_μν C_ππ'[μ, ν]."""
    value, grad, _ = _energy_parts(U, C, y, model)
    return value, grad


def _energy_parts(
    U: np.ndarray, C: Kernels, y: np.ndarray, model: PathsModel
) -> tuple[float, np.ndarray, tuple[Any, np.ndarray]]:
    """(energy, its gradient, (the Cholesky factor of K + 𝒯I, A Y)) at U."""
    K = kernel(U, C, model.kernel_scale)
    K[np.diag_indices_from(K)] += model.temperature
    cf = linalg.cho_factor(K, lower=True, check_finite=False)
    Ay = linalg.cho_solve(cf, y, check_finite=False)
    A = linalg.cho_solve(cf, np.eye(len(y)), check_finite=False)
    value = 2.0 * np.sum(np.log(np.diag(cf[0]))) + float(y @ Ay)
    B = A - np.outer(Ay, Ay)
    grad = model.kernel_scale * _kernel_adjoint(C, B)
    return value, 0.5 * (grad + grad.T), (A, Ay)


def energy_hessian(U: np.ndarray, C: Kernels, y: np.ndarray, model: PathsModel) -> np.ndarray:
    """∂²E/∂U_ab ∂U_cd, shape (n, n, n, n), of E = ln det(K + 𝒯I) + Yᵀ(K + 𝒯I)⁻¹Y over the n² entries of U
    (K = c Σ_ab U_ab C_ab; A = (K + 𝒯I)⁻¹, w = A Y):

        c² [−tr(A C_ab A C_cd) + wᵀ C_ab A C_cd w + wᵀ C_cd A C_ab w]        (docs/attention_paths.md §8).

    Factored kernels (C_ab = X_a X_bᵀ/N0) go through M[a, i, b, j] = (X_aᵀ A X_b)_ij, (n N0)² numbers:
    tr(A C_ab A C_cd) = Σ_ij M[d, i, a, j] M[b, j, c, i]/N0², never the n² P² kernel entries."""
    C, y = _prepared(C, y, model)
    _, _, (A, w) = _energy_parts(U, C, y, model)
    return _energy_hessian_at(A, w, C, U.shape[0], model.kernel_scale)


def _energy_hessian_at(A: np.ndarray, w: np.ndarray, C: Kernels, n: int, scale: float) -> np.ndarray:
    """:func:`energy_hessian` from A = (K + 𝒯I)⁻¹ and w = A Y (M outputs: on the extended kernels)."""
    if isinstance(C, OutputKernels):
        C = C.extended()
    if isinstance(C, FactoredKernels):
        if C.xi_a is not C.xi_b and not np.array_equal(C.xi_a, C.xi_b):
            raise ParameterError("energy_hessian needs the training kernels (the same path inputs on both sides)")
        X = C.xi_a  # (n, P, N0)
        N0 = X.shape[2]
        flat = X.transpose(1, 0, 2).reshape(X.shape[1], n * N0)  # (P, n N0)
        M = (flat.T @ (A @ flat)).reshape(n, N0, n, N0) / N0  # (X_a^T A X_b)_ij / N0
        left = M.transpose(0, 2, 1, 3).reshape(n * n, N0 * N0)  # [d a, i j] = M[d, i, a, j]
        right = M.transpose(0, 2, 3, 1).reshape(n * n, N0 * N0)  # [b c, i j] = M[b, j, c, i]
        trace = (left @ right.T).reshape(n, n, n, n).transpose(1, 2, 3, 0)  # [d, a, b, c] -> [a, b, c, d]
        v = np.einsum("api,p->ai", X, w) / math.sqrt(N0)  # X_a^T w / √N0
        cross = np.einsum("ai,bicj,dj->abcd", v, M, v, optimize=True)  # w^T C_ab A C_cd w
    else:
        AC = np.einsum("mk,abkn->abmn", A, C, optimize=True)  # A C_ab
        trace = np.einsum("abmn,cdnm->abcd", AC, AC, optimize=True)
        q = np.einsum("m,abmk->abk", w, C)  # w^T C_ab
        cross = np.einsum("abk,cdk->abcd", q, np.einsum("cdkn,n->cdk", AC, w))  # w^T C_ab (A C_cd w)
    return scale**2 * (-trace + cross + cross.transpose(2, 3, 0, 1))


def _entropy_terms(levels: Sequence[np.ndarray], model: PathsModel) -> tuple[float, list[np.ndarray], list[float]]:
    """(entropy 𝓛, ∂𝓛/∂U_k per level, the scale of each level's gradient terms)."""
    heads, s2 = model.heads, model.sigma2
    nlev = len(levels)
    inv = [np.linalg.inv(U) for U in levels]
    grads = [np.zeros_like(U) for U in levels]
    scales = [0.0] * nlev
    entropy = 0.0
    for k, U in enumerate(levels):
        d = U.shape[0]
        if k < nlev - 1:
            H = heads[k]
            Minv = np.kron(np.eye(H), inv[k + 1]) / s2
            logdetM = d * math.log(s2) + H * np.linalg.slogdet(levels[k + 1])[1]
            # the dependence of D_k on U_{k+1}
            up = -inv[k + 1] @ _partial_trace(U, H) @ inv[k + 1] / s2
            grads[k + 1] += up + H * inv[k + 1]
            scales[k + 1] += np.linalg.norm(up) + H * np.linalg.norm(inv[k + 1])
        else:
            Minv = np.eye(d) / s2
            logdetM = d * math.log(s2)
        entropy += float(np.sum(Minv * U)) - np.linalg.slogdet(U)[1] + logdetM - d
        grads[k] += Minv - inv[k]
        scales[k] += np.linalg.norm(Minv) + np.linalg.norm(inv[k])
    return entropy, grads, scales


def _terms(
    levels: Sequence[np.ndarray], C: Kernels, y: np.ndarray, model: PathsModel
) -> tuple[float, float, list[np.ndarray], list[float]]:
    """(entropy 𝓛, energy N α 𝓔, ∂S/∂U_k per level, the scale of each level's gradient terms)."""
    entropy, grads, scales = _entropy_terms(levels, model)
    energy, g_e = _energy(levels[0], C, y, model)
    grads[0] += g_e / model.N
    scales[0] += np.linalg.norm(g_e) / model.N
    return entropy, energy, grads, scales


def action(levels: Sequence[np.ndarray], C: Kernels, y: np.ndarray, model: PathsModel) -> float:
    """S = 𝓛 + α𝓔 at the order parameters ``levels`` = [U_1, …, U_L, U_a] (each as a matrix); ``y``: (P,), or
    (P, M) for M = ``model.outputs`` outputs."""
    C, y = _prepared(C, y, model)
    entropy, energy, _, _ = _terms(levels, C, y, model)
    return entropy + energy / model.N


def action_gradient(levels: Sequence[np.ndarray], C: Kernels, y: np.ndarray, model: PathsModel) -> list[np.ndarray]:
    """∂S/∂U_k for each level, as symmetric matrices G_k with dS = Σ_k tr(G_k dU_k)."""
    C, y = _prepared(C, y, model)
    return _terms(levels, C, y, model)[2]


def stationarity(levels: Sequence[np.ndarray], C: Kernels, y: np.ndarray, model: PathsModel) -> float:
    """max_k ‖∂S/∂U_k‖_F / (sum of the Frobenius norms of the terms of ∂S/∂U_k): the relative residual
    of the saddle-point equations (0 at a stationary point, 1 when the terms do not cancel at all)."""
    C, y = _prepared(C, y, model)
    _, _, grads, scales = _terms(levels, C, y, model)
    return max(float(np.linalg.norm(g)) / s for g, s in zip(grads, scales, strict=True))


def _theta_gradient(factors: Sequence[np.ndarray], grads: Sequence[np.ndarray]) -> np.ndarray:
    """The gradient in θ from the symmetric ∂S/∂U_k: dS/dL_k = 2 G_k L_k, times L_ii on the log-diagonals."""
    out = []
    for Lc, G in zip(factors, grads, strict=True):
        dL = 2.0 * G @ Lc
        i, j = np.tril_indices(Lc.shape[0])
        out.append(np.where(i == j, dL[i, j] * Lc[i, j], dL[i, j]))
    return np.concatenate(out)


def _theta_objective(theta: np.ndarray, C: Kernels, y: np.ndarray, model: PathsModel) -> tuple[float, np.ndarray]:
    facs = _factors(theta, model.dims)
    levels = [Lc @ Lc.T for Lc in facs]
    entropy, energy, grads, _ = _terms(levels, C, y, model)
    return entropy + energy / model.N, _theta_gradient(facs, grads)


def _factor_jacobian(Lc: np.ndarray) -> np.ndarray:
    """∂U_ab/∂θ_j for U = L Lᵀ (L lower triangular, diagonal stored as logarithms): shape (d², d(d+1)/2)."""
    d = Lc.shape[0]
    i, j = np.tril_indices(d)
    dL = np.zeros((len(i), d, d))
    dL[np.arange(len(i)), i, j] = np.where(i == j, Lc[i, j], 1.0)
    dU = dL @ Lc.T
    return (dU + dU.transpose(0, 2, 1)).reshape(len(i), d * d).T


HESSIAN_STEP = 1e-6
"""Central-difference step (relative to max(1, |θ_i|)) for the entropy part of :func:`theta_hessian`:
truncation ~1e-12, round-off ~1e-16/1e-6 = 1e-10 relative."""


def theta_hessian(theta: np.ndarray, C: Kernels, y: np.ndarray, model: PathsModel) -> np.ndarray:
    """∇²S in θ. The energy enters through U_1 alone: ∇²(E/N) = J₁ᵀ (∂²E/∂U²) J₁/N + Σ_ab (∂E/∂U_ab) ∇²U_ab/N
    with J₁ = ∂U_1/∂θ₁ (:func:`energy_hessian`, one P × P inverse and (n N0)² numbers); the rest (the
    entropy and the curvature of U_k(θ), which cost no kernel evaluation) is a central difference of the
    θ-gradient with ∂E/∂U_1 frozen at θ."""
    C, y = _prepared(C, y, model)
    dims = model.dims
    facs = _factors(theta, dims)
    U = facs[0] @ facs[0].T
    _, g_e, (A, w) = _energy_parts(U, C, y, model)

    def frozen(th: np.ndarray) -> np.ndarray:
        f = _factors(th, dims)
        _, grads, _ = _entropy_terms([Lc @ Lc.T for Lc in f], model)
        grads[0] = grads[0] + g_e / model.N
        return _theta_gradient(f, grads)

    m = len(theta)
    Hm = np.empty((m, m))
    for i in range(m):
        h = HESSIAN_STEP * max(1.0, abs(theta[i]))
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        Hm[:, i] = (frozen(tp) - frozen(tm)) / (2 * h)
    J = _factor_jacobian(facs[0])
    n, m1 = U.shape[0], J.shape[1]
    Hm[:m1, :m1] += J.T @ _energy_hessian_at(A, w, C, n, model.kernel_scale).reshape(n * n, n * n) @ J / model.N
    return 0.5 * (Hm + Hm.T)


@dataclass(frozen=True)
class TheoryResult:
    """The minimiser of S: status, the order parameters per level, the action's parts and the residuals."""

    status: str
    N: float
    levels: tuple[np.ndarray, ...]
    action: float
    entropy: float
    energy: float
    iterations: int
    stationarity: float
    message: str = ""
    seconds: float = 0.0

    @property
    def converged(self) -> bool:
        return self.status == CONVERGED

    @property
    def U(self) -> np.ndarray:
        """U_1, the path-path order parameter (n_paths × n_paths)."""
        return self.levels[0]

    def to_row(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "N": self.N,
            "action": self.action,
            "entropy": self.entropy,
            "energy": self.energy,
            "iterations": self.iterations,
            "stationarity": self.stationarity,
            "message": self.message,
            "seconds": self.seconds,
            "levels": [matrix_cell(U) for U in self.levels],
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TheoryResult:
        import json

        levels = row["levels"]
        if isinstance(levels, str):
            levels = json.loads(levels)
        matrices = []
        for k, cell in enumerate(levels, start=1):
            U = read_matrix(cell)
            if U is None:  # every level of a result is a matrix (to_row writes each)
                raise ValueError(f"level {k} of {len(levels)} is missing")
            matrices.append(U)
        return cls(
            status=read_text(row["status"]),
            N=read_float(row["N"]),
            levels=tuple(matrices),
            action=read_float(row["action"]),
            entropy=read_float(row["entropy"]),
            energy=read_float(row["energy"]),
            iterations=read_int(row["iterations"]),
            stationarity=read_float(row["stationarity"]),
            message=read_text(row.get("message")),
            seconds=read_float(row.get("seconds")),
        )


HESSIAN_MAX_NUMBERS = 5 * 10**7
"""Largest work array of :func:`energy_hessian` (dense: n² P² for A C_ab; factored: (n N0)² for M, and n⁴):
400 MB in float64. Beyond it :func:`minimise_action` runs L-BFGS alone."""


def _hessian_numbers(C: Kernels, n: int) -> int:
    if isinstance(C, OutputKernels):
        M = C.outputs
        if isinstance(C.base, FactoredKernels):
            return max((n * C.base.xi_a.shape[2]) ** 2, n**4)
        return max(n * n * M * M * C.base.shape[2] * C.base.shape[3], n**4)
    if isinstance(C, FactoredKernels):
        return max((n * C.xi_a.shape[2]) ** 2, n**4)
    return max(n * n * C.shape[2] * C.shape[3], n**4)


HESSIAN_MAX_OPERATIONS = 2 * 10**10
"""Most multiply-adds of one Newton step (:func:`_hessian_operations`): about 5–10 s on one core. Beyond it
:func:`minimise_action` runs L-BFGS alone. The one-output studies are far below (16 paths, N0 = 83: 5·10⁸);
16 paths with 5 outputs (80 extended paths, N0 = 86) need 3·10¹¹ for the energy Hessian alone."""


def _hessian_operations(C: Kernels, n: int, n_theta: int) -> int:
    """Multiply-adds of one Newton step: the energy Hessian's trace term ((n N0)² by (n N0)² for factored
    kernels: n⁴ N0²; dense: n⁴ P²) and the eigendecomposition of the θ-Hessian (~10 m³)."""
    base = C.base if isinstance(C, OutputKernels) else C
    width = base.xi_a.shape[2] if isinstance(base, FactoredKernels) else C.shape[2]
    return n**4 * width**2 + 10 * n_theta**3


LBFGS_CHECK_EVERY = 10
"""Iterations between two stationarity checks of L-BFGS when it runs alone: each check costs about one
iteration; on 16 paths x 5 outputs the relative stationarity reached 1e-6 after 38 of 60 iterations at
N = 1000 and after 121 of 174 at N = 10 (random kernels, P = 60)."""
_SCIPY_STOPS_ON_CALLBACK = tuple(int(v) for v in scipy.__version__.split(".")[:2]) >= (1, 11)
"""A callback may end scipy's minimize by raising StopIteration from scipy 1.11 on."""

NEWTON_MAX_STEP = 3.0
"""Largest change of one coordinate θ_i per Newton step (on a log-diagonal: a factor e³ on that Cholesky entry);
far from the minimum the full step overshoots by many orders of magnitude."""


def _newton(fun: Any, hess: Any, theta: np.ndarray, done: Any, steps: int) -> tuple[np.ndarray, int, bool]:
    """Newton steps with the Hessian's eigenvalues replaced by their absolute values (floored at 1e-12 of the
    largest), so every step is a descent direction, at most NEWTON_MAX_STEP in every coordinate, and backtracking until S does not rise (a trial point where
    K + 𝒯I is not positive definite to float64 counts as a rise); stops when
    ``done(theta)``, after ``steps`` steps, or when no step length down to 1e-6 lowers S.
    Returns (θ, steps taken, done)."""
    for k in range(steps):
        if done(theta):
            return theta, k, True
        f0, g = fun(theta)
        w, Q = np.linalg.eigh(hess(theta))
        step = -Q @ ((Q.T @ g) / np.maximum(np.abs(w), 1e-12 * max(1.0, np.max(np.abs(w)))))
        step *= min(1.0, NEWTON_MAX_STEP / max(float(np.max(np.abs(step))), 1e-300))
        t = 1.0
        while t >= 1e-6:
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    ft = fun(theta + t * step)[0]
            except np.linalg.LinAlgError:  # K + 𝒯I not positive definite to float64 at the trial point
                ft = math.inf
            if np.isfinite(ft) and ft <= f0 + 1e-12 * max(1.0, abs(f0)):
                break
            t *= 0.5
        if t < 1e-6:
            return theta, k, done(theta)
        theta = theta + t * step
    return theta, steps, done(theta)


def minimise_action(
    C: Kernels,
    y: np.ndarray,
    model: PathsModel,
    start: Sequence[np.ndarray] | None = None,
    tol: float = GRAD_TOL,
    max_iter: int = 5000,
    newton_steps: int = 40,
) -> TheoryResult:
    """The minimum of S from ``start`` (default: the GP value): Newton steps on the analytic Hessian
    (:func:`theta_hessian`); where they stall short of ``tol``, L-BFGS from there, then Newton again.

    ``C``: path kernels on the training set, (n_paths, n_paths, P, P), dense or factored; ``y``: labels (P,), or
    (P, M) for M = ``model.outputs`` > 1 outputs (then the levels are (n M) × (n M), …, M × M). Status
    ``converged`` when :func:`stationarity` ≤ ``tol``; ``invalid`` when the action is not finite.
    """
    t0 = time.perf_counter()
    n = model.n_paths
    base = C.base if isinstance(C, OutputKernels) else C
    P = len(y) if np.ndim(y) >= 1 else -1
    if base.shape[:2] != (n, n) or base.shape[2] != base.shape[3] or base.shape[2] != P:
        raise ParameterError(f"path kernels must have shape ({n}, {n}, P, P) with P = len(y) = {P}, got {base.shape}")
    C, y = _prepared(C, y, model)
    n = n * model.outputs
    levels0 = list(start) if start is not None else gp_order_parameters(model)
    theta = theta_from_levels(levels0)
    fun = lambda th: _theta_objective(th, C, y, model)  # noqa: E731
    hess = lambda th: theta_hessian(th, C, y, model)  # noqa: E731
    stat_of = lambda th: stationarity(levels_from_theta(th, model.heads, model.outputs), C, y, model)  # noqa: E731
    done = lambda th: stat_of(th) <= tol  # noqa: E731
    use_newton = (
        _hessian_numbers(C, n) <= HESSIAN_MAX_NUMBERS
        and _hessian_operations(C, n, len(theta)) <= HESSIAN_MAX_OPERATIONS
    )
    try:
        iters, parts = 0, []
        if use_newton:
            theta, k, ok = _newton(fun, hess, theta, done, newton_steps)
            iters += k
            parts.append(f"{k} Newton steps")
        if not use_newton or not ok:
            seen = [0]

            def check(xk: np.ndarray) -> None:
                # L-BFGS alone (no Newton to finish): stop once stationary to ``tol`` (checked every
                # LBFGS_CHECK_EVERY iterations) instead of running on to its own float64 limits
                seen[0] += 1
                if seen[0] % LBFGS_CHECK_EVERY == 0 and done(xk):
                    raise StopIteration

            res = optimize.minimize(
                fun,
                theta,
                jac=True,
                method="L-BFGS-B",
                callback=check if not use_newton and _SCIPY_STOPS_ON_CALLBACK else None,
                options={"maxiter": max_iter, "maxcor": 30, "gtol": 1e-13, "ftol": 1e-16},
            )
            theta = res.x
            iters += int(res.nit)
            parts.append(f"L-BFGS {int(res.nit)} iterations: {res.message}")
            if use_newton:
                theta, k, ok = _newton(fun, hess, theta, done, newton_steps)
                iters += k
                parts.append(f"{k} Newton steps")
        levels = levels_from_theta(theta, model.heads, model.outputs)
        stat = stat_of(theta)
        message = "; ".join(parts)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError) as err:
        return TheoryResult(
            status=INVALID,
            N=model.N,
            levels=tuple(levels0),
            action=float("nan"),
            entropy=float("nan"),
            energy=float("nan"),
            iterations=0,
            stationarity=float("nan"),
            message=f"{type(err).__name__}: {err}",
            seconds=time.perf_counter() - t0,
        )
    entropy, energy, _, _ = _terms(levels, C, y, model)
    S = entropy + energy / model.N
    status = CONVERGED if stat <= tol else (INVALID if not np.isfinite(S) else NOT_CONVERGED)
    return TheoryResult(
        status=status,
        N=model.N,
        levels=tuple(np.array(U) for U in levels),
        action=S,
        entropy=entropy,
        energy=energy,
        iterations=iters,
        stationarity=stat,
        message=message,
        seconds=time.perf_counter() - t0,
    )


def saddle_point_residual(U: np.ndarray, U2: np.ndarray, C: np.ndarray, y: np.ndarray, model: PathsModel) -> float:
    """Relative residual of U⁻¹ = (σ² I_{H_1} ⊗ U_2)⁻¹ + N⁻¹ c Σ_μν [A − A Y Yᵀ A]_μν C_ππ'[μ, ν], A = (K + 𝒯I)⁻¹,
    written out independently of the solver (``U2``: the next level, U_a for L = 1)."""
    P = len(y)
    K = kernel(U, C, model.kernel_scale) + model.temperature * np.eye(P)
    A = np.linalg.inv(K)
    Ay = A @ y
    B = A - np.outer(Ay, Ay)
    G = model.kernel_scale * np.einsum("mn,abmn->ab", B, C)
    rhs = np.kron(np.eye(model.heads[0]), np.linalg.inv(U2)) / model.sigma2 + G / model.N
    lhs = np.linalg.inv(U)
    return float(np.linalg.norm(lhs - rhs) / np.linalg.norm(lhs))


def predict(
    U: np.ndarray,
    C_train: Kernels,
    y: np.ndarray,
    C_cross: np.ndarray | FactoredKernels,
    C_diag: np.ndarray,
    model: PathsModel,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the predictor on test inputs: kᵀ(K + 𝒯I)⁻¹Y and K(x*, x*) − kᵀ(K + 𝒯I)⁻¹k.

    ``C_cross``: (n, n, P_test, P) kernels test-train; ``C_diag``: (n, n, P_test) test-test diagonals.
    With M = ``model.outputs`` > 1 (``y``: (P, M), ``U``: (n M, n M)) mean and variance have shape (P_test, M):
    the mean of every output and its variance (the diagonal of the M × M covariance, docs/attention_paths.md §16).
    """
    if model.outputs > 1:
        return _predict_outputs(U, C_train, y, C_cross, C_diag, model)
    y = output_labels(y, 1)
    c = model.kernel_scale
    K = kernel(U, C_train, c) + model.temperature * np.eye(len(y))
    k = kernel(U, C_cross, c)  # (P_test, P)
    cf = linalg.cho_factor(K, lower=True)
    mean = k @ linalg.cho_solve(cf, y)
    kk = c * np.einsum("ab,abp->p", U, C_diag)
    var = kk - np.einsum("pm,mp->p", k, linalg.cho_solve(cf, k.T))
    return mean, var


def _predict_outputs(
    U: np.ndarray,
    C_train: Kernels,
    y: np.ndarray,
    C_cross: np.ndarray | FactoredKernels,
    C_diag: np.ndarray,
    model: PathsModel,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`predict` for M > 1 outputs, on the extended paths (test points ordered (m, μ) like the training)."""
    M, c = model.outputs, model.kernel_scale
    Ct, yv = _prepared(C_train, y, model)
    Cx = C_cross if isinstance(C_cross, OutputKernels) else OutputKernels(C_cross, M)
    K = kernel(U, Ct, c) + model.temperature * np.eye(len(yv))
    k = kernel(U, Cx, c)  # (M P_test, M P)
    cf = linalg.cho_factor(K, lower=True)
    mean = k @ linalg.cho_solve(cf, yv)
    n = model.n_paths
    U4 = U.reshape(n, M, n, M)
    kk = c * np.einsum("ambm,abp->mp", U4, C_diag).reshape(-1)
    var = kk - np.einsum("pm,mp->p", k, linalg.cho_solve(cf, k.T))
    P_test = C_diag.shape[2]
    return mean.reshape(M, P_test).T, var.reshape(M, P_test).T


def scalar_renormalisation(C: np.ndarray, y: np.ndarray, N: float, temperature: float, sigma2: float = 1.0) -> float:
    """H = L = 1 in closed form: U = u², u the global minimiser of
    s(u) = 2u/σ² − 2 ln u + N⁻¹ Σ_k [ln(σ² u² λ_k + 𝒯) + y_k²/(σ² u² λ_k + 𝒯)],
    λ_k, y_k: eigenvalues of the single path kernel C (P × P) and the labels in its eigenbasis.
    Solved by a log-grid scan and Brent's method on s'(u) = 0 (independent of :func:`minimise_action`)."""
    lam, vec = np.linalg.eigh(C)
    lam = np.clip(lam, 0.0, None)
    yk2 = (vec.T @ y) ** 2

    def s(u: float) -> float:
        g = sigma2 * u * u * lam + temperature
        return 2 * u / sigma2 - 2 * math.log(u) + float(np.sum(np.log(g) + yk2 / g)) / N

    def ds(u: float) -> float:
        g = sigma2 * u * u * lam + temperature
        return 2 / sigma2 - 2 / u + float(np.sum(2 * u * sigma2 * lam * (1 / g - yk2 / g**2))) / N

    grid = np.geomspace(1e-6, 1e6, 2401)
    vals = np.array([s(u) for u in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    if ds(lo) * ds(hi) > 0:
        return float(grid[i] ** 2)
    u = optimize.brentq(ds, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return float(u * u)
