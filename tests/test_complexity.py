"""The zero-temperature 1RSB complexity curve Σ(e) (docs/rsb.md section 11): the Legendre structure along the
saddles (finite differences), a model with an independent answer (the spherical perceptron of section 9: its RS
limit in closed form and its 1RSB potential in overlap form), the pure helpers, the command line and the
committed folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_rsb import KAPPA, _gardner_alpha, _overlap_form_saddle

from dotattn.core.status import CONVERGED
from dotattn.positional_semantic.complexity import (
    ComplexityOptions,
    complexity_curve,
    linear_crossing,
    parabola_peak,
    sign_change_root,
    state_energy,
)
from dotattn.positional_semantic.quadrature import gauss_hermite
from dotattn.positional_semantic.rsb import HingeChannel, RSBOptions, RSBOverlaps, SphericalWeights

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "rsb" / "complexity_omega0.1"
Y_GRID = (30, 25, 21, 19, 18, 17, 16, 15, 14, 12, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1.5, 1, 0.7, 0.5, 0.3, 0.2, 0.1)


def test_helpers_are_exact_where_they_must_be():
    x = np.array([1.0, 2.0, 4.0, 5.0])
    ym, fm, k = parabola_peak(x, -3.0 * (x - 2.7) ** 2 + 1.25)  # a parabola is reproduced exactly
    assert (ym, fm, k) == (pytest.approx(2.7, abs=1e-12), pytest.approx(1.25, abs=1e-12), 1)
    with pytest.raises(ValueError):
        parabola_peak(x, x)  # maximum at the end: not bracketed
    root, i = sign_change_root(x, 3.5 - x)  # linear: exact; from + to - only
    assert (root, i) == (pytest.approx(3.5, abs=1e-15), 1)
    assert sign_change_root(x, x - 3.5) is None
    assert np.isnan(linear_crossing(x, x - 3.5))
    assert state_energy(np.array([2.0, 4.0]), np.array([1.0, 1.0]), np.array([2.0, -4.0])).tolist() == [2.0, 0.0]


@pytest.fixture(scope="module")
def perceptron():
    """The spherical perceptron with the quadratic hinge at κ = −0.5, α = 1.3 α_RS (docs/rsb.md section 9), its
    curve on Gauss–Hermite 240 × 160 from y = 30 down to 0.1 (on 160 × 80 Σ is still 1–4 % off the overlap
    form near its maximum, as docs/rsb.md section 9 measured at y = 10)."""
    a_rs = _gardner_alpha(KAPPA)
    alpha = 1.3 * a_rs
    init = RSBOverlaps(q0=[[0.7]], q1=[[1.0]], V=[[5.0]], theta=np.zeros((1, 0)), mu=[[0.0]])
    curve = complexity_curve(
        alpha,
        init,
        gauss_hermite(1, 240),
        gauss_hermite(1, 160),
        HingeChannel(KAPPA),
        SphericalWeights(),
        RSBOptions(max_iter=3000, y_grid=Y_GRID),
    )
    assert all(p.status == CONVERGED for p in curve.points)
    return alpha, 0.5 * (np.sqrt(1.3) - 1) ** 2, curve


def test_perceptron_curve_ends_at_the_rs_energy_and_has_both_features(perceptron):
    """Exact limit: as y → 0 the saddle is the RS one, Σ → 0 and e(y) → e_RS = (√(α/α_RS) − 1)²/2 (closed form).
    Measured: the reference (e_t extrapolated linearly to y = 0) is e_RS to 2.7e-5 relative (asserted 1e-3, the
    size of the Gauss–Hermite error on the kinked loss at coarser rules, test_rsb); e(0.1) to 2.7e-3 (asserted
    1e-2); Σ(0.1)/Σ_max = 8.7e-4. Both features are inside the grid: the equilibrium (Σ = 0) at y* ≈ 17.08 and
    the threshold (largest Σ) at y ≈ 8.20, with
    e_RS < e_eq < e_thr (the threshold minima lie above the equilibrium ones)."""
    _, e_rs, curve = perceptron
    assert curve.reference == pytest.approx(e_rs, rel=1e-3)
    small = min(curve.points, key=lambda p: p.y)
    assert small.energy == pytest.approx(e_rs, rel=1e-2)
    assert 0 < small.complexity < 1e-2 * curve.threshold.complexity
    assert curve.equilibrium.status == CONVERGED and curve.threshold.status == CONVERGED
    assert e_rs < curve.equilibrium.energy < curve.threshold.energy
    assert curve.threshold.y < curve.equilibrium.y


def test_perceptron_curve_against_the_overlap_form(perceptron):
    """A second formulation (docs/rsb.md section 9: no hats, no multiplier, closed-form inner integral, adaptive
    outer quadrature): its Σ(y) at y = 8, 9, 10 (parabola) gives the threshold, its e_t at the package's y* the
    equilibrium energy (e_t is stationary there). Measured differences (rules 240 × 160): e_thr 7e-6 relative,
    Σ_max 4.5e-4, y_thr 0.3 %, e_eq 1.1e-5. Asserted: energies to 1e-4 relative, Σ_max to 2 %, y_thr to 3 %
    (above the package's own change from rules 160 × 80, where Σ near its maximum is 1–4 % off)."""
    alpha, _, curve = perceptron
    ys = np.array([7.0, 8.0, 9.0])
    ref = [_overlap_form_saddle(y, alpha, (0.674, 4.85)) for y in ys]
    e_t, sigma = np.array([r[2] for r in ref]), np.array([r[3] for r in ref])
    y_m, s_m, _ = parabola_peak(ys, sigma)
    e_m = float(np.polyval(np.polyfit(ys, state_energy(ys, e_t, sigma), 2), y_m))
    assert curve.threshold.y == pytest.approx(y_m, rel=0.03)
    assert curve.threshold.complexity == pytest.approx(s_m, rel=0.02)
    assert curve.threshold.energy == pytest.approx(e_m, rel=1e-4)
    e_eq = _overlap_form_saddle(curve.equilibrium.y, alpha, (0.786, 3.92))[2]
    assert curve.equilibrium.energy == pytest.approx(e_eq, rel=1e-4)


def test_perceptron_legendre_structure_by_finite_differences(perceptron):
    """Along the computed saddles dΣ/de = y and de/dy = Σ'(y)/y (docs/rsb.md section 11), by differences between
    neighbouring y (against the midpoint y, a second-order difference). Measured on 240 × 160, away from the
    threshold (|y_mid − y_thr| > 3; next to it de → 0 and the ratio is 0/0): (ΔΣ/Δe)/y − 1 has median 0.5 %
    and is at most 7.4 % (the interval 3–4); de/dy against Σ'/y the same. Asserted: 10 % on every such interval,
    median 2 %; e(y) rises with y below the threshold and falls above it."""
    _, _, curve = perceptron
    pts = sorted(curve.points, key=lambda p: p.y)
    y = np.array([p.y for p in pts])
    e = np.array([p.energy for p in pts])
    s = np.array([p.complexity for p in pts])
    mid = 0.5 * (y[1:] + y[:-1])
    de, ds = np.diff(e), np.diff(s)
    far = (np.abs(mid - curve.threshold.y) > 3.0) & (mid > 0.4)
    assert far.sum() >= 15
    np.testing.assert_allclose((ds / de)[far], mid[far], rtol=0.1)
    np.testing.assert_allclose((de / np.diff(y))[far], (ds / np.diff(y) / mid)[far], rtol=0.1)
    assert np.median(np.abs((ds / de)[far] / mid[far] - 1)) < 0.02
    rising = de > 0
    assert rising[mid < curve.threshold.y - 1].all() and not rising[mid > curve.threshold.y + 1].any()


@pytest.mark.parametrize(
    "args, name",
    [
        (["--alpha", "0.75"], "alphas"),
        (["--alpha", "0.74,0.75", "--rules", "6x1"], "rules"),
        (["--alpha", "0.74,0.75", "--rules", "6-4"], "rules"),
        (["--alpha", "0.74,0.75", "--y", "300,100"], "y_grid"),
        (["--alpha", "0.74,0.75", "--y", "300,100,30,-1,3"], "y_grid"),
        (["--alpha", "0.74,-0.75"], "alpha"),
        (["--alpha", "0.74,0.75", "--omega", "1.5"], "omega"),
    ],
)
def test_cli_refuses_bad_input_before_computing(tmp_path, args, name):
    """One line naming the parameter, exit 2, no folder written, before the first RS solve."""
    import subprocess

    from clitools import ENV, dotattn_command

    out = tmp_path / "c"
    res = subprocess.run(
        dotattn_command() + ["complexity", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert name in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_options_refuse_bad_values():
    from dotattn.core.validation import ParameterError

    with pytest.raises(ParameterError, match="rules"):
        ComplexityOptions(rules=((6, 4), (6, 4)))
    with pytest.raises(ParameterError, match="y_grid"):
        ComplexityOptions(y_grid=(1.0, 2.0))
