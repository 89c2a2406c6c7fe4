"""The catalogue of fixed points at one (α, ω), the selector, and the public :func:`solve`.

SPEC section 4. Every initialisation (informed positional, informed semantic, uninformative
and ``n_random`` random ones) is iterated first on a coarse rule (cheap), the coarse fixed
points are de-duplicated, and only the distinct ones are refined on the fine rule. Fine fixed
points are de-duplicated again (by invariants: e_t, ε_g, ‖θ‖, ‖μ‖, Tr q), labelled
positional / semantic / mixed / uninformative, and the converged one with the lowest
training loss e_t is *selected*: it is the global minimum of the empirical risk and its ε_g
is the theory's prediction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dotattn.core.validation import ParameterError, check_alpha, check_bool, check_instance, check_int
from dotattn.positional_semantic.baseline import linear_baseline_test_error
from dotattn.positional_semantic.labels import BRANCHES, NO_BRANCH
from dotattn.positional_semantic.labels import branch_label as _label
from dotattn.positional_semantic.overlaps import Overlaps, overlaps_from_scalars, untied_lift
from dotattn.positional_semantic.problem import Problem, check_problem
from dotattn.positional_semantic.quadrature import MAX_TENSOR_NODES, GaussianRule, make_rule
from dotattn.positional_semantic.records import BranchPoint, Stability
from dotattn.positional_semantic.stability import rs_stability
from dotattn.positional_semantic.state_evolution import FixedPoint, SolverOptions, iterate

__all__ = [
    "CatalogueEntry",
    "Catalogue",
    "QuadratureSpec",
    "solve",
    "branch_label",
    "initialisations",
    "continued_starts",
    "informed_branches",
    "start_count",
    "default_quadrature",
    "coarse_difference",
    "QuadratureCheck",
    "BRANCHES",
    "QUADRATURE_KINDS",
]

QUADRATURE_KINDS: tuple[str, ...] = ("gauss-hermite", "qmc")
_STANDARD = {"gauss-hermite": (12, 6), "qmc": (14, 11)}  # (order, coarse order) of each kind's standard rule
_LABEL_THRESHOLD = 1e-6  # ‖θ‖/σ² or ‖μ‖ below this counts as zero
COARSE_MAX_ITER = 250
"""Iteration budget of the coarse pass (its fixed points converge in 15-50 iterations; a start that
needs more is solved on the fine rule from the start itself)."""
CONTINUATION_SPAN = 0.1
CONTINUATION_STEPS = 5
""":func:`solve` follows each informed branch to α from (1 − CONTINUATION_SPAN) α in CONTINUATION_STEPS equal
steps (warm starts) and adds the result as one more start. The informed start alone can land on another fixed
point of the same label: at ω = 0.1 on the default rule it jumps between α = 0.7505 and 0.751 to a positional
fixed point with m = 0.084 instead of the branch's m = 0.18 (e_t 3.4e-5 higher at α = 0.76), which made the
catalogue select the semantic branch at α = 0.751, below α_c = 0.7516 of the phase diagram (which follows the
branch by continuation). The continued start reaches the branch the phase diagram follows; of two fixed points
with one label the catalogue reports both and selects by e_t."""
MAX_RANDOM_STARTS = 1000
"""Most random initialisations :func:`solve` accepts (each costs about one fixed point, ~1 s)."""


@dataclass(frozen=True)
class QuadratureSpec:
    """Which Gaussian rule to use: kind 'gauss-hermite' (order per axis) or 'qmc' (order = log2 points)."""

    kind: str = "gauss-hermite"
    order: int = 12
    coarse_order: int | None = 6
    scramblings: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        """Validate every field (ParameterError naming the field and its allowed range)."""
        if self.kind not in QUADRATURE_KINDS:
            raise ParameterError(f"quadrature kind must be one of {', '.join(QUADRATURE_KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "scramblings", check_int("quadrature scramblings", self.scramblings, 2, 64))
        object.__setattr__(self, "seed", check_int("quadrature seed", self.seed, 0))
        object.__setattr__(self, "order", check_int("quadrature order", self.order, 1))
        if self.coarse_order is not None:
            object.__setattr__(self, "coarse_order", check_int("quadrature coarse_order", self.coarse_order, 1))

    def max_order(self, dim: int) -> int:
        """Largest order whose rule in ``dim`` dimensions has at most :data:`MAX_TENSOR_NODES` nodes
        (Gauss-Hermite: order**dim; QMC: 2**order points times the scramblings)."""
        if self.kind == "qmc":
            return int(np.floor(np.log2(MAX_TENSOR_NODES / self.scramblings)))
        k = max(1, int(MAX_TENSOR_NODES ** (1.0 / dim)))
        while (k + 1) ** dim <= MAX_TENSOR_NODES:
            k += 1
        while k > 1 and k**dim > MAX_TENSOR_NODES:
            k -= 1
        return k

    @classmethod
    def standard(cls, kind: str) -> QuadratureSpec:
        """The standard rule of a kind: Gauss-Hermite order 12 (coarse 6), QMC 2^14 points (coarse 2^11)."""
        if kind not in _STANDARD:
            raise ParameterError(f"quadrature kind must be one of {', '.join(QUADRATURE_KINDS)}, got {kind!r}")
        return cls(kind, *_STANDARD[kind])

    def check(self, problem: Problem) -> None:
        """Checks that involve the problem: the rule must fit in memory (at most :data:`MAX_TENSOR_NODES`
        nodes in the problem's L(r + r_t) dimensions; ParameterError stating the allowed orders)."""
        D = problem.gaussian_dim
        top = self.max_order(D)
        what = "log2 of the points" if self.kind == "qmc" else "points per axis"
        for name, value in (("quadrature order", self.order), ("quadrature coarse_order", self.coarse_order)):
            if value is not None and value > top:
                raise ParameterError(
                    f"{name} must be in [1, {top}] for the {self.kind} rule in {D} dimensions "
                    f"({what}; at most {MAX_TENSOR_NODES:,} nodes), got {value}"
                )

    def rule(self, dim: int) -> GaussianRule:
        return make_rule(dim, self.kind, self.order, self.scramblings, self.seed)

    def coarse_rule(self, dim: int) -> GaussianRule | None:
        if self.coarse_order is None:
            return None
        return make_rule(dim, self.kind, self.coarse_order, self.scramblings, self.seed)

    def finer(self) -> QuadratureSpec:
        """The rule used by the quadrature check: +4 points per axis (GH) or 4x the points (QMC)."""
        return replace(self, order=self.order + (4 if self.kind == "gauss-hermite" else 2))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "order": self.order,
            "coarse_order": self.coarse_order,
            **({"scramblings": self.scramblings, "seed": self.seed} if self.kind == "qmc" else {}),
        }


