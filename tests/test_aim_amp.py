"""GAMP-RIE: the factor-2 bookkeeping of the input step (against a GOE of variance Δ, by simulation),
finite differences of the sensing operator, and a reduced AMP run against the state evolution."""

import math

import numpy as np
import pytest

from dotattn.aim.amp import AMPConfig, amp_input_step, c_weights, run_amp, se_trajectory
from dotattn.aim.model import attention_index, make_data, sensing_adjoint
from dotattn.core.validation import ParameterError


def _oracle_step(d: int, seed: int, alpha: float = 0.5):
    """The first input step with the exact residual (a noiseless linear channel g = (h − ω)/(c V) at the
    exact V): returns (R − S*, Δ)."""
    data = make_data(d, 0.5, 2, alpha, "softmax", seed=seed)
    S0 = math.sqrt(data.r / d) * np.eye(d)
    D = data.S - S0
    V = np.sum(D * D) / d
    c = c_weights(2)
    g = (data.h - attention_index(data.X, S0)) / (c * V)
    R, Delta = amp_input_step(data.X, S0, g, -np.ones_like(g) / (c * V))
    return R - data.S, Delta


def test_input_step_gives_a_goe_of_variance_delta():
    # R = S* + √Δ Z with Z GOE: (1/d)‖R − S*‖² → Δ, off-diagonal entries of variance Δ/d, diagonal 2Δ/d.
    # At finite d the second moment has an excess ≈ 10/d (fourth moments of the tokens, measured 1.33,
    # 1.12, 1.06 at d = 40, 80, 160; docs/aim_algorithms.md §4): the test bounds it by 25/d and checks
    # that it shrinks with d. A wrong factor 2 in Δ = 1/(2A) gives ratios 2 or 1/2 at every d.
    ratios = {}
    for d in (40, 120):
        r, diag, off = [], [], []
        for seed in range(3):
            N, Delta = _oracle_step(d, seed)
            r.append(np.sum(N * N) / d / Delta)
            diag.append(d * np.mean(np.diag(N) ** 2) / Delta)
            off.append(d * np.mean(N[~np.eye(d, dtype=bool)] ** 2) / Delta)
        ratios[d] = np.mean(r)
        assert 0.95 < ratios[d] < 1 + 25 / d, (d, r)
        # GOE shape: diagonal variance twice the off-diagonal one; the diagonal mean over 3 d entries has a
        # relative standard error √(2/(3d)) <= 0.13, so 0.6 is 4.6 standard errors at d = 40
        assert abs(np.mean(diag) / np.mean(off) - 2.0) < 0.6, (diag, off)
    assert ratios[120] < ratios[40]


def test_sensing_adjoint_by_finite_differences():
    # d/dε Σ_{a≤b} G_ab h_ab(S + εE) = <E, Aᵀ G>; central differences with ε = 1e-3 (the map is linear,
    # so the difference is exact up to rounding: relative 1e-8)
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 3, 12))
    S, E, G = (rng.standard_normal((12, 12)) for _ in range(3))
    S, E = S + S.T, E + E.T
    G = rng.standard_normal((40, 3, 3))
    G = G + G.transpose(0, 2, 1)
    iu = np.triu_indices(3)

    def F(M):
        return np.sum(attention_index(X, M)[:, iu[0], iu[1]] * G[:, iu[0], iu[1]])

    eps = 1e-3
    fd = (F(S + eps * E) - F(S - eps * E)) / (2 * eps)
    assert math.isclose(fd, np.sum(E * sensing_adjoint(X, G)), rel_tol=1e-8)


def test_input_step_without_information():
    X = np.ones((3, 2, 4))
    R, Delta = amp_input_step(X, np.eye(4), np.zeros((3, 2, 2)), np.zeros((3, 2, 2)))
    assert Delta == math.inf and np.array_equal(R, np.eye(4))


def test_config_refuses_bad_values():
    for kw in (dict(max_iter=0), dict(tol=0), dict(damping=1.0), dict(damping=-0.1)):
        with pytest.raises(ParameterError):
            AMPConfig(**kw)


def _theory(rho, T, channel="softmax"):
    from dotattn.aim.algo_study import StudySpec, _theory

    return _theory(StudySpec(d=60, rho=rho, T=T, alphas=(0.1,), channel=channel))


