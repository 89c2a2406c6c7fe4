"""Figures of the AIM state evolution and of the algorithms at finite d, as ``matplotlib.figure.Figure``
objects (no pyplot, no physics).

Colours: one per (channel, ρ, T), shared by a state-evolution curve and every algorithm point of the same
problem (a curve with the public script's hardmax derivative shares it, dashed). Markers: one per
estimator (:data:`ESTIMATOR_STYLE`); points of a second, third … dimension d in the same figure are drawn
larger with a black edge (:data:`D_MARKER_SIZES`), so d = 100 and d = 200 of one problem stay apart. Curves of 12 points or fewer carry markers; a grid of α that is
geometric over more than a decade is drawn on a logarithmic axis.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dotattn.aim.state_evolution import SEPoint
from dotattn.core.validation import check_instance

__all__ = [
    "mmse_figure",
    "test_error_figure",
    "read_state_evolution",
    "read_algorithm_points",
    "read_free_entropy",
    "ESTIMATOR_STYLE",
    "D_MARKER_SIZES",
    "X_LABELS",
]

ESTIMATOR_STYLE: dict[str, tuple[str, str, bool]] = {
    "amp": ("AMP", "s", True),
    "gd": ("GD", "o", False),
    "gd_averaged": ("averaged GD", "D", True),
}
"""estimator -> (legend name, marker, filled)."""
D_MARKER_SIZES: tuple[float, ...] = (4.5, 8.0, 11.0)
"""Marker size of the points of the first, second, third … d of a figure (in order of first appearance)."""
X_LABELS = {"alpha": "α = n/d²", "alpha_bar": "ᾱ = α (T² + T − 2)", "alpha_over_rho": "α/ρ"}
_FEW = 12


def read_state_evolution(folder: str | Path) -> tuple[list[SEPoint], dict]:
    """The points and thresholds of a folder written by ``dotattn aim state-evolution --out``, after
    :func:`dotattn.core.integrity.verify_folder` checked its manifest and rows (IntegrityError otherwise)."""
    from dotattn.aim import integrity as _integrity  # noqa: F401  (registers this package's kinds)
    from dotattn.core.integrity import read_verified_json, verify_folder
    from dotattn.core.io import read_csv

    folder = Path(check_instance("folder", folder, (str, os.PathLike), "folder path"))
    verify_folder(folder, kind="aim-state-evolution")
    summary = read_verified_json(folder / "summary.json")
    points = [SEPoint.from_row(r) for r in read_csv(folder / "points.csv")]
    thr = dict(summary.get("thresholds", {}))
    thr["_label"] = summary.get("hardmax_derivative", "gradient")
    return points, thr


def read_free_entropy(folder: str | Path) -> list:
    """The rows of a folder written by ``dotattn aim free-entropy --out`` (verified first)."""
    from dotattn.aim import integrity as _integrity  # noqa: F401
    from dotattn.aim.free_entropy import FreeEntropyPoint
    from dotattn.core.integrity import verify_folder
    from dotattn.core.io import read_csv

    folder = Path(check_instance("folder", folder, (str, os.PathLike), "folder path"))
    verify_folder(folder, kind="aim-free-entropy")
    return [FreeEntropyPoint.from_row(r) for r in read_csv(folder / "free_entropy.csv")]


def read_algorithm_points(folder: str | Path) -> list[dict[str, Any]]:
    """Per estimator of a ``dotattn aim amp|gd`` folder (verified first): its problem (channel, d, ρ, T
    from the manifest), α, the mean error and its standard error, the mean test error, its standard error
    and the Bayes-optimal test error where recorded (NaN otherwise), and a legend label."""
    from dotattn.aim import integrity as _integrity  # noqa: F401
    from dotattn.core.integrity import read_verified_json, verify_folder
    from dotattn.core.io import read_csv

    folder = Path(check_instance("folder", folder, (str, os.PathLike), "folder path"))
    verify_folder(folder, kind="aim-algorithms")
    made_for = read_verified_json(folder / "summary.json").get("made_for", {})
    rows = read_csv(folder / "alphas.csv")
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(r["estimator"], []).append(r)

    def col(rs, name):
        return np.array([float(r[name]) if r.get(name) not in (None, "") else np.nan for r in rs])

    out = []
    for est, rs in groups.items():
        name = ESTIMATOR_STYLE.get(est, (est,))[0]
        extra = f", {made_for.get('inits')} initialisations" if est == "gd_averaged" and made_for.get("inits") else ""
        out.append(
            {
                "estimator": est,
                "channel": made_for.get("channel", "softmax"),
                "d": made_for.get("d"),
                "rho": float(made_for.get("rho", math.nan)),
                "T": int(made_for.get("T", 2)),
                "alpha": col(rs, "alpha"),
                "mmse": col(rs, "mse_mean"),
                "mmse_se": col(rs, "mse_se"),
                "test": col(rs, "test_mean"),
                "test_se": col(rs, "test_se"),
                "label": f"{name}, d = {made_for.get('d')}{extra}",
            }
        )
    return out


def _xvalues(alpha, rho, T, xaxis: str) -> np.ndarray:
    alpha = np.asarray(alpha, dtype=float)
    if xaxis == "alpha_bar":
        return alpha * (T * T + T - 2)
    if xaxis == "alpha_over_rho":
        return alpha / rho
    return alpha


def _geometric(x: np.ndarray) -> bool:
    """More than a decade, and the ratios of consecutive values closer to constant than the differences."""
    x = np.unique(x[np.isfinite(x) & (x > 0)])
    if x.size < 3 or x[-1] / x[0] < 10:
        return False
    return float(np.std(np.diff(np.log(x)))) < float(
        np.std(np.diff(x)) / np.mean(np.diff(x)) * np.mean(np.diff(np.log(x)))
    )


class _Colours:
    """One colour per problem key, in order of first use (the matplotlib cycle)."""

    def __init__(self, ax):
        self.ax, self.known = ax, {}

    def __call__(self, key):
        if key not in self.known:
            self.known[key] = self.ax._get_lines.get_next_color()
        return self.known[key]


def _problem_label(channel: str, rho: float, T: int) -> str:
    return f"{channel}, ρ = {rho:g}, T = {T}"


def _draw_points(ax, colours, algorithm_points, xaxis, y: str, yse: str) -> None:
    dims: list = []
    for extra in algorithm_points:
        label_name, marker, filled = ESTIMATOR_STYLE.get(extra["estimator"], (extra["estimator"], "^", True))
        c = colours((extra["channel"], extra["rho"], extra["T"]))
        if extra.get("d") not in dims:
            dims.append(extra.get("d"))
        i = dims.index(extra.get("d"))
        x = _xvalues(extra["alpha"], extra["rho"], extra["T"], xaxis)
        ax.errorbar(
            x,
            extra[y],
            yerr=extra.get(yse),
            fmt=marker,
            ms=D_MARKER_SIZES[min(i, len(D_MARKER_SIZES) - 1)],
            capsize=2,
            color=c,
            mfc=c if filled else "white",
            mec=c if i == 0 else "k",
            lw=1,
            label=f"{extra['label']}, {_problem_label(extra['channel'], extra['rho'], extra['T'])}",
        )


def _finish(ax, xaxis, xs, ylabel, title) -> None:
    if _geometric(np.concatenate(xs) if xs else np.array([])):
        ax.set_xscale("log")
    ax.set_xlabel(X_LABELS[xaxis])
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    if title:
        ax.set_title(title, fontsize=9)
    handles, _ = ax.get_legend_handles_labels()
    if len(handles) > 8:  # a long legend goes beside the axes, where it hides no point
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        ax.legend(fontsize=6.5)
    ax.grid(alpha=0.3)


def mmse_figure(
    curves: Sequence[Sequence[SEPoint]],
    thresholds: Sequence[dict] | None = None,
    xaxis: str = "alpha",
    title: str = "",
    algorithm_points: Sequence[dict] = (),
) -> Figure:
    """MMSE against α (or ᾱ, or α/ρ) for each curve; perfect-recovery thresholds as dotted lines and,
    against α/ρ, the ρ → 0 weak-recovery threshold of the last curve's channel (dash-dotted); algorithm
    points (:func:`read_algorithm_points`) in the colour of their problem's curve."""
    for curve in check_instance("curves", curves, (list, tuple), "sequence of state-evolution curves"):
        check_instance("a curve", curve, (list, tuple), "sequence of SEPoint")
        for p in curve:
            check_instance("a curve's point", p, SEPoint, "dotattn.aim.state_evolution.SEPoint")
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    colours = _Colours(ax)
    xs = []
    for i, pts in enumerate(curves):
        if not pts:
            continue
        pts = sorted(pts, key=lambda p: p.alpha)
        p0 = pts[0]
        thr = (thresholds or [{}] * len(curves))[i]
        variant = thr.get("_label", "gradient")
        label = _problem_label(p0.channel, p0.rho, p0.tokens) + (" (published φ₂/Φ₂)" if variant == "published" else "")
        c = colours((p0.channel, p0.rho, p0.tokens))
        x = _xvalues([p.alpha for p in pts], p0.rho, p0.tokens, xaxis)
        xs.append(x)
        ax.plot(
            x,
            [p.mmse for p in pts],
            "--" if variant == "published" else "-",
            lw=1.5,
            label=label,
            color=c,
            marker="." if len(pts) <= _FEW else None,
        )
        a_pr = thr.get("alpha_perfect_recovery")
        if a_pr is not None and math.isfinite(a_pr):
            ax.axvline(float(_xvalues(a_pr, p0.rho, p0.tokens, xaxis)), color=c, ls=":", lw=1)
        a_wr = thr.get("alpha_weak_recovery_small_rho")
        if xaxis == "alpha_over_rho" and a_wr is not None and i == len(curves) - 1:
            ax.axvline(a_wr / p0.rho, color="k", ls="-.", lw=0.8, label=f"ρ → 0 weak recovery ({p0.channel})")
    _draw_points(ax, colours, algorithm_points, xaxis, "mmse", "mmse_se")
    _finish(ax, xaxis, xs, "MMSE = Q0 − q (curves); (1/d)‖Ŝ − S*‖²_F (points)", title)
    return fig