def default_quadrature(problem: Problem, kind: str | None = None) -> QuadratureSpec:
    """Gauss-Hermite order 12 in 4 dimensions (the toy model; from the convergence study in the
    README), a tensor rule of at most ~50k nodes up to 6 dimensions, QMC beyond. A ``kind`` other
    than that default gives that kind's :meth:`QuadratureSpec.standard` rule."""
    D = problem.gaussian_dim
    if D <= 4:
        auto = QuadratureSpec("gauss-hermite", 12, 6)
    elif D <= 6:
        auto = QuadratureSpec("gauss-hermite", 6, 4)
    else:
        auto = QuadratureSpec.standard("qmc")
    return auto if kind is None or kind == auto.kind else QuadratureSpec.standard(kind)


def branch_label(overlaps: Overlaps, problem: Problem) -> str:
    """positional / semantic / mixed / uninformative from ‖μ‖ and ‖θ‖/σ² (zero below 1e-6)."""
    return _label(
        positional=bool(np.linalg.norm(overlaps.mu) > _LABEL_THRESHOLD),
        semantic=bool(np.linalg.norm(overlaps.theta) / problem.sigma**2 > _LABEL_THRESHOLD),
    )


@dataclass(frozen=True)
class CatalogueEntry:
    """One fixed point of the catalogue: the solver result plus its label and selection flag."""

    init: str
    branch: str
    selected: bool
    result: FixedPoint
    stability: Stability | None = None

    # convenience views used by the CLI, the sweeps and the ERM comparison
    @property
    def status(self) -> str:
        return self.result.status

    @property
    def converged(self) -> bool:
        return self.result.converged

    @property
    def overlaps(self) -> Overlaps:
        return self.result.overlaps

    @property
    def q(self) -> np.ndarray:
        return self.result.overlaps.q

    @property
    def V(self) -> np.ndarray:
        return self.result.overlaps.V

    @property
    def theta(self) -> np.ndarray:
        return self.result.overlaps.theta

    @property
    def mu(self) -> np.ndarray:
        return self.result.overlaps.mu

    @property
    def m(self) -> float:
        return self.result.overlaps.m

    @property
    def train_loss(self) -> float:
        return self.result.train_loss

    @property
    def test_error(self) -> float:
        return self.result.test_error

    def point(self, omega: float) -> BranchPoint:
        """This entry as a typed record (its row is what ``solve --json`` prints)."""
        return BranchPoint.of(
            self.result,
            omega=omega,
            branch=self.branch,
            selected=self.selected,
            init=self.init,
            stability=self.stability,
        )


