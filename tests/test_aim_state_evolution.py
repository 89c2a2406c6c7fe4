"""State evolution of the AIM (dotattn.aim.state_evolution): roots, limits, thresholds, convergence."""

from __future__ import annotations

import math

import pytest

from dotattn.aim.channels import alpha_bar, hardmax_fisher_at_zero, q_hat
from dotattn.aim.prior import mmse_prior, prior_second_moment
from dotattn.aim.state_evolution import (
    POINT_COLUMNS,
    SEPoint,
    check_inputs,
    perfect_recovery_alpha_bar,
    solve_point,
    thresholds,
)
from dotattn.core.validation import ParameterError


@pytest.mark.parametrize("rho", [0.1, 0.5, 1.0, 2.0])
def test_softmax_fixed_point_solves_both_equations(rho):
    T = 2
    alpha = 0.5 * perfect_recovery_alpha_bar(rho) / (T * T + T - 2)
    p = solve_point("softmax", alpha, rho, T)
    assert p.status == "converged" and p.regime == "partial"
    # q = Q0 − MMSE_S(1/q̂) and q̂ = ᾱ/(Q0 − q), to rounding (both sides are O(1))
    assert p.q == pytest.approx(prior_second_moment(rho) - mmse_prior(p.delta, rho), abs=1e-12)
    assert p.q_hat == pytest.approx(q_hat("softmax", alpha, p.q, rho, T), rel=1e-10)
    assert 0 < p.mmse < 1 and p.uncertainty < 1e-6


def test_softmax_collapse_in_alpha_bar():
    # the MMSE depends on (α, T) only through ᾱ = α(T² + T − 2)
    ab, rho = 0.3, 0.5
    m = [solve_point("softmax", ab / (T * T + T - 2), rho, T).mmse for T in (2, 3, 4, 6)]
    assert max(m) - min(m) < 1e-12


@pytest.mark.parametrize("rho", [0.1, 0.5, 1.0, 2.0])
def test_softmax_perfect_recovery_threshold(rho):
    count = 2 * rho - rho * rho if rho < 1 else 1.0  # degrees of freedom of S per d²/2
    thr = thresholds("softmax", rho, 2)
    assert thr["alpha_bar_perfect_recovery"] == pytest.approx(count)
    # the numerical limit of MMSE_S(Δ)/Δ at Δ = 1e-10 (its approach is O(Δ), O(√Δ) at ρ = 1)
    assert thr["alpha_bar_perfect_recovery_numeric"] == pytest.approx(count, abs=1e-4)
    below = solve_point("softmax", 0.999 * count / 4, rho, 2)
    assert below.regime == "partial" and below.mmse < 0.02
    above = solve_point("softmax", 1.001 * count / 4, rho, 2)
    assert above.regime == "perfect_recovery" and above.mmse == 0


@pytest.mark.parametrize("ab", [0.2, 0.5, 0.9])
def test_softmax_wigner_limit(ab):
    # ρ -> ∞: linear regression with a Gaussian prior, MMSE = 1 − ᾱ; the gap is O(1/ρ) (~1e-5 at 1e4)
    assert solve_point("softmax", ab / 4, 1e4, 2).mmse == pytest.approx(1 - ab, abs=1e-4)


def test_softmax_convergence_in_nodes():
    # the MMSE to ≤ 1e-6 (required); measured changes are ≤ 1e-12 from 48 to 128 nodes
    ref = solve_point("softmax", 0.05, 0.5, 2, nodes=128).mmse
    for n, tol in ((16, 1e-6), (48, 1e-10)):
        assert abs(solve_point("softmax", 0.05, 0.5, 2, nodes=n).mmse - ref) < tol


def test_hardmax_fixed_point_and_convergence_in_nodes():
    rho, alpha = 0.5, 0.3
    p = solve_point("hardmax", alpha, rho, 2)
    assert p.status == "converged" and p.fixed_points == 1
    assert p.q == pytest.approx(prior_second_moment(rho) - mmse_prior(p.delta, rho), abs=1e-12)
    assert p.q_hat == pytest.approx(q_hat("hardmax", alpha, p.q, rho, 2), rel=1e-10)
    fine = solve_point("hardmax", alpha, rho, 2, nodes=96, hardmax_nodes=96)
    assert abs(fine.mmse - p.mmse) < 1e-6  # required 1e-4; measured ~1e-12
    assert p.uncertainty < 1e-6


def test_hardmax_between_softmax_and_prior():
    # data processing: the hardmax labels are a function of the softmax outputs, so the hardmax MMSE
    # is at least the softmax one; both are below the prior's 1 and decrease with α
    rho = 0.5
    prev = 1.0
    for alpha in (0.02, 0.1, 0.5):
        h = solve_point("hardmax", alpha, rho, 2).mmse
        s = solve_point("softmax", alpha, rho, 2).mmse
        assert s <= h < prev
        prev = h


def test_hardmax_published_derivative_changes_the_curve():
    # the public script's φ₂/Φ₂ gives a larger q̂-deficit: a higher MMSE at the same α
    g = solve_point("hardmax", 0.5, 0.5, 2)
    p = solve_point("hardmax", 0.5, 0.5, 2, hardmax_derivative="published")
    assert p.mmse > g.mmse + 0.1


