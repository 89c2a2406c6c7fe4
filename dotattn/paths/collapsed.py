"""The collapsed posterior of the order parameters (U_1, …, U_L, U_a), sampled by NUTS (the ``paths`` extra).

Derivation: docs/attention_paths.md §9. With V⁰ integrated out, the posterior of all other weights
depends on them only through the path order parameters, so the posterior of (U_1, …, U_L, U_a) is
exactly, at any N, the nested Wishart chain of the prior (U_k | U_{k+1} ~ Wishart(N, M_k/N),
M_k = σ² I_{H_k} ⊗ U_{k+1}, N U_a/σ² ~ χ²_N) times the Gaussian marginal likelihood
N(Y; 0, K(U_1) + 𝒯I).

Coordinates (non-centred Bartlett factors, valid for every N ≥ 1): level k carries a factor
F_k ∈ ℝ^{d_k × r_k} with U_k = F_k F_kᵀ; F_{L+1} = σ B_{L+1}/√N and F_k = σ (I_{H_k} ⊗ F_{k+1}) B_k/√N,
B_k lower trapezoidal of shape (n_k, r_k), n_k = H_k r_{k+1}, r_k = min(n_k, N). Under the prior the
entries of B_k are independent: B_ii² ~ χ²_{ν}, ν = N−i+1 (i = 1..r_k, stored standardised as
s_ii = √(2ν) (log B_ii − ½ log ν), an affine map of log B_ii whose prior spread is ≈ 1 at every ν, so the
chain's coordinates all have prior scale ≈ 1 and NUTS starts adapting from a well-scaled identity mass
matrix: with log B_ii itself the diagonals' spread (2N)^{-1/2} is 140 times narrower than the off-diagonals'
at N = 10⁴, and the first warm-up windows ran at the maximum tree depth) and the others N(0, 1) (the
Bartlett decomposition of an n_k-dimensional Wishart(N, I), including its rank-N form when n_k > N).
The chain's dimension, Σ_k Σ_{i ≤ n_k} min(i, N), does not depend on N0 or P and, for N ≥ d_k on every
level, not on N: 14 for the Markov network (H = (2, 2)).

The functions here build a JAX log density from any path kernels C (n, n, P, P) (dense, or factored as
:class:`~dotattn.paths.network.FactoredKernels`) and labels y, so a task with its own kernels uses
:func:`run_collapsed` directly. The kernels are held packed (:class:`PackedKernels`: the pairs π ≤ π' and
the upper triangle in P, a quarter of n²P²), and the Gaussian evidence with its gradient is computed on
the host by LAPACK (one Cholesky factorisation and one inverse per chain and leapfrog step, all chains'
kernels in one product) behind a custom JAX derivative: the same float64 density as XLA's Cholesky and
its derivative, 3–7 times faster at 16 paths and P = 600 (docs/attention_paths.md §9).
NumPyro and JAX are imported on first use.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import lapack

from dotattn.core.resources import check_memory
from dotattn.core.validation import ParameterError, check_int, check_number
from dotattn.paths.network import FactoredKernels, OutputKernels
from dotattn.paths.sampler import SamplerConfig, SampleResult
from dotattn.paths.theory import PathsModel, output_labels

__all__ = [
    "Layout",
    "collapsed_layout",
    "MAX_COLLAPSED_N",
    "MAX_COLLAPSED_PARAMETERS",
    "check_collapsed",
    "collapsed_memory_bytes",
    "log_density_fn",
    "order_parameters_fn",
    "prior_draw",
    "run_collapsed",
    "DRAW_BLOCK",
    "PackedKernels",
    "pack_kernels",
    "gaussian_evidence",
    "StopRule",
    "pooled_covariance",
    "check_processes",
]

MAX_COLLAPSED_N = 10**6
"""Largest width: the Bartlett diagonal log B_ii has prior spread ≈ (2N)^{-1/2}; at N = 1e6 that is 7e-4,
still well above the float64 resolution of the log density (which is O(N))."""

MAX_COLLAPSED_PARAMETERS = 4000
"""Largest chain dimension (each leapfrog step and each mass-matrix adaptation window grows with it)."""
DENSE_MASS_MAX_DIM = 40
"""Largest chain dimension adapted with a dense mass matrix. NumPyro estimates it from the warm-up windows
(25, 50, 100, … draws), shrunk toward 10⁻³ I: with fewer draws than dimensions the estimate is singular in
most directions and, after shrinkage, 10⁻³–10⁻⁴ times too narrow there, so the trees run to the maximum
depth (16 paths at N = 10, 126 coordinates: one 50-iteration block took 590 s at P = 100). Above this
dimension the mass matrix is diagonal (the Bartlett coordinates already have prior scale ≈ 1)."""
DRAW_BLOCK = 50
"""Draws per chain between two checks for SIGINT/SIGTERM (each block is one compiled JAX call)."""


@dataclass(frozen=True)
class StopRule:
    """Stop drawing once every entry of U_1 has bulk ESS ≥ ``ess_min`` and split R-hat ≤ ``rhat_max``,
    checked on all kept draws after every ``every`` draws per chain (rounded up to whole blocks of
    DRAW_BLOCK); the config's ``draws`` is then the most drawn per chain. A rule checked repeatedly stops
    on a favourable fluctuation slightly more often than a fixed count would; each check is on all draws so
    far, so the later draws are never discarded."""

    ess_min: float = 400.0
    rhat_max: float = 1.01
    every: int = 100

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "ess_min", check_number("ess_min (stopping rule)", self.ess_min, 1.0, False, 1e7, "in [1, 1e7]")
        )
        object.__setattr__(
            self,
            "rhat_max",
            check_number("rhat_max (stopping rule)", self.rhat_max, 1.0, True, 2.0, "in (1, 2]"),
        )
        object.__setattr__(self, "every", check_int("every (stopping rule)", self.every, 1, 100_000))

    def met(self, rhat_max: float, ess_min: float) -> bool:
        """Whether diagnostics (NaN: not computable, never met) satisfy the rule."""
        return bool(
            np.isfinite(ess_min) and np.isfinite(rhat_max) and ess_min >= self.ess_min and rhat_max <= self.rhat_max
        )


@dataclass(frozen=True)
class Level:
    """One level of the chain: heads H_k (1 for the readout), rows n_k = H_k r_{k+1}, columns r_k."""

    heads: int
    rows: int
    cols: int

    @property
    def n_params(self) -> int:
        return sum(min(i, self.cols) for i in range(1, self.rows + 1))


@dataclass(frozen=True)
class Layout:
    """The Bartlett coordinates of the chain for ``heads`` at width ``N``: levels from the readout down."""

    heads: tuple[int, ...]
    N: int
    levels: tuple[Level, ...]

    @property
    def n_params(self) -> int:
        return sum(lv.n_params for lv in self.levels)


def collapsed_layout(heads: Sequence[int], N: int, outputs: int = 1) -> Layout:
    """Levels L+1 (readout, M × M for M = ``outputs``), L, …, 1: rows n_k = H_k r_{k+1}, columns
    r_k = min(n_k, N) (r_{L+1} = min(M, N))."""
    r = min(int(outputs), int(N))
    levels = [Level(1, int(outputs), r)]
    for H in reversed(tuple(heads)):
        n = H * r
        r = min(n, N)
        levels.append(Level(H, n, r))
    return Layout(heads=tuple(heads), N=int(N), levels=tuple(levels))


def check_collapsed(model: PathsModel, config: SamplerConfig) -> int:
    """The width as an integer in [1, MAX_COLLAPSED_N] and a chain of at most MAX_COLLAPSED_PARAMETERS
    coordinates (ParameterError naming the parameter otherwise)."""
    N = model.N
    if not float(N).is_integer() or not 1 <= N <= MAX_COLLAPSED_N:
        raise ParameterError(
            f"N (width) for collapsed sampling must be an integer in [1, {MAX_COLLAPSED_N}], got {N:g}"
        )
    dim = collapsed_layout(model.heads, int(N), model.outputs).n_params
    if dim > MAX_COLLAPSED_PARAMETERS:
        raise ParameterError(
            f"heads {model.heads} at N = {N:g} give {dim} collapsed coordinates; at most {MAX_COLLAPSED_PARAMETERS}"
        )
    return int(N)


def collapsed_memory_bytes(n_paths: int, P: int, config: SamplerConfig, processes: int = 1) -> int:
    """Estimated peak memory: the packed kernels (n(n+1)/2 · P(P+1)/2 numbers) in each of ``processes``
    processes plus one copy in transit to each other one, one dense pair block and a few P × P work arrays
    per chain while packing and evaluating, the kept draws of U (chains × draws × n²), and 200 MB per
    process (interpreter, JAX). Dense kernels the caller passes in are already in memory and not counted."""
    packed = 8 * (n_paths * (n_paths + 1) // 2) * (P * (P + 1) // 2)
    return (
        packed * (2 * processes - 1)
        + 8 * (6 + 2 * config.chains) * P**2
        + 8 * config.chains * config.draws * n_paths**2 * 3
        + 200 * 2**20 * processes
    )


@dataclass(frozen=True, eq=False)
class PackedKernels:
    """Training path kernels packed for a symmetric U: row k of ``S`` (m, P(P+1)/2) is the upper triangle
    (i ≤ j, row-major) of S_k = ½[(C_ab + C_ba) + (C_ab + C_ba)ᵀ] for the k-th pair a < b (in
    ``numpy.triu_indices(n)`` order) and of ½(C_aa + C_aaᵀ) for a = b, m = n(n+1)/2. For symmetric U,
    Σ_ab U_ab C_ab symmetrised is the matrix whose upper triangle is u @ S, u_k = U_ab (:meth:`kernel`):
    m·P(P+1)/2 ≈ n²P²/4 numbers instead of n²P² (16 paths, P = 600: 196 MB instead of 737 MB)."""

    S: np.ndarray
    n: int
    P: int

    def __post_init__(self) -> None:
        m, t = self.n * (self.n + 1) // 2, self.P * (self.P + 1) // 2
        if self.S.shape != (m, t):
            raise ParameterError(
                f"packed kernels of {self.n} paths at P = {self.P} must have shape ({m}, {t}), got {self.S.shape}"
            )

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column of U for each row of S."""
        return np.triu_indices(self.n)

    def kernel(self, U: np.ndarray) -> np.ndarray:
        """½ Σ_ab U_ab (C_ab + C_abᵀ), shape (P, P), for symmetric U (n, n)."""
        a, b = self.pairs
        return _unpack(U[a, b] @ self.S, self.P)