def test_se_trajectory_reaches_the_state_evolution_fixed_point():
    _, _, q_hat, mmse_of, mmse_prior = _theory(0.5, 2)
    path = se_trajectory(lambda V: q_hat(0.1, V), lambda D: mmse_prior(D, 0.5), 400)
    assert path[0] == 1.0 and all(
        a >= b - 1e-12 for a, b in zip(path, path[1:], strict=False)
    )  # monotone from the prior
    assert abs(path[-1] - mmse_of(0.1)) < 1e-4  # 400 steps of a contraction; the root-finder's answer


@pytest.mark.parametrize("alpha", [0.1, 0.3])
def test_reduced_amp_run_against_state_evolution(alpha):
    # softmax, ρ = 0.5, T = 2 (perfect recovery at ᾱ = 0.75, α = 0.1875): d = 60, 2 seeds. Tolerance 0.05:
    # at d = 100 the measured gaps are 0.004 (α = 0.1) and 0 (α = 0.3, perfect recovery); at d = 60
    # finite-d effects of relative size ~1/(αd) (docs/aim_algorithms.md §4) allow a few hundredths
    output, denoise, _, mmse_of, _ = _theory(0.5, 2)
    mmse = mmse_of(alpha)
    errs = []
    for seed in range(2):
        data = make_data(60, 0.5, 2, alpha, "softmax", seed=seed)
        res = run_amp(data, output, denoise, AMPConfig(max_iter=150))
        assert res.status in ("converged", "not_converged")
        assert res.mse_path[0] > 0.9  # starts from the prior mean, error ≈ 1
        errs.append(res.mse)
    assert abs(np.mean(errs) - mmse) < 0.05, (errs, mmse)


def test_lower_bound_check():
    from dotattn.aim.algo_study import BOUND_Z, alpha_summary

    errs = [0.50, 0.52, 0.48, 0.51, 0.49]
    se = np.std(errs, ddof=1) / math.sqrt(len(errs))
    ok = ["converged"] * 5
    below = alpha_summary("amp", 0.1, errs, ok, mmse=0.50 + (BOUND_Z + 1) * se)
    assert below.beats_bound and below.gap_in_se < -BOUND_Z
    within = alpha_summary("amp", 0.1, errs, ok, mmse=0.50 + (BOUND_Z - 1) * se)
    above = alpha_summary("amp", 0.1, errs, ok, mmse=0.3)
    assert not within.beats_bound and not above.beats_bound and above.gap_in_se > 0
    # a diverged run is counted, not averaged; one remaining run has no standard error and no verdict
    mixed = alpha_summary("amp", 0.1, [0.5, 1e6], ["not_converged", "diverged"], mmse=0.9)
    assert mixed.diverged == 1 and mixed.mse_mean == 0.5 and math.isnan(mixed.gap_in_se) and not mixed.beats_bound


def test_test_error_bound_combines_the_reference_monte_carlo_error():
    """The Bayes-optimal test error is a Monte-Carlo number: its standard error enters the gap in quadrature,
    so a point 3 estimator-se below it is flagged only when the reference's own error is small beside that."""
    from dotattn.aim.algo_study import BOUND_Z, alpha_summary

    errs, test = [0.50, 0.52, 0.48, 0.51, 0.49], [0.20, 0.21, 0.19, 0.205, 0.195]
    t_se = np.std(test, ddof=1) / math.sqrt(len(test))
    ok = ["converged"] * 5
    bo = 0.20 + 3 * t_se
    exact = alpha_summary("amp", 0.1, errs, ok, 0.3, test, bo)  # reference error 0 by default
    assert exact.test_gap_in_se == pytest.approx(-3.0) and exact.test_beats_bound
    noisy = alpha_summary("amp", 0.1, errs, ok, 0.3, test, bo, test_bo_se=2 * t_se)
    assert noisy.test_gap_in_se == pytest.approx(-3.0 / math.sqrt(5.0)) and not noisy.test_beats_bound
    assert noisy.test_error_bo_se == 2 * t_se and noisy.test_se == pytest.approx(t_se)
    assert -BOUND_Z < noisy.test_gap_in_se < 0
    with pytest.raises(ValueError, match="test_bo_se"):
        alpha_summary("amp", 0.1, errs, ok, 0.3, test, bo, test_bo_se=-1.0)
