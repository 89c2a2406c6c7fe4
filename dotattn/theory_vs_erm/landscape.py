"""Which minimum does training find? Best-of-K paired crossings from ``erm-restarts`` runs, K → ∞ and d → ∞.

Pure, vectorised numpy (no torch, no files): typed records in, typed records out. The estimator is the rule
written before the runs in ``results/landscape/README.md`` (:data:`RULE`):

* **best of K on branch b** at one point (d, α, seed): K = 1 is the informed run of b (noise-free informed
  start); K > 1 the lowest e_t among that run and the first K − 1 noisy copies of b's informed start, in
  restart order, that converged and ended on b. A point whose informed run of b did not converge or did
  not end on b is invalid for every K. Beside the K sequence, the *every start* value (``k =``
  :data:`EVERY_START`) is the lowest e_t on b among every converged run of the point (random starts and
  starts of the other branch that ended on b included);
* **searches**: ``positional`` (best of K on the positional branch, K = 1 on the semantic), ``semantic``
  (the reverse), ``both`` (best of K on each);
* **crossing of a seed**: the first + → − sign change of Δ(α) = e_sem − e_pos between valid grid points,
  linearly interpolated: :func:`dotattn.theory_vs_erm.crossing.crossings`, the estimator of ``erm-alpha-c``;
  seeds without a crossing are counted, not averaged;
* **K → ∞** per (d, search): least squares of the per-K means against 1/ln K over K ≥ 2, percentile
  bootstrap over seeds (:data:`N_BOOT` replicas, seeded); **saturation** c(K_max) − c(K_max/2) with its
  paired standard error;
* **d → ∞** per search: weighted least squares of the K → ∞ estimates against 1/d (weights 1/se², se from
  the bootstrap), percentile bootstrap (each replica resamples the seeds of every d);
* **verdict** (search ``both``): :func:`verdict`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dotattn.core.rows import read_bool, read_float, read_int, read_text
from dotattn.core.status import CONVERGED
from dotattn.core.validation import ParameterError
from dotattn.theory_vs_erm.crossing import CROSSING, NO_CROSSING, SEVERAL, crossings

__all__ = [
    "RULE",
    "BRANCHES",
    "SEARCHES",
    "EVERY_START",
    "N_BOOT",
    "BOOT_SEED",
    "LEVEL",
    "VERDICT_HALF_WIDTH",
    "SATURATION_SES",
    "EQUALS",
    "DIFFERS",
    "UNDECIDED",
    "RunLike",
    "BestOfK",
    "KCrossing",
    "KSummary",
    "KFit",
    "DFit",
    "Verdict",
    "k_values",
    "k_max_of",
    "StudyRun",
    "STUDY_RUN_COLUMNS",
    "ROLES",
    "best_from_runs",
    "best_of_k",
    "LossGrid",
    "loss_grid",
    "crossings_by_k",
    "summarise_by_k",
    "k_fits",
    "d_fits",
    "verdict",
    "LandscapeStudy",
    "analyse",
]

RULE = (
    "Branch of a run: the label erm-restarts gives it from its overlaps; a run counts for branch b only if it "
    "converged and carries the label b. Best of K on branch b: K = 1 is the informed run of b; for K > 1, the "
    "lowest e_t among the informed run of b and the first K - 1 noisy copies of b's informed start (in restart "
    "order) that ended on b. If the informed run of b did not converge or did not end on b, the point (seed, "
    "alpha) is invalid for every K, as in erm-alpha-c. Random starts and starts that ended on the other branch "
    "enter only the 'every start' value reported beside the K sequence (the lowest e_t on b among all converged "
    "runs of the point), not the K -> inf estimate. Searches: positional (best of K on the positional branch, "
    "K = 1 on the semantic), semantic (the reverse) and both (best of K on each branch); K in {1, 2, 4, ..., "
    "K_max}. Crossing of a seed: the first + to - sign change of Delta(alpha) = e_sem - e_pos between valid grid "
    "points, linearly interpolated (the estimator of erm-alpha-c); seeds without a crossing are counted, not "
    "averaged. Per (d, search, K): mean over the seeds with a crossing, standard error sd/sqrt(n), n. K -> inf "
    "(per d and search): least squares of the per-K means against 1/ln K over K in {2, 4, ..., K_max}, "
    "c(K) = c_inf + b / ln K; 95 % interval by percentile bootstrap over seeds (4000 replicas, seeds resampled, "
    "every K recomputed on the same resample). Beside it, saturation: c(K_max) - c(K_max/2) with its paired "
    "standard error; the sequence is called saturated where that difference is within 2 standard errors of zero. "
    "d -> inf (per search): weighted least squares of the K -> inf estimates against 1/d, weights 1/se^2, se from "
    "the bootstrap; interval by percentile bootstrap (each replica resamples the seeds of every d and refits). "
    "Verdict (search both, the estimate of training's global minimum), the replica alpha_c read from a "
    "phase-diagram folder: equals the replica alpha_c if the 95 % interval of the d -> inf, K -> inf estimate "
    "contains alpha_c and is no wider than +/- 0.02; does not equal the replica alpha_c if the interval excludes "
    "alpha_c; not decided otherwise (an interval containing alpha_c but wider than +/- 0.02). The same numbers "
    "at K_max and the largest d (no extrapolation) are reported beside it, with the informed-start crossing "
    "(K = 1)."
)
"""The rule of ``results/landscape/README.md`` ("The rule, written before the runs"), as the output records it."""

BRANCHES: tuple[str, ...] = ("semantic", "positional")
SEARCHES: tuple[str, ...] = ("positional", "semantic", "both")
EVERY_START = 0
"""The ``k`` of the rows that hold the *every start* value (the lowest e_t on the branch among every converged run)."""
N_BOOT = 4000
BOOT_SEED = 0
"""Seed of the bootstrap's generator: replica resamples at d come from ``numpy.random.default_rng([BOOT_SEED, d])``,
shared by the three searches, so the output is reproducible and the searches are compared on the same resamples."""
LEVEL = 0.95
VERDICT_HALF_WIDTH = 0.02
"""An interval that contains the replica α_c decides *equals* only if its half-width (hi − lo)/2 is at most this."""
SATURATION_SES = 2.0
"""The K sequence is *saturated* where |c(K_max) − c(K_max/2)| is at most this many paired standard errors."""
EQUALS, DIFFERS, UNDECIDED = "equals the replica alpha_c", "does not equal the replica alpha_c", "not decided"


class RunLike(Protocol):
    """What the estimator reads of one run (a :class:`dotattn.erm.restart_records.RestartRecord` is one)."""

    @property
    def seed(self) -> int: ...
    @property
    def restart(self) -> int: ...
    @property
    def start(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def branch(self) -> str: ...
    @property
    def train_loss(self) -> float: ...


def _nan_to_none(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class StudyRun:
    """One converged-or-not run of the study as the output records it: the point (d, α, seed), ``role`` (``informed``:
    the noise-free informed starts; ``restarts``: the noisy copies and random starts), its ``restart`` index in its
    folder, its ``start`` kind, ``status``, ``branch`` label, e_t = ``train_loss`` and ε_g = ``test_error``."""

    d: int
    alpha: float
    seed: int
    role: str
    restart: int
    start: str
    status: str
    branch: str
    train_loss: float
    test_error: float

    def to_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in STUDY_RUN_COLUMNS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StudyRun:
        return cls(
            d=read_int(row["d"]),
            alpha=read_float(row["alpha"]),
            seed=read_int(row["seed"]),
            role=read_text(row["role"]),
            restart=read_int(row["restart"]),
            start=read_text(row["start"]),
            status=read_text(row["status"]),
            branch=read_text(row["branch"]),
            train_loss=read_float(row["train_loss"]),
            test_error=read_float(row["test_error"]),
        )


STUDY_RUN_COLUMNS: tuple[str, ...] = (
    "d",
    "alpha",
    "seed",
    "role",
    "restart",
    "start",
    "status",
    "branch",
    "train_loss",
    "test_error",
)
ROLES: tuple[str, ...] = ("informed", "restarts")


def best_from_runs(runs: Sequence[StudyRun], k_max: Mapping[int, int]) -> list[BestOfK]:
    """The best-of-K rows (:func:`best_of_k`) of every point (d, α, seed) of ``runs``, in order of d, α, seed;
    ``k_max``: K_max per d. ParameterError for a role outside :data:`ROLES` or a d without K_max."""
    points: dict[tuple[int, float, int], dict[str, list[StudyRun]]] = {}
    for r in runs:
        if r.role not in ROLES:
            raise ParameterError(f"run role must be one of {', '.join(ROLES)}, got {r.role!r}")
        points.setdefault((r.d, r.alpha, r.seed), {"informed": [], "restarts": []})[r.role].append(r)
    out: list[BestOfK] = []
    for (d, alpha, seed), roles in sorted(points.items()):
        if d not in k_max:
            raise ParameterError(f"no K_max for d = {d}")
        out.extend(best_of_k(d, alpha, seed, roles["informed"], roles["restarts"], k_max[d]))
    return out


@dataclass(frozen=True)
class BestOfK:
    """Best of K on one branch at one point (d, α, seed): ``train_loss`` the lowest e_t over the ``runs`` runs
    that enter it (NaN: none), ``k`` in 1, 2, 4, …, K_max, or :data:`EVERY_START` for the every-start value.
    ``valid``: the informed run of ``branch`` converged and ended on it (then the point counts for every K);
    ``excluded``: why not (the informed run's status and branch), '' when valid."""

    d: int
    alpha: float
    seed: int
    branch: str
    k: int
    train_loss: float
    runs: int
    valid: bool
    excluded: str

    def to_row(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "alpha": self.alpha,
            "seed": self.seed,
            "branch": self.branch,
            "k": self.k,
            "train_loss": self.train_loss,
            "runs": self.runs,
            "valid": self.valid,
            "excluded": self.excluded,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BestOfK:
        return cls(
            d=read_int(row["d"]),
            alpha=read_float(row["alpha"]),
            seed=read_int(row["seed"]),
            branch=read_text(row["branch"]),
            k=read_int(row["k"]),
            train_loss=read_float(row["train_loss"]),
            runs=read_int(row["runs"]),
            valid=read_bool(row["valid"]),
            excluded=read_text(row["excluded"]),
        )


@dataclass(frozen=True)
class KCrossing:
    """One seed's crossing at (d, search, k): ``outcome`` one of crossing / no_crossing / several_crossings,
    ``alpha_c`` (NaN without a + → − change) and its bracketing grid points ``lo``, ``hi``, the number of sign
    changes, of valid grid points, and the invalid points as ``alpha:reason`` items joined by ';'."""

    d: int
    search: str
    k: int
    seed: int
    outcome: str
    alpha_c: float
    lo: float
    hi: float
    changes: int
    valid: int
    excluded: str

    def to_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KCrossing:
        ints, texts = ("d", "k", "seed", "changes", "valid"), ("search", "outcome", "excluded")
        fields: dict[str, Any] = {
            f: read_int(row[f]) if f in ints else read_text(row[f]) if f in texts else read_float(row[f])
            for f in cls.__dataclass_fields__
        }
        return cls(**fields)


@dataclass(frozen=True)
class KSummary:
    """The crossings of one (d, search, k) over its seeds: how many seeds, with a crossing (they enter the
    mean), without one, with several sign changes; mean, sd (ddof = 1) and standard error sd/√n."""

    d: int
    search: str
    k: int
    seeds: int
    crossings: int
    no_crossing: int
    several: int
    mean: float
    sd: float
    se: float

    def to_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KSummary:
        ints = ("d", "k", "seeds", "crossings", "no_crossing", "several")
        fields: dict[str, Any] = {
            f: read_int(row[f]) if f in ints else read_text(row[f]) if f == "search" else read_float(row[f])
            for f in cls.__dataclass_fields__
        }
        return cls(**fields)

    def as_dict(self) -> dict[str, Any]:
        """``{mean, se, n, sd, seeds, no_crossing, several}`` (n: the seeds with a crossing)."""
        return {
            "mean": _nan_to_none(self.mean),
            "se": _nan_to_none(self.se),
            "n": self.crossings,
            "sd": _nan_to_none(self.sd),
            "seeds": self.seeds,
            "no_crossing": self.no_crossing,
            "several": self.several,
        }


@dataclass(frozen=True)
class KFit:
    """K → ∞ at one (d, search): ``c_inf`` and ``slope`` of c(K) = c_inf + slope/ln K fitted to the per-K means
    over ``ks`` (K ≥ 2), its percentile interval [``ci_lo``, ``ci_hi``] at ``level`` and bootstrap standard
    error ``boot_se`` from ``replicas`` finite bootstrap fits; saturation: ``sat_diff`` = c(K_max) − c(K_max/2),
    its paired standard error ``sat_se`` over ``sat_n`` seeds with both crossings, ``saturated`` where
    |sat_diff| ≤ :data:`SATURATION_SES` × sat_se."""

    d: int
    search: str
    ks: tuple[int, ...]
    c_inf: float
    slope: float
    ci_lo: float
    ci_hi: float
    boot_se: float
    replicas: int
    level: float
    sat_diff: float
    sat_se: float
    sat_n: int
    saturated: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "c_inf": _nan_to_none(self.c_inf),
            "ci": [_nan_to_none(self.ci_lo), _nan_to_none(self.ci_hi)],
            "slope": _nan_to_none(self.slope),
            "se": _nan_to_none(self.boot_se),
            "replicas": self.replicas,
            "level": self.level,
            "ks": list(self.ks),
            "saturation": {
                "k_max": self.ks[-1] if self.ks else None,
                "difference": _nan_to_none(self.sat_diff),
                "se": _nan_to_none(self.sat_se),
                "n": self.sat_n,
                "saturated": self.saturated,
            },
        }


@dataclass(frozen=True)
class DFit:
    """d → ∞ for one search: c(d) = ``c_inf`` + ``slope``/d fitted (weights 1/se²) to the K → ∞ estimates at
    ``ds``; percentile interval from ``replicas`` finite bootstrap refits; ``chi2`` with ``dof``."""

    search: str
    ds: tuple[int, ...]
    c_inf: float
    slope: float
    ci_lo: float
    ci_hi: float
    chi2: float
    dof: int
    replicas: int
    level: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "c_inf": _nan_to_none(self.c_inf),
            "ci": [_nan_to_none(self.ci_lo), _nan_to_none(self.ci_hi)],
            "slope": _nan_to_none(self.slope),
            "chi2": _nan_to_none(self.chi2),
            "dof": self.dof,
            "ds": list(self.ds),
            "replicas": self.replicas,
            "level": self.level,
        }


