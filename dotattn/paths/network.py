"""The attention-paths network: L layers of heads with fixed attention and linear values.

Notation (docs/attention_paths.md): an input is x ∈ ℝ^{N0×T} (columns are tokens); a batch is an
array ``x`` of shape (P, N0, T). Layer ℓ = 1..L has H_ℓ heads with fixed attention matrices
Ω^{(ℓ)h} ∈ ℝ^{T×T}, computed from the bare input: Ω_{st} = softmax over keys s of β x_sᵀ W x_t.
A path π = (h_1, …, h_L) has the path input ξ^π(x) = x Ω^{(1)h_1} ⋯ Ω^{(L)h_L} r ∈ ℝ^{N0}, r the
read-out vector (last token or token mean), and the path-path kernel C_ππ'(x, x') = ξ^π(x)·ξ^π'(x')/N0.
Paths are numbered with h_1 the most significant digit (``np.ravel_multi_index`` order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import SupportsIndex

import numpy as np

from dotattn.core.validation import ParameterError

__all__ = [
    "READOUTS",
    "attention",
    "readout_vector",
    "path_inputs",
    "path_kernels",
    "path_kernel_diagonal",
    "path_labels",
    "network_output",
    "effective_weights",
    "order_parameter",
    "FactoredKernels",
    "OutputKernels",
]

READOUTS: tuple[str, ...] = ("last", "mean")


def attention(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Attention matrices Ω (P, T, T) of one head: Ω[p, s, t] = softmax_s(x_s·W x_t) (columns sum to 1).

    ``x``: (P, N0, T); ``W``: (N0, N0), the key-query matrix already times the inverse temperature.
    """
    scores = np.einsum("pis,ij,pjt->pst", x, W, x, optimize=True)
    scores -= scores.max(axis=1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(axis=1, keepdims=True)


def readout_vector(T: int, readout: str) -> np.ndarray:
    """r ∈ ℝ^T: the last token (e_T) or the token mean (1/T)."""
    if readout not in READOUTS:
        raise ParameterError(f"readout must be one of {', '.join(READOUTS)}, got {readout!r}")
    if readout == "last":
        r = np.zeros(T)
        r[-1] = 1.0
        return r
    return np.full(T, 1.0 / T)


def path_inputs(x: np.ndarray, omegas: Sequence[np.ndarray], readout: str = "last") -> np.ndarray:
    """Path inputs ξ^π(x^μ), shape (n_paths, P, N0), n_paths = ∏ H_ℓ, h_1 most significant.

    ``omegas[ℓ-1]``: the layer-ℓ attention matrices, shape (H_ℓ, P, T, T).
    """
    P, _, T = x.shape
    v = np.broadcast_to(readout_vector(T, readout), (P, T))[:, :, None]  # (P, T, paths of layers > ℓ)
    for om in reversed(list(omegas)):
        H = om.shape[0]
        nxt = np.einsum("hpst,ptk->pshk", om, v)  # new head index most significant
        v = nxt.reshape(P, T, H * v.shape[2])
    return np.einsum("pit,ptk->kpi", x, v)


def path_kernels(xi_a: np.ndarray, xi_b: np.ndarray) -> np.ndarray:
    """C[π, π', μ, ν] = ξ^π(x_μ)·ξ^π'(x_ν)/N0, shape (n, n, P_a, P_b) from ξ of shapes (n, P_a, N0), (n, P_b, N0)."""
    return np.einsum("api,bqi->abpq", xi_a, xi_b, optimize=True) / xi_a.shape[2]


@dataclass(frozen=True, eq=False)
class FactoredKernels:
    """The path kernels C[π, π', μ, ν] = ξ_a^π(x_μ)·ξ_b^π'(x_ν)/N0 held as their factors ``xi_a`` (n, P_a, N0)
    and ``xi_b`` (n, P_b, N0): the n²·P_a·P_b numbers of :func:`path_kernels` are never formed
    (16 paths, P = 600: 740 MB in float64; the factors take 2·16·600·N0 numbers).

    :meth:`contract` gives Σ_ππ' U^{ππ'} C_ππ' (P_a, P_b) and :meth:`adjoint` Σ_μν B_μν C_ππ'[μ, ν]
    (n, n), each as two matrix products; ``theory.kernel`` and the action's gradient use them.
    """

    xi_a: np.ndarray
    xi_b: np.ndarray

    def __post_init__(self) -> None:
        if (
            self.xi_a.ndim != 3
            or self.xi_b.ndim != 3
            or self.xi_a.shape[0] != self.xi_b.shape[0]
            or self.xi_a.shape[2] != self.xi_b.shape[2]
        ):
            raise ParameterError(
                f"path inputs must have shapes (n, P_a, N0) and (n, P_b, N0), got "
                f"{self.xi_a.shape} and {self.xi_b.shape}"
            )

    @property
    def shape(self) -> tuple[int, int, int, int]:
        n, Pa, _ = self.xi_a.shape
        return n, n, Pa, self.xi_b.shape[1]

    def contract(self, U: np.ndarray) -> np.ndarray:
        """Σ_ππ' U^{ππ'} C_ππ', shape (P_a, P_b)."""
        n, Pa, N0 = self.xi_a.shape
        right = np.einsum("ab,bqi->qai", U, self.xi_b).reshape(-1, n * N0)
        return self.xi_a.transpose(1, 0, 2).reshape(Pa, n * N0) @ right.T / N0

    def adjoint(self, B: np.ndarray) -> np.ndarray:
        """Σ_μν B_μν C_ππ'[μ, ν], shape (n, n) (``B``: (P_a, P_b))."""
        n, Pb, N0 = self.xi_b.shape
        right = (B @ self.xi_b.transpose(1, 0, 2).reshape(Pb, n * N0)).reshape(-1, n, N0)
        return np.einsum("api,pbi->ab", self.xi_a, right, optimize=True) / N0

    def __getitem__(self, pair: tuple[SupportsIndex, SupportsIndex]) -> np.ndarray:
        """The dense block C_ππ' (P_a, P_b) of one path pair ``(π, π')``."""
        a, b = pair
        return self.xi_a[a] @ self.xi_b[b].T / self.xi_a.shape[2]


@dataclass(frozen=True, eq=False)
class OutputKernels:
    """The kernels of a network with M outputs, as the path kernels of n M "extended paths" (π, m) on M P
    points (m, μ) (docs/attention_paths.md §16): C̃_{(πm)(π'm')} = E_mm' ⊗ C_ππ', the extended path index
    π M + m (the output least significant) and the point index m P + μ (output by output, vec Y).

    ``base``: the path kernels (n, n, P_a, P_b), dense or :class:`FactoredKernels`; ``outputs``: M.
    :meth:`contract` and :meth:`adjoint` work block by block on the base (M² blocks), never on the extended
    array; :meth:`extended` forms the extended kernels (dense, or factored with block-sparse path inputs)."""

    base: np.ndarray | FactoredKernels
    outputs: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        n, _, Pa, Pb = self.base.shape
        M = self.outputs
        return n * M, n * M, M * Pa, M * Pb

    def _blocks(self, U: np.ndarray) -> np.ndarray:
        n, M = self.base.shape[0], self.outputs
        return U.reshape(n, M, n, M)

    def contract(self, U: np.ndarray) -> np.ndarray:
        """Σ_αβ U^{αβ} C̃_αβ for U of the extended paths (n M, n M): shape (M P_a, M P_b)."""
        n, _, Pa, Pb = self.base.shape
        M = self.outputs
        U4 = self._blocks(U)
        if isinstance(self.base, FactoredKernels):
            out = np.empty((M, Pa, M, Pb))
            for m in range(M):
                for k in range(M):
                    out[m, :, k, :] = self.base.contract(U4[:, m, :, k])
        else:
            out = np.einsum("ambk,abpq->mpkq", U4, self.base, optimize=True)
        return out.reshape(M * Pa, M * Pb)

    def adjoint(self, B: np.ndarray) -> np.ndarray:
        """Σ_ij B_ij C̃_αβ[i, j], shape (n M, n M) (``B``: (M P_a, M P_b))."""
        n, _, Pa, Pb = self.base.shape
        M = self.outputs
        B4 = B.reshape(M, Pa, M, Pb)
        if isinstance(self.base, FactoredKernels):
            out = np.empty((n, M, n, M))
            for m in range(M):
                for k in range(M):
                    out[:, m, :, k] = self.base.adjoint(B4[m, :, k, :])
        else:
            out = np.einsum("mpkq,abpq->ambk", B4, self.base, optimize=True)
        return out.reshape(n * M, n * M)

    def __getitem__(self, pair: tuple[SupportsIndex, SupportsIndex]) -> np.ndarray:
        """The dense block C̃_αβ (M P_a, M P_b) of one extended pair: C_ππ' in output block (m, m')."""
        a, b = (int(i) for i in pair)
        M = self.outputs
        _, _, Pa, Pb = self.base.shape
        out = np.zeros((M * Pa, M * Pb))
        m, k = a % M, b % M
        out[m * Pa : (m + 1) * Pa, k * Pb : (k + 1) * Pb] = self.base[a // M, b // M]
        return out

    def extended(self) -> np.ndarray | FactoredKernels:
        """The extended kernels themselves: dense (n M, n M, M P_a, M P_b), or factored with path inputs
        (n M, M P, N0) that are ξ^π in block m and zero elsewhere."""
        M = self.outputs
        if isinstance(self.base, FactoredKernels):
            return FactoredKernels(_extend_inputs(self.base.xi_a, M), _extend_inputs(self.base.xi_b, M))
        n, _, Pa, Pb = self.base.shape
        out = np.zeros((n, M, n, M, M, Pa, M, Pb))
        for m in range(M):
            for k in range(M):
                out[:, m, :, k, m, :, k, :] = self.base
        return out.reshape(n * M, n * M, M * Pa, M * Pb)


def _extend_inputs(xi: np.ndarray, M: int) -> np.ndarray:
    """(n M, M P, N0): ξ^π in output block m of extended path π M + m, zero elsewhere."""
    n, P, N0 = xi.shape
    out = np.zeros((n, M, M, P, N0))
    for m in range(M):
        out[:, m, m] = xi
    return out.reshape(n * M, M * P, N0)


def path_kernel_diagonal(xi: np.ndarray) -> np.ndarray:
    """C[π, π', μ, μ] for each input, shape (n, n, P) (what the predictor's variance needs)."""
    return np.einsum("api,bpi->abp", xi, xi, optimize=True) / xi.shape[2]


def path_labels(head_names: Sequence[Sequence[str]]) -> list[str]:
    """Readable names of the paths, e.g. 'good>uniform', in the code's path order."""
    labels = [""]
    for names in head_names:
        labels = [f"{lab}>{n}" if lab else n for lab in labels for n in names]
    return labels


def effective_weights(a: np.ndarray, values: Sequence[np.ndarray]) -> np.ndarray:
    """V_eff^π = a V^{(L)h_L} ⋯ V^{(1)h_1} / N^{L/2}, shape (n_paths, N).

    ``a``: (N,); ``values[ℓ-1]``: layer-ℓ value weights, shape (H_ℓ, N, N). With M outputs ``a`` is (M, N)
    and the result (n_paths M, N), row π M + m (the output least significant).
    """
    N = a.shape[-1]
    u = (
        a[None, :] if a.ndim == 1 else a
    )  # (paths through the layers above ℓ, N), the lowest layer's head most significant
    for V in reversed(list(values)):
        H = V.shape[0]
        u = np.einsum("kn,hnm->hkm", u, V).reshape(H * u.shape[0], N) / np.sqrt(N)
    return u


def order_parameter(a: np.ndarray, values: Sequence[np.ndarray]) -> np.ndarray:
    """U^{ππ'} = V_eff^π · V_eff^π' / N, shape (n_paths, n_paths) ((n_paths M)² for ``a`` of shape (M, N))."""
    v = effective_weights(a, values)
    return v @ v.T / a.shape[-1]


def network_output(
    x: np.ndarray,
    omegas: Sequence[np.ndarray],
    V0: np.ndarray,
    values: Sequence[np.ndarray],
    a: np.ndarray,
    readout: str = "last",
) -> np.ndarray:
    """The network's output f(x^μ), shape (P,), by the forward pass (no paths): x¹ = V⁰x/√N0,
    x^{ℓ+1} = (H_ℓ N)^{-1/2} Σ_h V^{(ℓ)h} x^ℓ Ω^{(ℓ)h}, f = a·x^{L+1} r/√N.

    ``V0``: (N, N0); ``values[ℓ-1]``: (H_ℓ, N, N); ``a``: (N,), or (M, N) for M outputs (then (P, M)).
    """
    P, N0, T = x.shape
    N = a.shape[-1]
    h = np.einsum("ni,pit->pnt", V0, x) / np.sqrt(N0)
    for V, om in zip(values, omegas, strict=True):
        H = V.shape[0]
        h = np.einsum("hnm,pmt,hpts->pns", V, h, om) / np.sqrt(H * N)
    if a.ndim == 2:
        return np.einsum("mn,pnt,t->pm", a, h, readout_vector(T, readout)) / np.sqrt(N)
    return np.einsum("n,pnt,t->p", a, h, readout_vector(T, readout)) / np.sqrt(N)
