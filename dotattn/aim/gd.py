"""Gradient descent on the tied AIM student (torch; the ``erm`` extra), and the averaged estimator.

The student has the teacher's form, S(W) = W Wᵀ/√(r d) with W ∈ ℝ^{d×r}, and is trained full batch
on the squared loss of the outputs, D(W) = (1/(2n)) Σ_μ ‖softmax_β(h^μ(S(W))) − y^μ‖²_F (no
regulariser), by the shared optimiser loop :func:`dotattn.core.training.train` (Adam, as the
published script, or plain gradient descent), from ``inits`` random initialisations W ~ N(0, 1) on
the same data. A run has *converged* when its RMS gradient per weight ‖∇_W D‖_F/√(d r) is at most
``grad_tol`` at the end (stationarity), else it is ``not_converged``. (torch's L-BFGS with a
strong-Wolfe line search stalls on this loss after one step, measured at d = 30: the loss and the
gradient stop changing at a gradient norm of 3e-2; so it is not offered.) Reported: the error (1/d)‖S(W) − S*‖²_F of every run, its final loss and gradient norm, and
the error of the *averaged* estimator S̄ = mean over initialisations of S(W).

The attention index of the student is computed as h = (XW)(XW)ᵀ/√(r d)/√d − δ_ab ‖W‖²_F/(√(r d) √d),
O(n T d r) per evaluation; nothing of size n × d × d.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from dotattn.aim.model import AIMData
from dotattn.core.training import train
from dotattn.core.validation import ParameterError, check_int, check_number
from dotattn.core.status import CONVERGED, DIVERGED, NOT_CONVERGED

__all__ = ["GDConfig", "GDRun", "GDResult", "run_gd", "student_index", "GD_OPTIMIZERS"]

GD_OPTIMIZERS: tuple[str, ...] = ("adam", "gd")
_STREAM_INIT = 3


@dataclass(frozen=True)
class GDConfig:
    """Optimiser settings: ``optimizer`` (adam | gd), ``steps`` (budget), ``lr``, ``tol`` (relative
    change of the loss per step at which the optimiser stops early; 0: never), ``inits``
    (initialisations on the same data; their mean is the averaged estimator), ``grad_tol``: the RMS
    gradient per weight ‖∇_W D‖_F/√(d r) at or under which a run counts as converged (stationary)."""

    optimizer: str = "adam"
    steps: int = 3000
    lr: float = 0.05
    tol: float = 0.0
    inits: int = 4
    grad_tol: float = 1e-7

    def __post_init__(self) -> None:
        if self.optimizer not in GD_OPTIMIZERS:
            raise ParameterError(f"optimizer must be one of {', '.join(GD_OPTIMIZERS)}, got {self.optimizer!r}")
        object.__setattr__(self, "steps", check_int("steps", self.steps, 1, 1_000_000))
        object.__setattr__(self, "lr", check_number("lr", self.lr, 0.0, True, 100.0, "in (0, 100]"))
        object.__setattr__(self, "tol", check_number("tol", self.tol, 0.0, False, 1.0, "in [0, 1]"))
        object.__setattr__(self, "inits", check_int("inits", self.inits, 1, 1000))
        object.__setattr__(self, "grad_tol", check_number("grad_tol", self.grad_tol, 0.0, True, 1.0, "in (0, 1]"))

    def to_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "steps": self.steps, "lr": self.lr, "tol": self.tol,
                "inits": self.inits, "grad_tol": self.grad_tol}


@dataclass(frozen=True)
class GDRun:
    """One initialisation: its error, final loss, RMS gradient per weight, steps and status."""

    init: int
    mse: float
    loss: float
    grad_rms: float
    steps: int
    status: str


@dataclass(frozen=True, eq=False)
class GDResult:
    """All initialisations on one data set and the averaged estimator's error."""

    runs: tuple[GDRun, ...]
    mse_averaged: float
    S_averaged: np.ndarray
    seconds: float
    device: str


def student_index(XW: torch.Tensor, W: torch.Tensor, d: int) -> torch.Tensor:
    """h = ((XW)(XW)ᵀ − δ_ab ‖W‖²_F)/(√(r d) √d): XW (n, T, r), W (d, r) -> (n, T, T)."""
    r = W.shape[-1]
    scale = math.sqrt(r * d) * math.sqrt(d)
    h = XW @ XW.transpose(-1, -2)
    T = h.shape[-1]
    return (h - (W * W).sum() * torch.eye(T, dtype=h.dtype, device=h.device)) / scale


def run_gd(data: AIMData, config: GDConfig = GDConfig(), device: torch.device | str = "cpu", seed: int = 0,
           progress: Callable[[int], None] | None = None) -> GDResult:
    """Train ``config.inits`` students from random W on ``data`` (softmax channel, the data's β)."""
    if data.channel != "softmax":
        raise ParameterError(f"gd trains a softmax student; channel must be softmax, got {data.channel!r}")
    t0 = time.perf_counter()
    dev = torch.device(device)
    d, r, beta = data.d, data.r, data.beta
    X = torch.as_tensor(data.X, dtype=torch.float64, device=dev)
    y = torch.as_tensor(data.y, dtype=torch.float64, device=dev)
    S_star = data.S
    Xf = X.reshape(-1, d)
    n = data.n

    def loss_fn(W: torch.Tensor) -> torch.Tensor:
        XW = (Xf @ W).reshape(n, data.T, r)
        h = student_index(XW, W, d)
        return 0.5 * ((torch.softmax(beta * h, dim=-1) - y) ** 2).sum() / n

    rng = np.random.default_rng(np.random.SeedSequence([int(data.seed), _STREAM_INIT, int(seed)]))
    runs, S_sum = [], np.zeros((d, d))
    for k in range(config.inits):
        W0 = torch.as_tensor(rng.standard_normal((d, r)), dtype=torch.float64, device=dev)
        out = train(loss_fn, W0, optimizer=config.optimizer, steps=config.steps, lr=config.lr, tol=config.tol,
                    progress=progress)
        W = out.Q.cpu().numpy()
        S = W @ W.T / math.sqrt(r * d)
        S_sum += S
        loss = float(out.loss)
        grad_rms = float(out.grad_norm) / math.sqrt(d * r)
        if not (math.isfinite(loss) and np.all(np.isfinite(W))):
            status = DIVERGED
        else:
            status = CONVERGED if grad_rms <= config.grad_tol else NOT_CONVERGED
        runs.append(GDRun(init=k, mse=data.mse(S), loss=loss, grad_rms=grad_rms, steps=int(out.steps),
                          status=status))
    S_avg = S_sum / config.inits
    return GDResult(runs=tuple(runs), mse_averaged=data.mse(S_avg), S_averaged=S_avg,
                    seconds=time.perf_counter() - t0, device=str(dev))
