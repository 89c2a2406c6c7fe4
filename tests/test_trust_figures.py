"""Figures of issue 18 item 6 (second round): the comparison figure marks RS-unstable theory points,
the phases figure's legend never covers the plane, and a phase-diagram folder's figures can be
redrawn from its verified rows without solving anything."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dotattn.core.io import IntegrityError, sha256_file
from dotattn.positional_semantic.records import BranchPoint
from dotattn.theory_vs_erm.comparison import ComparisonRow, theory_curves

ROOT = Path(__file__).resolve().parents[1]
RANK2 = ROOT / "results" / "general" / "L2_r2_rt1"


def _comparison(folder: Path) -> tuple[list[BranchPoint], list[ComparisonRow], dict]:
    meta = json.loads((folder / "comparison.json").read_text())
    return (
        [BranchPoint.from_row(r) for r in meta["theory"]],
        [ComparisonRow.from_row(r) for r in meta["table"]],
        meta["parameters"]["problem"],
    )


def _figure(theory, table, problem):
    from dotattn.theory_vs_erm.plotting import figure_comparison

    return figure_comparison(
        theory_curves(theory, problem["omega"], problem["sigma"]), table, [], problem["omega"], 1000
    )


def _marked(fig, marker: str) -> list[np.ndarray]:
    """Per axes, the sorted α of every line drawn with ``marker`` (the RS marks)."""
    out = []
    for ax in fig.axes:
        xs = [np.asarray(line.get_xdata(), dtype=float) for line in ax.get_lines() if line.get_marker() == marker]
        out.append(np.sort(np.concatenate(xs)) if xs else np.array([]))
    return out


def test_theory_curves_carry_each_points_rs_verdict():
    theory, _, problem = _comparison(RANK2 / "comparison")
    curves = theory_curves(theory, problem["omega"], problem["sigma"])
    for branch, c in curves.items():
        pts = sorted((p for p in theory if p.branch == branch and p.converged), key=lambda p: p.alpha)
        assert list(c["rs"]) == [p.stability.label for p in pts]


def test_comparison_figure_marks_the_at_unstable_theory_points():
    """Rank-2 student: the pure branches' RS fixed points are AT-unstable (README), the mixed ones not;
    the ★ marks sit at exactly the α of the unstable points on every panel that draws those branches."""
    theory, table, problem = _comparison(RANK2 / "comparison")
    unstable = [p for p in theory if p.converged and p.stability is not None and p.stability.label == "AT-unstable"]
    assert unstable  # the committed rows have some, else this test would prove nothing
    fig = _figure(theory, table, problem)
    # panel 0 (ε_g) and 2 (Tr q) draw every branch once; panel 1 draws one overlap per pure branch
    want = np.sort([p.alpha for p in unstable])
    marked = _marked(fig, "*")
    assert np.allclose(marked[0], want) and np.allclose(marked[2], want)
    assert np.allclose(marked[1], want)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels.count("RS unstable (replicon ≥ 1)") == 1


def test_comparison_figure_without_unstable_points_has_no_marks():
    theory, table, problem = _comparison(RANK2 / "comparison")
    stable = [p for p in theory if p.stability is not None and p.stability.label == "stable"]
    fig = _figure(stable, [r for r in table if r.branch == "mixed"], problem)
    assert all(m.size == 0 for m in _marked(fig, "*")) and all(m.size == 0 for m in _marked(fig, "o"))


def test_comparison_figure_says_when_no_theory_row_has_a_verdict():
    from dataclasses import replace

    theory, table, problem = _comparison(RANK2 / "comparison")
    bare = [replace(p, stability=None) for p in theory]
    fig = _figure(bare, table, problem)
    assert all(m.size == 0 for m in _marked(fig, "*"))
    assert "theory RS stability not computed" in fig.axes[0].get_title()  # a note, not a legend entry without a glyph
    fig = _figure(theory, table, problem)
    assert "theory RS stability not computed" not in fig.axes[0].get_title()


def test_comparison_figure_legends_below_and_overlaps_over_sigma2():
    """comparison.png's legends covered the semantic line, and its middle panel drew ‖μ_1‖ (≈ 0.25) where
    overlaps.png draws m/σ² (≈ 1.0) for the same branch: legends below the panels, ‖μ_1‖/σ² drawn."""
    from dotattn.theory_vs_erm.plotting import figure_comparison

    theory, table, problem = _comparison(RANK2 / "comparison")
    curves = theory_curves(theory, problem["omega"], problem["sigma"])
    fig = figure_comparison(curves, table, [], problem["omega"], 1000, sigma=problem["sigma"])
    fig.canvas.draw()
    for ax in fig.axes:
        assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0 + 1
    mid = fig.axes[1]
    assert r"\|\mu_1\|/\sigma^2" in mid.get_ylabel()
    pos = next(ln for ln in mid.get_lines() if ln.get_label().startswith("theory, positional"))
    assert np.allclose(pos.get_ydata(), curves["positional"]["m_norm"] / problem["sigma"] ** 2)


def test_phases_legend_lies_beside_the_plane():
    """The rank-2 diagram's only boundary (ω = 0.5, α ≈ 1) was under the legend: the legend now
    starts right of the axes."""
    from dotattn.positional_semantic.output import read_boundaries, read_phase_diagram
    from dotattn.positional_semantic.phase_diagram import ColumnSummary
    from dotattn.positional_semantic.plotting import figure_phases

    folder = RANK2 / "phase_diagram"
    rows = read_phase_diagram(folder)
    summaries = [ColumnSummary.from_row(r) for r in json.loads((folder / "summary.json").read_text())["omegas"]]
    assert read_boundaries(folder)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figure_phases(rows, summaries)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    texts = [t.get_text() for t in legend.get_texts()]
    assert "positional → mixed: at a spinodal" in texts  # the pair and how it was found, in the pair's colour


@pytest.fixture
def rank2_copy(tmp_path):
    dst = tmp_path / "pd"
    shutil.copytree(RANK2 / "phase_diagram", dst)
    return dst


def test_replot_redraws_the_figures_without_solving(rank2_copy, monkeypatch):
    """replot_phase_diagram reads the verified rows and redraws: any call into the solver fails the test;
    the data files keep their digests, the PNGs are new and listed in the rewritten manifest, which
    still verifies and keeps the data's commit."""
    import dotattn.positional_semantic.phase_diagram as pdm
    import dotattn.positional_semantic.state_evolution as se
    from dotattn.positional_semantic.output import replot_phase_diagram
    from dotattn.verify import verify_folder

    def forbidden(*a, **k):
        raise AssertionError("the replot solved something")

    for mod, name in ((se, "solve"), (pdm, "run_phase_diagram"), (pdm, "branch_points")):
        if hasattr(mod, name):
            monkeypatch.setattr(mod, name, forbidden)
    before = {p.name: sha256_file(p) for p in rank2_copy.iterdir()}
    old = json.loads((rank2_copy / "manifest.json").read_text())
    paths = replot_phase_diagram(rank2_copy)
    assert set(paths) == {"test_error", "overlaps", "phase_plane", "phases"}
    after = {p.name: sha256_file(p) for p in rank2_copy.iterdir()}
    for name in ("phase_diagram.csv", "boundaries.csv", "summary.json"):
        assert after[name] == before[name]
    assert after["phases.png"] != before["phases.png"]
    new = json.loads((rank2_copy / "manifest.json").read_text())
    assert new["git_commit"] == old["git_commit"] and new["made_for"] == old["made_for"]
    assert "redrawn from the verified rows" in new["note"]
    assert verify_folder(rank2_copy) == "phase-diagram"


