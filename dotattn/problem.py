"""The problem specification: everything that defines one teacher-student attention model.

SPEC section 1. A :class:`Problem` is a frozen, validated value object; arrays are exposed as
read-only numpy views. Invalid input raises :class:`ParameterError` with one line naming the
field and its allowed range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

__all__ = ["check_number", "check_int", "check_alpha", "check_instance", "check_problem", "check_out_dir",
           "check_dask_scheme", "DASK_SCHEMES",
           "ParameterError", "Problem", "TOY_A", "TOY_GRAM", "parse_matrix", "readonly_array", "SIGMA_RANGE",
           "LAMBDA_RANGE", "ALPHA_MAX", "SHAPE_MAX", "GRAM_MAX", "PROBLEM_KEYS"]

TOY_A: tuple[tuple[float, ...], ...] = ((0.6, 0.4), (0.4, 0.6))
TOY_GRAM: tuple[tuple[float, ...], ...] = ((1.0, -1.0), (-1.0, 1.0))
_STOCHASTIC_TOL = 1e-9

SIGMA_RANGE: tuple[float, float] = (1e-2, 2.0)
"""Allowed token noise σ. The attention scores are O(σ²): below 1e-2 they are below 1e-4 and every
softmax is uniform to that accuracy (the global minimum is Q = 0 and all branches coincide with
the uninformative one). Above 2 the scores are large enough that the solver's informed starts
(scaled for the toy model's σ = 0.5) no longer reach a fixed point: measured for the toy model at
α = 1 (Gauss-Hermite 6), σ = 1 converges on both branches, σ = 2 on the semantic branch only, and
σ = 3, 10, 100 on none; so σ is refused there rather than answered with "no fixed point"."""
LAMBDA_RANGE: tuple[float, float] = (1e-8, 1e4)
"""Allowed ridge λ. Below 1e-8 the ridge is under the solver's tolerance on the overlaps (the
problem is the unregularised one, whose V = 1/(λ + σ²V̂) diverges); above 1e4 the ridge dominates
a loss of size O(σ²) ≤ 1e4 and the only fixed point is Q = 0."""
ALPHA_MAX: float = 1e4
"""Largest sample complexity α = n/d accepted. The physics of interest is at α = O(1) (α_c ≤ 2.2 for
the toy model); α = 1e4 still solves in seconds (toy model, measured ~3 s on Gauss-Hermite 6),
while α = 1e12 kept the solver busy for minutes (issue 12). For ERM, n = α d samples must fit too."""
SHAPE_MAX: int = 64
"""Largest L, r and r_t: the theory integrates over L(r + r_t) Gaussian dimensions (QMC beyond 6)
and ERM stores L x L matrices per sample; 64 keeps every array bounded."""
GRAM_MAX: float = 4.0
"""Largest |G_ll'| of the positional Gram matrix (‖p_l‖²/d is at most this; the token noise adds
σ² per entry). Measured for the toy model (G = g [[1, -1], [-1, 1]], Gauss-Hermite 6, ω ∈ {0, 0.3},
α ∈ {0.5, 1, 2}): the informed positional start converges at every point for g ≤ 4; for g = 8 and
beyond the positional fixed point is lost at some (ω, α) (the iteration runs out of budget or
leaves the admissible set with |μ| growing: the positional scores grow with g until the softmax
saturates), and entries of 1e100 overflow (|μ| ~ 1e162) and from 1e150 LAPACK fails in the
least-squares step. So larger Gram matrices are refused rather than answered with "no positional
fixed point". (A is row-stochastic, so its entries are in [0, 1] and need no bound.)"""
PROBLEM_KEYS: tuple[str, ...] = ("L", "rank", "teacher_rank", "sigma", "lambda", "omega", "A", "positional_gram")
"""The keys of :meth:`Problem.to_dict` / :meth:`Problem.from_dict`."""


def readonly_array(a) -> np.ndarray:
    """A float copy of ``a`` that cannot be written to (state in frozen dataclasses)."""
    arr = np.array(a, dtype=float)
    arr.setflags(write=False)
    return arr


