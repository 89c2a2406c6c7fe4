"""Finite-size empirical risk minimisation: many runs (alpha × init × seed) in one tensor program.

:func:`run_erm` draws, per seed, a teacher ``Q*``, ``n_max = round(max α · d)`` training samples
(a run at ``α`` uses the first ``round(α d)``; the others are masked out) and a fresh test set;
it trains all runs together (:func:`dotattn.erm.training.train`, weights of shape
``(seeds, alphas, inits, d, r)``), then measures every run (see :data:`RUN_COLUMNS`) and
selects, per ``(α, seed)``, the informed initialisation with the lower training loss.

Initialisations (``Q ∈ R^{d×r}``):

* ``semantic`` — ``Q = Q*`` when ``r = r_t``; otherwise the first ``min(r, r_t)`` columns of
  ``Q*``, padded by columns of ``random_scale · N(0, 1)`` entries.
* ``positional`` — first column ``c·√d·v`` along the leading positional direction ``v`` (the top
  right singular vector of ``P``; ``1_d/√d`` for the toy model), with ``c`` such that
  ``max_l |μ_l| = positional_m0`` (``μ_l = Qᵀp_l/√d``; toy model: ``m = positional_m0``); other
  columns ``random_scale · N(0, 1)``.
* ``random`` — ``random_scale · N(0, 1)`` entries (a small perturbation of the saddle ``Q = 0``).

For ``r = 1`` the sign of ``Q`` (the model is invariant under ``Q → −Q``) is fixed after training
so that the largest overlap with the teacher is ``≥ 0``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from dotattn.erm.data import (STREAM_INIT, STREAM_TEST, STREAM_TRAIN, TEACHERS, generator, make_dataset,
                              positional_embeddings, teacher_weights)
from dotattn.erm.models import (attention_matrix_pf, fit_linear_baseline, quadratic_residual_pf,
                                residual_sq_norm, sample_stats)
from dotattn.erm.training import DEFAULT_LR, OPTIMIZERS, STATUS, train
from dotattn.problem import ParameterError, Problem, readonly_array

__all__ = ["INIT_KINDS", "INIT_CHOICES", "DTYPES", "DEVICE_CHOICES", "BRANCH_THETA", "BRANCH_M",
           "RUN_COLUMNS", "SUMMARY_COLUMNS", "COLUMN_DOCS", "ErmConfig", "RunRecord", "ErmResult",
           "resolve_device", "initial_weights", "run_erm", "run_config"]

INIT_KINDS: tuple[str, ...] = ("semantic", "positional", "random")
INIT_CHOICES: dict[str, tuple[str, ...]] = {
    "semantic": ("semantic",), "positional": ("positional",), "random": ("random",),
    "both": ("semantic", "positional"), "all": ("semantic", "positional", "random")}
INFORMED: tuple[str, ...] = ("semantic", "positional")
DTYPES: dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32}
DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
BRANCH_THETA = 0.1
"""A run counts as semantic when ``‖QᵀQ*‖_F/d = ‖θ‖_F/σ² ≥ BRANCH_THETA``."""
BRANCH_M = 0.05
"""A run counts as positional when ``max_l ‖μ_l‖ ≥ BRANCH_M``."""


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ParameterError for unknown or unavailable devices."""
    key = str(name).strip().lower()
    if key == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if key == "cpu":
        return torch.device("cpu")
    if key == "cuda" or (key.startswith("cuda:") and key[5:].isdigit()):
        if not torch.cuda.is_available():
            raise ParameterError(f"device must be auto or cpu here: {name!r} requested but "
                                 "torch.cuda.is_available() is False")
        if ":" in key and int(key[5:]) >= torch.cuda.device_count():
            raise ParameterError(f"device index must be < {torch.cuda.device_count()}, got {name!r}")
        return torch.device(key)
    raise ParameterError(f"device must be one of {DEVICE_CHOICES}, got {name!r}")


