"""The attention-indexed model (AIM) at L = 1: teacher, tokens, attention index, outputs (numpy).

Notation (docs/aim_algorithms.md): tokens X^μ ∈ ℝ^{T×d} (rows x_a ~ N(0, I_d)), teacher
S* = W Wᵀ/√(r d) with W ∈ ℝ^{d×r} Gaussian, attention index
h_ab = (x_a S x_b − δ_ab Tr S)/√d = <S, Z_ab> with the sensing matrices
Z_ab = sym(x_a x_bᵀ − δ_ab I)/√d (Frobenius product <A, B> = Tr AᵀB), outputs y = g(h) row-wise
(softmax_β or hardmax). α = n/d², ρ = r/d. Arrays: X (n, T, d), h and y (n, T, T), S (d, d).

The forward map :func:`attention_index` and its adjoint :func:`sensing_adjoint` are the only ways
the algorithms touch the data; both are chunked over samples, so no n × d × d array is ever built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dotattn.aim.channels import CHANNELS, softmax_rows
from dotattn.aim.prior import sample_teacher as _prior_teacher
from dotattn.core.validation import ParameterError, check_int, check_number

__all__ = [
    "CHANNELS",
    "AIMData",
    "sample_teacher",
    "sample_tokens",
    "attention_index",
    "sensing_adjoint",
    "outputs",
    "fresh_samples",
    "softmax_rows",
    "hardmax_rows",
    "make_data",
    "teacher_rank",
    "data_bytes",
    "chunk_size",
    "check_d",
]

D_MAX = 2000
"""Largest dimension d accepted by the generator (a d × d teacher, n = α d² samples of T × d tokens)."""
CHUNK_BYTES = 64 * 2**20
"""Working memory of one chunk of samples in :func:`attention_index` / :func:`sensing_adjoint`."""

_STREAM_TEACHER, _STREAM_TOKENS, _STREAM_FRESH = 1, 2, 5


def check_d(d: Any) -> int:
    """The dimension d, an integer in [2, :data:`D_MAX`]."""
    return check_int("d", d, 2, D_MAX)


def teacher_rank(d: int, rho: float) -> int:
    """r = round(ρ d), at least 1 (ParameterError if ρ d < 1/2, where no integer width fits)."""
    r = int(round(rho * d))
    if r < 1:
        raise ParameterError(f"rho * d must be >= 0.5 (a teacher of width r >= 1), got rho = {rho:g}, d = {d}")
    return r


def _rng(seed: int, stream: int) -> np.random.Generator:
    """The generator of one stream of ``seed`` (an integer in [0, 2^32), ParameterError otherwise: a
    fractional seed is refused, never truncated)."""
    return np.random.default_rng(np.random.SeedSequence([check_int("seed", seed, 0, 2**32 - 1), stream]))


def sample_teacher(d: int, r: int, seed: int) -> np.ndarray:
    """S* = W Wᵀ/√(r d), W ∈ ℝ^{d×r} with i.i.d. N(0, 1) entries; (d, d), symmetric.
    (1/d) Tr S*² → Q0 = 1 + ρ (exactly 1 + ρ + 1/d in expectation)."""
    S = _prior_teacher(d, r / d, _rng(seed, _STREAM_TEACHER))
    return (S + S.T) / 2


def sample_tokens(n: int, T: int, d: int, seed: int) -> np.ndarray:
    """n sequences of T tokens x_a ~ N(0, I_d): (n, T, d)."""
    return _rng(seed, _STREAM_TOKENS).standard_normal((n, T, d))


def chunk_size(T: int, d: int, budget: int = CHUNK_BYTES) -> int:
    """Samples per chunk so that a chunk's (chunk, T, d) float64 temporaries stay within ``budget`` bytes."""
    return max(1, budget // (8 * 2 * T * d))


def attention_index(X: np.ndarray, S: np.ndarray) -> np.ndarray:
    """h^μ_ab = (x_a S x_b − δ_ab Tr S)/√d for every sample: X (n, T, d), S (d, d) symmetric -> (n, T, T)."""
    n, T, d = X.shape
    h = np.empty((n, T, T))
    step = chunk_size(T, d)
    for s in range(0, n, step):
        Xc = X[s : s + step]
        h[s : s + step] = np.matmul(Xc @ S, Xc.transpose(0, 2, 1))
    h /= math.sqrt(d)
    h[:, np.arange(T), np.arange(T)] -= np.trace(S) / math.sqrt(d)
    return h


def sensing_adjoint(X: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Σ_μ Σ_{a≤b} G^μ_ab Z^μ_ab, with Z_ab = sym(x_a x_bᵀ − δ_ab I)/√d: the adjoint of
    :func:`attention_index` on the upper triangles, so that Σ_μ Σ_{a≤b} G_ab h_ab(S) = Tr(S · result).

    G (n, T, T) symmetric: G_ab (= G_ba) is the coefficient of the one sensing matrix of the pair a < b.
    Since sym(x_a x_bᵀ) = (x_a x_bᵀ + x_b x_aᵀ)/2, the pair contributes G_ab/2 to each of the two
    ordered entries of the T × T weight matrix, the diagonal G_aa once: result =
    (Σ_μ X^μᵀ G̃^μ X^μ − Σ_μ Tr G^μ · I)/√d with G̃ = G with its off-diagonal halved. (d, d), symmetric.
    """
    n, T, d = X.shape
    half = np.where(np.eye(T, dtype=bool), 1.0, 0.5)
    out = np.zeros((d, d))
    step = chunk_size(T, d)
    for s in range(0, n, step):
        Xc = X[s : s + step]
        Gt = G[s : s + step] * half
        out += Xc.reshape(-1, d).T @ np.matmul(Gt, Xc).reshape(-1, d)
    out -= np.trace(G, axis1=1, axis2=2).sum() * np.eye(d)
    out /= math.sqrt(d)
    return (out + out.T) / 2


def hardmax_rows(h: np.ndarray) -> np.ndarray:
    """One-hot of the row argmax over the last axis (ties have probability 0 for continuous h)."""
    y = np.zeros_like(h)
    np.put_along_axis(y, h.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return y


def outputs(h: np.ndarray, channel: str, beta: float = 1.0) -> np.ndarray:
    """y = g(h): ``softmax`` (row-wise softmax_β) or ``hardmax``; (n, T, T)."""
    if channel not in CHANNELS:
        raise ParameterError(f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
    return softmax_rows(h, beta) if channel == "softmax" else hardmax_rows(h)


def data_bytes(n: int, T: int, d: int) -> int:
    """Bytes a data set and the algorithms' working arrays need: tokens (n T d), h, y and a few
    (n, T, T) arrays of the algorithms (8 of them), a handful of d × d matrices and one chunk."""
    return 8 * (n * T * d + 8 * n * T * T + 8 * d * d) + CHUNK_BYTES


@dataclass(frozen=True, eq=False)
class AIMData:
    """One data set: tokens X (n, T, d), attention indices h and outputs y (n, T, T) of the teacher
    S* (d, d); the channel, β, ρ, the width r and the seed that made it (arrays: treat as read-only)."""

    X: np.ndarray
    h: np.ndarray
    y: np.ndarray
    S: np.ndarray
    channel: str
    beta: float
    rho: float
    r: int
    seed: int

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def T(self) -> int:
        return int(self.X.shape[1])

    @property
    def d(self) -> int:
        return int(self.X.shape[2])

    @property
    def alpha(self) -> float:
        return self.n / self.d**2

    @property
    def Q0(self) -> float:
        """(1/d) Tr S*² of this teacher (→ 1 + ρ)."""
        return float(np.sum(self.S * self.S) / self.d)

    def mse(self, S_hat: np.ndarray) -> float:
        """(1/d)‖Ŝ − S*‖²_F."""
        return float(np.sum((S_hat - self.S) ** 2) / self.d)


def make_data(
    d: int, rho: float, T: int, alpha: float, channel: str = "softmax", beta: float = 1.0, seed: int = 0
) -> AIMData:
    """A seeded data set of n = round(α d²) samples (teacher and tokens from independent streams of ``seed``);
    the channel, ρ, T and α are validated as for the state evolution (:func:`~dotattn.aim.state_evolution.check_inputs`)."""
    from dotattn.aim.state_evolution import check_inputs

    d = check_d(d)
    channel, rho, T, (alpha,) = check_inputs(channel, rho, T, [alpha])
    beta = check_number("beta", beta, 0.0, True, 1e3, "in (0, 1000]")
    r = teacher_rank(d, rho)
    n = max(1, int(round(alpha * d * d)))
    S = sample_teacher(d, r, seed)
    X = sample_tokens(n, T, d, seed)
    h = attention_index(X, S)
    return AIMData(
        X=X,
        h=h,
        y=outputs(h, channel, beta),
        S=S,
        channel=channel,
        beta=beta,
        rho=rho,
        r=r,
        seed=check_int("seed", seed, 0, 2**32 - 1),
    )


def fresh_samples(data: AIMData, m: int) -> tuple[np.ndarray, np.ndarray]:
    """m new samples of the data's teacher, independent of the training set (their own stream of the seed):
    tokens (m, T, d) and outputs (m, T, T), for test errors."""
    X = _rng(data.seed, _STREAM_FRESH).standard_normal((int(m), data.T, data.d))
    return X, outputs(attention_index(X, data.S), data.channel, data.beta)
