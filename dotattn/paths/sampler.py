"""Posterior sampling of the attention-paths network by NUTS (NumPyro on JAX, CPU, float64).

The read-in weights V⁰ enter f linearly with a Gaussian prior, so they are integrated out exactly:
given the other weights (a, V^{(ℓ)h}), f on the training set is Gaussian with covariance K(U),
U = V_eff V_effᵀ / N, and the posterior of the remaining weights is

    p(a, V) ∝ exp[−½ ln det(K(U) + 𝒯I) − ½ Yᵀ(K(U) + 𝒯I)⁻¹Y − (|a|² + Σ |V|²)/(2σ²)].

This is exact (no large-N step): the sampler tests the theory's saddle point over U, and only it.
NumPyro and JAX are imported on first use (the ``paths`` extra).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dotattn.core.progress import Cost
from dotattn.core.validation import ParameterError, check_int, check_number
from dotattn.paths.analysis import Evaluation, correct_predictions
from dotattn.paths.data import PathData
from dotattn.paths.theory import Kernels, PathsModel, kernel, output_labels

__all__ = ["SamplerConfig", "SampleResult", "run_nuts", "sampled_evaluation", "MAX_SAMPLE_N"]

MAX_SAMPLE_N = 200
"""Largest width sampled: the chain holds ∏ H_ℓ-many N × N matrices per layer (80 000 weights for
H = 2, L = 2, N = 200) and NUTS needs more leapfrog steps per draw as the dimension grows."""


@dataclass(frozen=True)
class SamplerConfig:
    """Chains, warm-up and kept draws per chain, NUTS target acceptance and tree depth, seed."""

    chains: int = 4
    warmup: int = 500
    draws: int = 500
    target_accept: float = 0.8
    max_tree_depth: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "chains", check_int("chains", self.chains, 1, 64))
        object.__setattr__(self, "warmup", check_int("warmup", self.warmup, 1, 100_000))
        object.__setattr__(self, "draws", check_int("draws (at least 4 for split R-hat)", self.draws, 4, 100_000))
        object.__setattr__(
            self,
            "target_accept",
            check_number("target_accept", self.target_accept, 0.0, True, 1.0, "in (0, 1)", high_open=True),
        )
        object.__setattr__(self, "max_tree_depth", check_int("max_tree_depth", self.max_tree_depth, 1, 15))
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0, 2**32 - 1))
        if self.chains * self.draws > 1_000_000:
            raise ParameterError(f"chains x draws must be <= 1000000, got {self.chains * self.draws}")

    def check(self, model: PathsModel) -> int:
        """The width as an integer in [1, MAX_SAMPLE_N] (sampling the weights needs actual weight matrices;
        the collapsed sampler checks its own range, :func:`dotattn.paths.collapsed.check_collapsed`)."""
        N = model.N
        if not float(N).is_integer() or not 1 <= N <= MAX_SAMPLE_N:
            raise ParameterError(f"N (width) for sampling must be an integer in [1, {MAX_SAMPLE_N}], got {N:g}")
        return int(N)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chains": self.chains,
            "warmup": self.warmup,
            "draws": self.draws,
            "target_accept": self.target_accept,
            "max_tree_depth": self.max_tree_depth,
            "seed": self.seed,
        }


def bulk_ess(U: np.ndarray) -> np.ndarray:
    """Bulk effective sample size of each entry of draws ``U`` (chains, draws, ...), NaN where it cannot be
    computed: with one chain (numpyro's estimator needs at least two: with one it returned -6127 on a
    collapsed run) and wherever the estimate is not a positive finite number."""
    from numpyro.diagnostics import effective_sample_size

    shape = np.shape(U)[2:]
    if np.shape(U)[0] < 2:
        return np.full(shape, np.nan)
    ess = np.asarray(effective_sample_size(np.asarray(U)), dtype=float)
    return np.where(np.isfinite(ess) & (ess > 0), ess, np.nan)


def ess_min_of(ess: np.ndarray) -> float:
    """The smallest ESS, NaN when any entry's ESS cannot be computed (then the run is not converged)."""
    ess = np.asarray(ess, dtype=float)
    return float(np.min(ess)) if ess.size and np.all(np.isfinite(ess)) else float("nan")