def _normalise_inits(inits: str | Sequence[str]) -> tuple[str, ...]:
    names = [inits] if isinstance(inits, str) else list(inits)
    out: list[str] = []
    for name in names:
        key = str(name).strip().lower()
        if key not in INIT_CHOICES:
            raise ParameterError(f"init must be one of {', '.join(INIT_CHOICES)}, got {name!r}")
        out.extend(k for k in INIT_CHOICES[key] if k not in out)
    if not out:
        raise ParameterError(f"init must be one of {', '.join(INIT_CHOICES)}; none given")
    return tuple(k for k in INIT_KINDS if k in out)


def _normalise_seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ParameterError(f"seeds must be an integer >= 1 (number of seeds), got {seeds}")
        return tuple(range(int(seeds)))
    try:
        out = tuple(int(s) for s in seeds)
    except (TypeError, ValueError):
        raise ParameterError("seeds must be a count >= 1 or a list of integers >= 0") from None
    if not out or min(out) < 0 or len(set(out)) != len(out):
        raise ParameterError("seeds must be a non-empty list of distinct integers >= 0")
    return out


def _positive(name: str, value: Any, allow_zero: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a real number {'>= 0' if allow_zero else '> 0'}") from None
    if not math.isfinite(x) or (x < 0 if allow_zero else x <= 0):
        raise ParameterError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {x:g}")
    return x


def _integer(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float)) or not float(value).is_integer():
        raise ParameterError(f"{name} must be an integer >= {low}, got {value!r}")
    if int(value) < low:
        raise ParameterError(f"{name} must be an integer >= {low}, got {int(value)}")
    return int(value)


@dataclass(frozen=True)
class ErmConfig:
    """Everything that defines one batch of ERM runs besides the :class:`Problem` (validated).

    ``alphas`` are sample ratios (``n = round(α d)``), ``inits`` a name of :data:`INIT_CHOICES` or
    a list of :data:`INIT_KINDS`, ``seeds`` a count (seeds ``0 .. count-1``) or a list; ``lr``
    ``None`` means the optimiser's default (:data:`dotattn.erm.training.DEFAULT_LR`). ``teacher``
    is one of :data:`dotattn.erm.data.TEACHERS`; ``train_offset`` is the index of the first
    training sample in the seed's training stream (0: the nested prefix; another offset gives a
    disjoint, independent training set for the same teacher).
    """

    d: int
    alphas: tuple[float, ...]
    inits: tuple[str, ...] = ("semantic", "positional")
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    optimizer: str = "gd"
    steps: int = 5000
    lr: float | None = None
    tol: float = 1e-9
    test_samples: int = 10_000
    dtype: str = "float64"
    device: str = "auto"
    positional_m0: float = 0.3
    random_scale: float = 0.1
    baseline_ridge: float = 1e-8
    test_batch: int = 2048
    teacher: str = "gaussian"
    train_offset: int = 0

    def __post_init__(self) -> None:
        d = _integer("d", self.d, 2)
        object.__setattr__(self, "d", d)
        raw = [self.alphas] if isinstance(self.alphas, (int, float, np.number)) else list(self.alphas)
        if not raw:
            raise ParameterError("alpha grid is empty; give at least one value > 0")
        alphas = []
        for a in raw:
            x = _positive("alpha", a)
            if x * d < 1:
                raise ParameterError(f"alpha must be >= 1/d = {1 / d:g} (alpha*d >= 1 training sample), got {x:g}")
            alphas.append(x)
        object.__setattr__(self, "alphas", tuple(sorted(set(alphas))))
        object.__setattr__(self, "inits", _normalise_inits(self.inits))
        object.__setattr__(self, "seeds", _normalise_seeds(self.seeds))
        opt = str(self.optimizer).strip().lower()
        if opt not in OPTIMIZERS:
            raise ParameterError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        object.__setattr__(self, "optimizer", opt)
        object.__setattr__(self, "steps", _integer("steps", self.steps, 1))
        lr = DEFAULT_LR[opt] if self.lr is None else _positive("lr", self.lr)
        object.__setattr__(self, "lr", lr)
        object.__setattr__(self, "tol", _positive("tol", self.tol, allow_zero=True))
        object.__setattr__(self, "test_samples", _integer("test_samples", self.test_samples, 1))
        if self.dtype not in DTYPES:
            raise ParameterError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        resolve_device(self.device)
        object.__setattr__(self, "positional_m0", _positive("positional_m0", self.positional_m0))
        object.__setattr__(self, "random_scale", _positive("random_scale", self.random_scale, allow_zero=True))
        object.__setattr__(self, "baseline_ridge", _positive("baseline_ridge", self.baseline_ridge, allow_zero=True))
        object.__setattr__(self, "test_batch", _integer("test_batch", self.test_batch, 1))
        if self.teacher not in TEACHERS:
            raise ParameterError(f"teacher must be one of {', '.join(TEACHERS)}, got {self.teacher!r}")
        object.__setattr__(self, "train_offset", _integer("train_offset", self.train_offset, 0))

    @property
    def ns(self) -> tuple[int, ...]:
        """Training-set sizes ``round(α d)`` per alpha."""
        return tuple(max(1, int(round(a * self.d))) for a in self.alphas)

    def check(self, problem: Problem) -> None:
        """Checks that involve the problem (ParameterError)."""
        if self.d < problem.L:
            raise ParameterError(f"d must be >= L = {problem.L}, got {self.d}")
        if "positional" in self.inits and float(np.max(np.abs(problem.G))) == 0.0:
            raise ParameterError("init positional needs a nonzero positional_gram")

    def to_dict(self) -> dict[str, Any]:
        return {"d": self.d, "alphas": list(self.alphas), "n": list(self.ns), "inits": list(self.inits),
                "seeds": list(self.seeds), "optimizer": self.optimizer, "steps": self.steps, "lr": self.lr,
                "tol": self.tol, "test_samples": self.test_samples, "dtype": self.dtype, "device": self.device,
                "positional_m0": self.positional_m0, "random_scale": self.random_scale,
                "baseline_ridge": self.baseline_ridge, "test_batch": self.test_batch, "teacher": self.teacher,
                "train_offset": self.train_offset}


