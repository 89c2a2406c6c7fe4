"""Figures of the studies that put the theory beside ERM (comparison, finite size, α_c crossings,
the headline figure), as ``matplotlib.figure.Figure`` objects.

Plotting never computes physics and never touches pyplot's global state or the backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from dotattn.positional_semantic.plotting import BRANCH_STYLE, COLOURS, UNSTABLE_LABEL, UNSTABLE_STYLE, new_figure

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.positional_semantic.phase_diagram import ColumnSummary
    from dotattn.theory_vs_erm.alpha_c import TheoryColumn
    from dotattn.theory_vs_erm.comparison import ComparisonRow
    from dotattn.theory_vs_erm.variant_records import VariantPoint

__all__ = [
    "figure_comparison",
    "figure_finite_size",
    "figure_alpha_c_delta",
    "figure_alpha_c_scaling",
    "figure_headline",
    "figure_variants",
]


def figure_comparison(
    theory: dict[str, dict[str, np.ndarray]],
    table: Sequence[ComparisonRow],
    erm_linear: Sequence[dict],
    omega: float,
    d: int,
    eps_lin: float | None = None,
    title: str = "",
    sigma: float = 1.0,
) -> Figure:
    """Theory (lines, one point per α) against ERM means ± std (points): ε_g, the branch overlaps
    (‖μ_1‖/σ² and ‖θ‖_F/σ², both over σ² as in the phase diagram's overlaps.png, where m/σ² is drawn) and
    Tr q/σ², against α, per branch. The legends sit below the panels (inside they covered the curves).

    ``theory``: per branch the arrays of :func:`dotattn.theory_vs_erm.comparison.theory_curves`; ``table``: rows
    of :func:`dotattn.theory_vs_erm.comparison.comparison_table` (ERM runs grouped by init and final branch);
    ``erm_linear``: (alpha, mean, std) of the ERM linear baseline
    (:func:`dotattn.theory_vs_erm.comparison.linear_baseline_points`). Theory points whose RS verdict (``rs``) is
    AT-unstable or undecided are marked ★ / ○ (:data:`UNSTABLE_STYLE`); where no theory row carries
    a verdict, the legend says the stability was not computed.
    """
    fig = new_figure(figsize=(15, 4.2))
    axes = fig.subplots(1, 3)
    overlap_keys = {
        "positional": [("m_norm", r"$\|\mu_1\|/\sigma^2$")],
        "semantic": [("theta_norm", r"$\|\theta\|_F/\sigma^2$")],
        "mixed": [("m_norm", r"$\|\mu_1\|/\sigma^2$"), ("theta_norm", r"$\|\theta\|_F/\sigma^2$")],
    }
    scale = {"m_norm": 1.0 / sigma**2}  # ‖μ_1‖ is stored as is (comparison.csv); drawn over σ² like θ and q
    panels = [
        (axes[0], lambda b: [("test_error", "")], r"test error $\varepsilon_g$", "Test error"),
        (axes[1], lambda b: overlap_keys[b], r"$\|\mu_1\|/\sigma^2$,  $\|\theta\|_F/\sigma^2$", "Branch overlaps"),
        (axes[2], lambda b: [("q_trace", "")], r"Tr $q/\sigma^2$", "Self-overlap"),
    ]
    branches = [b for b in BRANCH_STYLE if b in theory or any(r.branch == b for r in table)]
    shown: set[tuple[Any, str]] = set()
    for ax, keys, ylabel, name in panels:
        for b in branches:
            colour, marker = BRANCH_STYLE[b]
            for key, what in keys(b):
                tag = f"{b} {what}".strip()
                style = "-" if key != "theta_norm" or b != "mixed" else "--"
                f = scale.get(key, 1.0)
                if b in theory:
                    ax.plot(
                        theory[b]["alpha"],
                        theory[b][key] * f,
                        ls=style,
                        marker="x",
                        color=colour,
                        lw=1.8,
                        label=f"theory, {tag}",
                    )
                    verdicts = theory[b].get("rs", np.full(theory[b]["alpha"].shape, "unknown"))
                    for label, mark in UNSTABLE_STYLE.items():
                        hit = verdicts == label
                        if np.any(hit):
                            ax.plot(
                                theory[b]["alpha"][hit],
                                theory[b][key][hit] * f,
                                **mark,
                                label=None if (ax, label) in shown else UNSTABLE_LABEL[label],
                            )
                            shown.add((ax, label))
                pts = [r for r in table if r.branch == b]
                for init in ("positional", "semantic"):
                    sub = [r for r in pts if r.init == init]
                    if not sub:
                        continue
                    ax.errorbar(
                        [r.alpha for r in sub],
                        [r.erm_mean[key] * f for r in sub],
                        yerr=[r.erm_std[key] * f if np.isfinite(r.erm_std[key]) else 0.0 for r in sub],
                        fmt=marker if init == b or b == "mixed" else "D",
                        color=colour,
                        mfc="white" if init == "positional" else colour,
                        capsize=3,
                        label=f"ERM d={d}, {tag} ({init} init)",
                    )
        ax.set_xlabel(r"$\alpha$")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{name}, {title}" if title else rf"{name}, $\omega = {omega:g}$", fontsize=9)
        ax.grid(alpha=0.25)
    ax = axes[0]
    if erm_linear:
        ax.errorbar(
            [r["alpha"] for r in erm_linear],
            [r["mean"] for r in erm_linear],
            yerr=[r["std"] for r in erm_linear],
            fmt="^",
            color="k",
            mfc="white",
            ms=4,
            capsize=2,
            label="ERM linear baseline",
        )
    if eps_lin is not None:
        ax.axhline(eps_lin, color="k", ls=":", lw=1.2, label="theory linear baseline")
    if theory and all(np.all(c.get("rs", np.array(["unknown"])) == "unknown") for c in theory.values()):
        # a note, not a legend entry without a glyph
        axes[0].set_title(axes[0].get_title() + "\n(theory RS stability not computed)", fontsize=9)
    for ax in axes:
        ax.legend(frameon=False, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.set_size_inches(15, 6.0)
    fig.tight_layout()
    return fig


def figure_finite_size(points: Sequence[dict], theory: dict[str, float], alpha: float, omega: float) -> Figure:
    """ERM ε_g of each informed branch against 1/d, with the theory's d → ∞ values at 1/d = 0."""
    fig = new_figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    for b in ("positional", "semantic"):
        pts = sorted((p for p in points if p["branch"] == b), key=lambda p: p["d"])
        if pts:
            x = [1.0 / p["d"] for p in pts]
            ax.errorbar(
                x,
                [p["mean"] for p in pts],
                yerr=[p["std"] for p in pts],
                fmt="o-",
                color=COLOURS[b],
                mfc="white",
                capsize=3,
                label=f"ERM, {b} init",
            )
        if b in theory:
            ax.plot(
                [0.0], [theory[b]], marker="*", ms=14, color=COLOURS[b], ls="none", label=rf"theory $d\to\infty$, {b}"
            )
    ax.set_xlabel(r"$1/d$")
    ax.set_ylabel(r"test error $\varepsilon_g$")
    ax.set_title(rf"Finite-size drift at $\alpha = {alpha:g}$, $\omega = {omega:g}$", fontsize=10)
    ax.set_xlim(left=-0.0005)
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def figure_alpha_c_delta(curves: Sequence[dict], theory: Sequence[TheoryColumn]) -> Figure:
    """ERM α_c figure (a): mean Δe_t(α) = e_t(sem) − e_t(pos) over seeds (± standard error) per d,
    one panel per ω, with the theory's Δe_t(α) and α_c.

    ``curves``: dicts with omega, d, alpha, mean, se (arrays: the ERM series to draw);
    ``theory``: :class:`dotattn.theory_vs_erm.alpha_c.TheoryColumn` records (Δe_t None where a branch is absent).
    """
    omegas = sorted({t.omega for t in theory} | {float(c["omega"]) for c in curves})
    fig = new_figure(figsize=(4.6 * len(omegas), 3.8))
    axes = fig.subplots(1, len(omegas), squeeze=False)
    ds = sorted({int(c["d"]) for c in curves})
    cmap = colormaps["viridis"]
    for ax, w in zip(axes[0], omegas, strict=True):
        for k, d in enumerate(ds):
            for c in curves:
                if abs(float(c["omega"]) - w) < 1e-12 and int(c["d"]) == d:
                    ax.errorbar(
                        c["alpha"],
                        c["mean"],
                        yerr=c["se"],
                        marker="o",
                        ms=3,
                        lw=1,
                        capsize=2,
                        color=cmap(k / max(len(ds) - 1, 1)),
                        label=f"ERM d = {d}",
                    )
        for t in theory:
            if abs(t.omega - w) < 1e-12:
                delta = np.array([np.nan if v is None else v for v in t.delta], dtype=float)
                ax.plot(t.alphas, delta, "k-", lw=1.5, label="theory")
                if t.alpha_c is not None:
                    ax.axvline(t.alpha_c, color="k", ls=":", lw=1, label=rf"theory $\alpha_c$ = {t.alpha_c:.3f}")
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
    fig = new_figure(figsize=(8.0, 4.2))
    ax = fig.subplots()
    colours = colormaps["tab10"]
    for k, p in enumerate(points):
        col = colours(k)
        ci = np.asarray(p["ci"], dtype=float).reshape(-1, 2)
        y = np.asarray(p["alpha_c"], dtype=float)
        ax.errorbar(
            p["inv_d"],
            y,
            yerr=[y - ci[:, 0], ci[:, 1] - y],
            fmt="o",
            color=col,
            capsize=3,
            label=f"ω = {p['omega']:g}: ERM",
        )
        ax.plot(p["fit_x"], p["fit_y"], "-", color=col, lw=1)
        if p.get("theory_alpha_c") is not None:  # at every ω (the refuted ω = 0.1 included), in its colour
            ax.axhline(
                float(p["theory_alpha_c"]),
                color=col,
                ls="--",
                lw=1,
                label=rf"ω = {p['omega']:g}: theory $\alpha_c$ = {p['theory_alpha_c']:.3f}",
            )
        lo, hi = p["alpha_inf_ci"]
        ax.errorbar(
            [0.0],
            [p["alpha_inf"]],
            yerr=[[p["alpha_inf"] - lo], [hi - p["alpha_inf"]]],
            fmt="s",
            color=col,
            mfc="none",
            capsize=3,
        )
    if points:  # one legend entry each for the fits and the extrapolations (same style at every ω)
        ax.plot([], [], "-", color="0.3", lw=1, label=f"fit {points[0]['fit_model']} (per ω)")
        ax.plot([], [], "s", color="0.3", mfc="none", label="d → ∞ extrapolation (interval)")
    ax.set_xlabel("1/d")
    ax.set_ylabel(r"$\alpha_c$ (crossing of the paired training losses)")
    ax.set_xlim(left=-0.0002)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # outside: hides no point
    fig.tight_layout()
    return fig


def figure_headline(
    theory: Sequence[ColumnSummary], erm: Sequence[dict], landscape: Mapping[str, Any] | None = None
) -> Figure:
    """The headline. Top: α_c(ω) of the theory (line, band ± 2 standard errors of the refined root),
    α_lin(ω) (dashed), and at every ω of the ERM study its crossing per d (mean and bootstrap
    interval, small offsets in ω per d) and the d → ∞ extrapolation with its interval. Bottom, one
    panel per ERM ω: the same crossings against 1/d (d → ∞ at 1/d = 0) on the scale of the
    agreement, with the theory's α_c ± 2 s.e. as a band and the recorded 1/d fit (α_c(∞) + slope/d) as a
    line; the first panel's y axis is labelled.

    ``theory``: the phase diagram's column summaries; ``erm``: the study's ``summary.json``
    ``omegas`` entries (``omega``, ``by_d``: ``d``, ``alpha_c``, ``ci``; ``extrapolated``: ``alpha_c``,
    ``ci``, ``model``). Records only: nothing is computed here but offsets and bands.

    ``landscape`` (optional; :func:`dotattn.theory_vs_erm.landscape_output.headline_landscape`): a best-of-K study at
    one ω — ``points`` (``d``, ``k_max``, ``mean``, ``se``: the crossing of the best of K_max on both branches),
    ``limit`` (``c_inf``, ``ci``: its d → ∞, K → ∞ estimate) and ``rsb`` (``alpha_threshold``, ``alpha_equilibrium``:
    ``value``, ``uncertainty``) — drawn as triangles (± 1.96 se), a star with its interval and, in that ω's lower
    panel, horizontal lines.
    """
    erm = sorted(erm, key=lambda o: o["omega"])
    fig = new_figure(figsize=(8.0, 7.4))
    grid = fig.add_gridspec(2, max(len(erm), 1), height_ratios=(1.5, 1.0))
    ax = fig.add_subplot(grid[0, :])
    for key, err, colour, ls, label in (
        ("alpha_c", "alpha_c_error", "k", "-", r"theory $\alpha_c(\omega)$"),
        ("alpha_lin", "alpha_lin_error", "0.45", "--", r"theory $\alpha_{\rm lin}(\omega)$: attention beats linear"),
    ):
        pts = [(s.omega, getattr(s, key), getattr(s, err)) for s in theory if getattr(s, key) is not None]
        if not pts:
            continue
        w, a, e = (
            np.array([np.nan if x is None else x for x in v], dtype=float) for v in zip(*sorted(pts), strict=True)
        )
        e = np.where(np.isfinite(e), e, 0.0)
        # the band is drawn, but ± 2 s.e. (about ± 0.003) is thinner than the line on this axis: the label says
        # so, and the panels below show it on the scale of the agreement
        note = f"± 2 s.e. ≤ {2 * float(np.max(e)):.3f}, within the line here; panels below" if np.any(e > 0) else ""
        ax.plot(w, a, ls=ls, color=colour, lw=1.6, label=label + (f" ({note})" if note else ""))
        ax.fill_between(w, a - 2 * e, a + 2 * e, color=colour, alpha=0.25, lw=0)
    ds = sorted({b["d"] for o in erm for b in o["by_d"]})
    cmap = colormaps["viridis"]
    colour_of = {d: cmap(k / max(len(ds) - 1, 1) * 0.85) for k, d in enumerate(ds)}
    span = 0.012  # offsets in ω so that the d of one ω do not hide each other
    for k, d in enumerate(ds):
        off = span * (k - (len(ds) - 1) / 2) / max(len(ds) - 1, 1)
        cells = [(o["omega"], b) for o in erm for b in o["by_d"] if b["d"] == d]
        w = np.array([c[0] for c in cells]) + off
        y = np.array([c[1]["alpha_c"] for c in cells], dtype=float)
        lo = np.array([c[1]["ci"][0] for c in cells], dtype=float)
        hi = np.array([c[1]["ci"][1] for c in cells], dtype=float)
        ax.errorbar(
            w,
            y,
            yerr=[y - lo, hi - y],
            fmt="o",
            ms=4,
            capsize=2,
            lw=1,
            color=colour_of[d],
            label=f"ERM crossing, d = {d}",
        )
    ext = [o for o in erm if o.get("extrapolated") and o["extrapolated"].get("alpha_c") is not None]
    if ext:
        w = np.array([o["omega"] for o in ext]) + span
        y = np.array([o["extrapolated"]["alpha_c"] for o in ext], dtype=float)
        lo = np.array([o["extrapolated"]["ci"][0] for o in ext], dtype=float)
        hi = np.array([o["extrapolated"]["ci"][1] for o in ext], dtype=float)
        ax.errorbar(
            w,
            y,
            yerr=[y - lo, hi - y],
            fmt="D",
            ms=6,
            mfc="white",
            mec="tab:red",
            color="tab:red",
            capsize=3,
            lw=1.4,
            label=f"ERM d → ∞ ({ext[0]['extrapolated']['model']} fit, interval)",
        )
    if landscape:
        _draw_landscape(ax, landscape, colour_of, offset=-span, with_labels=True)
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
            band = 2 * (s.alpha_c_error or 0.0)
            sub.axhspan(s.alpha_c - band, s.alpha_c + band, color="k", alpha=0.25, lw=0)
            sub.axhline(s.alpha_c, color="k", lw=1.2, label=rf"theory {s.alpha_c:.3f}")
        for b in o["by_d"]:
            lo, hi = b["ci"]
            sub.errorbar(
                [1.0 / b["d"]],
                [b["alpha_c"]],
                yerr=[[b["alpha_c"] - lo], [hi - b["alpha_c"]]],
                fmt="o",
                ms=4,
                capsize=2,
                color=colour_of[b["d"]],
            )
        x = o.get("extrapolated") or {}
        if x.get("alpha_c") is not None:
            sub.errorbar(
                [0.0],
                [x["alpha_c"]],
                yerr=[[x["alpha_c"] - x["ci"][0]], [x["ci"][1] - x["alpha_c"]]],
                fmt="D",
                ms=5,
                mfc="white",
                mec="tab:red",
                color="tab:red",
                capsize=3,
            )
            if x.get("model") == "1/d" and x.get("slope") is not None:  # the recorded fit: α_c(∞) + slope / d
                inv = np.linspace(0.0, max(1.0 / b["d"] for b in o["by_d"]), 50)
                sub.plot(inv, x["alpha_c"] + x["slope"] * inv, "-", color="tab:red", lw=1, label="1/d fit (weighted)")
        if landscape and abs(float(landscape["omega"]) - float(o["omega"])) < 1e-9:
            _draw_landscape(sub, landscape, colour_of, offset=None, with_labels=False)
        sub.set_title(rf"$\omega = {o['omega']:g}$", fontsize=9)
        sub.set_xlabel("1/d", fontsize=8)
        if k == 0:
            sub.set_ylabel(r"$\alpha_c$ (ERM crossing)", fontsize=8)
        sub.tick_params(labelsize=7)
        sub.set_xlim(left=-0.0003)
        sub.grid(alpha=0.25)
        sub.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def _draw_landscape(
    ax: Any, landscape: Mapping[str, Any], colour_of: Mapping[int, Any], offset: float | None, with_labels: bool
) -> None:
    """A best-of-K study on the headline (:func:`figure_headline`): on the α_c(ω) axis (``offset``: the shift in ω
    of its markers) or, with ``offset`` None, on a panel against 1/d with the 1RSB crossings as lines."""
    omega = float(landscape["omega"])
    pts = landscape.get("points") or []
    for p in pts:
        x = omega + offset if offset is not None else 1.0 / p["d"]
        half = 1.96 * p["se"] if p.get("se") is not None else 0.0
        ax.errorbar(
            [x],
            [p["mean"]],
            yerr=[[half], [half]],
            fmt="^",
            ms=5,
            mfc="white",
            mec=colour_of.get(p["d"], "tab:orange"),
            color=colour_of.get(p["d"], "tab:orange"),
            capsize=2,
            lw=1,
        )
    if pts and with_labels:
        ax.plot(
            [],
            [],
            "^",
            mfc="white",
            mec="0.3",
            color="0.3",
            label="best of K_max restarts per branch, per d (± 1.96 se)",
        )
    limit = landscape.get("limit") or {}
    if limit.get("c_inf") is not None and all(v is not None for v in limit.get("ci") or (None,)):
        x = omega + 2 * offset if offset is not None else 0.0
        c, (lo, hi) = limit["c_inf"], limit["ci"]
        ax.errorbar(
            [x],
            [c],
            yerr=[[c - lo], [hi - c]],
            fmt="*",
            ms=9,
            mfc="gold",
            mec="k",
            color="0.2",
            capsize=3,
            lw=1.2,
            label="best of K: K → ∞, d → ∞ (interval)" if with_labels or offset is None else None,
        )
    if offset is None:
        for key, ls, name in (
            ("alpha_equilibrium", ":", "1RSB equilibrium"),
            ("alpha_threshold", "-.", "1RSB threshold"),
        ):
            r = (landscape.get("rsb") or {}).get(key)
            if r:
                ax.axhline(r["value"], color="tab:purple", ls=ls, lw=1.1, label=f"{name} {r['value']:.4f}")


def figure_variants(points: Sequence[VariantPoint], baseline: str) -> Figure:
    """α_c(ω) of several variants (top) and their shift from ``baseline`` (bottom), one colour per
    label: the theory as a line with a band (± 2 s.e.), ERM as points with their intervals (small
    offsets in ω per label so that they do not hide each other; the legend names each study's d).
    Records only (:class:`dotattn.theory_vs_erm.variant_records.VariantPoint`): nothing is computed here."""
    labels = list(dict.fromkeys(p.label for p in points))
    cycle = ("k", "tab:blue", "tab:red", "tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:cyan")
    colour = {lab: cycle[k % len(cycle)] for k, lab in enumerate([baseline] + [x for x in labels if x != baseline])}
    fig = new_figure(figsize=(7.6, 7.6))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": (1.3, 1.0)})
    span = 0.012
    erm_labels = [lab for lab in labels if any(p.label == lab and p.source == "erm" for p in points)]
    for lab in labels:
        th = sorted((p for p in points if p.label == lab and p.source == "theory"), key=lambda p: p.omega)
        em = sorted((p for p in points if p.label == lab and p.source == "erm"), key=lambda p: p.omega)
        for ax, value, lo, hi, show in (
            (top, "alpha_c", "ci_lo", "ci_hi", True),
            (bottom, "shift", "shift_ci_lo", "shift_ci_hi", lab != baseline),
        ):
            if not show:
                continue
            t = [p for p in th if np.isfinite(getattr(p, value))]
            if t:
                w = np.array([p.omega for p in t])
                ax.plot(  # markers at the computed ω: a variant computed at two ω is two points, not a curve
                    w,
                    [getattr(p, value) for p in t],
                    "-" if len(t) > 2 else ":",
                    marker="s",
                    ms=3.5,
                    color=colour[lab],
                    lw=1.5 if len(t) > 2 else 1.0,
                    label=(f"{lab}: theory" + ("" if len(t) > 2 else f" (at {len(t)} ω only)")) if ax is top else None,
                )
                ax.fill_between(
                    w, [getattr(p, lo) for p in t], [getattr(p, hi) for p in t], color=colour[lab], alpha=0.2, lw=0
                )
            e = [p for p in em if np.isfinite(getattr(p, value))]
            if e:
                k = erm_labels.index(lab)
                off = span * (k - (len(erm_labels) - 1) / 2) / max(len(erm_labels) - 1, 1)
                y = np.array([getattr(p, value) for p in e])
                yl = np.array([getattr(p, lo) for p in e])
                yh = np.array([getattr(p, hi) for p in e])
                ds = sorted({p.d for p in e})
                ax.errorbar(
                    np.array([p.omega for p in e]) + off,
                    y,
                    yerr=[y - yl, yh - y],
                    fmt="o",
                    ms=4,
                    capsize=2,
                    lw=1,
                    color=colour[lab],
                    label=(f"{lab}: ERM, d = {', '.join(map(str, ds))}" if ax is top else None),
                )
    top.set_ylabel(r"$\alpha_c$")
    top.set_title(r"Where attention turns semantic: $\alpha_c(\omega)$ per variant", fontsize=10)
    top.legend(fontsize=7, loc="upper left", framealpha=0.9)
    bottom.axhline(0.0, color=colour[baseline], lw=1, ls="--")
    bottom.set_ylabel(rf"$\alpha_c - \alpha_c$({baseline})")
    bottom.set_xlabel(r"positional fraction of the target $\omega$")
    bottom.set_title(
        f"shift from {baseline} (theory: difference at the same ω; ERM: paired per seed at the same d)", fontsize=8
    )
    for ax in (top, bottom):
        ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig
