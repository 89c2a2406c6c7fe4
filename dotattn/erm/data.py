"""Seeded data for the finite-size experiments (SPEC section 1).

A sample is ``X = P + Z`` (shape ``(L, d)``) with fixed positional embeddings ``P`` (rows
``p_l``, Gram ``P Pᵀ = G``) and content ``Z`` with ``N(0, σ²)`` entries, independent across the d
coordinates and, across positions, correlated by the problem's token correlation c:
``E[z_l z_l'ᵀ] = σ² C_ll' I_d``, ``C = (1 − c) I_L + c 1 1ᵀ`` (``Z = σ L_C E`` with ``L_C`` the Cholesky
factor of C and E i.i.d. N(0, 1); c = 0 skips the product, so its numbers are those drawn before c existed). The teacher
``Q* ∈ R^{d×r_t}`` has i.i.d. ``N(0, 1)`` entries and the target is

    y = T Z,    T = (1-ω) softmax(Z Q* Q*ᵀ Zᵀ / d) + ω A        (row-wise softmax).

Randomness is drawn on the CPU from :class:`torch.Generator` objects seeded by
``numpy.random.SeedSequence([seed, stream, block])`` and then moved to the requested device,
so a seed gives the same numbers on every device. Samples are generated in fixed blocks of
:data:`BLOCK` samples, each with its own generator: the first ``n`` samples of a data set do
not depend on how many samples were requested in total (a run at ``α`` sees the same data
whatever the largest ``α`` of the grid).

Training never needs ``y`` itself: the loss is a function of the small per-sample Gram
matrices kept in :class:`Dataset` (see :func:`dotattn.erm.models.residual_sq_norm`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dotattn.core.validation import ParameterError
from dotattn.erm.config import TEACHERS
from dotattn.positional_semantic.problem import STUDENTS, Problem, require_variant

__all__ = [
    "BLOCK",
    "TEACHERS",
    "STREAM_TEACHER",
    "STREAM_TRAIN",
    "STREAM_TEST",
    "STREAM_INIT",
    "generator",
    "positional_basis",
    "positional_embeddings",
    "teacher_weights",
    "content_noise",
    "token_cholesky",
    "teacher_attention",
    "targets",
    "Dataset",
    "make_dataset",
]

BLOCK = 256
"""Samples per independently seeded block."""

STREAM_TEACHER, STREAM_TRAIN, STREAM_TEST, STREAM_INIT = 0, 1, 2, 3


def generator(seed: int, stream: int, block: int = 0) -> torch.Generator:
    """A CPU generator for ``(seed, stream, block)``; distinct triples give independent streams."""
    state = np.random.SeedSequence([int(seed), int(stream), int(block)]).generate_state(2, np.uint32)
    g = torch.Generator(device="cpu")
    g.manual_seed(int(state[0]) << 32 | int(state[1]))
    return g


def positional_basis(
    d: int, k: int, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The first ``k`` orthonormal DCT-II vectors of ``R^d``, shape ``(d, k)``; column 0 is ``1/√d``."""
    if k > d:
        raise ParameterError(f"d must be >= L = {k} to embed L orthonormal positional directions, got d = {d}")
    i = torch.arange(d, dtype=torch.float64)
    cols = [torch.full((d,), 1.0 / math.sqrt(d), dtype=torch.float64)]
    for j in range(1, k):
        cols.append(math.sqrt(2.0 / d) * torch.cos(math.pi * j * (i + 0.5) / d))
    return torch.stack(cols, dim=1).to(dtype=dtype, device=device)


def positional_embeddings(
    G: np.ndarray, d: int, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Positional embeddings ``P`` (shape ``(L, d)``) with ``P Pᵀ = G``.

    ``P = U Λ^{1/2} Eᵀ`` from the eigendecomposition ``G = U Λ Uᵀ`` (eigenvalues descending,
    each eigenvector signed so that its first non-negligible entry is positive) and the
    orthonormal DCT directions ``E`` of :func:`positional_basis`. For the toy Gram
    ``[[1,-1],[-1,1]]`` this gives exactly ``p_1 = -p_2 = 1_d/√d``.
    """
    G = np.asarray(G, dtype=float)
    L = G.shape[0]
    lam, U = np.linalg.eigh(G)
    order = np.argsort(-lam, kind="stable")
    lam, U = np.clip(lam[order], 0.0, None), U[:, order]
    for j in range(L):
        col = U[:, j]
        first = np.flatnonzero(np.abs(col) > 1e-12)
        if first.size and col[first[0]] < 0:
            U[:, j] = -col
    coef = torch.as_tensor(U * np.sqrt(lam)[None, :], dtype=torch.float64)  # (L, L)
    E = positional_basis(d, L, torch.float64)  # (d, L)
    return (coef @ E.T).to(dtype=dtype, device=device)


def teacher_weights(
    d: int,
    teacher_rank: int,
    seed: int,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    kind: str = "gaussian",
) -> torch.Tensor:
    """Teacher ``Q*``, shape ``(d, r_t)``: ``kind`` one of :data:`TEACHERS`.

    ``gaussian``: i.i.d. N(0, 1) entries (SPEC section 1). ``orthonormal``: ``√d`` times the
    orthonormal factor of the QR decomposition of the same Gaussian draw (signs fixed so that
    ``diag R > 0``), so ``Q*ᵀQ*/d = I`` exactly; its columns span the same uniformly random
    subspace, and ``Q*ᵀQ*/d → I`` for the Gaussian teacher as ``d → ∞``: the limit is the same.
    """
    if kind not in TEACHERS:
        raise ParameterError(f"teacher must be one of {', '.join(TEACHERS)}, got {kind!r}")
    g = generator(seed, STREAM_TEACHER)
    W = torch.randn(d, teacher_rank, generator=g, dtype=torch.float64)
    if kind == "orthonormal":
        Qf, Rf = torch.linalg.qr(W)
        sign = torch.sign(torch.diagonal(Rf))
        W = math.sqrt(d) * Qf * torch.where(sign == 0, 1.0, sign)
    return W.to(dtype=dtype, device=device)


def token_cholesky(L: int, correlation: float) -> torch.Tensor:
    """Lower Cholesky factor of the token covariance ``C = (1 − c) I_L + c 1 1ᵀ`` (float64, ``(L, L)``);
    C is positive definite for c in (−1/(L−1), 1) (eigenvalues 1 − c and 1 + (L − 1) c)."""
    C = (1.0 - correlation) * np.eye(L) + correlation * np.ones((L, L))
    return torch.as_tensor(np.linalg.cholesky(C), dtype=torch.float64)


def content_noise(
    n: int,
    L: int,
    d: int,
    sigma: float,
    seed: int,
    stream: int,
    start: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    correlation: float = 0.0,
) -> torch.Tensor:
    """Content ``Z`` for samples ``start .. start+n-1`` of a stream, shape ``(n, L, d)``, entries N(0, σ²),
    with ``E[z_l z_l'ᵀ] = σ² C_ll' I_d`` (``C`` of :func:`token_cholesky`; ``correlation`` = c).

    Sample ``k`` is the same whatever ``start`` and ``n`` are (block-wise seeding); for c = 0 the
    numbers are bit for bit those of the i.i.d. draw (no product with the Cholesky factor).
    """
    if n <= 0:
        return torch.zeros(0, L, d, dtype=dtype, device=device)
    first, last = start // BLOCK, (start + n - 1) // BLOCK
    parts = [
        torch.randn(BLOCK, L, d, generator=generator(seed, stream, b), dtype=torch.float64)
        for b in range(first, last + 1)
    ]
    Z = torch.cat(parts, dim=0)[start - first * BLOCK : start - first * BLOCK + n]
    if correlation != 0.0:
        Z = token_cholesky(L, correlation) @ Z  # z_l = Σ_l' (L_C)_ll' e_l'
    return (sigma * Z).to(dtype=dtype, device=device)


def teacher_attention(Z: torch.Tensor, Q_star: torch.Tensor, A: torch.Tensor, omega: float) -> torch.Tensor:
    """``T = (1-ω) softmax(Z Q* Q*ᵀ Zᵀ / d) + ω A``: ``Z (..., L, d)``, ``Q* (d, r_t)`` -> ``(..., L, L)``."""
    d = Z.shape[-1]
    h = Z @ Q_star / math.sqrt(d)  # teacher fields h*, (..., L, r_t)
    return (1.0 - omega) * torch.softmax(h @ h.transpose(-1, -2), dim=-1) + omega * A


def targets(Z: torch.Tensor, Q_star: torch.Tensor, A: torch.Tensor, omega: float) -> torch.Tensor:
    """Targets ``y = T Z``, shape ``(..., L, d)`` (the semantic part sees the content ``Z`` only)."""
    return teacher_attention(Z, Q_star, A, omega) @ Z


@dataclass(frozen=True)
class Dataset:
    """Samples of one teacher, with the per-sample statistics the loss needs.

    Attributes (``n`` samples)
    ----------
    X : tokens, ``(n, L, d)``.
    P : positional embeddings, ``(L, d)``; the content is ``Z = X - P``.
    T : teacher attention ``(1-ω) softmax(h* h*ᵀ) + ω A``, ``(n, L, L)``; the target is ``y = T Z``.
    Cpz : ``P Zᵀ``, ``(n, L, L)``.
    Czz : ``Z Zᵀ``, ``(n, L, L)``.
    """

    X: torch.Tensor
    P: torch.Tensor
    T: torch.Tensor
    Cpz: torch.Tensor
    Czz: torch.Tensor

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def Z(self) -> torch.Tensor:
        """Content ``Z = X - P``, ``(n, L, d)``."""
        return self.X - self.P

    @property
    def y(self) -> torch.Tensor:
        """Targets ``y = T Z``, ``(n, L, d)`` (materialised on demand)."""
        return self.T @ self.Z

    @property
    def G(self) -> torch.Tensor:
        """``P Pᵀ``, ``(L, L)``."""
        return self.P @ self.P.T

    def head(self, n: int) -> Dataset:
        """The first ``n`` samples."""
        return Dataset(self.X[:n], self.P, self.T[:n], self.Cpz[:n], self.Czz[:n])


def make_dataset(
    problem: Problem,
    Q_star: torch.Tensor,
    P: torch.Tensor,
    n: int,
    seed: int,
    stream: int = STREAM_TRAIN,
    start: int = 0,
) -> Dataset:
    """Samples ``start .. start+n-1`` of a seeded stream for teacher ``Q*`` (dtype/device of ``Q*``).

    The teacher does not depend on the student architecture; the contents ``Z`` carry the problem's
    token correlation, and the Gram matrices ``Cpz = P Zᵀ``, ``Czz = Z Zᵀ`` are those of these ``Z``."""
    require_variant(problem, "ERM", students=STUDENTS, correlated=True)
    L, d = P.shape
    Z = content_noise(
        n, L, d, problem.sigma, seed, stream, start, Q_star.dtype, Q_star.device, problem.token_correlation
    )
    A = torch.tensor(np.array(problem.A), dtype=Q_star.dtype, device=Q_star.device)
    T = teacher_attention(Z, Q_star, A, problem.omega)
    X = Z + P
    return Dataset(X=X, P=P, T=T, Cpz=P @ Z.transpose(-1, -2), Czz=Z @ Z.transpose(-1, -2))
