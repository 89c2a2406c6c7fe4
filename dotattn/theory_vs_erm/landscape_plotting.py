"""The figure of a best-of-K study (``dotattn landscape``): the crossing against K, per search and d.

Plotting only: the arrays come from :func:`dotattn.theory_vs_erm.landscape_output.panels`; nothing here
computes physics or touches pyplot's global state or the backend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dotattn.positional_semantic.plotting import new_figure

__all__ = ["figure_crossing_vs_k"]


def figure_crossing_vs_k(panels: Sequence[dict[str, Any]], alpha_c: float, alpha_c_error: float = math.nan) -> Figure:
    """One panel per (search, d), searches in rows and d in columns: every seed's crossing against K (faint
    lines), the mean over the seeds with a crossing ± se (points), the every-start mean ± se (a diamond right
    of K_max), the K → ∞ line c_inf + slope/ln K over K ≥ 2 with c_inf and its interval at the right edge,
    and the replica α_c (horizontal line, its error as a band)."""
    searches = list(dict.fromkeys(p["search"] for p in panels))
    ds = sorted({p["d"] for p in panels})
    fig = new_figure(figsize=(4.2 * len(ds), 3.0 * len(searches) + 0.6), layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(searches), len(ds), squeeze=False, sharey=True))
    for p in panels:
        ax = axes[searches.index(p["search"]), ds.index(p["d"])]
        k = np.asarray(p["k"], dtype=float)
        for row in np.asarray(p["seeds"], dtype=float):
            ax.plot(k, row, color="0.6", lw=0.7, alpha=0.45)
        ax.errorbar(k, p["mean"], yerr=p["se"], fmt="o-", color="C0", ms=4, capsize=2, label="mean ± se")
        right = k[-1] * 2 if k.size else 2.0
        if math.isfinite(p["every_mean"]):
            ax.errorbar(
                [right], [p["every_mean"]], yerr=[p["every_se"]], fmt="D", color="C2", ms=5, label="every start"
            )
        if math.isfinite(p["c_inf"]) and k.size and k[-1] >= 2:
            kk = np.geomspace(2, k[-1], 50)
            ax.plot(kk, p["c_inf"] + p["slope"] / np.log(kk), "--", color="C1", lw=1, label="c_inf + b / ln K")
            lo, hi = p["ci"]
            if math.isfinite(lo) and math.isfinite(hi):
                ax.errorbar(
                    [right * 1.6],
                    [p["c_inf"]],
                    yerr=[[p["c_inf"] - lo], [hi - p["c_inf"]]],
                    fmt="s",
                    color="C1",
                    ms=5,
                    capsize=3,
                    label="K → ∞ (95 %)",
                )
        ax.axhline(alpha_c, color="C3", lw=1.2, label="replica α_c")
        if math.isfinite(alpha_c_error):
            ax.axhspan(alpha_c - alpha_c_error, alpha_c + alpha_c_error, color="C3", alpha=0.15, lw=0)
        ax.set_xscale("log", base=2)
        ticks = [*k, right, right * 1.6]
        ax.set_xticks(ticks, [*(f"{int(x)}" for x in k), "all", "∞"], fontsize=7)
        ax.minorticks_off()
        ax.set_title(f"{p['search']} search, d = {p['d']}", fontsize=9)
        ax.set_xlabel("K (best of K)")
        if ds.index(p["d"]) == 0:
            ax.set_ylabel("crossing α")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=len(handles), fontsize=8)
    return fig
