"""Figures of the one-shot image study, as ``matplotlib.figure.Figure`` objects (no pyplot, no physics)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

__all__ = ["figure_episodes", "figure_accuracy_vs_N", "figure_U", "figure_heads"]

SET_TITLES = {
    "test": "Omniglot, test characters (in distribution)",
    "fashion_mnist": "FashionMNIST T-shirt vs trouser",
    "digits": "digits 0 vs 1 (scikit-learn)",
}


def set_titles(ways: int = 2) -> dict[str, str]:
    """Panel titles of the evaluation sets for episodes of ``ways`` classes."""
    if ways == 2:
        return dict(SET_TITLES)
    return {
        "test": f"Omniglot {ways}-way, test characters (in distribution)",
        "fashion_mnist": f"FashionMNIST {ways}-way (classes 0-{ways - 1})",
        "digits": f"digits {ways}-way (0-{ways - 1}, scikit-learn)",
    }


def figure_episodes(rows: Sequence[tuple[str, np.ndarray, float]]) -> Figure:
    """One row per episode: (title, images (ways + 1, 32, 32) support 1, …, support N, query, label: ±1 for
    two ways, the position of the matching support for more)."""
    cols = max(len(ims) for _, ims, _ in rows)
    ways = cols - 1
    fig = Figure(figsize=(1.6 * cols, 1.6 * len(rows)))
    axes = fig.subplots(len(rows), cols, squeeze=False)
    for r, (title, ims, y) in enumerate(rows):
        for c in range(cols):
            ax = axes[r, c]
            ax.imshow(ims[c], cmap="gray_r")
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(title, fontsize=7)
            if ways == 2:
                match = (c == 0 and y > 0) or (c == 1 and y < 0)
            else:
                match = c == int(y)
            name = f"support {c + 1}" if c < ways else "query"
            ax.set_title(name + (" (match)" if match else ""), fontsize=7)
    if ways == 2:
        fig.suptitle("one-shot episodes: label +1 when the query matches support 1", fontsize=8)
    else:
        fig.suptitle(f"{ways}-way one-shot episodes: the label is the matching support", fontsize=8)
    fig.tight_layout()
    return fig


def figure_accuracy_vs_N(
    per_N: dict[str, Any],
    gd_eval: dict[str, Any],
    sets: Sequence[str],
    sample: dict[str, Any] | None = None,
    titles: dict[str, str] | None = None,
) -> Figure:
    """Test accuracy against the width N for each evaluation set: finite-width theory (points with
    binomial errors), GP limit (band), the gradient-descent network (dotted line and band)."""
    fig = Figure(figsize=(4.2 * len(sets), 3.6))
    axes = fig.subplots(1, len(sets), squeeze=False)[0]
    widths = sorted((float(k), v) for k, v in per_N.items() if k != "gp" and "temperature" in v)
    for ax, part in zip(axes, sets, strict=True):
        Ns = [N for N, _ in widths]
        acc = [v[part]["accuracy"] for _, v in widths]
        err = [v[part]["accuracy_error"] for _, v in widths]
        ax.errorbar(Ns, acc, yerr=err, fmt="-o", color="tab:blue", ms=4, capsize=2, label="finite-width theory")
        if "gp" in per_N and "temperature" in per_N["gp"]:
            g = per_N["gp"][part]
            ax.axhspan(
                g["accuracy"] - g["accuracy_error"], g["accuracy"] + g["accuracy_error"], color="tab:orange", alpha=0.25
            )
            ax.axhline(g["accuracy"], color="tab:orange", ls="--", label="GP limit (N → ∞)")
        if part in gd_eval:
            e = gd_eval[part]
            ax.axhspan(e["accuracy"] - e["accuracy_error"], e["accuracy"] + e["accuracy_error"], color="k", alpha=0.1)
            ax.axhline(e["accuracy"], color="k", ls=":", label="trained network (gradient descent)")
        if sample is not None and part == "test":
            ax.errorbar(
                [sample["N"]],
                [sample["accuracy_sampled"]],
                yerr=[sample["accuracy_sampled_error"]],
                fmt="s",
                mfc="none",
                color="tab:green",
                ms=8,
                capsize=3,
                label=f"posterior samples (P = {sample['P']})",
            )
            ax.plot(
                [sample["N"]],
                [sample["accuracy_theory"]],
                "x",
                color="tab:green",
                ms=8,
                label=f"theory at P = {sample['P']}",
            )
        ax.axhline(0.5, color="0.6", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("width N")
        ax.set_ylabel("test accuracy")
        ax.set_title((titles or SET_TITLES).get(part, part), fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_U(U: np.ndarray, names: Sequence[str], N: float) -> Figure:
    """The order parameter U (paths × paths) at width N, paths labelled by their (layer-1, layer-2) heads."""
    fig = Figure(figsize=(7.5, 6.5))
    ax = fig.subplots()
    vmax = float(np.max(np.abs(U)))
    im = ax.imshow(U, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_title(f"order parameter U at N = {N:g} (path = layer-1 head > layer-2 head)", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig


def figure_heads(
    heads: Sequence[dict[str, Any]],
    pruning: dict[str, Any],
    sets: Sequence[str],
    titles: dict[str, str] | None = None,
) -> Figure:
    """Head score (from U at the smallest width) against the accuracy drop of the trained network when
    that head alone is pruned, one panel per evaluation set, with the Spearman correlation and interval."""
    fig = Figure(figsize=(4.2 * len(sets), 3.6))
    axes = fig.subplots(1, len(sets), squeeze=False)[0]
    for ax, part in zip(axes, sets, strict=True):
        s = np.array([h["score"] for h in heads])
        d = np.array([h[f"gd_drop_{part}"] for h in heads])
        colours = ["tab:blue" if h["layer"] == 1 else "tab:red" for h in heads]
        ax.scatter(s, d, c=colours, s=25)
        for h, si, di in zip(heads, s, d, strict=True):
            ax.annotate(f"L{h['layer']}H{h['head']}", (si, di), fontsize=7, xytext=(3, 3), textcoords="offset points")
        sp = pruning.get(part, {}).get("spearman_score_vs_gd_drop", {})
        if sp:
            ax.set_title(
                f"{(titles or SET_TITLES).get(part, part)}\nSpearman {sp['spearman']:.2f} [{sp['low']:.2f}, {sp['high']:.2f}]",
                fontsize=8,
            )
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xlabel("head score (theory, smallest N; blue layer 1, red layer 2)")
        ax.set_ylabel("accuracy drop when pruned (trained network)")
    fig.tight_layout()
    return fig
