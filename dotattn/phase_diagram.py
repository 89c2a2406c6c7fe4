"""Experiment sweeps: branches along α, spinodals, α_c(ω), α_lin(ω), and the phase diagram.

SPEC sections 4 and 5. The unit of work is one ω *column* (:func:`omega_column`, a pure
function of plain arguments, so that a process pool or a Dask cluster can run it):

1. each informed branch (positional, semantic) is seeded from its informed initialisation at
   the end of the α grid where it is expected (positional: smallest α, semantic: largest α;
   other α if that fails) and followed along the grid in both directions by continuation
   (warm start from the neighbouring α) until it ceases to exist (no convergence, invalid, or
   it flows to another branch);
2. each end inside the grid is bracketed by bisection to ``spinodal_tol`` in α (the spinodal);
3. α_c: the root of e_t(semantic) − e_t(positional), bracketed on the grid and polished by
   Brent's method to ``critical_tol``;
4. α_lin: the smallest α at which ε_g of the selected branch drops below the linear baseline,
   by Brent's method on the branch's ε_g (or α_c itself where the switch of branch crosses it).

"None in range" is reported as None. The selected branch at each α is the lowest e_t among the
branches that exist there.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
from scipy.optimize import brentq

from dotattn.baseline import linear_baseline_test_error
from dotattn.catalogue import QuadratureSpec, branch_label, default_quadrature, initialisations
from dotattn.io import read_json_if_valid, write_json
from dotattn.problem import ParameterError, Problem
from dotattn.state_evolution import FixedPoint, SolverOptions, iterate

__all__ = ["SweepSettings", "omega_column", "follow_branches", "branch_rows", "branch_points", "PhaseDiagram", "run_phase_diagram", "DEFAULT_OMEGAS",
           "DEFAULT_ALPHAS", "ROW_COLUMNS", "FOLLOWED_BRANCHES"]

FOLLOWED_BRANCHES = ("positional", "semantic")
DEFAULT_OMEGAS = tuple(round(0.05 * i, 10) for i in range(10))  # 0, 0.05, ..., 0.45
DEFAULT_ALPHAS = tuple(round(0.1 * i, 10) for i in range(1, 26))  # 0.1, ..., 2.5
ROW_COLUMNS = ["omega", "alpha", "branch", "status", "q", "m", "mu", "theta", "V", "train_loss", "test_error",
               "selected", "iterations", "residual"]


@dataclass(frozen=True)
class SweepSettings:
    """Everything besides (problem, ω, α grid) that defines a column's result."""

    quadrature: QuadratureSpec
    options: SolverOptions = SolverOptions()
    spinodal_tol: float = 1e-3
    critical_tol: float = 1e-4

    def to_dict(self) -> dict[str, Any]:
        return {"quadrature": self.quadrature.to_dict(), "options": asdict(self.options),
                "spinodal_tol": self.spinodal_tol, "critical_tol": self.critical_tol}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SweepSettings":
        q = d["quadrature"]
        quad = QuadratureSpec(q["kind"], q["order"], q.get("coarse_order"), q.get("scramblings", 8), q.get("seed", 0))
        return cls(quad, SolverOptions(**d["options"]), d["spinodal_tol"], d["critical_tol"])


