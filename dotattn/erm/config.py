"""Configuration of a batch of ERM runs (:class:`ErmConfig`), validated at construction without torch.

Everything here is checked syntactically (names, ranges, the device name ``auto | cpu | cuda |
cuda:N``); whether a requested device exists is checked when a run starts
(:func:`dotattn.erm.experiment.resolve_device`), still before any heavy computation. The
optimiser names and default learning rates live here too, so that the CLI can validate all its
input without importing torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import InitVar, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dotattn.core.optimizers import DEFAULT_LR, DEFAULT_TOL, OPTIMIZERS
from dotattn.core.resources import MEMORY_FRACTION, available_memory
from dotattn.core.validation import ParameterError, check_alpha
from dotattn.positional_semantic.problem import Problem, check_problem

__all__ = [
    "ErmConfig",
    "VALUES",
    "MAX_VALUE_RANK",
    "WeightLayout",
    "INIT_KINDS",
    "INIT_CHOICES",
    "INFORMED",
    "DTYPE_NAMES",
    "DEVICE_CHOICES",
    "TEACHERS",
    "check_device_name",
    "MAX_STEPS",
]

INIT_KINDS: tuple[str, ...] = ("semantic", "positional", "random")
INIT_CHOICES: dict[str, tuple[str, ...]] = {
    "semantic": ("semantic",),
    "positional": ("positional",),
    "random": ("random",),
    "both": ("semantic", "positional"),
    "all": ("semantic", "positional", "random"),
}
INFORMED: tuple[str, ...] = ("semantic", "positional")
DTYPE_NAMES: tuple[str, ...] = ("float64", "float32")
DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
TEACHERS: tuple[str, ...] = ("gaussian", "orthonormal")
VALUES: tuple[str, ...] = ("none", "scalar", "low-rank")
"""Value matrix of the student (``docs/variants.md``): ``none`` (V = I, the model of SPEC section 1),
``scalar`` (V = v I, v trainable) or ``low-rank`` (V = v I + U Wᵀ/d, U, W ∈ R^{d×k}, k = ``value_rank``);
the ridge acts on V − I (on √d (v − 1), U and W)."""
MAX_VALUE_RANK = 64
"""Largest rank k of the value correction (as :data:`dotattn.positional_semantic.problem.SHAPE_MAX`)."""
_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:[0-9]+)$")
MAX_STEPS = 10**8
"""Largest step budget per run."""
MAX_SEEDS = 10_000
"""Most seeds in one batch of runs."""
MAX_TEST_SAMPLES = 10**7
"""Most fresh test samples per run (the test error's standard error is then ~3e-4 relative)."""


def _gib(x: float) -> str:
    return f"{x / 2**30:,.1f} GiB"


def check_device_name(name: Any) -> str:
    """The device name, lower-cased, if it is ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (ParameterError if not)."""
    key = str(name).strip().lower()
    if not _DEVICE.match(key):
        raise ParameterError(f"device must be one of {DEVICE_CHOICES}, got {name!r}")
    return key


def _normalise_inits(inits: str | Sequence[str]) -> tuple[str, ...]:
    try:
        names = [inits] if isinstance(inits, str) else list(inits)
    except TypeError:
        raise ParameterError(
            f"init must be one of {', '.join(INIT_CHOICES)} or a list of them, got {inits!r}"
        ) from None
    out: list[str] = []
    for name in names:
        key = str(name).strip().lower()
        if key not in INIT_CHOICES:
            raise ParameterError(f"init must be one of {', '.join(INIT_CHOICES)}, got {name!r}")
        out.extend(k for k in INIT_CHOICES[key] if k not in out)
    if not out:
        raise ParameterError(f"init must be one of {', '.join(INIT_CHOICES)}; none given")
    return tuple(k for k in INIT_KINDS if k in out)


def _normalise_seeds(seeds: int | Sequence[int], first: int = 0) -> tuple[int, ...]:
    """A count of seeds (``first .. first+count-1``) or an explicit list (``first`` must be 0 then)."""
    first = _integer("first_seed", first, 0)
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if not 1 <= seeds <= MAX_SEEDS:
            raise ParameterError(f"seeds must be an integer in [1, {MAX_SEEDS}] (number of seeds), got {seeds}")
        return tuple(range(first, first + int(seeds)))
    if first:
        raise ParameterError("first_seed applies to a count of seeds, not to a list of seeds")
    if isinstance(seeds, bool):
        raise ParameterError("seeds must be a count >= 1 or a list of integers >= 0")
    try:
        out = tuple(int(s) for s in seeds)
    except (TypeError, ValueError):
        raise ParameterError("seeds must be a count >= 1 or a list of integers >= 0") from None
    if not out or min(out) < 0 or len(set(out)) != len(out) or len(out) > MAX_SEEDS:
        raise ParameterError(f"seeds must be a non-empty list of at most {MAX_SEEDS} distinct integers >= 0")
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
    a list of :data:`INIT_KINDS`, ``seeds`` a count (seeds ``first_seed .. first_seed+count-1``;
    ``first_seed`` is an init-only argument, not stored) or a list; ``lr`` ``None`` means the
    optimiser's default (:data:`DEFAULT_LR`), ``tol`` ``None`` likewise (:data:`DEFAULT_TOL`: the relative
    change of R per step for gd / adam, the relative stationarity for lbfgs / batched-lbfgs); ``device`` a
    name checked syntactically here.
    ``teacher`` is one of :data:`TEACHERS` (i.i.d. N(0, 1) entries, or exactly orthonormal columns
    Q*ᵀQ*/d = I); ``train_offset`` is the index of the first training sample in the seed's training
    stream (0: the nested prefix; another offset gives a disjoint training set for the same teacher).
    ``value`` is one of :data:`VALUES` (the student's value matrix; ``value_rank`` k is the rank of its
    correction for ``low-rank``); the student architecture and the token correlation are the problem's.
    """

    d: int
    alphas: tuple[float, ...]
    inits: tuple[str, ...] = ("semantic", "positional")
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    optimizer: str = "gd"
    steps: int = 5000
    lr: float | None = None
    tol: float | None = None
    test_samples: int = 10_000
    dtype: str = "float64"
    device: str = "auto"
    positional_m0: float = 0.3
    random_scale: float = 0.1
    baseline_ridge: float = 1e-8
    test_batch: int = 2048
    teacher: str = "gaussian"
    train_offset: int = 0
    value: str = "none"
    value_rank: int = 1
    first_seed: InitVar[int] = 0

    if TYPE_CHECKING:  # the constructor the dataclass generates, with the inputs __post_init__ accepts and normalises

        def __init__(
            self,
            d: int,
            alphas: float | Sequence[float],
            inits: str | Sequence[str] = ...,
            seeds: int | Sequence[int] = ...,
            optimizer: str = ...,
            steps: int = ...,
            lr: float | None = ...,
            tol: float | None = ...,
            test_samples: int = ...,
            dtype: str = ...,
            device: str = ...,
            positional_m0: float = ...,
            random_scale: float = ...,
            baseline_ridge: float = ...,
            test_batch: int = ...,
            teacher: str = ...,
            train_offset: int = ...,
            value: str = ...,
            value_rank: int = ...,
            first_seed: int = ...,
        ) -> None: ...

    def __post_init__(self, first_seed: int = 0) -> None:
        d = _integer("d", self.d, 2)
        object.__setattr__(self, "d", d)
        raw = [self.alphas] if isinstance(self.alphas, (int, float, np.number)) else list(self.alphas)
        if not raw:
            raise ParameterError("alpha grid is empty; give at least one value > 0")
        alphas = []
        for a in raw:
            x = check_alpha(a)
            if x * d < 1:
                raise ParameterError(f"alpha must be >= 1/d = {1 / d:g} (alpha*d >= 1 training sample), got {x:g}")
            alphas.append(x)
        object.__setattr__(self, "alphas", tuple(sorted(set(alphas))))
        object.__setattr__(self, "inits", _normalise_inits(self.inits))
        object.__setattr__(self, "seeds", _normalise_seeds(self.seeds, first_seed))
        opt = str(self.optimizer).strip().lower()
        if opt not in OPTIMIZERS:
            raise ParameterError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        object.__setattr__(self, "optimizer", opt)
        object.__setattr__(self, "steps", _integer("steps", self.steps, 1))
        if self.steps > MAX_STEPS:
            raise ParameterError(f"steps must be an integer in [1, {MAX_STEPS:g}], got {self.steps}")
        lr = DEFAULT_LR[opt] if self.lr is None else _positive("lr", self.lr)
        object.__setattr__(self, "lr", lr)
        tol = DEFAULT_TOL[opt] if self.tol is None else _positive("tol", self.tol, allow_zero=True)
        object.__setattr__(self, "tol", tol)
        object.__setattr__(self, "test_samples", _integer("test_samples", self.test_samples, 1))
        if self.test_samples > MAX_TEST_SAMPLES:
            raise ParameterError(
                f"test_samples must be an integer in [1, {MAX_TEST_SAMPLES:g}], got {self.test_samples}"
            )
        if self.dtype not in DTYPE_NAMES:
            raise ParameterError(f"dtype must be one of {', '.join(DTYPE_NAMES)}, got {self.dtype!r}")
        check_device_name(self.device)
        object.__setattr__(self, "positional_m0", _positive("positional_m0", self.positional_m0))
        object.__setattr__(self, "random_scale", _positive("random_scale", self.random_scale, allow_zero=True))
        object.__setattr__(self, "baseline_ridge", _positive("baseline_ridge", self.baseline_ridge, allow_zero=True))
        object.__setattr__(self, "test_batch", _integer("test_batch", self.test_batch, 1))
        if self.teacher not in TEACHERS:
            raise ParameterError(f"teacher must be one of {', '.join(TEACHERS)}, got {self.teacher!r}")
        object.__setattr__(self, "train_offset", _integer("train_offset", self.train_offset, 0))
        value = str(self.value).strip().lower()
        if value not in VALUES:
            raise ParameterError(f"value must be one of {', '.join(VALUES)}, got {self.value!r}")
        object.__setattr__(self, "value", value)
        k = self.value_rank
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_VALUE_RANK:
            raise ParameterError(f"value_rank must be an integer in [1, {MAX_VALUE_RANK}], got {k!r}")
        object.__setattr__(self, "value_rank", int(k))

    def layout(self, problem: Problem) -> WeightLayout:
        """The rows of the trained weight tensor for ``problem``'s student and this value option."""
        return WeightLayout(
            rank=problem.rank,
            untied=problem.student == "untied",
            value=self.value,
            value_rank=self.value_rank if self.value == "low-rank" else 0,
        )

    @property
    def ns(self) -> tuple[int, ...]:
        """Training-set sizes ``round(α d)`` per alpha."""
        return tuple(max(1, int(round(a * self.d))) for a in self.alphas)

    def memory_bytes(self, problem: Problem) -> int:
        """Estimated peak memory of :func:`dotattn.erm.experiment.run_config` in bytes (a lower bound):
        the training tokens of every seed, ``(seeds, n_max, L, d)``, their per-sample L x L statistics,
        the fields and attention of every run on every sample (with their gradients), the weights,
        the float64 generation buffers of one seed and one test batch of every seed."""
        item = 8 if self.dtype == "float64" else 4
        S, A, I, N = len(self.seeds), len(self.alphas), len(self.inits), max(self.ns)
        L, d = problem.L, self.d
        r = self.layout(problem).rows
        nt = min(self.test_batch, self.test_samples)
        return int(
            item * (S * N * L * d + 8 * S * N * L * L + 4 * S * A * I * N * L * (r + L) + 6 * S * A * I * r * d)
            + 24 * N * L * d
            + S * nt * L * d * (24 + item)
        )

    def check(self, problem: Problem, memory: int | None = -1) -> None:
        """Checks that involve the problem (ParameterError), and that the runs fit in ``MEMORY_FRACTION``
        of ``memory`` bytes (default: :func:`available_memory`; None: no memory check)."""
        check_problem(problem)
        if self.d < problem.L:
            raise ParameterError(f"d must be >= L = {problem.L}, got {self.d}")
        if "positional" in self.inits and float(np.max(np.abs(problem.G))) == 0.0:
            raise ParameterError("init positional needs a nonzero positional_gram")
        memory = available_memory() if memory == -1 else memory
        need = self.memory_bytes(problem)
        if memory is not None and need > MEMORY_FRACTION * memory:
            raise ParameterError(
                f"d x alpha x seeds must fit in memory: these runs need about {_gib(need)} "
                f"(d = {self.d}, n = {max(self.ns):,} samples, {len(self.seeds)} seeds, "
                f"{self.dtype}), allowed {MEMORY_FRACTION:.0%} of the {_gib(memory)} available; "
                f"lower d, alpha or seeds"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "alphas": list(self.alphas),
            "n": list(self.ns),
            "inits": list(self.inits),
            "seeds": list(self.seeds),
            "optimizer": self.optimizer,
            "steps": self.steps,
            "lr": self.lr,
            "tol": self.tol,
            "test_samples": self.test_samples,
            "dtype": self.dtype,
            "device": self.device,
            "positional_m0": self.positional_m0,
            "random_scale": self.random_scale,
            "baseline_ridge": self.baseline_ridge,
            "test_batch": self.test_batch,
            "teacher": self.teacher,
            "train_offset": self.train_offset,
            **({"value": self.value} if self.value != "none" else {}),
            **({"value_rank": self.value_rank} if self.value == "low-rank" else {}),
        }


