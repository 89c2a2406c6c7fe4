"""Does ERM switch at the replica α_c? The paired training-loss crossing, per (ω, d) cell, and d → ∞.

Sweeps/output level: combines the finite-size ERM (:mod:`dotattn.erm`, imported lazily, so that
validating a configuration does not import torch) with the theory's branches
(:func:`dotattn.positional_semantic.phase_diagram.omega_column`) and the estimator (:mod:`dotattn.theory_vs_erm.crossing`).

The unit of work is one ``(ω, d)`` *cell* (:func:`run_cell`, plain arguments in and out, so that a
process pool can run it): for every seed, one teacher and one training set serve both informed
starts (``paired``) at every α (``nested``: the run at α uses the first ``round(α d)`` samples),
each run minimised by ``optimizer`` to relative stationarity ``tol``
(:func:`dotattn.core.training.relative_stationarity`). Seeds are computed in chunks of
``seed_chunk``; every finished chunk and every finished cell is cached atomically under
``OUT/cache``, keyed by everything that defines it, so an interrupted study resumes where it
stopped. The theory column of each ω (branches on the same α grid, α_c by Brent's method) is one
more unit of work, cached the same way.

Defaults (chosen by the spread measurement in ``results/alpha_c_erm/README.md``, d = 1000, ω = 0.3,
16 seeds): paired starts (per-seed spread of α_c 0.091 against 0.139 unpaired), nested samples
(the same spread as independent sets per α, but no seed with several sign changes, against 5 of
16), Gaussian teacher as in SPEC section 1 (the orthonormal one did not reduce the spread:
0.091 against 0.085), ``batched-lbfgs`` to relative stationarity 1e-7.
Non-default choices, for the variance measurement: ``paired=False`` trains the positional start
on the data (and teacher) of seed ``s +`` :data:`UNPAIRED_OFFSET`; ``nested=False`` gives every α
its own disjoint block of the training stream (same teacher).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.io import read_cache_unit, write_cache_unit
from dotattn.core.progress import Cost
from dotattn.core.runner import check_dask_address, check_workers, run_tasks
from dotattn.core.validation import (
    ParameterError,
    check_alpha,
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_number,
)
from dotattn.positional_semantic.problem import Problem, check_problem, require_replica_theory
from dotattn.theory_vs_erm.alpha_c_starts import start_row
from dotattn.theory_vs_erm.crossing import (
    CROSSING,
    FIT_MODELS,
    NO_CROSSING,
    SEVERAL,
    CellSummary,
    FiniteSizeFit,
    SeedCrossing,
    crossings,
    fit_finite_size,
    summarise_cell,
)

__all__ = [
    "AlphaCConfig",
    "CellRuns",
    "AlphaCStudy",
    "StudyPart",
    "run_cell",
    "theory_column",
    "cell_crossings",
    "run_study",
    "check_supplied",
    "merge_parts",
    "theory_refusal",
    "MERGE_KEYS",
    "SAME_RUN_RTOL",
    "mean_curves",
    "TheoryColumn",
    "UNPAIRED_OFFSET",
    "SAME_MINIMUM_TOL",
    "DELTA_COLUMNS",
    "DEVICE_PATTERN",
    "branch_estimator",
]

FLOAT32_REFUSED = (
    "float32 runs stop at a relative stationarity of 1e-5 to 1e-3 (the Armijo test cannot see "
    "smaller decreases of R in float32)"
)
"""Why the study runs in float64 only. Measured (ω = 0.1, α = 0.7 and 0.8, seeds 0–3, both informed
starts, batched-lbfgs, one thread; ``results/alpha_c_erm/README.md``): at d = 250 no float32 run reaches
tol 1e-7 (each spends its whole budget, 40 backtracking evaluations per step: 300 steps took 54–60 s
against 3–4 s for float64 to converge); at tol 1e-3 all converge, but at d = 1000 their Δe_t differ from
float64's by up to 4.8e-7 (d = 250: 5e-9), 6 % of the smallest |Δe_t| of these points and growing with
d; at tol 1e-4, 3 of 8 runs do not converge in 300 steps (184 s against 24 s in float64)."""
UNPAIRED_OFFSET = 1_000_003
"""Seed offset of the positional start's data when ``paired`` is off."""
SAME_MINIMUM_TOL = 1e-4
"""The two starts ended in the same minimum when their overlaps (‖θ‖/σ², m, Tr q/σ²) differ by less."""
MERGE_KEYS = (
    "alphas",
    "optimizer",
    "steps",
    "tol",
    "teacher",
    "paired",
    "nested",
    "dtype",
    "level",
    "n_boot",
    "model",
    "value",
    "value_rank",
)
"""Config fields that cells merged into one study must share (grid, estimator, optimiser, fit); they
may differ in ω, d, seeds, seed_chunk and device."""
SAME_RUN_RTOL = 1e-12
"""A seed of one cell found in two folders must hold the same runs: its training losses equal to this
relative tolerance (same seed, code and grid; the committed overlaps of the main study and the
d = 2000 folders are bit-identical) and the same statuses."""
DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
DELTA_COLUMNS = (
    "omega",
    "d",
    "seed",
    "alpha",
    "et_semantic",
    "et_positional",
    "delta",
    "status_semantic",
    "status_positional",
    "same_minimum",
    "valid",
)


def _grid(name: str, values: Any, low: float, integer: bool = False) -> tuple:
    raw = [values] if isinstance(values, (int, float, np.number)) else list(values)
    out = []
    for v in raw:
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} values must be numbers, got {v!r}") from None
        if not math.isfinite(x) or x < low or (integer and not x.is_integer()):
            kind = "integers" if integer else "numbers"
            raise ParameterError(f"{name} values must be {kind} >= {low:g}, got {v!r}")
        out.append(int(x) if integer else x)
    return tuple(sorted(set(out)))


