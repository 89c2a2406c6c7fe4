"""Gradient descent on the tied AIM student, all initialisations in one tensor program (torch; the ``erm``
extra), and the averaged estimator.

The student has the teacher's form, S(W) = W Wᵀ/√(r d) with W ∈ ℝ^{d×r}, and is trained full batch on
the squared loss of the outputs, D(W) = (1/(2n)) Σ_μ ‖softmax_β(h^μ(S(W))) − y^μ‖²_F (no regulariser),
by Adam (the published protocol: lr 0.1, 1000 steps) or plain gradient descent, from ``inits`` random
initialisations W ~ N(0, 1) on the same data. The K = ``inits`` weight matrices are one tensor
(K, d, r) and the optimiser steps on Σ_k D(W_k): the runs are independent (the gradient of the sum in W_k
is ∇D(W_k), and Adam and gradient descent act elementwise), so this is K separate trainings in one graph,
with no Python loop over initialisations. A run has *converged* when its RMS gradient per weight
‖∇_W D‖_F/√(d r) is at most ``grad_tol`` at the end (stationarity), else it is ``not_converged``;
``diverged`` when its loss or weights are not finite.

The student index is h = ((XW)(XW)ᵀ − δ_ab ‖W‖²_F)/(√(r d) √d): a batch of K (nT × d)·(d × r) products per
evaluation, O(n T d r K) time and O(n T r K) memory; nothing of size n × d × d. float64 throughout (the
final gradients are ~1e-8 per weight, below float32 rounding of the loss).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dotattn.aim.model import AIMData
from dotattn.core.status import CONVERGED, DIVERGED, NOT_CONVERGED
from dotattn.core.validation import ParameterError, check_int, check_number

__all__ = ["GDConfig", "GDRun", "GDResult", "run_gd", "student_index", "gd_bytes", "GD_OPTIMIZERS"]

GD_OPTIMIZERS: tuple[str, ...] = ("adam", "gd")
_STREAM_INIT = 3


@dataclass(frozen=True)
class GDConfig:
    """Optimiser settings: ``optimizer`` (adam | gd), ``steps`` (budget), ``lr``, ``inits``
    (initialisations on the same data; their mean is the averaged estimator), ``grad_tol``: the RMS
    gradient per weight ‖∇_W D‖_F/√(d r) at or under which a run counts as converged (stationary)."""

    optimizer: str = "adam"
    steps: int = 1000
    lr: float = 0.1
    inits: int = 16
    grad_tol: float = 1e-7

    def __post_init__(self) -> None:
        if self.optimizer not in GD_OPTIMIZERS:
            raise ParameterError(f"optimizer must be one of {', '.join(GD_OPTIMIZERS)}, got {self.optimizer!r}")
        object.__setattr__(self, "steps", check_int("steps", self.steps, 1, 1_000_000))
        object.__setattr__(self, "lr", check_number("lr", self.lr, 0.0, True, 100.0, "in (0, 100]"))
        object.__setattr__(self, "inits", check_int("inits", self.inits, 1, 1000))
        object.__setattr__(self, "grad_tol", check_number("grad_tol", self.grad_tol, 0.0, True, 1.0, "in (0, 1]"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer,
            "steps": self.steps,
            "lr": self.lr,
            "inits": self.inits,
            "grad_tol": self.grad_tol,
        }


@dataclass(frozen=True)
class GDRun:
    """One initialisation: its error, final loss, RMS gradient per weight, steps, status, and its estimate S."""

    init: int
    mse: float
    loss: float
    grad_rms: float
    steps: int
    status: str


@dataclass(frozen=True, eq=False)
class GDResult:
    """All initialisations on one data set: the runs, their estimates S_k (K, d, d), the averaged
    estimator S̄ and its error, seconds (wall) and CPU seconds of the process."""

    runs: tuple[GDRun, ...]
    S_runs: np.ndarray
    mse_averaged: float
    S_averaged: np.ndarray
    seconds: float
    cpu_seconds: float
    device: str


def gd_bytes(n: int, T: int, d: int, r: int, inits: int) -> int:
    """Bytes the batched program holds: the weights and Adam's two moments (K d r each, ×4 with the
    gradient), and per evaluation the autograd tensors of size K n T r (XW, its gradient) and K n T² (h,
    softmax, residual; ×6), float64."""
    return 8 * (4 * inits * d * r + 3 * inits * n * T * r + 6 * inits * n * T * T)


def student_index(XW: torch.Tensor, sq: torch.Tensor, d: int) -> torch.Tensor:
    """h = ((XW)(XW)ᵀ − δ_ab ‖W‖²_F)/(√(r d) √d): XW (K, n, T, r), sq = ‖W_k‖²_F (K,) -> (K, n, T, T)."""
    r = XW.shape[-1]
    T = XW.shape[-2]
    h = XW @ XW.transpose(-1, -2)
    eye = torch.eye(T, dtype=h.dtype, device=h.device)
    return (h - sq[:, None, None, None] * eye) / (math.sqrt(r * d) * math.sqrt(d))


def run_gd(
    data: AIMData,
    config: GDConfig = GDConfig(),
    device: torch.device | str = "cpu",
    seed: int = 0,
    progress: Callable[[int, np.ndarray], None] | None = None,
) -> GDResult:
    """Train ``config.inits`` students from random W on ``data`` (softmax channel, the data's β), batched.

    ``progress(step, losses)`` every 100 steps. Initialisations: W_k ~ N(0, 1) from the stream
    (data seed, 3, ``seed``), drawn as one (K, d, r) array (the same numbers as K draws in a row)."""
    if data.channel != "softmax":
        raise ParameterError(f"gd trains a softmax student; channel must be softmax, got {data.channel!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    dev = torch.device(device)
    d, r, T, n, K, beta = data.d, data.r, data.T, data.n, config.inits, data.beta
    Xf = torch.as_tensor(data.X.reshape(n * T, d), dtype=torch.float64, device=dev)
    y = torch.as_tensor(data.y, dtype=torch.float64, device=dev)
    rng = np.random.default_rng(np.random.SeedSequence([int(data.seed), _STREAM_INIT, int(seed)]))
    W = torch.as_tensor(rng.standard_normal((K, d, r)), dtype=torch.float64, device=dev).requires_grad_(True)

    def losses(W: torch.Tensor) -> torch.Tensor:
        """D(W_k) for every k: (K,)."""
        XW = (Xf @ W).reshape(K, n, T, r)  # K products (nT × d)·(d × r), batched
        h = student_index(XW, (W * W).sum(dim=(1, 2)), d)
        return 0.5 * ((torch.softmax(beta * h, dim=-1) - y) ** 2).sum(dim=(1, 2, 3)) / n

    opt = torch.optim.Adam([W], lr=config.lr) if config.optimizer == "adam" else torch.optim.SGD([W], lr=config.lr)
    for step in range(config.steps):
        opt.zero_grad(set_to_none=True)
        L = losses(W)
        L.sum().backward()
        opt.step()
        if progress is not None and (step + 1) % 100 == 0:
            progress(step + 1, L.detach().cpu().numpy())
    opt.zero_grad(set_to_none=True)
    L = losses(W)
    L.sum().backward()
    loss = L.detach().cpu().numpy()
    if W.grad is None:  # cannot happen: the loss depends on W, which requires its gradient
        raise RuntimeError("gd: backward() gave no gradient of the loss with respect to W")
    grad_rms = (W.grad.reshape(K, -1).norm(dim=1) / math.sqrt(d * r)).cpu().numpy()
    Wn = W.detach().cpu().numpy()
    S_runs = Wn @ np.swapaxes(Wn, 1, 2) / math.sqrt(r * d)
    runs = []
    for k in range(K):
        finite = bool(np.isfinite(loss[k]) and np.all(np.isfinite(Wn[k])))
        status = DIVERGED if not finite else CONVERGED if grad_rms[k] <= config.grad_tol else NOT_CONVERGED
        runs.append(
            GDRun(
                init=k,
                mse=data.mse(S_runs[k]) if finite else math.nan,
                loss=float(loss[k]),
                grad_rms=float(grad_rms[k]),
                steps=config.steps,
                status=status,
            )
        )
    ok = [k for k, run in enumerate(runs) if run.status != DIVERGED]
    S_avg = S_runs[ok].mean(axis=0) if ok else np.full((d, d), np.nan)
    return GDResult(
        runs=tuple(runs),
        S_runs=S_runs,
        mse_averaged=data.mse(S_avg) if ok else math.nan,
        S_averaged=S_avg,
        seconds=time.perf_counter() - t0,
        cpu_seconds=time.process_time() - c0,
        device=str(dev),
    )