# ----------------------------------------------------------------------------------------------
# one branch along α
# ----------------------------------------------------------------------------------------------
class _Branch:
    """Fixed points of one branch at one ω, keyed by α, with continuation and bisection."""

    def __init__(self, name: str, problem: Problem, rule, coarse, options: SolverOptions) -> None:
        self.name, self.problem, self.rule, self.coarse, self.options = name, problem, rule, coarse, options
        self.points: dict[float, FixedPoint] = {}
        self.failed: dict[float, FixedPoint] = {}

    def on_branch(self, fp: FixedPoint) -> bool:
        return fp.converged and branch_label(fp.overlaps, self.problem) == self.name

    def solve_from(self, alpha: float, start: FixedPoint | None) -> FixedPoint:
        """Fixed point at α, warm-started from ``start`` (or the informed initialisation)."""
        if start is None:
            init = dict(initialisations(self.problem, 0))[self.name]
            if self.coarse is not None:
                pre = iterate(self.problem, alpha, init, self.coarse, self.options)
                init = pre.overlaps if pre.converged else init
            fp = iterate(self.problem, alpha, init, self.rule, self.options)
        else:
            fp = iterate(self.problem, alpha, start.overlaps, self.rule, self.options, warm=start.prox_h)
        return fp

    def nearest(self, alpha: float) -> FixedPoint | None:
        if not self.points:
            return None
        key = min(self.points, key=lambda a: abs(a - alpha))
        return self.points[key]

    def at(self, alpha: float) -> FixedPoint | None:
        """Solve at an off-grid α from the nearest known point (for Brent); None if off-branch."""
        fp = self.solve_from(alpha, self.nearest(alpha))
        return fp if self.on_branch(fp) else None

    def follow(self, alphas: list[float], seed_order: list[int]) -> None:
        """Seed at the first index of ``seed_order`` that works, then continue both ways."""
        seed = None
        for i in seed_order:
            fp = self.solve_from(alphas[i], None)
            if self.on_branch(fp):
                seed = i
                self.points[alphas[i]] = fp
                break
            self.failed[alphas[i]] = fp
        if seed is None:
            return
        for step in (-1, 1):
            prev = self.points[alphas[seed]]
            i = seed + step
            while 0 <= i < len(alphas):
                fp = self.solve_from(alphas[i], prev)
                if not self.on_branch(fp):
                    self.failed[alphas[i]] = fp
                    break
                self.points[alphas[i]] = prev = fp
                i += step

    def spinodals(self, alphas: list[float], tol: float) -> dict[str, float | None]:
        """Ends of the followed segment inside the grid, bracketed to ``tol`` by bisection."""
        out: dict[str, float | None] = {"lower": None, "upper": None}
        if not self.points:
            return out
        lo, hi = min(self.points), max(self.points)
        grid = sorted(alphas)
        for side, inside, outside in (("lower", lo, _neighbour(grid, lo, -1)), ("upper", hi, _neighbour(grid, hi, +1))):
            if outside is None:
                continue
            good, bad = inside, outside
            start = self.points[inside]
            while abs(bad - good) > tol:
                mid = 0.5 * (good + bad)
                fp = self.solve_from(mid, start)
                if self.on_branch(fp):
                    good, start = mid, fp
                else:
                    bad = mid
            out[side] = 0.5 * (good + bad)
        return out


def _neighbour(grid: list[float], a: float, step: int) -> float | None:
    i = grid.index(a) + step
    return grid[i] if 0 <= i < len(grid) else None


# ----------------------------------------------------------------------------------------------
# one ω column
# ----------------------------------------------------------------------------------------------
def _row(omega: float, alpha: float, branch: str, fp: FixedPoint, selected: bool, toy: bool) -> dict[str, Any]:
    o = fp.overlaps
    ok = fp.converged
    scalar = o is not None and o.q.size == 1 and o.theta.size == 1
    return {"omega": omega, "alpha": alpha, "branch": branch, "status": fp.status,
            "q": (float(o.q[0, 0]) if scalar else o.q.tolist()) if ok else None,
            "m": float(o.m) if ok and toy else None,
            "mu": o.mu.tolist() if ok else None,
            "theta": (float(o.theta[0, 0]) if scalar else o.theta.tolist()) if ok else None,
            "V": (float(o.V[0, 0]) if scalar else o.V.tolist()) if ok else None,
            "train_loss": fp.train_loss if ok else None, "test_error": fp.test_error if ok else None,
            "selected": selected, "iterations": fp.iterations, "residual": fp.residual}


def follow_branches(problem: Problem, alphas: list[float], settings: SweepSettings) -> dict[str, "_Branch"]:
    """The informed branches followed along the sorted ``alphas`` (step 1): positional and semantic,
    and for a student of rank r >= 2 also the mixed branch (one positional and one semantic
    direction), which the pure branches can be unstable towards."""
    D = problem.gaussian_dim
    rule, coarse = settings.quadrature.rule(D), settings.quadrature.coarse_rule(D)
    n = len(alphas)
    names = FOLLOWED_BRANCHES + (("mixed",) if problem.rank >= 2 else ())
    branches = {name: _Branch(name, problem, rule, coarse, settings.options) for name in names}
    branches["positional"].follow(alphas, list(range(n)))
    for name in names[1:]:
        branches[name].follow(alphas, list(range(n - 1, -1, -1)))
    return branches


