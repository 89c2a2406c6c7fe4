"""Finite-size empirical risk minimisation: many runs (alpha × init × seed) in one tensor program.

:func:`run_erm` draws, per seed, a teacher ``Q*``, ``n_max = round(max α · d)`` training samples
(a run at ``α`` uses the first ``round(α d)``; the others are masked out) and a fresh test set;
it trains all runs together (:func:`dotattn.core.training.train`, weight rows of shape
``(seeds, alphas, inits, rows, d)``: ``Qᵀ``, and ``Kᵀ`` and the value's rows for the variants,
:class:`dotattn.erm.config.WeightLayout`, ``docs/variants.md``), then measures every run (see :data:`RUN_COLUMNS`) and
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dotattn.core.progress import Cost
from dotattn.core.status import from_training
from dotattn.core.training import STATUS, train
from dotattn.core.validation import ParameterError, check_instance, readonly_array
from dotattn.erm.config import (
    DEVICE_CHOICES,
    INFORMED,
    INIT_CHOICES,
    INIT_KINDS,
    ErmConfig,
    WeightLayout,
    check_device_name,
)
from dotattn.erm.data import (
    STREAM_INIT,
    STREAM_TEST,
    STREAM_TRAIN,
    generator,
    make_dataset,
    positional_embeddings,
    teacher_weights,
)
from dotattn.erm.models import (
    attention_matrix_pf,
    fit_linear_baseline,
    quadratic_residual_pf,
    residual_sq_norm,
    sample_stats,
    value_residual_pf,
)
from dotattn.erm.records import (
    BRANCH_M,
    BRANCH_THETA,
    COLUMN_DOCS,
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    RunRecord,
    SummaryRecord,
    run_branch,
    summarise_group,
)
from dotattn.positional_semantic.problem import Problem

__all__ = [
    "INIT_KINDS",
    "INIT_CHOICES",
    "DTYPES",
    "DEVICE_CHOICES",
    "BRANCH_THETA",
    "BRANCH_M",
    "RUN_COLUMNS",
    "SUMMARY_COLUMNS",
    "COLUMN_DOCS",
    "ErmConfig",
    "RunRecord",
    "ErmResult",
    "resolve_device",
    "initial_weights",
    "initial_student",
    "value_scale",
    "run_erm",
    "run_config",
]

DTYPES: dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32}


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ParameterError for unknown or unavailable devices."""
    key = check_device_name(name)
    if key == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if key == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ParameterError(
            f"device must be auto or cpu here: {name!r} requested but torch.cuda.is_available() is False"
        )
    if ":" in key and int(key[5:]) >= torch.cuda.device_count():
        raise ParameterError(f"device index must be < {torch.cuda.device_count()}, got {name!r}")
    return torch.device(key)


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

    def select(
        self, alpha: float | None = None, init: str | None = None, seed: int | None = None
    ) -> tuple[RunRecord, ...]:
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
        """One row per run (columns :data:`RUN_COLUMNS`)."""
        return [r.to_row() for r in self.runs]

    def summary_rows(self) -> list[SummaryRecord]:
        """Mean and std over seeds per (alpha, init), plus 'selected' rows."""
        rows = []
        groups = list(self.config.inits) + (["selected"] if any(k in INFORMED for k in self.config.inits) else [])
        for alpha, n in zip(self.config.alphas, self.config.ns, strict=True):
            for init in groups:
                runs = self.select(alpha=alpha, init=init)
                if runs:
                    rows.append(_summarise(runs, alpha, n, self.config.d, init))
        return rows

    def parameters(self) -> dict[str, Any]:
        """Problem and configuration, JSON-ready (for provenance)."""
        return {
            "problem": self.problem.to_dict(),
            "erm": self.config.to_dict(),
            "resolved_device": self.device,
            "torch_threads": self.threads,
            "torch_version": torch.__version__,
        }


_summarise = summarise_group  # the summary of one (alpha, init) group, torch-free in dotattn.erm.records