@dataclass(frozen=True)
class AlphaCConfig:
    """Everything besides the :class:`Problem` (whose ω is replaced per cell) that defines a study.

    Validated on construction without importing torch (the optimiser name against the torch-free
    :data:`dotattn.core.optimizers.OPTIMIZERS`). ``alphas`` needs >= 2 values, ``seeds``
    (a count; seeds ``first_seed ..``) >= 2, every d >= 2, ω in [0, 1].
    """

    omegas: tuple[float, ...]
    ds: tuple[int, ...]
    alphas: tuple[float, ...]
    seeds: int = 32
    first_seed: int = 0
    optimizer: str = "batched-lbfgs"
    steps: int = 3000
    tol: float = 1e-7
    teacher: str = "gaussian"
    paired: bool = True
    nested: bool = True
    dtype: str = "float64"
    device: str = "auto"
    seed_chunk: int = 8
    level: float = 0.95
    n_boot: int = 4000
    model: str = "1/d"
    value: str = "none"
    value_rank: int = 1

    def __post_init__(self) -> None:
        omegas = _grid("omega", self.omegas, 0.0)
        if not omegas or max(omegas) > 1:
            raise ParameterError("omega must be a non-empty list of values in [0, 1]")
        object.__setattr__(self, "omegas", omegas)
        ds = _grid("d", self.ds, 2, integer=True)
        if not ds:
            raise ParameterError("d must be a non-empty list of integers >= 2")
        object.__setattr__(self, "ds", ds)
        alphas = _grid("alpha", self.alphas, 0.0)
        if len(alphas) < 2 or alphas[0] <= 0:
            raise ParameterError("alpha grid must have >= 2 distinct values > 0 to bracket a crossing")
        for a in alphas:
            check_alpha(a)
        object.__setattr__(self, "alphas", alphas)
        for name, low in (("seeds", 2), ("first_seed", 0), ("steps", 1), ("seed_chunk", 1), ("n_boot", 100)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ParameterError(f"{name} must be an integer >= {low}, got {v!r}")
        check_number("level", self.level, 0.5, False, 1.0, "in [0.5, 1)", high_open=True)
        check_choice("teacher", self.teacher, ("gaussian", "orthonormal"))
        for name in ("paired", "nested"):
            object.__setattr__(self, name, check_bool(name, getattr(self, name)))
        if not (isinstance(self.tol, (int, float)) and math.isfinite(self.tol) and self.tol > 0):
            raise ParameterError(f"tol must be a number > 0, got {self.tol!r}")
        if self.dtype != "float64":
            raise ParameterError(
                f"dtype must be float64 for the alpha_c study ({FLOAT32_REFUSED}, too coarse "
                f"for the e_t differences it compares), got {self.dtype!r}"
            )
        if not DEVICE_PATTERN.match(str(self.device).strip().lower()):
            raise ParameterError(f"device must be one of auto, cpu, cuda or cuda:N, got {self.device!r}")
        if not isinstance(self.model, str) or self.model not in FIT_MODELS:
            raise ParameterError(f"model must be one of {', '.join(FIT_MODELS)}, got {self.model!r}")
        if any(a * d < 1 for a in alphas[:1] for d in ds[:1]):
            raise ParameterError(f"alpha must be >= 1/d (one training sample), got {alphas[0]:g} at d = {ds[0]}")
        from dotattn.core.optimizers import OPTIMIZERS
        from dotattn.erm.config import ErmConfig

        if self.optimizer not in OPTIMIZERS:
            raise ParameterError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        # memory: one chunk of seeds at the largest d and alpha, one start, on the smallest problem (L = 2,
        # r = r_t = 1) is a lower bound of every chunk's need; run_study checks the problem's own
        erm = ErmConfig(
            d=ds[-1],
            alphas=(alphas[-1],),
            inits="semantic",
            seeds=min(self.seed_chunk, self.seeds),
            test_samples=1,
            dtype=self.dtype,
            value=self.value,
            value_rank=self.value_rank,
        )
        erm.check(Problem())
        object.__setattr__(self, "value", erm.value)

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.first_seed, self.first_seed + self.seeds))

    def to_dict(self) -> dict[str, Any]:
        """The fields, JSON-ready; ``value`` only when not ``none`` and ``value_rank`` only for ``low-rank``
        (so the caches and folders of studies made before the value option keep their keys)."""
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
        if out["value"] != "low-rank":
            del out["value_rank"]
        if out["value"] == "none":
            del out["value"]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlphaCConfig:
        """Inverse of :meth:`to_dict`; ParameterError naming a missing or unknown key."""
        d = check_instance("config", d, Mapping, "a mapping of AlphaCConfig fields")
        fields = cls.__dataclass_fields__
        unknown = sorted(set(d) - set(fields))
        if unknown:
            raise ParameterError(f"config has unknown key {unknown[0]!r}; allowed: {', '.join(fields)}")
        missing = [k for k in ("omegas", "ds", "alphas") if k not in d]
        if missing:
            raise ParameterError(f"config lacks the key {missing[0]!r} (omegas, ds and alphas are required)")
        kwargs: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()}
        return cls(**kwargs)

    def cost(self, d: int) -> float:
        """Relative cost of one cell at ``d`` (flops of one risk evaluation ∝ d² Σα per seed)."""
        return d * d * sum(self.alphas) * self.seeds

    def run_cost(self, d: int, alpha: float | np.ndarray) -> float | np.ndarray:
        """Share of :meth:`cost` of one run (one start at one α of one seed): d² α / 2, so that the runs
        of a cell add up to its cost."""
        return 0.5 * d * d * alpha

    @property
    def runs_per_seed(self) -> int:
        """Runs per seed of a cell: both starts at every α."""
        return 2 * len(self.alphas)


ALPHA_C_COST = Cost(6.3e-7, "results/alpha_c_erm/omega0.1_d4000/summary.json")
"""CPU seconds (one thread) per unit of :meth:`AlphaCConfig.cost` (d² Σα per seed): the committed
omega0.1_d4000 study (d = 4000, 15 α, 16 seeds, batched-lbfgs, one thread, one worker) took 2913 s for
4.6e9 units."""


CELL_OVERHEAD = 0.15
"""CPU seconds per (ω, d) cell besides its share of :data:`ALPHA_C_COST` (data, the optimiser's set-up, the line
searches of small d): studies of one cell at d = 50, 3 α, 2 and 8 seeds, in one process (nice 5, load average 10
on 2 cores) took 0.15 and 0.23 CPU-s. (A cell at d = 300, 4 seeds took 0.58 CPU-s where ALPHA_C_COST gives 0.97:
the cost per unit grows with d, as the optimiser takes more steps, so studies at small d are estimated high.)"""


def study_seconds(problem: Problem, config: AlphaCConfig, theory: bool) -> float:
    """Rough CPU seconds (one thread) of a whole study: every cell at :data:`ALPHA_C_COST` and, with ``theory``,
    one refined phase-diagram column per ω (:func:`dotattn.positional_semantic.phase_diagram.estimate_seconds`)."""
    from dotattn.positional_semantic.catalogue import default_quadrature
    from dotattn.positional_semantic.phase_diagram import SweepSettings, estimate_seconds
    from dotattn.positional_semantic.refine import RefineSpec

    cells = len(config.ds) * len(config.omegas)
    erm = ALPHA_C_COST.seconds * sum(config.cost(d) for d in config.ds) * len(config.omegas) + CELL_OVERHEAD * cells
    if not theory:
        return erm
    settings = SweepSettings(default_quadrature(problem), refine=RefineSpec())
    return erm + estimate_seconds(problem, list(config.alphas), settings, len(config.omegas), 1)