def branch_rows(branches: dict[str, "_Branch"], omega: float, alphas: list[float]) -> list[dict[str, Any]]:
    """One row per (α, branch): the fixed point, or why the branch is absent; the lowest e_t is selected."""
    rows = []
    toy = next(iter(branches.values())).problem.is_toy_layout
    for a in alphas:
        present = {name: b.points[a] for name, b in branches.items() if a in b.points}
        best = min(present, key=lambda k: present[k].train_loss) if present else None
        for name, b in branches.items():
            if a in b.points:
                rows.append(_row(omega, a, name, b.points[a], name == best, toy))
            elif a in b.failed:
                rows.append(_row(omega, a, name, b.failed[a], False, toy) | {"status": _absent_status(b, b.failed[a])})
    return rows


def branch_points(problem_dict: dict[str, Any], omega: float, alphas: list[float],
                  settings_dict: dict[str, Any]) -> list[dict[str, Any]]:
    """The branch rows at ``alphas`` only (no spinodals, α_c or α_lin): what a comparison with ERM needs."""
    problem = Problem.from_dict({**problem_dict, "omega": omega})
    alphas = sorted(alphas)
    return branch_rows(follow_branches(problem, alphas, SweepSettings.from_dict(settings_dict)), omega, alphas)


def omega_column(problem_dict: dict[str, Any], omega: float, alphas: list[float],
                 settings_dict: dict[str, Any]) -> dict[str, Any]:
    """Everything the phase diagram needs at one ω (plain dict in, plain dict out)."""
    t0 = time.perf_counter()
    problem = Problem.from_dict({**problem_dict, "omega": omega})
    settings = SweepSettings.from_dict(settings_dict)
    alphas = sorted(alphas)
    branches = follow_branches(problem, alphas, settings)
    spinodals = {name: branches[name].spinodals(alphas, settings.spinodal_tol) for name in FOLLOWED_BRANCHES}
    eps_lin = linear_baseline_test_error(problem)
    alpha_c = _critical_alpha(branches, alphas, settings.critical_tol)
    alpha_lin = _baseline_alpha(branches, alphas, alpha_c, eps_lin, settings.critical_tol)
    summary = {"omega": omega, "alpha_c": alpha_c,
               "spinodal_semantic": spinodals["semantic"]["lower"],
               "spinodal_positional": spinodals["positional"]["upper"],
               "spinodals": spinodals, "alpha_lin": alpha_lin, "linear_baseline_test_error": eps_lin,
               "seconds": time.perf_counter() - t0}
    return {"omega": omega, "rows": branch_rows(branches, omega, alphas), "summary": summary}


def _absent_status(branch: _Branch, fp: FixedPoint) -> str:
    """Why a branch has no point here: its own failure, or it flowed to another branch."""
    if fp.converged:
        return f"absent (flows to {branch_label(fp.overlaps, branch.problem)})"
    return fp.status


def _critical_alpha(branches: dict[str, _Branch], alphas: list[float], tol: float) -> float | None:
    """Root of e_t(sem) − e_t(pos) from positional-lower to semantic-lower, by Brent's method."""
    pos, sem = branches["positional"], branches["semantic"]
    both = [a for a in alphas if a in pos.points and a in sem.points]
    gap = {a: sem.points[a].train_loss - pos.points[a].train_loss for a in both}
    for a, b in zip(both, both[1:]):
        if gap[a] > 0 >= gap[b] and alphas.index(b) - alphas.index(a) == 1:
            def f(x: float) -> float:
                if x == a:
                    return gap[a]
                if x == b:
                    return gap[b]
                p, s = pos.at(x), sem.at(x)
                if p is None or s is None:
                    raise _BranchLost(x)
                return s.train_loss - p.train_loss
            try:
                return float(brentq(f, a, b, xtol=tol, rtol=4 * np.finfo(float).eps))
            except _BranchLost:
                return None
    return None


class _BranchLost(RuntimeError):
    pass


