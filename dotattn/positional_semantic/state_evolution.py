"""The iterator: damped state evolution to one fixed point of the replica potential Φ.

One step (SPEC section 3): overlaps → fields → batched global prox → hats (loss channel) →
overlaps (regulariser channel), then a damped update ``damping · old + (1 − damping) · update``
accelerated by Anderson mixing over the last ``anderson`` steps (0 turns it off); a proposal
outside the admissible set falls back to the plain damped step.
The prox is local (Newton from the previous ĥ, or from the centres ω at the first step); the
global multi-start search runs every ``global_every`` steps and always on the step that
accepts convergence (if it changes the answer the iteration continues).

The result is a :class:`FixedPoint`, with a status that is never silently "ok":
``converged``, ``not_converged`` (iteration budget spent; the last residual is kept) or
``invalid`` (q, ρ − θᵀq⁻¹θ or K lost positive definiteness; the reason, the last
iterate and the step count are kept). Statuses come from :mod:`dotattn.core.status`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from dotattn.core.status import CONVERGED, INVALID, NOT_CONVERGED
from dotattn.core.validation import ParameterError, check_int, check_number
from dotattn.positional_semantic.loss_channel import LossChannelResult, hat_update, test_error
from dotattn.positional_semantic.overlaps import Hats, InvalidOverlaps, Overlaps, field_factors
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import GaussianRule
from dotattn.positional_semantic.regulariser import overlap_update, regulariser_potential

__all__ = [
    "FixedPoint",
    "SolverOptions",
    "potential",
    "iterate",
    "predict_start",
    "CONVERGED",
    "NOT_CONVERGED",
    "INVALID",
    "HAT_FORMS",
]

HAT_FORMS: tuple[str, ...] = ("gradient", "stein")
TOL_RANGE: tuple[float, float] = (1e-14, 1e-1)
"""Allowed relative tolerance on the overlaps: below 1e-14 rounding (~1e-16 times the conditioning)
prevents convergence; above 0.1 a "fixed point" is not one."""
MAX_ITER = 1_000_000
"""Largest iteration budget per fixed point (about a day of work on the default rule)."""


@dataclass(frozen=True)
class SolverOptions:
    """Iteration controls. damping ∈ [0, 1) is the weight kept on the old overlaps; runs that are
    warm-started from a neighbouring fixed point (continuation) use ``warm_damping``.
    ``symmetry``: take the prox at one node per orbit of the state's exact token symmetry
    (:func:`dotattn.positional_semantic.loss_channel.token_symmetry`; same result to rounding, 2-8x fewer nodes)."""

    tol: float = 1e-8
    damping: float = 0.8
    warm_damping: float = 0.5
    max_iter: int = 1000
    hat_form: str = "gradient"
    global_every: int = 25
    random_starts: int | None = None
    anderson: int = 3
    symmetry: bool = True

    def __post_init__(self) -> None:
        """Validate every field (ParameterError naming the field and its allowed range)."""
        object.__setattr__(
            self,
            "tol",
            check_number(
                "tol", self.tol, TOL_RANGE[0], False, TOL_RANGE[1], f"in [{TOL_RANGE[0]:g}, {TOL_RANGE[1]:g}]"
            ),
        )
        for name in ("damping", "warm_damping"):
            object.__setattr__(
                self, name, check_number(name, getattr(self, name), 0.0, False, 1.0, "in [0, 1)", high_open=True)
            )
        object.__setattr__(self, "max_iter", check_int("max_iter", self.max_iter, 1, MAX_ITER))
        if self.hat_form not in HAT_FORMS:
            raise ParameterError(f"hat_form must be one of {', '.join(HAT_FORMS)}, got {self.hat_form!r}")
        object.__setattr__(self, "global_every", check_int("global_every", self.global_every, 1))
        if self.random_starts is not None:
            object.__setattr__(self, "random_starts", check_int("random_starts", self.random_starts, 0, 1000))
        object.__setattr__(self, "anderson", check_int("anderson", self.anderson, 0))
        if not isinstance(self.symmetry, (bool, np.bool_)):
            raise ParameterError(f"symmetry must be True or False, got {self.symmetry!r}")
        object.__setattr__(self, "symmetry", bool(self.symmetry))

    def check(self, problem: Problem) -> None:
        """Checks that involve the problem (ParameterError)."""
        if self.hat_form == "stein" and (problem.field_rank != 1 or problem.teacher_rank != 1):
            raise ParameterError("hat_form stein needs a tied student with rank = teacher_rank = 1")


@dataclass(frozen=True)
class FixedPoint:
    """Result of one state-evolution run (like scipy's OptimizeResult).

    status : 'converged' | 'not_converged' | 'invalid';  message : why.
    iterations, residual : steps taken and the last max relative overlap change.
    overlaps : at the last iterate (also for a failure).  hats : at the last iterate, None unless
    converged.  train_loss e_t = −Φ, test_error ε_g (NaN unless
    converged).  quadrature_error : estimated quadrature errors of e_t and ε_g (QMC: standard
    errors over the scramblings at the fixed overlaps, which leave out how the fixed point
    itself moves with the rule, so they are lower bounds, several times too small for ε_g;
    Gauss-Hermite: filled in by the catalogue from the coarse rule; empty if unknown).
    """

    status: str
    message: str
    iterations: int
    residual: float
    overlaps: Overlaps
    hats: Hats | None
    train_loss: float
    test_error: float
    alpha: float
    seconds: float
    quadrature_error: dict = field(default_factory=dict)
    prox_h: np.ndarray | None = field(default=None, repr=False, compare=False)
    envelope: float = float("nan")
    """E[M] at the converged overlaps on the rule it was solved on (from the final, global loss-channel
    step; de_t/dα along the branch by the envelope theorem); NaN unless converged."""

    @property
    def converged(self) -> bool:
        return self.status == CONVERGED

    @classmethod
    def failure(
        cls,
        status: str,
        message: str,
        *,
        iterations: int,
        residual: float,
        overlaps: Overlaps,
        alpha: float,
        seconds: float,
    ) -> FixedPoint:
        """A run that did not converge: the last iterate and the steps taken, no hats, NaN outputs."""
        return cls(
            status=status,
            message=message,
            iterations=int(iterations),
            residual=float(residual),
            overlaps=overlaps,
            hats=None,
            train_loss=np.nan,
            test_error=np.nan,
            alpha=alpha,
            seconds=seconds,
        )


class _InvalidAt(InvalidOverlaps):
    """An iterate left the admissible set; carries that last iterate, the step count and the last residual."""

    def __init__(self, reason: InvalidOverlaps, overlaps: Overlaps, iterations: int, residual: float) -> None:
        super().__init__(str(reason))
        self.overlaps, self.iterations, self.residual = overlaps, iterations, residual


def potential(overlaps: Overlaps, hats: Hats, envelope: float, alpha: float, problem: Problem) -> float:
    """Φ = ½Tr(V̂q) − ½Tr(q̂V) − Σ_l μ_l·μ̂_l − Tr(θᵀθ̂) + Ψ_w − α E[M]."""
    return (
        0.5 * np.sum(hats.V_hat * overlaps.q)
        - 0.5 * np.sum(hats.q_hat * overlaps.V)
        - np.sum(overlaps.mu * hats.mu_hat)
        - np.sum(overlaps.theta * hats.theta_hat)
        + regulariser_potential(hats, problem)
        - alpha * envelope
    )


def _residual(old: Overlaps, new: Overlaps) -> float:
    a, b = old.vector(), new.vector()
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


class _Anderson:
    """Anderson mixing (type II) of the fixed-point map x → F(x) on the flat overlap vector.

    With memory 0 it is plain damping x + β (F(x) − x), β = 1 − damping.
    """

    def __init__(self, memory: int, beta: float) -> None:
        self.memory, self.beta = memory, beta
        self.xs: list[np.ndarray] = []
        self.gs: list[np.ndarray] = []

    def reset(self) -> None:
        self.xs.clear()
        self.gs.clear()

    def step(self, x: np.ndarray, fx: np.ndarray) -> np.ndarray:
        g = fx - x
        self.xs.append(x)
        self.gs.append(g)
        if len(self.xs) > self.memory + 1:
            self.xs.pop(0)
            self.gs.pop(0)
        new = x + self.beta * g
        if len(self.xs) >= 2:
            dX = np.diff(np.array(self.xs), axis=0).T
            dG = np.diff(np.array(self.gs), axis=0).T
            gamma, *_ = np.linalg.lstsq(dG, g, rcond=1e-10)
            new = new - (dX + self.beta * dG) @ gamma
        return new


@dataclass(frozen=True)
class _Subspace:
    """The invariant subspace an initial state lies in (see :func:`iterate`), kept exactly.

    zero_theta (r_t,): teacher columns k with θ_{:,k} = 0.  zero_mu: μ = 0.  noise (r,): student
    directions i that carry nothing (θ_{i,:} = 0, μ_{:,i} = 0, q_ij = V_ij = 0 for j ≠ i).
    exchangeable: groups of noise directions with equal q_ii and V_ii (the state is invariant
    under swapping them, and so is the map); their q_ii and V_ii are kept equal.
    """

    zero_theta: np.ndarray
    zero_mu: bool
    noise: np.ndarray
    exchangeable: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def of(cls, init: Overlaps) -> _Subspace:
        r = init.q.shape[0]
        off = ~np.eye(r, dtype=bool)
        noise = np.array(
            [
                r > 1
                and not (
                    np.any(init.theta[i])
                    or np.any(init.mu[:, i])
                    or np.any(init.q[i][off[i]])
                    or np.any(init.V[i][off[i]])
                )
                for i in range(r)
            ],
            dtype=bool,
        )
        groups: dict[tuple[float, float], list[int]] = {}
        for i in np.flatnonzero(noise):
            groups.setdefault((float(init.q[i, i]), float(init.V[i, i])), []).append(int(i))
        return cls(
            zero_theta=~np.any(init.theta, axis=0),
            zero_mu=not np.any(init.mu),
            noise=noise,
            exchangeable=tuple(tuple(g) for g in groups.values() if len(g) > 1),
        )

    def apply(self, update: Overlaps) -> Overlaps:
        if not (np.any(self.zero_theta) or self.zero_mu or np.any(self.noise)):
            return update
        if self.exchangeable:
            q, V = np.array(update.q), np.array(update.V)
            for g in self.exchangeable:
                idx = list(g)
                q[idx, idx], V[idx, idx] = np.mean(q[idx, idx]), np.mean(V[idx, idx])
            update = Overlaps(q=q, V=V, theta=update.theta, mu=update.mu)
        theta = np.where(self.zero_theta[None, :] | self.noise[:, None], 0.0, update.theta)
        mu = np.zeros_like(update.mu) if self.zero_mu else np.where(self.noise[None, :], 0.0, update.mu)
        cross = (self.noise[:, None] | self.noise[None, :]) & ~np.eye(len(self.noise), dtype=bool)
        return Overlaps(q=np.where(cross, 0.0, update.q), V=np.where(cross, 0.0, update.V), theta=theta, mu=mu)


def _run(
    problem: Problem,
    alpha: float,
    init: Overlaps,
    rule: GaussianRule,
    options: SolverOptions,
    subspace: _Subspace,
    warm: np.ndarray | None = None,
):
    """Iterate on one rule to ``options.tol``.

    The prox is local (warm-started from the previous ĥ, or from the centres at the start) and
    global every ``global_every`` steps; convergence is only accepted on a step whose prox was
    the global search. Returns (overlaps, last loss-channel result, residual, iterations, ok);
    on success the hats of that result belong to the returned overlaps.
    """
    overlaps = init
    prox_h = warm
    prev: LossChannelResult | None = None  # the last step's result: its ĥ start the next local prox
    residual = np.inf
    damping = options.damping if warm is None else min(options.damping, options.warm_damping)
    mixer = _Anderson(options.anderson, 1.0 - damping)
    since_global = 0
    ch = None
    fallback: tuple[Overlaps, Overlaps] | None = None  # (last valid iterate, its update)
    extrapolated = False
    for it in range(1, options.max_iter + 1):
        do_global = since_global >= options.global_every
        try:
            ch = hat_update(
                overlaps,
                alpha,
                rule,
                problem,
                search="global" if do_global else "local",
                warm=prox_h if prev is None else None,
                form=options.hat_form,
                random_starts=options.random_starts,
                symmetry=options.symmetry,
                warm_from=prev,
            )
            update = subspace.apply(overlap_update(ch.hats, problem))
        except InvalidOverlaps as err:
            if not extrapolated or fallback is None:
                raise _InvalidAt(err, overlaps, it, residual) from err
            # an Anderson extrapolation left the admissible region: plain damped step instead
            mixer.reset()
            extrapolated = False
            overlaps = fallback[0].mix(fallback[1], damping)
            continue
        since_global = 0 if do_global else since_global + 1
        prev = ch
        residual = _residual(overlaps, update)
        if residual < options.tol:
            if do_global:
                return overlaps, ch, residual, it, True
            since_global = options.global_every  # confirm with the global search
            mixer.reset()
            overlaps = update
            extrapolated = False
            continue
        fallback = (overlaps, update)
        proposal = Overlaps.from_vector(mixer.step(overlaps.vector(), update.vector()), problem)
        try:
            field_factors(proposal, problem)
            if np.min(np.linalg.eigvalsh(proposal.V)) <= 0:
                raise InvalidOverlaps("V")
            overlaps = proposal
            extrapolated = len(mixer.xs) >= 2
        except InvalidOverlaps:  # extrapolation left the admissible set: plain damped step
            mixer.reset()
            overlaps = overlaps.mix(update, damping)
            extrapolated = False
    return overlaps, ch, residual, options.max_iter, False


def iterate(
    problem: Problem,
    alpha: float,
    init: Overlaps,
    rule: GaussianRule,
    options: SolverOptions = SolverOptions(),
    warm: np.ndarray | None = None,
) -> FixedPoint:
    """Run state evolution from ``init`` to a fixed point at sample complexity ``alpha`` on ``rule``.

    ``warm`` (N, L, r): prox points of a previous run on the same rule to start the prox from.
    If the initial μ, or a column k of the initial θ, is exactly zero, it stays exactly zero:
    μ = 0 and θ_{:,k} = 0 are invariant subspaces of the exact equations (the Gaussian measure
    is symmetric under (ξ, η) → (−ξ, −η), and T(h*) and the measure are symmetric under the
    sign flip η_{·,k} → −η_{·,k} of one teacher component), and keeping them exact stops
    rounding noise, or a quadrature rule without these symmetries (QMC), from seeding an
    unstable or flat direction, so the positional and semantic branches can be followed
    wherever they exist as fixed points. For r_t > r this also fixes the teacher's rotation
    gauge: the informed semantic start has θ in the first min(r, r_t) columns only. Likewise a
    student direction i that carries nothing in the initial state (θ_{i,:} = 0, μ_{:,i} = 0,
    q_ij = V_ij = 0 for j ≠ i) stays so: the state is then invariant under the reflection
    Q_{:,i} → −Q_{:,i}, and so is the map (exactly, also for a tensor Gauss–Hermite rule). This
    fixes the student's rotation gauge on the pure branches of a student with r >= 2, which
    otherwise drift slowly along directions the rule's lack of rotation symmetry barely pins.
    Such directions that also start with equal q_ii and V_ii (the uninformative start) are
    exchangeable, and stay so: otherwise the iterate alternates between the two gauge copies
    (q_11, q_22) and (q_22, q_11) of a slightly asymmetric state and never converges.
    The initial state is put in the canonical
    student frame (:meth:`Overlaps.canonical`); the iterates are not, because an update that
    only maps the state to a gauge copy of itself (e.g. μ → −μ) is a cycle, not a fixed point,
    and must not pass the convergence test.
    """
    t0 = time.perf_counter()
    init = init.canonical(untied=problem.student == "untied")
    try:
        overlaps, ch, residual, iters, ok = _run(problem, alpha, init, rule, options, _Subspace.of(init), warm)
        if not ok:
            return FixedPoint.failure(
                NOT_CONVERGED,
                f"no convergence in {iters} iterations (last change "
                f"{residual:.2e}); try more iterations (max_iter) or more damping",
                iterations=iters,
                residual=residual,
                overlaps=overlaps,
                alpha=alpha,
                seconds=time.perf_counter() - t0,
            )
        phi = potential(overlaps, ch.hats, ch.envelope, alpha, problem)
        eps_g, eps_err = test_error(overlaps, rule, problem)
        quad_err = {}
        if rule.groups is not None:  # QMC: standard errors over the scramblings
            quad_err = {
                "train_loss": float(rule.standard_error(ch.prox.value)) * alpha,
                "test_error": eps_err,
                "method": "QMC standard error",
            }
        return FixedPoint(
            status=CONVERGED,
            message=f"converged to {residual:.1e}",
            iterations=iters,
            residual=residual,
            overlaps=overlaps,
            hats=ch.hats,
            train_loss=float(-phi),
            test_error=eps_g,
            alpha=alpha,
            seconds=time.perf_counter() - t0,
            quadrature_error=quad_err,
            prox_h=ch.prox.h,
            envelope=float(ch.envelope),
        )
    except _InvalidAt as err:  # the last iterate (the inadmissible one) and its step
        return FixedPoint.failure(
            INVALID,
            f"invalid overlaps: {err}",
            iterations=err.iterations,
            residual=err.residual,
            overlaps=err.overlaps,
            alpha=alpha,
            seconds=time.perf_counter() - t0,
        )
    except InvalidOverlaps as err:
        return FixedPoint.failure(
            INVALID,
            f"invalid overlaps: {err}",
            iterations=0,
            residual=np.inf,
            overlaps=init,
            alpha=alpha,
            seconds=time.perf_counter() - t0,
        )


def predict_start(
    problem: Problem, alpha: float, previous: FixedPoint, before: FixedPoint | None = None
) -> tuple[Overlaps, np.ndarray | None]:
    """Start (overlaps, warm prox points) for :func:`iterate` at ``alpha`` from converged points of
    the same branch on the same rule: the secant through ``before`` and ``previous`` (linear
    extrapolation in α of the overlaps and of the prox points), or ``previous`` itself when there
    is no usable ``before`` or the prediction leaves the admissible set. Only a start: the
    fixed point is whatever :func:`iterate` converges to from it.
    """
    start, warm = previous.overlaps, previous.prox_h
    if before is None or not (before.converged and previous.converged) or before.alpha == previous.alpha:
        return start, warm
    t = (alpha - previous.alpha) / (previous.alpha - before.alpha)
    x0, x1 = before.overlaps.vector(), previous.overlaps.vector()
    guess = Overlaps.from_vector(x1 + t * (x1 - x0), problem)
    try:
        field_factors(guess, problem)
        if np.min(np.linalg.eigvalsh(guess.V)) <= 0:
            return start, warm
    except InvalidOverlaps:
        return start, warm
    if warm is not None and before.prox_h is not None and before.prox_h.shape == warm.shape:
        warm = warm + t * (warm - before.prox_h)
    return guess, warm