@dataclass(frozen=True)
class Catalogue:
    """All fixed points found at one (α, ω), the selected one, and the linear baseline."""

    problem: Problem
    alpha: float
    fixed_points: tuple[CatalogueEntry, ...]
    linear_baseline_test_error: float
    quadrature: dict
    seconds: float
    quadrature_check: list[QuadratureCheck] | None = field(default=None)

    @property
    def selected(self) -> CatalogueEntry | None:
        for e in self.fixed_points:
            if e.selected:
                return e
        return None

    @property
    def any_converged(self) -> bool:
        return any(e.converged for e in self.fixed_points)

    def branch(self, name: str) -> CatalogueEntry | None:
        """The converged fixed point with this label and lowest e_t, or None."""
        cands = [e for e in self.fixed_points if e.converged and e.branch == name]
        return min(cands, key=lambda e: e.train_loss) if cands else None

    def to_dict(self) -> dict[str, Any]:
        d = {
            "params": {**self.problem.to_dict(), "alpha": self.alpha},
            "fixed_points": [e.point(self.problem.omega).to_row() for e in self.fixed_points],
            "linear_baseline_test_error": self.linear_baseline_test_error,
            "quadrature": self.quadrature,
            "seconds": round(self.seconds, 3),
        }
        if self.quadrature_check is not None:
            d["quadrature_check"] = [c.to_row() for c in self.quadrature_check]
        return d