class ParameterError(ValueError):
    """Invalid user input; the message is one line naming the parameter and its allowed range."""


def _as_matrix(name: str, value: Any, L: int) -> tuple[tuple[float, ...], ...]:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a {L} x {L} matrix of real numbers") from None
    if arr.shape != (L, L):
        raise ParameterError(f"{name} must be a {L} x {L} matrix (L = {L}), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(f"{name} must be finite (no NaN or inf)")
    return tuple(tuple(float(x) for x in row) for row in arr)


def parse_matrix(text: str) -> list[list[float]]:
    """Parse ``"0.6,0.4;0.4,0.6"`` (rows separated by ';', entries by ',' or spaces)."""
    rows = [r for r in text.replace("[", "").replace("]", "").split(";") if r.strip()]
    try:
        return [[float(x) for x in r.replace(",", " ").split()] for r in rows]
    except ValueError:
        raise ParameterError(f"matrix {text!r} must be numbers, rows separated by ';'") from None


def check_number(name: str, value: Any, low: float | None, low_open: bool,
                 high: float | None = None, allowed: str = "", high_open: bool = False) -> float:
    """``value`` as a finite float in the range described by ``allowed`` (ParameterError naming ``name``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a real number {allowed}".strip()) from None
    if not math.isfinite(x):
        raise ParameterError(f"{name} must be finite {allowed}, got {x}".strip())
    bad_low = low is not None and (x <= low if low_open else x < low)
    bad_high = high is not None and (x >= high if high_open else x > high)
    if bad_low or bad_high:
        raise ParameterError(f"{name} must be {allowed}, got {x:g}")
    return x


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as an integer in [``low``, ``high``] (no upper bound if None; ParameterError naming ``name``)."""
    allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    try:
        ok = not isinstance(value, bool) and float(value).is_integer()
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ParameterError(f"{name} must be {allowed}, got {value!r}")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ParameterError(f"{name} must be {allowed}, got {v}")
    return v


def check_alpha(value: Any, name: str = "alpha") -> float:
    """``value`` as a sample complexity in (0, :data:`ALPHA_MAX`] (ParameterError naming ``name``)."""
    return check_number(name, value, 0.0, True, ALPHA_MAX, f"in (0, {ALPHA_MAX:g}]")


def check_instance(name: str, value: Any, kind: type | tuple[type, ...], what: str | None = None) -> Any:
    """``value`` if it is an instance of ``kind``, else ParameterError naming ``name`` and the type wanted
    (``what``: how to call it, default the class names); for API arguments such as ``options=``."""
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = what or " or ".join(k.__name__ for k in kinds)
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ParameterError(f"{name} must be a {wanted}, got {type(value).__name__} {shown}")
    return value


def check_problem(value: Any, name: str = "problem") -> "Problem":
    """``value`` if it is a :class:`Problem` (ParameterError naming ``name`` otherwise, e.g. for
    ``dotattn.solve("toy", alpha=2)``: build one with ``dotattn.Problem(...)``)."""
    return check_instance(name, value, Problem, "dotattn.Problem (e.g. dotattn.Problem(omega=0.3))")


DASK_SCHEMES: tuple[str, ...] = ("tcp", "ws")
"""Dask comm schemes a ``--dask`` address may use, each tested against a local cluster (tcp also
when no scheme is written). ``tls``/``wss`` need certificates (a ``distributed.Security``) and
``ucx`` needs UCX-Py and its configuration, neither of which dotattn takes: refused, not crashed."""
_DASK_REFUSED = {"tls": "TLS certificates (a distributed.Security configuration)",
                 "wss": "TLS certificates (a distributed.Security configuration)",
                 "ucx": "UCX-Py and a UCX configuration"}


def check_dask_scheme(address: Any, inproc: bool = True) -> str:
    """``address`` if its scheme (before ``://``; none means tcp) is one of :data:`DASK_SCHEMES` or,
    if ``inproc``, ``inproc`` (a scheduler in this very process: the Python API only, never a
    command line); ParameterError in one line otherwise, naming what the scheme would need."""
    text = str(address).strip()
    scheme = text.split("://", 1)[0].lower() if "://" in text else "tcp"
    if scheme in DASK_SCHEMES or (scheme == "inproc" and inproc):
        return text
    if scheme == "inproc":
        raise ParameterError("dask: an inproc:// scheduler lives inside one Python process and cannot be reached "
                             "from a command; give a tcp:// or ws:// scheduler address (or, in Python, "
                             "dask_address=<distributed.Client>)")
    if scheme in _DASK_REFUSED:
        raise ParameterError(f"dask: {scheme}:// addresses need {_DASK_REFUSED[scheme]}, which dotattn does not "
                             f"take; give a {' or '.join(s + '://' for s in DASK_SCHEMES)} scheduler address")
    raise ParameterError(f"dask: unknown scheme {scheme!r} in {text!r}; give a "
                         f"{' or '.join(s + '://' for s in DASK_SCHEMES)} scheduler address")


def check_out_dir(value: Any, name: str = "out") -> str:
    """An output folder name: a non-empty path (ParameterError for '' or blanks, which would mean the
    working directory, or another command's folder, without saying so)."""
    if value is None or not isinstance(value, (str, bytes)) and not hasattr(value, "__fspath__"):
        raise ParameterError(f"{name} must be a folder path, got {value!r}")
    text = str(value.__fspath__() if hasattr(value, "__fspath__") else value)
    if not text.strip():
        raise ParameterError(f"{name} must be a non-empty folder path (use '.' for the working directory), got {text!r}")
    if "\0" in text:
        raise ParameterError(f"{name} must be a folder path without NUL characters")
    return text


@dataclass(frozen=True)
class Problem:
    """One teacher-student model (SPEC section 1).

    Attributes
    ----------
    L : sequence length (number of tokens), >= 2.
    rank : student rank r, >= 1.
    teacher_rank : teacher rank r_t, >= 1.
    sigma : token noise standard deviation σ > 0.
    ridge : ridge strength λ > 0.
    omega : positional fraction ω of the target, in [0, 1].
    positional_attention : the teacher's positional attention A (L x L, row-stochastic).
    positional_gram : Gram matrix G_ll' = p_l . p_l' of the positional embeddings (L x L, PSD).
    """

    L: int = 2
    rank: int = 1
    teacher_rank: int = 1
    sigma: float = 0.5
    ridge: float = 0.01
    omega: float = 0.3
    positional_attention: tuple[tuple[float, ...], ...] | None = None
    positional_gram: tuple[tuple[float, ...], ...] | None = None
    _arrays: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        L = check_int("L", self.L, 2, SHAPE_MAX)
        object.__setattr__(self, "L", L)
        object.__setattr__(self, "rank", check_int("rank", self.rank, 1, SHAPE_MAX))
        object.__setattr__(self, "teacher_rank", check_int("teacher_rank", self.teacher_rank, 1, SHAPE_MAX))
        lo, hi = SIGMA_RANGE
        object.__setattr__(self, "sigma", check_number("sigma", self.sigma, lo, False, hi, f"in [{lo:g}, {hi:g}]"))
        lo, hi = LAMBDA_RANGE
        object.__setattr__(self, "ridge", check_number("lambda", self.ridge, lo, False, hi, f"in [{lo:g}, {hi:g}]"))
        object.__setattr__(self, "omega", check_number("omega", self.omega, 0.0, False, 1.0, "in [0, 1]"))

        A_in = self.positional_attention
        if A_in is None:
            if L != 2:
                raise ParameterError(f"A (positional attention) must be given for L = {L}; only L = 2 has a default")
            A_in = TOY_A
        A = _as_matrix("A", A_in, L)
        arrA = np.array(A)
        if np.any(arrA < 0):
            raise ParameterError("A must be row-stochastic: entries >= 0 and rows summing to 1")
        if np.any(np.abs(arrA.sum(axis=1) - 1.0) > _STOCHASTIC_TOL):
            raise ParameterError("A must be row-stochastic: rows must sum to 1 (tolerance 1e-9)")
        object.__setattr__(self, "positional_attention", A)

        G_in = self.positional_gram
        if G_in is None:
            G_in = TOY_GRAM if L == 2 else np.eye(L)
        G = _as_matrix("positional_gram", G_in, L)
        arrG = np.array(G)
        if np.max(np.abs(arrG - arrG.T)) > 1e-12 * max(1.0, np.max(np.abs(arrG))):
            raise ParameterError("positional_gram must be symmetric positive semi-definite")
        if np.min(np.linalg.eigvalsh(arrG)) < -1e-10 * max(1.0, np.max(np.abs(arrG))):
            raise ParameterError("positional_gram must be symmetric positive semi-definite (an eigenvalue is < 0)")
        if np.max(np.abs(arrG)) > GRAM_MAX:
            raise ParameterError(f"positional_gram entries must be in [-{GRAM_MAX:g}, {GRAM_MAX:g}], got max "
                                 f"|G| = {np.max(np.abs(arrG)):.3g}: beyond it the positional scores saturate the "
                                 f"softmax and the solver loses the positional fixed point (1e150 overflows LAPACK)")
        object.__setattr__(self, "positional_gram", G)

    # -- derived, read-only arrays ---------------------------------------------------------
    def _array(self, key: str, build) -> np.ndarray:
        if key not in self._arrays:
            self._arrays[key] = readonly_array(build())
        return self._arrays[key]

    @property
    def A(self) -> np.ndarray:
        """Positional attention matrix A, shape (L, L)."""
        return self._array("A", lambda: self.positional_attention)

    @property
    def G(self) -> np.ndarray:
        """Positional Gram matrix G, shape (L, L)."""
        return self._array("G", lambda: self.positional_gram)

    @property
    def rho(self) -> np.ndarray:
        """Teacher self-overlap ρ = σ² I_{r_t}, shape (r_t, r_t)."""
        return self._array("rho", lambda: self.sigma**2 * np.eye(self.teacher_rank))

    @property
    def is_toy_layout(self) -> bool:
        """L = 2, r = r_t = 1 with the antisymmetric Gram [[g,-g],[-g,g]] (fast paths, scalar m)."""
        G = self.G
        return (self.L == 2 and self.rank == 1 and self.teacher_rank == 1
                and np.isclose(G[0, 0], G[1, 1]) and np.isclose(G[0, 1], -G[0, 0]))

    @property
    def gaussian_dim(self) -> int:
        """Dimension L (r + r_t) of the Gaussian expectations."""
        return self.L * (self.rank + self.teacher_rank)

    def replace(self, **changes: Any) -> "Problem":
        """A copy with some fields changed (validated again)."""
        values = {k: getattr(self, k) for k in
                  ("L", "rank", "teacher_rank", "sigma", "ridge", "omega",
                   "positional_attention", "positional_gram")}
        values.update(changes)
        return Problem(**values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready parameters."""
        return {"L": self.L, "rank": self.rank, "teacher_rank": self.teacher_rank,
                "sigma": self.sigma, "lambda": self.ridge, "omega": self.omega,
                "A": [list(r) for r in self.positional_attention],
                "positional_gram": [list(r) for r in self.positional_gram]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Problem":
        """The problem of :meth:`to_dict`'s keys (:data:`PROBLEM_KEYS`; ParameterError naming a missing
        or unknown key, or a value out of range)."""
        if not isinstance(d, Mapping):
            raise ParameterError(f"problem must be a dict with keys {', '.join(PROBLEM_KEYS)}, got {type(d).__name__}")
        missing = [k for k in PROBLEM_KEYS if k not in d]
        if missing:
            raise ParameterError(f"problem dict is missing the key(s) {', '.join(missing)} "
                                 f"(needs {', '.join(PROBLEM_KEYS)}; as written by Problem.to_dict())")
        unknown = sorted(str(k) for k in d if k not in PROBLEM_KEYS)
        if unknown:
            raise ParameterError(f"problem dict has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(PROBLEM_KEYS)})")
        return cls(L=d["L"], rank=d["rank"], teacher_rank=d["teacher_rank"], sigma=d["sigma"],
                   ridge=d["lambda"], omega=d["omega"], positional_attention=d["A"],
                   positional_gram=d["positional_gram"])