@dataclass(frozen=True)
class RunRecord:
    """Measurements of one run (one alpha, initialisation and seed).

    Overlaps use SPEC section 2's conventions: ``theta = σ² QᵀQ*/d`` (r×r_t), ``q = σ² QᵀQ/d``
    (r×r), ``mu[l] = Qᵀp_l/√d`` (L×r), ``m = ‖μ_1‖``. ``train_loss = R(Q)/d`` (ridge included),
    ``train_error`` the mean of ``‖ŷ−y‖²/(2d)`` over the training set, ``test_error`` (± standard
    error ``test_error_se``) the same on the fresh test set; ``linear_*`` the baseline's.
    """

    alpha: float
    n: int
    init: str
    seed: int
    status: str
    steps: int
    rel_change: float
    grad_norm: float
    train_loss: float
    train_error: float
    test_error: float
    test_error_se: float
    linear_train_error: float
    linear_test_error: float
    m: float
    mu: np.ndarray
    theta: np.ndarray
    q: np.ndarray
    theta_over_sigma2: np.ndarray
    q_over_sigma2: np.ndarray
    branch: str
    selected: bool

    def row(self, d: int) -> dict[str, Any]:
        """A flat dict for ``runs.csv`` (1×1 matrices as numbers, larger ones as nested lists)."""
        out: dict[str, Any] = {"d": d}
        for k in RUN_COLUMNS:
            if k == "d":
                continue
            v = getattr(self, k)
            out[k] = _scalar_or_list(v) if isinstance(v, np.ndarray) and k != "mu" else (
                _mu_list(v) if k == "mu" else v)
        return out


def _scalar_or_list(a: np.ndarray) -> float | list:
    a = np.asarray(a, dtype=float)
    return float(a.reshape(-1)[0]) if a.size == 1 else a.tolist()


def _mu_list(mu: np.ndarray) -> list:
    mu = np.asarray(mu, dtype=float)
    return mu[:, 0].tolist() if mu.shape[1] == 1 else mu.tolist()