def initialisations(problem: Problem, n_random: int, seed: int = 0) -> list[tuple[str, Overlaps]]:
    """Informed positional, informed semantic, (for r >= 2) informed mixed, uninformative, then
    ``n_random`` random starts.

    The mixed start gives the student one positional direction (q = 0.02, μ = 0.2 along the
    positional direction) and one semantic direction (q = 0.9, θ = 0.35), the two informed
    starts side by side; with r = 1 a student cannot hold both. For the untied student every start
    is lifted to W = [Q K] by :func:`~dotattn.positional_semantic.overlaps.untied_lift` (query and key alike).
    """
    inits = [
        ("positional", overlaps_from_scalars(problem, 0.02, 0.2, 15.0, 0.0)),
        ("semantic", overlaps_from_scalars(problem, 0.9, 0.0, 15.0, 0.35)),
    ]
    if problem.rank >= 2:
        pos, sem = inits[0][1], inits[1][1]
        q_mixed = np.array(sem.q)
        q_mixed[0, 0] = pos.q[0, 0]
        theta = np.zeros_like(sem.theta)
        theta[1] = sem.theta[0]
        inits.append(("mixed", Overlaps(q=q_mixed, V=sem.V, theta=theta, mu=pos.mu)))
    inits.append(("uninformative", overlaps_from_scalars(problem, 0.1, 0.0, 25.0, 0.0)))
    rng = np.random.default_rng(seed)
    r, rt, L = problem.rank, problem.teacher_rank, problem.L
    s2 = problem.sigma**2
    w, U = np.linalg.eigh(problem.G)
    G_half = (U * np.sqrt(np.clip(w, 0, None))) @ U.T
    for i in range(n_random):
        q = rng.uniform(0.1, 1.0)
        th = np.zeros((r, rt))
        k = min(r, rt)
        th[np.arange(k), np.arange(k)] = rng.uniform(-0.9, 0.9, size=k) * np.sqrt(q * s2)
        mu = G_half @ rng.uniform(-0.3, 0.3, size=(L, r))
        V = rng.uniform(5.0, 30.0)
        inits.append((f"random-{i + 1}", Overlaps(q=q * np.eye(r), V=V * np.eye(r), theta=th, mu=mu)))
    if problem.student == "untied":  # query and key both start from the tied start
        return [(name, untied_lift(o)) for name, o in inits]
    return inits


def informed_branches(inits: list[tuple[str, Overlaps]]) -> list[tuple[str, Overlaps]]:
    """The informed starts of ``inits`` (positional, semantic, mixed: each one branch's start)."""
    return [(name, o) for name, o in inits if name in BRANCHES and name != "uninformative"]


def start_count(problem: Problem, n_random: int) -> int:
    """Starts :func:`solve` counts in its progress: the initialisations and one continued start per informed
    branch (:func:`continued_starts`)."""
    inits = initialisations(problem, n_random, 0)
    return len(inits) + len(informed_branches(inits))


def continued_starts(
    problem: Problem, alpha: float, inits: list[tuple[str, Overlaps]], rule: GaussianRule, options: SolverOptions
) -> list[tuple[str, Overlaps]]:
    """Per informed branch of ``inits`` (positional, semantic, mixed), the start ``"<branch>-continued"``: the
    branch solved from its informed start at (1 − :data:`CONTINUATION_SPAN`) α and followed to α in
    :data:`CONTINUATION_STEPS` steps on ``rule``, each warm-started from the previous fixed point; the last
    fixed point that still carries the branch's label (none if the first does not)."""
    out = []
    ladder = alpha * (1 - CONTINUATION_SPAN * np.arange(CONTINUATION_STEPS, 0, -1) / CONTINUATION_STEPS)
    ladder_options = replace(options, max_iter=min(options.max_iter, COARSE_MAX_ITER))
    for name, init in informed_branches(inits):
        last: Overlaps | None = None
        start = init
        for a in ladder:
            fp = iterate(problem, float(a), start, rule, ladder_options)
            if not fp.converged or branch_label(fp.overlaps, problem) != name:
                break
            last = start = fp.overlaps
        if last is not None:
            out.append((f"{name}-continued", last))
    return out


def _same(a: FixedPoint, b: FixedPoint, rtol: float) -> bool:
    def inv(fp: FixedPoint) -> np.ndarray:
        o = fp.overlaps
        return np.array(
            [fp.train_loss, fp.test_error, np.linalg.norm(o.theta), np.linalg.norm(o.mu), np.trace(o.q), np.trace(o.V)]
        )

    x, y = inv(a), inv(b)
    return bool(np.all(np.abs(x - y) <= rtol * np.maximum(np.abs(x), np.abs(y)) + 1e-7))


