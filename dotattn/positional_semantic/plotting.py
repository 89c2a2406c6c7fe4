"""Figures from computed records and summaries, as ``matplotlib.figure.Figure`` objects.

Plotting never computes physics: it only reads the records (one :class:`BranchPoint` per ω, α,
branch), the per-ω :class:`ColumnSummary` objects that the sweeps produced, and the numbers the
comparison assembled. It never touches pyplot's global state or the backend: save a figure with
``fig.savefig`` (or :func:`dotattn.core.io.save_figure`), show it in a notebook by displaying it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap, SymLogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from dotattn.positional_semantic.records import BranchPoint

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.positional_semantic.phase_diagram import ColumnSummary
    from dotattn.positional_semantic.records import PhaseBoundary

__all__ = [
    "figure_complexity",
    "figure_test_error",
    "figure_overlaps",
    "figure_phase_plane",
    "figure_phases",
    "PHASES",
    "COLOURS",
    "BRANCH_STYLE",
    "UNSTABLE_STYLE",
    "UNSTABLE_LABEL",
    "branch_series",
    "unstable_points",
    "mark_unstable",
    "new_figure",
]

COLOURS = {"positional": "tab:blue", "semantic": "tab:red", "mixed": "tab:purple"}
PHASES: tuple[str, ...] = ("positional", "semantic", "mixed")
"""The globally minimal phases of the phases figure, in the order of their colours."""
BRANCH_STYLE = {
    "positional": (COLOURS["positional"], "o"),
    "semantic": (COLOURS["semantic"], "o"),
    "mixed": ("tab:purple", "s"),
}
"""Colour and ERM marker per branch in the comparison figure."""


def new_figure(**kw: Any) -> Figure:
    """A figure detached from pyplot (no global state, any backend)."""
    return Figure(**kw)


def branch_series(
    points: Sequence[BranchPoint], omega: float, branch: str, key: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(α, value of attribute ``key``, selected) of one branch at one ω, converged points only, sorted by α."""
    pts = sorted(
        (p for p in points if abs(p.omega - omega) < 1e-9 and p.branch == branch and p.converged), key=lambda p: p.alpha
    )
    a = np.array([p.alpha for p in pts])
    v = np.array([getattr(p, key) for p in pts], dtype=float)
    sel = np.array([p.selected for p in pts], dtype=bool)
    return a, v, sel


def _solid_dashed(ax, a: np.ndarray, v: np.ndarray, sel: np.ndarray, colour: str, label: str) -> None:
    """Selected stretches solid, metastable stretches dashed."""
    ax.plot(a, v, ls="--", color=colour, lw=1.2, alpha=0.8)
    vs = np.where(sel, v, np.nan)
    ax.plot(a, vs, ls="-", color=colour, lw=2.4, label=label)