def test_replot_refuses_a_tampered_folder_and_leaves_the_figures(rank2_copy):
    from dotattn.positional_semantic.output import replot_phase_diagram

    lines = (rank2_copy / "phase_diagram.csv").read_text().splitlines(keepends=True)
    (rank2_copy / "phase_diagram.csv").write_text("".join(lines[:-1]))
    png = sha256_file(rank2_copy / "phases.png")
    with pytest.raises(IntegrityError, match="phase_diagram.csv"):
        replot_phase_diagram(rank2_copy)
    assert sha256_file(rank2_copy / "phases.png") == png


def test_compare_reads_the_finite_size_theory_from_the_theory_folder(tmp_path, monkeypatch):
    """With --theory holding the finite-size α, compare solves nothing: the d → ∞ values written are
    the theory folder's rows at that α."""
    pytest.importorskip("torch")
    import dotattn.theory_vs_erm.output as rio
    from dotattn.positional_semantic.phase_diagram import SweepSettings

    erm_root = ROOT / "results" / "erm"
    cmp_dir = erm_root / "comparison_omega0.3_d1000"
    params = json.loads((cmp_dir / "comparison.json").read_text())["parameters"]
    settings = SweepSettings.from_dict(params)
    theory = tmp_path / "theory"
    shutil.copytree(cmp_dir, theory)

    def forbidden(*a, **k):
        raise AssertionError("compare solved the theory although the theory folder holds it")

    monkeypatch.setattr(rio, "theory_points", forbidden)
    finite = [str(erm_root / "finite_size" / f"d{d}") for d in (100, 200)]
    paths, table = rio.compare_and_write(
        erm_root / "omega0.3_d1000_lr1.5", tmp_path / "out", str(theory), finite, settings
    )
    fs = json.loads(Path(paths["finite_size_json"]).read_text())
    rows = json.loads((theory / "comparison.json").read_text())["theory"]
    want = {r["branch"]: r["test_error"] for r in rows if abs(r["alpha"] - fs["alpha"]) < 1e-9}
    assert fs["theory"].keys() == want.keys()
    for b in want:  # the same numbers, through a JSON round trip
        assert fs["theory"][b] == pytest.approx(want[b], rel=1e-12)
    assert table


