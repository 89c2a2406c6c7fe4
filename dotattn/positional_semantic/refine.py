"""Roots refined on independent scrambled Sobol rules: α_c and α_lin with a standard error.

The sweep of a phase-diagram column runs on one rule (Gauss–Hermite 12 for the toy model). Its
integrand contains a global argmin, so the prox jumps across a surface in the Gaussian variables and
Gauss–Hermite converges slowly and not monotonically (at ω = 0.1, α_c on orders 12, 20, 24, 28, 32:
0.7551, 0.7541, 0.7539, 0.7520, 0.7501; ``benchmarks/alpha_c_refine.py``). Near α_c the two training
losses cross with a slope of only ~5e-4 per unit α, so an error of 1e-6 in e_t moves α_c by 2e-3.

:func:`refine_root` therefore re-solves only the few fixed points at a root found on the sweep rule,
on ``R`` independent randomised QMC rules (scrambled Sobol, :func:`dotattn.positional_semantic.quadrature.sobol_qmc`, each
with its own seed), and takes the root on each rule by one linear step from the sweep's root,
with the slope measured on the first rule by a second solve. The R roots are independent estimates
of the same quantity, so their mean and its standard error (sample standard deviation / √R) are
the reported value and uncertainty (derivation and checks: ``docs/theory.md``, section 4, "Refined roots").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dotattn.core.validation import ParameterError, check_int
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import GaussianRule, sobol_qmc
from dotattn.positional_semantic.state_evolution import FixedPoint, SolverOptions, iterate

__all__ = ["RefineSpec", "RefinedRoot", "refine_root", "root_on_rule", "envelope_slope", "MIN_STEP"]

MIN_STEP = 2e-3
"""Smallest α step of the slope measurement: over 2e-3 the gap changes by ~1e-6 (slope ~5e-4 at
α_c), far above the fixed points' convergence error (relative 1e-8 on the overlaps, ≲ 1e-9 in e_t)."""


_RULES: dict[tuple[int, int, int, int], GaussianRule] = {}
"""(dim, log2 points, scramblings, seed) -> the refinement rule (:meth:`RefineSpec.rule`)."""


