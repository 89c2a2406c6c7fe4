"""Batched optimisation of many independent empirical risks in one autograd graph.

The weights of all runs live in one tensor of shape ``run_shape + (a, b)`` (the experiments
store ``Qᵀ``, ``(r, d)``, which makes the field matmul the fast one); the loss function
returns the per-run risks ``R`` (shape ``run_shape``) and the optimiser differentiates
``R.sum()``: the runs are independent, so this gives every run its own gradient in a single
backward pass. There is no Python loop over runs.

Learning-rate scaling
---------------------
Gradient descent is ``Q ← Q − lr · ∇_Q R(Q)`` on the *unnormalised* risk
``R(Q) = Σ_μ ‖ŷ − y‖²_F/(2d) + (λ/2)‖Q‖²_F``. This is the same step as gradient descent on
``R/d`` (the reported training loss, O(1)) with respect to ``W = Q/√d`` (the fields are
``h_l = Qᵀx_l/√d = Wᵀx_l``): ``∇_W (R/d) = ∇_Q R/√d``, so ``W ← W − lr ∇_W (R/d)`` is the step above. Although ``R = O(n) = O(d)``,
its Hessian with respect to ``Q`` is O(1) — it is ``λ`` plus ``Σ_μ x xᵀ/d ⊗ ∂²ℓ`` whose largest
eigenvalue is about ``α(1+α^{-1/2})²σ²`` times the curvature of the loss in the fields — so
``lr`` does not depend on ``d``. The slowest directions are those the data do not constrain
(only the ridge acts), contracting by ``1 − lr·λ`` per step: ``lr = 0.15, λ = 0.01`` gives
``e^{-7.5}`` in 5000 steps, and ``lr = 0.15`` is far below the stability limit (≈ 2/curvature)
at σ = 0.5, α ≤ 2.

Near a minimum the risk approaches its limit geometrically, so a relative change per step of
``tol`` leaves a relative gap of about ``tol/(lr·λ)``: the default ``tol = 1e-9`` with
``lr·λ = 1.5e-3`` means ``e_t`` is converged to better than 1e-6 relative.

Stopping
--------
A run has *converged* at step ``t`` when ``|R_t − R_{t−1}| ≤ tol·|R_t|``; with ``gd`` and
``adam`` it is then frozen (no further updates). A run whose risk is not finite is frozen as
*diverged*. Runs still moving when the step budget is spent end as *max_steps*. L-BFGS
(``torch.optim.LBFGS`` with a strong-Wolfe line search) optimises the sum of the separable risks
as one problem, so its runs cannot be frozen one by one: the per-run status is recorded the same
way (and is sticky), and optimisation stops when every run has converged or the budget is spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from dotattn.erm.config import DEFAULT_LR, OPTIMIZERS

__all__ = ["OPTIMIZERS", "DEFAULT_LR", "STATUS", "TrainOutcome", "train", "progress_chunk"]

STATUS: tuple[str, ...] = ("max_steps", "converged", "diverged")
_MAX_STEPS, _CONVERGED, _DIVERGED = 0, 1, 2
_ADAM_BETAS, _ADAM_EPS = (0.9, 0.999), 1e-12


@dataclass(frozen=True)
class TrainOutcome:
    """Final state of a batched optimisation; tensors of shape ``run_shape`` unless noted.

    Q : final weights, ``run_shape + (a, b)`` (detached).
    loss : final per-run risk ``R(Q)``.
    status : index into :data:`STATUS` (int64).
    steps : number of updates applied to each run (int64).
    rel_change : last relative change ``|ΔR|/|R|`` seen by each run.
    grad_norm : ``‖∇_Q R‖_F`` at the final weights.
    """

    Q: torch.Tensor
    loss: torch.Tensor
    status: torch.Tensor
    steps: torch.Tensor
    rel_change: torch.Tensor
    grad_norm: torch.Tensor

    def status_names(self) -> list[str]:
        """Status of each run (flattened in C order) as a word from :data:`STATUS`."""
        return [STATUS[int(s)] for s in self.status.flatten().tolist()]


def progress_chunk(steps: int) -> int:
    """Steps between progress reports and stop checks (1 .. 100)."""
    return max(1, min(100, steps // 100))


def _value_and_grad(loss_fn: Callable[[torch.Tensor], torch.Tensor],
                    Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    Q = Q.detach().requires_grad_(True)
    R = loss_fn(Q)
    (grad,) = torch.autograd.grad(R.sum(), Q)
    return R.detach(), grad


def train(loss_fn: Callable[[torch.Tensor], torch.Tensor], Q0: torch.Tensor, *, optimizer: str = "gd",
          steps: int = 5000, lr: float = 0.15, tol: float = 1e-9,
          progress: Callable[[int], None] | None = None) -> TrainOutcome:
    """Minimise independent risks ``loss_fn(Q)`` (shape ``run_shape``) from ``Q0`` (``run_shape + (a, b)``).

    ``optimizer`` is one of :data:`OPTIMIZERS`; ``progress(k)`` is called after every chunk of
    ``k`` steps (:func:`progress_chunk`). See the module docstring for scaling and stopping.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    run_shape = Q0.shape[:-2]
    dev = Q0.device
    state = {
        "status": torch.zeros(run_shape, dtype=torch.int64, device=dev),
        "active": torch.ones(run_shape, dtype=torch.bool, device=dev),
        "steps": torch.zeros(run_shape, dtype=torch.int64, device=dev),
        "rel": torch.full(run_shape, float("nan"), dtype=Q0.dtype, device=dev),
        "prev": torch.full(run_shape, float("inf"), dtype=Q0.dtype, device=dev),
    }

    def record(R: torch.Tensor) -> torch.Tensor:
        """Update statuses from the risks at the current weights; returns the runs to update."""
        active = state["active"]
        finite = torch.isfinite(R)
        rel = (R - state["prev"]).abs() / R.abs().clamp_min(torch.finfo(R.dtype).tiny)
        converged = active & finite & (rel <= tol)
        diverged = active & ~finite
        state["rel"] = torch.where(active, rel, state["rel"])
        state["status"] = torch.where(converged, _CONVERGED, torch.where(diverged, _DIVERGED, state["status"]))
        state["active"] = active & ~converged & ~diverged
        state["prev"] = torch.where(active, R, state["prev"])
        return state["active"]

    chunk = progress_chunk(steps)
    Q = Q0.detach().clone()
    if optimizer == "lbfgs":
        Q = _run_lbfgs(loss_fn, Q, steps, lr, chunk, record, state, progress)
    else:
        m = torch.zeros_like(Q) if optimizer == "adam" else None
        v = torch.zeros_like(Q) if optimizer == "adam" else None
        b1, b2 = _ADAM_BETAS
        done = 0
        while done < steps:
            n_chunk = min(chunk, steps - done)
            for _ in range(n_chunk):
                R, grad = _value_and_grad(loss_fn, Q)
                upd = record(R)
                done += 1
                if optimizer == "gd":
                    step = lr * grad
                else:  # adam, bias-corrected; frozen runs keep their moments (never used again)
                    m = torch.where(upd[..., None, None], b1 * m + (1 - b1) * grad, m)
                    v = torch.where(upd[..., None, None], b2 * v + (1 - b2) * grad * grad, v)
                    step = lr * (m / (1 - b1**done)) / ((v / (1 - b2**done)).sqrt() + _ADAM_EPS)
                Q = torch.where(upd[..., None, None], Q - step, Q)
                state["steps"] += upd.to(torch.int64)
            if progress is not None:
                progress(n_chunk)
            if not bool(state["active"].any()):
                break

    R, grad = _value_and_grad(loss_fn, Q)
    return TrainOutcome(Q=Q.detach(), loss=R, status=state["status"], steps=state["steps"],
                        rel_change=state["rel"], grad_norm=grad.flatten(-2).norm(dim=-1))


def _run_lbfgs(loss_fn, Q, steps, lr, chunk, record, state, progress) -> torch.Tensor:
    """L-BFGS on ``Σ_runs R`` with per-run bookkeeping of statuses (see module docstring)."""
    param = Q.requires_grad_(True)
    opt = torch.optim.LBFGS([param], lr=lr, max_iter=1, history_size=20, tolerance_grad=0.0,
                            tolerance_change=0.0, line_search_fn="strong_wolfe")
    first: dict[str, torch.Tensor] = {}

    def closure() -> torch.Tensor:
        opt.zero_grad(set_to_none=False)
        R = loss_fn(param)
        if "R" not in first:
            first["R"] = R.detach()
        total = R.sum()
        total.backward()
        return total

    done = 0
    while done < steps:
        n_chunk = min(chunk, steps - done)
        for _ in range(n_chunk):
            first.clear()
            opt.step(closure)
            moving = record(first["R"])
            state["steps"] += moving.to(torch.int64)
            done += 1
        if progress is not None:
            progress(n_chunk)
        if not bool(state["active"].any()) or not bool(torch.isfinite(param).all()):
            break
    return param.detach()
