"""The zero-temperature 1RSB complexity curve Σ(e) over the whole range of the Parisi parameter y
(derivation: docs/rsb.md section 11).

Along the fixed-y saddles of :mod:`dotattn.positional_semantic.rsb`, with e_t(y) = −Φ(y) and
Σ(y) = −y² ∂Φ/∂y, the Legendre structure Φ(y) = max_e [Σ(e)/y − e] gives the energy of the minima that
the tilt y selects and the curve Σ(e):

    e(y) = e_t(y) + Σ(y)/y,        dΣ/de = y,        de/dy = Σ'(y)/y .

Two points of the curve are read off: the equilibrium (Σ = 0, the root y* of Σ(y); e_eq = e_t(y*)) and
the threshold (the highest e with Σ ≥ 0: since de/dy = Σ'(y)/y, the maximum of Σ(y), at y_thr; beyond it
the curve turns back to lower e with dΣ/de = y increasing, the non-concave part, which no Legendre
transform reaches). Everything here is generic in the per-sample loss (a :class:`~dotattn.positional_semantic.rsb.Channel`)
and in the weight channel, as :func:`~dotattn.positional_semantic.rsb.iterate_rsb` is; the attention
model adds the replicon of the inner level (:func:`inner_replicon`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dotattn.core.status import CONVERGED
from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.overlaps import InvalidOverlaps, Overlaps, _chol, field_factors
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import GaussianRule
from dotattn.positional_semantic.rsb import (
    COLLAPSED,
    Channel,
    RSBOptions,
    RSBOverlaps,
    RSBPoint,
    _RhoOnly,
    iterate_rsb,
)

__all__ = [
    "CurvePoint",
    "CurveFeature",
    "ComplexityCurve",
    "state_energy",
    "parabola_peak",
    "sign_change_root",
    "linear_crossing",
    "complexity_curve",
    "inner_replicon",
    "curve_features",
    "CURVE_STATUSES",
    "FEATURE_STATUSES",
    "NO_ROOT",
    "EDGE",
]

NO_ROOT = "no_root"
"""Feature status: Σ(y) does not change sign from + (smaller y) to − (larger y) on the converged points."""
EDGE = "at_edge"
"""Feature status: the largest Σ(y) is at the first or last converged y (the maximum is not bracketed)."""
CURVE_STATUSES: tuple[str, ...] = (CONVERGED, COLLAPSED, "not_converged", "invalid")
FEATURE_STATUSES: tuple[str, ...] = (CONVERGED, NO_ROOT, EDGE)


@dataclass(frozen=True)
class CurvePoint:
    """One fixed-y saddle of the curve: status, iterations, residual (as :class:`RSBPoint`), e_t(y) = −Φ(y),
    Σ(y), e(y) = e_t + Σ/y (NaN unless converged), q0, q1 (Tr/r: the scalar overlaps for r = 1), the smooth
    part of the inner-level replicon and the jump weight of the global prox at the saddle's V (NaN where not
    computed), seconds."""

    y: float
    status: str
    iterations: int
    residual: float
    train_loss: float
    complexity: float
    energy: float
    q0: float
    q1: float
    replicon: float
    jump_weight: float
    seconds: float

    @classmethod
    def from_point(cls, pt: RSBPoint, replicon: float = float("nan"), jump_weight: float = float("nan")) -> CurvePoint:
        r = np.asarray(pt.overlaps.q1).shape[0]
        ok = pt.converged
        e_t = pt.train_loss if ok else np.nan
        s = pt.complexity if ok else np.nan
        return cls(
            y=float(pt.y),
            status=pt.status,
            iterations=int(pt.iterations),
            residual=float(pt.residual),
            train_loss=float(e_t),
            complexity=float(s),
            energy=float(state_energy(pt.y, e_t, s)),
            q0=float(np.trace(pt.overlaps.q0) / r),
            q1=float(np.trace(pt.overlaps.q1) / r),
            replicon=float(replicon),
            jump_weight=float(jump_weight),
            seconds=float(pt.seconds),
        )

    def to_row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CurvePoint:
        """From a CSV row (empty cells are NaN)."""

        def num(k: str) -> float:
            v = row.get(k)
            return float("nan") if v in (None, "") else float(v)

        return cls(
            y=num("y"),
            status=str(row["status"]),
            iterations=int(num("iterations")),
            residual=num("residual"),
            train_loss=num("train_loss"),
            complexity=num("complexity"),
            energy=num("energy"),
            q0=num("q0"),
            q1=num("q1"),
            replicon=num("replicon"),
            jump_weight=num("jump_weight"),
            seconds=num("seconds"),
        )


@dataclass(frozen=True)
class CurveFeature:
    """A point read off the curve: status (converged, no_root, at_edge), y, e (the state energy), e_t(y),
    Σ, and how it was computed (one line)."""

    status: str
    y: float
    energy: float
    train_loss: float
    complexity: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class ComplexityCurve:
    """The fixed-y saddles of one branch at one α (y decreasing, as scanned), with the equilibrium and
    threshold points and the small-y reference (see :func:`curve_features`)."""

    alpha: float
    points: tuple[CurvePoint, ...]
    equilibrium: CurveFeature
    threshold: CurveFeature
    reference: float
    reference_y: float
    seconds: float

    def converged(self) -> tuple[CurvePoint, ...]:
        return tuple(p for p in self.points if p.status == CONVERGED)

    @property
    def smallest_y_train_loss(self) -> float:
        """e_t at the smallest converged y (the reference of results/rsb; above the RS e_t by ∫_0^y Σ/y'²)."""
        ok = self.converged()
        return min(ok, key=lambda p: p.y).train_loss if ok else float("nan")


def state_energy(y, train_loss, complexity):
    """e = e_t + Σ/y: the energy of the minima selected by the tilt y (vectorised)."""
    return np.asarray(train_loss, dtype=float) + np.asarray(complexity, dtype=float) / np.asarray(y, dtype=float)


def parabola_peak(x, f) -> tuple[float, float, int]:
    """The maximum of the parabola through the discrete maximum of f(x) and its two neighbours:
    (x at the maximum, f there, index of the discrete maximum). x increasing. Raises ValueError when the
    discrete maximum is at an end (not bracketed) or fewer than three points are given."""
    x, f = np.asarray(x, dtype=float), np.asarray(f, dtype=float)
    if x.size < 3 or x.shape != f.shape:
        raise ValueError("need at least three points")
    k = int(np.argmax(f))
    if k == 0 or k == x.size - 1:
        raise ValueError("the maximum is at an end of the grid")
    c = np.polyfit(x[k - 1 : k + 2], f[k - 1 : k + 2], 2)
    if not c[0] < 0:
        return float(x[k]), float(f[k]), k
    xm = float(np.clip(-c[1] / (2 * c[0]), x[k - 1], x[k + 1]))
    return xm, float(np.polyval(c, xm)), k


def sign_change_root(x, f) -> tuple[float, int] | None:
    """The root of f by linear interpolation at the first change of sign from f > 0 to f ≤ 0 along
    increasing x: (root, index of the last positive point), or None."""
    x, f = np.asarray(x, dtype=float), np.asarray(f, dtype=float)
    for i in range(x.size - 1):
        if f[i] > 0 >= f[i + 1]:
            return float(x[i] + (x[i + 1] - x[i]) * f[i] / (f[i] - f[i + 1])), i
    return None


def linear_crossing(alphas, gap) -> float:
    """The α where ``gap`` (α increasing) changes sign from > 0 to ≤ 0, by linear interpolation between
    the two grid points that bracket it; NaN if it does not (vectorised over the grid)."""
    found = sign_change_root(alphas, gap)
    return float("nan") if found is None else found[0]


def curve_features(
    points: tuple[CurvePoint, ...] | list[CurvePoint],
) -> tuple[CurveFeature, CurveFeature, float, float]:
    """(equilibrium, threshold, reference e_t, its y) from the converged points of a curve.

    Equilibrium: the root y* of Σ(y) (linear interpolation between the converged points that bracket its
    change of sign from + at smaller y to − at larger y); e_eq = e_t(y*) by linear interpolation (e_t is
    stationary there, de_t/dy = Σ/y², so the error is second order). Threshold: the maximum of Σ(y)
    (parabola through the discrete maximum and its neighbours), where de/dy = Σ'(y)/y vanishes; e_thr is
    the parabola through e(y) at the same three points, evaluated there. Reference: e_t(y) extrapolated
    linearly to y = 0 from the two smallest converged y: the RS e_t on the same rules (docs/rsb.md section 3)
    up to O(y²), since e_t(y) − e_RS = ∫_0^y Σ/y'² dy' is linear in y where Σ ∝ y². Its y is the smallest one."""
    ok = sorted((p for p in points if p.status == CONVERGED), key=lambda p: p.y)
    ys = np.array([p.y for p in ok])
    et = np.array([p.train_loss for p in ok])
    sg = np.array([p.complexity for p in ok])
    en = state_energy(ys, et, sg)
    nan = float("nan")
    if ys.size == 0:
        none = CurveFeature(NO_ROOT, nan, nan, nan, nan, "no converged y")
        return none, CurveFeature(EDGE, nan, nan, nan, nan, "no converged y"), nan, nan
    found = sign_change_root(ys, sg)
    if found is None:
        eq = CurveFeature(NO_ROOT, nan, nan, nan, nan, "Sigma(y) does not change sign from + to - on the grid")
    else:
        y_star, i = found
        t = (y_star - ys[i]) / (ys[i + 1] - ys[i])
        e_eq = float(et[i] + t * (et[i + 1] - et[i]))
        eq = CurveFeature(
            CONVERGED,
            y_star,
            e_eq,
            e_eq,
            0.0,
            f"root of Sigma(y) by linear interpolation between y = {ys[i]:g} and {ys[i + 1]:g}; e_t linear there",
        )
    try:
        y_m, s_m, k = parabola_peak(ys, sg)
        c = np.polyfit(ys[k - 1 : k + 2], en[k - 1 : k + 2], 2)
        e_m = float(np.polyval(c, y_m))
        th = CurveFeature(
            CONVERGED,
            y_m,
            e_m,
            e_m - s_m / y_m,
            s_m,
            f"maximum of Sigma(y): parabola through y = {ys[k - 1]:g}, {ys[k]:g}, {ys[k + 1]:g}; e(y) by the parabola "
            "through the same points",
        )
    except ValueError as err:
        th = CurveFeature(EDGE, nan, nan, nan, nan, f"maximum of Sigma(y) not bracketed: {err}")
    if ys.size >= 2:
        ref = float(et[0] - ys[0] * (et[1] - et[0]) / (ys[1] - ys[0]))
    else:
        ref = nan
    return eq, th, ref, float(ys[0])


def complexity_curve(
    alpha: float,
    init: RSBOverlaps,
    outer: GaussianRule,
    inner: GaussianRule,
    channel: Channel,
    weights,
    options: RSBOptions | None = None,
    *,
    stability=None,
    progress=None,
) -> ComplexityCurve:
    """The fixed-y saddles over all of ``options.y_grid`` (largest y first, each warm-started from the last
    converged one; a failed or collapsed y is recorded and skipped), their state energies and the
    equilibrium and threshold points (:func:`curve_features`).

    ``channel``, ``weights``: as for :func:`~dotattn.positional_semantic.rsb.iterate_rsb`.
    ``stability(point) -> (replicon, jump weight)``: the inner-level stability at a converged point (optional).
    """
    t0 = time.perf_counter()
    options = RSBOptions() if options is None else options
    pts: list[CurvePoint] = []
    start = init
    for y in options.y_grid:
        pt = iterate_rsb(y, alpha, start, outer, inner, channel, weights, options)
        rep, jump = stability(pt) if (stability is not None and pt.converged) else (float("nan"), float("nan"))
        cp = CurvePoint.from_point(pt, rep, jump)
        pts.append(cp)
        if progress is not None:
            progress(cp)
        if pt.converged:
            start = pt.overlaps
    eq, th, ref, ref_y = curve_features(pts)
    return ComplexityCurve(
        alpha=float(alpha),
        points=tuple(pts),
        equilibrium=eq,
        threshold=th,
        reference=ref,
        reference_y=ref_y,
        seconds=time.perf_counter() - t0,
    )


def inner_replicon(
    point: RSBPoint, alpha: float, y: float, outer: GaussianRule, inner: GaussianRule, problem: Problem
) -> float:
    """The smooth part of the replicon of the inner level (fluctuations between replicas of one block) at a
    1RSB saddle: ρ₁ = spectral radius of X ↦ α E₀⟨Σ_lk A_lk X A_lkᵀ⟩, A = ∂ĥ/∂ω − I at the fields
    ω = μ + C0ξ0 + C1ξ1 of the saddle, ⟨·⟩ the tilted inner average (weights ∝ e^{−yM}); the RS replicon of
    docs/rs_stability.md section 2 with the RS average replaced by the 1RSB one. The jumps of the global
    prox add a part that diverges at zero temperature (docs/rsb.md section 11); it is not included here.
    NaN where the prox Jacobian is not finite at some node."""
    from dotattn.positional_semantic.prox import point_loss, prox
    from dotattn.positional_semantic.stability import prox_jacobian, replicon_operator, spectral_radius
    from dotattn.positional_semantic.tokens import teacher_target

    ov = point.overlaps
    L, r, rt = problem.L, problem.rank, problem.teacher_rank
    try:
        f = field_factors(Overlaps(q=ov.q0, V=ov.V, theta=ov.theta, mu=ov.mu), _RhoOnly(problem.rho))
        C1 = _chol("q1 - q0", ov.delta)
    except InvalidOverlaps:
        return float("nan")
    No, Ni = outer.size, inner.size
    xi0 = outer.nodes[:, : L * r].reshape(No, L, r)
    eta = outer.nodes[:, L * r :].reshape(No, L, rt)
    xi1 = inner.nodes.reshape(Ni, L, r)
    centre = ((np.asarray(ov.mu)[None] + xi0 @ f.C.T)[:, None] + (xi1 @ C1.T)[None]).reshape(No * Ni, L, r)
    h_star = np.broadcast_to((xi0 @ f.B + eta @ f.D.T)[:, None], (No, Ni, L, rt)).reshape(No * Ni, L, rt)
    V = np.atleast_2d(ov.V)
    target = teacher_target(h_star, problem)
    px = prox(centre, target, V, problem)
    M = px.value.reshape(No, Ni)
    tilt = inner.weights[None] * np.exp(-y * (M - M.min(axis=1, keepdims=True)))
    W = (outer.weights[:, None] * tilt / tilt.sum(axis=1, keepdims=True)).reshape(-1)
    try:
        A = prox_jacobian(point_loss(problem).derivatives(px.h, target).hessian(), V)
    except np.linalg.LinAlgError:
        return float("nan")
    if not np.all(np.isfinite(A)):
        return float("nan")
    return spectral_radius(replicon_operator(A, W, alpha, r))


def check_rules(rules) -> tuple[tuple[int, int], ...]:
    """(outer, inner) Gauss–Hermite orders, each in [2, 16], at least one pair, no repeats."""
    try:
        out = tuple((int(a), int(b)) for a, b in rules)
    except (TypeError, ValueError):
        raise ParameterError(f"rules must be pairs (outer, inner) of integers in [2, 16], got {rules!r}") from None
    if not out or any(not (2 <= a <= 16 and 2 <= b <= 16) for a, b in out) or len(set(out)) != len(out):
        raise ParameterError(f"rules must be distinct pairs (outer, inner) of integers in [2, 16], got {rules!r}")
    return out


# ---------------------------------------------------------------------------------------------------------
# The study: curves on the positional branch over an α grid and several rules, crossings with the semantic e_t

DEFAULT_Y_GRID: tuple[float, ...] = (
    400.0, 350.0, 300.0, 275.0, 250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0, 80.0, 60.0, 45.0, 35.0, 25.0,
    18.0, 12.0, 8.0, 5.0,
)  # fmt: skip
"""From past Σ < 0 (y* ≈ 255 for the toy model at ω = 0.1) down to small y, finest where Σ(y) peaks."""
DEFAULT_RULES: tuple[tuple[int, int], ...] = ((6, 4), (6, 6), (8, 4))
"""(outer, inner) Gauss–Hermite orders: the first gives the numbers, the others their quadrature uncertainty."""
SEMANTIC_Y: tuple[float, ...] = (300.0, 100.0, 30.0)
"""y at which the semantic branch's 1RSB saddle is tried (on the first rule): it is taken as RS where every
one collapses."""
SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class ComplexityOptions:
    """The curve settings: ``rules`` (outer, inner) Gauss–Hermite orders (the first is the main one), ``y_grid``,
    and the fixed-y iteration (tol, damping, anderson, max_iter, split as in :class:`RSBOptions`)."""

    rules: tuple[tuple[int, int], ...] = DEFAULT_RULES
    y_grid: tuple[float, ...] = DEFAULT_Y_GRID
    tol: float = 1e-8
    damping: float = 0.8
    anderson: int = 3
    max_iter: int = 300
    split: float = 0.3

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", check_rules(self.rules))
        base = self.rsb(self.rules[0])  # checks every other field (one line, ParameterError)
        if len(base.y_grid) < 5:
            raise ParameterError(f"y_grid must hold at least 5 distinct values in (0, 1e6], got {self.y_grid!r}")
        object.__setattr__(self, "y_grid", base.y_grid)

    def rsb(self, rule: tuple[int, int], y_grid: tuple[float, ...] | None = None) -> RSBOptions:
        return RSBOptions(
            outer_order=rule[0],
            inner_order=rule[1],
            y_grid=self.y_grid if y_grid is None else y_grid,
            tol=self.tol,
            damping=self.damping,
            anderson=self.anderson,
            max_iter=self.max_iter,
            split=self.split,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": [list(r) for r in self.rules],
            "y_grid": list(self.y_grid),
            "tol": self.tol,
            "damping": self.damping,
            "anderson": self.anderson,
            "max_iter": self.max_iter,
            "split": self.split,
        }


def rule_name(rule: tuple[int, int]) -> str:
    return f"{rule[0]}x{rule[1]}"


def curve_file(rule: tuple[int, int], alpha: float) -> str:
    return f"curve_{rule_name(rule)}_alpha{alpha:g}.csv"


CURVE_COLUMNS: tuple[str, ...] = (
    "y",
    "status",
    "iterations",
    "residual",
    "train_loss",
    "energy",
    "complexity",
    "q0",
    "q1",
    "replicon",
    "jump_weight",
    "seconds",
)


@dataclass(frozen=True)
class RSRow:
    """The RS fixed points of one α on the RS rule: e_t of the positional and semantic branches (the lowest of each
    branch over the starts, and the start that gave it), and the statuses of the semantic branch's 1RSB saddle at
    :data:`SEMANTIC_Y`."""

    alpha: float
    positional: float
    semantic: float
    semantic_1rsb: tuple[str, ...]
    positional_start: str
    semantic_start: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "positional_train_loss": self.positional,
            "semantic_train_loss": self.semantic,
            "positional_start": self.positional_start,
            "semantic_start": self.semantic_start,
            "semantic_1rsb": {f"{y:g}": s for y, s in zip(SEMANTIC_Y, self.semantic_1rsb, strict=True)},
        }