@dataclass(frozen=True)
class WeightLayout:
    """The rows of one run's weight tensor ``W`` (shape ``(rows, d)``; torch-free bookkeeping).

    ``W = [Qᵀ; Kᵀ; Uᵀ; Wᵥᵀ; s]``: ``Qᵀ`` (r rows), ``Kᵀ`` (r rows, untied student only), the value
    correction ``Uᵀ, Wᵥᵀ`` (k rows each, ``low-rank`` only) and one row ``s`` whose first entry is
    ``√d (v − 1)`` (``scalar`` and ``low-rank``; its other entries are not used and stay 0). The ridge
    ``(λ/2)‖W‖²_F`` is then ``(λ/2)(‖Q‖² + ‖K‖² + ‖U‖² + ‖Wᵥ‖² + d (v − 1)²)``: the value's ridge
    acts on ``V − I`` (``‖(v − 1) I‖²_F = d (v − 1)²``).
    """

    rank: int
    untied: bool = False
    value: str = "none"
    value_rank: int = 0

    @property
    def key_rows(self) -> slice:
        """Rows of ``Kᵀ`` (those of ``Qᵀ`` when tied)."""
        return slice(self.rank, 2 * self.rank) if self.untied else slice(0, self.rank)

    @property
    def field_rows(self) -> int:
        """Rows whose fields ``X w/√d`` the model needs (Q, K, U, Wᵥ)."""
        return self.rank * (2 if self.untied else 1) + 2 * self.value_rank

    @property
    def u_rows(self) -> slice:
        start = self.rank * (2 if self.untied else 1)
        return slice(start, start + self.value_rank)

    @property
    def w_rows(self) -> slice:
        start = self.rank * (2 if self.untied else 1) + self.value_rank
        return slice(start, start + self.value_rank)

    @property
    def has_scale(self) -> bool:
        """Whether the run trains the value's scale v (its row is the last one)."""
        return self.value != "none"

    @property
    def rows(self) -> int:
        return self.field_rows + (1 if self.has_scale else 0)