@dataclass(frozen=True)
class Verdict:
    """The verdict of the rule on an interval [``ci_lo``, ``ci_hi``] against the replica ``alpha_c``."""

    outcome: str
    estimate: float
    ci_lo: float
    ci_hi: float
    alpha_c: float
    half_width: float
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "estimate": _nan_to_none(self.estimate),
            "ci": [_nan_to_none(self.ci_lo), _nan_to_none(self.ci_hi)],
            "replica_alpha_c": _nan_to_none(self.alpha_c),
            "half_width_allowed": self.half_width,
            "reason": self.reason,
        }


# ----------------------------------------------------------------------------------------------
# best of K
# ----------------------------------------------------------------------------------------------
def k_values(k_max: int) -> tuple[int, ...]:
    """1, 2, 4, …, ``k_max`` (a power of two >= 1; ParameterError otherwise)."""
    if isinstance(k_max, bool) or not isinstance(k_max, (int, np.integer)) or k_max < 1 or k_max & (k_max - 1):
        raise ParameterError(f"k_max must be a power of two >= 1, got {k_max!r}")
    return tuple(2**i for i in range(int(k_max).bit_length()))


def k_max_of(copies: int) -> int:
    """K_max for ``copies`` noisy copies of an informed start: the largest power of two <= copies + 1."""
    if isinstance(copies, bool) or not isinstance(copies, (int, np.integer)) or copies < 0:
        raise ParameterError(f"copies must be an integer >= 0, got {copies!r}")
    return 1 << (int(copies) + 1).bit_length() - 1


