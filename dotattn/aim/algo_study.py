"""Finite-d studies of the AIM algorithms (AMP, GD) against the Bayes-optimal state evolution.

For every (α, seed) one data set (:func:`dotattn.aim.model.make_data`, seeded), the algorithm's
error (1/d)‖Ŝ − S*‖²_F, and per α the mean over seeds, its standard error (sample standard
deviation / √seeds) and the state evolution's MMSE at the same (ρ, T, α). The MMSE is a lower
bound for every estimator: a point whose mean error lies more than :data:`BOUND_Z` standard
errors below it is flagged ``beats_bound`` (it would refute the theory curve there, or show a
finite-d effect larger than the seeds' spread) and listed in the summary; never dropped.

Files: ``runs.csv`` (one row per run), ``alphas.csv`` (per α), ``iterations.csv`` (AMP: error,
AMP's own V^t and its state evolution per iteration), ``summary.json``, ``manifest.json``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dotattn.aim.model import check_d, data_bytes, teacher_rank
from dotattn.core.io import provenance, write_csv, write_json, write_manifest
from dotattn.core.progress import Cost
from dotattn.core.rows import read_bool, read_float, read_int, read_text
from dotattn.core.status import CONVERGED, DIVERGED, NOT_CONVERGED
from dotattn.core.validation import ParameterError, check_instance, check_int, check_number

__all__ = [
    "StudySpec",
    "BOUND_Z",
    "BO_TEST_SAMPLES",
    "alpha_summary",
    "gap_in_se",
    "check_memory",
    "write_study",
    "RunRow",
    "AlphaRow",
    "cached_runs",
]

BOUND_Z = 2.0
"""An estimator "beats" the Bayes-optimal MMSE at an α when its mean error is below the MMSE by more
than BOUND_Z of its standard errors (2: a ~2% false alarm per point for Gaussian seed means, so a
grid of ~10 points raises one by chance about once in five studies; every flag is reported)."""


@dataclass(frozen=True)
class StudySpec:
    """The problem and grid of a study: d, ρ, T, the channel, β, the α grid and the seeds 0..seeds−1."""

    d: int
    rho: float
    T: int
    alphas: tuple[float, ...]
    channel: str = "softmax"
    beta: float = 1.0
    seeds: int = 8
    test_samples: int = 2000

    if TYPE_CHECKING:  # the constructor the dataclass generates: the counts may be whole floats (checked, made int)

        def __init__(
            self,
            d: float,
            rho: float,
            T: float,
            alphas: Sequence[float],
            channel: str = ...,
            beta: float = ...,
            seeds: float = ...,
            test_samples: float = ...,
        ) -> None: ...

    def __post_init__(self) -> None:
        from dotattn.aim.state_evolution import check_inputs

        object.__setattr__(self, "d", check_d(self.d))
        check_instance("alphas", self.alphas, (tuple, list, np.ndarray), "sequence of alpha values")
        if not len(self.alphas):
            raise ParameterError("alpha grid is empty; give at least one value")
        channel, rho, T, alphas = check_inputs(self.channel, self.rho, self.T, list(self.alphas))
        for name, value in (("channel", channel), ("rho", rho), ("T", T), ("alphas", tuple(alphas))):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "beta", check_number("beta", self.beta, 0.0, True, 1e3, "in (0, 1000]"))
        object.__setattr__(self, "seeds", check_int("seeds", self.seeds, 1, 10_000))
        object.__setattr__(self, "test_samples", check_int("test_samples", self.test_samples, 2, 1_000_000))
        teacher_rank(self.d, self.rho)

    @property
    def r(self) -> int:
        return teacher_rank(self.d, self.rho)

    def n(self, alpha: float) -> int:
        return max(1, int(round(alpha * self.d**2)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "rho": self.rho,
            "r": self.r,
            "T": self.T,
            "channel": self.channel,
            "beta": self.beta,
            "alpha": list(self.alphas),
            "seeds": self.seeds,
            "test_samples": self.test_samples,
        }


def check_memory(spec: StudySpec, extra_per_sample: int = 0, memory: int | None = -1) -> int:
    """Bytes one run at the largest α needs (:func:`dotattn.aim.model.data_bytes` plus
    ``extra_per_sample`` bytes per sample); ParameterError if above the allowed fraction of the
    available memory (``memory``: bytes available, default measured; None: no check)."""
    from dotattn.core.resources import MEMORY_FRACTION, available_memory

    check_instance("spec", spec, StudySpec, "dotattn.aim.algo_study.StudySpec")
    extra_per_sample = check_int("extra_per_sample", extra_per_sample, 0)
    if memory is not None and memory != -1:
        memory = check_int("memory (bytes; -1: measured, None: no check)", memory, 0)
    n = spec.n(max(spec.alphas))
    need = data_bytes(n, spec.T, spec.d) + extra_per_sample * n
    memory = available_memory() if memory == -1 else memory
    if memory is not None and need > MEMORY_FRACTION * memory:
        raise ParameterError(
            f"d = {spec.d} at alpha = {max(spec.alphas):g} (n = {n} samples of T = {spec.T} tokens) "
            f"needs about {need / 2**30:.1f} GiB, allowed {MEMORY_FRACTION:.0%} of the "
            f"{memory / 2**30:.1f} GiB available; choose a smaller d or alpha"
        )
    return need


@dataclass(frozen=True)
class RunRow:
    """One run: estimator, α, seed (data set), init (GD; −1 for AMP and the averaged estimator), its
    error (1/d)‖Ŝ − S*‖²_F, status, iterations/steps, final loss and RMS gradient (GD), seconds, message."""

    estimator: str
    alpha: float
    seed: int
    init: int
    n: int
    mse: float
    status: str
    iterations: int
    loss: float = float("nan")
    grad_rms: float = float("nan")
    seconds: float = float("nan")
    message: str = ""
    test_error: float = float("nan")

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRow:
        conv: dict[str, Callable[[Any], Any]] = {
            "estimator": read_text,
            "seed": read_int,
            "init": read_int,
            "n": read_int,
            "status": read_text,
            "iterations": read_int,
            "message": read_text,
        }
        return cls(
            **{
                f.name: conv.get(f.name, read_float)(row[f.name] if f.name in _REQUIRED_RUN else row.get(f.name))
                for f in fields(cls)
            }
        )


RUN_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunRow))
_REQUIRED_RUN = RUN_COLUMNS[:-1]  # test_error: absent from folders written before it existed (read as NaN)


@dataclass(frozen=True)
class AlphaRow:
    """One (estimator, α): mean error over the seeds that did not diverge, its standard error, the state
    evolution's MMSE, the gap (mean − MMSE) in standard errors, how many runs converged and diverged
    (diverged runs are counted, not averaged), and the lower-bound flag; the same for the test error
    (1/T)‖g(ĥ) − y‖²_F of the estimator's plug-in predictor on fresh samples against the Bayes-optimal test
    error at the state evolution's overlap (:func:`dotattn.aim.test_error.bayes_test_error`), whose own
    Monte-Carlo standard error ``test_error_bo_se`` enters the test gap in quadrature (NaN in folders written
    before it was recorded: there the gap is in the estimator's standard error alone)."""

    estimator: str
    alpha: float
    mse_mean: float
    mse_se: float
    runs: int
    converged: int
    diverged: int
    mmse_se_theory: float
    gap: float
    gap_in_se: float
    beats_bound: bool
    test_mean: float = float("nan")
    test_se: float = float("nan")
    test_error_bo: float = float("nan")
    test_gap_in_se: float = float("nan")
    test_beats_bound: bool = False
    test_error_bo_se: float = float("nan")

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> AlphaRow:
        def flag(x):
            return False if x in (None, "") else read_bool(x)

        conv: dict[str, Callable[[Any], Any]] = {
            "estimator": read_text,
            "runs": read_int,
            "converged": read_int,
            "diverged": read_int,
            "beats_bound": read_bool,
            "test_beats_bound": flag,
        }
        # the test_* columns are absent from folders written before they existed (NaN, no flag)
        return cls(**{f.name: conv.get(f.name, read_float)(row.get(f.name)) for f in fields(cls)})


ALPHA_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(AlphaRow))


