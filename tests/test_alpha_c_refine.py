"""The refined α_c / α_lin (dotattn.positional_semantic.refine, issue 19) and the two-sided positional branch."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.branch import Branch, follow_branches
from dotattn.positional_semantic.catalogue import QuadratureSpec, branch_label, default_quadrature, initialisations
from dotattn.positional_semantic.phase_diagram import ColumnSummary, SweepSettings, _critical_root, omega_column
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import gauss_hermite
from dotattn.positional_semantic.refine import RefinedRoot, RefineSpec, envelope_slope, refine_root, root_on_rule
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate

OPTIONS = SolverOptions()
GH8 = QuadratureSpec("gauss-hermite", 8, 4)


def _root_setup(omega: float, grid: list[float], quad: QuadratureSpec | None = None):
    """Branches on ``grid`` (default rule, or ``quad``: Gauss–Hermite 8 in the reduced tests, for time),
    the Brent root and the callables of the refinement."""
    p = Problem(omega=omega)
    branches = follow_branches(p, grid, quad or default_quadrature(p), OPTIONS)
    root = _critical_root(branches, grid, 1e-4)
    on_branch = lambda name, fp: fp.converged and branch_label(fp.overlaps, p) == name  # noqa: E731
    gap = lambda fps: fps["semantic"].train_loss - fps["positional"].train_loss  # noqa: E731
    slope_of = lambda fps, rule: envelope_slope(p, fps, "semantic", "positional", rule, OPTIONS)  # noqa: E731
    return p, root, on_branch, gap, slope_of


def _agree(a: RefinedRoot, b: RefinedRoot) -> None:
    # two independent estimates of one number: their difference within 3 combined standard errors
    # (a false alarm has probability 0.3 % for Gaussian errors; the seeds are fixed, so it is deterministic)
    assert a.standard_error > 0 and b.standard_error > 0
    assert abs(a.alpha - b.alpha) <= 3 * np.hypot(a.standard_error, b.standard_error)


def test_refined_alpha_c_agrees_between_two_different_rules():
    """Reduced form: ω = 0.3, refinement on 8 rules of 2^11 x 2 points against 8 other rules of
    2^12 x 2 points (other seeds): the same α_c within the stated standard errors, each below 0.005."""
    p, root, on_branch, gap, slope_of = _root_setup(0.3, [1.2, 1.3], GH8)
    a = refine_root(
        p, root.alpha, root.nearest, gap, root.slope, RefineSpec(11, 8, 2, 1000), OPTIONS, on_branch, slope_of=slope_of
    )
    b = refine_root(
        p, root.alpha, root.nearest, gap, root.slope, RefineSpec(12, 8, 2, 2000), OPTIONS, on_branch, slope_of=slope_of
    )
    _agree(a, b)
    assert max(a.standard_error, b.standard_error) < 0.005
    assert len(a.roots) == 8 and all(np.isfinite(a.roots))


@pytest.mark.slow
def test_refined_alpha_c_default_against_reference_every_omega():
    """Slow form: at ω = 0.1, 0.2, 0.3 the default refinement (2^13 x 2 x 8) with two disjoint seed
    sets and the 4x larger reference rules (2^15 x 2 x 8) agree within their standard errors."""
    for w, grid in ((0.1, [0.7, 0.8]), (0.2, [0.9, 1.0]), (0.3, [1.2, 1.3])):
        p, root, on_branch, gap, slope_of = _root_setup(w, grid)
        runs = [
            refine_root(p, root.alpha, root.nearest, gap, root.slope, spec, OPTIONS, on_branch, slope_of=slope_of)
            for spec in (RefineSpec(13, 8, 2, 1000), RefineSpec(13, 8, 2, 2000), RefineSpec(15, 8, 2, 3000))
        ]
        for x in runs[:2]:
            _agree(x, runs[2])
            assert x.standard_error < 0.003


def test_root_on_the_sweep_rule_is_the_brent_root():
    """Known answer: the one-step root on the sweep rule itself is the sweep's Brent root (to
    Brent's tolerance 1e-4 plus the linearisation over < 1e-4)."""
    p, root, on_branch, gap, slope_of = _root_setup(0.3, [1.2, 1.3], GH8)
    a, s = root_on_rule(
        p, root.alpha, root.nearest, gap, root.slope, gauss_hermite(4, 8), OPTIONS, on_branch, slope_of=slope_of
    )
    assert abs(a - root.alpha) < 2e-4
    assert s < 0  # the semantic training loss falls below the positional one


def test_envelope_slope_against_finite_differences():
    """d(e_t^sem − e_t^pos)/dα = E[M]^sem − E[M]^pos (envelope theorem) against a central finite
    difference of the gap along the branches (h = 0.01 on Gauss–Hermite 8). Tolerance 1 %: the
    O(h²) truncation (the gap's slope changes by ~10 % over the 0.1 grid cell, so ~1e-4 relative
    over h) plus the solver tolerance 1e-8 over 2h against a slope ~5e-4 (~1e-3 relative)."""
    p = Problem(omega=0.3)
    rule = gauss_hermite(4, 8)
    branches = follow_branches(p, [1.2, 1.3], GH8, OPTIONS)
    a0, h = 1.25, 0.01
    fps = {n: iterate(p, a0, branches[n].points[1.2].overlaps, rule, OPTIONS) for n in ("semantic", "positional")}
    slope = envelope_slope(p, fps, "semantic", "positional", rule, OPTIONS)
    side = [{n: iterate(p, a0 + d, fps[n].overlaps, rule, OPTIONS) for n in fps} for d in (-h, h)]
    fd = (
        (side[1]["semantic"].train_loss - side[1]["positional"].train_loss)
        - (side[0]["semantic"].train_loss - side[0]["positional"].train_loss)
    ) / (2 * h)
    assert abs(slope - fd) <= 0.01 * abs(fd)