def study_bound_seconds(problem: Problem, config: AlphaCConfig, theory: bool) -> float:
    """CPU seconds (one thread) of a whole study if every run used its whole step budget: ``steps`` ×
    :func:`dotattn.erm.restarts.lbfgs_step_seconds` per run (n = α d samples, both starts, every seed), the
    cells' overhead and the theory as in :func:`study_seconds` (which is the typical time: the runs stop at
    their tolerance long before the budget)."""
    from dotattn.erm.restarts import lbfgs_step_seconds

    per_cell = {
        d: config.steps
        * config.seeds
        * 2
        * sum(lbfgs_step_seconds(max(1, round(a * d)), d, problem.rank) for a in config.alphas)
        for d in config.ds
    }
    erm_typical = ALPHA_C_COST.seconds * sum(config.cost(d) for d in config.ds) * len(config.omegas)
    bound = sum(per_cell.values()) * len(config.omegas)
    return study_seconds(problem, config, theory) - erm_typical + max(bound, erm_typical)


@dataclass(frozen=True)
class CellRuns:
    """The paired training losses of one (ω, d) cell: arrays ``(S, A)`` over seeds × α.

    ``status_*`` are the optimiser's statuses (:data:`dotattn.core.training.STATUS`), ``same``
    marks points where both starts ended in the same minimum (:data:`SAME_MINIMUM_TOL`). ``starts``: one
    row per run (:func:`dotattn.theory_vs_erm.alpha_c_starts.start_row`: overlaps and branch label), or None
    for cells read from folders written without them.
    """

    omega: float
    d: int
    alphas: tuple[float, ...]
    seeds: tuple[int, ...]
    et_sem: np.ndarray
    et_pos: np.ndarray
    status_sem: np.ndarray
    status_pos: np.ndarray
    same: np.ndarray
    seconds: float
    device: str
    starts: tuple[dict[str, Any], ...] | None = None

    @property
    def delta(self) -> np.ndarray:
        """``Δe_t = e_t(semantic) − e_t(positional)``, ``(S, A)``."""
        return self.et_sem - self.et_pos

    def valid(self, converged: str) -> np.ndarray:
        """Points where both runs have status ``converged`` and ended in different minima, ``(S, A)``."""
        return (self.status_sem == converged) & (self.status_pos == converged) & ~self.same

    def different_branches(self) -> np.ndarray | None:
        """``(S, A)``: the two starts ended on different branches by their labels; None without ``starts``."""
        from dotattn.theory_vs_erm.alpha_c_starts import different_branches

        return None if self.starts is None else different_branches(self.starts, self.seeds, self.alphas)

    def seed_rows(self, idx: Sequence[int] | np.ndarray) -> CellRuns:
        """The cell with the seeds at positions ``idx`` (selected or reordered), every per-seed array alike;
        ``starts`` (rows keyed by their seed, not by position) as it is."""
        return replace(
            self,
            seeds=tuple(self.seeds[k] for k in idx),
            et_sem=self.et_sem[idx],
            et_pos=self.et_pos[idx],
            status_sem=self.status_sem[idx],
            status_pos=self.status_pos[idx],
            same=self.same[idx],
        )

    def on_seeds(self, keep: Sequence[int]) -> CellRuns:
        """The cell restricted to the seeds in ``keep``, in the cell's order."""
        wanted = set(keep)
        idx = [k for k, s in enumerate(self.seeds) if s in wanted]
        kept = {self.seeds[k] for k in idx}
        starts = None if self.starts is None else tuple(r for r in self.starts if int(r["seed"]) in kept)
        return replace(self.seed_rows(idx), starts=starts)

    def on_alphas(self, keep: Sequence[float]) -> CellRuns:
        """The cell on the points of its grid that are in ``keep`` (to 1e-9), in grid order."""
        cols = [j for j, a in enumerate(self.alphas) if any(abs(a - b) < 1e-9 for b in keep)]
        kept = [self.alphas[j] for j in cols]
        starts = self.starts
        if starts is not None:
            starts = tuple(r for r in starts if any(abs(float(r["alpha"]) - b) < 1e-9 for b in kept))
        return replace(
            self,
            alphas=tuple(self.alphas[j] for j in cols),
            et_sem=self.et_sem[:, cols],
            et_pos=self.et_pos[:, cols],
            status_sem=self.status_sem[:, cols],
            status_pos=self.status_pos[:, cols],
            same=self.same[:, cols],
            starts=starts,
        )

    def to_row(self) -> dict[str, Any]:
        row = {
            "omega": self.omega,
            "d": self.d,
            "alphas": list(self.alphas),
            "seeds": list(self.seeds),
            "et_sem": self.et_sem.tolist(),
            "et_pos": self.et_pos.tolist(),
            "status_sem": self.status_sem.tolist(),
            "status_pos": self.status_pos.tolist(),
            "same": self.same.tolist(),
            "seconds": self.seconds,
            "device": self.device,
        }
        if self.starts is not None:
            row["starts"] = [dict(r) for r in self.starts]
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CellRuns:
        return cls(
            omega=float(row["omega"]),
            d=int(row["d"]),
            alphas=tuple(map(float, row["alphas"])),
            seeds=tuple(map(int, row["seeds"])),
            et_sem=np.array(row["et_sem"], dtype=float),
            et_pos=np.array(row["et_pos"], dtype=float),
            status_sem=np.array(row["status_sem"], dtype=object),
            status_pos=np.array(row["status_pos"], dtype=object),
            same=np.array(row["same"], dtype=bool),
            seconds=float(row["seconds"]),
            device=str(row["device"]),
            starts=None if row.get("starts") is None else tuple(dict(r) for r in row["starts"]),
        )

    @staticmethod
    def concat(parts: Sequence[CellRuns]) -> CellRuns:
        """Join chunks of seeds of the same cell."""
        p0 = parts[0]
        cat = lambda k: np.concatenate([getattr(p, k) for p in parts], axis=0)
        return CellRuns(
            omega=p0.omega,
            d=p0.d,
            alphas=p0.alphas,
            seeds=tuple(s for p in parts for s in p.seeds),
            et_sem=cat("et_sem"),
            et_pos=cat("et_pos"),
            status_sem=cat("status_sem"),
            status_pos=cat("status_pos"),
            same=cat("same"),
            seconds=sum(p.seconds for p in parts),
            device=p0.device,
            starts=None if any(p.starts is None for p in parts) else tuple(r for p in parts for r in (p.starts or ())),
        )

    def delta_rows(self, converged: str) -> list[dict[str, Any]]:
        """One row per (seed, α) (columns :data:`DELTA_COLUMNS`)."""
        ok, D = self.valid(converged), self.delta
        return [
            {
                "omega": self.omega,
                "d": self.d,
                "seed": s,
                "alpha": a,
                "et_semantic": self.et_sem[k, j],
                "et_positional": self.et_pos[k, j],
                "delta": D[k, j],
                "status_semantic": self.status_sem[k, j],
                "status_positional": self.status_pos[k, j],
                "same_minimum": bool(self.same[k, j]),
                "valid": bool(ok[k, j]),
            }
            for k, s in enumerate(self.seeds)
            for j, a in enumerate(self.alphas)
        ]