def _mean_se_gap(
    values: Sequence[float], statuses: Sequence[str], bound: float, bound_se: float = 0.0
) -> tuple[float, float, float]:
    """Mean and standard error over the runs that did not diverge, and (mean − bound)/√(SE² + bound_se²)
    (NaN with one run; ``bound_se``: the bound's own Monte-Carlo standard error, 0 for an exact bound)."""
    x = np.asarray([m for m, s in zip(values, statuses, strict=True) if s != DIVERGED], dtype=float)
    mean = float(np.mean(x)) if x.size else float("nan")
    se = float(np.std(x, ddof=1) / math.sqrt(x.size)) if x.size > 1 else float("nan")
    gap = mean - bound
    if not math.isfinite(se):  # fewer than two runs to average: no standard error, no verdict
        return mean, se, float("nan")
    return mean, se, gap_in_se(gap, math.hypot(se, bound_se))


def gap_in_se(gap: float, se: float) -> float:
    """gap/se, with a zero standard error giving 0 (no gap) or ±inf; NaN when either is not finite."""
    if not (math.isfinite(gap) and math.isfinite(se)):
        return float("nan")
    return gap / se if se > 0 else (0.0 if gap == 0 else math.copysign(math.inf, gap))


def alpha_summary(
    estimator: str,
    alpha: float,
    mse: Sequence[float],
    statuses: Sequence[str],
    mmse: float,
    test: Sequence[float] | None = None,
    test_bo: float = float("nan"),
    test_bo_se: float = 0.0,
) -> AlphaRow:
    """Mean and standard error of the runs' errors at one α, against the MMSE (exact to ≤ 1e-9, see
    :data:`BOUND_Z`), and of their test errors ``test`` (one per run, optional) against the Bayes-optimal
    test error ``test_bo`` ± ``test_bo_se`` (Monte Carlo; its error is combined in quadrature)."""
    if len(mse) != len(statuses) or (test is not None and len(test) != len(statuses)):
        raise ValueError("alpha_summary: one status per error")
    if not test_bo_se >= 0:
        raise ValueError(f"alpha_summary: test_bo_se must be >= 0, got {test_bo_se!r}")
    mean, se, z = _mean_se_gap(mse, statuses, mmse)
    t_mean, t_se, t_z = _mean_se_gap(test, statuses, test_bo, test_bo_se) if test is not None else (math.nan,) * 3
    return AlphaRow(
        estimator=estimator,
        alpha=float(alpha),
        mse_mean=mean,
        mse_se=se,
        runs=len(statuses),
        converged=sum(s == CONVERGED for s in statuses),
        diverged=sum(s == DIVERGED for s in statuses),
        mmse_se_theory=float(mmse),
        gap=mean - mmse,
        gap_in_se=z,
        beats_bound=bool(z < -BOUND_Z),
        test_mean=t_mean,
        test_se=t_se,
        test_error_bo=float(test_bo),
        test_gap_in_se=t_z,
        test_beats_bound=bool(t_z < -BOUND_Z),  # False for NaN (one seed)
        test_error_bo_se=float(test_bo_se),
    )


