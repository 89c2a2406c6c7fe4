"""Theory against finite-size ERM: load an ERM run, get the theory at the same (ω, α), tabulate.

The theory comes from the informed branches followed along the ERM's α grid
(:func:`dotattn.phase_diagram.branch_points`, computed on the fly) or from the rows of a
phase-diagram output. Overlaps are compared through invariants that do not depend on the
student's rotation gauge (Q → QU) or the teacher's (Q* → Q*R), so they mean the same for every
(L, r, r_t):

* ``m`` = ‖μ_1‖ (the toy model's |m|),
* ``theta`` = ‖θ‖_F / σ² (the semantic overlap of the normalised teacher),
* ``q`` = Tr q / σ².

ERM runs are grouped by their informed initialisation and the branch they ended on (their
label in ``runs.csv``), and each group is compared with the theory's fixed point on that branch
(e.g. a student of rank 2 started on the positional direction that also learns the semantic
one is compared with the mixed fixed point); the table reports how many runs each group has. Plotting lives in
:mod:`dotattn.plotting`; this module only assembles numbers.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.catalogue import default_quadrature
from dotattn.io import read_csv
from dotattn.phase_diagram import SweepSettings, branch_points
from dotattn.problem import ParameterError, Problem

__all__ = ["ErmRun", "load_erm", "theory_rows", "comparison_table", "overlap_invariants", "with_invariants", "COMPARE_COLUMNS",
           "COMPARED", "DEFAULT_TOLERANCE"]

QUANTITIES = ("test_error", "train_loss", "m", "theta", "q")
COMPARED = {"positional": ("test_error", "m", "q"), "semantic": ("test_error", "theta", "q"),
            "mixed": ("test_error", "m", "theta", "q")}
"""What must agree on each branch: ε_g and the overlaps that are not zero on it."""
DEFAULT_TOLERANCE = 0.05
COMPARE_COLUMNS = (["alpha", "init", "branch", "d", "erm_runs", "erm_runs_on_branch"]
                   + [f"{p}{k}{s}" for k in QUANTITIES
                      for p, s in (("theory_", ""), ("erm_", "_mean"), ("erm_", "_std"), ("", "_rel_diff"))]
                   + ["max_rel_diff", "agrees"])


@dataclass(frozen=True)
class ErmRun:
    """An ERM output folder: its problem, d, summary rows (per α and init) and run rows (per seed)."""

    path: Path
    problem: Problem
    d: int
    summary: tuple[dict, ...]
    runs: tuple[dict, ...]

    @property
    def alphas(self) -> list[float]:
        return sorted({float(r["alpha"]) for r in self.summary})


def load_erm(path: str | Path) -> ErmRun:
    """Read ``summary.json``, ``summary.csv`` and ``runs.csv`` written by ``dotattn train-erm``."""
    p = Path(path)
    try:
        meta = json.loads((p / "summary.json").read_text())
        rows = read_csv(p / "summary.csv")
        runs = read_csv(p / "runs.csv")
    except (OSError, ValueError):
        raise ParameterError(f"erm folder {str(p)!r} must hold summary.json, summary.csv and runs.csv "
                             "from train-erm") from None
    params = meta["provenance"]["parameters"]
    return ErmRun(path=p, problem=Problem.from_dict(params["problem"]), d=int(params["erm"]["d"]),
                  summary=tuple(rows), runs=tuple(runs))


def theory_rows(problem: Problem, alphas: list[float], phase_diagram: str | Path | None = None,
                settings: SweepSettings | None = None) -> list[dict[str, Any]]:
    """Branch rows (omega, alpha, branch, status, q, mu, theta, V, train_loss, test_error, selected).

    From ``phase_diagram`` if given: a phase-diagram folder, or the output folder of an earlier
    comparison for the same problem (its ``comparison.json`` keeps the theory rows); rows at the
    problem's ω. Otherwise computed now at ``alphas``.
    """
    if phase_diagram is not None:
        folder = Path(phase_diagram)
        if (folder / "comparison.json").is_file() and not (folder / "phase_diagram.csv").is_file():
            saved = json.loads((folder / "comparison.json").read_text())
            if Problem.from_dict(saved["parameters"]["problem"]) != problem:
                raise ParameterError(f"theory folder {str(folder)!r} was computed for another problem")
            return saved["theory"]
        try:
            table = read_csv(folder / "phase_diagram.csv")
        except OSError:
            raise ParameterError(f"theory folder {str(folder)!r} must hold phase_diagram.csv or comparison.json") from None
        rows = [r for r in table if abs(float(r["omega"]) - problem.omega) < 1e-9]
        if not rows:
            raise ParameterError(f"phase diagram {str(phase_diagram)!r} has no rows at omega = {problem.omega:g}")
        return rows
    settings = settings or SweepSettings(default_quadrature(problem))
    return branch_points(problem.to_dict(), problem.omega, sorted(alphas), settings.to_dict())


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def _matrix(x: Any) -> np.ndarray:
    """A number, nested list or its JSON text (as in CSV files) as a 2-D float array."""
    if isinstance(x, str):
        x = json.loads(x) if x.strip() else float("nan")
    return np.atleast_2d(np.asarray(x, dtype=float))


def overlap_invariants(q: Any, theta: Any, mu: Any, sigma: float) -> dict[str, float]:
    """Gauge-invariant overlaps: m = ‖μ_1‖, theta = ‖θ‖_F/σ², q = Tr q/σ² (inputs as in the CSV/JSON rows;
    ``mu`` is (L, r), or the L values of μ for r = 1)."""
    mu_arr = _matrix(mu)
    mu_arr = mu_arr.T if mu_arr.shape[0] == 1 else mu_arr  # a flat list of L values (r = 1)
    s2 = sigma**2
    return {"m": float(np.linalg.norm(mu_arr[0])), "theta": float(np.linalg.norm(_matrix(theta))) / s2,
            "q": float(np.trace(_matrix(q))) / s2}


def with_invariants(rows: list[dict[str, Any]], sigma: float) -> list[dict[str, Any]]:
    """Converged theory rows with the invariants added under ``m_norm``, ``theta_norm``, ``q_trace``."""
    out = []
    for r in rows:
        if r["status"] != "converged":
            continue
        inv = overlap_invariants(r["q"], r["theta"], r["mu"], sigma)
        out.append({**r, "m_norm": inv["m"], "theta_norm": inv["theta"], "q_trace": inv["q"]})
    return out


def _erm_values(run: dict[str, Any], sigma: float) -> dict[str, float]:
    """The compared quantities of one ERM run (runs.csv row)."""
    inv = overlap_invariants(run["q"], run["theta"], run["mu"], sigma)
    return {"test_error": _num(run["test_error"]), "train_loss": _num(run["train_loss"]), **inv}


def comparison_table(erm: ErmRun, theory: list[dict[str, Any]],
                     tolerance: float = DEFAULT_TOLERANCE) -> list[dict[str, Any]]:
    """One row per (α, informed initialisation, branch the ERM runs ended on) with a converged
    theory point on that branch: theory value, ERM mean ± std over those runs, relative
    differences, and whether ε_g and the branch's overlaps (:data:`COMPARED`) all agree within
    ``tolerance``. Runs that ended on a branch the theory did not follow are counted in
    ``erm_runs`` only."""
    sigma = erm.problem.sigma
    th = {(round(_num(r["alpha"]), 9), r["branch"]): r for r in with_invariants(theory, sigma)}
    out = []
    for a in erm.alphas:
        for init in ("positional", "semantic"):
            started = [r for r in erm.runs if r["init"] == init and abs(_num(r["alpha"]) - a) < 1e-9]
            ended = sorted({r["branch"] for r in started}, key=lambda b: (b != init, b))
            for branch in ended:
                t = th.get((round(a, 9), branch))
                if t is None or branch not in COMPARED:
                    continue
                stayed = [_erm_values(r, sigma) for r in started if r["branch"] == branch]
                out.append(_compare_row(a, init, branch, erm.d, len(started), stayed, t, tolerance))
    return out


def _compare_row(alpha: float, init: str, branch: str, d: int, n_started: int, runs: list[dict[str, float]],
                 t: dict[str, Any], tolerance: float) -> dict[str, Any]:
    theory_vals = {"test_error": _num(t["test_error"]), "train_loss": _num(t["train_loss"]),
                   "m": t["m_norm"], "theta": t["theta_norm"], "q": t["q_trace"]}
    row: dict[str, Any] = {"alpha": alpha, "init": init, "branch": branch, "d": d, "erm_runs": n_started,
                           "erm_runs_on_branch": len(runs)}
    for k in QUANTITIES:
        vals = np.array([v[k] for v in runs])
        mean = float(vals.mean())
        row[f"theory_{k}"] = theory_vals[k]
        row[f"erm_{k}_mean"] = mean
        row[f"erm_{k}_std"] = float(vals.std(ddof=1)) if vals.size > 1 else float("nan")
        zero = abs(theory_vals[k]) < 1e-12
        row[f"{k}_rel_diff"] = float("nan") if zero else (mean - theory_vals[k]) / abs(theory_vals[k])
    diffs = [abs(row[f"{k}_rel_diff"]) for k in COMPARED[branch]]
    row["max_rel_diff"] = max(diffs)
    row["agrees"] = all(x <= tolerance for x in diffs)
    return row


def _shape_title(problem: Problem) -> str:
    return f"L = {problem.L}, r = {problem.rank}, r_t = {problem.teacher_rank}, ω = {problem.omega:g}"


def finite_size_points(folders: list[Path], alpha: float) -> list[dict[str, Any]]:
    """(branch, d, mean, std) of the ERM test error at ``alpha`` from several train-erm folders."""
    pts = []
    for f in folders:
        run = load_erm(f)
        for r in run.summary:
            if r["init"] in ("semantic", "positional") and abs(_num(r["alpha"]) - alpha) < 1e-9:
                pts.append({"branch": r["init"], "d": run.d, "mean": _num(r["test_error_mean"]),
                            "std": _num(r["test_error_std"])})
    return pts


def compare_and_write(erm_dir: Path, out: Path, theory_dir: str | None, finite_dirs: list[str],
                      settings: SweepSettings | None = None,
                      tolerance: float = DEFAULT_TOLERANCE) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Write comparison.csv/json and figures; returns (paths, table)."""
    import matplotlib.pyplot as plt

    from dotattn import plotting
    from dotattn.baseline import linear_baseline_test_error
    from dotattn.io import provenance, save_figure, write_csv, write_json

    t0 = time.perf_counter()
    erm = load_erm(erm_dir)
    settings = settings or SweepSettings(default_quadrature(erm.problem))
    theory = theory_rows(erm.problem, erm.alphas, theory_dir, settings)
    table = comparison_table(erm, theory, tolerance)
    prov = provenance({"erm": str(erm_dir), "theory": theory_dir or "computed", "problem": erm.problem.to_dict(),
                       "finite_size": finite_dirs, "tolerance": tolerance, "compared": COMPARED,
                       **({} if theory_dir else settings.to_dict())}, seconds=time.perf_counter() - t0)
    paths = {"csv": str(out / "comparison.csv"), "json": str(out / "comparison.json"),
             "figure": str(out / "comparison.png")}
    write_csv(paths["csv"], table, COMPARE_COLUMNS, comment=f"dotattn {prov['dotattn_version']} commit {prov['git_commit']}")
    eps_lin = linear_baseline_test_error(erm.problem)
    write_json(paths["json"], {"table": table, "theory": theory, "linear_baseline_test_error": eps_lin, **prov})
    fig = plotting.figure_comparison(with_invariants(theory, erm.problem.sigma), table, erm.summary, erm.problem.omega,
                                     erm.d, eps_lin, title=_shape_title(erm.problem))
    save_figure(fig, paths["figure"], {"git_commit": prov["git_commit"]})
    plt.close(fig)
    if finite_dirs:
        runs = [load_erm(f) for f in finite_dirs]
        alphas = sorted({a for r in runs for a in r.alphas})
        alpha = alphas[0]
        pts = finite_size_points([Path(f) for f in finite_dirs], alpha)
        trows = theory_rows(erm.problem, [alpha], None, settings)
        inf = {r["branch"]: _num(r["test_error"]) for r in trows
               if r["status"] == "converged" and abs(_num(r["alpha"]) - alpha) < 1e-9}
        write_json(out / "finite_size.json", {"alpha": alpha, "points": pts, "theory": inf, **prov})
        fig = plotting.figure_finite_size(pts, inf, alpha, erm.problem.omega)
        paths["finite_size"] = str(out / "finite_size.png")
        save_figure(fig, paths["finite_size"], {"git_commit": prov["git_commit"]})
        plt.close(fig)
    return paths, table