def test_phase_plane_of_a_rank2_diagram_says_it_compares_the_pure_branches_only():
    """With a mixed branch the e_t(sem) - e_t(pos) colour does not show the global minimum: the figure says so
    (it said 'red: positional is the global minimum' where the mixed phase was)."""
    from pathlib import Path

    from dotattn.positional_semantic import plotting
    from dotattn.positional_semantic.output import read_phase_diagram, read_phase_summaries

    results = Path(__file__).resolve().parent.parent / "results"
    rank2 = results / "general" / "L2_r2_rt1" / "phase_diagram"
    fig = plotting.figure_phase_plane(read_phase_diagram(rank2), read_phase_summaries(rank2))
    assert "phases.png" in fig.axes[0].get_title() and "below semantic" in fig.axes[1].get_ylabel()
    toy = results / "phase_diagram"
    fig = plotting.figure_phase_plane(read_phase_diagram(toy), read_phase_summaries(toy))
    assert "phases.png" not in fig.axes[0].get_title() and "global minimum" in fig.axes[1].get_ylabel()


def test_alpha_c_vs_d_draws_the_theory_at_every_omega_in_mathtext():
    """alpha_c_vs_d.png drew the theory line only for the last ω (0.3; 0.1, the refuted case, was missing) and
    wrote a raw "α_c": one dashed theory line per ω with a theory, labelled with $\\alpha_c$."""
    import numpy as np

    from dotattn.theory_vs_erm.plotting import figure_alpha_c_scaling

    points = [
        {
            "omega": w,
            "inv_d": [1 / 1000, 1 / 2000],
            "alpha_c": [a + 0.01, a + 0.005],
            "ci": np.array([[a, a + 0.02], [a, a + 0.01]]),
            "fit_x": [0.0, 1 / 1000],
            "fit_y": [a, a + 0.01],
            "fit_model": "1/d",
            "alpha_inf": a,
            "alpha_inf_ci": (a - 0.01, a + 0.01),
            "theory_alpha_c": t,
        }
        for w, a, t in ((0.1, 0.70, 0.7516), (0.2, 0.94, 0.9479), (0.3, 1.26, 1.2515))
    ]
    ax = figure_alpha_c_scaling(points).axes[0]
    theory = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert sorted(round(float(ln.get_ydata()[0]), 4) for ln in theory) == [0.7516, 0.9479, 1.2515]
    assert all(r"$\alpha_c$" in ln.get_label() for ln in theory) and r"$\alpha_c$" in ax.get_ylabel()


def test_headline_says_how_wide_its_band_is():
    """The ± 2 s.e. band of the headline is thinner than its line at that scale: the legend says how wide."""
    import json

    from dotattn.positional_semantic.output import read_phase_summaries
    from dotattn.theory_vs_erm.plotting import figure_headline

    root = Path(__file__).resolve().parents[1]
    theory = read_phase_summaries(root / "results" / "phase_diagram")
    erm = json.loads((root / "results" / "alpha_c_erm" / "summary.json").read_text())["omegas"]
    labels = [ln.get_label() for ln in figure_headline(theory, erm).axes[0].get_lines()]
    assert any("± 2 s.e. ≤ 0.00" in lab and "within the line" in lab for lab in labels), labels