def _counts(run: RunLike, branch: str) -> bool:
    return run.status == CONVERGED and run.branch == branch


def best_of_k(
    d: int, alpha: float, seed: int, informed: Sequence[RunLike], restarts: Sequence[RunLike], k_max: int
) -> list[BestOfK]:
    """The best-of-K rows of one point (d, α, seed): per branch (semantic, positional) one row per K in
    :func:`k_values` (``k_max``) and one every-start row (``k =`` :data:`EVERY_START`).

    ``informed``: the point's noise-free informed runs (exactly one per branch: ParameterError otherwise);
    ``restarts``: the runs of its restarts folder (noisy copies of each informed start, ``start`` = the
    branch, and any random starts), in any order (restart order is their ``restart`` index). Runs of other
    seeds are refused."""
    ks = k_values(k_max)
    for r in (*informed, *restarts):
        if r.seed != seed:
            raise ParameterError(f"best_of_k: a run of seed {r.seed} among the runs of seed {seed}")
    everything = [*informed, *restarts]
    out = []
    for b in BRANCHES:
        mine = [r for r in informed if r.start == b]
        if len(mine) != 1:
            raise ParameterError(
                f"d = {d}, alpha = {alpha:g}, seed {seed}: {len(mine)} informed {b} runs, exactly one needed"
            )
        inf = mine[0]
        valid = _counts(inf, b)
        excluded = "" if valid else f"informed {b} run: {inf.status}, on {inf.branch}"
        copies = sorted((r for r in restarts if r.start == b), key=lambda r: r.restart)
        losses = np.array([r.train_loss for r in copies if _counts(r, b)], dtype=float)
        first = np.array([inf.train_loss if valid else np.inf])
        running = np.minimum.accumulate(np.concatenate([first, losses]))  # best of the first j + 1 runs
        counted = int(valid) + np.arange(losses.size + 1)  # runs entering running[j]
        for k in ks:
            j = min(k - 1, losses.size)
            value = float(running[j])
            out.append(
                BestOfK(
                    d=d,
                    alpha=alpha,
                    seed=seed,
                    branch=b,
                    k=k,
                    train_loss=value if math.isfinite(value) else math.nan,
                    runs=int(counted[j]),
                    valid=valid,
                    excluded=excluded,
                )
            )
        on_b = np.array([r.train_loss for r in everything if _counts(r, b)], dtype=float)
        out.append(
            BestOfK(
                d=d,
                alpha=alpha,
                seed=seed,
                branch=b,
                k=EVERY_START,
                train_loss=float(on_b.min()) if on_b.size else math.nan,
                runs=int(on_b.size),
                valid=valid,
                excluded=excluded,
            )
        )
    return out