def write_study(
    folder: str | Path,
    spec: StudySpec,
    settings: dict[str, Any],
    runs: Sequence[RunRow],
    alphas: Sequence[AlphaRow],
    command: str | None,
    seconds: float,
    iterations: Sequence[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict:
    """Write runs.csv, alphas.csv, (iterations.csv), summary.json and the manifest (last); returns the summary."""
    folder = Path(folder)
    made_for = {**spec.to_dict(), **settings}
    prov = provenance(made_for, seconds)
    comment = f"dotattn aim study; commit {prov['git_commit']}; command: {command}"
    write_csv(folder / "runs.csv", [r.to_row() for r in runs], RUN_COLUMNS, comment=comment)
    write_csv(folder / "alphas.csv", [a.to_row() for a in alphas], ALPHA_COLUMNS, comment=comment)
    files = ["runs.csv", "alphas.csv"]
    if iterations is not None:
        cols = ("alpha", "seed", "iteration", "mse", "V_amp", "V_se", "Delta")
        write_csv(folder / "iterations.csv", iterations, cols, comment=comment)
        files.append("iterations.csv")
    flagged = [a.to_row() for a in alphas if a.beats_bound or a.test_beats_bound]
    summary = {
        "made_for": made_for,
        "alphas": [a.to_row() for a in alphas],
        "bound_check": {
            "rule": f"beats_bound when (mse_mean - mmse_se_theory)/mse_se < -{BOUND_Z:g}; "
            f"test_beats_bound when (test_mean - test_error_bo)"
            f"/sqrt(test_se^2 + test_error_bo_se^2) < -{BOUND_Z:g}",
            "flagged": flagged,
        },
        "statuses": {s: sum(r.status == s for r in runs) for s in sorted({r.status for r in runs})},
        "command": command,
        "provenance": prov,
        **(extra or {}),
    }
    write_json(folder / "summary.json", summary)
    files.append("summary.json")
    write_manifest(folder, files, made_for, command=command, provenance_record=prov)
    return summary


# ----------------------------------------------------------------------------------------------
# the studies
# ----------------------------------------------------------------------------------------------
def _theory(spec: StudySpec):
    """(output(y, ω, V) -> (g, ∂g), denoise(R, Δ) -> (Ŝ, MMSE_S(Δ)), q̂(α, V), MMSE_SE(α)) from the
    state-evolution modules (:mod:`dotattn.aim.prior`, :mod:`dotattn.aim.channels`,
    :mod:`dotattn.aim.state_evolution`)."""
    from dotattn.aim import channels, prior, state_evolution

    T, Q0 = spec.T, prior.prior_second_moment(spec.rho)
    diagonal = np.arange(channels.n_entries(T))

    def output(y, omega, V):
        """g and the diagonal of its Jacobian, (n, T, T) each (the channels work on flattened upper triangles)."""
        g, dg = channels.output_function(spec.channel, y, channels.flatten(omega), V, T, beta=spec.beta)
        return channels.unflatten(g, T), channels.unflatten(dg[:, diagonal, diagonal], T)

    def denoise(R, Delta):
        return prior.rie_denoise(R, Delta, spec.rho), prior.mmse_prior(Delta, spec.rho)

    def q_hat(alpha, V):
        if not Q0 - V < Q0:  # V = 0 up to rounding: perfect recovery, q̂ = ∞
            return math.inf
        return channels.q_hat(spec.channel, alpha, Q0 - V, spec.rho, T)

    def mmse(alpha):
        return state_evolution.solve_point(spec.channel, alpha, spec.rho, T).mmse

    return output, denoise, q_hat, mmse, prior.mmse_prior


def _unit(
    cache_dir: str | Path | None, estimator: str, spec: StudySpec, config: Any, alpha: float, seed: int
) -> tuple[Path | None, dict[str, Any]]:
    """(file, key) of the cache unit of one (α, seed) run: the key holds every setting that changes
    the run (not the α grid or the number of seeds, so a study with more seeds or α reuses it)."""
    from dotattn.core.version import __version__

    problem = {k: v for k, v in spec.to_dict().items() if k not in ("alpha", "seeds")}
    key = {
        "estimator": estimator,
        "problem": problem,
        "config": config.to_dict(),
        "alpha": float(alpha),
        "seed": int(seed),
        "version": __version__,
    }
    path = None if cache_dir is None else Path(cache_dir) / f"{estimator}_alpha{float(alpha)!r}_seed{int(seed)}.json"
    return path, key


AMP_TYPICAL_STUDIES = (
    "amp_hardmax_d100_rho0.5_T2",
    "amp_softmax_d100_rho0.5_T2",
    "amp_softmax_d100_rho0.5_T3",
    "amp_softmax_d100_rho0.5_T4",
    "amp_softmax_d100_rho1_T2",
)
"""The committed AMP studies (``results/aim/``) whose runs give :data:`AMP_COST`'s typical fraction."""
AMP_COST = Cost(0.56e-9, 'benchmarks/README.md "Start-line estimates"', typical=0.82)
"""CPU seconds (one thread) per α d⁴ of one AMP iteration (n = α d² samples), besides :data:`AMP_ITER_OVERHEAD`:
a straight line through the CPU time per iteration of six (d, α) pairs, d = 40, 70, 100 and α = 0.05-0.2
(2 seeds, 20 and 100 iterations each, the difference per iteration: 4.9-13.6 ms; nice 5, load average 10 on 2
cores; every pair within 0.85-1.2x of the line). ``typical``: the iterations the 192 runs of the committed AMP
studies (:data:`AMP_TYPICAL_STUDIES`) used, pooled as a fraction of their ``max_iter`` (those that converge or
diverge stop early: 0.82; at ρ = 0.5, T = 2, softmax, most use all 300)."""
AMP_ITER_OVERHEAD = 4.9e-3
"""CPU seconds per AMP iteration besides the α d⁴ work (the denoiser, the state evolution): the same line."""
AMP_ALPHA_OVERHEAD = 0.45
"""CPU seconds per α of a study besides the iterations (the data, the Bayes-optimal and plug-in test errors): the
same runs, 0.38-0.48 s."""
GD_COST = Cost(2.7e-10, 'benchmarks/README.md "Start-line estimates"')
"""CPU seconds per sample × d² × initialisation of one GD step, besides :data:`GD_STEP_OVERHEAD`: from runs of one
(α = 0.1, seed 0, 4 initialisations) at d = 40 and d = 80, 50 and 250 steps each (0.85 and 4.96 ms per step;
nice 5, load average 5-8 on 2 cores, one thread). ``typical`` is 1: GD runs its whole step budget."""
GD_STEP_OVERHEAD = 0.57e-3
"""CPU seconds per step of one data set (all its initialisations at once) besides the per-sample work."""
GD_ALPHA_OVERHEAD = 0.5
"""CPU seconds per α of a GD study besides the steps (the theory, the test errors): the same runs, 0.48-0.53 s."""
GD_START = 1.2
"""CPU seconds a GD study pays once per process besides its α and steps (its first call: 1.64 CPU-s against 0.43 for
the same call again, d = 20, 10 steps; nice 5, load average 7 on 2 cores); AMP's first call: 0.17 s more, not
counted."""


def run_seconds(spec: StudySpec, config: Any, estimator: str) -> float:
    """Rough CPU seconds (one thread) of one (α, seed) run with its whole budget, averaged over the study's α: AMP
    at (:data:`AMP_ITER_OVERHEAD` + :data:`AMP_COST` × α d⁴) × max_iter, GD at (:data:`GD_STEP_OVERHEAD` +
    :data:`GD_COST` × n d² × inits) × steps; each plus its per-α overhead shared by the α's seeds. AMP runs
    typically stop short of max_iter (:attr:`AMP_COST.typical <dotattn.core.progress.Cost.typical>`)."""
    d, alphas = spec.d, list(spec.alphas)
    if estimator == "amp":
        per = [(AMP_ITER_OVERHEAD + AMP_COST.seconds * a * d**4) * config.max_iter for a in alphas]
        fixed = AMP_ALPHA_OVERHEAD
    else:
        per = [(GD_STEP_OVERHEAD + GD_COST.seconds * spec.n(a) * d * d * config.inits) * config.steps for a in alphas]
        fixed = GD_ALPHA_OVERHEAD
    return sum(per) / max(len(per), 1) + fixed / max(spec.seeds, 1)


def cached_runs(cache_dir: str | Path, estimator: str, spec: StudySpec, config: Any) -> int:
    """How many of the study's (α, seed) runs its cache folder holds, verified and made for these settings."""
    from dotattn.core.io import read_cache_unit

    units = (_unit(cache_dir, estimator, spec, config, a, s) for a in spec.alphas for s in range(spec.seeds))
    return sum(read_cache_unit(path, key) is not None for path, key in units)


def _cached(
    cache_dir, estimator, spec, config, alpha, seed, compute: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """The content of one (α, seed) run: read from its verified cache unit, else computed and cached at
    once (an interrupted study resumes from the runs it finished). (content, from the cache?)"""
    from dotattn.core.io import read_cache_unit, write_cache_unit

    path, key = _unit(cache_dir, estimator, spec, config, alpha, seed)
    hit = read_cache_unit(path, key)
    if hit is not None:
        return hit, True
    content = compute()
    if path is not None:
        write_cache_unit(path, key, **content)
    return content, False


BO_TEST_SAMPLES = 1_000_000
"""Monte-Carlo pairs of the Bayes-optimal test error a study compares against (five times
:data:`dotattn.aim.test_error.TEST_SAMPLES`: standard error ≈ 3.5e-5 at T = 4, ᾱ = 0.45, below the
estimators' over 4 data sets; 1–6 s per α for T = 2–6). It still enters the bound check in quadrature."""


def _bayes_test_error(spec: StudySpec, mmse: float) -> tuple[float, float]:
    """(value, Monte-Carlo standard error) of the Bayes-optimal test error at the state evolution's overlap
    q = Q0 − MMSE (seeded; error 0 for the closed-form hardmax T = 2)."""
    from dotattn.aim.prior import prior_second_moment
    from dotattn.aim.test_error import bayes_test_error

    return bayes_test_error(
        spec.channel, prior_second_moment(spec.rho) - mmse, spec.rho, spec.T, spec.beta, samples=BO_TEST_SAMPLES
    )


def _plugin_test_errors(data, S_hats: Sequence[np.ndarray], m: int) -> list[float]:
    """(1/T)‖g(h(Ŝ)) − y‖²_F averaged over m fresh samples of the data's teacher, for each estimate."""
    from dotattn.aim.model import attention_index, fresh_samples
    from dotattn.aim.test_error import plugin_test_error

    X, y = fresh_samples(data, m)
    return [
        plugin_test_error(attention_index(X, S), y, data.channel, data.beta)[0] if np.all(np.isfinite(S)) else math.nan
        for S in S_hats
    ]


def run_amp_study(
    spec: StudySpec,
    config,
    progress: Callable[[str], None] | None = None,
    cache_dir: str | Path | None = None,
    on_run: Callable[[bool], None] | None = None,
):
    """AMP on every (α, seed): (runs, per-α rows, per-iteration rows, seconds).

    ``cache_dir``: each finished (α, seed) run is kept there (checksummed) and taken from there when the
    study is run again with the same settings; ``on_run(cached)`` after each run."""
    from dotattn.aim.amp import AMPConfig, run_amp, se_trajectory
    from dotattn.aim.model import make_data

    check_instance("spec", spec, StudySpec, "dotattn.aim.algo_study.StudySpec")
    check_instance("config", config, AMPConfig, "dotattn.aim.amp.AMPConfig")
    output, denoise, q_hat, mmse_of, mmse_prior = _theory(spec)
    t0 = time.perf_counter()
    runs, rows, iters = [], [], []
    for alpha in spec.alphas:
        mmse = float(mmse_of(alpha))
        res_alpha = []
        for seed in range(spec.seeds):

            def compute(alpha=alpha, seed=seed) -> dict[str, Any]:
                data = make_data(spec.d, spec.rho, spec.T, alpha, spec.channel, spec.beta, seed)
                res = run_amp(data, output, denoise, config)
                V_se = se_trajectory(lambda V: q_hat(alpha, V), lambda D: mmse_prior(D, spec.rho), res.iterations)
                its = [
                    {
                        "alpha": alpha,
                        "seed": seed,
                        "iteration": t,
                        "mse": m,
                        "V_amp": res.V_path[t],
                        "V_se": V_se[t] if t < len(V_se) else None,
                        "Delta": res.Delta_path[t - 1] if t >= 1 else None,
                    }
                    for t, m in enumerate(res.mse_path)
                ]
                run = RunRow(
                    estimator="amp",
                    alpha=alpha,
                    seed=seed,
                    init=-1,
                    n=data.n,
                    mse=res.mse,
                    status=res.status,
                    iterations=res.iterations,
                    seconds=res.seconds,
                    message=res.message,
                    test_error=_plugin_test_errors(data, [res.S_hat], spec.test_samples)[0],
                )
                return {"runs": [run.to_row()], "iterations": its}

            content, cached = _cached(cache_dir, "amp", spec, config, alpha, seed, compute)
            run = RunRow.from_row(content["runs"][0])
            iters.extend(content["iterations"])
            runs.append(run)
            res_alpha.append(run)
            if progress is not None:
                progress(
                    f"amp alpha={alpha:g} seed={seed}: mse {run.mse:.4f} (SE {mmse:.4f}), {run.status} "
                    f"after {run.iterations} iterations, {run.seconds:.1f} s" + (" (cached)" if cached else "")
                )
            if on_run is not None:
                on_run(cached)
        rows.append(
            alpha_summary(
                "amp",
                alpha,
                [r.mse for r in res_alpha],
                [r.status for r in res_alpha],
                mmse,
                [r.test_error for r in res_alpha],
                *_bayes_test_error(spec, mmse),
            )
        )
    return runs, rows, iters, time.perf_counter() - t0


def run_gd_study(
    spec: StudySpec,
    config,
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
    cache_dir: str | Path | None = None,
    on_run: Callable[[bool], None] | None = None,
):
    """GD (``config.inits`` initialisations per data set, batched) and the averaged estimator on every
    (α, seed), with their plug-in test errors on ``spec.test_samples`` fresh samples: (runs, per-α rows for
    ``gd`` and ``gd_averaged``, seconds). ``progress`` gets a start line, one line per data set with the
    elapsed time and an estimate of the time left (from the work done so far: the cost is ∝ n).
    ``cache_dir``, ``on_run``: as for :func:`run_amp_study` (one unit per data set: its initialisations and
    their average)."""
    from dotattn.aim.gd import GDConfig, run_gd
    from dotattn.aim.model import make_data

    check_instance("spec", spec, StudySpec, "dotattn.aim.algo_study.StudySpec")
    check_instance("config", config, GDConfig, "dotattn.aim.gd.GDConfig")
    _, _, _, mmse_of, _ = _theory(spec)
    t0 = time.perf_counter()
    work_total = spec.seeds * sum(spec.n(a) for a in spec.alphas)
    work_done = 0
    if progress is not None:
        progress(
            f"gd: d = {spec.d}, T = {spec.T}, {len(spec.alphas)} alpha x {spec.seeds} seeds x {config.inits} "
            f"initialisations, {config.steps} {config.optimizer} steps each (all initialisations batched)"
        )
    runs, rows = [], []
    for alpha in spec.alphas:
        mmse = float(mmse_of(alpha))
        test_bo, test_bo_se = _bayes_test_error(spec, mmse)
        single, averaged = [], []
        for seed in range(spec.seeds):

            def compute(alpha=alpha, seed=seed) -> dict[str, Any]:
                data = make_data(spec.d, spec.rho, spec.T, alpha, spec.channel, spec.beta, seed)
                res = run_gd(data, config, device=device)
                tests = _plugin_test_errors(data, [*res.S_runs, res.S_averaged], spec.test_samples)
                per = res.seconds / len(res.runs)
                inits = [
                    RunRow(
                        estimator="gd",
                        alpha=alpha,
                        seed=seed,
                        init=k.init,
                        n=data.n,
                        mse=k.mse,
                        status=k.status,
                        iterations=k.steps,
                        loss=k.loss,
                        grad_rms=k.grad_rms,
                        seconds=per,
                        test_error=tests[k.init],
                    )
                    for k in res.runs
                ]
                sts = [k.status for k in res.runs]
                status = (
                    DIVERGED
                    if all(s == DIVERGED for s in sts)
                    else CONVERGED
                    if all(s == CONVERGED for s in sts)
                    else NOT_CONVERGED
                )
                used = sum(s != DIVERGED for s in sts)
                avg = RunRow(
                    estimator="gd_averaged",
                    alpha=alpha,
                    seed=seed,
                    init=-1,
                    n=data.n,
                    mse=res.mse_averaged,
                    status=status,
                    iterations=len(res.runs),
                    seconds=res.seconds,
                    message=f"mean of S over {used} of {len(res.runs)} initialisations (the others diverged)"
                    if used < len(res.runs)
                    else f"mean of S over {len(res.runs)} initialisations",
                    test_error=tests[-1],
                )
                return {"runs": [r.to_row() for r in inits] + [avg.to_row()]}

            content, cached = _cached(cache_dir, "gd", spec, config, alpha, seed, compute)
            seed_runs = [RunRow.from_row(r) for r in content["runs"]]
            *inits, avg = seed_runs
            runs.extend(seed_runs)
            single.extend(inits)
            averaged.append(avg)
            work_done += spec.n(alpha)
            if progress is not None:
                el = time.perf_counter() - t0
                progress(
                    f"gd alpha={alpha:g} seed={seed}: mse {np.nanmean([k.mse for k in inits]):.4f}, averaged "
                    f"{avg.mse:.4f} (SE {mmse:.4f}); test {np.nanmean([k.test_error for k in inits]):.4f}, "
                    f"averaged {avg.test_error:.4f} (Bayes {test_bo:.4f}); max grad_rms "
                    f"{max(k.grad_rms for k in inits):.1e}; {avg.seconds:.0f} s"
                    + (" (cached)" if cached else "")
                    + f"; {el / 60:.1f} min elapsed, about {el / work_done * (work_total - work_done) / 60:.1f} min left"
                )
            if on_run is not None:
                on_run(cached)
        # the GD row: per seed the mean over initialisations (seeds are the independent samples), with the
        # status of the averaged row (converged when every initialisation is)
        per_seed = [float(np.nanmean([r.mse for r in single if r.seed == s])) for s in range(spec.seeds)]
        per_seed_test = [float(np.nanmean([r.test_error for r in single if r.seed == s])) for s in range(spec.seeds)]
        rows.append(
            alpha_summary("gd", alpha, per_seed, [r.status for r in averaged], mmse, per_seed_test, test_bo, test_bo_se)
        )
        rows.append(
            alpha_summary(
                "gd_averaged",
                alpha,
                [r.mse for r in averaged],
                [r.status for r in averaged],
                mmse,
                [r.test_error for r in averaged],
                test_bo,
                test_bo_se,
            )
        )
    return runs, rows, time.perf_counter() - t0