@dataclass(frozen=True)
class ComplexityStudy:
    """Curves per (rule, α) on the positional branch, the RS rows, the settings and the wall time."""

    problem: Problem
    alphas: tuple[float, ...]
    options: ComplexityOptions
    rs: tuple[RSRow, ...]
    curves: dict[tuple[tuple[int, int], float], ComplexityCurve]
    seconds: float


def check_alphas(alphas) -> tuple[float, ...]:
    from dotattn.core.validation import check_alpha

    try:
        out = tuple(sorted({check_alpha(float(a)) for a in alphas}))
    except (TypeError, ValueError):
        raise ParameterError(f"alphas must be at least two numbers in (0, 1e6], got {alphas!r}") from None
    if len(out) < 2:
        raise ParameterError(f"alphas must hold at least two distinct values (to bracket a crossing), got {alphas!r}")
    return out


def complexity_study(
    problem: Problem, alphas, options: ComplexityOptions = ComplexityOptions(), *, progress=None
) -> ComplexityStudy:
    """The complexity curve of the positional branch at every α and rule, beside the RS e_t of both branches.

    Per α: the RS fixed points on the default RS rule from the informed starts and the previous α's fixed points
    (no random starts), the lowest e_t of each branch; the
    semantic branch's 1RSB saddle tried at :data:`SEMANTIC_Y` on the first rule; then per rule the curve
    (:func:`complexity_curve`) from q1 = q_RS, q0 = (1 − split) q_RS, with the inner-level replicon and the
    jump weight at every converged y. Raises ParameterError when a branch has no converged RS fixed point."""
    from dotattn.core.validation import check_instance
    from dotattn.positional_semantic.catalogue import initialisations, solve
    from dotattn.positional_semantic.problem import require_variant
    from dotattn.positional_semantic.rsb import AttentionChannel
    from dotattn.positional_semantic.stability import mirror_jump_weight

    t0 = time.perf_counter()
    require_variant(problem, "the 1RSB complexity")
    check_instance("options", options, ComplexityOptions, "ComplexityOptions")
    alphas = check_alphas(alphas)
    channel = AttentionChannel(problem)
    rs_rows: list[RSRow] = []
    curves: dict[tuple[tuple[int, int], float], ComplexityCurve] = {}
    previous: list[tuple[str, Overlaps]] = []
    for alpha in alphas:
        # the informed starts and, from the second alpha on, the previous alpha's fixed points (continuation);
        # per branch the lowest e_t (an informed start alone can land on another fixed point of the same
        # branch: at omega = 0.1, alpha = 0.76 one with mu = 0.084 and e_t 3.4e-5 higher than the continued one)
        cat = solve(problem, alpha, n_random=0, stability=False, inits=initialisations(problem, 0) + previous)
        fps: dict[str, Any] = {}
        starts: dict[str, str] = {}
        for e in cat.fixed_points:
            if e.converged and e.branch in ("positional", "semantic"):
                if e.branch not in fps or e.result.train_loss < fps[e.branch].train_loss:
                    fps[e.branch], starts[e.branch] = e.result, e.init
        missing = [b for b in ("positional", "semantic") if b not in fps]
        if missing:
            raise ParameterError(f"alpha = {alpha:g}: no converged RS fixed point on the {missing[0]} branch")
        previous = [(f"{b}-previous-alpha", fps[b].overlaps) for b in ("positional", "semantic")]
        main = options.rsb(options.rules[0], SEMANTIC_Y)
        outer, inner = main.rules(channel.shape)
        sem_start = RSBOverlaps.from_rs(fps["semantic"].overlaps, options.split)
        statuses = tuple(
            iterate_rsb(y, alpha, sem_start, outer, inner, channel, problem, main).status for y in main.y_grid
        )
        rs_rows.append(
            RSRow(
                alpha,
                fps["positional"].train_loss,
                fps["semantic"].train_loss,
                statuses,
                starts["positional"],
                starts["semantic"],
            )
        )
        for rule in options.rules:
            opts = options.rsb(rule)
            outer, inner = opts.rules(channel.shape)

            def stability(pt: RSBPoint, outer=outer, inner=inner, alpha=alpha) -> tuple[float, float]:
                return (
                    inner_replicon(pt, alpha, pt.y, outer, inner, problem),
                    mirror_jump_weight(pt.overlaps.V, problem)[0],
                )

            curves[(rule, alpha)] = complexity_curve(
                alpha,
                RSBOverlaps.from_rs(fps["positional"].overlaps, options.split),
                outer,
                inner,
                channel,
                problem,
                opts,
                stability=stability,
                progress=None if progress is None else (lambda p, r=rule, a=alpha: progress(r, a, p)),
            )
    return ComplexityStudy(problem, alphas, options, tuple(rs_rows), curves, time.perf_counter() - t0)