RUN_COLUMNS: tuple[str, ...] = (
    "alpha", "n", "d", "init", "seed", "status", "steps", "rel_change", "grad_norm", "train_loss",
    "train_error", "test_error", "test_error_se", "linear_train_error", "linear_test_error", "m", "mu",
    "theta_over_sigma2", "q_over_sigma2", "theta", "q", "branch", "selected")
_SUMMARY_METRICS: tuple[str, ...] = (
    "m", "theta_over_sigma2", "q_over_sigma2", "theta", "q", "train_loss", "train_error", "test_error",
    "linear_train_error", "linear_test_error", "steps", "grad_norm")
SUMMARY_COLUMNS: tuple[str, ...] = (
    ("alpha", "n", "d", "init", "runs", "converged", "max_steps", "diverged", "branches", "selected_inits")
    + tuple(f"{k}_{s}" for k in _SUMMARY_METRICS for s in ("mean", "std")))
COLUMN_DOCS: dict[str, str] = {
    "alpha": "sample ratio; n = round(alpha*d) training samples",
    "init": "initialisation (semantic: Q=Q*, positional: Q along p_1, random: small N(0,1)); "
            "'selected' rows: per seed, the informed run of lower train_loss",
    "status": "converged (|dR|/|R| <= tol), max_steps (step budget spent) or diverged",
    "steps": "optimisation steps applied",
    "rel_change": "last relative change of R per step",
    "grad_norm": "||grad_Q R||_F at the final Q",
    "train_loss": "R(Q)/d = sum_mu ||yhat-y||^2/(2d^2) + lambda ||Q||^2/(2d)  (SPEC e_t)",
    "train_error": "mean over training samples of ||yhat-y||^2/(2d)",
    "test_error": "mean over test_samples fresh samples of ||yhat-y||^2/(2d)  (SPEC eps_g)",
    "test_error_se": "standard error of test_error from the test-set sample",
    "linear_train_error": "linear baseline yhat = B X (least squares, ridge baseline_ridge) on the training set",
    "linear_test_error": "linear baseline's test error on the same test set",
    "m": "||Q^T p_1||/sqrt(d)",
    "mu": "mu_l = Q^T p_l/sqrt(d), l = 1..L (r = 1: numbers; else lists)",
    "theta_over_sigma2": "Q^T Q*/d (r x r_t)",
    "q_over_sigma2": "Q^T Q/d (r x r)",
    "theta": "SPEC theta = sigma^2 Q^T Q*/d",
    "q": "SPEC q = sigma^2 Q^T Q/d",
    "branch": f"semantic if ||theta||_F/sigma^2 >= {BRANCH_THETA}, positional if max_l ||mu_l|| >= {BRANCH_M}, "
              "mixed if both, uninformative if neither",
    "selected": "this run is the informed run of lower train_loss at its (alpha, seed)",
    "runs": "number of seeds aggregated",
    "branches": "count of runs per reached branch",
    "selected_inits": "selected rows: how many seeds selected each informed initialisation",
    "*_mean, *_std": "mean and sample standard deviation (ddof=1) over seeds; empty std for one seed",
}