def _dedupe(results: list[tuple[str, FixedPoint]], rtol: float) -> list[tuple[str, FixedPoint]]:
    """Drop converged duplicates (keep the first); failures are kept once per distinct status."""
    kept: list[tuple[str, FixedPoint]] = []
    for name, fp in results:
        if fp.converged:
            if any(k.converged and _same(k, fp, rtol) for _, k in kept):
                continue
        kept.append((name, fp))
    return kept


def _check_inits(inits: Any, problem: Problem) -> list[tuple[str, Overlaps]]:
    """``solve(inits=...)``: a non-empty list of (name, Overlaps) pairs whose matrices have the problem's
    shapes (q, V: r×r, θ: r×r_t, μ: L×r with r the field rank); ParameterError in one line otherwise."""
    what = "inits must be a non-empty list of (name, dotattn.Overlaps) pairs"
    if isinstance(inits, (str, bytes)) or not isinstance(inits, (list, tuple)) or not inits:
        raise ParameterError(f"{what}, got {type(inits).__name__}")
    r, rt, L = problem.field_rank, problem.teacher_rank, problem.L
    out = []
    for k, item in enumerate(inits):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise ParameterError(f"{what}; item {k} is {type(item).__name__}")
        name, o = item
        if not isinstance(o, Overlaps):
            raise ParameterError(f"{what}; item {k} ({name!r}) holds a {type(o).__name__}")
        for part, shape in (("q", (r, r)), ("V", (r, r)), ("theta", (r, rt)), ("mu", (L, r))):
            got = np.shape(getattr(o, part))
            if got != shape:
                raise ParameterError(f"inits: item {k} ({name!r}): {part} has shape {got}, the problem needs {shape}")
        out.append((name, o))
    return out


