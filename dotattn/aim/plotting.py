"""Figures of the AIM state evolution, as ``matplotlib.figure.Figure`` objects (no pyplot, no physics)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib.figure import Figure

from dotattn.aim.state_evolution import SEPoint
from dotattn.core.rows import read_float
from dotattn.core.validation import check_instance

__all__ = ["mmse_figure", "read_state_evolution", "read_algorithm_points"]


def read_state_evolution(folder: str | Path) -> tuple[list[SEPoint], dict]:
    """The points and thresholds of a folder written by ``dotattn aim state-evolution --out``, after
    :func:`dotattn.core.integrity.verify_folder` checked its manifest and rows (IntegrityError otherwise)."""
    from dotattn.core.io import read_csv
    from dotattn.aim import integrity as _integrity  # noqa: F401  (registers this package's kinds)
    from dotattn.core.integrity import read_verified_json, verify_folder

    folder = Path(check_instance("folder", folder, (str, os.PathLike), "folder path"))
    verify_folder(folder, kind="aim-state-evolution")
    summary = read_verified_json(folder / "summary.json")
    points = [SEPoint.from_row(r) for r in read_csv(folder / "points.csv")]
    thr = dict(summary.get("thresholds", {}))
    thr["_label"] = summary.get("hardmax_derivative", "gradient")
    return points, thr


def read_algorithm_points(folder: str | Path) -> dict[str, Any]:
    """alpha, mse and its standard error of an algorithm folder, with its name: ``alphas.csv`` as
    written by ``dotattn aim amp|gd`` (estimator, alpha, mse_mean, mse_se), else a ``points.csv``
    with alpha, mmse and optionally mmse_se."""
    from dotattn.core.io import read_csv
    from dotattn.core.validation import ParameterError
    from dotattn.aim import integrity as _integrity  # noqa: F401  (registers this package's kinds)
    from dotattn.core.integrity import verify_folder

    folder = Path(check_instance("folder", folder, (str, os.PathLike), "folder path"))
    if (folder / "alphas.csv").exists():
        verify_folder(folder, kind="aim-algorithms")
        rows = read_csv(folder / "alphas.csv")
        mse, se = "mse_mean", "mse_se"
    elif (folder / "points.csv").exists():
        verify_folder(folder, kind="aim-state-evolution")
        rows = read_csv(folder / "points.csv")
        mse, se = "mmse", "mmse_se"
    else:
        raise ParameterError(f"{folder}: no alphas.csv or points.csv with algorithm points")
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(r.get("estimator", ""), []).append(r)
    out = []
    for est, rs in groups.items():
        out.append({"name": f"{folder.name}" + (f" ({est})" if est else ""),
                    "alpha": np.array([read_float(r["alpha"]) for r in rs]),
                    "mmse": np.array([read_float(r[mse]) for r in rs]),  # NaN: every run diverged
                    "mmse_se": np.array([read_float(r.get(se)) for r in rs])})
    return out


def _x(points: Sequence[SEPoint], xaxis: str) -> np.ndarray:
    if xaxis == "alpha_bar":
        return np.array([p.alpha_bar for p in points])
    if xaxis == "alpha_over_rho":
        return np.array([p.alpha / p.rho for p in points])
    return np.array([p.alpha for p in points])


def mmse_figure(curves: Sequence[Sequence[SEPoint]], thresholds: Sequence[dict] | None = None, xaxis: str = "alpha",
                title: str = "", algorithm_points: Sequence[dict] = ()) -> Figure:
    """MMSE against α (or ᾱ, or α/ρ) for each curve; perfect-recovery thresholds as dotted lines and,
    against α/ρ, the ρ → 0 weak-recovery threshold of the last curve's channel (dash-dotted)."""
    for curve in check_instance("curves", curves, (list, tuple), "sequence of state-evolution curves"):
        check_instance("a curve", curve, (list, tuple), "sequence of SEPoint")
        for p in curve:
            check_instance("a curve's point", p, SEPoint, "dotattn.aim.state_evolution.SEPoint")
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    colours: dict[tuple, Any] = {}  # one colour per (channel, ρ, T): a published-derivative curve shares it
    for i, pts in enumerate(curves):
        if not pts:
            continue
        pts = sorted(pts, key=lambda p: p.alpha)
        p0 = pts[0]
        thr = (thresholds or [{}] * len(curves))[i]
        variant = thr.get("_label", "gradient")
        label = f"{p0.channel}, ρ = {p0.rho:g}, T = {p0.tokens}" + (" (published φ₂/Φ₂)" if variant == "published"
                                                                     else "")
        key = (p0.channel, p0.rho, p0.tokens)
        line, = ax.plot(_x(pts, xaxis), [p.mmse for p in pts], "--" if variant == "published" else "-", lw=1.5,
                        label=label, color=colours.get(key))
        colours.setdefault(key, line.get_color())
        a_pr = thr.get("alpha_perfect_recovery")
        if a_pr is not None and math.isfinite(a_pr):
            xv = {"alpha": a_pr, "alpha_bar": thr.get("alpha_bar_perfect_recovery"),
                  "alpha_over_rho": a_pr / p0.rho}[xaxis]
            ax.axvline(xv, color=line.get_color(), ls=":", lw=1)
        a_wr = thr.get("alpha_weak_recovery_small_rho")
        if xaxis == "alpha_over_rho" and a_wr is not None and i == len(curves) - 1:
            ax.axvline(a_wr / p0.rho, color="k", ls="-.", lw=0.8, label=f"ρ → 0 weak recovery ({p0.channel})")
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