# ----------------------------------------------------------------------------------------------
def initial_weights(
    kind: str,
    Q_star: torch.Tensor,
    P: torch.Tensor,
    rank: int,
    seed: int,
    positional_m0: float = 0.3,
    random_scale: float = 0.1,
    part: int = 0,
) -> torch.Tensor:
    """Initial ``Q`` (shape ``(d, r)``) of one kind for teacher ``Q*`` ``(d, r_t)`` and embeddings ``P`` ``(L, d)``.

    ``part`` selects the noise stream: 0 for ``Q`` (the streams of tied runs), 1 for the untied
    student's ``K`` (the same informed direction, its own noise)."""
    d, rt = Q_star.shape
    dt, dev = Q_star.dtype, Q_star.device
    stream = 1 + INIT_KINDS.index(kind) + part * len(INIT_KINDS)
    noise = random_scale * torch.randn(d, rank, generator=generator(seed, STREAM_INIT, stream), dtype=torch.float64).to(
        dtype=dt, device=dev
    )
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


def initial_student(
    kind: str,
    Q_star: torch.Tensor,
    P: torch.Tensor,
    layout: WeightLayout,
    seed: int,
    positional_m0: float = 0.3,
    random_scale: float = 0.1,
) -> torch.Tensor:
    """Initial weight rows ``W`` (shape ``(layout.rows, d)``, :class:`dotattn.erm.config.WeightLayout`) of one kind.

    ``Qᵀ`` from :func:`initial_weights`; the untied student's ``Kᵀ`` likewise (same informed direction:
    ``K = Q*`` columns on the semantic start, along the positional direction with the same ``μ`` on the
    positional one; its own noise); the value correction ``U, Wᵥ`` ``random_scale · N(0, 1)`` entries
    (``U = Wᵥ = 0`` is a stationary point the correction would never leave); ``v = 1``.
    """
    r, d = layout.rank, Q_star.shape[0]
    rows = [initial_weights(kind, Q_star, P, r, seed, positional_m0, random_scale).T]
    if layout.untied:
        rows.append(initial_weights(kind, Q_star, P, r, seed, positional_m0, random_scale, part=1).T)
    if layout.value_rank:
        g = generator(seed, STREAM_INIT, 1 + INIT_KINDS.index(kind) + 2 * len(INIT_KINDS))
        rows.append(
            (random_scale * torch.randn(2 * layout.value_rank, d, generator=g, dtype=torch.float64)).to(
                dtype=Q_star.dtype, device=Q_star.device
            )
        )
    if layout.has_scale:
        rows.append(Q_star.new_zeros(1, d))
    return torch.cat(rows, dim=0)


def value_scale(W: torch.Tensor, layout: WeightLayout) -> torch.Tensor:
    """The value's scale ``v = 1 + s/√d`` of weight rows ``W (..., rows, d)``, shape ``W.shape[:-2]`` (ones
    without a value option)."""
    if not layout.has_scale:
        return torch.ones_like(W[..., 0, 0])
    return 1.0 + W[..., -1, 0] / math.sqrt(W.shape[-1])


def _sample_errors(
    W: torch.Tensor,
    X: torch.Tensor,
    Cxx: torch.Tensor,
    Cyx: torch.Tensor,
    cyy: torch.Tensor,
    layout: WeightLayout | None = None,
    T: torch.Tensor | None = None,
    P: torch.Tensor | None = None,
) -> torch.Tensor:
    """``‖ŷ − y‖²_F`` of every run on every sample of its seed.

    ``W (S, R, rows, d)`` holds the weight rows of ``R`` runs per seed (``layout``; default: tied ``Qᵀ``
    only); ``X (S, n, L, d)``; ``Cxx, Cyx (L, L, S, n)`` and ``cyy (S, n)`` (positions-first,
    :func:`dotattn.erm.models.quadratic_residual_pf`); ``T (L, L, S, n)`` and ``P (L, d)`` are needed by
    the low-rank value only. Returns ``(S, R, n)``. One matmul per seed computes the fields of all its runs.
    """
    S, R, rows, d = W.shape
    layout = layout or WeightLayout(rank=rows)
    f = layout.field_rows
    n, L = X.shape[1], X.shape[2]
    hT = torch.bmm(W[:, :, :f].reshape(S, R * f, d), X.reshape(S, n * L, d).transpose(1, 2)) / math.sqrt(d)
    h = hT.reshape(S, R, f, n, L).permute(4, 2, 0, 1, 3).contiguous()  # (L, f, S, R, n)
    r = layout.rank
    att = attention_matrix_pf(h[:, :r], h[:, layout.key_rows] if layout.untied else None)  # (L, L, S, R, n)
    if not layout.has_scale:
        return quadratic_residual_pf(att, Cxx[:, :, :, None], Cyx[:, :, :, None], cyy[:, None])
    v = value_scale(W, layout)[..., None]  # (S, R, 1)
    err = quadratic_residual_pf(v * att, Cxx[:, :, :, None], Cyx[:, :, :, None], cyy[:, None])
    if layout.value_rank:
        if T is None or P is None:
            raise ValueError("the low-rank value needs the token statistics T and the positional embeddings P")
        Wv = W[:, :, layout.w_rows]  # (S, R, k, d)
        pi = torch.einsum("ld,srkd->lksr", P, Wv)[..., None] / math.sqrt(d)  # (L, k, S, R, 1)
        M = torch.einsum("srid,srjd->ijsr", Wv, Wv)[..., None] / d  # (k, k, S, R, 1)
        err = err + value_residual_pf(att, h[:, layout.u_rows], h[:, layout.w_rows], pi, M, T[:, :, :, None], v)
    return err


