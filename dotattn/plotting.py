"""Figures from computed records and summaries, as ``matplotlib.figure.Figure`` objects.

Plotting never computes physics: it only reads the records (one :class:`BranchPoint` per ω, α,
branch), the per-ω :class:`ColumnSummary` objects that the sweeps produced, and the numbers the
comparison assembled. It never touches pyplot's global state or the backend: save a figure with
``fig.savefig`` (or :func:`dotattn.io.save_figure`), show it in a notebook by displaying it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap, SymLogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from dotattn.records import BranchPoint

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.alpha_c import TheoryColumn
    from dotattn.comparison import ComparisonRow
    from dotattn.phase_diagram import ColumnSummary
    from dotattn.records import PhaseBoundary

__all__ = ["figure_headline", "figure_test_error", "figure_overlaps", "figure_phase_plane", "figure_phases", "PHASES",
           "figure_comparison", "figure_finite_size", "branch_series", "unstable_points",
           "figure_alpha_c_delta", "figure_alpha_c_scaling"]

COLOURS = {"positional": "tab:blue", "semantic": "tab:red", "mixed": "tab:purple"}
PHASES: tuple[str, ...] = ("positional", "semantic", "mixed")
"""The globally minimal phases of the phases figure, in the order of their colours."""
BRANCH_STYLE = {"positional": (COLOURS["positional"], "o"), "semantic": (COLOURS["semantic"], "o"),
                "mixed": ("tab:purple", "s")}
"""Colour and ERM marker per branch in the comparison figure."""


def _figure(**kw: Any) -> Figure:
    """A figure detached from pyplot (no global state, any backend)."""
    return Figure(**kw)


def branch_series(points: Sequence[BranchPoint], omega: float, branch: str,
                  key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(α, value of attribute ``key``, selected) of one branch at one ω, converged points only, sorted by α."""
    pts = sorted((p for p in points if abs(p.omega - omega) < 1e-9 and p.branch == branch and p.converged),
                 key=lambda p: p.alpha)
    a = np.array([p.alpha for p in pts])
    v = np.array([getattr(p, key) for p in pts], dtype=float)
    sel = np.array([p.selected for p in pts], dtype=bool)
    return a, v, sel


def _solid_dashed(ax, a: np.ndarray, v: np.ndarray, sel: np.ndarray, colour: str, label: str) -> None:
    """Selected stretches solid, metastable stretches dashed."""
    ax.plot(a, v, ls="--", color=colour, lw=1.2, alpha=0.8)
    vs = np.where(sel, v, np.nan)
    ax.plot(a, vs, ls="-", color=colour, lw=2.4, label=label)


