"""Many optimiser restarts on the same data and teacher: do they reach one minimum or many?

For every data seed (one teacher ``Q*`` and one training set of ``n = round(α d)`` samples) the
risk is minimised from ``R`` starts at once (``batched-lbfgs``, each run converged to the
relative stationarity ``tol``). The starts (``Q ∈ R^{d×r}``) are

* ``random`` — ``random_scale · N(0, 1)`` entries (near the saddle ``Q = 0``);
* ``semantic`` / ``positional`` — the informed start of :func:`dotattn.erm.experiment.initial_weights`
  plus ``informed_noise · N(0, 1)`` entries,

each restart with its own seeded stream, so restarts differ only in their start. With
``sector = "semantic"`` the student is restricted to the μ = 0 sector: the risk is evaluated at
``Q − Pᵀ G⁺ P Q`` (the component of ``Q`` along the positional embeddings removed), so
``μ_l = Qᵀp_l/√d = 0`` exactly, the semantic sector of the theory.

Every run is measured (:class:`RestartRecord`: e_t, ε_g on a fresh test set, overlaps, and the
teacher's exact overlaps ``ρ = σ² Q*ᵀQ*/d``, ``ν = Q*ᵀPᵀ/√d`` that the theory's formulas need at
finite d), and every pair of converged runs of one seed that end on the same branch gets its
mutual distance (:class:`PairRecord`)

    D_ab = min_U ‖Q_a − Q_b U‖²_F / (‖Q_a‖_F ‖Q_b‖_F)     (U orthogonal r×r; for r = 1 the sign)
         = (‖Q_a‖² + ‖Q_b‖² − 2 ‖Q_aᵀQ_b‖_*) / (‖Q_a‖ ‖Q_b‖),

and overlap ``‖Q_aᵀQ_b‖_* / (‖Q_a‖ ‖Q_b‖)`` (nuclear norm; 1 for the same minimum).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dotattn.core.progress import Cost
from dotattn.core.resources import MEMORY_FRACTION, available_memory
from dotattn.core.status import CONVERGED, from_training
from dotattn.core.training import STATUS, train
from dotattn.core.validation import ParameterError, check_alpha, check_instance, readonly_array
from dotattn.erm.config import TEACHERS, ErmConfig, _integer, _normalise_seeds, _positive
from dotattn.erm.data import STREAM_INIT, STREAM_TRAIN, generator, make_dataset, positional_embeddings, teacher_weights
from dotattn.erm.experiment import DTYPES, _risk_function, _sample_errors, initial_weights, resolve_device, test_batches
from dotattn.erm.models import sample_stats
from dotattn.erm.records import run_branch
from dotattn.erm.restart_records import PAIR_COLUMNS, RESTART_COLUMNS, PairRecord, RestartRecord
from dotattn.positional_semantic.problem import Problem, check_problem, require_variant

__all__ = [
    "START_KINDS",
    "SECTORS",
    "RestartConfig",
    "RestartRecord",
    "PairRecord",
    "RestartResult",
    "run_restarts",
    "pair_distance",
    "RESTART_COLUMNS",
    "PAIR_COLUMNS",
]

START_KINDS: tuple[str, ...] = ("random", "semantic", "positional")
SECTORS: tuple[str, ...] = ("free", "semantic")
_RESTART_STREAM = 1000
"""Init streams of restart k are ``(seed, STREAM_INIT, _RESTART_STREAM + k)`` (disjoint from train-erm's)."""


@dataclass(frozen=True)
class RestartConfig:
    """One restarts study at one (d, α): ``seeds`` data seeds, per seed the starts ``starts``
    (a tuple of :data:`START_KINDS`, one per restart), ``sector`` one of :data:`SECTORS`; the
    optimiser is ``batched-lbfgs`` with ``tol`` on the relative stationarity. Validated."""

    d: int
    alpha: float
    seeds: tuple[int, ...]
    starts: tuple[str, ...]
    sector: str = "free"
    steps: int = 20000
    tol: float = 1e-7
    lr: float = 1.0
    random_scale: float = 0.1
    informed_noise: float = 0.3
    positional_m0: float = 0.3
    test_samples: int = 10_000
    test_batch: int = 2048
    teacher: str = "gaussian"
    dtype: str = "float64"
    device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "d", _integer("d", self.d, 2))
        a = check_alpha(self.alpha)
        if round(a * self.d) < 1:
            raise ParameterError(f"alpha must be >= 1/d = {1 / self.d:g} (at least one sample), got {a:g}")
        object.__setattr__(self, "alpha", a)
        object.__setattr__(self, "seeds", _normalise_seeds(self.seeds))
        starts = tuple(str(s).strip().lower() for s in self.starts)
        if not starts or any(s not in START_KINDS for s in starts):
            raise ParameterError(f"starts must be a non-empty list of {', '.join(START_KINDS)}, got {self.starts!r}")
        if len(starts) > 4096:
            raise ParameterError(f"restarts must be at most 4096 per seed, got {len(starts)}")
        object.__setattr__(self, "starts", starts)
        if self.sector not in SECTORS:
            raise ParameterError(f"sector must be one of {', '.join(SECTORS)}, got {self.sector!r}")
        if self.sector == "semantic" and "positional" in starts:
            raise ParameterError("starts must not include positional in the semantic sector (mu = 0)")
        object.__setattr__(self, "steps", _integer("steps", self.steps, 1))
        object.__setattr__(self, "tol", _positive("tol", self.tol))
        object.__setattr__(self, "lr", _positive("lr", self.lr))
        for name in ("random_scale", "informed_noise"):
            object.__setattr__(self, name, _positive(name, getattr(self, name), allow_zero=True))
        object.__setattr__(self, "positional_m0", _positive("positional_m0", self.positional_m0))
        object.__setattr__(self, "test_samples", _integer("test_samples", self.test_samples, 2))
        object.__setattr__(self, "test_batch", _integer("test_batch", self.test_batch, 1))
        if self.teacher not in TEACHERS:
            raise ParameterError(f"teacher must be one of {', '.join(TEACHERS)}, got {self.teacher!r}")
        if self.dtype not in DTYPES:
            raise ParameterError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        # the remaining checks (device name, memory) are ErmConfig's
        self.as_erm_config()

    @property
    def n(self) -> int:
        return max(1, int(round(self.alpha * self.d)))

    def as_erm_config(self) -> ErmConfig:
        """The equivalent :class:`ErmConfig` (one α, ``len(starts)`` runs per seed) for its checks."""
        return ErmConfig(
            d=self.d,
            alphas=(self.alpha,),
            inits="random",
            seeds=self.seeds,
            optimizer="batched-lbfgs",
            steps=self.steps,
            lr=self.lr,
            tol=self.tol,
            test_samples=self.test_samples,
            dtype=self.dtype,
            device=self.device,
            test_batch=self.test_batch,
            teacher=self.teacher,
        )

    def check(self, problem: Problem, memory: int | None = -1) -> None:
        """Problem-dependent checks and the memory estimate (ParameterError); tied students only (the
        restarts and their pair distances are written for one weight matrix Q), correlated tokens allowed."""
        check_problem(problem)
        require_variant(problem, "erm-restarts", correlated=True)
        if self.d < problem.L:
            raise ParameterError(f"d must be >= L = {problem.L}, got {self.d}")
        if "positional" in self.starts and float(np.max(np.abs(problem.G))) == 0.0:
            raise ParameterError("starts positional needs a nonzero positional_gram")
        need = self.memory_bytes(problem)
        memory = available_memory() if memory == -1 else memory
        if memory is not None and need > MEMORY_FRACTION * memory:
            raise ParameterError(
                f"d x alpha x seeds x restarts must fit in memory: these runs need about "
                f"{need / 2**30:.1f} GiB, allowed {MEMORY_FRACTION:.0%} of the "
                f"{memory / 2**30:.1f} GiB available; lower d, alpha, seeds or restarts"
            )

    def memory_bytes(self, problem: Problem) -> int:
        """Estimated peak memory in bytes (as :meth:`ErmConfig.memory_bytes`, with R runs per seed)."""
        item = 8 if self.dtype == "float64" else 4
        S, R, N, L, r, d = len(self.seeds), len(self.starts), self.n, problem.L, problem.rank, self.d
        nt = min(self.test_batch, self.test_samples)
        return int(
            item * (S * N * L * d + 8 * S * N * L * L + 4 * S * R * N * L * (r + L) + 6 * S * R * r * d)
            + 24 * N * L * d
            + S * nt * L * d * (24 + item)
            + 8 * 10 * 2 * S * R * r * d
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "alpha": self.alpha,
            "n": self.n,
            "seeds": list(self.seeds),
            "starts": list(self.starts),
            "sector": self.sector,
            "optimizer": "batched-lbfgs",
            "steps": self.steps,
            "tol": self.tol,
            "lr": self.lr,
            "random_scale": self.random_scale,
            "informed_noise": self.informed_noise,
            "positional_m0": self.positional_m0,
            "test_samples": self.test_samples,
            "test_batch": self.test_batch,
            "teacher": self.teacher,
            "dtype": self.dtype,
            "device": self.device,
        }