def _branch_root(branch: _Branch, key: str, level: float, a: float, b: float, known: dict[float, float],
                 tol: float) -> float | None:
    """Root in [a, b] of (``key`` of the branch's fixed point) − ``level`` by Brent's method."""
    def f(x: float) -> float:
        if x in known:
            return known[x]
        fp = branch.at(x)
        if fp is None:
            raise _BranchLost(x)
        return getattr(fp, key) - level
    try:
        return float(brentq(f, a, b, xtol=tol))
    except (_BranchLost, ValueError):
        return None


def _baseline_alpha(branches: dict[str, _Branch], alphas: list[float], alpha_c: float | None, eps_lin: float,
                    tol: float) -> float | None:
    """Smallest α where ε_g of the selected branch falls below ε_lin (None if not in range)."""
    def selected_at(a: float) -> str | None:
        present = {k: b.points[a] for k, b in branches.items() if a in b.points}
        return min(present, key=lambda k: present[k].train_loss) if present else None

    grid = [a for a in alphas if selected_at(a) is not None]
    if not grid:
        return None
    first = selected_at(grid[0])
    if branches[first].points[grid[0]].test_error < eps_lin:
        return None  # already below at the smallest α: the crossing is not in range
    for a, b in zip(grid, grid[1:]):
        sa, sb = selected_at(a), selected_at(b)
        ea = branches[sa].points[a].test_error - eps_lin
        eb = branches[sb].points[b].test_error - eps_lin
        if eb >= 0:
            continue
        if sa == sb:
            return _branch_root(branches[sa], "test_error", eps_lin, a, b, {a: ea, b: eb}, tol)
        # the selected branch switches inside (a, b): at α_c if the switch crosses the line
        if alpha_c is not None and a <= alpha_c <= b:
            fp = branches[sb].at(alpha_c)
            if fp is not None and fp.test_error < eps_lin:
                return alpha_c
            return _branch_root(branches[sb], "test_error", eps_lin, alpha_c, b, {b: eb}, tol)
        return b
    return None


# ----------------------------------------------------------------------------------------------
# the whole diagram: executors, cache, outputs
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PhaseDiagram:
    """Rows (one per ω, α, branch), one summary per ω, and how they were computed."""

    problem: Problem
    omegas: tuple[float, ...]
    alphas: tuple[float, ...]
    settings: SweepSettings
    rows: tuple[dict, ...]
    summaries: tuple[dict, ...]
    seconds: float
    from_cache: int = 0
    extra: dict = field(default_factory=dict)


def _cache_key(problem: Problem, omega: float, alphas: list[float], settings: SweepSettings) -> str:
    from dotattn import __version__
    blob = json.dumps({"problem": {**problem.to_dict(), "omega": omega}, "alphas": alphas,
                       "settings": settings.to_dict(), "version": __version__}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _executor_map(tasks: list[tuple], workers: int, dask_address: str | None) -> Iterable[dict]:
    """Run omega_column over tasks; yield results as they complete."""
    if dask_address is not None:
        try:
            from distributed import Client, as_completed as dask_completed
        except ImportError:  # pragma: no cover - depends on the optional extra
            raise ParameterError("dask: install the optional extra 'dotattn[dask]' to use --dask") from None
        client = Client(dask_address) if isinstance(dask_address, str) else dask_address
        try:
            futures = [client.submit(omega_column, *t, pure=False) for t in tasks]
            for fut in dask_completed(futures):
                yield fut.result()
        finally:
            if isinstance(dask_address, str):
                client.close()
        return
    if workers <= 1 or len(tasks) == 1:
        for t in tasks:
            yield omega_column(*t)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(omega_column, *t) for t in tasks]
        for fut in as_completed(futures):
            yield fut.result()