def solve(
    problem: Problem,
    alpha: float,
    *,
    quadrature: QuadratureSpec | None = None,
    n_random: int = 8,
    options: SolverOptions = SolverOptions(),
    seed: int = 0,
    check_quadrature: bool = False,
    inits: list[tuple[str, Overlaps]] | None = None,
    stability: bool = True,
    report: Callable[[int], None] | None = None,
) -> Catalogue:
    """All fixed points at sample complexity ``alpha`` for ``problem``, with the selected one.

    Parameters: ``quadrature`` (default :func:`default_quadrature`), ``n_random`` random
    initialisations, ``options`` for the iteration, ``check_quadrature`` to solve every
    converged fixed point again on a finer rule and report the change of every output,
    ``stability`` to add the RS stability of every converged fixed point (:func:`dotattn.positional_semantic.stability.rs_stability`).
    ``report(k)`` (progress): ``k`` more starts finished; called until every start of ``inits`` (the informed
    ones and ``n_random``) is counted once (a start merged with another on the coarse rule counts then).
    """
    t0 = time.perf_counter()
    check_problem(problem)
    alpha = check_alpha(alpha)
    if quadrature is not None:
        check_instance("quadrature", quadrature, QuadratureSpec, "dotattn.QuadratureSpec")
    check_instance("options", options, SolverOptions, "dotattn.SolverOptions")
    n_random = check_int("n_random (random starts)", n_random, 0, MAX_RANDOM_STARTS)
    seed = check_int("seed", seed, 0)
    check_quadrature = check_bool("check_quadrature", check_quadrature)
    stability = check_bool("stability", stability)
    quad = quadrature or default_quadrature(problem)
    quad.check(problem)
    if check_quadrature:
        step, top = quad.finer().order - quad.order, quad.max_order(problem.gaussian_dim)
        if quad.order + step > top:
            raise ParameterError(
                f"quadrature order must be in [1, {top - step}] with check_quadrature (it solves again at "
                f"order + {step}; at most {MAX_TENSOR_NODES:,} nodes), got {quad.order}"
            )
    options.check(problem)
    D = problem.gaussian_dim
    rule = quad.rule(D)
    coarse = quad.coarse_rule(D)

    def tell(k: int) -> None:
        if report is not None and k > 0:
            report(k)

    if inits is not None:
        inits = _check_inits(inits, problem)
    else:
        inits = initialisations(problem, n_random, seed)
        continued = continued_starts(problem, alpha, inits, coarse or rule, options)
        tell(len(informed_branches(inits)) - len(continued))  # a branch left on the way: no start, counted done
        inits += continued

    if coarse is not None:
        # cheap pass on the coarse rule; a start that fails there is reported as it failed
        # coarse fixed points within the coarse rule's own error (2 % in every invariant) are
        # the same fine fixed point; refining both would only repeat the work
        # an informed start that fails on the coarse rule is solved on the fine rule from the start
        # itself: the coarse rule may lack a fixed point the fine one has (measured: the rank-2
        # semantic branch at alpha = 1 runs into the budget on Gauss-Hermite 4 and converges in 40
        # iterations on the default 6); if it fails there too, that failure is reported. Random
        # starts are a search, not a branch: one that fails on the coarse rule is reported as it
        # failed (solving them again on the fine rule took the rank-2 catalogue at alpha = 2 from
        # 66 s to 294 s of CPU; all five ended on gauge (rotated) copies of the informed fixed points,
        # which the tensor rule's anisotropy makes differ by <= 4e-7 in e_t)
        starts = dict(inits)
        coarse_options = replace(options, max_iter=min(options.max_iter, COARSE_MAX_ITER))
        coarse_results = _dedupe(
            [(name, iterate(problem, alpha, init, coarse, coarse_options)) for name, init in inits], 2e-2
        )
        tell(len(inits) - len(coarse_results))  # merged with another start: done

        def refined(name: str, fp: FixedPoint) -> FixedPoint:
            out = (
                _with_coarse_error(iterate(problem, alpha, fp.overlaps, rule, options), fp, quad)
                if fp.converged
                else _fine_after_coarse_failure(iterate(problem, alpha, starts[name], rule, options), fp)
                if not name.startswith("random-")
                else replace(fp, message=f"{fp.message} (on the coarse rule)")
            )
            tell(1)
            return out

        fine = [(name, refined(name, fp)) for name, fp in coarse_results]
    else:

        def direct(init: Overlaps) -> FixedPoint:
            out = iterate(problem, alpha, init, rule, options)
            tell(1)
            return out

        fine = [(name, direct(init)) for name, init in inits]
    fine = _dedupe(fine, 1e-6)
    converged = [(i, fp) for i, (_, fp) in enumerate(fine) if fp.converged]
    best = min(converged, key=lambda t: t[1].train_loss)[0] if converged else -1
    entries = tuple(
        CatalogueEntry(
            init=name,
            branch=branch_label(fp.overlaps, problem) if fp.converged else NO_BRANCH,
            selected=(i == best),
            result=fp,
            stability=rs_stability(fp.overlaps, alpha, problem, random_starts=options.random_starts)
            if stability and fp.converged
            else None,
        )
        for i, (name, fp) in enumerate(fine)
    )
    check = _quadrature_check(problem, alpha, entries, quad, options) if check_quadrature else None
    return Catalogue(
        problem=problem,
        alpha=alpha,
        fixed_points=entries,
        linear_baseline_test_error=linear_baseline_test_error(problem),
        quadrature={**quad.to_dict(), "nodes": rule.size},
        seconds=time.perf_counter() - t0,
        quadrature_check=check,
    )


def _fine_after_coarse_failure(fine: FixedPoint, coarse: FixedPoint) -> FixedPoint:
    """The fine-rule run of a start that failed on the coarse rule; its message says so."""
    note = f"the coarse rule: {coarse.status}, {coarse.message}"
    return replace(fine, message=f"{fine.message} (directly on the fine rule; {note})")