def test_batches(
    problem: Problem, Q_star: torch.Tensor, P: torch.Tensor, seeds: Sequence[int], test_samples: int, test_batch: int
) -> Iterator[tuple]:
    """Fresh test samples of every seed (teacher ``Q_star[k]`` for ``seeds[k]``), ``test_batch`` at a time:
    yields ``(X, T, Cpz, Czz, (Cxx, Cyx, cyy))``, each with a leading seed axis (``(S, nb, ...)``)."""
    G = P @ P.T
    for start in range(0, test_samples, test_batch):
        nb = min(test_batch, test_samples - start)
        parts = [make_dataset(problem, Q_star[k], P, nb, s, STREAM_TEST, start) for k, s in enumerate(seeds)]
        Xt, Tt, Cpzt, Czzt = (torch.stack([getattr(p, f) for p in parts]) for f in ("X", "T", "Cpz", "Czz"))
        del parts
        yield Xt, Tt, Cpzt, Czzt, sample_stats(Tt, G, Cpzt, Czzt)


def _risk_function(
    X: torch.Tensor,
    Cxx: torch.Tensor,
    Cyx: torch.Tensor,
    cyy: torch.Tensor,
    ns: Sequence[int],
    ridge: float,
    layout: WeightLayout | None = None,
    T: torch.Tensor | None = None,
    P: torch.Tensor | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``W (S, A, I, rows, d) -> R (S, A, I)``: run ``(s, a, i)`` sees the first ``ns[a]`` samples of seed ``s``.

    ``ns`` is increasing. Samples ``ns[j-1] .. ns[j]-1`` are used by the alphas ``a >= j`` only,
    so the fields are computed block by block for those runs: the work is ``Σ_a n_a``, not
    ``A · max n`` (a loop over the few alpha blocks, never over runs). ``layout``, ``T`` (positions-first)
    and ``P``: see :func:`_sample_errors`.
    """
    bounds = [0, *ns]
    blocks = [(j, lo, hi) for j, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)) if hi > lo]

    def risk(W: torch.Tensor) -> torch.Tensor:
        S, A, I, r, d = W.shape
        data = W.new_zeros(S, A, I)
        for j, lo, hi in blocks:
            err = _sample_errors(
                W[:, j:].reshape(S, (A - j) * I, r, d),
                X[:, lo:hi],
                Cxx[..., lo:hi],
                Cyx[..., lo:hi],
                cyy[:, lo:hi],
                layout,
                None if T is None else T[..., lo:hi],
                P,
            )  # (S, (A-j) I, n_block)
            data = data + torch.nn.functional.pad(err.sum(-1).reshape(S, A - j, I), (0, 0, j, 0))
        return data / (2 * d) + 0.5 * ridge * W.square().sum((-1, -2))

    return risk


def _variant_fields(arr: dict[str, np.ndarray], idx: tuple[int, int, int], sig2: float) -> dict[str, Any]:
    """The :class:`RunRecord` fields of the untied student and the value option present in ``arr`` (SPEC
    conventions: ``theta_k = σ² KᵀQ*/d``, ``q_kk = σ² KᵀK/d``, ``q_qk = σ² QᵀK/d``, ``mu_k[l] = Kᵀp_l/√d``)."""
    out: dict[str, Any] = {}
    for key, scale in (("theta_k", sig2), ("q_kk", sig2), ("q_qk", sig2), ("mu_k", 1.0)):
        if key in arr:
            out[key] = readonly_array(scale * arr[key][idx])
    for key in ("value_scale", "value_correction"):
        if key in arr:
            out[key] = float(arr[key][idx])
    return out


def run_erm(
    problem: Problem,
    d: int,
    alphas: float | Sequence[float],
    inits: str | Sequence[str] = "both",
    seeds: int | Sequence[int] = 4,
    *,
    optimizer: str = "gd",
    steps: int = 5000,
    lr: float | None = None,
    tol: float | None = None,
    test_samples: int = 10_000,
    dtype: str = "float64",
    device: str = "auto",
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> ErmResult:
    """Train and measure every (alpha, init, seed) run at dimension ``d``; see :class:`ErmConfig`.

    ``options`` are the remaining :class:`ErmConfig` fields (``positional_m0``, ``random_scale``,
    ``baseline_ridge``, ``test_batch``). ``progress(k)`` is called after each chunk of ``k`` steps.
    All validation happens before any computation (ParameterError).
    """
    config = ErmConfig(
        d=d,
        alphas=alphas,
        inits=inits,
        seeds=seeds,
        optimizer=optimizer,
        steps=steps,
        lr=lr,
        tol=tol,
        test_samples=test_samples,
        dtype=dtype,
        device=device,
        **options,
    )
    return run_config(problem, config, progress)


def run_config(
    problem: Problem,
    config: ErmConfig,
    progress: Callable[[int], None] | None = None,
    finished: Callable[[np.ndarray], None] | None = None,
) -> ErmResult:
    """:func:`run_erm` for a ready :class:`ErmConfig`.

    ``finished(mask)``: called as runs stop training (any status), with a boolean array of shape
    ``(seeds, alphas, inits)`` (the config's orders) marking the runs that stopped since the last
    call; every run is reported once, before the measurements (:func:`dotattn.core.training.train`).
    """
    check_instance("config", config, ErmConfig, "dotattn.erm.ErmConfig")
    config.check(problem)
    t0 = time.perf_counter()
    dev, dt = resolve_device(config.device), DTYPES[config.dtype]
    d, L, r = config.d, problem.L, problem.rank
    seeds, alphas, inits, ns = config.seeds, config.alphas, config.inits, config.ns
    S, A, I, N = len(seeds), len(alphas), len(inits), max(ns)

    P = positional_embeddings(problem.G, d, dt, dev)
    G = P @ P.T
    Q_star = torch.stack(
        [teacher_weights(d, problem.teacher_rank, s, dt, dev, config.teacher) for s in seeds]
    )  # (S, d, r_t)
    X = torch.empty(S, N, L, d, dtype=dt, device=dev)
    T, Cpz, Czz = (torch.empty(S, N, L, L, dtype=dt, device=dev) for _ in range(3))
    for k, s in enumerate(seeds):
        ds = make_dataset(problem, Q_star[k], P, N, s, STREAM_TRAIN, config.train_offset)
        X[k], T[k], Cpz[k], Czz[k] = ds.X, ds.T, ds.Cpz, ds.Czz
        del ds
    Cxx, Cyx, cyy = sample_stats(T, G, Cpz, Czz)
    pf = lambda M: M.permute(2, 3, 0, 1).contiguous()  # (S, N, L, L) -> positions-first (L, L, S, N)
    layout = config.layout(problem)
    risk = _risk_function(X, pf(Cxx), pf(Cyx), cyy, ns, problem.ridge, layout, pf(T) if layout.value_rank else None, P)

    rows = layout.rows
    W0 = torch.stack(
        [
            torch.stack(
                [
                    initial_student(kind, Q_star[k], P, layout, s, config.positional_m0, config.random_scale)
                    for kind in inits
                ]
            )
            for k, s in enumerate(seeds)
        ]
    )  # (S, I, rows, d)
    W0 = W0[:, None].expand(S, A, I, rows, d).contiguous()
    lr, tol = config.lr, config.tol
    if lr is None or tol is None:  # cannot happen: ErmConfig sets the optimiser's defaults for None
        raise ValueError(f"ErmConfig: lr and tol must be set, got lr = {lr!r}, tol = {tol!r}")
    out = train(
        risk,
        W0,
        optimizer=config.optimizer,
        steps=config.steps,
        lr=lr,
        tol=tol,
        ridge=problem.ridge,
        progress=progress,
        finished=None if finished is None else (lambda mask: finished(mask.cpu().numpy())),
    )

    with torch.no_grad():
        Wt = out.Q  # (S, A, I, rows, d)
        Q = Wt[..., :r, :].transpose(-1, -2)  # (S, A, I, d, r)
        K = Wt[..., layout.key_rows, :].transpose(-1, -2)
        theta_s2 = torch.einsum("saidr,sdt->sairt", Q, Q_star) / d  # (S, A, I, r, r_t)
        if r == 1:  # fix the symmetry Q -> -Q (untied: (Q, K) -> (−Q, −K)); the value does not change
            flat = theta_s2.flatten(-2)
            sign = torch.sign(flat.gather(-1, flat.abs().argmax(-1, keepdim=True)))[..., 0]
            sign = torch.where(sign == 0, torch.ones_like(sign), sign)
            Q, K = Q * sign[..., None, None], K * sign[..., None, None]
            theta_s2 = theta_s2 * sign[..., None, None]
        q_s2 = Q.transpose(-1, -2) @ Q / d  # (S, A, I, r, r)
        mu = torch.einsum("ld,saidr->sailr", P, Q) / math.sqrt(d)  # (S, A, I, L, r)
        extra: dict[str, torch.Tensor] = {}
        if layout.untied:
            extra.update(
                theta_k=torch.einsum("saidr,sdt->sairt", K, Q_star) / d,
                q_kk=K.transpose(-1, -2) @ K / d,
                q_qk=Q.transpose(-1, -2) @ K / d,
                mu_k=torch.einsum("ld,saidr->sailr", P, K) / math.sqrt(d),
            )
        if layout.has_scale:
            extra["value_scale"] = value_scale(Wt, layout)
        if layout.value_rank:
            U, Wv = Wt[..., layout.u_rows, :], Wt[..., layout.w_rows, :]  # (S, A, I, k, d)
            # ‖U Wᵥᵀ‖_F² = Tr(UᵀU WᵥᵀWᵥ)
            extra["value_correction"] = ((U @ U.transpose(-1, -2)) * (Wv @ Wv.transpose(-1, -2))).sum(
                (-1, -2)
            ).sqrt() / d
        n_t = torch.tensor(ns, device=dev)
        mask = (torch.arange(N, device=dev)[None, :] < n_t[:, None]).to(dt)  # (A, N)
        train_loss = out.loss / d
        train_error = (out.loss - 0.5 * problem.ridge * Wt.square().sum((-1, -2))) / n_t.to(dt)[None, :, None]

        # linear baseline per (seed, alpha), fitted on the same training prefixes
        B = fit_linear_baseline(
            torch.einsum("an,snij->saij", mask, Cyx), torch.einsum("an,snij->saij", mask, Cxx), d, config.baseline_ridge
        )  # (S, A, L, L)
        lin_err = residual_sq_norm(B[:, :, None], T[:, None], G, Cpz[:, None], Czz[:, None])  # (S, A, N)
        lin_train = (lin_err * mask).sum(-1) / (2 * d) / n_t.to(dt)
        del X, T, Cpz, Czz, Cxx, Cyx, cyy

        test_sum = torch.zeros(S, A * I, dtype=torch.float64, device=dev)
        test_sq = torch.zeros_like(test_sum)
        lin_test = torch.zeros(S, A, dtype=torch.float64, device=dev)
        W = Wt.reshape(S, A * I, rows, d)
        for Xt, Tt, Cpzt, Czzt, (Cxxt, Cyxt, cyyt) in test_batches(
            problem, Q_star, P, seeds, config.test_samples, config.test_batch
        ):
            err = _sample_errors(W, Xt, pf(Cxxt), pf(Cyxt), cyyt, layout, pf(Tt) if layout.value_rank else None, P).to(
                torch.float64
            ) / (2 * d)  # (S, A I, nb)
            test_sum += err.sum(-1)
            test_sq += err.square().sum(-1)
            lin_test += (
                residual_sq_norm(B[:, :, None], Tt[:, None], G, Cpzt[:, None], Czzt[:, None]).to(torch.float64)
                / (2 * d)
            ).sum(-1)
        nt = config.test_samples
        test_err = (test_sum / nt).reshape(S, A, I)
        test_se = ((test_sq / nt - (test_sum / nt).square()).clamp_min(0) / max(nt - 1, 1)).sqrt().reshape(S, A, I)
        lin_test = lin_test / nt

        # selection among informed inits: lower training loss per (seed, alpha)
        informed = torch.tensor([k in INFORMED for k in inits], device=dev)
        masked = torch.where(informed, train_loss.nan_to_num(nan=float("inf")), float("inf"))
        chosen = masked.argmin(-1)  # (S, A)
        selected = (torch.arange(I, device=dev) == chosen[..., None]) & informed

    arr = {
        k: v.detach().cpu().to(torch.float64).numpy()
        for k, v in dict(
            train_loss=train_loss,
            train_error=train_error,
            test_err=test_err,
            test_se=test_se,
            lin_train=lin_train,
            lin_test=lin_test,
            theta_s2=theta_s2,
            q_s2=q_s2,
            mu=mu,
            rel=out.rel_change,
            grad=out.grad_norm,
            **extra,
        ).items()
    }
    status = out.status.cpu().numpy()
    steps_done = out.steps.cpu().numpy()
    sel = selected.cpu().numpy()
    sig2 = problem.sigma**2
    runs = []
    for a, (alpha, n) in enumerate(zip(alphas, ns, strict=True)):
        for i, kind in enumerate(inits):
            for k, s in enumerate(seeds):
                th, qq, mu_k = arr["theta_s2"][k, a, i], arr["q_s2"][k, a, i], arr["mu"][k, a, i]
                runs.append(
                    RunRecord(
                        alpha=float(alpha),
                        n=int(n),
                        init=kind,
                        seed=int(s),
                        status=from_training(STATUS[int(status[k, a, i])]),
                        steps=int(steps_done[k, a, i]),
                        rel_change=float(arr["rel"][k, a, i]),
                        grad_norm=float(arr["grad"][k, a, i]),
                        train_loss=float(arr["train_loss"][k, a, i]),
                        train_error=float(arr["train_error"][k, a, i]),
                        test_error=float(arr["test_err"][k, a, i]),
                        test_error_se=float(arr["test_se"][k, a, i]),
                        linear_train_error=float(arr["lin_train"][k, a]),
                        linear_test_error=float(arr["lin_test"][k, a]),
                        mu=readonly_array(mu_k),
                        theta=readonly_array(sig2 * th),
                        q=readonly_array(sig2 * qq),
                        theta_over_sigma2=readonly_array(th),
                        q_over_sigma2=readonly_array(qq),
                        branch=run_branch(th, mu_k),
                        selected=bool(sel[k, a, i]),
                        d=d,
                        **_variant_fields(arr, (k, a, i), sig2),
                    )
                )
    return ErmResult(
        problem=problem,
        config=config,
        runs=tuple(runs),
        device=str(dev),
        seconds=time.perf_counter() - t0,
        threads=torch.get_num_threads(),
    )


CACHE_FORMAT = 1
"""Version of a cached train-erm unit (part of its key)."""


def config_units(config: ErmConfig) -> list[ErmConfig]:
    """The units of work :func:`run_config_cached` runs and caches one at a time: one per seed (every α and
    init of that seed in one batch; the runs are independent, so the numbers are those of the whole batch),
    or the whole configuration for ``lbfgs``, which optimises the sum of all the runs' risks as one problem."""
    from dataclasses import replace

    if config.optimizer == "lbfgs" or len(config.seeds) == 1:
        return [config]
    return [replace(config, seeds=(s,)) for s in config.seeds]


def _unit_key(problem: Problem, unit: ErmConfig) -> dict[str, Any]:
    return {"format": CACHE_FORMAT, "problem": problem.to_dict(), "erm": unit.to_dict()}


def _unit_file(cache_dir: Any, unit: ErmConfig) -> Any:
    from pathlib import Path

    seeds = unit.seeds
    name = f"seed_{seeds[0]}.json" if len(seeds) == 1 else f"seeds_{seeds[0]}-{seeds[-1]}_{len(seeds)}.json"
    return Path(cache_dir) / name


def cached_units(problem: Problem, config: ErmConfig, cache_dir: Any) -> int:
    """How many of :func:`config_units` are cached in ``cache_dir`` for these settings."""
    from dotattn.core.io import read_cache_unit

    if cache_dir is None:
        return 0
    return sum(
        read_cache_unit(_unit_file(cache_dir, u), _unit_key(problem, u)) is not None for u in config_units(config)
    )


def run_config_cached(
    problem: Problem,
    config: ErmConfig,
    cache_dir: Any = None,
    on_unit: Callable[[bool], None] | None = None,
) -> ErmResult:
    """:func:`run_config` one unit at a time (:func:`config_units`), each finished unit written at once to
    ``cache_dir`` (``seed_<s>.json``, atomic, checksummed) and taken from there on a later call with the same
    problem and configuration, so an interrupted run keeps its finished seeds and a rerun continues.
    ``on_unit(cached)`` after each unit. The runs are returned in :class:`ErmResult`'s order; ``seconds``
    counts this call only."""
    from dotattn.core.io import read_cache_unit, write_cache_unit

    t0 = time.perf_counter()
    runs: list[RunRecord] = []
    device, threads = str(resolve_device(config.device)), torch.get_num_threads()
    for unit in config_units(config):
        key = _unit_key(problem, unit)
        path = None if cache_dir is None else _unit_file(cache_dir, unit)
        hit = read_cache_unit(path, key)
        if hit is not None:
            runs += [RunRecord.from_row(r) for r in hit["runs"]]
        else:
            res = run_config(problem, unit)
            device = res.device
            if path is not None:  # the folder only now: an interrupted first unit leaves no empty cache folder
                path.parent.mkdir(parents=True, exist_ok=True)
                write_cache_unit(path, key, runs=res.run_rows(), device=res.device, seconds=res.seconds)
            runs += list(res.runs)
        if on_unit is not None:
            on_unit(hit is not None)
    a_at = {a: i for i, a in enumerate(config.alphas)}
    i_at = {k: i for i, k in enumerate(config.inits)}
    s_at = {s: i for i, s in enumerate(config.seeds)}
    runs.sort(key=lambda r: (a_at[r.alpha], i_at[r.init], s_at[r.seed]))
    return ErmResult(problem, config, tuple(runs), device, time.perf_counter() - t0, threads=threads)


ERM_COST = Cost(0.48e-9, 'benchmarks/README.md "Start-line estimates"')
"""CPU seconds (one thread) per sample × d × gradient step of one run of the toy model (L = 2, r = 1), besides
:data:`ERM_STEP_OVERHEAD` and :data:`ERM_TEST_COST`: fitted to three runs in one process (``--threads 1``, nice 5,
load average 4-5 on 2 cores): d = 1000, 8 α (n = 250..2000), both inits, one seed, 300 and 600 gd steps (3.93 and
6.81 CPU-s) and d = 400, 4 α, both inits, 2 seeds, 300 steps (1.16 CPU-s). The README example (d = 1000, 4 seeds,
5000 steps) then comes to 196 CPU-s, against 199 s measured on one thread on a quiet machine. ``typical`` is 1:
a seed's batch stops only when all its runs have stopped, and every seed of the committed
``results/erm/omega0.3_d1000`` and ``omega0.3_d1000_lr1.5`` studies ran its whole 5000-step budget."""
ERM_STEP_OVERHEAD = 1.0e-3
"""CPU seconds per gradient step of one batch besides the per-sample work (Python and autograd): from the same
three runs."""
ERM_TEST_COST = 6.5e-9
"""CPU seconds per test sample × d × run of a batch, once (the test and linear-baseline errors): the 1.04 CPU-s
the d = 1000 runs above took besides their steps (10,000 test samples, 16 runs)."""


def erm_unit_seconds(problem: Problem, unit: ErmConfig) -> float:
    """Rough CPU seconds (one thread) of one unit of :func:`config_units` with its whole step budget: every run's
    samples × d × steps at :data:`ERM_COST`, scaled by L/2 and by the student's weight rows (the toy model has
    L = 2 and one row), plus :data:`ERM_STEP_OVERHEAD` per step and :data:`ERM_TEST_COST` per test sample × d ×
    run. A unit stops before its budget only when all its runs have converged (see :data:`ERM_COST`)."""
    rows = unit.layout(problem).rows
    runs = len(unit.alphas) * len(unit.inits) * len(unit.seeds)
    work = sum(unit.ns) * unit.d * unit.steps * len(unit.inits) * len(unit.seeds) * (problem.L / 2) * rows
    test = unit.test_samples * unit.d * runs * (problem.L / 2) * ERM_TEST_COST
    return work * ERM_COST.seconds + unit.steps * ERM_STEP_OVERHEAD + test