def crossings(
    alphas, positional, semantic, features: dict[float, tuple[CurveFeature, CurveFeature, float, float, float]]
) -> dict[str, Any]:
    """The α at which the equilibrium and threshold energies of the positional branch cross the semantic e_t,
    for one rule. Energies on the RS rule: e_X(α) = e_RS,pos(α) + [e_X − reference] (the 1RSB shift measured on
    the 1RSB rules, docs/rsb.md section 5); gap_X(α) = e_RS,sem(α) − e_X(α), its root by linear interpolation in α.
    Also with the reference of results/rsb (e_t at the smallest converged y)."""
    al = np.asarray(alphas, dtype=float)
    out: dict[str, Any] = {}
    for name, idx in (("equilibrium", 0), ("threshold", 1)):
        feat = [features[a] for a in alphas]
        shift = np.array([f[idx].energy - f[2] for f in feat])  # type: ignore[union-attr]
        shift_small = np.array([f[idx].energy - f[4] for f in feat])  # type: ignore[union-attr]
        gap = np.asarray(semantic) - (np.asarray(positional) + shift)
        gap_small = np.asarray(semantic) - (np.asarray(positional) + shift_small)
        root = linear_crossing(al, gap)
        energy = float(np.interp(root, al, semantic)) if np.isfinite(root) else float("nan")
        out[name] = {
            "alpha": root,
            "alpha_smallest_y_reference": linear_crossing(al, gap_small),
            "energy": energy,
            "shift": shift.tolist(),
            "gap": gap.tolist(),
        }
    return out