@dataclass(frozen=True)
class SampleResult:
    """Draws of U (chains, draws, n, n) and the NUTS diagnostics."""

    N: int
    U: np.ndarray
    divergences: int
    rhat_max: float
    ess_min: float
    rhat: np.ndarray
    ess: np.ndarray
    mean_steps: float
    step_sizes: tuple[float, ...]
    seconds: float
    method: str = "weights"
    """``weights`` (NUTS over a, V^{(ℓ)h}) or ``collapsed`` (NUTS over the order parameters,
    :mod:`dotattn.paths.collapsed`)."""

    @property
    def U_mean(self) -> np.ndarray:
        return self.U.mean(axis=(0, 1))

    @property
    def U_mcse(self) -> np.ndarray:
        """Monte-Carlo standard error of each entry of the posterior mean of U: sd / √ESS."""
        return self.U.std(axis=(0, 1), ddof=1) / np.sqrt(self.ess)

    def diagnostics(self) -> dict[str, Any]:
        return {
            "N": self.N,
            "chains": int(self.U.shape[0]),
            "draws_per_chain": int(self.U.shape[1]),
            "divergences": self.divergences,
            "rhat_max": self.rhat_max,
            "ess_min": self.ess_min,
            "rhat_U": self.rhat,
            "ess_U": self.ess,
            "mean_leapfrog_steps": self.mean_steps,
            "step_sizes": list(self.step_sizes),
            "seconds": self.seconds,
            "method": self.method,
        }


def _numpyro_model(
    C: Any, y: Any, N: int, heads: tuple[int, ...], sigma: float, temperature: float, scale: float, outputs: int = 1
) -> None:
    """The posterior of (a, V) with V⁰ integrated out; M = ``outputs`` > 1: ``a`` is (M, N), ``y`` is vec Y
    (M P,) and K the (M P) × (M P) kernel of docs/attention_paths.md §16."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    shape = [N] if outputs == 1 else [outputs, N]
    a = numpyro.sample("a", dist.Normal(0.0, sigma).expand(shape).to_event(len(shape)))
    Vs = [
        numpyro.sample(f"V{l + 1}", dist.Normal(0.0, sigma).expand([H, N, N]).to_event(3)) for l, H in enumerate(heads)
    ]
    u = a[None, :] if outputs == 1 else a  # the output index least significant
    for V in reversed(Vs):  # V_eff = a V^(L) ... V^(1) / N^(L/2), the layer-1 head most significant
        u = jnp.einsum("kn,hnm->hkm", u, V).reshape(V.shape[0] * u.shape[0], N) / jnp.sqrt(N)
    U = u @ u.T / N
    if outputs == 1:
        K = scale * jnp.tensordot(U, C, axes=([0, 1], [0, 1])) + temperature * jnp.eye(y.shape[0])
    else:
        n, P = C.shape[0], C.shape[2]
        K4 = jnp.einsum("ambk,abpq->mpkq", U.reshape(n, outputs, n, outputs), C)
        K = scale * K4.reshape(outputs * P, outputs * P) + temperature * jnp.eye(y.shape[0])
    Lc = jnp.linalg.cholesky(K)
    z = jax.scipy.linalg.solve_triangular(Lc, y, lower=True)
    numpyro.factor("likelihood", -jnp.sum(jnp.log(jnp.diag(Lc))) - 0.5 * z @ z)
    numpyro.deterministic("U", U)


NUTS_COST = Cost(0.011, 'benchmarks/README.md "Start-line estimates"')
"""CPU seconds per NUTS iteration (warm-up or draw) of one chain at P = 100, N <= 30, besides
:data:`CHAIN_OVERHEAD`: from two runs of the command (``--task markov --N 10``, P = 100, T = 30; nice 5, load
average 5-12 on 2 cores): the README example (4 chains of 300 + 300: 70.8 CPU-s) and 2 chains of 100 + 100
(28.5 CPU-s). The scaling with P and N is from the committed runs (:func:`chain_seconds`). ``typical`` is 1: a
chain runs all its iterations."""
CHAIN_OVERHEAD = 10.0
"""CPU seconds of one chain besides its iterations (NumPyro builds and JAX compiles the sampler for each chain):
from the same two runs."""
SAMPLER_START = 4.0
"""CPU seconds to start the sampler's process and import JAX and NumPyro (once per command)."""