@dataclass(frozen=True)
class ErmResult:
    """All runs of one :func:`run_erm` call, plus what produced them.

    ``runs`` are ordered by alpha, then init (:data:`INIT_KINDS` order), then seed.
    """

    problem: Problem
    config: ErmConfig
    runs: tuple[RunRecord, ...]
    device: str
    seconds: float
    threads: int = field(default=1)

    def select(self, alpha: float | None = None, init: str | None = None,
               seed: int | None = None) -> tuple[RunRecord, ...]:
        """Runs matching the given alpha (to 1e-9), init ('selected' for selected runs) and seed."""
        out = []
        for r in self.runs:
            if alpha is not None and abs(r.alpha - alpha) > 1e-9:
                continue
            if init == "selected" and not r.selected:
                continue
            if init not in (None, "selected") and r.init != init:
                continue
            if seed is not None and r.seed != seed:
                continue
            out.append(r)
        return tuple(out)

    def run_rows(self) -> list[dict[str, Any]]:
        """One dict per run (columns :data:`RUN_COLUMNS`)."""
        return [r.row(self.config.d) for r in self.runs]

    def summary_rows(self) -> list[dict[str, Any]]:
        """Mean and std over seeds per (alpha, init), plus 'selected' rows (columns :data:`SUMMARY_COLUMNS`)."""
        rows = []
        groups = list(self.config.inits) + (["selected"] if any(k in INFORMED for k in self.config.inits) else [])
        for alpha, n in zip(self.config.alphas, self.config.ns):
            for init in groups:
                runs = self.select(alpha=alpha, init=init)
                if runs:
                    rows.append(_summarise(runs, alpha, n, self.config.d, init))
        return rows

    def parameters(self) -> dict[str, Any]:
        """Problem and configuration, JSON-ready (for provenance)."""
        return {"problem": self.problem.to_dict(), "erm": self.config.to_dict(), "resolved_device": self.device,
                "torch_threads": self.threads, "torch_version": torch.__version__}


def _counts(labels: Sequence[str]) -> str:
    keys = sorted(set(labels), key=list(labels).index)
    return ";".join(f"{k}:{list(labels).count(k)}" for k in keys)


def _summarise(runs: Sequence[RunRecord], alpha: float, n: int, d: int, init: str) -> dict[str, Any]:
    row: dict[str, Any] = {"alpha": alpha, "n": n, "d": d, "init": init, "runs": len(runs),
                           "converged": sum(r.status == "converged" for r in runs),
                           "max_steps": sum(r.status == "max_steps" for r in runs),
                           "diverged": sum(r.status == "diverged" for r in runs),
                           "branches": _counts([r.branch for r in runs]),
                           "selected_inits": _counts([r.init for r in runs]) if init == "selected" else ""}
    for k in _SUMMARY_METRICS:
        vals = np.stack([np.asarray(getattr(r, k), dtype=float) for r in runs])
        row[f"{k}_mean"] = _scalar_or_list(vals.mean(axis=0))
        std = vals.std(axis=0, ddof=1) if len(runs) > 1 else np.full(vals.shape[1:], np.nan)
        row[f"{k}_std"] = _scalar_or_list(std)
    return row


# ----------------------------------------------------------------------------------------------
def initial_weights(kind: str, Q_star: torch.Tensor, P: torch.Tensor, rank: int, seed: int,
                    positional_m0: float = 0.3, random_scale: float = 0.1) -> torch.Tensor:
    """Initial ``Q`` (shape ``(d, r)``) of one kind for teacher ``Q*`` ``(d, r_t)`` and embeddings ``P`` ``(L, d)``."""
    d, rt = Q_star.shape
    dt, dev = Q_star.dtype, Q_star.device
    stream = 1 + INIT_KINDS.index(kind)
    noise = random_scale * torch.randn(d, rank, generator=generator(seed, STREAM_INIT, stream),
                                       dtype=torch.float64).to(dtype=dt, device=dev)
    if kind == "random":
        return noise
    Q = noise.clone()
    if kind == "semantic":
        k = min(rank, rt)
        Q[:, :k] = Q_star[:, :k]
        return Q
    if kind == "positional":
        _, _, Vh = torch.linalg.svd(P.to(torch.float64), full_matrices=False)
        v = Vh[0]
        proj = P.to(torch.float64) @ v  # p_l . v
        if float(proj.abs().max()) == 0.0:
            raise ParameterError("init positional needs a nonzero positional_gram")
        if float(proj[0]) < 0 or (float(proj[0]) == 0 and float(proj[proj.abs().argmax()]) < 0):
            v, proj = -v, -proj
        c = positional_m0 / float(proj.abs().max())
        Q[:, 0] = (c * math.sqrt(d) * v).to(dtype=dt, device=dev)
        return Q
    raise ParameterError(f"init must be one of {', '.join(INIT_KINDS)}, got {kind!r}")