def unstable_points(points: Sequence[BranchPoint], omega: float, branch: str,
                    key: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(α, value of ``key``) of one branch's converged points at ω whose RS verdict is AT-unstable
    (replicon ≥ 1) or AT-undecided (1 within two standard errors), by verdict."""
    out = {}
    for label in ("AT-unstable", "AT-undecided"):
        pts = sorted((p for p in points if abs(p.omega - omega) < 1e-9 and p.branch == branch and p.converged
                      and p.stability is not None and p.stability.label == label), key=lambda p: p.alpha)
        out[label] = (np.array([p.alpha for p in pts]), np.array([getattr(p, key) for p in pts], dtype=float))
    return out


UNSTABLE_STYLE = {"AT-unstable": dict(marker="*", color="k", ms=9, ls="none"),
                  "AT-undecided": dict(marker="o", mfc="none", color="k", ms=7, mew=1.0, ls="none")}
"""How RS-unstable stretches are marked: ★, replicon ≥ 1; ○, undecided (docs/rs_stability.md)."""
_UNSTABLE_LABEL = {"AT-unstable": "RS unstable (replicon ≥ 1)", "AT-undecided": "RS undecided (replicon ≈ 1)"}


def _mark_unstable(ax, rows: Sequence[BranchPoint], omega: float, series: Sequence[tuple[str, str]],
                   scale: float = 1.0) -> None:
    """Mark the AT-unstable and undecided points of each (branch, key) in ``series`` (values / ``scale``;
    one legend entry per kind present)."""
    shown = set()
    for b, key in series:
        for label, (a, v) in unstable_points(rows, omega, b, key).items():
            if a.size:
                ax.plot(a, v / scale, label=None if label in shown else _UNSTABLE_LABEL[label],
                        **UNSTABLE_STYLE[label])
                shown.add(label)


def figure_test_error(rows: Sequence[BranchPoint], summary: "ColumnSummary", title: str = "") -> Figure:
    """(a) ε_g against α at one ω: every followed branch (selected solid, metastable dashed), α_c,
    baseline."""
    omega = summary.omega
    fig = _figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    for b in PHASES:
        a, v, sel = branch_series(rows, omega, b, "test_error")
        if a.size:
            _solid_dashed(ax, a, v, sel, COLOURS[b], f"{b} branch")
    _mark_unstable(ax, rows, omega, [(b, "test_error") for b in PHASES])
    ax.axhline(summary.linear_baseline_test_error, color="k", ls=":", lw=1.5, label="linear baseline")
    if summary.alpha_c is not None:
        ax.axvline(summary.alpha_c, color="0.4", lw=1, ls="-.")
        ax.annotate(rf"$\alpha_c = {summary.alpha_c:.3f}$", (summary.alpha_c, ax.get_ylim()[1]),
                    xytext=(4, -14), textcoords="offset points", fontsize=9)
    if summary.alpha_lin is not None:
        ax.axvline(summary.alpha_lin, color="k", lw=0.8, ls=":",
                   label=rf"$\alpha_{{\rm lin}} = {summary.alpha_lin:.3f}$: attention beats linear")
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    ax.set_ylabel(r"test error $\varepsilon_g$")
    ax.set_title(title or rf"Test error at $\omega = {omega:g}$ (solid: global minimum; dashed: metastable)",
                 fontsize=10)
    ax.legend(frameon=False, fontsize=9)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def figure_overlaps(rows: Sequence[BranchPoint], summary: "ColumnSummary", sigma: float) -> Figure:
    """(b) ‖μ₁‖/σ² (``m_norm``; |m| of the toy model) and ‖θ‖_F/σ² against α at one ω, for both branches."""
    omega = summary.omega
    fig = _figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    # the other overlap of each branch is zero by symmetry (θ = 0 positional, m = 0 semantic)
    for b, key, marker, name in (("positional", "m_norm", "o", r"$m/\sigma^2$"),
                                 ("semantic", "theta_fro", "s", r"$\theta/\sigma^2$")):
        a, v, sel = branch_series(rows, omega, b, key)
        if a.size and np.any(np.isfinite(v)):
            ax.plot(a, v / sigma**2, ls="--", marker=marker, ms=3, color=COLOURS[b], lw=1)
            ax.plot(a, np.where(sel, v, np.nan) / sigma**2, ls="-", marker=marker, ms=4, color=COLOURS[b],
                    lw=2.4, label=f"{name}, {b} branch")
    _mark_unstable(ax, rows, omega, [("positional", "m_norm"), ("semantic", "theta_fro")], sigma**2)
    if summary.alpha_c is not None:
        ax.axvline(summary.alpha_c, color="0.4", lw=1, ls="-.", label=r"$\alpha_c$")
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel("overlap / $\\sigma^2$")
    ax.set_title(rf"Overlaps at $\omega = {omega:g}$ (solid: global minimum; dashed: metastable)", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def figure_phase_plane(rows: Sequence[BranchPoint], summaries: Sequence["ColumnSummary"]) -> Figure:
    """(c) (α, ω) plane coloured by e_t(semantic) − e_t(positional), with α_c(ω) (± its quadrature
    error where known) and α_lin(ω). With a mixed branch (rank ≥ 2) the colour compares the two pure
    branches only, and the colour bar says so (the globally minimal phase is :func:`figure_phases`)."""
    omegas = sorted({s.omega for s in summaries})
    alphas = sorted({r.alpha for r in rows})
    gap = np.full((len(omegas), len(alphas)), np.nan)
    only = np.full_like(gap, np.nan)
    idx_w = {w: i for i, w in enumerate(omegas)}
    idx_a = {a: j for j, a in enumerate(alphas)}
    et: dict[tuple, float] = {}
    for r in rows:
        if r.converged:
            et[(r.omega, r.alpha, r.branch)] = r.train_loss
    for w in omegas:
        for a in alphas:
            s, p = et.get((w, a, "semantic")), et.get((w, a, "positional"))
            if s is not None and p is not None:
                gap[idx_w[w], idx_a[a]] = s - p
            elif s is not None or p is not None:
                only[idx_w[w], idx_a[a]] = -1.0 if s is not None else 1.0
    fig = _figure(figsize=(7.2, 4.8))
    ax = fig.subplots()
    a_edges = _edges(np.array(alphas))
    w_edges = _edges(np.array(omegas))
    lim = np.nanmax(np.abs(gap)) if np.any(np.isfinite(gap)) else 1.0
    mesh = ax.pcolormesh(a_edges, w_edges, gap, cmap="RdBu_r", shading="flat",
                         norm=SymLogNorm(linthresh=max(lim * 1e-2, 1e-9), vmin=-lim, vmax=lim))
    ax.pcolormesh(a_edges, w_edges, np.ma.masked_invalid(only), cmap="Greys", vmin=-3, vmax=3, shading="flat")
    cb = fig.colorbar(mesh, ax=ax)
    mixed = any(r.converged and r.branch == "mixed" for r in rows)
    cb.set_label(r"$e_t^{\rm sem} - e_t^{\rm pos}$  (red: positional "
                 + ("below semantic)" if mixed else "is the global minimum)"))
    wc = [(s.alpha_c, s.omega, np.nan if s.alpha_c_error is None else s.alpha_c_error)
          for s in summaries if s.alpha_c is not None]
    if wc:
        a_c, w_c, err = zip(*wc)
        ax.errorbar(a_c, w_c, xerr=err, fmt="k-o", ms=3, lw=2, capsize=2, elinewidth=1,
                    label=r"$\alpha_c(\omega)$ ± its error (summary.json): positional $\to$ semantic")
    wl = [(s.alpha_lin, s.omega) for s in summaries if s.alpha_lin is not None]
    if wl:
        ax.plot(*zip(*wl), "w--s", ms=3, lw=1.5, mec="k", label=r"$\alpha_{\rm lin}(\omega)$: attention beats linear")
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel(r"positional fraction of the target $\omega$")
    title = "Phase diagram of dot-product attention" + (" (grey: one branch only)" if np.any(np.isfinite(only)) else "")
    if mixed:  # the colour compares the pure branches; the mixed phase is the global minimum where it exists
        title += "\npure branches only: the globally minimal (mixed) phase is in phases.png"
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.85)
    fig.tight_layout()
    return fig


def figure_phases(rows: Sequence[BranchPoint], summaries: Sequence["ColumnSummary"], title: str = "") -> Figure:
    """The (α, ω) plane with one colour per globally minimal phase (the ``selected`` record of
    each (ω, α): positional, semantic, mixed; white where none converged), the phase boundaries
    of the summaries as lines (one line per pair of phases across ω, ± the quadrature error of
    Brent roots; open markers: boundaries at a spinodal, crosses: unresolved), α_lin(ω), and black
    ★ / ○ where the selected fixed point is RS unstable (replicon ≥ 1) / undecided; the legend
    beside the plane."""
    omegas = sorted({s.omega for s in summaries})
    alphas = sorted({r.alpha for r in rows})
    grid = np.full((len(omegas), len(alphas)), np.nan)
    idx_w = {w: i for i, w in enumerate(omegas)}
    idx_a = {a: j for j, a in enumerate(alphas)}
    for r in rows:
        if r.selected and r.branch in PHASES and r.omega in idx_w:
            grid[idx_w[r.omega], idx_a[r.alpha]] = PHASES.index(r.branch)
    fig = _figure(figsize=(9.6, 4.8))
    ax = fig.subplots()
    cmap = ListedColormap([COLOURS[p] for p in PHASES])
    ax.pcolormesh(_edges(np.array(alphas)), _edges(np.array(omegas)), np.ma.masked_invalid(grid), cmap=cmap,
                  vmin=-0.5, vmax=len(PHASES) - 0.5, alpha=0.35, shading="flat")
    handles: list[Any] = [Patch(facecolor=COLOURS[p], alpha=0.35, label=f"{p} phase") for i, p in enumerate(PHASES)
                          if np.any(grid == i)]
    bounds: list["PhaseBoundary"] = [b for s in summaries for b in s.boundaries]
    styles = {"brent": ("o", "k"), "spinodal": ("v", "white"), "unresolved": ("x", "k")}
    for k, pair in enumerate(sorted({(b.below, b.above) for b in bounds})):
        pts = sorted((b for b in bounds if (b.below, b.above) == pair), key=lambda b: b.omega)
        colour = colormaps["Dark2"](k % 8)
        line = ax.plot([b.alpha for b in pts], [b.omega for b in pts], "-", color=colour, lw=1.8,
                       label=f"{pair[0]} → {pair[1]}")[0]
        if len(pts) == 1:  # a boundary found at one ω only is a marker, not a line: the legend shows it so
            marker, face = styles.get(pts[0].method, ("o", "k"))
            line.set(marker=marker, mfc=face if face == "white" else colour, ms=7, mew=1.5)
        for method, (marker, face) in styles.items():
            sub = [b for b in pts if b.method == method]
            if sub:
                ax.errorbar([b.alpha for b in sub], [b.omega for b in sub],
                            xerr=[0.0 if not np.isfinite(b.error) else b.error for b in sub], fmt=marker,
                            color=colour, mfc=face if face == "white" else colour, ms=7, mew=1.5, capsize=2,
                            lw=0, zorder=5)  # above the RS marks, which may sit on the same grid point
    def cell(x: float) -> float:  # width of the grid cell holding x
        j = int(np.clip(np.searchsorted(alphas, x), 1, len(alphas) - 1))
        return alphas[j] - alphas[j - 1] if len(alphas) > 1 else np.inf
    # a root whose quadrature error spans most of its grid cell, or reaches past the end of the α grid
    # (it may not lie in range at all): drawn, but not resolved
    wide = [b for b in bounds if b.method == "brent" and np.isfinite(b.error)
            and (b.error > 0.5 * cell(b.alpha) or b.alpha - b.error < alphas[0] or b.alpha + b.error > alphas[-1])]
    if wide:
        ax.plot([b.alpha for b in wide], [b.omega for b in wide], "o", ms=11, mfc="none", mec="red", mew=1.4,
                label="not resolved: error > half the grid cell or past the grid's end")
        for b in wide:
            ax.annotate(f"{b.below} → {b.above} ±{b.error:.2f}", (b.alpha, b.omega), xytext=(10, 4),
                        textcoords="offset points", fontsize=6, color="red")
    for method, (marker, face) in styles.items():
        if any(b.method == method for b in bounds):
            handles.append(ax.plot([], [], marker, color="k", mfc=face, ls="none",
                                   label={"brent": "root of the e_t difference (± quadrature error)",
                                          "spinodal": "at a spinodal", "unresolved": "unresolved"}[method])[0])
    wl = [(s.alpha_lin, s.omega) for s in summaries if s.alpha_lin is not None]
    if wl:
        ax.plot(*zip(*wl), "w--s", ms=3, lw=1.5, mec="k", label=r"$\alpha_{\rm lin}(\omega)$: attention beats linear")
    for label, style in UNSTABLE_STYLE.items():  # the selected phase's RS verdict where it is not AT-stable
        pts = [(r.alpha, r.omega) for r in rows if r.selected and r.stability is not None and r.stability.label == label]
        if pts:
            ax.plot(*zip(*pts), label={"AT-unstable": "selected phase RS unstable (replicon ≥ 1)",
                                       "AT-undecided": "selected phase RS undecided"}[label], **style)
    line_handles, _ = ax.get_legend_handles_labels()
    # the legend sits beside the plane, never over it: it hid the rank-2 diagram's only boundary point
    ax.legend(handles=handles + [h for h in line_handles if h not in handles], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7, frameon=False)
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel(r"positional fraction of the target $\omega$")
    ax.set_title(f"Globally minimal phase (lowest $e_t$){', ' + title if title else ''}", fontsize=10)
    fig.tight_layout()
    return fig


def _edges(x: np.ndarray) -> np.ndarray:
    if x.size == 1:
        return np.array([x[0] - 0.5, x[0] + 0.5])
    mid = 0.5 * (x[1:] + x[:-1])
    return np.concatenate([[x[0] - (mid[0] - x[0])], mid, [x[-1] + (x[-1] - mid[-1])]])


def figure_comparison(theory: dict[str, dict[str, np.ndarray]], table: Sequence["ComparisonRow"],
                      erm_linear: Sequence[dict], omega: float, d: int, eps_lin: float | None = None,
                      title: str = "") -> Figure:
    """Theory (lines, one point per α) against ERM means ± std (points): ε_g, the branch overlaps
    (‖μ_1‖ and ‖θ‖_F/σ²) and Tr q/σ², against α, per branch.

    ``theory``: per branch the arrays of :func:`dotattn.comparison.theory_curves`; ``table``: rows
    of :func:`dotattn.comparison.comparison_table` (ERM runs grouped by init and final branch);
    ``erm_linear``: (alpha, mean, std) of the ERM linear baseline
    (:func:`dotattn.comparison.linear_baseline_points`). Theory points whose RS verdict (``rs``) is
    AT-unstable or undecided are marked ★ / ○ (:data:`UNSTABLE_STYLE`); where no theory row carries
    a verdict, the legend says the stability was not computed.
    """
    fig = _figure(figsize=(15, 4.2))
    axes = fig.subplots(1, 3)
    overlap_keys = {"positional": [("m_norm", r"$\|\mu_1\|$")],
                    "semantic": [("theta_norm", r"$\|\theta\|_F/\sigma^2$")],
                    "mixed": [("m_norm", r"$\|\mu_1\|$"), ("theta_norm", r"$\|\theta\|_F/\sigma^2$")]}
    panels = [(axes[0], lambda b: [("test_error", "")], r"test error $\varepsilon_g$", "Test error"),
              (axes[1], lambda b: overlap_keys[b], r"$\|\mu_1\|$,  $\|\theta\|_F/\sigma^2$", "Branch overlaps"),
              (axes[2], lambda b: [("q_trace", "")], r"Tr $q/\sigma^2$", "Self-overlap")]
    branches = [b for b in BRANCH_STYLE if b in theory or any(r.branch == b for r in table)]
    shown: set[tuple[Any, str]] = set()
    for ax, keys, ylabel, name in panels:
        for b in branches:
            colour, marker = BRANCH_STYLE[b]
            for key, what in keys(b):
                tag = f"{b} {what}".strip()
                style = "-" if key != "theta_norm" or b != "mixed" else "--"
                if b in theory:
                    ax.plot(theory[b]["alpha"], theory[b][key], ls=style, marker="x", color=colour, lw=1.8,
                            label=f"theory, {tag}")
                    verdicts = theory[b].get("rs", np.full(theory[b]["alpha"].shape, "unknown"))
                    for label, mark in UNSTABLE_STYLE.items():
                        hit = verdicts == label
                        if np.any(hit):
                            ax.plot(theory[b]["alpha"][hit], theory[b][key][hit], **mark,
                                    label=None if (ax, label) in shown else _UNSTABLE_LABEL[label])
                            shown.add((ax, label))
                pts = [r for r in table if r.branch == b]
                for init in ("positional", "semantic"):
                    sub = [r for r in pts if r.init == init]
                    if not sub:
                        continue
                    ax.errorbar([r.alpha for r in sub], [r.erm_mean[key] for r in sub],
                                yerr=[r.erm_std[key] if np.isfinite(r.erm_std[key]) else 0.0 for r in sub],
                                fmt=marker if init == b or b == "mixed" else "D",
                                color=colour, mfc="white" if init == "positional" else colour, capsize=3,
                                label=f"ERM d={d}, {tag} ({init} init)")
        ax.set_xlabel(r"$\alpha$")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{name}, {title}" if title else rf"{name}, $\omega = {omega:g}$", fontsize=9)
        ax.grid(alpha=0.25)
    ax = axes[0]
    if erm_linear:
        ax.errorbar([r["alpha"] for r in erm_linear], [r["mean"] for r in erm_linear],
                    yerr=[r["std"] for r in erm_linear], fmt="^", color="k", mfc="white", ms=4,
                    capsize=2, label="ERM linear baseline")
    if eps_lin is not None:
        ax.axhline(eps_lin, color="k", ls=":", lw=1.2, label="theory linear baseline")
    if theory and all(np.all(c.get("rs", np.array(["unknown"])) == "unknown") for c in theory.values()):
        axes[0].plot([], [], ls="none", label="theory RS stability not computed")
    for ax in axes:
        ax.legend(frameon=False, fontsize=6)
    fig.tight_layout()
    return fig


def figure_finite_size(points: Sequence[dict], theory: dict[str, float], alpha: float, omega: float) -> Figure:
    """ERM ε_g of each informed branch against 1/d, with the theory's d → ∞ values at 1/d = 0."""
    fig = _figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    for b in ("positional", "semantic"):
        pts = sorted((p for p in points if p["branch"] == b), key=lambda p: p["d"])
        if pts:
            x = [1.0 / p["d"] for p in pts]
            ax.errorbar(x, [p["mean"] for p in pts], yerr=[p["std"] for p in pts], fmt="o-", color=COLOURS[b],
                        mfc="white", capsize=3, label=f"ERM, {b} init")
        if b in theory:
            ax.plot([0.0], [theory[b]], marker="*", ms=14, color=COLOURS[b], ls="none",
                    label=rf"theory $d\to\infty$, {b}")
    ax.set_xlabel(r"$1/d$")
    ax.set_ylabel(r"test error $\varepsilon_g$")
    ax.set_title(rf"Finite-size drift at $\alpha = {alpha:g}$, $\omega = {omega:g}$", fontsize=10)
    ax.set_xlim(left=-0.0005)
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def figure_alpha_c_delta(curves: Sequence[dict], theory: Sequence["TheoryColumn"]) -> Figure:
    """ERM α_c figure (a): mean Δe_t(α) = e_t(sem) − e_t(pos) over seeds (± standard error) per d,
    one panel per ω, with the theory's Δe_t(α) and α_c.

    ``curves``: dicts with omega, d, alpha, mean, se (arrays: the ERM series to draw);
    ``theory``: :class:`dotattn.alpha_c.TheoryColumn` records (Δe_t None where a branch is absent).
    """
    omegas = sorted({t.omega for t in theory} | {float(c["omega"]) for c in curves})
    fig = _figure(figsize=(4.6 * len(omegas), 3.8))
    axes = fig.subplots(1, len(omegas), squeeze=False)
    ds = sorted({int(c["d"]) for c in curves})
    cmap = colormaps["viridis"]
    for ax, w in zip(axes[0], omegas):
        for k, d in enumerate(ds):
            for c in curves:
                if abs(float(c["omega"]) - w) < 1e-12 and int(c["d"]) == d:
                    ax.errorbar(c["alpha"], c["mean"], yerr=c["se"], marker="o", ms=3, lw=1, capsize=2,
                                color=cmap(k / max(len(ds) - 1, 1)), label=f"ERM d = {d}")
        for t in theory:
            if abs(t.omega - w) < 1e-12:
                delta = np.array([np.nan if v is None else v for v in t.delta], dtype=float)
                ax.plot(t.alphas, delta, "k-", lw=1.5, label="theory")
                if t.alpha_c is not None:
                    ax.axvline(t.alpha_c, color="k", ls=":", lw=1, label=f"theory α_c = {t.alpha_c:.3f}")
        ax.axhline(0.0, color="grey", lw=0.6)
        ax.set_xlabel("α = n/d")
        ax.set_title(f"ω = {w:g}")
    axes[0][0].set_ylabel("Δe_t = e_t(semantic) − e_t(positional)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_alpha_c_scaling(points: Sequence[dict]) -> Figure:
    """ERM α_c figure (b): α_c(d) (mean over seeds, bootstrap interval) against 1/d per ω, the
    finite-size fit and its extrapolation (with interval) at 1/d = 0, and the theory's α_c.

    ``points``: dicts with omega, inv_d, alpha_c, ci (``(K, 2)``), fit_x, fit_y (the fitted curve
    against 1/d), fit_model, alpha_inf, alpha_inf_ci and theory_alpha_c.
    """
    fig = _figure(figsize=(8.0, 4.2))
    ax = fig.subplots()
    colours = colormaps["tab10"]
    for k, p in enumerate(points):
        col = colours(k)
        ci = np.asarray(p["ci"], dtype=float).reshape(-1, 2)
        y = np.asarray(p["alpha_c"], dtype=float)
        ax.errorbar(p["inv_d"], y, yerr=[y - ci[:, 0], ci[:, 1] - y], fmt="o", color=col, capsize=3,
                    label=f"ω = {p['omega']:g}: ERM")
        ax.plot(p["fit_x"], p["fit_y"], "-", color=col, lw=1)
        lo, hi = p["alpha_inf_ci"]
        ax.errorbar([0.0], [p["alpha_inf"]], yerr=[[p["alpha_inf"] - lo], [hi - p["alpha_inf"]]], fmt="s",
                    color=col, mfc="none", capsize=3)
    if points:  # one legend entry each for the fits and the extrapolations (same style at every ω)
        ax.plot([], [], "-", color="0.3", lw=1, label=f"fit {points[0]['fit_model']} (per ω)")
        ax.plot([], [], "s", color="0.3", mfc="none", label="d → ∞ extrapolation (interval)")
        if p.get("theory_alpha_c") is not None:
            ax.axhline(float(p["theory_alpha_c"]), color=col, ls="--", lw=1, label=f"theory α_c = {p['theory_alpha_c']:.3f}")
    ax.set_xlabel("1/d")
    ax.set_ylabel("α_c (crossing of the paired training losses)")
    ax.set_xlim(left=-0.0002)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # outside: hides no point
    fig.tight_layout()
    return fig


def figure_headline(theory: Sequence["ColumnSummary"], erm: Sequence[dict]) -> Figure:
    """The headline. Top: α_c(ω) of the theory (line, band ± 2 standard errors of the refined root),
    α_lin(ω) (dashed), and at every ω of the ERM study its crossing per d (mean and bootstrap
    interval, small offsets in ω per d) and the d → ∞ extrapolation with its interval. Bottom, one
    panel per ERM ω: the same crossings against 1/d (d → ∞ at 1/d = 0) on the scale of the
    agreement, with the theory's α_c ± 2 s.e. as a band.

    ``theory``: the phase diagram's column summaries; ``erm``: the study's ``summary.json``
    ``omegas`` entries (``omega``, ``by_d``: ``d``, ``alpha_c``, ``ci``; ``extrapolated``: ``alpha_c``,
    ``ci``, ``model``). Records only: nothing is computed here but offsets and bands.
    """
    erm = sorted(erm, key=lambda o: o["omega"])
    fig = _figure(figsize=(8.0, 7.4))
    grid = fig.add_gridspec(2, max(len(erm), 1), height_ratios=(1.5, 1.0))
    ax = fig.add_subplot(grid[0, :])
    for key, err, colour, ls, label in (("alpha_c", "alpha_c_error", "k", "-", r"theory $\alpha_c(\omega)$"),
                                        ("alpha_lin", "alpha_lin_error", "0.45", "--",
                                         r"theory $\alpha_{\rm lin}(\omega)$: attention beats linear")):
        pts = [(s.omega, getattr(s, key), getattr(s, err)) for s in theory if getattr(s, key) is not None]
        if not pts:
            continue
        w, a, e = (np.array([np.nan if x is None else x for x in v], dtype=float) for v in zip(*sorted(pts)))
        e = np.where(np.isfinite(e), e, 0.0)
        ax.plot(w, a, ls=ls, color=colour, lw=1.6, label=label + " (band: ± 2 s.e.)")
        ax.fill_between(w, a - 2 * e, a + 2 * e, color=colour, alpha=0.25, lw=0)
    ds = sorted({b["d"] for o in erm for b in o["by_d"]})
    cmap = colormaps["viridis"]
    colour_of = {d: cmap(k / max(len(ds) - 1, 1) * 0.85) for k, d in enumerate(ds)}
    span = 0.012  # offsets in ω so that the d of one ω do not hide each other
    for k, d in enumerate(ds):
        off = span * (k - (len(ds) - 1) / 2) / max(len(ds) - 1, 1)
        pts = [(o["omega"], b) for o in erm for b in o["by_d"] if b["d"] == d]
        w = np.array([p[0] for p in pts]) + off
        y = np.array([p[1]["alpha_c"] for p in pts], dtype=float)
        lo = np.array([p[1]["ci"][0] for p in pts], dtype=float)
        hi = np.array([p[1]["ci"][1] for p in pts], dtype=float)
        ax.errorbar(w, y, yerr=[y - lo, hi - y], fmt="o", ms=4, capsize=2, lw=1, color=colour_of[d],
                    label=f"ERM crossing, d = {d}")
    ext = [o for o in erm if o.get("extrapolated") and o["extrapolated"].get("alpha_c") is not None]
    if ext:
        w = np.array([o["omega"] for o in ext]) + span
        y = np.array([o["extrapolated"]["alpha_c"] for o in ext], dtype=float)
        lo = np.array([o["extrapolated"]["ci"][0] for o in ext], dtype=float)
        hi = np.array([o["extrapolated"]["ci"][1] for o in ext], dtype=float)
        ax.errorbar(w, y, yerr=[y - lo, hi - y], fmt="D", ms=6, mfc="white", mec="tab:red", color="tab:red",
                    capsize=3, lw=1.4, label=f"ERM d → ∞ ({ext[0]['extrapolated']['model']} fit, interval)")
    ax.set_xlabel(r"positional fraction of the target $\omega$")
    ax.set_ylabel(r"sample complexity $\alpha = n/d$")
    ax.set_title("Positional → semantic switch: replica theory and gradient-trained ERM", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.9)
    ax.grid(alpha=0.25)
    by_omega = {round(s.omega, 9): s for s in theory}
    for k, o in enumerate(erm):
        sub = fig.add_subplot(grid[1, k])
        s = by_omega.get(round(o["omega"], 9))
        if s is not None and s.alpha_c is not None:
            e = 2 * (s.alpha_c_error or 0.0)
            sub.axhspan(s.alpha_c - e, s.alpha_c + e, color="k", alpha=0.25, lw=0)
            sub.axhline(s.alpha_c, color="k", lw=1.2, label=rf"theory {s.alpha_c:.3f}")
        for b in o["by_d"]:
            lo, hi = b["ci"]
            sub.errorbar([1.0 / b["d"]], [b["alpha_c"]], yerr=[[b["alpha_c"] - lo], [hi - b["alpha_c"]]], fmt="o",
                         ms=4, capsize=2, color=colour_of[b["d"]])
        x = o.get("extrapolated") or {}
        if x.get("alpha_c") is not None:
            sub.errorbar([0.0], [x["alpha_c"]], yerr=[[x["alpha_c"] - x["ci"][0]], [x["ci"][1] - x["alpha_c"]]],
                         fmt="D", ms=5, mfc="white", mec="tab:red", color="tab:red", capsize=3)
        sub.set_title(rf"$\omega = {o['omega']:g}$", fontsize=9)
        sub.set_xlabel("1/d", fontsize=8)
        sub.tick_params(labelsize=7)
        sub.set_xlim(left=-0.0003)
        sub.grid(alpha=0.25)
        sub.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
