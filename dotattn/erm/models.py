"""Student models: low-rank dot-product attention (tied or untied) and the linear positional baseline.

Attention (SPEC section 1): ``ŷ = softmax(X Q Qᵀ Xᵀ / d) X`` with ``Q ∈ R^{d×r}`` (tied), or
``ŷ = softmax(X Q Kᵀ Xᵀ / d) X`` with ``Q, K ∈ R^{d×r}`` (untied); it depends on ``X`` only through
the fields ``h = X Q / √d``, ``k = X K / √d`` (shape ``(L, r)``) and ``X`` itself. A trainable value
matrix ``V = v I + U Wᵥᵀ/d`` gives ``ŷ = S X V`` (:func:`value_residual_pf`, ``docs/variants.md``).

Linear baseline (SPEC section 5): ``ŷ = B X`` with ``B ∈ R^{L×L}``.

Both are ``ŷ = S X`` for an ``L×L`` matrix ``S``, so with ``X = P + Z`` and ``y = T Z``

    ‖ŷ − y‖²_F = ‖S P + (S − T) Z‖²_F
              = Tr(S G Sᵀ) + 2 Tr(S Cpz Dᵀ) + Tr(D Czz Dᵀ),   D = S − T,
    G = P Pᵀ,  Cpz = P Zᵀ,  Czz = Z Zᵀ.

:func:`residual_sq_norm` evaluates this exact identity from ``L×L`` matrices, so training never
materialises ``ŷ`` or ``y`` (``(n, L, d)`` per run); the form has no cancellation between large
terms (``D`` is small where the error is small), so it is accurate in float32 as well.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "fields",
    "attention_matrix",
    "attention",
    "residual_sq_norm",
    "sample_stats",
    "attention_matrix_pf",
    "quadratic_residual_pf",
    "value_residual_pf",
    "linear_normal_equations",
    "fit_linear_baseline",
    "linear_predict",
]


def fields(X: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """Student fields ``h = X Q / √d``: ``X (..., L, d)``, ``Q (d, r)`` -> ``(..., L, r)``."""
    return X @ Q / math.sqrt(X.shape[-1])


def attention_matrix(h: torch.Tensor, k: torch.Tensor | None = None) -> torch.Tensor:
    """Row-wise ``softmax(h kᵀ)`` (``k = h`` when None): ``h, k (..., L, r)`` -> ``(..., L, L)``."""
    k = h if k is None else k
    return torch.softmax((h.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1), dim=-1)


def attention(X: torch.Tensor, Q: torch.Tensor, K: torch.Tensor | None = None) -> torch.Tensor:
    """Low-rank attention ``softmax(X Q Kᵀ Xᵀ / d) X`` (tied: ``K = Q`` when None):
    ``X (..., L, d)``, ``Q, K (d, r)`` -> ``(..., L, d)``."""
    return attention_matrix(fields(X, Q), None if K is None else fields(X, K)) @ X


def _bilinear_trace(A: torch.Tensor, C: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``Tr(A C Bᵀ) = Σ_ijk A_ij C_jk B_ik`` for broadcastable ``(..., L, L)`` -> ``(...)``.

    Written as broadcast products, not batched matmuls: for L×L blocks with L ~ 2 this is much
    faster on CPU, and broadcast operands (one teacher matrix for many runs) are never copied.
    """
    AC = (A.unsqueeze(-1) * C.unsqueeze(-3)).sum(-2)  # (..., L, L)
    return (AC * B).sum((-1, -2))


def residual_sq_norm(
    S: torch.Tensor, T: torch.Tensor, G: torch.Tensor, Cpz: torch.Tensor, Czz: torch.Tensor
) -> torch.Tensor:
    """``‖S X − T Z‖²_F`` from Gram matrices (module docstring); all ``(..., L, L)``, broadcast -> ``(...)``."""
    D = S - T
    return _bilinear_trace(S, G, S) + 2.0 * _bilinear_trace(S, Cpz, D) + _bilinear_trace(D, Czz, D)