def _sample_errors(W: torch.Tensor, X: torch.Tensor, Cxx: torch.Tensor, Cyx: torch.Tensor,
                   cyy: torch.Tensor) -> torch.Tensor:
    """``‖ŷ − y‖²_F`` of every run on every sample of its seed.

    ``W (S, R, r, d)`` holds ``Qᵀ`` of ``R`` runs per seed; ``X (S, n, L, d)``; ``Cxx, Cyx (L, L, S, n)``
    and ``cyy (S, n)`` (positions-first, :func:`dotattn.erm.models.quadratic_residual_pf`).
    Returns ``(S, R, n)``. One matmul per seed computes the fields of all its runs.
    """
    S, R, r, d = W.shape
    n, L = X.shape[1], X.shape[2]
    hT = torch.bmm(W.reshape(S, R * r, d), X.reshape(S, n * L, d).transpose(1, 2)) / math.sqrt(d)
    h = hT.reshape(S, R, r, n, L).permute(4, 2, 0, 1, 3).contiguous()  # (L, r, S, R, n)
    att = attention_matrix_pf(h)  # (L, L, S, R, n)
    return quadratic_residual_pf(att, Cxx[:, :, :, None], Cyx[:, :, :, None], cyy[:, None])


def _risk_function(X: torch.Tensor, Cxx: torch.Tensor, Cyx: torch.Tensor, cyy: torch.Tensor,
                   ns: Sequence[int], ridge: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """``W (S, A, I, r, d) -> R (S, A, I)``: run ``(s, a, i)`` sees the first ``ns[a]`` samples of seed ``s``.

    ``ns`` is increasing. Samples ``ns[j-1] .. ns[j]-1`` are used by the alphas ``a >= j`` only,
    so the fields are computed block by block for those runs: the work is ``Σ_a n_a``, not
    ``A · max n`` (a loop over the few alpha blocks, never over runs).
    """
    bounds = [0, *ns]
    blocks = [(j, lo, hi) for j, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])) if hi > lo]

    def risk(W: torch.Tensor) -> torch.Tensor:
        S, A, I, r, d = W.shape
        data = W.new_zeros(S, A, I)
        for j, lo, hi in blocks:
            err = _sample_errors(W[:, j:].reshape(S, (A - j) * I, r, d), X[:, lo:hi], Cxx[..., lo:hi],
                                 Cyx[..., lo:hi], cyy[:, lo:hi])  # (S, (A-j) I, n_block)
            data = data + torch.nn.functional.pad(err.sum(-1).reshape(S, A - j, I), (0, 0, j, 0))
        return data / (2 * d) + 0.5 * ridge * W.square().sum((-1, -2))

    return risk


def run_erm(problem: Problem, d: int, alphas: float | Sequence[float], inits: str | Sequence[str] = "both",
            seeds: int | Sequence[int] = 4, *, optimizer: str = "gd", steps: int = 5000,
            lr: float | None = None, tol: float = 1e-9, test_samples: int = 10_000,
            dtype: str = "float64", device: str = "auto",
            progress: Callable[[int], None] | None = None, **options: Any) -> ErmResult:
    """Train and measure every (alpha, init, seed) run at dimension ``d``; see :class:`ErmConfig`.

    ``options`` are the remaining :class:`ErmConfig` fields (``positional_m0``, ``random_scale``,
    ``baseline_ridge``, ``test_batch``). ``progress(k)`` is called after each chunk of ``k`` steps.
    All validation happens before any computation (ParameterError).
    """
    config = ErmConfig(d=d, alphas=alphas, inits=inits, seeds=seeds, optimizer=optimizer, steps=steps, lr=lr,
                       tol=tol, test_samples=test_samples, dtype=dtype, device=device, **options)
    return run_config(problem, config, progress)


