"""Figures of the AIM state evolution, as ``matplotlib.figure.Figure`` objects (no pyplot, no physics)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib.figure import Figure

from dotattn.aim.state_evolution import SEPoint

__all__ = ["mmse_figure", "read_state_evolution", "read_algorithm_points"]


def read_state_evolution(folder: str | Path) -> tuple[list[SEPoint], dict]:
    """The points and thresholds of a folder written by ``dotattn aim state-evolution --out``."""
    from dotattn.io import read_csv, read_json_if_valid
    from dotattn.problem import ParameterError

    folder = Path(folder)
    summary = read_json_if_valid(folder / "summary.json")
    if summary is None or not (folder / "points.csv").exists():
        raise ParameterError(f"{folder} is not a state-evolution folder (points.csv and summary.json expected)")
    points = [SEPoint.from_row(r) for r in read_csv(folder / "points.csv")]
    thr = dict(summary.get("thresholds", {}))
    thr["_label"] = summary.get("hardmax_derivative", "gradient")
    return points, thr


def read_algorithm_points(folder: str | Path) -> dict[str, Any]:
    """alpha, mmse (and mmse_se if present) of an algorithm folder (points.csv), with its name."""
    from dotattn.io import read_csv

    rows = read_csv(Path(folder) / "points.csv")
    out = {"name": Path(folder).name, "alpha": np.array([float(r["alpha"]) for r in rows]),
           "mmse": np.array([float(r["mmse"]) for r in rows])}
    if rows and "mmse_se" in rows[0]:
        out["mmse_se"] = np.array([float(r["mmse_se"]) if r["mmse_se"] else np.nan for r in rows])
    return out


def _x(points: Sequence[SEPoint], xaxis: str) -> np.ndarray:
    if xaxis == "alpha_bar":
        return np.array([p.alpha_bar for p in points])
    if xaxis == "alpha_over_rho":
        return np.array([p.alpha / p.rho for p in points])
    return np.array([p.alpha for p in points])


def mmse_figure(curves: Sequence[Sequence[SEPoint]], thresholds: Sequence[dict] | None = None, xaxis: str = "alpha",
                title: str = "", algorithm_points: Sequence[dict] = ()) -> Figure:
    """MMSE against α (or ᾱ, or α/ρ) for each curve; perfect-recovery thresholds as dotted lines."""
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    for i, pts in enumerate(curves):
        if not pts:
            continue
        pts = sorted(pts, key=lambda p: p.alpha)
        p0 = pts[0]
        thr = (thresholds or [{}] * len(curves))[i]
        variant = thr.get("_label", "gradient")
        label = f"{p0.channel}, ρ = {p0.rho:g}, T = {p0.tokens}" + (" (published φ₂/Φ₂)" if variant == "published"
                                                                     else "")
        line, = ax.plot(_x(pts, xaxis), [p.mmse for p in pts], "--" if variant == "published" else "-", lw=1.5,
                        label=label)
        a_pr = thr.get("alpha_perfect_recovery")
        if a_pr is not None and math.isfinite(a_pr):
            xv = {"alpha": a_pr, "alpha_bar": thr.get("alpha_bar_perfect_recovery"),
                  "alpha_over_rho": a_pr / p0.rho}[xaxis]
            ax.axvline(xv, color=line.get_color(), ls=":", lw=1)
    for extra in algorithm_points:
        ax.errorbar(extra["alpha"], extra["mmse"], yerr=extra.get("mmse_se"), fmt="o", ms=4, capsize=2,
                    label=extra["name"])
    ax.set_xlabel({"alpha": "α = n/d²", "alpha_bar": "ᾱ = α (T² + T − 2)", "alpha_over_rho": "α/ρ"}[xaxis])
    ax.set_ylabel("MMSE = Q0 − q")
    ax.set_ylim(bottom=0)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig
