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
``gd`` and ``adam``: a run has *converged* at step ``t`` when ``|R_t − R_{t−1}| ≤ tol·|R_t|``; it
is then frozen (no further updates). A run whose risk is not finite is frozen as *diverged*. Runs
still moving when the step budget is spent end as *max_steps*.

``lbfgs`` (``torch.optim.LBFGS`` with a strong-Wolfe line search) optimises the sum of the
separable risks as one problem, so its runs cannot be frozen one by one. Its stopping rule is the
relative stationarity of ``batched-lbfgs`` below, per run, at the current weights: a run is
*converged* while ``s(Q) ≤ tol``, and optimisation stops when every run is converged at once. A
step that does not lower ``Σ_runs R`` means the line search found no lower point (a relative change
of ``R`` per step ≤ tol, the former rule, then reads as convergence although the gradient need not
be small: measured on a non-smooth risk, stationarity 1.0 reported as converged); every run not
converged at that point ends *stalled* and optimisation stops. Budget spent: *max_steps*.

``batched-lbfgs``: per-run L-BFGS, converged by stationarity
-----------------------------------------------------------
Every run keeps its own L-BFGS memory (:data:`LBFGS_HISTORY` pairs ``(s, y)``, stored for all runs
in one ring buffer of shape ``(m,) + run_shape + (a·b,)``; a pair with ``sᵀy ≤ 0`` gets weight
``ρ = 0``, which removes it from that run's two-loop recursion) and its own step length, found
by a vectorised backtracking line search: all runs try ``t = 1`` together, the runs whose
Armijo condition ``R(Q + t p) ≤ R(Q) + c₁ t ∇Rᵀp`` fails shrink ``t`` (safeguarded quadratic
interpolation, ``t ← clip(t*, 0.1 t, 0.5 t)``) and are re-evaluated, up to 40 times. No Python
loop runs over runs; each trial is one batched evaluation of the risk and its gradient.

A run *converges* when its **relative stationarity**

    s(Q) = ‖∇_Q R‖_F / (‖∇_Q D‖_F + λ‖Q‖_F),    R = D + (λ/2)‖Q‖²_F  (D the data term),

falls to ``tol`` (e.g. 1e-7); it is then frozen. At a stationary point the data gradient and
the ridge gradient cancel (``∇D = −λQ``), so ``s`` measures the residual force against the
size of the two forces that cancel; it is dimensionless, does not depend on how ``R`` is
normalised (per sample, per d), and is O(1) far from a stationary point. Near a minimum with
Hessian ``H ⪰ λ_min`` the loss gap is ``R − R* ≤ ‖∇R‖²/(2λ_min)``: with ``‖∇R‖ ≤ 1e-7 · 2λ‖Q‖``
and ``λ_min`` of order ``λ`` (the directions only the ridge constrains) this is
``≤ 2·10⁻¹⁴ λ‖Q‖²``, i.e. a relative error of ``e_t`` far below the 1e-6 at which the two
branches' training losses differ near α_c (SPEC section 4). In float64 the Armijo test cannot
see decreases below the rounding of ``R``; that puts a floor of a few 1e-9 under ``s`` (measured
at d = 200 and 1000), so ``tol = 1e-7`` leaves a margin of ~10. A run whose line search fails
twice in a row (the second time along −∇R after its memory was reset) is frozen with status
*stalled*: it did not meet the criterion.

Per-run progress
----------------
``finished(mask)`` (optional) is called with a boolean tensor of shape ``run_shape`` marking the
runs that stopped (any status) since the last call: after every step of ``lbfgs`` and
``batched-lbfgs`` and after every chunk of ``gd`` / ``adam`` steps, using the one device
synchronisation per step (the count of active runs) that deciding whether to go on needs anyway;
the runs still active when the budget is spent are reported at the end. Every run is reported
exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from dotattn.core.optimizers import DEFAULT_LR, OPTIMIZERS
from dotattn.core.status import DIVERGED, STALLED, STATUS_CONVERGED

__all__ = [
    "OPTIMIZERS",
    "DEFAULT_LR",
    "STATUS",
    "STATUS_CONVERGED",
    "TrainOutcome",
    "train",
    "progress_chunk",
    "relative_stationarity",
    "LBFGS_HISTORY",
    "DIVERGENCE_RISK",
]

STATUS: tuple[str, ...] = ("max_steps", STATUS_CONVERGED, DIVERGED, STALLED)
"""The training loop's status words by index (``max_steps`` is the shared ``not_converged``:
:func:`dotattn.core.status.from_training`); ``STATUS_CONVERGED`` is re-exported from :mod:`dotattn.core.status`."""
_MAX_STEPS, _CONVERGED, _DIVERGED, _STALLED = 0, 1, 2, 3
DIVERGENCE_RISK = 1e12
"""A run whose risk exceeds this is frozen as *diverged*, as one whose risk is not finite: the ridge-regularised
risk of these problems is O(1) at the start and only falls under a stable step size, while a step size
far too large (``--lr 1e6``) blew it up to 1e238 within 30 steps, still finite, and its numbers broke
every bound a reader checks (docs/output_folders.md)."""
LBFGS_HISTORY = 10
"""Curvature pairs kept per run by ``batched-lbfgs``."""
_ARMIJO_C1, _MAX_BACKTRACK = 1e-4, 40
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
    stationarity : :func:`relative_stationarity` at the final weights (``None`` without a ridge).
    evaluations : batched evaluations of the risks and their gradients (all runs at once).
    """

    Q: torch.Tensor
    loss: torch.Tensor
    status: torch.Tensor
    steps: torch.Tensor
    rel_change: torch.Tensor
    grad_norm: torch.Tensor
    stationarity: torch.Tensor | None = None
    evaluations: int = 0

    def status_names(self) -> list[str]:
        """Status of each run (flattened in C order) as a word from :data:`STATUS`."""
        return [STATUS[int(s)] for s in self.status.flatten().tolist()]


def _bounded(R: torch.Tensor) -> torch.Tensor:
    """Runs whose risk is finite and at most :data:`DIVERGENCE_RISK` (the others have diverged)."""
    return torch.isfinite(R) & (R.abs() <= DIVERGENCE_RISK)


def progress_chunk(steps: int) -> int:
    """Steps between progress reports and stop checks (1 .. 100)."""
    return max(1, min(100, steps // 100))


def relative_stationarity(grad: torch.Tensor, Q: torch.Tensor, ridge: float) -> torch.Tensor:
    """``‖∇R‖_F / (‖∇R − λQ‖_F + λ‖Q‖_F)`` per run: ``grad, Q`` of shape ``run_shape + (a, b)`` -> ``run_shape``.

    ``∇R − λQ`` is the gradient of the data term (module docstring, ``batched-lbfgs``).
    """
    g = grad.flatten(-2).norm(dim=-1)
    scale = (grad - ridge * Q).flatten(-2).norm(dim=-1) + ridge * Q.flatten(-2).norm(dim=-1)
    stat: torch.Tensor = g / scale.clamp_min(torch.finfo(g.dtype).tiny)
    return stat


def _value_and_grad(
    loss_fn: Callable[[torch.Tensor], torch.Tensor], Q: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    Q = Q.detach().requires_grad_(True)
    R = loss_fn(Q)
    (grad,) = torch.autograd.grad(R.sum(), Q)
    return R.detach(), grad


def train(
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    Q0: torch.Tensor,
    *,
    optimizer: str = "gd",
    steps: int = 5000,
    lr: float = 0.15,
    tol: float = 1e-9,
    ridge: float | None = None,
    progress: Callable[[int], None] | None = None,
    finished: Callable[[torch.Tensor], None] | None = None,
) -> TrainOutcome:
    """Minimise independent risks ``loss_fn(Q)`` (shape ``run_shape``) from ``Q0`` (``run_shape + (a, b)``).

    ``optimizer`` is one of :data:`OPTIMIZERS`; ``progress(k)`` is called after every chunk of
    ``k`` steps (:func:`progress_chunk`); ``finished(mask)`` with the runs that stopped (module
    docstring, per-run progress). See the module docstring for scaling and stopping.
    ``ridge`` is the λ of ``R = D + (λ/2)‖Q‖²`` (needed by ``lbfgs`` and ``batched-lbfgs``, whose
    ``tol`` is the relative stationarity; it also fills :attr:`TrainOutcome.stationarity`).
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    lbfgs_ridge = 0.0  # the λ of the stationarity criterion of lbfgs and batched-lbfgs
    if optimizer in ("lbfgs", "batched-lbfgs"):
        if ridge is None or not ridge > 0:
            raise ValueError(f"{optimizer} needs the ridge lambda > 0 of the risk (its stationarity criterion)")
        lbfgs_ridge = float(ridge)
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
        finite = _bounded(R)
        rel = (R - state["prev"]).abs() / R.abs().clamp_min(torch.finfo(R.dtype).tiny)
        converged = active & finite & (rel <= tol)
        diverged = active & ~finite
        state["rel"] = torch.where(active, rel, state["rel"])
        state["status"] = torch.where(converged, _CONVERGED, torch.where(diverged, _DIVERGED, state["status"]))
        state["active"] = active & ~converged & ~diverged
        state["prev"] = torch.where(active, R, state["prev"])
        return state["active"]

    chunk = progress_chunk(steps)
    ends = _Ends(state, finished)
    Q = Q0.detach().clone()
    evaluations = steps_taken = 0
    if optimizer == "batched-lbfgs":
        Q, evaluations = _run_batched_lbfgs(loss_fn, Q, steps, lr, tol, lbfgs_ridge, chunk, state, progress, ends)
    elif optimizer == "lbfgs":
        Q, evaluations = _run_lbfgs(loss_fn, Q, steps, lr, tol, lbfgs_ridge, chunk, state, progress, ends)
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
                    if m is None or v is None:
                        raise RuntimeError("adam: the moment estimates were not allocated")
                    m = torch.where(upd[..., None, None], b1 * m + (1 - b1) * grad, m)
                    v = torch.where(upd[..., None, None], b2 * v + (1 - b2) * grad * grad, v)
                    step = lr * (m / (1 - b1**done)) / ((v / (1 - b2**done)).sqrt() + _ADAM_EPS)
                Q = torch.where(upd[..., None, None], Q - step, Q)
                state["steps"] += upd.to(torch.int64)
            if progress is not None:
                progress(n_chunk)
            if not ends.check():
                break
        steps_taken = done
    ends.flush()

    R, grad = _value_and_grad(loss_fn, Q)
    if optimizer == "gd" or optimizer == "adam":
        evaluations = steps_taken + 1
    else:
        evaluations += 1
    stat = None if ridge is None else relative_stationarity(grad, Q, ridge)
    return TrainOutcome(
        Q=Q.detach(),
        loss=R,
        status=state["status"],
        steps=state["steps"],
        rel_change=state["rel"],
        grad_norm=grad.flatten(-2).norm(dim=-1),
        stationarity=stat,
        evaluations=evaluations,
    )


class _Ends:
    """Reports the runs that stopped since the last call to ``finished`` (module docstring)."""

    def __init__(self, state: dict[str, torch.Tensor], finished: Callable[[torch.Tensor], None] | None) -> None:
        self.state, self.finished = state, finished
        self.reported = torch.zeros_like(state["active"])
        self.count = 0

    def check(self) -> bool:
        """Report the runs newly stopped; whether any run is still active (one device synchronisation)."""
        active = self.state["active"]
        n_active = int(active.sum())
        stopped = active.numel() - n_active
        if self.finished is not None and stopped > self.count:
            new = ~active & ~self.reported
            self.reported = self.reported | new
            self.count = int(self.reported.sum())
            if bool(new.any()):
                self.finished(new)
        return n_active > 0

    def flush(self) -> None:
        """Report every run not reported yet (those still active when the budget was spent)."""
        if self.finished is not None and self.count < self.reported.numel():
            new = ~self.reported
            self.reported = torch.ones_like(self.reported)
            self.count = self.reported.numel()
            self.finished(new)


def _two_loop(
    g: torch.Tensor, S: torch.Tensor, Y: torch.Tensor, rho: torch.Tensor, gamma: torch.Tensor, order: list[int]
) -> torch.Tensor:
    """L-BFGS product ``H g`` per run: ``g (*runs, D)``, history ``S, Y (m, *runs, D)``, ``rho (m, *runs)``,
    ``gamma (*runs)`` (initial inverse-Hessian scale); ``order`` lists slots newest first."""
    q = g.clone()
    coef = []
    for i in order:
        a = rho[i] * (S[i] * q).sum(-1)
        q = q - a[..., None] * Y[i]
        coef.append(a)
    r = gamma[..., None] * q
    for i, a in zip(reversed(order), reversed(coef), strict=True):
        b = rho[i] * (Y[i] * r).sum(-1)
        r = r + (a - b)[..., None] * S[i]
    return r


def _run_batched_lbfgs(
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    Q: torch.Tensor,
    steps: int,
    lr: float,
    tol: float,
    ridge: float,
    chunk: int,
    state: dict[str, torch.Tensor],
    progress: Callable[[int], None] | None,
    ends: _Ends,
) -> tuple[torch.Tensor, int]:
    """Per-run L-BFGS with a per-run backtracking line search (module docstring); returns ``(Q, evaluations)``."""
    run_shape, mat = Q.shape[:-2], Q.shape[-2:]
    D = mat[0] * mat[1]

    def flat(T: torch.Tensor) -> torch.Tensor:
        return T.reshape(*run_shape, D)

    def unflat(T: torch.Tensor) -> torch.Tensor:
        return T.reshape(*run_shape, *mat)

    def vg(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        R, g = _value_and_grad(loss_fn, unflat(x))
        return R, flat(g)

    x = flat(Q)
    R, g = vg(x)
    evals = 1
    m = LBFGS_HISTORY
    S = x.new_zeros((m, *run_shape, D))
    Y = x.new_zeros((m, *run_shape, D))
    rho = x.new_zeros((m, *run_shape))
    gamma = torch.full(run_shape, float(lr), dtype=x.dtype, device=x.device)
    failed_once = torch.zeros(run_shape, dtype=torch.bool, device=x.device)
    pushes = 0

    def update_status(R: torch.Tensor, g: torch.Tensor, x: torch.Tensor) -> None:
        active = state["active"]
        finite = _bounded(R) & torch.isfinite(g).all(-1)
        stat = relative_stationarity(unflat(g), unflat(x), ridge)
        converged = active & finite & (stat <= tol)
        diverged = active & ~finite
        state["status"] = torch.where(converged, _CONVERGED, torch.where(diverged, _DIVERGED, state["status"]))
        state["active"] = active & ~converged & ~diverged

    update_status(R, g, x)
    done = 0
    while done < steps and ends.check():
        n_chunk = min(chunk, steps - done)
        for _ in range(n_chunk):
            active = state["active"]
            order = [(pushes - 1 - j) % m for j in range(min(pushes, m))]
            p = -_two_loop(g, S, Y, rho, gamma, order)
            gp = (g * p).sum(-1)
            bad = ~(gp < 0)  # not a descent direction (or NaN): reset the memory, go downhill
            if bool(bad.any()):
                rho = torch.where(bad, 0.0, rho)
                p = torch.where(bad[..., None], -gamma[..., None] * g, p)
                gp = (g * p).sum(-1)
            t = torch.ones(run_shape, dtype=x.dtype, device=x.device)
            pending = active.clone()
            x_new, R_new, g_new = x, R, g
            for _ls in range(_MAX_BACKTRACK):
                xt = x + torch.where(pending, t, 0.0)[..., None] * p
                Rt, gt = vg(xt)
                evals += 1
                ok = pending & torch.isfinite(Rt) & (Rt <= R + _ARMIJO_C1 * t * gp)
                x_new = torch.where(ok[..., None], xt, x_new)
                R_new = torch.where(ok, Rt, R_new)
                g_new = torch.where(ok[..., None], gt, g_new)
                pending = pending & ~ok
                if not bool(pending.any()):
                    break
                denom = 2.0 * (Rt - R - gp * t)
                t_star = torch.where(torch.isfinite(Rt) & (denom > 0), -gp * t * t / denom, 0.1 * t)
                t = torch.where(pending, torch.minimum(torch.maximum(t_star, 0.1 * t), 0.5 * t), t)
            # line-search failures: reset the memory once; freeze runs that fail again
            stall = pending & failed_once
            state["active"] = state["active"] & ~stall
            state["status"] = torch.where(stall, _STALLED, state["status"])
            rho = torch.where(pending, 0.0, rho)
            failed_once = pending & ~stall
            moved = active & ~pending
            s_vec, y_vec = x_new - x, g_new - g
            sy, yy = (s_vec * y_vec).sum(-1), (y_vec * y_vec).sum(-1)
            good = moved & (sy > 1e-12 * s_vec.norm(dim=-1) * y_vec.norm(dim=-1)) & (yy > 0)
            slot = pushes % m
            S[slot], Y[slot] = s_vec, y_vec
            rho[slot] = torch.where(good, 1.0 / torch.where(good, sy, 1.0), 0.0)
            gamma = torch.where(good, sy / torch.where(good, yy, 1.0), gamma)
            pushes += 1
            rel = (R_new - R).abs() / R_new.abs().clamp_min(torch.finfo(R.dtype).tiny)
            state["rel"] = torch.where(moved, rel, state["rel"])
            state["steps"] += moved.to(torch.int64)
            x, R, g = x_new, R_new, g_new
            update_status(R, g, x)
            done += 1
            if not ends.check():
                break
        if progress is not None:
            progress(n_chunk)
    return unflat(x).detach(), evals


def _run_lbfgs(
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    Q: torch.Tensor,
    steps: int,
    lr: float,
    tol: float,
    ridge: float,
    chunk: int,
    state: dict[str, torch.Tensor],
    progress: Callable[[int], None] | None,
    ends: _Ends,
) -> tuple[torch.Tensor, int]:
    """torch's L-BFGS on ``Σ_runs R``; per-run statuses by relative stationarity, a step that does not
    lower ``Σ R`` stalls the runs not converged (module docstring). Returns ``(Q, evaluations)``."""
    param = Q.requires_grad_(True)
    opt = torch.optim.LBFGS(
        [param],
        lr=lr,
        max_iter=1,
        history_size=20,
        tolerance_grad=0.0,
        tolerance_change=0.0,
        line_search_fn="strong_wolfe",
    )
    start: dict[str, torch.Tensor] = {}
    evals = 0

    def closure() -> torch.Tensor:
        nonlocal evals
        if start:  # torch evaluates the start of every step first: the values measured after the last step
            param.grad = start.pop("g")
            return start.pop("R").sum()
        opt.zero_grad(set_to_none=False)
        total = loss_fn(param).sum()
        total.backward()
        evals += 1
        return total

    def measure() -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal evals
        evals += 1
        R, g = _value_and_grad(loss_fn, param)
        finite = _bounded(R) & torch.isfinite(g).flatten(-2).all(-1)
        converged = finite & (relative_stationarity(g, param.detach(), ridge) <= tol)
        sticky = state["status"] == _DIVERGED
        state["status"] = torch.where(sticky | ~finite, _DIVERGED, torch.where(converged, _CONVERGED, _MAX_STEPS))
        state["active"] = ~converged & ~sticky & finite
        return R, g

    R, g = measure()
    done = 0
    while done < steps and ends.check():
        n_chunk = min(chunk, steps - done)
        for _ in range(n_chunk):
            moving = state["active"].clone()
            before = R.sum()
            start["R"], start["g"] = R, g.clone()
            opt.step(closure)
            done += 1
            state["steps"] += moving.to(torch.int64)
            R_old, (R, g) = R, measure()
            rel = (R - R_old).abs() / R.abs().clamp_min(torch.finfo(R.dtype).tiny)
            state["rel"] = torch.where(moving, rel, state["rel"])
            if not bool(torch.isfinite(param).all()):  # the joint problem cannot go on
                break
            if not bool(R.sum() < before):  # the line search found no lower total risk
                state["status"] = torch.where(state["active"], _STALLED, state["status"])
                state["active"] = torch.zeros_like(state["active"])
            if not ends.check():
                break
        if progress is not None:
            progress(n_chunk)
        if not bool(torch.isfinite(param).all()):
            break
    ends.check()
    return param.detach(), evals
