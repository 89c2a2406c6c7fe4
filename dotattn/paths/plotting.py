"""Figures of the attention-paths study, as ``matplotlib.figure.Figure`` objects (no pyplot, no physics)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.paths.analysis import PathsPoint
    from dotattn.paths.data import PathData

__all__ = [
    "figure_accuracy_loss",
    "figure_U_heatmaps",
    "figure_path_kernels",
    "figure_alignment",
    "figure_head_scores",
    "figure_sample",
    "figure_U_vs_N",
    "figure_gap_vs_N",
]

SUBSET_STYLE = {
    "all": ("tab:blue", "all paths"),
    "good": ("tab:green", "good path only"),
    "good+denoising": ("tab:orange", "good + denoising"),
}


def figure_accuracy_loss(points: Sequence[PathsPoint], subsets: Sequence[str]) -> Figure:
    """Test accuracy and loss against N: theory (lines), GP limit (dashed), sampler (points with errors)."""
    fig = Figure(figsize=(10, 4))
    axes = fig.subplots(1, 2)
    for ax, key in zip(axes, ("accuracy", "loss"), strict=True):
        for subset in subsets:
            colour, label = SUBSET_STYLE.get(subset, ("k", subset))
            th = sorted((p for p in points if p.subset == subset and p.method == "theory"), key=lambda p: p.N)
            ax.plot(
                [p.N for p in th], [getattr(p, key) for p in th], "-o", color=colour, ms=4, label=f"theory, {label}"
            )
            for p in points:
                if p.subset == subset and p.method == "gp":
                    ax.axhline(getattr(p, key), color=colour, ls="--", lw=1, label=f"GP limit, {label}")
        sm = sorted((p for p in points if p.method == "sampled"), key=lambda p: p.N)
        if sm:
            ax.errorbar(
                [p.N for p in sm],
                [getattr(p, key) for p in sm],
                yerr=[getattr(p, f"{key}_error") for p in sm],
                fmt="s",
                color="k",
                mfc="none",
                ms=8,
                capsize=3,
                label="NUTS, all paths",
            )
        ax.set_xscale("log")
        ax.set_xlabel("width N")
        ax.set_ylabel(f"test {key}" + (" (mean predictor MSE)" if key == "loss" else ""))
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _heat(ax, M: np.ndarray, names: Sequence[str], title: str, vmax: float | None = None, ylabels: bool = True) -> Any:
    vmax = vmax or float(np.max(np.abs(M)))
    im = ax.imshow(M, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(names)), names if ylabels else [""] * len(names), fontsize=7)
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            ax.text(j, i, f"{M[i, j]:.2g}", ha="center", va="center", fontsize=7)
    ax.set_title(title, fontsize=9)
    return im


def figure_U_heatmaps(Us: dict[float, np.ndarray], names: Sequence[str]) -> Figure:
    """U (paths in summary order) at a few widths, one heat map each, entries written in. Each panel has
    its own symmetric colour scale, ± its largest |U| (one shared scale let U at the smallest N saturate
    it and left the others pale), with its own labelled colour bar."""
    fig = Figure(figsize=(4.4 * len(Us), 3.8))
    axes = np.atleast_1d(fig.subplots(1, len(Us)))
    for k, (ax, (N, U)) in enumerate(zip(axes, sorted(Us.items()), strict=True)):
        vmax = float(np.max(np.abs(U)))
        im = _heat(ax, U, names, f"U at N = {N:g}", vmax, ylabels=k == 0)
        cb = fig.colorbar(im, ax=ax, shrink=0.8)
        cb.set_label(f"U (this panel: ± {vmax:.3g})", fontsize=8)
    fig.tight_layout()
    return fig


def figure_path_kernels(data: PathData, order: Sequence[int]) -> Figure:
    """The diagonal path kernels C_ππ on the training set (rows and columns sorted by label)."""
    srt = np.argsort(-data.y_train, kind="stable")
    fig = Figure(figsize=(3.2 * len(order), 3.2))
    axes = np.atleast_1d(fig.subplots(1, len(order)))
    for ax, i in zip(axes, order, strict=True):
        C = data.C_train[i, i][np.ix_(srt, srt)]
        im = ax.imshow(C, cmap="viridis")
        fig.colorbar(im, ax=ax, shrink=0.8).set_label("path kernel C_ππ(x, x′)", fontsize=7)
        ax.set_title(f"C of path {data.path_names[i]}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("examples (label +1 | label -1)", fontsize=7)
    fig.tight_layout()
    return fig


def figure_alignment(pa: np.ndarray, names: Sequence[str], rows: Sequence[dict]) -> Figure:
    """Path-path kernel-label alignment (left) and the alignment of K(U) against N (right)."""
    fig = Figure(figsize=(9, 3.8))
    ax1, ax2 = fig.subplots(1, 2)
    im = _heat(ax1, pa, names, "alignment of C_ππ' with the labels")
    fig.colorbar(im, ax=ax1, shrink=0.8).set_label("kernel-label alignment", fontsize=8)
    gp = [r["alignment"] for r in rows if r["N"] == "gp"]
    th = [(r["N"], r["alignment"]) for r in rows if r["N"] != "gp"]
    ax2.plot([n for n, _ in th], [a for _, a in th], "-o", label="theory K(U)")
    if gp:
        ax2.axhline(gp[0], ls="--", color="k", label="GP limit")
    ax2.set_xscale("log")
    ax2.set_xlabel("width N")
    ax2.set_ylabel("kernel-label alignment")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def figure_head_scores(heads: Sequence[dict]) -> Figure:
    """Head scores from U (bars) and the test accuracy with that head pruned (points), per width."""
    Ns = sorted({h["N"] for h in heads})
    labels = sorted({(h["layer"], h["head"]) for h in heads})
    fig = Figure(figsize=(9, 3.8))
    ax1, ax2 = fig.subplots(1, 2)
    width = 0.8 / max(len(Ns), 1)
    for k, N in enumerate(Ns):
        sc = [next(h["score"] for h in heads if h["N"] == N and (h["layer"], h["head"]) == lab) for lab in labels]
        acc = [
            next(h["accuracy_pruned"] for h in heads if h["N"] == N and (h["layer"], h["head"]) == lab)
            for lab in labels
        ]
        x = np.arange(len(labels)) + k * width
        ax1.bar(x, sc, width, label=f"N = {N:g}")
        # the heads are categories: markers side by side per head, never a line joining them
        ax2.plot(x, acc, "o", ls="none", label=f"N = {N:g}")
    names = [f"L{l} {h}" for l, h in labels]
    ax1.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, names)
    ax1.set_ylabel("head score (per layer, sums to 1)")
    ax1.legend(fontsize=7)
    ax2.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, names)
    ax2.set_ylabel("test accuracy with the head pruned")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_sample(U: np.ndarray, U_theory: np.ndarray, z: np.ndarray, names: Sequence[str], N: float) -> Figure:
    """Traces of the diagonal of U per chain against the theory (left), per-entry z-scores (right)."""
    fig = Figure(figsize=(10, 4))
    ax1, ax2 = fig.subplots(1, 2)
    chains, draws, n, _ = U.shape
    for i in range(n):
        for c in range(chains):
            ax1.plot(
                np.arange(draws), U[c, :, i, i], lw=0.6, alpha=0.7, color=f"C{i}", label=names[i] if c == 0 else None
            )
        ax1.axhline(U_theory[i, i], color=f"C{i}", ls="--", lw=1.5)
    ax1.set_xlabel("draw (all chains overlaid)")
    ax1.set_ylabel("U_ππ (dashed: theory)")
    ax1.set_title(f"NUTS at N = {N:g}", fontsize=9)
    ax1.legend(fontsize=7)
    _heat(ax2, z, names, "z = (sampled mean - theory) / MCSE", max(3.0, float(np.max(np.abs(z)))))
    fig.tight_layout()
    return fig


def figure_U_vs_N(per_N: dict[str, dict[str, Any]], names: Sequence[str]) -> Figure:
    """The large entries of U against N: saddle point (line), first-order mean estimate (dashed), collapsed
    posterior mean ± 2 Monte-Carlo errors (circles), NUTS over the weights ± 2 errors (squares)."""
    entries = [(0, 0), (1, 1), (0, 1)]
    fig = Figure(figsize=(13, 4))
    axes = fig.subplots(1, len(entries))
    Ns = sorted(per_N, key=float)
    for ax, (i, j) in zip(axes, entries, strict=True):
        if i >= len(names) or j >= len(names):
            ax.set_visible(False)
            continue
        x = [float(n) for n in Ns]
        ax.plot(x, [per_N[n]["U"][i][j] for n in Ns], "-", color="tab:blue", label="saddle point")
        lap = [(float(n), per_N[n]["U_mean_1overN"][i][j]) for n in Ns if "U_mean_1overN" in per_N[n]]
        if lap:
            ax.plot(*zip(*lap, strict=True), "--", color="tab:orange", label="saddle point + O(1/N) mean correction")
        for key, se_key, fmt, label in (
            ("U_collapsed", "U_collapsed_mcse", "o", "collapsed posterior mean"),
            ("U_sampled", "U_sampled_mcse", "s", "NUTS over the weights"),
        ):
            pts = [
                (float(n), per_N[n][key][i][j], 2 * per_N[n][se_key][i][j])
                for n in Ns
                if key in per_N[n] and se_key in per_N[n]
            ]
            if pts:
                xs, ys, es = zip(*pts, strict=True)
                ax.errorbar(xs, ys, yerr=es, fmt=fmt, mfc="none", ms=7, capsize=3, label=f"{label} ± 2 se")
        ax.set_xscale("log")
        ax.set_xlabel("width N")
        ax.set_title(f"U[{names[i]}, {names[j]}]")
    axes[0].legend(fontsize=7)
    return fig


def figure_gap_vs_N(gap: dict[str, Any]) -> Figure:
    """N × relative gap (collapsed mean − saddle point)/saddle point against N, ± 2 Monte-Carlo errors, one
    panel per entry (each on its own scale: a small entry's relative error grows with N): flat means a gap
    falling like 1/N; dashed, the fitted series a + b/N where ``gap["fits"]`` has it."""
    labels = {(0, 0): "good", (1, 1): "denoising", (0, 1): "good, denoising"}
    present = [(ij, lab) for ij, lab in labels.items() if any(r["entry"] == list(ij) for r in gap["rows"])]
    fig = Figure(figsize=(4.2 * max(len(present), 1), 4))
    axes = np.atleast_1d(fig.subplots(1, max(len(present), 1), sharex=True))
    for ax, ((i, j), lab) in zip(axes, present, strict=False):
        pts = [r for r in gap["rows"] if r["entry"] == [i, j]]
        N = np.array([r["N"] for r in pts])
        ax.errorbar(
            N,
            N * np.array([r["gap"] for r in pts]),
            yerr=2 * N * np.array([r["gap_error"] for r in pts]),
            fmt="o",
            capsize=3,
            label="collapsed mean vs saddle point",
        )
        fit = gap.get("fits", {}).get(f"{i},{j}", {})
        if "a_1overN" in fit:
            n = np.geomspace(N.min(), N.max(), 100)
            ax.plot(
                n,
                fit["a_1overN"] + fit["b_1overN2"] / n,
                "--",
                color="k",
                lw=1,
                label=f"a + b/N: a = {fit['a_1overN']:.2f} ± {fit['a_error']:.2f}, "
                f"b = {fit['b_1overN2']:.1f} ± {fit['b_error']:.1f}",
            )
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xscale("log")
        ax.set_xlabel("width N")
        ax.set_title(f"U[{lab}]")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("N × relative gap of the saddle point")
    fig.tight_layout()
    return fig
