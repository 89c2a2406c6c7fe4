"""What a first user hit: the fixes of the command line, the figures and the process pool, each with a
test that fails on the code before the fix."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clitools import ENV, run

ROOT = Path(__file__).resolve().parents[1]


# -- dotattn verify --recursive --------------------------------------------------------------------
def test_verify_recursive_checks_every_folder_with_a_manifest(tmp_path):
    """--recursive finds every folder with a manifest.json below the argument, verifies each, and
    names each failure on its own line (exit status 2) instead of stopping at the first."""
    small = ROOT / "results" / "aim" / "se_hardmax_rho0.5"
    shutil.copytree(small, tmp_path / "a")
    shutil.copytree(small, tmp_path / "deep" / "b")
    (tmp_path / "empty").mkdir()
    r = run("verify", "--recursive", str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"ok {tmp_path / 'a'} (aim-state-evolution)",
        f"ok {tmp_path / 'deep' / 'b'} (aim-state-evolution)",
    ]
    with open(tmp_path / "a" / "points.csv", "a") as f:  # an edited file: its SHA-256 no longer matches
        f.write("\n")
    r = run("verify", "-r", str(tmp_path), timeout=120)
    assert r.returncode == 2
    assert r.stdout.splitlines() == [f"ok {tmp_path / 'deep' / 'b'} (aim-state-evolution)"]
    err = r.stderr.splitlines()
    assert len(err) == 2 and err[0].startswith("FAILED ") and "points.csv" in err[0]
    assert err[1] == "Error: 1 of 2 folders failed verification"


def test_verify_recursive_refusals(tmp_path):
    r = run("verify", "--recursive", str(tmp_path), timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == f"Error: no folder with a manifest.json at or below {tmp_path}"
    r = run("verify", "--recursive", "--seal", str(tmp_path), timeout=120)
    assert r.returncode == 2 and "--seal and --recursive do not go together" in r.stderr


def test_not_an_output_folder_names_each_marker_once(tmp_path):
    r = run("verify", str(tmp_path), timeout=120)
    assert r.returncode == 2
    markers = r.stderr.split("(none of ", 1)[1].rstrip(")\n").split(", ")
    assert len(markers) == len(set(markers)) and "points.csv" in markers


# -- the process pool beside JAX --------------------------------------------------------------------
def test_process_pool_beside_jax_does_not_fork_the_jax_process(tmp_path):
    """Once JAX is loaded (its runtime is multithreaded), a pool started by run_tasks (the one every
    --workers command uses) must not os.fork() this process: JAX warns that the child can deadlock.
    The pool then spawns its workers; without JAX it stays the platform default."""
    pytest.importorskip("jax")
    (tmp_path / "pooltask.py").write_text("def square(x, report=None):\n    return x * x\n")
    code = textwrap.dedent("""
        import warnings, multiprocessing
        warnings.simplefilter("always")
        from dotattn.core.runner import pool_context, run_tasks
        from pooltask import square
        before = pool_context().get_start_method()
        import jax, jax.numpy as jnp
        jnp.ones(3).block_until_ready()  # the runtime's threads are running now
        after = pool_context().get_start_method()
        got = {}
        run_tasks(square, [(k,) for k in range(4)], workers=2, on_result=lambda i, r: got.__setitem__(i, r))
        print(before, after, sorted(got.values()))
    """)
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**ENV, "PYTHONPATH": str(tmp_path), "JAX_PLATFORMS": "cpu"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split(None, 2)[:2] == [multiprocessing_default(), "spawn"], r.stdout
    assert r.stdout.split(None, 2)[2].strip() == "[0, 1, 4, 9]"
    assert "os.fork()" not in r.stderr, r.stderr


def multiprocessing_default() -> str:
    import multiprocessing

    return multiprocessing.get_context().get_start_method()


# -- the phase-diagram figures -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def committed_phase_diagram():
    from dotattn.positional_semantic.output import read_phase_diagram, read_phase_summaries

    folder = ROOT / "results" / "phase_diagram"
    return read_phase_diagram(folder), read_phase_summaries(folder)


def test_phases_figure_draws_alpha_c_at_the_refined_root(committed_phase_diagram):
    """boundaries.csv keeps the sweep rule's root (ω = 0.1: 0.7552); the figures draw the positional →
    semantic boundary at the refined α_c of summary.json (0.7516 ± 0.0013), the number quoted everywhere."""
    from dotattn.positional_semantic.plotting import displayed_boundaries

    _, summaries = committed_phase_diagram
    shown, refined = displayed_boundaries(summaries)
    s = next(s for s in summaries if abs(s.omega - 0.1) < 1e-9)
    pos_sem = [b for b in shown if abs(b.omega - 0.1) < 1e-9 and (b.below, b.above) == ("positional", "semantic")]
    assert len(pos_sem) == 1 and any(pos_sem[0] is r for r in refined)
    assert pos_sem[0].alpha == s.alpha_c and pos_sem[0].error == s.alpha_c_error
    assert abs(s.alpha_c_sweep - s.alpha_c) > 1e-3  # the two numbers differ: which one is drawn matters
    assert len(refined) == len(summaries)  # every column's α_c is its positional → semantic boundary
    # the other boundaries (semantic → positional at the smallest α) stay the sweep rule's
    assert all(
        b in s2.boundaries
        for s2 in summaries
        for b in shown
        if b.omega == s2.omega and not any(b is r for r in refined)
    )


def test_phase_figures_colour_each_phase_alike_and_legend_matches(committed_phase_diagram):
    """phase_plane.png and phases.png give the positional phase one colour (blue) and the semantic one
    another (red); every legend marker of a boundary has the colour its points are drawn in."""
    from matplotlib.collections import QuadMesh
    from matplotlib.colors import to_rgb

    from dotattn.positional_semantic.plotting import COLOURS, figure_phase_plane, figure_phases

    rows, summaries = committed_phase_diagram
    ax = figure_phase_plane(rows, summaries).axes[0]
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    pos_wins, sem_wins = mesh.cmap(mesh.norm(1e-4)), mesh.cmap(mesh.norm(-1e-4))  # e_t(sem) − e_t(pos)
    assert pos_wins[2] > pos_wins[0] and sem_wins[0] > sem_wins[2]  # blue, red
    assert to_rgb(COLOURS["positional"])[2] > to_rgb(COLOURS["positional"])[0]
    assert to_rgb(COLOURS["semantic"])[0] > to_rgb(COLOURS["semantic"])[2]
    ax = figure_phases(rows, summaries).axes[0]
    legend = ax.get_legend()
    drawn = {c.get_label(): c.lines[0].get_color() for c in ax.containers}
    entries = {
        t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True) if "→" in t.get_text()
    }
    assert entries and set(entries) <= set(drawn)
    for label, handle in entries.items():
        assert to_rgb(handle.get_color()) == to_rgb(drawn[label]), label


def test_headline_bottom_panels_have_a_y_label_and_the_fit_line():
    """The 1/d panels of the headline figure: labelled y axis, and the recorded 1/d fit drawn as a line
    through the d → ∞ point with the recorded slope (plotted from summary.json, nothing fitted here)."""
    import json

    from dotattn.positional_semantic.output import read_phase_summaries
    from dotattn.theory_vs_erm.plotting import figure_headline

    theory = read_phase_summaries(ROOT / "results" / "phase_diagram")
    erm = sorted(
        json.loads((ROOT / "results" / "alpha_c_erm" / "summary.json").read_text())["omegas"], key=lambda o: o["omega"]
    )
    fig = figure_headline(theory, erm)
    panels = fig.axes[1:]
    assert len(panels) == len(erm) and "alpha_c" in panels[0].get_ylabel()
    for ax, o in zip(panels, erm, strict=True):
        fit = [ln for ln in ax.get_lines() if ln.get_label() == "1/d fit (weighted)"]
        assert len(fit) == 1
        x, y = fit[0].get_xdata(), fit[0].get_ydata()
        assert x[0] == 0.0 and abs(y[0] - o["extrapolated"]["alpha_c"]) < 1e-12
        assert abs((y[-1] - y[0]) / (x[-1] - x[0]) - o["extrapolated"]["slope"]) < 1e-9 * abs(
            o["extrapolated"]["slope"]
        )


# -- the attention-paths figures --------------------------------------------------------------------------
def test_paths_figures_categorical_heads_per_panel_scales_and_labelled_colour_bars():
    """head_scores: heads are categories (markers, no joining line) and both panels have a legend;
    U_heatmaps: each panel its own symmetric scale (U at N = 10 no longer saturates the others) and a
    labelled colour bar; alignment: a labelled colour bar."""
    import numpy as np
    from matplotlib.figure import Figure

    from dotattn.paths.plotting import figure_alignment, figure_head_scores, figure_U_heatmaps

    heads = [
        {"N": N, "layer": l, "head": h, "score": 0.5, "accuracy_pruned": 0.6 + 0.1 * l}
        for N in (10.0, 100.0)
        for l in (1, 2)
        for h in ("uniform", "random")
    ]
    ax1, ax2 = figure_head_scores(heads).axes
    assert ax1.get_legend() is not None and ax2.get_legend() is not None
    assert ax2.get_lines() and all(ln.get_linestyle() in ("None", "none", "") for ln in ax2.get_lines())
    Us = {10.0: np.diag([10.9, 4.8, 0.6, 0.8]), 1000.0: np.eye(4) * 1.02}
    fig: Figure = figure_U_heatmaps(Us, ["good", "adv 1", "denoising", "adv 2"])
    images = [ax.get_images()[0] for ax in fig.axes if ax.get_images()]
    assert [im.get_clim()[1] for im in images] == pytest.approx([10.9, 1.02])
    bars = [ax for ax in fig.axes if not ax.get_images()]
    assert len(bars) == 2 and all(ax.get_ylabel().startswith("U") for ax in bars)
    fig = figure_alignment(np.eye(2), ["a", "b"], [{"N": 10.0, "alignment": 0.3}, {"N": "gp", "alignment": 0.2}])
    assert any(
        ax.get_ylabel() == "kernel-label alignment" and not ax.get_images() and ax.get_xlabel() == "" for ax in fig.axes
    )


# -- the command line -------------------------------------------------------------------------------------
def test_group_help_lists_every_subcommand_without_cutting_it():
    """click cut each subcommand's first sentence at ~45 characters ('GAMP with ... on n =...'); every
    subcommand now has its own one-line help, and the top-level help names the three theories."""
    for group, subs in (
        ("aim", ("amp", "figure", "free-entropy", "gd", "state-evolution")),
        ("paths", ("images", "networks", "sample", "theory")),
    ):
        r = run(group, "--help", timeout=120)
        assert r.returncode == 0, r.stderr
        listing = r.stdout.split("Commands:", 1)[1]
        assert "..." not in listing, listing
        assert [
            ln.split()[0] for ln in listing.splitlines() if ln.startswith("  ") and not ln.startswith("   ")
        ] == list(subs)
    r = run("--help", timeout=120)
    assert all(word in r.stdout for word in ("aim", "paths", "erm-alpha-c", "verify")), r.stdout


def test_algorithm_table_says_standard_error_and_state_evolution_apart():
    """The amp/gd table used "SE" for the state evolution in one column and for the standard error in the
    next: the headers now say stderr and BO mmse (the Bayes-optimal MMSE of the state evolution)."""
    from dotattn.cli.aim import _table

    row = {
        "estimator": "amp",
        "alpha": 0.1,
        "mse_mean": 0.75,
        "mse_se": 0.01,
        "mmse_se_theory": 0.745,
        "gap_in_se": 0.5,
        "converged": 1,
        "runs": 8,
        "diverged": 0,
        "beats_bound": False,
    }
    header = _table({"alphas": [row]}).splitlines()[0].split()
    assert "SE" not in header and {"stderr", "BO", "gap/stderr"} <= set(header)


def test_solve_names_the_start_of_every_rs_line_and_explains_a_repeated_label():
    r = run("solve", "--alpha", "2", "--omega", "0.3", "--quad-order", "8", "--coarse-order", "4", timeout=600)
    assert r.returncode == 0, r.stderr
    rs = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("RS stability of")]
    assert rs and all("(start: " in ln for ln in rs)
    labels = [
        ln.split()[0]
        for ln in r.stdout.splitlines()[3:]
        if ln and not ln.startswith(" ") and ln.split()[0] in ("positional", "semantic", "mixed", "uninformative")
    ]
    for label in {x for x in labels if labels.count(x) > 1}:
        # the repeated label is explained once: which start gave the lowest e_t (the fixed point that competes for
        # the global minimum) and which other starts found the same label
        lines = [ln for ln in r.stdout.splitlines() if f"carry the label {label} " in ln]
        assert len(lines) == 1 and "the lowest e_t, from the " in lines[0] and "also found from: " in lines[0]


def test_compare_says_which_quantity_sets_the_max_rel_diff(tmp_path):
    """A row reading '26.69 % no' while eps_g agreed to 0.06 %: the table now shows eps_g's own relative
    difference and names the quantity of the largest one (re-read theory rows: nothing is solved)."""
    folder = ROOT / "results" / "erm"
    r = run(
        "compare",
        "--erm",
        str(folder / "omega0.3_d1000_lr1.5"),
        "--theory",
        str(folder / "comparison_omega0.3_d1000"),
        "--out",
        str(tmp_path / "c"),
        "--quad",
        "gauss-hermite",
        "--quad-order",
        "12",
        "--coarse-order",
        "6",
        "--tol",
        "1e-8",
        "--damping",
        "0.8",
        "--max-iter",
        "1000",
        "--hat-form",
        "gradient",
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "eps_g rel" in lines[0] and "max rel diff (quantity)" in lines[0]
    row = next(ln for ln in lines if ln.split()[:3] == ["0.5", "semantic", "semantic"])
    assert "(theta_norm)" in row and "-9.40%" in row
    assert any(ln.strip().startswith("max rel diff: the largest relative difference") for ln in lines)