def run_phase_diagram(problem: Problem, omegas: Iterable[float], alphas: Iterable[float], *,
                      settings: SweepSettings | None = None, cache_dir: str | os.PathLike | None = None,
                      workers: int = 1, dask_address: Any = None,
                      progress: Callable[[int, int, float], None] | None = None) -> PhaseDiagram:
    """Compute every ω column (in parallel), reusing finished columns from ``cache_dir``.

    ``progress(done, total, omega)`` is called after each column. ``dask_address`` is a
    scheduler address or an existing ``distributed.Client``.
    """
    t0 = time.perf_counter()
    omegas = sorted(set(float(w) for w in omegas))
    alphas = sorted(set(float(a) for a in alphas))
    if not omegas or not alphas:
        raise ParameterError("the omega and alpha grids must not be empty")
    if min(alphas) <= 0:
        raise ParameterError(f"alpha must be > 0, got {min(alphas):g}")
    if min(omegas) < 0 or max(omegas) > 1:
        raise ParameterError("omega must be in [0, 1]")
    settings = settings or SweepSettings(default_quadrature(problem))
    cache = Path(cache_dir) if cache_dir is not None else None
    results: dict[float, dict] = {}
    todo = []
    for w in omegas:
        key = _cache_key(problem, w, alphas, settings)
        cached = read_json_if_valid(cache / f"omega_{w:.6f}.json") if cache else None
        if cached is not None and cached.get("key") == key:
            results[w] = cached["result"]
        else:
            todo.append((w, key))
    from_cache = len(results)
    done = from_cache
    if progress:
        progress(done, len(omegas), float("nan"))
    tasks = [(problem.to_dict(), w, alphas, settings.to_dict()) for w, _ in todo]
    keys = dict(todo)
    for res in _executor_map(tasks, workers, dask_address):
        w = res["omega"]
        results[w] = res
        if cache is not None:
            write_json(cache / f"omega_{w:.6f}.json", {"key": keys[w], "result": res})
        done += 1
        if progress:
            progress(done, len(omegas), w)
    rows = tuple(r for w in omegas for r in results[w]["rows"])
    summaries = tuple(results[w]["summary"] for w in omegas)
    return PhaseDiagram(problem=problem, omegas=tuple(omegas), alphas=tuple(alphas), settings=settings,
                        rows=rows, summaries=summaries, seconds=time.perf_counter() - t0, from_cache=from_cache)



def write_outputs(pd: PhaseDiagram, out_dir: str | os.PathLike, figure_omega: float | None = None) -> dict[str, str]:
    """CSV of rows, summary.json with provenance, and figures (a), (b), (c); all written atomically."""
    from dotattn import plotting
    from dotattn.io import provenance, save_figure, write_csv

    out = Path(out_dir)
    params = {"problem": pd.problem.to_dict(), "omegas": list(pd.omegas), "alphas": list(pd.alphas),
              **pd.settings.to_dict()}
    prov = provenance(params, seconds=pd.seconds)
    keep = ("omega", "alpha_c", "spinodal_semantic", "spinodal_positional", "alpha_lin",
            "linear_baseline_test_error", "spinodals", "seconds")
    summary = {"omegas": [{k: s.get(k) for k in keep} for s in pd.summaries],
               "quadrature": pd.settings.quadrature.to_dict(), **prov,
               "wall_seconds": round(pd.seconds, 3), "columns_from_cache": pd.from_cache,
               "column_compute_seconds_total": round(sum(s["seconds"] for s in pd.summaries), 1)}
    paths = {"csv": str(out / "phase_diagram.csv"), "summary": str(out / "summary.json")}
    write_csv(paths["csv"], pd.rows, ROW_COLUMNS,
              comment=f"dotattn {prov['dotattn_version']} commit {prov['git_commit']} {prov['created_utc']}; "
                      f"parameters in summary.json")
    write_json(paths["summary"], summary)
    if figure_omega is None:
        figure_omega = 0.3 if any(abs(w - 0.3) < 1e-9 for w in pd.omegas) else pd.omegas[len(pd.omegas) // 2]
    s_fig = min(pd.summaries, key=lambda s: abs(s["omega"] - figure_omega))
    meta = {"dotattn_version": prov["dotattn_version"], "git_commit": prov["git_commit"],
            "created_utc": prov["created_utc"]}
    figs = {"test_error": plotting.figure_test_error(pd.rows, s_fig),
            "overlaps": plotting.figure_overlaps(pd.rows, s_fig, pd.problem.sigma)}
    if len(pd.omegas) > 1:
        figs["phase_plane"] = plotting.figure_phase_plane(pd.rows, pd.summaries)
    import matplotlib.pyplot as plt
    for name, fig in figs.items():
        paths[name] = str(out / f"{name}.png")
        save_figure(fig, paths[name], meta)
        plt.close(fig)
    return paths
