"""Theory against finite-size ERM: load an ERM run, get the theory at the same (ω, α), tabulate.

The theory comes from the branch continuation of :func:`dotattn.phase_diagram.omega_column`
(computed on the fly) or from the rows of a phase-diagram output. Plotting lives in
:mod:`dotattn.plotting`; this module only assembles numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dotattn.catalogue import default_quadrature
from dotattn.io import read_csv
from dotattn.phase_diagram import SweepSettings, omega_column
from dotattn.problem import ParameterError, Problem

__all__ = ["ErmRun", "load_erm", "theory_rows", "comparison_table", "COMPARE_COLUMNS"]

COMPARE_COLUMNS = ["alpha", "branch", "theory_test_error", "erm_test_error_mean", "erm_test_error_std",
                   "test_error_rel_diff", "theory_m_over_sigma2", "erm_m_mean", "erm_m_std",
                   "theory_theta_over_sigma2", "erm_theta_over_sigma2_mean", "erm_theta_over_sigma2_std",
                   "theory_train_loss", "erm_train_loss_mean", "erm_train_loss_std", "d"]


@dataclass(frozen=True)
class ErmRun:
    """An ERM output folder: its problem, d, and summary rows (mean/std per α and init)."""

    path: Path
    problem: Problem
    d: int
    summary: tuple[dict, ...]

    @property
    def alphas(self) -> list[float]:
        return sorted({float(r["alpha"]) for r in self.summary})


def load_erm(path: str | Path) -> ErmRun:
    """Read ``summary.json`` + ``summary.csv`` written by ``dotattn train-erm``."""
    p = Path(path)
    try:
        meta = json.loads((p / "summary.json").read_text())
        rows = read_csv(p / "summary.csv")
    except (OSError, ValueError):
        raise ParameterError(f"erm folder {str(p)!r} must hold summary.json and summary.csv from train-erm") from None
    params = meta["provenance"]["parameters"]
    return ErmRun(path=p, problem=Problem.from_dict(params["problem"]), d=int(params["erm"]["d"]),
                  summary=tuple(rows))


def theory_rows(problem: Problem, alphas: list[float], phase_diagram: str | Path | None = None,
                settings: SweepSettings | None = None) -> list[dict[str, Any]]:
    """Branch rows (omega, alpha, branch, status, m, theta, train_loss, test_error, selected) at ``alphas``.

    From a phase-diagram folder if given (rows at the problem's ω), else computed now.
    """
    if phase_diagram is not None:
        rows = [r for r in read_csv(Path(phase_diagram) / "phase_diagram.csv")
                if abs(float(r["omega"]) - problem.omega) < 1e-9]
        if not rows:
            raise ParameterError(f"phase diagram {str(phase_diagram)!r} has no rows at omega = {problem.omega:g}")
        return rows
    settings = settings or SweepSettings(default_quadrature(problem))
    return omega_column(problem.to_dict(), problem.omega, sorted(alphas), settings.to_dict())["rows"]


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def comparison_table(erm: ErmRun, theory: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (α, informed branch) present in both: theory value, ERM mean ± std, relative difference."""
    s2 = erm.problem.sigma**2
    th = {(round(_num(r["alpha"]), 9), r["branch"]): r for r in theory if r["status"] == "converged"}
    out = []
    for r in erm.summary:
        if r["init"] not in ("semantic", "positional"):
            continue
        a = round(_num(r["alpha"]), 9)
        t = th.get((a, r["init"]))
        if t is None:
            continue
        te, ee = _num(t["test_error"]), _num(r["test_error_mean"])
        out.append({"alpha": a, "branch": r["init"], "d": erm.d,
                    "theory_test_error": te, "erm_test_error_mean": ee, "erm_test_error_std": _num(r["test_error_std"]),
                    "test_error_rel_diff": (ee - te) / te,
                    "theory_m_over_sigma2": abs(_num(t["m"])) / s2 if t.get("m") not in (None, "") else None,
                    "erm_m_mean": _num(r["m_mean"]) / s2, "erm_m_std": _num(r["m_std"]) / s2,
                    "theory_theta_over_sigma2": abs(_num(t["theta"])) / s2,
                    "erm_theta_over_sigma2_mean": _num(r["theta_over_sigma2_mean"]),
                    "erm_theta_over_sigma2_std": _num(r["theta_over_sigma2_std"]),
                    "theory_train_loss": _num(t["train_loss"]), "erm_train_loss_mean": _num(r["train_loss_mean"]),
                    "erm_train_loss_std": _num(r["train_loss_std"])})
    return out


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
                      settings: SweepSettings | None = None) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Write comparison.csv/json and figures; returns (paths, table)."""
    import matplotlib.pyplot as plt

    from dotattn import plotting
    from dotattn.baseline import linear_baseline_test_error
    from dotattn.io import provenance, save_figure, write_csv, write_json

    erm = load_erm(erm_dir)
    theory = theory_rows(erm.problem, erm.alphas, theory_dir, settings)
    table = comparison_table(erm, theory)
    prov = provenance({"erm": str(erm_dir), "theory": theory_dir or "computed", "problem": erm.problem.to_dict(),
                       "finite_size": finite_dirs})
    paths = {"csv": str(out / "comparison.csv"), "json": str(out / "comparison.json"),
             "figure": str(out / "comparison.png")}
    write_csv(paths["csv"], table, COMPARE_COLUMNS, comment=f"dotattn {prov['dotattn_version']} commit {prov['git_commit']}")
    eps_lin = linear_baseline_test_error(erm.problem)
    write_json(paths["json"], {"table": table, "linear_baseline_test_error": eps_lin, **prov})
    fig = plotting.figure_comparison(theory, table, erm.summary, erm.problem.omega, erm.problem.sigma, erm.d, eps_lin)
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