def test_refined_column_summary_round_trip_and_old_rows():
    s = ColumnSummary(
        omega=0.1,
        alpha_c=0.75,
        alpha_lin=0.89,
        spinodal_semantic=None,
        spinodal_positional=None,
        spinodals={},
        linear_baseline_test_error=0.003,
        seconds=1.0,
        alpha_c_error=0.001,
        alpha_lin_error=0.0008,
        alpha_c_sweep=0.755,
        alpha_c_sweep_error=0.02,
        alpha_lin_sweep=0.886,
        alpha_lin_sweep_error=0.004,
        refined={"alpha_c": RefinedRoot(0.75, 0.001, (0.749, np.nan), 0.755, -5e-4, "m").to_row()},
    )
    assert ColumnSummary.from_row(json.loads(json.dumps(s.to_row()))) == s
    assert RefinedRoot.from_row(s.refined["alpha_c"]).roots[0] == 0.749
    plain = ColumnSummary(
        omega=0.1,
        alpha_c=0.75,
        alpha_lin=None,
        spinodal_semantic=None,
        spinodal_positional=None,
        spinodals={},
        linear_baseline_test_error=0.003,
        seconds=1.0,
    )
    assert "refined" not in plain.to_row()  # rows (and cache keys) without refinement are as before
    assert ColumnSummary.from_row(plain.to_row()) == plain
    assert "refine" not in SweepSettings(default_quadrature(Problem())).to_dict()
    settings = SweepSettings(default_quadrature(Problem()), refine=RefineSpec(12, 4))
    assert SweepSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings


@pytest.mark.parametrize("kw", [{"rules": 1}, {"log2_points": 30}, {"scramblings": 1}, {"seed": -1}])
def test_refine_spec_rejects_bad_values(kw):
    with pytest.raises(ParameterError, match="refine"):
        RefineSpec(**kw)


def test_refined_column_reports_sweep_and_refined_roots():
    """A column with refinement (ω = 0.3, two grid points, small rules): α_c is the refinement's
    mean, the sweep's Brent root is kept, α_lin is not in this α range."""
    p = Problem(omega=0.3)
    settings = SweepSettings(GH8, refine=RefineSpec(9, 3, 2, 7))
    s = ColumnSummary.from_row(omega_column(p.to_dict(), 0.3, [1.2, 1.3], settings.to_dict())["summary"])
    r = RefinedRoot.from_row(s.refined["alpha_c"])
    assert s.alpha_c == r.alpha and s.alpha_c_error == r.standard_error
    assert s.alpha_c_sweep == r.start and 1.2 < s.alpha_c_sweep < 1.3
    assert s.alpha_lin is None and "alpha_lin" not in s.refined


def test_positional_branch_keeps_the_lower_of_both_passes():
    """ω = 0, α = 1.5 … 1.8, where the positional branch has several nearby fixed points: the two-sided
    branch has, at every α, an e_t no higher than the one-way continuation and strictly lower somewhere (the one-way pass hops to a higher fixed point)."""
    p = Problem(omega=0.0)
    grid = [1.5, 1.6, 1.7, 1.8]
    quad = default_quadrature(p)
    two = follow_branches(p, grid, quad, OPTIONS, names=("positional",))["positional"]
    one = follow_branches(p, grid, quad, OPTIONS, names=("positional",), two_sided=False)["positional"]
    assert set(two.points) == set(one.points) == set(grid)
    for a in grid:
        assert two.points[a].train_loss <= one.points[a].train_loss
    assert any(two.points[a].train_loss < one.points[a].train_loss - 1e-9 for a in grid)
    assert isinstance(two, Branch)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--refine-rules", "1"], ["refine rules", "[2, 64]"]),
        (["--refine-order", "40"], ["refine log2_points", "[4, 20]"]),
    ],
)
def test_phase_diagram_refuses_bad_refinement(args, words, tmp_path):
    """Bad input as everywhere: one line naming the parameter and its range, exit 2, nothing created."""
    from clitools import run

    out = tmp_path / "pd"
    r = run("phase-diagram", "--omega", "0.3", "--alpha", "1,2", "--out", str(out), *args)
    assert r.returncode == 2
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert not out.exists()


def test_carried_envelope_is_the_global_step_at_the_fixed_point():
    """The E[M] a fixed point carries (from the global step that accepted it) is the global loss-channel
    step at its overlaps on its rule, so the envelope slope needs no further prox: equal to rounding
    (the same computation on the same arrays; 1e-13 relative allows for a different summation order)."""
    from dataclasses import replace

    from dotattn.positional_semantic.loss_channel import hat_update

    p = Problem(omega=0.3)
    rule = gauss_hermite(4, 6)
    init = dict(initialisations(p, 0))
    fps = {n: iterate(p, 1.25, init[n], rule, OPTIONS) for n in ("semantic", "positional")}
    for fp in fps.values():
        again = hat_update(
            fp.overlaps,
            fp.alpha,
            rule,
            p,
            form=OPTIONS.hat_form,
            random_starts=OPTIONS.random_starts,
            symmetry=OPTIONS.symmetry,
        ).envelope
        assert fp.converged and fp.envelope == pytest.approx(again, rel=1e-13, abs=0)
    carried = envelope_slope(p, fps, "semantic", "positional", rule, OPTIONS)
    bare = {n: replace(fp, envelope=float("nan")) for n, fp in fps.items()}
    assert envelope_slope(p, bare, "semantic", "positional", rule, OPTIONS) == pytest.approx(carried, rel=1e-12)