def test_phase_plane_legend_covers_no_data():
    """phase_plane.png's legend sat on the plane (upper left): it is now below the axes, and its α_c entry says
    how wide the error bars are (thinner than the markers at this scale)."""
    from dotattn.positional_semantic.output import read_phase_diagram, read_phase_summaries
    from dotattn.positional_semantic.plotting import figure_phase_plane

    root = Path(__file__).resolve().parents[1] / "results" / "phase_diagram"
    fig = figure_phase_plane(read_phase_diagram(root), read_phase_summaries(root))
    fig.canvas.draw()
    ax = fig.axes[0]
    legend, plane = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y1 <= plane.y0 + 1  # entirely below the plane
    assert any("within the marker" in t.get_text() for t in ax.get_legend().get_texts())


def test_variants_marks_the_computed_omega_of_each_theory():
    """variants.png joined a variant computed at two ω by a plain straight line: every theory point is marked,
    and a variant with two ω is dotted and says so."""
    from dotattn.theory_vs_erm.plotting import figure_variants
    from dotattn.theory_vs_erm.variant_records import VariantPoint

    nan = float("nan")

    def point(label, omega, a):
        return VariantPoint(
            label=label, source="theory", omega=omega, d=0, alpha_c=a, se=0.001, ci_lo=a - 0.002, ci_hi=a + 0.002,
            level=0.95, seeds=0, crossings=0, shift=nan, shift_se=nan, shift_ci_lo=nan, shift_ci_hi=nan,
            paired_seeds=0, shift_alphas=0, folder="f",
        )  # fmt: skip

    pts = [point("tied", w, 0.6 + w * 2) for w in (0.1, 0.2, 0.3)] + [point("untied", w, 1.0 + w) for w in (0.1, 0.3)]
    top = figure_variants(pts, "tied").axes[0]
    lines = {ln.get_label(): ln for ln in top.get_lines() if ln.get_label().endswith(("theory", "only)"))}
    assert lines["tied: theory"].get_marker() == "s" and lines["tied: theory"].get_linestyle() == "-"
    two = lines["untied: theory (at 2 ω only)"]
    assert two.get_marker() == "s" and two.get_linestyle() == ":"


def test_paths_accuracy_figure_does_not_draw_an_unconverged_nuts_point_as_a_good_one():
    """`paths theory --sampled` plotted an unconverged NUTS point (R-hat 1.13, ESS 7) like a converged one."""
    from dotattn.paths.analysis import PathsPoint
    from dotattn.paths.plotting import figure_accuracy_loss

    def point(method, N, status="converged", acc=0.9):
        return PathsPoint(
            subset="all", method=method, N=N, temperature=0.01, accuracy=acc, loss=0.3, variance=float("nan"),
            status=status, stationarity=0.0, iterations=1, seconds=1.0, paths=("good",), U=np.eye(1),
            accuracy_error=0.01, loss_error=0.01,
        )  # fmt: skip

    pts = [point("theory", 10), point("theory", 30), point("sampled", 10), point("sampled", 30, "not_converged")]
    ax = figure_accuracy_loss(pts, ["all"]).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "NUTS, all paths" in labels and any("not converged" in lab and "not evidence" in lab for lab in labels)


def test_phases_colour_ends_at_the_phase_boundary():
    """The rank-2 phases.png drew the positional block to α = 1.5 (the midpoint of its grid 0.5, 1, 2) though
    the positional -> mixed boundary at ω = 0.5 is α = 1.0005: the cell edge is the boundary where one is known."""
    from dotattn.positional_semantic.output import read_phase_diagram, read_phase_summaries
    from dotattn.positional_semantic.plotting import PHASES, boundary_edges

    root = Path(__file__).resolve().parents[1] / "results" / "general" / "L2_r2_rt1" / "phase_diagram"
    rows, summaries = read_phase_diagram(root), read_phase_summaries(root)
    alphas = sorted({r.alpha for r in rows})
    (s,) = [s for s in summaries if s.omega == 0.5]
    phases = np.array(
        [next(PHASES.index(r.branch) for r in rows if r.selected and r.omega == 0.5 and r.alpha == a) for a in alphas],
        dtype=float,
    )
    (b,) = s.boundaries
    edges = boundary_edges(alphas, np.array([0.25, 0.75, 1.5, 2.5]), phases, s.boundaries)
    assert [PHASES[int(p)] for p in phases] == ["positional", "positional", "mixed"]
    assert edges[2] == b.alpha and abs(b.alpha - 1.0005) < 1e-3 and list(edges[[0, 1, 3]]) == [0.25, 0.75, 2.5]