def _with_coarse_error(fine: FixedPoint, coarse: FixedPoint, quad: QuadratureSpec) -> FixedPoint:
    """Attach a quadrature-error estimate: the QMC standard error, or for Gauss-Hermite the change
    from the coarse rule (a conservative bound: the coarse rule is much cruder than the fine one)."""
    if not fine.converged or quad.kind == "qmc":
        return fine
    return replace(
        fine, quadrature_error=coarse_difference(fine, coarse, f"|order {quad.order} - order {quad.coarse_order}|")
    )


def coarse_difference(fine: FixedPoint, coarse: FixedPoint, method: str) -> dict[str, Any]:
    """Quadrature-error estimate of a fixed point from the same fixed point on a coarser rule:
    ``{"train_loss": |Δe_t|, "test_error": |Δε_g|, "method": method}``."""
    return {
        "train_loss": abs(fine.train_loss - coarse.train_loss),
        "test_error": abs(fine.test_error - coarse.test_error),
        "method": method,
    }


@dataclass(frozen=True)
class QuadratureCheck:
    """One converged fixed point re-solved on a finer rule (``solve --check-quadrature``).

    ``branch``, ``init``: the entry checked; ``finer_rule``: the finer rule (its spec and ``nodes``);
    ``status``: the re-solve's status; ``change``: finer minus this rule for the overlaps (max abs
    entry change of q, V, θ, μ) and for e_t, ε_g (signed); ``finer_train_loss``,
    ``finer_test_error``: the finer rule's e_t and ε_g. The last three are empty unless converged.
    """

    branch: str
    init: str
    finer_rule: dict
    status: str
    change: dict = field(default_factory=dict)
    finer_train_loss: float = float("nan")
    finer_test_error: float = float("nan")

    def to_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "branch": self.branch,
            "init": self.init,
            "finer_rule": dict(self.finer_rule),
            "status": self.status,
        }
        if self.change:
            row["change"] = dict(self.change)
            row["finer"] = {"train_loss": self.finer_train_loss, "test_error": self.finer_test_error}
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> QuadratureCheck:
        finer = row.get("finer") or {}
        return cls(
            branch=row["branch"],
            init=row["init"],
            finer_rule=dict(row["finer_rule"]),
            status=row["status"],
            change={k: float(v) for k, v in (row.get("change") or {}).items()},
            finer_train_loss=float(finer.get("train_loss", float("nan"))),
            finer_test_error=float(finer.get("test_error", float("nan"))),
        )


def _quadrature_check(
    problem: Problem, alpha: float, entries: tuple[CatalogueEntry, ...], quad: QuadratureSpec, options: SolverOptions
) -> list[QuadratureCheck]:
    """Re-solve each converged fixed point on a finer rule; report every output's change."""
    finer = quad.finer()
    rule = finer.rule(problem.gaussian_dim)
    out = []
    for e in entries:
        if not e.converged:
            continue
        fp = iterate(problem, alpha, e.overlaps, rule, options)
        spec = {**finer.to_dict(), "nodes": rule.size}
        if not fp.converged:
            out.append(QuadratureCheck(branch=e.branch, init=e.init, finer_rule=spec, status=fp.status))
            continue
        a, b = e.overlaps, fp.overlaps
        change = {
            "q": float(np.max(np.abs(b.q - a.q))),
            "V": float(np.max(np.abs(b.V - a.V))),
            "theta": float(np.max(np.abs(b.theta - a.theta))),
            "mu": float(np.max(np.abs(b.mu - a.mu))),
            "train_loss": fp.train_loss - e.train_loss,
            "test_error": fp.test_error - e.test_error,
        }
        out.append(
            QuadratureCheck(
                branch=e.branch,
                init=e.init,
                finer_rule=spec,
                status=fp.status,
                change=change,
                finer_train_loss=fp.train_loss,
                finer_test_error=fp.test_error,
            )
        )
    return out
