"""One branch of fixed points along α at fixed ω: continuation, spinodal bisection, and the
selected branch at each α (SPEC sections 4 and 5).

A :class:`Branch` is seeded from its informed initialisation (:func:`dotattn.positional_semantic.catalogue.initialisations`)
and followed along a sorted α grid by continuation (warm start from the neighbouring α) until it
ceases to exist: no convergence, invalid overlaps, or the solver flows to another branch, both from
the neighbour and from the informed start (a branch that emerges continuously from the uninformative
point converges slowly next to it, so continuation from there can fail where the branch exists). Each
end inside the grid is bracketed by bisection (:meth:`Branch.spinodals`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from dotattn.core.status import ABSENT
from dotattn.positional_semantic.catalogue import QuadratureSpec, branch_label, coarse_difference, initialisations
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import GaussianRule
from dotattn.positional_semantic.records import BranchPoint
from dotattn.positional_semantic.stability import rs_stability
from dotattn.positional_semantic.state_evolution import FixedPoint, SolverOptions, iterate, predict_start

__all__ = ["Branch", "follow_branches", "branch_names", "selected_at", "branch_records", "FOLLOWED_BRANCHES"]

DISTINCT_TRAIN_LOSS = 1e-9
"""Two solves of one fixed point (tolerance 1e-8 on the overlaps) from different starts agree in
e_t to far better than this (e_t is stationary, so its error is second order); the nearby
positional fixed points differ by 3e-7 and more. :meth:`Branch.lowest_of_both_sides` replaces a
point only if the other pass is lower by more than this, so rounding never picks the record."""

FOLLOWED_BRANCHES = ("positional", "semantic")
"""The informed branches followed at every ω (plus ``mixed`` for a student of rank r >= 2)."""


class Branch:
    """Fixed points of one branch at one ω, keyed by α, with continuation and bisection.

    ``points`` α -> converged fixed point on the branch; ``failed`` α -> the result where the
    branch was sought but not found (a failure, or a fixed point on another branch).
    ``secant`` (default off): start continuation and bisection steps from the secant through the
    last two points (:func:`dotattn.positional_semantic.state_evolution.predict_start`) rather than from the last
    point; ``secant_at`` (default off): likewise in :meth:`at`, from each side's neighbour and
    the next point beyond it. Measured on whole default columns (``benchmarks/levers.py
    --column``): neither pays (−1.5 % / −5 % iterations at ω = 0.3, none at ω = 0.1, CPU time
    unchanged or worse), and at ω = 0.1, where the positional branch has several nearby fixed
    points on the default rule, both land on other ones (e_t 3e-6 apart) and ``secant_at`` moves
    α_c by 5e-4 (0.7546 instead of 0.7551), so α_c would again depend on the grid.
    """

    secant: bool = False
    secant_at: bool = False

    def __init__(
        self,
        name: str,
        problem: Problem,
        rule: GaussianRule,
        coarse: GaussianRule | None,
        options: SolverOptions,
        report: Callable[[], None] | None = None,
    ) -> None:
        self.name, self.problem, self.rule, self.coarse, self.options = name, problem, rule, coarse, options
        self.report = report  # called after every fixed point solved (progress)
        self.points: dict[float, FixedPoint] = {}
        self.failed: dict[float, FixedPoint] = {}
        self.restarts: list[float] = []
        """Grid α where continuation left the branch but the informed start found it (:meth:`follow`)."""
        self.ends: dict[str, tuple[float, float, FixedPoint]] = {}
        """Set by :meth:`spinodals`: side ("lower" / "upper") -> (last α on the branch, first α off
        it, the fixed point at the former) of the bisection."""
        self.cpu: dict[str, float] = {"follow": 0.0, "two_sided": 0.0, "stability": 0.0}
        """CPU seconds (this process) spent here: following along the grid, the second pass of
        :meth:`lowest_of_both_sides`, the RS stability of the records (the phase diagram's stage split)."""

    def on_branch(self, fp: FixedPoint) -> bool:
        return fp.converged and branch_label(fp.overlaps, self.problem) == self.name

    def solve_from(self, alpha: float, start: FixedPoint | None, before: FixedPoint | None = None) -> FixedPoint:
        """Fixed point at α, warm-started from ``start`` (or the informed initialisation); with
        ``before`` (a point of the branch beyond ``start``) from the secant through the two."""
        if start is None:
            init = dict(initialisations(self.problem, 0))[self.name]
            if self.coarse is not None:
                pre = iterate(self.problem, alpha, init, self.coarse, self.options)
                init = pre.overlaps if pre.converged else init
            fp = iterate(self.problem, alpha, init, self.rule, self.options)
        else:
            init, warm = predict_start(self.problem, alpha, start, before if self.secant else None)
            fp = iterate(self.problem, alpha, init, self.rule, self.options, warm=warm)
        if self.report is not None:
            self.report()
        return fp

    def quadrature_error(self, fp: FixedPoint) -> dict | None:
        """Quadrature-error estimate of e_t and ε_g of a fixed point of this branch
        (``{"train_loss", "test_error", "method"}``): the QMC standard errors it carries, else
        |fine − coarse| from solving it again on the coarse rule (from its overlaps, at its α; a
        conservative estimate, as in the catalogue). None without a coarse rule, or if the coarse
        solve does not converge on this branch."""
        if "train_loss" in fp.quadrature_error:
            return fp.quadrature_error
        if self.coarse is None or not self.on_branch(fp):
            return None
        coarse = iterate(self.problem, fp.alpha, fp.overlaps, self.coarse, self.options)
        if self.report is not None:
            self.report()
        if not self.on_branch(coarse):
            return None
        return coarse_difference(fp, coarse, f"|{self.rule.size} nodes - {self.coarse.size} nodes|")

    def neighbours(self, alpha: float) -> list[tuple[FixedPoint, FixedPoint | None]]:
        """The known fixed points nearest to α from below and from above (one or two), each with
        the next known point beyond it on the same side (None if there is none)."""
        below = sorted(a for a in self.points if a <= alpha)[::-1]
        above = sorted(a for a in self.points if a > alpha)
        return [
            (self.points[side[0]], self.points[side[1]] if len(side) > 1 else None) for side in (below, above) if side
        ]

    def at(self, alpha: float) -> FixedPoint | None:
        """The branch at an off-grid α (for Brent); None if it is not found there.

        Solved from the known neighbour on each side (secant through it and the next point on
        that side, :attr:`secant_at`); of the results on the branch, the one
        of lowest e_t. On a discretised rule one branch can have several nearby fixed points (e.g.
        the positional branch at ω <= 0.2 on the 12-point rule: m = 0.172 and 0.182 at ω = 0.1,
        α = 0.755, e_t differing by 3e-7), reached from different sides; taking the lower one
        from both sides makes the result independent of which grid neighbour is nearer (so of
        the α grid), keeps Brent's function continuous inside a bracket, and follows the lower
        fixed point, the one that competes for the global minimum.
        """
        if alpha in self.points:
            return self.points[alpha]
        starts: Sequence[tuple[FixedPoint | None, FixedPoint | None]] = self.neighbours(alpha) or [(None, None)]
        found = [
            fp
            for fp in (self.solve_from(alpha, start, before if self.secant_at else None) for start, before in starts)
            if self.on_branch(fp)
        ]
        return min(found, key=lambda fp: fp.train_loss) if found else None

    def follow(self, alphas: list[float], seed_order: list[int], two_sided: bool = False) -> None:
        """Seed at the first index of ``seed_order`` that works, then continue both ways (where
        continuation leaves the branch, once more from the informed start before the branch ends:
        :attr:`restarts`); with
        ``two_sided`` (:meth:`lowest_of_both_sides`) every grid point is then also solved from its
        neighbour on the other side and the lower e_t kept."""
        t0 = time.process_time()
        seed = None
        for i in seed_order:
            fp = self.solve_from(alphas[i], None)
            if self.on_branch(fp):
                seed = i
                self.points[alphas[i]] = fp
                break
            self.failed[alphas[i]] = fp
        if seed is None:
            self.cpu["follow"] += time.process_time() - t0
            return
        for step in (-1, 1):
            prev, before = self.points[alphas[seed]], None
            i = seed + step
            while 0 <= i < len(alphas):
                fp = self.solve_from(alphas[i], prev, before)
                restarted = False
                if not self.on_branch(fp):
                    retry = self.solve_from(alphas[i], None)  # the informed start, before declaring an end
                    if not self.on_branch(retry):
                        self.failed[alphas[i]] = fp
                        break
                    fp, restarted = retry, True
                    self.restarts.append(alphas[i])
                self.points[alphas[i]] = fp
                before, prev = (None if restarted else prev), fp
                i += step
        t1 = time.process_time()
        self.cpu["follow"] += t1 - t0
        if two_sided:
            self.lowest_of_both_sides(alphas, seed)
            self.cpu["two_sided"] += time.process_time() - t1

    def lowest_of_both_sides(self, alphas: list[float], seed: int) -> None:
        """Continuation reaches each grid point from one side only (away from the seed); where one
        branch has several nearby fixed points (the positional branch at small ω on the default
        rule, m jumping between 0.14, 0.06 and 0.02 at ω = 0, α = 1.5-1.9) which one it lands on
        depends on the path, and with it the records' RS stability. Here a second continuation
        runs back from the far end towards the seed (index ``seed`` of ``alphas``), and at every α
        the fixed point of lower e_t of the two passes (by more than :data:`DISTINCT_TRAIN_LOSS`) is
        kept and continued from, so the branch
        is the lowest one the solver finds from both sides (one more solve per grid point)."""
        on = sorted(self.points)
        order = on[::-1] if alphas.index(on[0]) == seed else on
        for prev_a, a in zip(order, order[1:], strict=False):
            fp = self.solve_from(a, self.points[prev_a])
            if self.on_branch(fp) and fp.train_loss < self.points[a].train_loss - DISTINCT_TRAIN_LOSS:
                self.points[a] = fp

    def spinodals(self, alphas: list[float], tol: float) -> dict[str, float | None]:
        """Ends of the followed segment inside the grid, bracketed to ``tol`` by bisection (the
        midpoint of the final bracket; the bracket and its last fixed point are kept in :attr:`ends`)."""
        out: dict[str, float | None] = {"lower": None, "upper": None}
        if not self.points:
            return out
        lo, hi = min(self.points), max(self.points)
        grid = sorted(alphas)
        for side, inside, outside in (("lower", lo, _neighbour(grid, lo, -1)), ("upper", hi, _neighbour(grid, hi, +1))):
            if outside is None:
                continue
            good, bad = inside, outside
            start, before = self.points[inside], None
            while abs(bad - good) > tol:
                mid = 0.5 * (good + bad)
                fp = self.solve_from(mid, start, before)
                if self.on_branch(fp):
                    good, start, before = mid, fp, start
                else:
                    bad = mid
            out[side] = 0.5 * (good + bad)
            self.ends[side] = (good, bad, start)
        return out

    def record(self, omega: float, alpha: float, selected: bool) -> BranchPoint | None:
        """The branch at α as a record: its fixed point with its RS stability
        (:func:`dotattn.positional_semantic.stability.rs_stability`), or why it is absent (None if not sought)."""
        if alpha in self.points:
            fp = self.points[alpha]
            t0 = time.process_time()
            stability = rs_stability(fp.overlaps, alpha, self.problem, random_starts=self.options.random_starts)
            self.cpu["stability"] += time.process_time() - t0
            return BranchPoint.of(fp, omega=omega, branch=self.name, selected=selected, stability=stability)
        miss = self.failed.get(alpha)
        if miss is None:
            return None
        if miss.converged:  # flowed to another branch
            return BranchPoint.of(
                miss,
                omega=omega,
                branch=self.name,
                selected=False,
                status=ABSENT,
                message=f"flows to {branch_label(miss.overlaps, self.problem)}",
            )
        return BranchPoint.of(miss, omega=omega, branch=self.name, selected=False)


def _neighbour(grid: list[float], a: float, step: int) -> float | None:
    i = grid.index(a) + step
    return grid[i] if 0 <= i < len(grid) else None


def branch_names(problem: Problem) -> tuple[str, ...]:
    """The informed branches followed at every ω: positional and semantic, and for a student of
    rank r >= 2 also the mixed branch (one positional and one semantic direction), which the pure
    branches can be unstable towards."""
    return FOLLOWED_BRANCHES + (("mixed",) if problem.rank >= 2 else ())


def follow_branches(
    problem: Problem,
    alphas: list[float],
    quadrature: QuadratureSpec,
    options: SolverOptions,
    report: Callable[[], None] | None = None,
    names: tuple[str, ...] | None = None,
    two_sided: bool = True,
) -> dict[str, Branch]:
    """The informed branches (``names``, default :func:`branch_names`) followed along the sorted
    ``alphas``, each independently of the others: positional seeded from the smallest α, the
    others from the largest; the positional branch (which has several nearby fixed points at
    small ω) continued back again and the lower e_t kept at each α (``two_sided``,
    :meth:`Branch.lowest_of_both_sides`). ``report()`` is called after every fixed point solved, here and
    later on these branches (progress)."""
    D = problem.gaussian_dim
    rule, coarse = quadrature.rule(D), quadrature.coarse_rule(D)
    n = len(alphas)
    names = branch_names(problem) if names is None else names
    branches = {name: Branch(name, problem, rule, coarse, options, report) for name in names}
    for name, branch in branches.items():
        branch.follow(
            alphas,
            list(range(n)) if name == "positional" else list(range(n - 1, -1, -1)),
            two_sided=name == "positional" and two_sided,
        )
    return branches


def selected_at(branches: dict[str, Branch], alpha: float) -> str | None:
    """Name of the selected branch at a grid α: the lowest e_t among the branches that exist there."""
    present = {name: b.points[alpha] for name, b in branches.items() if alpha in b.points}
    return min(present, key=lambda k: present[k].train_loss) if present else None


def branch_records(branches: dict[str, Branch], omega: float, alphas: list[float]) -> list[BranchPoint]:
    """One record per (α, branch) sought there: the fixed point (the selected one flagged), or why
    the branch is absent."""
    out = []
    for a in alphas:
        best = selected_at(branches, a)
        for name, b in branches.items():
            rec = b.record(omega, a, name == best)
            if rec is not None:
                out.append(rec)
    return out