def features_with_small_y(points) -> tuple[CurveFeature, CurveFeature, float, float, float]:
    """:func:`curve_features` plus e_t at the smallest converged y (the results/rsb reference)."""
    eq, th, ref, ref_y = curve_features(points)
    ok = [p for p in points if p.status == CONVERGED]
    small = min(ok, key=lambda p: p.y).train_loss if ok else float("nan")
    return eq, th, ref, ref_y, small


def summarise(
    alphas, rules, rs_rows: list[dict[str, Any]], points: dict[tuple[str, float], list[CurvePoint]]
) -> dict[str, Any]:
    """Everything summary.json derives from the rows (the same function re-derives it in ``verify --strict``):
    per rule and α the curve's features, per rule the crossings, and alpha_equilibrium / alpha_threshold (first
    rule; uncertainty: the largest change over the other rules)."""
    alphas = [float(a) for a in alphas]
    pos = [float(r["positional_train_loss"]) for r in rs_rows]
    sem = [float(r["semantic_train_loss"]) for r in rs_rows]
    names = [rule_name(tuple(r)) for r in rules]
    per_rule: dict[str, Any] = {}
    curves: list[dict[str, Any]] = []
    for rule, name in zip(rules, names, strict=True):
        feats = {a: features_with_small_y(points[(name, a)]) for a in alphas}
        for a in alphas:
            eq, th, ref, ref_y, small = feats[a]
            curves.append(
                {
                    "rule": name,
                    "alpha": a,
                    "file": curve_file(tuple(rule), a),
                    "equilibrium": eq.to_dict(),
                    "threshold": th.to_dict(),
                    "reference": ref,
                    "reference_y": ref_y,
                    "smallest_y_train_loss": small,
                }
            )
        per_rule[name] = crossings(alphas, pos, sem, feats)
    main = names[0]
    out: dict[str, Any] = {"curves": curves, "crossings": per_rule}
    for name in ("equilibrium", "threshold"):
        value = per_rule[main][name]["alpha"]
        others = [per_rule[n][name]["alpha"] for n in names[1:]]
        spread = max((abs(v - value) for v in others), default=float("nan"))
        out[f"alpha_{name}"] = {
            "value": value,
            "uncertainty": spread,
            "energy": per_rule[main][name]["energy"],
            "by_rule": {n: per_rule[n][name]["alpha"] for n in names},
            "energy_by_rule": {n: per_rule[n][name]["energy"] for n in names},
            "smallest_y_reference": per_rule[main][name]["alpha_smallest_y_reference"],
            "alpha_grid": alphas,
            "rule": main,
            "method": (
                f"e_{name[:3]}(alpha) on the RS rule = RS e_t(positional) + the 1RSB shift on rule {main} "
                "(outer x inner Gauss-Hermite points per axis) against e_t(y) extrapolated linearly to y = 0; "
                "its crossing with the RS e_t(semantic) by linear interpolation in alpha between the two grid "
                "points that bracket it; uncertainty: the largest change over the other rules"
            ),
        }
    return out


