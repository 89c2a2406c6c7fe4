"""Free entropy of the AIM state evolution and the Bayes-optimal test error: known answers, finite
differences (I-MMSE, ∂Ψ_out/∂q, stationarity, dΦ/dᾱ) and Monte Carlo (docs/aim_algorithms.md, §9–10)."""

import math

import numpy as np
import pytest

from dotattn.aim.channels import psi_out, q_hat
from dotattn.aim.free_entropy import fixed_points, free_entropy, iterate_se, solve_free_entropy
from dotattn.aim.prior import log_energy, mmse_prior, mutual_information, prior_second_moment
from dotattn.aim.state_evolution import solve_point
from dotattn.aim.test_error import bayes_test_error, hardmax_bayes_test_error


@pytest.mark.parametrize("delta", [0.5, 2.0])
def test_log_energy_of_the_wigner_limit(delta):
    # ρ → ∞: S − √ρ I → GOE, μ_Δ → semicircle of variance 1 + Δ, Σ = ½ log(1 + Δ) − ¼; at ρ = 1e4 the
    # O(1/ρ) gap measured 5e-6, so 1e-4 is a test that fails for a wrong constant or a factor
    assert abs(log_energy(delta, 1e4) - (0.5 * math.log(1 + delta) - 0.25)) < 1e-4


@pytest.mark.parametrize("rho,qh", [(0.1, 40.0), (0.5, 1.0), (2.0, 5.0)])
def test_i_mmse_of_the_prior_channel(rho, qh):
    # dI/dq̂ = MMSE_S/4: Σ is computed from Re g and μ, the MMSE from ∫μ³, so this checks one against the
    # other; central differences with h = 1e-4 q̂ have error ~1e-10 (measured ≤ 2e-10 over ρ, q̂)
    h = 1e-4 * qh
    dI = (mutual_information(qh + h, rho) - mutual_information(qh - h, rho)) / (2 * h)
    assert abs(dI - mmse_prior(1 / qh, rho) / 4) < 2e-8
    assert mutual_information(1e-4, rho) < 1e-4  # no information at vanishing SNR


@pytest.mark.parametrize(
    "channel,T,rho,q", [("hardmax", 2, 0.5, 0.3), ("hardmax", 2, 2.0, 1.0), ("softmax", 3, 0.5, 0.9)]
)
def test_output_entropy_derivative_is_q_hat(channel, T, rho, q):
    h = 1e-5
    d = (psi_out(channel, q + h, rho, T) - psi_out(channel, q - h, rho, T)) / (2 * h)
    assert math.isclose(d, q_hat(channel, 1.0, q, rho, T) / 4, rel_tol=1e-7)


@pytest.mark.parametrize("channel,alpha", [("softmax", 0.1), ("hardmax", 0.5)])
def test_the_state_evolution_fixed_point_is_stationary(channel, alpha):
    rho, T = 0.5, 2
    p = solve_point(channel, alpha, rho, T)
    hq, hh = 1e-5, 1e-5 * p.q_hat
    dq = (
        free_entropy(channel, alpha, p.q + hq, p.q_hat, rho, T)
        - free_entropy(channel, alpha, p.q - hq, p.q_hat, rho, T)
    ) / (2 * hq)
    dh = (
        free_entropy(channel, alpha, p.q, p.q_hat + hh, rho, T)
        - free_entropy(channel, alpha, p.q, p.q_hat - hh, rho, T)
    ) / (2 * hh)
    assert abs(dq) < 1e-6 * p.q_hat and abs(dh) < 1e-7  # both forces are O(q̂) and O(1) away from it


def test_free_entropy_slope_in_alpha_bar_is_the_entropy_of_a_measurement():
    # softmax: each sample reveals K − 1 Gaussian combinations; dΦ/dᾱ = −¼ (1 + log 2π MMSE) along the
    # state evolution (the I-MMSE relation of noiseless measurements)
    rho, T, ab, h = 0.5, 2, 0.4, 2e-4

    def phi(abar):
        p = solve_point("softmax", abar / 4, rho, T)
        return free_entropy("softmax", abar / 4, p.q, p.q_hat, rho, T)

    slope = (phi(ab + h) - phi(ab - h)) / (2 * h)
    mmse = solve_point("softmax", ab / 4, rho, T).mmse
    assert abs(slope + 0.25 * (1 + math.log(2 * math.pi * mmse))) < 1e-6


def test_both_starts_reach_the_state_evolution_fixed_point():
    for channel, alpha in (("softmax", 0.1), ("hardmax", 0.3)):
        fp = fixed_points(channel, alpha, 0.5, 2)
        mmse = solve_point(channel, alpha, 0.5, 2).mmse
        assert fp["sign_changes"] == 1
        assert abs(fp["uninformed"] - mmse) < 1e-9 and abs(fp["informed"] - mmse) < 1e-9
    # the iteration from the prior mean moves monotonically down to the fixed point (softmax, slow near it)
    V = iterate_se("softmax", 0.1, 0.5, 2, 1.0, 60)
    assert (
        all(b <= a + 1e-15 for a, b in zip(V, V[1:], strict=False))
        and abs(V[-1] - solve_point("softmax", 0.1, 0.5, 2).mmse) < 1e-3
    )


def test_perfect_recovery_rows():
    rows = solve_free_entropy("softmax", 0.2, 0.5, 2, test_samples=1000)  # ᾱ = 0.8 > ᾱ_PR = 0.75
    assert all(r.mmse == 0 and r.selected and r.test_error == 0 for r in rows)


def test_hardmax_bayes_test_error_closed_form_against_monte_carlo():
    rho, Q0 = 0.5, prior_second_moment(0.5)
    assert hardmax_bayes_test_error(0.0, rho) == 0.5  # no information: ŷ = (½, ½) per row
    assert hardmax_bayes_test_error(Q0, rho) == 0.0
    from dotattn.aim.test_error import predict, symmetric_gaussian

    rng = np.random.default_rng(0)
    for q in (0.5, 1.2):
        w = symmetric_gaussian(rng, 100_000, 2, q)
        a = predict(w + symmetric_gaussian(rng, 100_000, 2, Q0 - q), "hardmax")
        b = predict(w + symmetric_gaussian(rng, 100_000, 2, Q0 - q), "hardmax")
        v = 0.5 * ((a - b) ** 2).sum(axis=(1, 2)) / 2
        assert abs(v.mean() - hardmax_bayes_test_error(q, rho)) < 4 * v.std() / math.sqrt(v.size)


def test_softmax_bayes_test_error_limits_and_monotonicity():
    rho = 0.5
    Q0 = prior_second_moment(rho)
    e = [bayes_test_error("softmax", q, rho, 3, samples=40_000)[0] for q in (0.0, 0.75, 1.4, Q0)]
    assert e[-1] == 0.0 and e[0] > e[1] > e[2] > 0
    err, se = bayes_test_error("softmax", 0.75, rho, 2, samples=100_000, seed=3)
    assert se < 0.01 * err  # the stated error of the default sample size is small against the value