# ----------------------------------------------------------------------------------------------
# ERM side (torch imported lazily)
# ----------------------------------------------------------------------------------------------
def _invariants(run: Any) -> np.ndarray:
    return np.array(
        [float(np.linalg.norm(run.theta_over_sigma2)), float(run.m), float(np.trace(np.atleast_2d(run.q_over_sigma2)))]
    )


def _erm(
    problem: Problem,
    cfg: AlphaCConfig,
    d: int,
    alphas: Sequence[float],
    init: str,
    seeds: Sequence[int],
    offset: int,
    progress: Callable[[float, int], None] | None = None,
) -> tuple[dict[str, dict[tuple[int, float], Any]], str]:
    """Run ERM for one init choice over ``seeds`` × ``alphas``; returns ({init: {(seed, α): run}}, device).

    ``progress(cost, runs)``: called as runs stop training, with their number and their share of the
    cell's cost (:meth:`AlphaCConfig.run_cost`)."""
    from dotattn.erm.experiment import ErmConfig, run_config

    ec = ErmConfig(
        d=d,
        alphas=tuple(alphas),
        inits=init,
        seeds=tuple(seeds),
        optimizer=cfg.optimizer,
        steps=cfg.steps,
        tol=cfg.tol,
        test_samples=1,
        dtype=cfg.dtype,
        device=cfg.device,
        teacher=cfg.teacher,
        train_offset=offset,
        value=cfg.value,
        value_rank=cfg.value_rank,
    )
    finished = None
    if progress is not None:
        per_alpha = cfg.run_cost(d, np.asarray(ec.alphas))

        def finished(mask: np.ndarray) -> None:  # mask (seeds, alphas, inits)
            progress(float((mask.sum(axis=(0, 2)) * per_alpha).sum()), int(mask.sum()))

    res = run_config(problem, ec, finished=finished)
    out: dict[str, dict[tuple[int, float], Any]] = {}
    for r in res.runs:
        out.setdefault(r.init, {})[(r.seed, r.alpha)] = r
    return out, res.device


def _chunk(
    problem: Problem,
    cfg: AlphaCConfig,
    d: int,
    seeds: Sequence[int],
    progress: Callable[[float, int], None] | None = None,
) -> CellRuns:
    """ERM for one chunk of seeds of a cell (see the module docstring for paired / nested);
    ``progress(cost, runs)`` as runs finish (:func:`_erm`)."""
    t0 = time.perf_counter()
    alphas = cfg.alphas
    pos_seeds = list(seeds) if cfg.paired else [s + UNPAIRED_OFFSET for s in seeds]
    if cfg.nested:
        blocks = [(alphas, 0)]
    else:  # every α its own disjoint block of the stream
        ns = [max(1, int(round(a * d))) for a in alphas]
        blocks = [((a,), int(sum(ns[:j]))) for j, a in enumerate(alphas)]
    sem, pos, device = {}, {}, "cpu"
    for block, offset in blocks:
        if cfg.paired:
            runs, device = _erm(problem, cfg, d, block, "both", seeds, offset, progress)
            sem.update(runs["semantic"])
            pos.update(runs["positional"])
        else:
            runs, device = _erm(problem, cfg, d, block, "semantic", seeds, offset, progress)
            sem.update(runs["semantic"])
            runs, _ = _erm(problem, cfg, d, block, "positional", pos_seeds, offset, progress)
            rename = dict(zip(pos_seeds, seeds, strict=True))
            pos.update({(rename[s2], a): r for (s2, a), r in runs["positional"].items()})
    S, A = len(seeds), len(alphas)
    shape = (S, A)
    et_s, et_p, same = np.empty(shape), np.empty(shape), np.zeros(shape, dtype=bool)
    st_s, st_p = np.empty(shape, dtype=object), np.empty(shape, dtype=object)
    starts = []
    for k, s in enumerate(seeds):
        for j, a in enumerate(alphas):
            rs, rp = _find(sem, s, a), _find(pos, s, a)
            starts += [
                start_row(problem.omega, d, replace(rs, seed=s)),
                start_row(problem.omega, d, replace(rp, seed=s)),
            ]
            et_s[k, j], et_p[k, j], st_s[k, j], st_p[k, j] = rs.train_loss, rp.train_loss, rs.status, rp.status
            same[k, j] = bool(np.max(np.abs(_invariants(rs) - _invariants(rp))) < SAME_MINIMUM_TOL)
    return CellRuns(
        omega=problem.omega,
        d=d,
        alphas=tuple(alphas),
        seeds=tuple(seeds),
        et_sem=et_s,
        et_pos=et_p,
        status_sem=st_s,
        status_pos=st_p,
        same=same,
        seconds=time.perf_counter() - t0,
        device=device,
        starts=tuple(starts),
    )


def _find(runs: Mapping[tuple[int, float], Any], seed: int, alpha: float) -> Any:
    for (s, a), r in runs.items():
        if s == seed and abs(a - alpha) < 1e-9:
            return r
    raise KeyError((seed, alpha))