def sample_stats(
    T: torch.Tensor, G: torch.Tensor, Cpz: torch.Tensor, Czz: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample ``(Cxx, Cyx, ‖y‖²) = (X Xᵀ, y Xᵀ, Tr(T Czz Tᵀ))``: ``(..., L, L)`` inputs -> two ``(..., L, L)`` and ``(...)``."""
    Cyx, Cxx = linear_normal_equations(T, G, Cpz, Czz)
    return Cxx, Cyx, _bilinear_trace(T, Czz, T)


def attention_matrix_pf(h: torch.Tensor, k: torch.Tensor | None = None) -> torch.Tensor:
    """Row-wise ``softmax(h kᵀ)`` (``k = h`` when None) in positions-first layout: ``h, k (L, r, ...)`` -> ``(L, L, ...)``."""
    k = h if k is None else k
    return torch.softmax((h.unsqueeze(1) * k.unsqueeze(0)).sum(2), dim=1)


def _left_pf(S: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``S a`` per sample in positions-first layout: ``S (L, L, ...)``, ``a (L, k, ...)`` -> ``(L, k, ...)``."""
    return (S.unsqueeze(2) * a.unsqueeze(0)).sum(1)


def value_residual_pf(
    S: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    pi: torch.Tensor,
    M: torch.Tensor,
    T: torch.Tensor,
    v: torch.Tensor | float,
) -> torch.Tensor:
    """What the low-rank value correction adds to ``‖v S X − T Z‖²_F``, positions-first.

    With ``V = v I + U Wᵥᵀ/d``, ``a = X U/√d``, ``b = X Wᵥ/√d`` (fields, ``(L, k, ...)``), ``π = P Wᵥ/√d``
    (``(L, k, ...)``, so ``Z Wᵥ/√d = b − π``), ``M = Wᵥᵀ Wᵥ/d`` (``(k, k, ...)``) and ``E = S a``:

        ‖S X V − T Z‖² = ‖v S X − T Z‖² + 2⟨E, v S b − T (b − π)⟩ + Tr(E M Eᵀ).

    ``S, T (L, L, ...)``, ``v`` broadcastable to the batch axes; returns ``(...)``.
    """
    E = _left_pf(S, a)
    cross = (E * (v * _left_pf(S, b) - _left_pf(T, b - pi))).sum((0, 1))
    EM = (E.unsqueeze(2) * M.unsqueeze(0)).sum(1)  # (E M)_lj = Σ_i E_li M_ij
    return 2.0 * cross + (EM * E).sum((0, 1))


def quadratic_residual_pf(S: torch.Tensor, Cxx: torch.Tensor, Cyx: torch.Tensor, cyy: torch.Tensor) -> torch.Tensor:
    """``‖S X − y‖²_F = Tr(S Cxx Sᵀ) − 2⟨S, Cyx⟩ + ‖y‖²`` in positions-first layout.

    ``S, Cxx, Cyx`` have shape ``(L, L, ...)`` (broadcastable batch axes), ``cyy`` ``(...)``;
    returns ``(...)``. ``Cxx`` must be symmetric.
    """
    SC = (S.unsqueeze(2) * Cxx.unsqueeze(0)).sum(1)  # (S Cxx)_ik = Σ_j S_ij Cxx_jk
    return ((SC - 2.0 * Cyx) * S).sum((0, 1)) + cyy


def linear_normal_equations(
    T: torch.Tensor, G: torch.Tensor, Cpz: torch.Tensor, Czz: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample ``(y Xᵀ, X Xᵀ)`` of the least-squares problem for ``B``, each ``(..., L, L)``.

    ``X Xᵀ = G + Cpz + Cpzᵀ + Czz`` and ``y Xᵀ = T Z (P + Z)ᵀ = T (Cpzᵀ + Czz)``.
    """
    CpzT = Cpz.transpose(-1, -2)
    return T @ (CpzT + Czz), G + Cpz + CpzT + Czz


def fit_linear_baseline(yx: torch.Tensor, xx: torch.Tensor, d: int, ridge: float = 1e-8) -> torch.Tensor:
    """Closed-form minimiser of ``Σ_μ ‖B X^μ − y^μ‖²_F/(2d) + (ridge/2)‖B‖²_F``.

    ``yx = Σ_μ y Xᵀ`` and ``xx = Σ_μ X Xᵀ`` (``(..., L, L)``); returns
    ``B = yx (xx + d·ridge·I)⁻¹``, shape ``(..., L, L)``.
    """
    L = xx.shape[-1]
    eye = torch.eye(L, dtype=xx.dtype, device=xx.device)
    # B M = yx with M symmetric  <=>  M Bᵀ = yxᵀ
    return torch.linalg.solve(xx + d * ridge * eye, yx.transpose(-1, -2)).transpose(-1, -2)


def linear_predict(X: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Linear positional baseline ``ŷ = B X``: ``X (..., L, d)``, ``B (L, L)`` -> ``(..., L, d)``."""
    return B @ X