def test_error_figure(
    curves: Sequence[Sequence[Any]], xaxis: str = "alpha_bar", title: str = "", algorithm_points: Sequence[dict] = ()
) -> Figure:
    """Bayes-optimal test error (1/T) E‖ŷ − y‖²_F against α (or ᾱ) from free-entropy rows (the selected
    fixed point; a band of ±2 Monte-Carlo standard errors), with the plug-in test error of the algorithms'
    estimators on fresh samples (points, in the colour of their problem)."""
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    colours = _Colours(ax)
    xs = []
    for rows in curves:
        rows = sorted((r for r in rows if r.selected and r.start == "uninformed"), key=lambda r: r.alpha)
        if not rows:
            continue
        p0 = rows[0]
        c = colours((p0.channel, p0.rho, p0.tokens))
        x = _xvalues([r.alpha for r in rows], p0.rho, p0.tokens, xaxis)
        xs.append(x)
        y = np.array([r.test_error for r in rows])
        se = np.array([r.test_error_se for r in rows])
        ax.plot(
            x,
            y,
            "-",
            lw=1.5,
            color=c,
            marker="." if len(rows) <= _FEW else None,
            label=f"Bayes-optimal, {_problem_label(p0.channel, p0.rho, p0.tokens)}, β = {p0.beta:g}",
        )
        if np.any(se > 0):
            ax.fill_between(x, y - 2 * se, y + 2 * se, color=c, alpha=0.25, lw=0)
    _draw_points(ax, colours, [p for p in algorithm_points if np.any(np.isfinite(p["test"]))], xaxis, "test", "test_se")
    _finish(ax, xaxis, xs, "test error (1/T) E‖ŷ − y‖²_F", title)
    return fig