@dataclass(frozen=True)
class LossGrid:
    """The best-of-K rows of one d as arrays: ``loss[branch]`` of shape (S, A, len(ks)) over seeds × α × the
    K values ``ks`` (1, 2, …, K_max, then :data:`EVERY_START`), ``valid`` (S, A) (both informed runs count)
    and ``why`` (S, A) the reasons of the invalid points."""

    d: int
    alphas: tuple[float, ...]
    seeds: tuple[int, ...]
    ks: tuple[int, ...]
    loss: dict[str, np.ndarray]
    valid: np.ndarray
    why: np.ndarray


def loss_grid(rows: Sequence[BestOfK], d: int) -> LossGrid:
    """The rows of ``d`` as a :class:`LossGrid`. ParameterError unless they form a full grid (every seed at
    every α, both branches, the same K values everywhere, one row each)."""
    mine = [r for r in rows if r.d == d]
    if not mine:
        raise ParameterError(f"no best-of-K rows at d = {d}")
    alphas = tuple(sorted({r.alpha for r in mine}))
    seeds = tuple(sorted({r.seed for r in mine}))
    kset = {r.k for r in mine}
    if EVERY_START not in kset:
        raise ParameterError(f"d = {d}: no every-start rows (k = {EVERY_START})")
    ks_seq = tuple(sorted(kset - {EVERY_START}))
    if ks_seq != k_values(ks_seq[-1] if ks_seq else 0):
        raise ParameterError(f"d = {d}: K values {list(ks_seq)} are not 1, 2, 4, ..., K_max")
    ks = (*ks_seq, EVERY_START)
    S, A, nk = len(seeds), len(alphas), len(ks)
    ia = {a: j for j, a in enumerate(alphas)}
    isd = {s: i for i, s in enumerate(seeds)}
    ik = {k: j for j, k in enumerate(ks)}
    loss = {b: np.full((S, A, nk), np.nan) for b in BRANCHES}
    seen = {b: np.zeros((S, A, nk), dtype=bool) for b in BRANCHES}
    valid = {b: np.zeros((S, A), dtype=bool) for b in BRANCHES}
    why = np.full((S, A), "", dtype=object)
    for r in mine:
        if r.branch not in BRANCHES:
            raise ParameterError(f"d = {d}: branch {r.branch!r} is not one of {', '.join(BRANCHES)}")
        i, j, m = isd[r.seed], ia[r.alpha], ik[r.k]
        if seen[r.branch][i, j, m]:
            raise ParameterError(f"d = {d}, alpha = {r.alpha:g}, seed {r.seed}, {r.branch}, K = {r.k}: two rows")
        seen[r.branch][i, j, m] = True
        loss[r.branch][i, j, m] = r.train_loss
        valid[r.branch][i, j] = r.valid
        if not r.valid and r.excluded and r.excluded not in str(why[i, j]):
            why[i, j] = f"{why[i, j]}/{r.excluded}" if why[i, j] else r.excluded
    for b in BRANCHES:
        if not seen[b].all():
            i, j, m = np.argwhere(~seen[b])[0]
            raise ParameterError(
                f"d = {d}: no {b} row at alpha = {alphas[j]:g}, seed {seeds[i]}, K = {ks[m]} (a full grid is needed)"
            )
    return LossGrid(d, alphas, seeds, ks, loss, valid["semantic"] & valid["positional"], why)