@dataclass(frozen=True)
class RefineSpec:
    """R = ``rules`` independent scrambled Sobol rules of 2^``log2_points`` points in each of
    ``scramblings`` scramblings; rule i has seed ``seed + i`` (so the rules are independent of
    each other and of the sweep rule)."""

    log2_points: int = 13
    rules: int = 8
    scramblings: int = 2
    seed: int = 1000

    def __post_init__(self) -> None:
        object.__setattr__(self, "log2_points", check_int("refine log2_points", self.log2_points, 4, 20))
        object.__setattr__(self, "rules", check_int("refine rules", self.rules, 2, 64))
        object.__setattr__(self, "scramblings", check_int("refine scramblings", self.scramblings, 2, 64))
        object.__setattr__(self, "seed", check_int("refine seed", self.seed, 0))

    def rule(self, dim: int, i: int) -> GaussianRule:
        """The i-th independent rule (0 <= i < rules), made once per process and kept (read-only arrays):
        every column of a phase diagram and both of its roots use the same rules, and drawing and
        transforming them cost ~5 % of a column's CPU."""
        key = (dim, self.log2_points, self.scramblings, self.seed + i)
        if key not in _RULES:
            rule = sobol_qmc(dim, self.log2_points, self.scramblings, seed=self.seed + i)
            for a in (rule.nodes, rule.weights, rule.groups):
                if a is not None:
                    a.setflags(write=False)
            _RULES[key] = rule
        return _RULES[key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "log2_points": self.log2_points,
            "rules": self.rules,
            "scramblings": self.scramblings,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> RefineSpec | None:
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise ParameterError(f"refine must be a mapping or None, got {type(d).__name__}")
        return cls(**{k: d[k] for k in ("log2_points", "rules", "scramblings", "seed") if k in d})


@dataclass(frozen=True)
class RefinedRoot:
    """A root re-evaluated on R independent QMC rules.

    ``alpha``: mean of the finite per-rule roots; ``standard_error``: their sample standard deviation
    / √(number of finite roots); ``roots`` (R,): the root on each rule (NaN where a branch was not
    found on that rule); ``start``: the sweep rule's root; ``slope``: d(value)/dα on the QMC rules
    (the mean of the per-rule slopes, or the one measured on the first rule); ``method``: how it was
    computed (one line).
    """

    alpha: float
    standard_error: float
    roots: tuple[float, ...]
    start: float
    slope: float
    method: str

    def to_row(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "standard_error": self.standard_error,
            "roots": [None if not np.isfinite(r) else r for r in self.roots],
            "start": self.start,
            "slope": self.slope,
            "method": self.method,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | None) -> RefinedRoot | None:
        if row is None:
            return None
        return cls(
            alpha=float(row["alpha"]),
            standard_error=float(row["standard_error"]),
            roots=tuple(np.nan if r is None else float(r) for r in row["roots"]),
            start=float(row["start"]),
            slope=float(row["slope"]),
            method=str(row["method"]),
        )


def _solve_all(
    problem: Problem,
    alpha: float,
    starts: Mapping[str, FixedPoint],
    rule: GaussianRule,
    options: SolverOptions,
    on_branch: Callable[[str, FixedPoint], bool],
    report: Callable[[], None] | None,
) -> dict[str, FixedPoint] | None:
    """Every named fixed point solved again at α on ``rule`` from its overlaps; None if one leaves its branch."""
    out = {}
    for name, fp in starts.items():
        new = iterate(problem, alpha, fp.overlaps, rule, options)
        if report is not None:
            report()
        if not on_branch(name, new):
            return None
        out[name] = new
    return out


def root_on_rule(
    problem: Problem,
    start: float,
    fixed_points: Mapping[str, FixedPoint],
    value: Callable[[Mapping[str, FixedPoint]], float],
    slope: float,
    rule: GaussianRule,
    options: SolverOptions,
    on_branch: Callable[[str, FixedPoint], bool],
    report: Callable[[], None] | None = None,
    slope_of: Callable[[Mapping[str, FixedPoint], GaussianRule], float] | None = None,
) -> tuple[float, float]:
    """(root, slope) of ``value`` on one ``rule`` by one linear step from ``start``
    (see :func:`refine_root`); (NaN, NaN) if a fixed point leaves its branch on the rule."""
    fps = _solve_all(problem, start, fixed_points, rule, options, on_branch, report)
    if fps is None:
        return np.nan, np.nan
    v0 = float(value(fps))
    if slope_of is not None:
        s = float(slope_of(fps, rule))
    else:
        step = -v0 / slope if np.isfinite(slope) and slope != 0 else MIN_STEP
        step = step if abs(step) >= MIN_STEP else float(np.copysign(MIN_STEP, step if step != 0 else 1.0))
        fps1 = _solve_all(problem, start + step, fps, rule, options, on_branch, report)
        s = np.nan if fps1 is None else (float(value(fps1)) - v0) / step
    if not np.isfinite(s) or s == 0:
        return np.nan, np.nan
    return start - v0 / s, s


def refine_root(
    problem: Problem,
    start: float,
    fixed_points: Mapping[str, FixedPoint],
    value: Callable[[Mapping[str, FixedPoint]], float],
    slope: float,
    spec: RefineSpec,
    options: SolverOptions,
    on_branch: Callable[[str, FixedPoint], bool],
    report: Callable[[], None] | None = None,
    slope_of: Callable[[Mapping[str, FixedPoint], GaussianRule], float] | None = None,
) -> RefinedRoot | None:
    """The root of ``value(fixed points)`` near ``start`` on each of the R rules of ``spec``.

    ``fixed_points``: branch name -> the sweep rule's fixed point nearest the root (starts), each
    solved again at ``start`` on the rule; ``value``: the function whose root is sought (e.g.
    e_t(sem) − e_t(pos)); ``slope``: its slope on the sweep rule (a first guess only);
    ``slope_of(fixed points, rule)``: the exact local slope on a rule from its fixed points at
    ``start`` (for e_t by the envelope theorem, :func:`envelope_slope`). Each rule i gives
    root_i = start − value_i / slope_i (:func:`root_on_rule`; one linear step: the roots lie within
    ~0.01 of ``start``, where the curvature of the gap changes the step by < 1e-5). Without
    ``slope_of``, the slope on the first rule is measured by a second solve at
    α₁ = start − value/slope (at least :data:`MIN_STEP` away) and used for every rule. Costs R
    (with ``slope_of``) or R + 1 solves of each fixed point. None if fewer than two rules keep
    every branch.
    """
    D = problem.gaussian_dim
    roots, slopes = [], []
    measured = np.nan
    for i in range(spec.rules):
        rule = spec.rule(D, i)
        if slope_of is None and np.isfinite(measured):
            fps = _solve_all(problem, start, fixed_points, rule, options, on_branch, report)
            roots.append(np.nan if fps is None else start - float(value(fps)) / measured)
            continue
        root, s = root_on_rule(problem, start, fixed_points, value, slope, rule, options, on_branch, report, slope_of)
        roots.append(root)
        slopes.append(s)
        if slope_of is None:
            measured = s
    ok = np.array([r for r in roots if np.isfinite(r)])
    if ok.size < 2:
        return None
    finite = [s for s in slopes if np.isfinite(s)]
    return RefinedRoot(
        alpha=float(ok.mean()),
        standard_error=float(ok.std(ddof=1) / np.sqrt(ok.size)),
        roots=tuple(float(r) for r in roots),
        start=float(start),
        slope=float(np.mean(finite)) if finite else np.nan,
        method=f"mean and standard error over {ok.size} independent scrambled Sobol rules "
        f"(2^{spec.log2_points} x {spec.scramblings})",
    )


def envelope_slope(
    problem: Problem,
    fixed_points: Mapping[str, FixedPoint],
    upper: str,
    lower: str,
    rule: GaussianRule,
    options: SolverOptions,
) -> float:
    """d/dα [e_t(upper) − e_t(lower)] at converged fixed points on ``rule``: E[M](upper) − E[M](lower).

    e_t = −Φ and Φ is stationary in every order parameter at a fixed point, so along the branch
    de_t/dα = −∂Φ/∂α = E[M], the envelope average (envelope theorem; ``docs/theory.md`` section 4).
    E[M] is the one each fixed point carries (:attr:`FixedPoint.envelope`, from the global loss-channel
    step that accepted its convergence on ``rule``: the fixed points must have been solved on ``rule``);
    where absent, one global loss-channel step at its overlaps (the same computation)."""
    from dotattn.positional_semantic.loss_channel import hat_update

    def envelope(fp: FixedPoint) -> float:
        if np.isfinite(fp.envelope):
            return fp.envelope
        return hat_update(
            fp.overlaps,
            fp.alpha,
            rule,
            problem,
            form=options.hat_form,
            random_starts=options.random_starts,
            symmetry=options.symmetry,
        ).envelope

    return float(envelope(fixed_points[upper]) - envelope(fixed_points[lower]))