def test_hardmax_weak_recovery_small_rho():
    # as ρ -> 0 the overlap above the trivial q = ρ vanishes below α_WR = ρ/(2 F0) and not above it
    x_c = 1 / (2 * hardmax_fisher_at_zero())
    assert thresholds("hardmax", 1e-3, 2)["alpha_weak_recovery_small_rho"] == pytest.approx(1e-3 * x_c)
    gain = {
        (rho, f): solve_point("hardmax", f * x_c * rho, rho, 2).q - rho for rho in (1e-3, 1e-4) for f in (0.8, 1.25)
    }
    assert gain[(1e-4, 0.8)] < gain[(1e-3, 0.8)] / 3  # below: shrinks with ρ
    assert gain[(1e-4, 1.25)] > 0.5 * gain[(1e-3, 1.25)] > 0.01  # above: stays finite


def test_softmax_weak_recovery_small_rho():
    x = {(rho, f): solve_point("softmax", f * rho / 4, rho, 2).q - rho for rho in (1e-3, 1e-4) for f in (0.8, 1.25)}
    assert x[(1e-4, 0.8)] < x[(1e-3, 0.8)] / 3
    assert x[(1e-4, 1.25)] > 0.5 * x[(1e-3, 1.25)] > 0.01


def test_record_roundtrip_and_refusals():
    p = solve_point("softmax", 0.05, 0.5, 3)
    row = {k: ("" if isinstance(v, float) and not math.isfinite(v) else str(v)) for k, v in p.to_row().items()}
    back = SEPoint.from_row(row)
    assert back.mmse == p.mmse and back.status == p.status and tuple(p.to_row()) == POINT_COLUMNS
    assert alpha_bar(0.05, 3) == pytest.approx(0.5)
    for args in [
        ("softmax", 0.0, 2, [0.1]),
        ("softmax", 0.5, 1, [0.1]),
        ("softmax", 0.5, 2, [0.0]),
        ("softmax", math.nan, 2, [0.1]),
        ("softmax", 0.5, 2, [math.inf]),
        ("relu", 0.5, 2, [0.1]),
        ("hardmax", 0.5, 3, [0.1]),
    ]:
        with pytest.raises(ParameterError):
            check_inputs(*args)


def test_algorithm_points_reader_and_figure(tmp_path):
    """The reader groups a verified `dotattn aim gd` folder by estimator, with the values of its alphas.csv."""
    import csv
    import shutil
    from pathlib import Path

    from dotattn.aim.plotting import mmse_figure, read_algorithm_points

    src = Path(__file__).resolve().parent.parent / "results" / "aim" / "gd_softmax_d40_rho0.5_T2"
    folder = tmp_path / "gd_x"
    shutil.copytree(src, folder)
    with open(folder / "alphas.csv") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    groups = read_algorithm_points(folder)
    assert [g["estimator"] for g in groups] == ["gd", "gd_averaged"]
    assert all("d = 40" in g["label"] for g in groups)  # the legend names the problem, not the folder
    gd = [r for r in rows if r["estimator"] == "gd"]
    assert list(groups[0]["alpha"]) == pytest.approx([float(r["alpha"]) for r in gd])
    assert list(groups[0]["mmse"]) == pytest.approx([float(r["mse_mean"]) for r in gd])
    fig = mmse_figure(
        [[solve_point("softmax", 0.05, 0.5, 2)]], thresholds=[thresholds("softmax", 0.5, 2)], algorithm_points=groups
    )
    assert len(fig.axes[0].get_legend().get_texts()) == 3


def test_points_of_a_second_d_are_drawn_apart():
    """Two folders of the same problem at d = 100 and d = 200 share a colour; the second d's markers are
    larger with a black edge, so the two sizes are not drawn on top of each other as one set."""
    import numpy as np
    from matplotlib.colors import to_rgba

    from dotattn.aim.plotting import D_MARKER_SIZES, mmse_figure

    def pts(d):
        return {
            "estimator": "gd_averaged",
            "channel": "softmax",
            "d": d,
            "rho": 0.5,
            "T": 2,
            "alpha": np.array([0.05]),
            "mmse": np.array([0.8]),
            "mmse_se": np.array([0.01]),
            "test": np.array([np.nan]),
            "test_se": np.array([np.nan]),
            "label": f"averaged GD, d = {d}",
        }

    fig = mmse_figure([[solve_point("softmax", 0.05, 0.5, 2)]], algorithm_points=[pts(100), pts(200), pts(100)])
    lines = [ln for ln in fig.axes[0].lines if ln.get_marker() == "D"]
    assert [ln.get_markersize() for ln in lines] == [D_MARKER_SIZES[0], D_MARKER_SIZES[1], D_MARKER_SIZES[0]]
    assert lines[0].get_color() == lines[1].get_color()  # one problem, one colour
    assert to_rgba(lines[1].get_markeredgecolor()) == to_rgba("k") != to_rgba(lines[0].get_markeredgecolor())