# ----------------------------------------------------------------------------------------------
# crossings by K
# ----------------------------------------------------------------------------------------------
def _delta(grid: LossGrid, search: str, m: int) -> np.ndarray:
    """Δ = e_sem − e_pos (S, A) of ``search`` at the K index ``m`` (K = 1 on the branch that is not searched)."""
    one = grid.ks.index(1)
    sem = m if search in ("semantic", "both") else one
    pos = m if search in ("positional", "both") else one
    return grid.loss["semantic"][:, :, sem] - grid.loss["positional"][:, :, pos]


def crossings_by_k(rows: Sequence[BestOfK]) -> list[KCrossing]:
    """Per (d, search, K, seed) the first + → − crossing of Δ(α) between valid points
    (:func:`dotattn.theory_vs_erm.crossing.crossings`, the estimator of ``erm-alpha-c``), in the order d,
    search (:data:`SEARCHES`), K (1, 2, …, K_max, every start), seed."""
    out = []
    for d in sorted({r.d for r in rows}):
        grid = loss_grid(rows, d)
        excluded = [
            ";".join(f"{a:g}:{grid.why[i, j]}" for j, a in enumerate(grid.alphas) if not grid.valid[i, j])
            for i in range(len(grid.seeds))
        ]
        for search in SEARCHES:
            for m, k in enumerate(grid.ks):
                root, lo, hi, changes, n_valid = crossings(grid.alphas, _delta(grid, search, m), grid.valid)
                for i, s in enumerate(grid.seeds):
                    outcome = NO_CROSSING if not np.isfinite(root[i]) else (SEVERAL if changes[i] > 1 else CROSSING)
                    out.append(
                        KCrossing(
                            d=d,
                            search=search,
                            k=k,
                            seed=s,
                            outcome=outcome,
                            alpha_c=float(root[i]),
                            lo=float(lo[i]),
                            hi=float(hi[i]),
                            changes=int(changes[i]),
                            valid=int(n_valid[i]),
                            excluded=excluded[i],
                        )
                    )
    return out


