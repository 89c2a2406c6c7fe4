"""Figures of the image claims over many networks (``dotattn paths networks``), as ``matplotlib.figure.Figure``
objects: every network drawn as a point, each size's mean ± se (from the records of
:mod:`dotattn.paths.networks`) beside them. Plotting only: nothing here computes a statistic."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from dotattn.paths.images_plotting import SET_TITLES
from dotattn.paths.networks import LITTLE_COST, REFUTE_GAIN, SETS, ClaimRow, NetworkResult

__all__ = ["figure_claim1", "figure_claim2"]

_ROW_TITLES = {
    "gain": "gain over the GP at N*",
    "gap": "network - theory at N*",
    "spearman": "Spearman rho (score vs drop)",
    "pruning_change": "two lowest heads pruned - unpruned",
}
_CLAIM_FIELDS = {
    "gain": ("gain_mean", "gain_se"),
    "gap": ("gap_mean", "gap_se"),
    "spearman": ("rho_mean", None),
    "pruning_change": ("change_mean", "change_se"),
}


def _panel(ax, results: Sequence[NetworkResult], claims: Sequence[ClaimRow], part: str, field: str) -> None:
    widths = sorted({r.width for r in results})
    for j, w in enumerate(widths):
        mine = sorted((r for r in results if r.width == w and r.set == part), key=lambda r: r.train_seed)
        ys = np.array([getattr(r, field) for r in mine], dtype=float)
        xs = j + np.linspace(-0.18, 0.18, len(ys)) if len(ys) > 1 else np.full(len(ys), float(j))
        ax.plot(xs, ys, "o", color="tab:blue", ms=4, alpha=0.7, label="one network" if j == 0 else None)
        c = next((c for c in claims if c.width == w and c.set == part), None)
        if c is None:
            continue
        mean_f, se_f = _CLAIM_FIELDS[field]
        mean = getattr(c, mean_f)
        se = getattr(c, se_f) if se_f else np.nan
        ax.errorbar(
            [j + 0.32],
            [mean],
            yerr=[se] if np.isfinite(se) else None,
            fmt="s",
            color="black",
            ms=5,
            capsize=3,
            label=("mean +- se" if se_f else "mean") if j == 0 else None,
        )
        if field == "spearman" and np.isfinite(c.p):
            ax.annotate(f"p = {c.p:.3g}", (j + 0.32, mean), xytext=(4, 4), textcoords="offset points", fontsize=6)
    ax.axhline(0.0, color="grey", lw=0.8, ls=":")
    level = {"gain": REFUTE_GAIN, "pruning_change": LITTLE_COST}.get(field)
    if level is not None and (field == "gain" or part == "test"):  # the rule's level (every set / in distribution)
        ax.axhline(
            level, color="tab:red", lw=0.8, ls="--", label=f"rule's level {level:+g}" if part == SETS[0] else None
        )
    ax.set_xlim(-0.5, len(widths) - 0.5)
    qk = {r.width: r.qk_dim for r in results}
    ax.set_xticks(range(len(widths)), [f"width {w}\n(qk {qk[w]}, n = {_count(results, w)})" for w in widths])
    ax.tick_params(labelsize=7)


def _count(results: Sequence[NetworkResult], width: int) -> int:
    return len({r.train_seed for r in results if r.width == width})


def _figure(results: Sequence[NetworkResult], claims: Sequence[ClaimRow], fields: Sequence[str], title: str) -> Figure:
    fig = Figure(figsize=(4.0 * len(SETS), 2.9 * len(fields)))
    axes = fig.subplots(len(fields), len(SETS), squeeze=False)
    for i, field in enumerate(fields):
        for j, part in enumerate(SETS):
            ax = axes[i, j]
            _panel(ax, results, claims, part, field)
            if i == 0:
                ax.set_title(SET_TITLES[part], fontsize=8)
            if j == 0:
                ax.set_ylabel(_ROW_TITLES[field], fontsize=8)
                ax.legend(fontsize=6, loc="best")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def figure_claim1(results: Sequence[NetworkResult], claims: Sequence[ClaimRow]) -> Figure:
    """Claim 1 per set (columns) and size: the gain over the GP at N* and the network - theory gap of every
    network, with the mean ± se over networks."""
    return _figure(results, claims, ("gain", "gap"), "claim 1: finite width against its GP limit, every network")


def figure_claim2(results: Sequence[NetworkResult], claims: Sequence[ClaimRow]) -> Figure:
    """Claim 2 per set (columns) and size: Spearman's rho of head scores against the network's drops (mean and the
    pooled permutation p) and the change when the two lowest-scoring heads are pruned, every network, with the mean
    ± se over networks."""
    return _figure(results, claims, ("spearman", "pruning_change"), "claim 2: head scores and pruning, every network")