def chain_seconds(config: SamplerConfig, P: int, N: float, collapsed: bool = False) -> float:
    """Rough CPU seconds of one chain: :data:`CHAIN_OVERHEAD` + (warm-up + draws) × :data:`NUTS_COST` ×
    (P/100)^1.5 (the P × P factorisations: 16x from P = 100 to 600 measured) × max(1, N/30) for the weights
    sampler (0.34 s per iteration at N = 100; the collapsed chain's dimension does not grow with N: 0.083 s at
    N = 10 and 0.049 s at N = 1000 in results/paths/markov/collapsed_N*)."""
    width = 1.0 if collapsed else max(1.0, float(N) / 30)
    return CHAIN_OVERHEAD + (config.warmup + config.draws) * NUTS_COST.seconds * (P / 100) ** 1.5 * width


CHAIN_CACHE_FORMAT = 1
"""Version of a cached chain (part of its key)."""


def chain_file(cache_dir: Any, chain: int) -> Any:
    """The cache file of chain ``chain`` (0-based) in ``cache_dir``."""
    from pathlib import Path

    return Path(cache_dir) / f"chain_{chain}.json"


def chain_key(key: Any, config: SamplerConfig, chain: int) -> dict[str, Any]:
    """The cache key of one chain: what the run was made for (``key``: problem, task, sampler settings), the
    chain's index and the format."""
    return {"format": CHAIN_CACHE_FORMAT, "made_for": key, "chain": chain, "chains": config.chains}


def cached_chains(cache_dir: Any, key: Any, config: SamplerConfig) -> int:
    """How many of the ``config.chains`` chains are cached in ``cache_dir`` for ``key``."""
    from dotattn.core.io import read_cache_unit

    if cache_dir is None:
        return 0
    return sum(
        read_cache_unit(chain_file(cache_dir, c), chain_key(key, config, c)) is not None for c in range(config.chains)
    )


def run_nuts(
    data: PathData,
    model: PathsModel,
    config: SamplerConfig,
    progress: bool = False,
    cache_dir: Any = None,
    cache_key: Any = None,
    report: Any = None,
) -> SampleResult:
    """Sample the posterior of (a, V^{(ℓ)h}) by NUTS, ``config.chains`` chains one after the other,
    float64, initialised by prior draws; diagnostics on the entries of U (split R-hat, bulk ESS).

    Chain c runs on the c-th of ``config.chains`` keys split from ``config.seed`` (NumPyro's own split for
    several chains), one chain at a time; with ``cache_dir`` each finished chain is written there at once
    (``chain_<c>.json``, atomic, checksummed, keyed by ``cache_key`` and the settings) and taken from there on
    a later call, so an interrupted run keeps its finished chains. ``report(cached)`` after each chain."""
    N = config.check(model)
    if data.heads != model.heads:
        raise ParameterError(f"heads per layer of the model {model.heads} and of the data {data.heads} differ")
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from numpyro.diagnostics import split_gelman_rubin
    from numpyro.infer import MCMC, NUTS, init_to_sample

    from dotattn.core.io import read_cache_unit, write_cache_unit

    t0 = time.perf_counter()
    key = jax.random.PRNGKey(config.seed)
    keys = jax.random.split(key, config.chains) if config.chains > 1 else [key]
    chains: list[dict[str, Any]] = []
    for c in range(config.chains):
        path = None if cache_dir is None else chain_file(cache_dir, c)
        ckey = chain_key(cache_key, config, c)
        hit = read_cache_unit(path, ckey)
        if hit is None:
            kernel_ = NUTS(
                _numpyro_model,
                init_strategy=init_to_sample,
                target_accept_prob=config.target_accept,
                max_tree_depth=config.max_tree_depth,
            )
            mcmc = MCMC(
                kernel_, num_warmup=config.warmup, num_samples=config.draws, num_chains=1, progress_bar=progress
            )
            mcmc.run(
                keys[c],
                jnp.asarray(data.C_train),
                jnp.asarray(output_labels(data.y_train, model.outputs)),
                N,
                model.heads,
                float(np.sqrt(model.sigma2)),
                model.temperature,
                model.kernel_scale,
                model.outputs,
                extra_fields=("diverging", "num_steps", "adapt_state.step_size"),
            )
            extra = mcmc.get_extra_fields()
            unit = {
                "U": np.asarray(mcmc.get_samples()["U"], dtype=float),
                "divergences": int(np.sum(extra["diverging"])),
                "num_steps": np.asarray(extra["num_steps"], dtype=float),
                "step_size": float(np.asarray(extra["adapt_state.step_size"], dtype=float)[-1]),
            }
            if path is not None:  # the folder only now: an interrupted first chain leaves no empty folder
                path.parent.mkdir(parents=True, exist_ok=True)
                write_cache_unit(path, ckey, **unit)
        else:
            unit = {k: hit[k] for k in ("U", "divergences", "num_steps", "step_size")}
        chains.append(unit)
        if report is not None:
            report(hit is not None)
    U = np.stack([np.asarray(u["U"], dtype=float) for u in chains])  # (chains, draws, n, n)
    rhat = np.asarray(split_gelman_rubin(U), dtype=float)
    ess = bulk_ess(U)
    return SampleResult(
        N=N,
        U=U,
        divergences=int(sum(u["divergences"] for u in chains)),
        rhat_max=float(np.nanmax(rhat)),
        ess_min=ess_min_of(ess),
        rhat=rhat,
        ess=ess,
        mean_steps=float(np.mean([np.asarray(u["num_steps"], dtype=float) for u in chains])),
        step_sizes=tuple(float(u["step_size"]) for u in chains),
        seconds=time.perf_counter() - t0,
    )