def _group(xs: Sequence[KCrossing]) -> dict[tuple[int, str, int], list[KCrossing]]:
    out: dict[tuple[int, str, int], list[KCrossing]] = {}
    for x in xs:
        out.setdefault((x.d, x.search, x.k), []).append(x)
    return out


def summarise_by_k(xs: Sequence[KCrossing]) -> list[KSummary]:
    """Per (d, search, K), in the order of ``xs``: the seeds, their outcomes, and mean, sd, se of the crossings."""
    out = []
    for (d, search, k), group in _group(xs).items():
        vals = np.array([x.alpha_c for x in group], dtype=float)
        vals = vals[np.isfinite(vals)]
        n = int(vals.size)
        sd = float(vals.std(ddof=1)) if n > 1 else math.nan
        out.append(
            KSummary(
                d=d,
                search=search,
                k=k,
                seeds=len(group),
                crossings=n,
                no_crossing=sum(x.outcome == NO_CROSSING for x in group),
                several=sum(x.outcome == SEVERAL for x in group),
                mean=float(vals.mean()) if n else math.nan,
                sd=sd,
                se=sd / math.sqrt(n) if n > 1 else math.nan,
            )
        )
    return out


# ----------------------------------------------------------------------------------------------
# K -> inf, d -> inf, verdict
# ----------------------------------------------------------------------------------------------
def _line(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(Weighted) least-squares lines y ≈ c0 + c1 x for the rows of ``y (B, n)``; rows with a NaN give NaN."""
    w = np.ones_like(x) if w is None else w
    W = w.sum()
    xm = (w * x).sum() / W
    sxx = (w * (x - xm) ** 2).sum()
    ym = (y * w).sum(axis=-1) / W
    c1 = ((y - ym[..., None]) * (w * (x - xm))).sum(axis=-1) / sxx
    return ym - c1 * xm, c1


def _percentile(values: np.ndarray, level: float) -> tuple[float, float, int]:
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return math.nan, math.nan, int(finite.size)
    tail = 0.5 * (1.0 - level)
    lo, hi = np.quantile(finite, [tail, 1.0 - tail])
    return float(lo), float(hi), int(finite.size)


def _seed_matrix(xs: Sequence[KCrossing], d: int, search: str, ks: Sequence[int]) -> tuple[tuple[int, ...], np.ndarray]:
    """(seeds, X (S, len(ks))) of the crossings at (d, search): NaN where a seed has none."""
    mine = [x for x in xs if x.d == d and x.search == search]
    seeds = tuple(sorted({x.seed for x in mine}))
    X = np.full((len(seeds), len(ks)), np.nan)
    col = {k: j for j, k in enumerate(ks)}
    row = {s: i for i, s in enumerate(seeds)}
    for x in mine:
        if x.k in col:
            X[row[x.seed], col[x.k]] = x.alpha_c
    return seeds, X


def _nanmean(X: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a K without any crossing in a replica: NaN
        return np.nanmean(X, axis=axis)


def _k_boot(xs: Sequence[KCrossing], d: int, n_boot: int) -> dict[str, tuple[KFit, np.ndarray]]:
    ks_all = sorted({x.k for x in xs if x.d == d and x.k != EVERY_START})
    ks = tuple(k for k in ks_all if k >= 2)
    out = {}
    rng = np.random.default_rng([BOOT_SEED, d])
    seeds = tuple(sorted({x.seed for x in xs if x.d == d}))
    idx = rng.integers(0, len(seeds), size=(n_boot, len(seeds))) if seeds else np.zeros((n_boot, 0), dtype=int)
    x = 1.0 / np.log(np.array(ks, dtype=float)) if ks else np.zeros(0)
    for search in SEARCHES:
        s_here, X = _seed_matrix(xs, d, search, ks)
        if s_here != seeds:
            raise ParameterError(f"d = {d}, search {search}: seeds {list(s_here)}, the other searches {list(seeds)}")
        nan = math.nan
        if len(ks) >= 2 and len(seeds):
            means = _nanmean(X, axis=0)
            c0, c1 = _line(x, means[None, :])
            boot = _line(x, _nanmean(X[idx], axis=1))[0]
            lo, hi, nrep = _percentile(boot, LEVEL)
            se = float(np.std(boot[np.isfinite(boot)], ddof=1)) if nrep > 1 else nan
            c_inf, slope = float(c0[0]), float(c1[0])
        else:
            boot = np.full(n_boot, nan)
            c_inf = slope = lo = hi = se = nan
            nrep = 0
        kmax = ks_all[-1] if ks_all else 1
        _, pair = _seed_matrix(xs, d, search, (kmax, kmax // 2 if kmax >= 2 else 1))
        both = np.isfinite(pair).all(axis=1)
        diffs = pair[both, 0] - pair[both, 1]
        means_pair = _nanmean(pair, axis=0) if len(seeds) else np.full(2, nan)
        sat_diff = float(means_pair[0] - means_pair[1]) if kmax >= 2 else nan
        sat_se = float(diffs.std(ddof=1) / math.sqrt(diffs.size)) if diffs.size > 1 else nan
        saturated = bool(math.isfinite(sat_diff) and math.isfinite(sat_se) and abs(sat_diff) <= SATURATION_SES * sat_se)
        fit = KFit(d, search, ks, c_inf, slope, lo, hi, se, nrep, LEVEL, sat_diff, sat_se, int(diffs.size), saturated)
        out[search] = (fit, boot)
    return out


def k_fits(xs: Sequence[KCrossing], n_boot: int = N_BOOT) -> tuple[list[KFit], dict[tuple[int, str], np.ndarray]]:
    """K → ∞ per (d, search) (module docstring), and the bootstrap replicas of each c_inf ((d, search) ->
    (n_boot,)), which :func:`d_fits` refits: replica j of every d resamples that d's seeds independently."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 100:
        raise ParameterError(f"n_boot must be an integer >= 100, got {n_boot!r}")
    fits, boots = [], {}
    for d in sorted({x.d for x in xs}):
        for search, (fit, boot) in _k_boot(xs, d, n_boot).items():
            fits.append(fit)
            boots[(d, search)] = boot
    return fits, boots


def d_fits(fits: Sequence[KFit], boots: Mapping[tuple[int, str], np.ndarray]) -> list[DFit]:
    """d → ∞ per search: c_inf(d) = c + a/d, weights 1/se² (se: the bootstrap's), interval from the replicas
    (NaN with fewer than two d holding a finite estimate and se)."""
    out = []
    for search in SEARCHES:
        mine = [
            f
            for f in sorted((f for f in fits if f.search == search), key=lambda f: f.d)
            if math.isfinite(f.c_inf) and math.isfinite(f.boot_se) and f.boot_se > 0
        ]
        ds = tuple(f.d for f in mine)
        nan = math.nan
        if len(mine) < 2:
            out.append(DFit(search, ds, nan, nan, nan, nan, nan, 0, 0, LEVEL))
            continue
        x = 1.0 / np.array(ds, dtype=float)
        y = np.array([f.c_inf for f in mine])
        w = 1.0 / np.array([f.boot_se for f in mine]) ** 2
        c0, c1 = _line(x, y[None, :], w)
        chi2 = float((w * (y - c0[0] - c1[0] * x) ** 2).sum())
        B = np.stack([boots[(f.d, search)] for f in mine], axis=1)
        lo, hi, nrep = _percentile(_line(x, B, w)[0], LEVEL)
        out.append(DFit(search, ds, float(c0[0]), float(c1[0]), lo, hi, chi2, len(mine) - 2, nrep, LEVEL))
    return out


def verdict(estimate: float, ci_lo: float, ci_hi: float, alpha_c: float) -> Verdict:
    """The rule's verdict: *equals* if [ci_lo, ci_hi] contains ``alpha_c`` and its half-width is at most
    :data:`VERDICT_HALF_WIDTH`; *does not equal* if it excludes ``alpha_c``; *not decided* otherwise (or
    where the interval could not be computed)."""
    hw = VERDICT_HALF_WIDTH
    if not all(math.isfinite(v) for v in (ci_lo, ci_hi, alpha_c)):
        return Verdict(UNDECIDED, estimate, ci_lo, ci_hi, alpha_c, hw, "no interval (fewer than two d or K values)")
    half = 0.5 * (ci_hi - ci_lo)
    if ci_lo <= alpha_c <= ci_hi:
        if half <= hw:
            reason = f"the interval contains alpha_c and its half-width {half:.4f} is <= {hw:g}"
            return Verdict(EQUALS, estimate, ci_lo, ci_hi, alpha_c, hw, reason)
        reason = f"the interval contains alpha_c but its half-width {half:.4f} is > {hw:g}"
        return Verdict(UNDECIDED, estimate, ci_lo, ci_hi, alpha_c, hw, reason)
    return Verdict(DIFFERS, estimate, ci_lo, ci_hi, alpha_c, hw, "the interval excludes alpha_c")


# ----------------------------------------------------------------------------------------------
# the whole analysis
# ----------------------------------------------------------------------------------------------
def _k_key(k: int) -> str:
    return "every" if k == EVERY_START else str(k)


@dataclass(frozen=True)
class LandscapeStudy:
    """Everything :func:`analyse` derives from the best-of-K rows, and the replica α_c it is judged against."""

    best: tuple[BestOfK, ...]
    crossings: tuple[KCrossing, ...]
    summaries: tuple[KSummary, ...]
    k_fits: tuple[KFit, ...]
    d_fits: tuple[DFit, ...]
    verdict: Verdict
    alpha_c: float
    alpha_c_error: float
    n_boot: int

    @property
    def ds(self) -> tuple[int, ...]:
        return tuple(sorted({r.d for r in self.best}))

    def k_max(self, d: int) -> int:
        return max(r.k for r in self.best if r.d == d)

    def summary_dict(self) -> dict[str, Any]:
        """``crossing_by_K`` (d -> search -> K -> {mean, se, n, ...}; K ``every``: every start), ``k_infinity``
        (d -> search -> the K → ∞ estimate, interval and saturation), ``d_infinity`` (search -> the d → ∞
        estimate), ``verdict``, ``beside`` (the largest d without extrapolation: K_max, K = 1 and every start of
        search ``both``), ``k_max`` per d, ``replica_alpha_c``, ``rule``."""
        by_k: dict[str, dict[str, dict[str, Any]]] = {}
        for s in self.summaries:
            by_k.setdefault(str(s.d), {}).setdefault(s.search, {})[_k_key(s.k)] = s.as_dict()
        k_inf: dict[str, dict[str, Any]] = {}
        for f in self.k_fits:
            k_inf.setdefault(str(f.d), {})[f.search] = f.as_dict()
        beside: dict[str, Any] = {}
        if self.ds:
            top = self.ds[-1]
            k_top = self.k_max(top)
            both = by_k[str(top)]["both"]
            beside = {
                "d": top,
                "search": "both",
                "k_max": k_top,
                "at_k_max": both[str(k_top)],
                "informed_start_k1": both["1"],
                "every_start": both["every"],
            }
        return {
            "rule": RULE,
            "replica_alpha_c": {"alpha_c": _nan_to_none(self.alpha_c), "error": _nan_to_none(self.alpha_c_error)},
            "k_max": {str(d): self.k_max(d) for d in self.ds},
            "crossing_by_K": by_k,
            "k_infinity": k_inf,
            "d_infinity": {f.search: f.as_dict() for f in self.d_fits},
            "verdict": {"search": "both", **self.verdict.as_dict()},
            "beside": beside,
            "bootstrap": {"replicas": self.n_boot, "seed": BOOT_SEED, "level": LEVEL},
        }


def analyse(
    best: Sequence[BestOfK], alpha_c: float, alpha_c_error: float = math.nan, n_boot: int = N_BOOT
) -> LandscapeStudy:
    """Crossings by K, their summaries, the K → ∞ and d → ∞ fits and the verdict of the best-of-K rows ``best``
    against the replica ``alpha_c`` (module docstring)."""
    xs = crossings_by_k(best)
    fits, boots = k_fits(xs, n_boot)
    dfs = d_fits(fits, boots)
    both = next(f for f in dfs if f.search == "both")
    return LandscapeStudy(
        best=tuple(best),
        crossings=tuple(xs),
        summaries=tuple(summarise_by_k(xs)),
        k_fits=tuple(fits),
        d_fits=tuple(dfs),
        verdict=verdict(both.c_inf, both.ci_lo, both.ci_hi, float(alpha_c)),
        alpha_c=float(alpha_c),
        alpha_c_error=float(alpha_c_error),
        n_boot=int(n_boot),
    )