def run_config(problem: Problem, config: ErmConfig, progress: Callable[[int], None] | None = None) -> ErmResult:
    """:func:`run_erm` for a ready :class:`ErmConfig`."""
    config.check(problem)
    t0 = time.perf_counter()
    dev, dt = resolve_device(config.device), DTYPES[config.dtype]
    d, L, r = config.d, problem.L, problem.rank
    seeds, alphas, inits, ns = config.seeds, config.alphas, config.inits, config.ns
    S, A, I, N = len(seeds), len(alphas), len(inits), max(ns)

    P = positional_embeddings(problem.G, d, dt, dev)
    G = P @ P.T
    Q_star = torch.stack([teacher_weights(d, problem.teacher_rank, s, dt, dev, config.teacher)
                          for s in seeds])  # (S, d, r_t)
    X = torch.empty(S, N, L, d, dtype=dt, device=dev)
    T, Cpz, Czz = (torch.empty(S, N, L, L, dtype=dt, device=dev) for _ in range(3))
    for k, s in enumerate(seeds):
        ds = make_dataset(problem, Q_star[k], P, N, s, STREAM_TRAIN, config.train_offset)
        X[k], T[k], Cpz[k], Czz[k] = ds.X, ds.T, ds.Cpz, ds.Czz
        del ds
    Cxx, Cyx, cyy = sample_stats(T, G, Cpz, Czz)
    pf = (lambda M: M.permute(2, 3, 0, 1).contiguous())  # (S, N, L, L) -> positions-first (L, L, S, N)
    risk = _risk_function(X, pf(Cxx), pf(Cyx), cyy, ns, problem.ridge)

    W0 = torch.stack([torch.stack([initial_weights(kind, Q_star[k], P, r, s, config.positional_m0,
                                                   config.random_scale) for kind in inits])
                      for k, s in enumerate(seeds)]).transpose(-1, -2)  # (S, I, r, d) = Qᵀ
    W0 = W0[:, None].expand(S, A, I, r, d).contiguous()
    out = train(risk, W0, optimizer=config.optimizer, steps=config.steps, lr=config.lr, tol=config.tol,
                ridge=problem.ridge, progress=progress)

    with torch.no_grad():
        Q = out.Q.transpose(-1, -2)  # (S, A, I, d, r)
        theta_s2 = torch.einsum("saidr,sdt->sairt", Q, Q_star) / d  # (S, A, I, r, r_t)
        if r == 1:  # fix the Q -> -Q symmetry
            flat = theta_s2.flatten(-2)
            sign = torch.sign(flat.gather(-1, flat.abs().argmax(-1, keepdim=True)))[..., 0]
            sign = torch.where(sign == 0, torch.ones_like(sign), sign)
            Q = Q * sign[..., None, None]
            theta_s2 = theta_s2 * sign[..., None, None]
        q_s2 = Q.transpose(-1, -2) @ Q / d  # (S, A, I, r, r)
        mu = torch.einsum("ld,saidr->sailr", P, Q) / math.sqrt(d)  # (S, A, I, L, r)
        n_t = torch.tensor(ns, device=dev)
        mask = (torch.arange(N, device=dev)[None, :] < n_t[:, None]).to(dt)  # (A, N)
        train_loss = out.loss / d
        train_error = (out.loss - 0.5 * problem.ridge * Q.square().sum((-1, -2))) / n_t.to(dt)[None, :, None]

        # linear baseline per (seed, alpha), fitted on the same training prefixes
        B = fit_linear_baseline(torch.einsum("an,snij->saij", mask, Cyx), torch.einsum("an,snij->saij", mask, Cxx),
                                d, config.baseline_ridge)  # (S, A, L, L)
        lin_err = residual_sq_norm(B[:, :, None], T[:, None], G, Cpz[:, None], Czz[:, None])  # (S, A, N)
        lin_train = (lin_err * mask).sum(-1) / (2 * d) / n_t.to(dt)
        del X, T, Cpz, Czz, Cxx, Cyx, cyy

        test_sum = torch.zeros(S, A * I, dtype=torch.float64, device=dev)
        test_sq = torch.zeros_like(test_sum)
        lin_test = torch.zeros(S, A, dtype=torch.float64, device=dev)
        W = Q.transpose(-1, -2).reshape(S, A * I, r, d)
        for start in range(0, config.test_samples, config.test_batch):
            nb = min(config.test_batch, config.test_samples - start)
            parts = [make_dataset(problem, Q_star[k], P, nb, s, STREAM_TEST, start) for k, s in enumerate(seeds)]
            Xt, Tt, Cpzt, Czzt = (torch.stack([getattr(p, f) for p in parts]) for f in ("X", "T", "Cpz", "Czz"))
            del parts
            Cxxt, Cyxt, cyyt = sample_stats(Tt, G, Cpzt, Czzt)
            err = _sample_errors(W, Xt, pf(Cxxt), pf(Cyxt), cyyt).to(torch.float64) / (2 * d)  # (S, A I, nb)
            test_sum += err.sum(-1)
            test_sq += err.square().sum(-1)
            lin_test += (residual_sq_norm(B[:, :, None], Tt[:, None], G, Cpzt[:, None], Czzt[:, None])
                         .to(torch.float64) / (2 * d)).sum(-1)
        nt = config.test_samples
        test_err = (test_sum / nt).reshape(S, A, I)
        test_se = ((test_sq / nt - (test_sum / nt).square()).clamp_min(0) / max(nt - 1, 1)).sqrt().reshape(S, A, I)
        lin_test = lin_test / nt

        # selection among informed inits: lower training loss per (seed, alpha)
        informed = torch.tensor([k in INFORMED for k in inits], device=dev)
        masked = torch.where(informed, train_loss.nan_to_num(nan=float("inf")), float("inf"))
        chosen = masked.argmin(-1)  # (S, A)
        selected = (torch.arange(I, device=dev) == chosen[..., None]) & informed

    arr = {k: v.detach().cpu().to(torch.float64).numpy() for k, v in dict(
        train_loss=train_loss, train_error=train_error, test_err=test_err, test_se=test_se, lin_train=lin_train,
        lin_test=lin_test, theta_s2=theta_s2, q_s2=q_s2, mu=mu, rel=out.rel_change, grad=out.grad_norm).items()}
    status = out.status.cpu().numpy()
    steps_done = out.steps.cpu().numpy()
    sel = selected.cpu().numpy()
    sig2 = problem.sigma ** 2
    runs = []
    for a, (alpha, n) in enumerate(zip(alphas, ns)):
        for i, kind in enumerate(inits):
            for k, s in enumerate(seeds):
                th, qq, mu_k = arr["theta_s2"][k, a, i], arr["q_s2"][k, a, i], arr["mu"][k, a, i]
                m_val = float(np.linalg.norm(mu_k[0]))
                th_norm, m_max = float(np.linalg.norm(th)), float(np.linalg.norm(mu_k, axis=1).max())
                branch = {(True, False): "semantic", (False, True): "positional", (True, True): "mixed",
                          (False, False): "uninformative"}[(th_norm >= BRANCH_THETA, m_max >= BRANCH_M)]
                runs.append(RunRecord(
                    alpha=float(alpha), n=int(n), init=kind, seed=int(s), status=STATUS[int(status[k, a, i])],
                    steps=int(steps_done[k, a, i]), rel_change=float(arr["rel"][k, a, i]),
                    grad_norm=float(arr["grad"][k, a, i]), train_loss=float(arr["train_loss"][k, a, i]),
                    train_error=float(arr["train_error"][k, a, i]), test_error=float(arr["test_err"][k, a, i]),
                    test_error_se=float(arr["test_se"][k, a, i]), linear_train_error=float(arr["lin_train"][k, a]),
                    linear_test_error=float(arr["lin_test"][k, a]), m=m_val, mu=readonly_array(mu_k),
                    theta=readonly_array(sig2 * th), q=readonly_array(sig2 * qq), theta_over_sigma2=readonly_array(th),
                    q_over_sigma2=readonly_array(qq), branch=branch, selected=bool(sel[k, a, i])))
    return ErmResult(problem=problem, config=config, runs=tuple(runs), device=str(dev),
                     seconds=time.perf_counter() - t0, threads=torch.get_num_threads())