def study_rows(study: ComplexityStudy) -> tuple[list[dict[str, Any]], dict[tuple[str, float], list[CurvePoint]]]:
    rs = [r.to_dict() for r in study.rs]
    pts = {(rule_name(rule), a): list(c.points) for (rule, a), c in study.curves.items()}
    return rs, pts


def complexity_made_for(problem: Problem, alphas, options: ComplexityOptions) -> dict[str, Any]:
    """The settings a complexity folder is made for (known before anything is computed)."""
    return {"problem": problem.to_dict(), "alphas": [float(a) for a in alphas], "options": options.to_dict()}


def write_complexity(folder, study: ComplexityStudy, figure=None) -> dict[str, Any]:
    """The folder: one curve CSV per (rule, α), summary.json (the RS rows, the features, the crossings,
    provenance), the figure (``figure(summary, points) -> Figure``, optional) and the manifest. Returns the summary."""
    from pathlib import Path

    from dotattn.core.io import ensure_writable_dir, provenance, save_figure, write_csv, write_json, write_manifest

    folder = Path(ensure_writable_dir(folder))
    made_for = complexity_made_for(study.problem, study.alphas, study.options)
    prov = provenance(made_for, study.seconds)
    rs, pts = study_rows(study)
    files = []
    for rule in study.options.rules:
        for a in study.alphas:
            name = curve_file(rule, a)
            write_csv(
                folder / name,
                [p.to_row() for p in pts[(rule_name(rule), a)]],
                CURVE_COLUMNS,
                comment=f"1RSB complexity curve, positional branch, alpha = {a:g}, rule {rule_name(rule)}",
            )
            files.append(name)
    summary = dict(prov)
    summary["rs"] = rs
    summary.update(summarise(study.alphas, study.options.rules, rs, pts))
    write_json(folder / SUMMARY_FILE, summary)
    files.append(SUMMARY_FILE)
    if figure is not None:
        save_figure(figure(summary, pts), folder / "complexity.png", {"parameters": made_for})
        files.append("complexity.png")
    write_manifest(folder, files, made_for, provenance_record=prov)
    return summary