@dataclass(frozen=True)
class RestartResult:
    """All restarts and pairs of one :func:`run_restarts` call and what produced them."""

    problem: Problem
    config: RestartConfig
    runs: tuple[RestartRecord, ...]
    pairs: tuple[PairRecord, ...]
    device: str
    seconds: float
    threads: int

    def parameters(self) -> dict[str, Any]:
        return {
            "problem": self.problem.to_dict(),
            "restarts": self.config.to_dict(),
            "resolved_device": self.device,
            "torch_threads": self.threads,
            "torch_version": torch.__version__,
        }


def pair_distance(Qa: torch.Tensor, Qb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(D_ab, overlap) of the module docstring for ``Qa, Qb`` of shape ``(..., d, r)`` -> two ``(...)``."""
    na, nb = Qa.square().sum((-1, -2)).sqrt(), Qb.square().sum((-1, -2)).sqrt()
    nuc = torch.linalg.svdvals(Qa.transpose(-1, -2) @ Qb).sum(-1)
    norm = (na * nb).clamp_min(torch.finfo(Qa.dtype).tiny)
    return (na.square() + nb.square() - 2 * nuc) / norm, nuc / norm


def _starts(config: RestartConfig, problem: Problem, Q_star: torch.Tensor, P: torch.Tensor, seed: int) -> torch.Tensor:
    """Initial weights of every restart of one seed, ``(R, d, r)``."""
    d, r = config.d, problem.rank
    out = []
    for k, kind in enumerate(config.starts):
        g = generator(seed, STREAM_INIT, _RESTART_STREAM + k)
        noise = torch.randn(d, r, generator=g, dtype=torch.float64).to(Q_star.dtype)
        if kind == "random":
            out.append(config.random_scale * noise)
        else:
            base = initial_weights(kind, Q_star, P, r, seed, config.positional_m0, random_scale=0.0)
            out.append(base + config.informed_noise * noise)
    return torch.stack(out)


RESTART_COST = Cost(0.206, 'benchmarks/README.md "Start-line estimates"')
"""CPU seconds (one thread) of one restart trained by batched-lbfgs to its tolerance at n × d × rank = 10⁶, the
typical cost scaling as (n d rank / 10⁶)^:data:`RESTART_EXPONENT` (a batch runs until its slowest restart stops,
and that takes more steps at larger d): from two runs (nice 5, load average 4-5 on 2 cores): the README example
(2 seeds x 24 restarts, d = 1000, n = 2000, teacher rank 2, ``--threads 1``: 23.0 CPU-s of training, its slowest
restart 434 steps) and ``benchmarks/estimates.py``'s small case (2 x 12 restarts, d = 400, n = 800: 1.23 CPU-s,
slowest restart 116 steps). Both points were used to fit, so neither checks it independently."""
RESTART_EXPONENT = 1.22
"""How the typical cost of a restart grows with n × d × rank (see :data:`RESTART_COST`)."""
LBFGS_STEP_OVERHEAD = 0.32e-3
"""CPU seconds per batched-lbfgs step of one run besides its n × d work (the line search, the two-loop product,
Python): from the two runs of :data:`RESTART_COST`, 1.10 ms per run-step at n d = 2·10⁶ and 0.44 ms at 3.2·10⁵."""
LBFGS_STEP_COST = 0.39e-9
"""CPU seconds per sample × d × rank of one batched-lbfgs step of one run (the same two runs)."""


def lbfgs_step_seconds(n: int, d: int, rank: int) -> float:
    """CPU seconds (one thread) of one batched-lbfgs step of one run on ``n`` samples in dimension ``d``."""
    return LBFGS_STEP_OVERHEAD + LBFGS_STEP_COST * n * d * rank


def restart_seconds(problem: Problem, config: RestartConfig) -> tuple[float, float]:
    """CPU seconds (one thread) of one restart: (its whole step budget, the fraction of it a restart typically
    uses). The budget: ``steps`` × :func:`lbfgs_step_seconds`; the typical restart: :data:`RESTART_COST` ×
    (n d rank / 10⁶)^:data:`RESTART_EXPONENT`, at most the budget."""
    bound = config.steps * lbfgs_step_seconds(config.n, config.d, problem.rank)
    typical = RESTART_COST.seconds * (config.n * config.d * problem.rank / 1e6) ** RESTART_EXPONENT
    return bound, min(1.0, typical / bound)


def run_restarts(
    problem: Problem,
    config: RestartConfig,
    progress: Callable[[int], None] | None = None,
    finished: Callable[[int], None] | None = None,
) -> RestartResult:
    """Train every (seed, restart) of ``config`` and measure it (module docstring). ``progress(k)`` after
    each chunk of ``k`` steps; ``finished(k)`` as ``k`` more runs stop training (any status)."""
    check_instance("config", config, RestartConfig, "dotattn.erm.restarts.RestartConfig")
    config.check(problem)
    t0 = time.perf_counter()
    dev, dt = resolve_device(config.device), DTYPES[config.dtype]
    d, L, r, n = config.d, problem.L, problem.rank, config.n
    seeds, R = config.seeds, len(config.starts)
    S = len(seeds)
    P = positional_embeddings(problem.G, d, dt, dev)
    G = P @ P.T
    Q_star = torch.stack([teacher_weights(d, problem.teacher_rank, s, dt, dev, config.teacher) for s in seeds])
    X = torch.empty(S, n, L, d, dtype=dt, device=dev)
    T, Cpz, Czz = (torch.empty(S, n, L, L, dtype=dt, device=dev) for _ in range(3))
    for k, s in enumerate(seeds):
        ds = make_dataset(problem, Q_star[k], P, n, s, STREAM_TRAIN)
        X[k], T[k], Cpz[k], Czz[k] = ds.X, ds.T, ds.Cpz, ds.Czz
        del ds
    Cxx, Cyx, cyy = sample_stats(T, G, Cpz, Czz)
    del T, Cpz, Czz
    pf = lambda M: M.permute(2, 3, 0, 1).contiguous()
    base_risk = _risk_function(X, pf(Cxx), pf(Cyx), cyy, [n], problem.ridge)
    Ppinv = torch.linalg.pinv(P)  # (d, L): Q − Ppinv P Q removes the span of the embeddings
    project = config.sector == "semantic"

    def to_sector(W: torch.Tensor) -> torch.Tensor:  # W (..., r, d) = Qᵀ
        return W - (W @ Ppinv) @ P if project else W

    risk: Callable[[torch.Tensor], torch.Tensor] = base_risk
    if project:

        def projected_risk(W: torch.Tensor) -> torch.Tensor:
            Wp = to_sector(W)
            return base_risk(Wp) + 0.5 * problem.ridge * (W.square().sum((-1, -2)) - Wp.square().sum((-1, -2)))

        risk = projected_risk

    Q0 = torch.stack([_starts(config, problem, Q_star[k], P, s) for k, s in enumerate(seeds)])  # (S, R, d, r)
    W0 = to_sector(Q0.transpose(-1, -2))[:, None].contiguous()  # (S, 1, R, r, d)
    out = train(
        risk,
        W0,
        optimizer="batched-lbfgs",
        steps=config.steps,
        lr=config.lr,
        tol=config.tol,
        ridge=problem.ridge,
        progress=progress,
        finished=None if finished is None else (lambda mask: finished(int(mask.sum()))),
    )
    with torch.no_grad():
        W = to_sector(out.Q[:, 0])  # (S, R, r, d)
        Q = W.transpose(-1, -2)  # (S, R, d, r)
        theta_s2 = torch.einsum("skdr,sdt->skrt", Q, Q_star) / d
        if r == 1:  # fix Q -> -Q as train-erm does
            flat = theta_s2.flatten(-2)
            sign = torch.sign(flat.gather(-1, flat.abs().argmax(-1, keepdim=True)))[..., 0]
            sign = torch.where(sign == 0, torch.ones_like(sign), sign)
            Q, W = Q * sign[..., None, None], W * sign[..., None, None]
            theta_s2 = theta_s2 * sign[..., None, None]
        q_s2 = Q.transpose(-1, -2) @ Q / d
        mu = torch.einsum("ld,skdr->sklr", P, Q) / math.sqrt(d)
        rho_s2 = Q_star.transpose(-1, -2) @ Q_star / d  # (S, r_t, r_t)
        nu = torch.einsum("sdt,ld->stl", Q_star, P) / math.sqrt(d)  # (S, r_t, L)
        loss = out.loss[:, 0]
        train_loss = loss / d
        train_error = (loss - 0.5 * problem.ridge * Q.square().sum((-1, -2))) / n
        del X, Cxx, Cyx, cyy
        tsum = torch.zeros(S, R, dtype=torch.float64, device=dev)
        tsq = torch.zeros_like(tsum)
        for Xt, _, _, _, (Cxxt, Cyxt, cyyt) in test_batches(
            problem, Q_star, P, seeds, config.test_samples, config.test_batch
        ):
            err = _sample_errors(W, Xt, pf(Cxxt), pf(Cyxt), cyyt).to(torch.float64) / (2 * d)
            tsum += err.sum(-1)
            tsq += err.square().sum(-1)
        nt = config.test_samples
        test_err = tsum / nt
        test_se = ((tsq / nt - test_err.square()).clamp_min(0) / (nt - 1)).sqrt()

    if out.stationarity is None:  # cannot happen: train measures it whenever it is given the ridge
        raise ValueError("erm-restarts: the training outcome has no stationarity (no ridge given)")
    arr = {
        k: v.detach().cpu().to(torch.float64).numpy()
        for k, v in dict(
            train_loss=train_loss,
            train_error=train_error,
            test_err=test_err,
            test_se=test_se,
            theta=theta_s2,
            q=q_s2,
            mu=mu,
            rho=rho_s2,
            nu=nu,
            stat=out.stationarity[:, 0],
        ).items()
    }
    status = out.status[:, 0].cpu().numpy()
    steps = out.steps[:, 0].cpu().numpy()
    s2 = problem.sigma**2
    runs = []
    for k, s in enumerate(seeds):
        for j, kind in enumerate(config.starts):
            th = arr["theta"][k, j]
            runs.append(
                RestartRecord(
                    d=d,
                    alpha=config.alpha,
                    n=n,
                    seed=int(s),
                    restart=j,
                    start=kind,
                    status=from_training(STATUS[int(status[k, j])]),
                    steps=int(steps[k, j]),
                    stationarity=float(arr["stat"][k, j]),
                    train_loss=float(arr["train_loss"][k, j]),
                    train_error=float(arr["train_error"][k, j]),
                    test_error=float(arr["test_err"][k, j]),
                    test_error_se=float(arr["test_se"][k, j]),
                    branch=run_branch(th, arr["mu"][k, j]),
                    mu=readonly_array(arr["mu"][k, j]),
                    theta=readonly_array(s2 * th),
                    q=readonly_array(s2 * arr["q"][k, j]),
                    teacher_rho=readonly_array(s2 * arr["rho"][k]),
                    teacher_nu=readonly_array(arr["nu"][k]),
                )
            )
    pairs = _pairs(runs, Q.cpu(), seeds, config)
    return RestartResult(
        problem=problem,
        config=config,
        runs=tuple(runs),
        pairs=tuple(pairs),
        device=str(dev),
        seconds=time.perf_counter() - t0,
        threads=torch.get_num_threads(),
    )


def _pairs(
    runs: Sequence[RestartRecord], Q: torch.Tensor, seeds: Sequence[int], config: RestartConfig
) -> list[PairRecord]:
    """Pairs of converged runs of one seed on one branch (``Q`` of shape ``(S, R, d, r)``)."""
    out = []
    R = len(config.starts)
    for k, s in enumerate(seeds):
        mine = runs[k * R : (k + 1) * R]
        ia, ib = np.triu_indices(R, 1)
        keep = [
            (a, b)
            for a, b in zip(ia.tolist(), ib.tolist(), strict=True)
            if mine[a].status == CONVERGED and mine[b].status == CONVERGED and mine[a].branch == mine[b].branch
        ]
        if not keep:
            continue
        a_idx = torch.tensor([a for a, _ in keep])
        b_idx = torch.tensor([b for _, b in keep])
        D, ov = pair_distance(Q[k, a_idx], Q[k, b_idx])
        for (a, b), dab, o in zip(keep, D.tolist(), ov.tolist(), strict=True):
            out.append(
                PairRecord(
                    d=config.d,
                    alpha=config.alpha,
                    seed=int(s),
                    a=int(a),
                    b=int(b),
                    branch=mine[a].branch,
                    distance=float(dab),
                    overlap=float(o),
                    train_loss_diff=abs(mine[a].train_loss - mine[b].train_loss),
                )
            )
    return out