def _key(*parts: Any) -> str:
    from dotattn.core.version import __version__

    blob = json.dumps([*parts, __version__], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_cell(
    problem_dict: dict[str, Any],
    omega: float,
    d: int,
    config_dict: dict[str, Any],
    cache_dir: str | None = None,
    threads: int = 0,
    progress: Callable[[float, int], None] | None = None,
) -> dict[str, Any]:
    """ERM of one (ω, d) cell, chunk by chunk (cached under ``cache_dir``); returns a :class:`CellRuns` row.

    ``progress(cost, runs)`` is called as runs finish training (every run, as it stops; a chunk read
    from the cache at once), with their number and their share of :meth:`AlphaCConfig.cost`.
    """
    if threads:
        import torch

        torch.set_num_threads(threads)
    problem = Problem.from_dict({**problem_dict, "omega": omega})
    cfg = AlphaCConfig.from_dict(config_dict)
    seeds = cfg.seed_list
    parts = []
    for i in range(0, len(seeds), cfg.seed_chunk):
        chunk = seeds[i : i + cfg.seed_chunk]
        key = _key(
            "chunk",
            problem.to_dict(),
            d,
            chunk,
            {
                k: v
                for k, v in cfg.to_dict().items()
                if k not in ("omegas", "ds", "seeds", "first_seed", "seed_chunk", "level", "n_boot", "model", "device")
            },
        )
        path = Path(cache_dir) / f"chunk_w{omega:.4f}_d{d}_s{chunk[0]}-{chunk[-1]}.json" if cache_dir else None
        cached = read_cache_unit(path, key)
        if cached is not None:
            part = CellRuns.from_row(cached["cell"])
            if progress is not None:
                progress(cfg.cost(d) * len(chunk) / cfg.seeds, cfg.runs_per_seed * len(chunk))
        else:
            part = _chunk(problem, cfg, d, chunk, progress)
            if path is not None:
                write_cache_unit(path, key, cell=part.to_row())
        parts.append(part)
    return CellRuns.concat(parts).to_row()


# ----------------------------------------------------------------------------------------------
# theory side
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TheoryColumn:
    """The theory at one ω on the ERM's α grid: its α_c (None: not in range; ``alpha_c_error`` its
    quadrature-error estimate, None if unknown), Δe_t = e_t(sem) − e_t(pos) per α (None where a
    branch is absent), the quadrature spec used and the compute time (s)."""

    omega: float
    alpha_c: float | None
    alphas: tuple[float, ...]
    delta: tuple[float | None, ...]
    quadrature: dict
    seconds: float
    alpha_c_error: float | None = None

    def to_row(self) -> dict[str, Any]:
        return {
            "omega": self.omega,
            "alpha_c": self.alpha_c,
            "alpha_c_error": self.alpha_c_error,
            "alphas": list(self.alphas),
            "delta": list(self.delta),
            "quadrature": dict(self.quadrature),
            "seconds": self.seconds,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TheoryColumn:
        opt = lambda v: None if v is None else float(v)  # noqa: E731
        return cls(
            omega=float(row["omega"]),
            alpha_c=opt(row["alpha_c"]),
            alphas=tuple(float(a) for a in row["alphas"]),
            delta=tuple(opt(v) for v in row["delta"]),
            quadrature=dict(row.get("quadrature") or {}),
            seconds=float(row["seconds"]),
            alpha_c_error=opt(row.get("alpha_c_error")),
        )


def theory_refusal(problem: Problem) -> str | None:
    """The one-line reason why the replica theory refuses ``problem`` (a student architecture or token
    correlation it does not handle: the ParameterError of
    :func:`dotattn.positional_semantic.problem.require_replica_theory`, the check the solver itself
    makes), or None when it takes it."""
    try:
        require_replica_theory(problem)
    except ParameterError as err:
        return str(err)
    return None


def theory_column(problem_dict: dict[str, Any], omega: float, alphas: Sequence[float]) -> dict[str, Any]:
    """:class:`TheoryColumn` row at ω on the ERM's α grid, from
    :func:`dotattn.positional_semantic.phase_diagram.omega_column` with the default quadrature and the default refinement
    of α_c (:class:`dotattn.positional_semantic.refine.RefineSpec`; α_c ± its standard error), as a row, so a process pool
    can return it and the cache can store it."""
    from dotattn.positional_semantic.catalogue import default_quadrature
    from dotattn.positional_semantic.phase_diagram import ColumnSummary, SweepSettings, omega_column
    from dotattn.positional_semantic.records import BranchPoint
    from dotattn.positional_semantic.refine import RefineSpec

    problem = Problem.from_dict({**problem_dict, "omega": omega})
    settings = SweepSettings(default_quadrature(problem), refine=RefineSpec())
    col = omega_column(problem.to_dict(), omega, list(alphas), settings.to_dict())
    points = [BranchPoint.from_row(row) for row in col["rows"]]
    et = {(p.branch, p.alpha): p.train_loss for p in points if p.converged}
    delta = [
        None
        if ("semantic", a) not in et or ("positional", a) not in et
        else et[("semantic", a)] - et[("positional", a)]
        for a in sorted(alphas)
    ]
    summary = ColumnSummary.from_row(col["summary"])
    return TheoryColumn(
        omega=omega,
        alpha_c=summary.alpha_c,
        alphas=tuple(sorted(alphas)),
        delta=tuple(delta),
        quadrature=settings.quadrature.to_dict(),
        seconds=summary.seconds,
        alpha_c_error=summary.alpha_c_error,
    ).to_row()


# ----------------------------------------------------------------------------------------------
# estimator on a cell, the study, outputs
# ----------------------------------------------------------------------------------------------
def cell_crossings(cell: CellRuns, converged: str, by_branch: bool = False) -> list[SeedCrossing]:
    """Per-seed crossings of one cell; invalid points listed in ``excluded``.

    ``by_branch``: the second estimator, which also leaves out the points where the two starts ended on
    the same branch by their labels (:meth:`CellRuns.different_branches`; ValueError for a cell without
    ``starts``)."""
    ok = cell.valid(converged)
    differ = cell.different_branches() if by_branch else None
    if by_branch:
        if differ is None:
            raise ValueError(f"cell omega = {cell.omega:g}, d = {cell.d} has no branch labels (no starts)")
        ok = ok & differ
    root, lo, hi, changes, n_valid = crossings(cell.alphas, cell.delta, ok)
    out = []
    for k, s in enumerate(cell.seeds):
        why = []
        for j, a in enumerate(cell.alphas):
            if not ok[k, j]:
                reason = (
                    "same_minimum"
                    if cell.same[k, j]
                    else f"sem={cell.status_sem[k, j]}/pos={cell.status_pos[k, j]}"
                    if cell.status_sem[k, j] != converged or cell.status_pos[k, j] != converged
                    else "same_branch"
                )
                why.append(f"{a:g}:{reason}")
        outcome = NO_CROSSING if not np.isfinite(root[k]) else (SEVERAL if changes[k] > 1 else CROSSING)
        out.append(
            SeedCrossing(
                omega=cell.omega,
                d=cell.d,
                seed=s,
                outcome=outcome,
                alpha_c=float(root[k]),
                lo=float(lo[k]),
                hi=float(hi[k]),
                changes=int(changes[k]),
                valid=int(n_valid[k]),
                excluded=";".join(why),
            )
        )
    return out


@dataclass(frozen=True)
class AlphaCStudy:
    """All cells, their crossings and summaries, the theory and the fits of one study."""

    problem: Problem
    config: AlphaCConfig
    cells: tuple[CellRuns, ...]
    crossings: tuple[SeedCrossing, ...]
    summaries: tuple[CellSummary, ...]
    fits: tuple[FiniteSizeFit, ...]
    alternative_fits: tuple[FiniteSizeFit, ...]
    theory: tuple[TheoryColumn, ...]
    seconds: float
    from_cache: int
    branch_crossings: tuple[SeedCrossing, ...] = ()
    branch_summaries: tuple[CellSummary, ...] = ()
    branch_fits: tuple[FiniteSizeFit, ...] = ()

    def summary_dict(self) -> dict[str, Any]:
        """``{"omegas": [{"omega", "theory_alpha_c", "by_d": [...], "extrapolated": {...}}]}`` (the issue's shape)."""
        out = []
        for w, th, fit, alt in zip(self.config.omegas, self.theory, self.fits, self.alternative_fits, strict=True):
            out.append(
                {
                    "omega": w,
                    "theory_alpha_c": th.alpha_c,
                    "by_d": [_cell_entry(s, timing=True) for s in self.summaries if abs(s.omega - w) < 1e-12],
                    "extrapolated": _fit_entry(fit),
                    "alternative_fit": _fit_entry(alt),
                }
            )
            if self.branch_fits:
                bfit = next(f for f, w2 in zip(self.branch_fits, self.config.omegas, strict=True) if w2 == w)
                out[-1]["different_branch"] = {
                    "by_d": [_cell_entry(s, timing=False) for s in self.branch_summaries if abs(s.omega - w) < 1e-12],
                    "extrapolated": _fit_entry(bfit),
                }
        return {"omegas": out}


def _cell_entry(s: CellSummary, timing: bool) -> dict[str, Any]:
    """One ``by_d`` entry of summary.json; ``timing``: with the seed spread ``sd`` and the cell's ``seconds``."""
    entry: dict[str, Any] = {
        "d": s.d,
        "seeds": s.seeds,
        "alpha_c": s.alpha_c,
        "ci": [s.ci_lo, s.ci_hi],
        "no_crossing": s.no_crossing,
        "several_crossings": s.several,
        "crossings": s.crossings,
        "se": s.se,
    }
    if timing:
        entry["sd"] = s.sd
    entry["excluded_points"] = s.excluded_points
    if timing:
        entry["seconds"] = s.seconds
    return entry


def _fit_entry(fit: Any) -> dict[str, Any]:
    """An ``extrapolated`` / ``alternative_fit`` entry of summary.json: α_c(∞), its interval, the law and its fit."""
    return {
        "alpha_c": fit.alpha_inf,
        "ci": [fit.ci_lo, fit.ci_hi],
        "model": fit.model,
        "slope": fit.slope,
        "chi2": fit.chi2,
        "dof": fit.dof,
    }


@dataclass(frozen=True)
class StudyPart:
    """The cells of one committed study folder, read from its verified rows
    (:func:`dotattn.theory_vs_erm.output.read_alpha_c_part`), to be merged into another study."""

    source: str
    problem: Problem
    config: AlphaCConfig
    cells: tuple[CellRuns, ...]


def _same_cell_runs(a: CellRuns, b: CellRuns, seed: int) -> bool:
    i, j = a.seeds.index(seed), b.seeds.index(seed)
    return (
        np.allclose(a.et_sem[i], b.et_sem[j], rtol=SAME_RUN_RTOL, atol=0.0, equal_nan=True)
        and np.allclose(a.et_pos[i], b.et_pos[j], rtol=SAME_RUN_RTOL, atol=0.0, equal_nan=True)
        and list(a.status_sem[i]) == list(b.status_sem[j])
        and list(a.status_pos[i]) == list(b.status_pos[j])
        and list(a.same[i]) == list(b.same[j])
    )


def merge_parts(
    problem: Problem, config: AlphaCConfig, parts: Sequence[StudyPart]
) -> tuple[dict[tuple[float, int], CellRuns], dict[tuple[float, int], list[str]]]:
    """The cells of ``parts`` merged per (ω, d): ((ω, d) -> cell with the union of the seeds, sorted;
    (ω, d) -> the sources it came from). ParameterError (one line) unless every part was made for
    ``problem`` (ω aside) and shares :data:`MERGE_KEYS` with ``config``, and every seed that two
    parts hold has the same runs in both (:data:`SAME_RUN_RTOL`)."""
    base = {k: v for k, v in problem.to_dict().items() if k != "omega"}
    want = config.to_dict()
    merged: dict[tuple[float, int], CellRuns] = {}
    sources: dict[tuple[float, int], list[str]] = {}
    for part in parts:
        have = {k: v for k, v in part.problem.to_dict().items() if k != "omega"}
        diff = next((k for k in sorted(set(base) | set(have)) if base.get(k) != have.get(k)), None)
        if diff is not None:
            raise ParameterError(
                f"study {part.source} was made for another problem: {diff} = {have.get(diff)!r} "
                f"there, {base.get(diff)!r} here"
            )
        got = part.config.to_dict()
        diff = next((k for k in MERGE_KEYS if got.get(k) != want.get(k)), None)
        if diff is not None:
            raise ParameterError(
                f"study {part.source} has another {diff}: {got.get(diff)!r} there, {want.get(diff)!r} here "
                f"(cells of one study share {', '.join(MERGE_KEYS)})"
            )
        for cell in part.cells:
            key = (cell.omega, cell.d)
            old = merged.get(key)
            sources.setdefault(key, []).append(part.source)
            if old is None:
                merged[key] = cell
                continue
            for seed in set(old.seeds) & set(cell.seeds):
                if not _same_cell_runs(old, cell, seed):
                    raise ParameterError(
                        f"seed {seed} of cell omega = {cell.omega:g}, d = {cell.d} differs between "
                        f"{sources[key][0]} and {part.source} (same seed, different runs)"
                    )
            new = [s for s in cell.seeds if s not in old.seeds]
            if new:
                joined = CellRuns.concat([old, replace(cell.on_seeds(new), seconds=0.0)])
                merged[key] = replace(
                    joined.seed_rows(np.argsort(joined.seeds)), seconds=old.seconds + cell.seconds, device=old.device
                )
    return merged, sources


def _cell_key(problem: Problem, omega: float, d: int, cfg: AlphaCConfig) -> str:
    keep = {
        k: v
        for k, v in cfg.to_dict().items()
        if k not in ("omegas", "ds", "seed_chunk", "level", "n_boot", "model", "device")
    }
    return _key("cell", {**problem.to_dict(), "omega": omega}, d, keep)


def _theory_key(problem: Problem, omega: float, alphas: Sequence[float]) -> str:
    from dotattn.positional_semantic.refine import RefineSpec

    return _key("theory", {**problem.to_dict(), "omega": omega}, list(alphas), {"refine": RefineSpec().to_dict()})


def _run_task(name: str, args: tuple, report: Callable[[], None] | None = None) -> dict:
    """One ``"cell"`` or ``"theory"`` task (module level, so a process pool can run it). A cell run
    without a progress callback of its own (on a pool) calls ``report()`` once per finished run."""
    if name == "cell" and args[-1] is None and report is not None:
        args = (*args[:-1], lambda cost, runs: [report() for _ in range(runs)])
    tasks: dict[str, Callable[..., dict]] = {"cell": run_cell, "theory": theory_column}
    return tasks[name](*args)


def check_supplied(config: AlphaCConfig, supplied: Mapping[tuple[float, int], CellRuns]) -> None:
    """ParameterError (one line) when an included cell is also in ``config``'s grid without every seed the
    config asks for: it would be used in place of the computed one, and those seeds never run."""
    for (w, d), cell in sorted(supplied.items()):
        if w in config.omegas and d in config.ds and not set(config.seed_list) <= set(cell.seeds):
            have = f"{min(cell.seeds)}-{max(cell.seeds)}" if cell.seeds else "none"
            raise ParameterError(
                f"cell omega = {w:g}, d = {d} is both in this study's grid (seeds "
                f"{config.first_seed}-{config.first_seed + config.seeds - 1}) and included from "
                f"another study (seeds {have}), which would be used in its place; leave that omega "
                f"or d out of this run, or run its seeds into a folder of their own and include "
                f"both"
            )


def run_study(
    problem: Problem,
    config: AlphaCConfig,
    *,
    cache_dir: str | os.PathLike | None = None,
    workers: int = 1,
    threads: int = 0,
    theory: bool = True,
    dask_address: Any = None,
    progress: Callable[[float, int], None] | None = None,
    supplied: Mapping[tuple[float, int], CellRuns] | None = None,
) -> AlphaCStudy:
    """Every (ω, d) cell and theory column (cached, resumable), the crossings, summaries and fits.

    ``supplied``: (ω, d) -> cells of other studies (:func:`merge_parts`), taken as they are instead
    of being computed; the study then holds the cells of ``config.omegas`` x ``config.ds`` and the
    supplied ones, its config's ω and d grids are their union, and the fit at each ω uses every d
    it has a cell at (each d weighted by 1/se² of its mean, so a d with fewer seeds counts less, and
    resampled with its own seeds in the bootstrap).

    ``theory=False`` skips the theory (its α_c and Δe_t are then None), e.g. for quick checks.

    ``workers`` > 1: cells and theory columns on a process pool; ``dask_address`` (a scheduler
    address or a ``distributed.Client``): on a Dask cluster instead (:func:`dotattn.core.runner.run_tasks`).
    ``progress(cost, runs)`` reports finished runs and their work in the units of
    :meth:`AlphaCConfig.cost`: every run as it finishes in-process and on a pool (there each run
    counts the mean cost of its cell's runs, the rest when the cell is done), per cell on a Dask
    cluster; cells from the cache at once.
    """
    from dotattn.core.status import STATUS_CONVERGED
    from dotattn.erm.config import ErmConfig
    from dotattn.erm.experiment import resolve_device

    check_problem(problem)
    check_instance("config", config, AlphaCConfig, "dotattn.theory_vs_erm.alpha_c.AlphaCConfig")
    theory = check_bool("theory", theory)
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise ParameterError(f"cache_dir must be a folder path or None, got {type(cache_dir).__name__}")
    if supplied is not None and not isinstance(supplied, Mapping):
        raise ParameterError(f"supplied must be a mapping (omega, d) -> cell runs, got {type(supplied).__name__}")
    workers = check_workers(workers)
    threads = check_int("threads (0: torch's default)", threads, 0, 1024)
    if dask_address is not None and isinstance(dask_address, str):
        check_dask_address(dask_address)
    ErmConfig(
        d=config.ds[-1],
        alphas=config.alphas if config.nested else config.alphas[-1:],
        inits="both" if config.paired else "semantic",
        seeds=min(config.seed_chunk, config.seeds),
        test_samples=1,
        dtype=config.dtype,
        value=config.value,
        value_rank=config.value_rank,
    ).check(problem)  # the largest chunk must fit in memory
    if theory:
        refusal = theory_refusal(problem)
        if refusal is not None:
            raise ParameterError(
                f"the theory's alpha_c is not available for this problem ({refusal}); run without it (theory=False)"
            )
    resolve_device(config.device)  # availability (ParameterError) before any computation
    t0 = time.perf_counter()
    supplied = dict(supplied or {})
    check_supplied(config, supplied)
    wanted = {(w, d) for w in config.omegas for d in config.ds} | set(supplied)
    if supplied:
        from dataclasses import replace

        config = replace(config, omegas=tuple(sorted({w for w, _ in wanted})), ds=tuple(sorted({d for _, d in wanted})))
    cache = Path(cache_dir) if cache_dir is not None else None
    cells: dict[tuple[float, int], CellRuns] = dict(supplied)
    theory_cols: dict[float, TheoryColumn] = {}
    tasks: list[tuple[str, tuple]] = []
    keys: dict[tuple, tuple[str, Path | None]] = {}
    from_cache = 0
    cfg_dict = config.to_dict()
    for w in config.omegas:
        if not theory:
            theory_cols[w] = TheoryColumn(
                omega=w,
                alpha_c=None,
                alphas=tuple(config.alphas),
                delta=(None,) * len(config.alphas),
                quadrature={},
                seconds=0.0,
            )
            continue
        key = _theory_key(problem, w, config.alphas)
        path = cache / f"theory_w{w:.4f}.json" if cache else None
        hit = read_cache_unit(path, key)
        if hit is not None:
            theory_cols[w] = TheoryColumn.from_row(hit["result"])
            from_cache += 1
        else:
            tasks.append(("theory", (problem.to_dict(), w, list(config.alphas))))
            keys[("theory", w)] = (key, path)
    cell_order = sorted((c for c in wanted if c not in supplied), key=lambda c: -c[1])
    for w, d in cell_order:
        key = _cell_key(problem, w, d, config)
        path = cache / f"cell_w{w:.4f}_d{d}.json" if cache else None
        hit = read_cache_unit(path, key)
        if hit is not None:
            cells[(w, d)] = CellRuns.from_row(hit["cell"])
            from_cache += 1
            if progress:
                progress(config.cost(d), config.runs_per_seed * config.seeds)
        else:
            chunk_progress = None
            if workers <= 1 and dask_address is None and progress is not None:
                chunk_progress = progress
            tasks.append(
                ("cell", (problem.to_dict(), w, d, cfg_dict, str(cache) if cache else None, threads, chunk_progress))
            )
            keys[("cell", w, d)] = (key, path)
    # theory columns last in a single process (the ERM cells are the long ones); first in a pool
    in_process = workers <= 1 and dask_address is None
    tasks.sort(key=lambda t: (t[0] == "theory") == in_process)

    def store(i: int, res: dict) -> None:
        """Keep and cache one finished task at once (an interrupted study resumes from the cache)."""
        name = tasks[i][0]
        if name == "theory":
            column = TheoryColumn.from_row(res)
            w = column.omega
            theory_cols[w] = column
            key, path = keys[("theory", w)]
        else:
            cell = CellRuns.from_row(res)
            cells[(cell.omega, cell.d)] = cell
            key, path = keys[("cell", cell.omega, cell.d)]
            runs = config.runs_per_seed * config.seeds
            if not in_process and progress and reported.get(i, 0) < runs:  # what the per-run reports did not count
                progress(config.cost(cell.d) * (1 - reported.get(i, 0) / runs), runs - reported.get(i, 0))
        if path is not None:
            write_cache_unit(path, key, **{("result" if name == "theory" else "cell"): res})

    reported: dict[int, int] = {}

    def unit(i: int) -> None:
        """One run of the cell task ``i`` finished on a pool worker."""
        reported[i] = reported.get(i, 0) + 1
        if progress and tasks[i][0] == "cell":
            d = tasks[i][1][2]
            progress(config.cost(d) / (config.runs_per_seed * config.seeds), 1)

    run_tasks(
        _run_task,
        tasks,
        workers=workers,
        dask_address=dask_address,
        on_result=store,
        on_unit=None if in_process else unit,
    )

    ordered = [cells[(w, d)] for w in config.omegas for d in config.ds if (w, d) in wanted]
    all_x: list[SeedCrossing] = []
    sums: list[CellSummary] = []
    for c in ordered:
        xs = cell_crossings(c, STATUS_CONVERGED)
        all_x.extend(xs)
        sums.append(
            summarise_cell(
                c.omega,
                c.d,
                xs,
                excluded_points=int((~c.valid(STATUS_CONVERGED)).sum()),
                seconds=c.seconds,
                level=config.level,
                n_boot=config.n_boot,
            )
        )
    fits, alts = [], []
    other = next(m for m in FIT_MODELS if m != config.model)
    for w in config.omegas:
        ds_w = [d for d in config.ds if (w, d) in wanted]
        per_d = [np.array([x.alpha_c for x in all_x if x.omega == w and x.d == d]) for d in ds_w]
        fits.append(fit_finite_size(ds_w, per_d, config.model, config.level, config.n_boot))
        alts.append(fit_finite_size(ds_w, per_d, other, config.level, config.n_boot))
    branch = branch_estimator(ordered, config, wanted, STATUS_CONVERGED)
    return AlphaCStudy(
        problem=problem,
        config=config,
        cells=tuple(ordered),
        crossings=tuple(all_x),
        summaries=tuple(sums),
        fits=tuple(fits),
        alternative_fits=tuple(alts),
        theory=tuple(theory_cols[w] for w in config.omegas),
        seconds=time.perf_counter() - t0,
        from_cache=from_cache,
        branch_crossings=branch[0],
        branch_summaries=branch[1],
        branch_fits=branch[2],
    )


def branch_estimator(
    cells: Sequence[CellRuns], config: AlphaCConfig, wanted: Any, converged: str
) -> tuple[tuple[SeedCrossing, ...], tuple[CellSummary, ...], tuple[FiniteSizeFit, ...]]:
    """The second estimator over ``cells`` (:func:`cell_crossings` with ``by_branch``): per-seed crossings,
    per-cell summaries and the fit per ω of ``config`` over the d in ``wanted``; empty when a cell has no
    ``starts`` (one made before they were recorded)."""
    if not cells or any(c.starts is None for c in cells):
        return (), (), ()
    xs: list[SeedCrossing] = []
    sums = []
    for c in cells:
        x = cell_crossings(c, converged, by_branch=True)
        xs.extend(x)
        ok = c.valid(converged) & c.different_branches()
        sums.append(
            summarise_cell(
                c.omega, c.d, x, excluded_points=int((~ok).sum()), seconds=0.0, level=config.level, n_boot=config.n_boot
            )
        )
    fits = []
    for w in config.omegas:
        ds_w = [d for d in config.ds if (w, d) in wanted]
        per_d = [np.array([x.alpha_c for x in xs if x.omega == w and x.d == d]) for d in ds_w]
        fits.append(fit_finite_size(ds_w, per_d, config.model, config.level, config.n_boot))
    return tuple(xs), tuple(sums), tuple(fits)


def mean_curves(study: AlphaCStudy, converged: str) -> list[dict[str, Any]]:
    """Per cell: α, mean and standard error over seeds of the valid Δe_t."""
    out = []
    for c in study.cells:
        D = np.where(c.valid(converged), c.delta, np.nan)
        n = np.isfinite(D).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # α with < 2 valid seeds: NaN, drawn as a gap
            mean = np.nanmean(D, axis=0) if D.size else np.full(len(c.alphas), np.nan)
            se = np.nanstd(D, axis=0, ddof=1) / np.sqrt(n)
        out.append({"omega": c.omega, "d": c.d, "alpha": np.array(c.alphas), "mean": mean, "se": se})
    return out