def _unpack(k: np.ndarray, P: int) -> np.ndarray:
    """The symmetric (P, P) matrix with upper triangle ``k`` (P(P+1)/2,)."""
    i, j = np.triu_indices(P)
    K = np.empty((P, P))
    K[i, j] = k
    K[j, i] = k
    return K


def pack_kernels(C: np.ndarray | FactoredKernels | PackedKernels) -> PackedKernels:
    """:class:`PackedKernels` from square path kernels (n, n, P, P), dense or factored (one pair block at a
    time: the dense n²P² array is never formed from factored kernels)."""
    if isinstance(C, PackedKernels):
        return C
    n, n2, P, P2 = C.shape
    if n != n2 or P != P2:
        raise ParameterError(f"path kernels must have shape (n, n, P, P), got {tuple(C.shape)}")
    i, j = np.triu_indices(P)
    a_idx, b_idx = np.triu_indices(n)
    S = np.empty((len(a_idx), len(i)))
    for k, (a, b) in enumerate(zip(a_idx, b_idx, strict=True)):
        M = np.array(C[a, b], dtype=float)
        if a != b:
            M += C[b, a]
        S[k] = 0.5 * (M[i, j] + M[j, i])
    return PackedKernels(S=S, n=n, P=P)


def gaussian_evidence(
    packed: PackedKernels, y: np.ndarray, scale: float, temperature: float, u: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """ln N(y; 0, K + 𝒯I) + (P/2) ln 2π = −½ ln det(K + 𝒯I) − ½ yᵀ(K + 𝒯I)⁻¹y and its gradient in u, for
    K = scale · (u @ S unpacked), each row of ``u`` (B, m) one chain. All rows' kernels come from one product
    u @ S and all rows' gradients from one product S @ Gᵀ (each a single pass over the packed kernels, the
    cost that dominates at 16 paths and P = 600); per row a LAPACK Cholesky factorisation, solve and inverse
    A = (K + 𝒯I)⁻¹, the packed triangle written into and read from the factor's buffer through precomputed
    flat indices. With α = Ay and G = −½(A − ααᵀ), d/dK_ij of the symmetric matrix is 2G_ij (i < j) and
    G_ii, so the gradient is scale · S (G_ij weighted 2 off the diagonal). A kernel that is not positive
    definite gives −inf and a zero gradient (a divergence for NUTS). Returns ((B,), (B, m))."""
    u = np.atleast_2d(np.asarray(u, dtype=float))
    P = packed.P
    upper, diag, weight = _triangle(P)
    ks = u @ packed.S
    ks *= scale
    values = np.full(len(u), -np.inf)
    G = np.zeros_like(ks)
    ok = np.zeros(len(u), dtype=bool)
    K = np.empty((P, P))
    for r, k in enumerate(ks):
        # C-order K with its upper triangle set is, read in Fortran order (K.T, no copy), a matrix whose lower
        # triangle holds the same numbers: LAPACK works on that lower triangle in place.
        K.flat[upper] = k
        K.flat[diag] += temperature
        L, info = lapack.dpotrf(K.T, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            continue
        alpha, _ = lapack.dpotrs(L, y, lower=1)
        logdet_half = float(np.sum(np.log(np.diagonal(L))))
        A, info = lapack.dpotri(L, lower=1, overwrite_c=1)  # lower triangle (Fortran) = upper (C order) of A
        if info != 0:
            continue
        g = A.T.flat[upper]  # the upper triangle of (K + 𝒯I)⁻¹ in the packed order
        g -= alpha[_ROWS[P]] * alpha[_COLS[P]]
        g *= -0.5 * weight
        G[r] = g
        values[r] = -logdet_half - 0.5 * float(y @ alpha)
        ok[r] = True
    grads = np.zeros_like(u)
    if ok.any():
        grads[ok] = (packed.S @ G[ok].T).T * scale
    return values, grads


_ROWS: dict[int, np.ndarray] = {}
_COLS: dict[int, np.ndarray] = {}
_TRIANGLES: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _triangle(P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat C-order indices of the upper triangle i ≤ j in the packed order, flat indices of the diagonal,
    weights 1 on the diagonal and 2 off it), cached per P."""
    if P not in _TRIANGLES:
        i, j = np.triu_indices(P)
        _ROWS[P], _COLS[P] = i, j
        _TRIANGLES[P] = (i * P + j, np.arange(P) * (P + 1), np.where(i == j, 1.0, 2.0))
    return _TRIANGLES[P]


def _evidence_op(packed: PackedKernels, y: np.ndarray, scale: float, temperature: float) -> Callable[[Any], Any]:
    """u ↦ :func:`gaussian_evidence` as a JAX function of u (m,) with its reverse derivative: a host
    callback (batched over vmapped chains: one call for all of them) returning value and gradient."""
    import jax
    import jax.numpy as jnp

    y = np.asarray(y, dtype=float)

    def host(u: Any) -> tuple[np.ndarray, np.ndarray]:
        u = np.asarray(u, dtype=float)
        v, g = gaussian_evidence(packed, y, scale, temperature, u.reshape(-1, u.shape[-1]))
        return v.reshape(u.shape[:-1]), g.reshape(u.shape)

    def call(u: Any) -> Any:
        shapes = (jax.ShapeDtypeStruct(u.shape[:-1], jnp.float64), jax.ShapeDtypeStruct(u.shape, jnp.float64))
        return jax.pure_callback(host, shapes, u, vmap_method="expand_dims")

    @jax.custom_vjp
    def evidence(u: Any) -> Any:
        return call(u)[0]

    def forward(u: Any) -> Any:
        value, grad = call(u)
        return value, grad

    def backward(grad: Any, cotangent: Any) -> Any:
        return (cotangent[..., None] * grad,)

    evidence.defvjp(forward, backward)
    return evidence


def _diagonal_map(nu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(centre, scale) of the standardised Bartlett diagonal: log B_ii = centre + scale · s_ii with
    centre = ½ log ν, the mode of the prior density ∝ exp(ν t − e^{2t}/2) of t = log B_ii, and scale =
    1/√(2ν), its curvature there (−2ν); an affine map, so the density of s_ii is that of t times a constant."""
    nu = np.maximum(np.asarray(nu, dtype=float), 1.0)
    return 0.5 * np.log(nu), 1.0 / np.sqrt(2.0 * nu)


def _indices(layout: Layout) -> list[tuple[Level, int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per level: (level, offset in z, rows, cols of the stored entries, ν = N − i + 1 for diagonals)."""
    out, pos = [], 0
    for lv in layout.levels:
        rows, cols = np.nonzero(np.tril(np.ones((lv.rows, lv.cols))))
        out.append((lv, pos, rows, cols, layout.N - rows))
        pos += len(rows)
    return out


def _factors(z: Any, layout: Layout, sigma2: float) -> tuple[list[Any], Any]:
    """(F_{L+1}, …, F_1) and the log prior density of the Bartlett coordinates z (JAX)."""
    import jax.numpy as jnp

    sig, N = math.sqrt(sigma2), layout.N
    factors: list[Any] = []
    logp: Any = 0.0  # a JAX scalar once the first term is added
    F = None
    for lv, p0, rows, cols, nu in _indices(layout):
        v = z[p0 : p0 + len(rows)]
        diag = rows == cols
        centre, scale = _diagonal_map(nu)
        t = centre + scale * v  # log B_ii on the diagonal (unused off it)
        # log density of t = log B_ii (B_ii² ~ χ²_ν): ν t − e^{2t}/2 (the affine map adds a constant);
        # of B_ij ~ N(0, 1): −b²/2
        logp = logp + jnp.sum(jnp.where(diag, nu * t - 0.5 * jnp.exp(2 * t), -0.5 * v * v))
        B = jnp.zeros((lv.rows, lv.cols)).at[rows, cols].set(jnp.where(diag, jnp.exp(t), v))
        F = sig * B / math.sqrt(N) if F is None else sig * jnp.kron(jnp.eye(lv.heads), F) @ B / math.sqrt(N)
        factors.append(F)
    return factors, logp


def order_parameters_fn(layout: Layout, sigma2: float) -> Callable[[Any], list[Any]]:
    """z ↦ [U_1, …, U_L, U_a] (JAX arrays, float64; U_1 first, as in :mod:`dotattn.paths.theory`)."""
    import jax

    jax.config.update("jax_enable_x64", True)

    def levels(z: Any) -> list[Any]:
        factors, _ = _factors(z, layout, sigma2)
        return [F @ F.T for F in reversed(factors)]

    return levels


def _log_density(packed: PackedKernels, y: np.ndarray, layout: Layout, model: PathsModel) -> Callable[[Any], Any]:
    evidence = _evidence_op(packed, y, model.kernel_scale, model.temperature)
    a, b = packed.pairs

    def logdensity(z: Any) -> Any:
        factors, logp = _factors(z, layout, model.sigma2)
        U = factors[-1] @ factors[-1].T
        return logp + evidence(U[a, b])

    return logdensity


def log_density_fn(
    C: np.ndarray | FactoredKernels | PackedKernels, y: np.ndarray, model: PathsModel
) -> tuple[Layout, Callable[[Any], Any]]:
    """(layout, z ↦ log density of the collapsed posterior in the Bartlett coordinates, up to a constant).

    ``C``: path kernels on the training set (n, n, P, P), dense, factored or packed; ``y``: labels (P,).
    The log density is Σ log prior(z) − ½ ln det(K + 𝒯I) − ½ Yᵀ(K + 𝒯I)⁻¹Y with K = c Σ_ππ' U_1^{ππ'} C_ππ'
    (symmetrised), c = σ²/∏H.
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    layout = collapsed_layout(model.heads, int(model.N), model.outputs)
    C, yv = _output_problem(C, y, model)
    return layout, _log_density(pack_kernels(C), yv, layout, model)


def _output_problem(C: Any, y: np.ndarray, model: PathsModel) -> tuple[Any, np.ndarray]:
    """(kernels, labels) of the extended paths for M = ``model.outputs`` > 1 (docs/attention_paths.md §16:
    n M paths on M P points, vec Y), as they are for one output."""
    y = np.asarray(y, dtype=float)
    if model.outputs == 1:
        return C, y.reshape(-1)
    yv = y if y.ndim == 1 else output_labels(y, model.outputs)
    if isinstance(C, (PackedKernels, OutputKernels)):
        return C, yv
    return OutputKernels(C, model.outputs), yv


def prior_draw(layout: Layout, rng: np.random.Generator) -> np.ndarray:
    """Bartlett coordinates drawn from the prior (the chains' starting points)."""
    parts = []
    for _, _, rows, cols, nu in _indices(layout):
        diag = rows == cols
        centre, scale = _diagonal_map(nu)
        log_b = 0.5 * np.log(rng.chisquare(np.maximum(nu, 1)))
        parts.append(np.where(diag, (log_b - centre) / scale, rng.standard_normal(len(rows))))
    return np.concatenate(parts)


def pooled_covariance(positions: np.ndarray) -> np.ndarray:
    """The covariance of warm-up positions (draws, chains, dim) pooled over draws and chains, each chain
    centred on its own mean, shrunk toward 10⁻³ I as NumPyro and Stan regularise theirs:
    n/(n + 5) · Σ + 10⁻³ · 5/(n + 5) · I, n the number of positions."""
    pos = np.asarray(positions, dtype=float)
    centred = (pos - pos.mean(axis=0, keepdims=True)).reshape(-1, pos.shape[-1])
    n = len(centred)
    cov = centred.T @ centred / (n - pos.shape[1])
    return n / (n + 5.0) * cov + 1e-3 * 5.0 / (n + 5.0) * np.eye(pos.shape[-1])


class _ChainGroup:
    """Some of the chains (vectorised NUTS states) and the compiled block of DRAW_BLOCK iterations; held in
    this process or, with ``processes`` > 1 in :func:`run_collapsed`, in a :class:`StatefulServer`'s child.
    ``z0`` (c, dim) and ``keys`` (c, 2) are the chains' starting points and PRNG keys; ``num_warmup`` the
    warm-up iterations of the first adaptation (all of the warm-up unless a pooled mass follows)."""

    def __init__(
        self,
        packed: PackedKernels,
        y: np.ndarray,
        layout: Layout,
        model: PathsModel,
        config: SamplerConfig,
        z0: np.ndarray,
        keys: np.ndarray,
        num_warmup: int,
    ) -> None:
        import jax
        import jax.numpy as jnp
        from numpyro.infer.hmc import hmc

        jax.config.update("jax_enable_x64", True)
        logdensity = _log_density(packed, y, layout, model)
        self._init, sample_kernel = hmc(potential_fn=lambda z: -logdensity(z), algo="NUTS")
        self._config = config
        dense = layout.n_params <= DENSE_MASS_MAX_DIM
        self._start(z0, keys, num_warmup, dense_mass=dense)
        block = min(DRAW_BLOCK, config.warmup + config.draws)

        @jax.jit
        def run_block(state: Any) -> Any:
            def body(s: Any, _: Any) -> Any:
                s = jax.vmap(sample_kernel)(s)
                return s, (s.z, s.diverging, s.num_steps)

            return jax.lax.scan(body, state, None, length=block)

        self._run_block = run_block
        self._jnp = jnp

    def _start(self, z0: Any, keys: Any, num_warmup: int, **kw: Any) -> None:
        import jax
        import jax.numpy as jnp

        c = self._config
        states = [
            self._init(
                jnp.asarray(z0[i]),
                num_warmup,
                target_accept_prob=c.target_accept,
                max_tree_depth=c.max_tree_depth,
                rng_key=jnp.asarray(keys[i]),
                **kw,
            )
            for i in range(len(z0))
        ]
        self.state = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *states)

    def block(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """DRAW_BLOCK iterations: positions (block, c, dim), divergences and leapfrog steps (block, c)."""
        self.state, (z, dv, ns) = self._run_block(self.state)
        return np.asarray(z), np.asarray(dv), np.asarray(ns)

    def fix_mass(self, inverse_mass: np.ndarray, num_warmup: int, keys: np.ndarray) -> None:
        """Restart the warm-up from the current positions with a fixed dense inverse mass matrix, the step
        size adapted for ``num_warmup`` more iterations."""
        self._start(
            np.asarray(self.state.z),
            keys,
            num_warmup,
            dense_mass=True,
            inverse_mass_matrix=self._jnp.asarray(inverse_mass),
            adapt_mass_matrix=False,
        )

    def step_sizes(self) -> np.ndarray:
        return np.asarray(self.state.adapt_state.step_size, dtype=float).reshape(-1)


def _serve_group(group: _ChainGroup, message: tuple[Any, ...]) -> Any:
    """A :class:`StatefulServer` request to a chain group: ("block",), ("fix_mass", inverse mass, warm-up,
    keys) or ("step_sizes",)."""
    return getattr(group, message[0])(*message[1:])


def check_processes(processes: int, chains: int) -> int:
    """Processes that share the chains, an integer in [1, chains] (ParameterError naming it otherwise)."""
    return check_int(f"processes (at most the {chains} chains)", processes, 1, chains)


def run_collapsed(
    C: np.ndarray | FactoredKernels | PackedKernels,
    y: np.ndarray,
    model: PathsModel,
    config: SamplerConfig,
    progress: Callable[[str], None] | None = None,
    stop: StopRule | None = None,
    pooled_mass: bool = False,
    processes: int = 1,
) -> SampleResult:
    """NUTS on the collapsed posterior (float64; dense mass matrix up to DENSE_MASS_MAX_DIM coordinates,
    diagonal above; chains vectorised), draws kept in blocks of DRAW_BLOCK so that a SIGINT/SIGTERM (raised
    by :func:`dotattn.core.runner.stop_on_signals`) stops between blocks, never inside a compiled call.
    Diagnostics on the entries of U_1 (split R-hat, bulk ESS).

    ``C``: (n, n, P, P) training path kernels of ``model.heads`` (dense, factored or packed); ``y``: (P,) labels.
    ``stop``: end the draws early once the diagnostics meet the rule (:class:`StopRule`; at most
    ``config.draws`` per chain); None: exactly ``config.draws``. ``pooled_mass`` (chains above
    DENSE_MASS_MAX_DIM coordinates): the first three quarters of the warm-up (whole blocks) adapt a diagonal
    mass matrix; the covariance of the positions of their second half, pooled over all chains
    (:func:`pooled_covariance`), is then the fixed dense inverse mass matrix of every chain, and the last
    quarter adapts the step size only. Chains too short for it (fewer than two blocks, or fewer pooled
    positions than twice the dimension) keep the diagonal warm-up. ``processes``: the chains are split into
    this many contiguous groups, the first run here and each other one in its own spawned process
    (:class:`~dotattn.core.runner.StatefulServer`, its own copy of the packed kernels), all groups one block
    at a time in step; every chain has the same starting point and keys whatever the split, so its draws
    are those of one process up to the rounding of the batched products.
    """
    N = check_collapsed(model, config)
    processes = check_processes(processes, config.chains)
    n = model.n_paths
    shape = (C.n, C.n, C.P, C.P) if isinstance(C, PackedKernels) else tuple(C.shape)
    if model.outputs > 1:
        if not isinstance(C, (PackedKernels, OutputKernels)) and (
            len(shape) != 4 or shape[:2] != (n, n) or shape[2] != shape[3] or np.shape(y) != (shape[2], model.outputs)
        ):
            raise ParameterError(
                f"path kernels must have shape ({n}, {n}, P, P) and labels (P, {model.outputs}), got {shape} and "
                f"{np.shape(y)}"
            )
        C, y = _output_problem(C, y, model)
        shape = (C.n, C.n, C.P, C.P) if isinstance(C, PackedKernels) else tuple(C.shape)
        n = n * model.outputs
    if len(shape) != 4 or shape[:2] != (n, n) or shape[2] != shape[3] or shape[2] != len(y):
        raise ParameterError(f"path kernels must have shape ({n}, {n}, P, P) with P = len(y) = {len(y)}, got {shape}")
    check_memory(
        collapsed_memory_bytes(n, len(y), config, processes),
        f"collapsed sampling of {n} paths at P = {len(y)}",
        "choose a smaller P, fewer draws or fewer processes",
    )
    import jax
    import jax.numpy as jnp
    from numpyro.diagnostics import split_gelman_rubin

    from dotattn.core.runner import StatefulServer
    from dotattn.paths.sampler import bulk_ess, ess_min_of

    jax.config.update("jax_enable_x64", True)
    t0 = time.perf_counter()
    layout = collapsed_layout(model.heads, N, model.outputs)
    packed, y = pack_kernels(C), np.asarray(y, dtype=float)
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, 29]))
    block = min(DRAW_BLOCK, config.warmup + config.draws)
    dense = layout.n_params <= DENSE_MASS_MAX_DIM
    # pooled mass: a diagonal warm-up of `first` iterations (whole blocks), then the rest of the warm-up with
    # the dense covariance of the second half of its positions, pooled over the chains, step size adapted
    first = (3 * config.warmup // 4) // block * block if pooled_mass and not dense else 0
    if first < 2 * block or config.chains * (first // 2) < 2 * layout.n_params:
        first = 0
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(config.seed), config.chains))
    z0 = np.stack([prior_draw(layout, rng) for _ in range(config.chains)])
    groups = np.array_split(np.arange(config.chains), processes)
    args = [(packed, y, layout, model, config, z0[g], keys[g], first or config.warmup) for g in groups]
    to_U = jax.jit(jax.vmap(jax.vmap(lambda z: order_parameters_fn(layout, model.sigma2)(z)[0])))
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(StatefulServer(_ChainGroup, _serve_group, *a)) for a in args[1:]]
        local = _ChainGroup(*args[0])

        def each_group(method: str, arguments: Sequence[tuple[Any, ...]] | None = None) -> list[Any]:
            """``method`` of every group (its arguments: one tuple per group), the others' while this one's runs."""
            arguments = arguments or [()] * len(groups)
            for server, a in zip(servers, arguments[1:], strict=True):
                server.submit((method, *a))
            here = getattr(local, method)(*arguments[0])
            return [here, *(server.result() for server in servers)]

        total, done = config.warmup + config.draws, 0
        Us: list[np.ndarray] = []
        divs: list[np.ndarray] = []
        steps: list[np.ndarray] = []
        warm: list[np.ndarray] = []
        next_check = config.warmup + (stop.every if stop else 0)
        while done < total:
            if first and done == first:
                inverse_mass = pooled_covariance(np.concatenate(warm[len(warm) // 2 :], axis=0))
                mass_keys = np.asarray(
                    jax.random.split(jax.random.fold_in(jax.random.PRNGKey(config.seed), 1), config.chains)
                )
                each_group("fix_mass", [(inverse_mass, config.warmup - first, mass_keys[g]) for g in groups])
                if progress:
                    progress(
                        f"collapsed N={N:g}: dense mass matrix from {config.chains} x {first - first // 2} pooled "
                        f"warm-up positions; {config.warmup - first} more warm-up iterations adapt the step size"
                    )
            parts = each_group("block")
            z, dv, ns = (np.concatenate([p[i] for p in parts], axis=1) for i in range(3))  # (block, chains, ...)
            if done < first:
                warm.append(z)
            keep = slice(max(0, config.warmup - done), min(block, total - done))
            if keep.start < keep.stop:
                Us.append(np.asarray(to_U(jnp.asarray(np.swapaxes(z, 0, 1))), dtype=float)[:, keep])
                divs.append(dv[keep])
                steps.append(ns[keep])
            done += block
            met = False
            if stop is not None and done >= next_check and done < total and Us:
                U_so_far = np.concatenate(Us, axis=1)
                r_max = float(np.nanmax(np.asarray(split_gelman_rubin(U_so_far), dtype=float)))
                e_min = ess_min_of(bulk_ess(U_so_far))
                met = stop.met(r_max, e_min)
                next_check = done + stop.every
                if progress:
                    progress(
                        f"collapsed N={N:g}: after {U_so_far.shape[1]} draws per chain max R-hat {r_max:.4f}, "
                        f"min ESS {e_min:.0f}: {'stop' if met else 'continue'}"
                    )
            if progress:
                kept = max(0, min(done, total) - config.warmup)
                progress(
                    f"collapsed N={N:g}: {min(done, config.warmup)}/{config.warmup} warm-up and {kept}/{config.draws} "
                    f"draws per chain, {int(sum(d.sum() for d in divs))} divergences, "
                    f"{time.perf_counter() - t0:.0f} s"
                )
            if met:
                break
        step_size = np.concatenate(each_group("step_sizes"))
    U = np.concatenate(Us, axis=1)  # (chains, draws, n, n)
    rhat = np.asarray(split_gelman_rubin(U), dtype=float)
    ess = bulk_ess(U)
    return SampleResult(
        N=N,
        U=U,
        divergences=int(np.sum(np.concatenate(divs))),
        rhat_max=float(np.nanmax(rhat)),
        ess_min=ess_min_of(ess),
        rhat=rhat,
        ess=ess,
        mean_steps=float(np.mean(np.concatenate(steps))),
        step_sizes=tuple(float(s) for s in step_size),
        seconds=time.perf_counter() - t0,
        method="collapsed",
    )