def _mean_predictor(U_draws: np.ndarray, data: PathData, model: PathsModel) -> np.ndarray:
    """Average over draws of the exact mean predictor given U, k(U)ᵀ(K(U) + 𝒯I)⁻¹Y, on the test set ((P_test,),
    or (P_test, M) for M outputs)."""
    from dotattn.paths.network import OutputKernels

    c, M = model.kernel_scale, model.outputs
    C_train: Kernels = data.C_train
    C_cross: Kernels = data.C_cross
    y = output_labels(data.y_train, M)
    if M > 1:
        C_train, C_cross = OutputKernels(data.C_train, M), OutputKernels(data.C_cross, M)
    total = np.zeros(C_cross.shape[2])
    eye = model.temperature * np.eye(len(y))
    for U in U_draws:
        K = kernel(U, C_train, c) + eye
        total += kernel(U, C_cross, c) @ np.linalg.solve(K, y)
    mean = total / len(U_draws)
    return mean if M == 1 else mean.reshape(M, -1).T


def sampled_evaluation(
    result: SampleResult, data: PathData, model: PathsModel, max_draws: int = 1000
) -> tuple[Evaluation, float, float]:
    """(test accuracy and loss of the sampled posterior-mean predictor, their Monte-Carlo errors).

    Uses up to ``max_draws`` evenly thinned draws in all; the errors are the spread of the per-chain
    values over √chains (NaN with one chain)."""
    chains, draws = result.U.shape[:2]
    step = max(1, (chains * draws) // max_draws)
    per_chain = [_mean_predictor(result.U[c, ::step], data, model) for c in range(chains)]
    mean = np.mean(per_chain, axis=0)
    yt = data.y_test
    accs = np.array([np.mean(correct_predictions(m, yt)) for m in per_chain])
    losses = np.array([np.mean((m - yt) ** 2) for m in per_chain])
    err = (lambda v: float(np.std(v, ddof=1) / np.sqrt(len(v)))) if chains > 1 else (lambda v: float("nan"))
    ev = Evaluation(
        accuracy=float(np.mean(correct_predictions(mean, yt))),
        loss=float(np.mean((mean - yt) ** 2)),
        variance=float("nan"),
    )
    return ev, err(accs), err(losses)