def unstable_points(
    points: Sequence[BranchPoint], omega: float, branch: str, key: str
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(α, value of ``key``) of one branch's converged points at ω whose RS verdict is AT-unstable
    (replicon ≥ 1) or AT-undecided (1 within two standard errors), by verdict."""
    out = {}
    for label in ("AT-unstable", "AT-undecided"):
        pts = sorted(
            (
                p
                for p in points
                if abs(p.omega - omega) < 1e-9
                and p.branch == branch
                and p.converged
                and p.stability is not None
                and p.stability.label == label
            ),
            key=lambda p: p.alpha,
        )
        out[label] = (np.array([p.alpha for p in pts]), np.array([getattr(p, key) for p in pts], dtype=float))
    return out


UNSTABLE_STYLE: dict[str, dict[str, Any]] = {  # matplotlib keyword arguments
    "AT-unstable": dict(marker="*", color="k", ms=9, ls="none"),
    "AT-undecided": dict(marker="o", mfc="none", color="k", ms=7, mew=1.0, ls="none"),
}
"""How RS-unstable stretches are marked: ★, replicon ≥ 1; ○, undecided (docs/rs_stability.md)."""
UNSTABLE_LABEL = {"AT-unstable": "RS unstable (replicon ≥ 1)", "AT-undecided": "RS undecided (replicon ≈ 1)"}


def mark_unstable(
    ax, rows: Sequence[BranchPoint], omega: float, series: Sequence[tuple[str, str]], scale: float = 1.0
) -> None:
    """Mark the AT-unstable and undecided points of each (branch, key) in ``series`` (values / ``scale``;
    one legend entry per kind present)."""
    shown = set()
    for b, key in series:
        for label, (a, v) in unstable_points(rows, omega, b, key).items():
            if a.size:
                ax.plot(a, v / scale, label=None if label in shown else UNSTABLE_LABEL[label], **UNSTABLE_STYLE[label])
                shown.add(label)


def figure_test_error(rows: Sequence[BranchPoint], summary: ColumnSummary, title: str = "") -> Figure:
    """(a) ε_g against α at one ω: every followed branch (selected solid, metastable dashed), α_c,
    baseline."""
    omega = summary.omega
    fig = new_figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    for b in PHASES:
        a, v, sel = branch_series(rows, omega, b, "test_error")
        if a.size:
            _solid_dashed(ax, a, v, sel, COLOURS[b], f"{b} branch")
    mark_unstable(ax, rows, omega, [(b, "test_error") for b in PHASES])
    ax.axhline(summary.linear_baseline_test_error, color="k", ls=":", lw=1.5, label="linear baseline")
    if summary.alpha_c is not None:
        ax.axvline(summary.alpha_c, color="0.4", lw=1, ls="-.")
        ax.annotate(
            rf"$\alpha_c = {summary.alpha_c:.3f}$",
            (summary.alpha_c, ax.get_ylim()[1]),
            xytext=(4, -14),
            textcoords="offset points",
            fontsize=9,
        )
    if summary.alpha_lin is not None:
        ax.axvline(
            summary.alpha_lin,
            color="k",
            lw=0.8,
            ls=":",
            label=rf"$\alpha_{{\rm lin}} = {summary.alpha_lin:.3f}$: attention beats linear",
        )
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    ax.set_ylabel(r"test error $\varepsilon_g$")
    ax.set_title(
        title or rf"Test error at $\omega = {omega:g}$ (solid: global minimum; dashed: metastable)", fontsize=10
    )
    ax.legend(frameon=False, fontsize=9)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def figure_overlaps(rows: Sequence[BranchPoint], summary: ColumnSummary, sigma: float) -> Figure:
    """(b) ‖μ₁‖/σ² (``m_norm``; |m| of the toy model) and ‖θ‖_F/σ² against α at one ω, for both branches."""
    omega = summary.omega
    fig = new_figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    # the other overlap of each branch is zero by symmetry (θ = 0 positional, m = 0 semantic)
    for b, key, marker, name in (
        ("positional", "m_norm", "o", r"$m/\sigma^2$"),
        ("semantic", "theta_fro", "s", r"$\theta/\sigma^2$"),
    ):
        a, v, sel = branch_series(rows, omega, b, key)
        if a.size and np.any(np.isfinite(v)):
            ax.plot(a, v / sigma**2, ls="--", marker=marker, ms=3, color=COLOURS[b], lw=1)
            ax.plot(
                a,
                np.where(sel, v, np.nan) / sigma**2,
                ls="-",
                marker=marker,
                ms=4,
                color=COLOURS[b],
                lw=2.4,
                label=f"{name}, {b} branch",
            )
    mark_unstable(ax, rows, omega, [("positional", "m_norm"), ("semantic", "theta_fro")], sigma**2)
    if summary.alpha_c is not None:
        ax.axvline(summary.alpha_c, color="0.4", lw=1, ls="-.", label=r"$\alpha_c$")
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel("overlap / $\\sigma^2$")
    ax.set_title(rf"Overlaps at $\omega = {omega:g}$ (solid: global minimum; dashed: metastable)", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def figure_phase_plane(rows: Sequence[BranchPoint], summaries: Sequence[ColumnSummary]) -> Figure:
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
    fig = new_figure(figsize=(7.2, 4.8))
    ax = fig.subplots()
    a_edges = _edges(np.array(alphas))
    w_edges = _edges(np.array(omegas))
    lim = np.nanmax(np.abs(gap)) if np.any(np.isfinite(gap)) else 1.0
    # RdBu: a positive gap (positional below semantic) is blue, a negative one red, the colours of the
    # positional and semantic phases in every figure (COLOURS)
    mesh = ax.pcolormesh(
        a_edges,
        w_edges,
        gap,
        cmap="RdBu",
        shading="flat",
        norm=SymLogNorm(linthresh=max(lim * 1e-2, 1e-9), vmin=-lim, vmax=lim),
    )
    ax.pcolormesh(a_edges, w_edges, np.ma.masked_invalid(only), cmap="Greys", vmin=-3, vmax=3, shading="flat")
    cb = fig.colorbar(mesh, ax=ax)
    mixed = any(r.converged and r.branch == "mixed" for r in rows)
    cb.set_label(
        r"$e_t^{\rm sem} - e_t^{\rm pos}$  (blue: positional "
        + ("below semantic" if mixed else "is the global minimum")
        + "; red: semantic)"
    )
    wc = [
        (s.alpha_c, s.omega, np.nan if s.alpha_c_error is None else s.alpha_c_error)
        for s in summaries
        if s.alpha_c is not None
    ]
    if wc:
        a_c, w_c, err = zip(*wc, strict=True)
        refined = any(s.alpha_c_sweep is not None for s in summaries)
        ax.errorbar(
            a_c,
            w_c,
            xerr=err,
            fmt="k-o",
            ms=3,
            lw=2,
            capsize=2,
            elinewidth=1,
            label=r"$\alpha_c(\omega)$ "
            + ("refined, ± standard error" if refined else "± its error")
            + (f" (at most {np.nanmax(err):.4f}: within the marker)" if np.any(np.isfinite(err)) else "")
            + r": positional $\to$ semantic",
        )
    wl = [(s.alpha_lin, s.omega) for s in summaries if s.alpha_lin is not None]
    if wl:
        ax.plot(
            *zip(*wl, strict=True),
            "w--s",
            ms=3,
            lw=1.5,
            mec="k",
            label=r"$\alpha_{\rm lin}(\omega)$: attention beats linear",
        )
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel(r"positional fraction of the target $\omega$")
    title = "Phase diagram of dot-product attention" + (" (grey: one branch only)" if np.any(np.isfinite(only)) else "")
    if mixed:  # the colour compares the pure branches; the mixed phase is the global minimum where it exists
        title += "\npure branches only: the globally minimal (mixed) phase is in phases.png"
    ax.set_title(title, fontsize=10)
    # below the axes: inside, it covered the small-α, large-ω corner of the plane
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False, ncol=1)
    fig.tight_layout()
    return fig


def figure_phases(rows: Sequence[BranchPoint], summaries: Sequence[ColumnSummary], title: str = "") -> Figure:
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
    fig = new_figure(figsize=(9.6, 4.8))
    ax = fig.subplots()
    cmap = ListedColormap([COLOURS[p] for p in PHASES])
    a_edges, w_edges = _edges(np.array(alphas)), _edges(np.array(omegas))
    for i, w in enumerate(omegas):  # row by row: a cell ends at the phase boundary where one is known
        edges = boundary_edges(alphas, a_edges, grid[i], [b for s in summaries if s.omega == w for b in s.boundaries])
        ax.pcolormesh(
            edges,
            w_edges[i : i + 2],
            np.ma.masked_invalid(grid[i : i + 1]),
            cmap=cmap,
            vmin=-0.5,
            vmax=len(PHASES) - 0.5,
            alpha=0.35,
            shading="flat",
        )
    handles: list[Any] = [
        Patch(facecolor=COLOURS[p], alpha=0.35, label=f"{p} phase") for i, p in enumerate(PHASES) if np.any(grid == i)
    ]
    bounds, refined = displayed_boundaries(summaries)

    def is_refined(b: PhaseBoundary) -> bool:  # by identity: a NaN error makes equal records unequal
        return any(b is r for r in refined)

    styles = {"brent": ("o", "k"), "spinodal": ("v", "white"), "unresolved": ("x", "k")}
    what = {
        "brent": "root of the e_t difference, ± quadrature error",
        "spinodal": "at a spinodal",
        "unresolved": "unresolved",
        "refined": "refined α_c, ± standard error (as in summary.json)",
    }
    for k, pair in enumerate(sorted({(b.below, b.above) for b in bounds})):
        pts = sorted((b for b in bounds if (b.below, b.above) == pair), key=lambda b: b.omega)
        colour = colormaps["Dark2"](k % 8)
        ax.plot([b.alpha for b in pts], [b.omega for b in pts], "-", color=colour, lw=1.8)
        # one legend entry per (pair, how its points were found), in the colour they are drawn in
        for method, (marker, face) in {**styles, "refined": ("D", "k")}.items():
            sub = [
                b for b in pts if is_refined(b) == (method == "refined") and (method == "refined" or b.method == method)
            ]
            if sub:
                ax.errorbar(
                    [b.alpha for b in sub],
                    [b.omega for b in sub],
                    xerr=[0.0 if not np.isfinite(b.error) else b.error for b in sub],
                    fmt=marker,
                    color=colour,
                    mfc=face if face == "white" else colour,
                    ms=7,
                    mew=1.5,
                    capsize=2,
                    lw=0,
                    zorder=5,  # above the RS marks, which may sit on the same grid point
                    label=f"{pair[0]} → {pair[1]}: {what[method]}",
                )

    def cell(x: float) -> float:  # width of the grid cell holding x
        j = int(np.clip(np.searchsorted(alphas, x), 1, len(alphas) - 1))
        return alphas[j] - alphas[j - 1] if len(alphas) > 1 else np.inf

    # a root whose quadrature error spans most of its grid cell, or reaches past the end of the α grid
    # (it may not lie in range at all): drawn, but not resolved
    wide = [
        b
        for b in bounds
        if b.method == "brent"
        and not is_refined(b)
        and np.isfinite(b.error)
        and (b.error > 0.5 * cell(b.alpha) or b.alpha - b.error < alphas[0] or b.alpha + b.error > alphas[-1])
    ]
    if wide:
        ax.plot(
            [b.alpha for b in wide],
            [b.omega for b in wide],
            "o",
            ms=11,
            mfc="none",
            mec="red",
            mew=1.4,
            label="not resolved: error > half the grid cell or past the grid's end",
        )
        for b in wide:
            ax.annotate(
                f"{b.below} → {b.above} ±{b.error:.2f}",
                (b.alpha, b.omega),
                xytext=(10, 4),
                textcoords="offset points",
                fontsize=6,
                color="red",
            )
    wl = [(s.alpha_lin, s.omega) for s in summaries if s.alpha_lin is not None]
    if wl:
        ax.plot(
            *zip(*wl, strict=True),
            "w--s",
            ms=3,
            lw=1.5,
            mec="k",
            label=r"$\alpha_{\rm lin}(\omega)$: attention beats linear",
        )
    for label, style in UNSTABLE_STYLE.items():  # the selected phase's RS verdict where it is not AT-stable
        marked = [
            (r.alpha, r.omega) for r in rows if r.selected and r.stability is not None and r.stability.label == label
        ]
        if marked:
            ax.plot(
                *zip(*marked, strict=True),
                label={
                    "AT-unstable": "selected phase RS unstable (replicon ≥ 1)",
                    "AT-undecided": "selected phase RS undecided",
                }[label],
                **style,
            )
    line_handles, _ = ax.get_legend_handles_labels()
    # the legend sits beside the plane, never over it: it hid the rank-2 diagram's only boundary point
    ax.legend(
        handles=handles + [h for h in line_handles if h not in handles],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        fontsize=7,
        frameon=False,
    )
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel(r"positional fraction of the target $\omega$")
    ax.set_title(f"Globally minimal phase (lowest $e_t$){', ' + title if title else ''}", fontsize=10)
    fig.tight_layout()
    return fig


def boundary_edges(
    alphas: Sequence[float], edges: np.ndarray, phases: np.ndarray, boundaries: Sequence[PhaseBoundary]
) -> np.ndarray:
    """The α edges of one ω row of the phase colours: the midpoints between grid α (``edges``), except where the
    selected phase changes between two grid points and a boundary between exactly those two phases lies between
    them: there the edge is the boundary (the rank-2 diagram's positional block ended at the midpoint 1.5 while
    its boundary is at α = 1.0005)."""
    out = np.array(edges, dtype=float)
    for j in range(len(alphas) - 1):
        left, right = phases[j], phases[j + 1]
        if not (np.isfinite(left) and np.isfinite(right)) or left == right:
            continue
        pair = (PHASES[int(left)], PHASES[int(right)])
        inside = [b.alpha for b in boundaries if (b.below, b.above) == pair and alphas[j] < b.alpha < alphas[j + 1]]
        if len(inside) == 1:
            out[j + 1] = inside[0]
    return out


def displayed_boundaries(summaries: Sequence[ColumnSummary]) -> tuple[list[PhaseBoundary], list[PhaseBoundary]]:
    """The phase boundaries as the figures draw them, and which of them are refined.

    ``boundaries.csv`` keeps the sweep rule's roots. Where a column's α_c was refined (``alpha_c_sweep``
    set), its positional → semantic Brent boundary at the sweep root *is* α_c: it is drawn at the
    refined α_c with its standard error, the number quoted everywhere else. Records only: no root is
    computed here."""
    from dataclasses import replace

    shown: list[PhaseBoundary] = []
    refined: list[PhaseBoundary] = []
    for s in summaries:
        for b in s.boundaries:
            if (
                s.alpha_c is not None
                and s.alpha_c_sweep is not None
                and b.method == "brent"
                and (b.below, b.above) == ("positional", "semantic")
                and abs(b.alpha - s.alpha_c_sweep) <= 1e-9
            ):
                b = replace(b, alpha=s.alpha_c, error=np.nan if s.alpha_c_error is None else s.alpha_c_error)
                refined.append(b)
            shown.append(b)
    return shown, refined


def _edges(x: np.ndarray) -> np.ndarray:
    if x.size == 1:
        return np.array([x[0] - 0.5, x[0] + 0.5])
    mid = 0.5 * (x[1:] + x[:-1])
    return np.concatenate([[x[0] - (mid[0] - x[0])], mid, [x[-1] + (x[-1] - mid[-1])]])


def figure_complexity(summary: dict[str, Any], points: dict[tuple[str, float], Sequence[Any]]) -> Figure:
    """Σ(e) of the positional branch per α on the first rule (docs/rsb.md section 11), against the energy above
    the semantic branch's RS e_t (0: the semantic e_t, dashed), with energies on the RS rule (each curve shifted
    by RS e_t(positional) − its small-y reference, as the crossings are computed); the equilibrium (circle)
    and threshold (triangle) points. Reads the summary and the curve rows only."""
    from dotattn.core.status import CONVERGED

    rs = {float(r["alpha"]): r for r in summary["rs"]}
    main = summary["alpha_threshold"]["rule"]
    feats = {float(c["alpha"]): c for c in summary["curves"] if c["rule"] == main}
    fig = new_figure(figsize=(7.0, 4.6))
    ax = fig.add_subplot(1, 1, 1)
    cmap = colormaps["viridis"]
    alphas = sorted(rs)
    top = 0.0
    for i, a in enumerate(alphas):
        colour = cmap(i / max(1, len(alphas) - 1))
        shift = (
            float(rs[a]["positional_train_loss"]) - float(feats[a]["reference"]) - float(rs[a]["semantic_train_loss"])
        )
        ok = sorted((p for p in points[(main, a)] if p.status == CONVERGED), key=lambda p: p.y)
        e = np.array([p.energy for p in ok]) + shift
        s = np.array([p.complexity for p in ok])
        top = max(top, float(np.max(s, initial=0.0)))
        ax.plot(1e6 * e, 1e4 * s, "-", color=colour, lw=1.3, marker=".", ms=3, label=f"α = {a:g}")
        eq, th = feats[a]["equilibrium"], feats[a]["threshold"]
        if eq["status"] == CONVERGED:
            ax.plot(1e6 * (eq["energy"] + shift), 0.0, "o", color=colour, mfc="none")
        if th["status"] == CONVERGED:
            ax.plot(1e6 * (th["energy"] + shift), 1e4 * th["complexity"], "^", color=colour)
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.axvline(0.0, color="0.3", ls="--", lw=0.9)
    ax.set_ylim(-0.6e4 * top, 1.15e4 * top)
    ax.set_xlabel("e − e_t(semantic), RS rule (× 10⁻⁶)")
    ax.set_ylabel("Σ (complexity per d) × 10⁴")
    ax.set_title(
        f"1RSB complexity of the positional branch (rule {main}); ○ equilibrium, ▲ threshold; dashed: semantic "
        f"e_t\nα_eq = {summary['alpha_equilibrium']['value']:.4f}, α_thr = {summary['alpha_threshold']['value']:.4f}",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="upper left")
    return fig
