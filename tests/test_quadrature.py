import numpy as np
import pytest
from scipy.special import factorial2

from dotattn.positional_semantic.quadrature import gauss_hermite, make_rule, sobol_qmc


def gaussian_moment(n: int) -> float:
    return 0.0 if n % 2 else float(factorial2(n - 1)) if n > 0 else 1.0


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_gauss_hermite_exact_on_polynomials(k):
    rule = gauss_hermite(2, k)
    assert rule.size == k**2
    np.testing.assert_allclose(rule.weights.sum(), 1.0, rtol=1e-14)
    x, y = rule.nodes.T
    for a in range(2 * k):
        for b in range(2 * k - a):  # total degree <= 2k - 1 is within per-axis degree 2k - 1
            got = rule.expect(x**a * y**b)
            np.testing.assert_allclose(got, gaussian_moment(a) * gaussian_moment(b), atol=1e-9, rtol=1e-11)


def test_gauss_hermite_not_exact_beyond_degree():
    rule = gauss_hermite(1, 3)
    assert abs(rule.expect(rule.nodes[:, 0] ** 6) - 15.0) > 1.0


def test_moment_generating_function_4d():
    rng = np.random.default_rng(0)
    rule = gauss_hermite(4, 12)
    for _ in range(5):
        a = rng.normal(size=4) * 0.5
        np.testing.assert_allclose(rule.expect(np.exp(rule.nodes @ a)), np.exp(0.5 * a @ a), rtol=1e-10)


def test_qmc_error_estimate_covers_truth():
    rng = np.random.default_rng(1)
    covered = 0
    for trial in range(20):
        a = rng.normal(size=6) * 0.4
        rule = sobol_qmc(6, 10, scramblings=8, seed=trial)
        vals = np.exp(rule.nodes @ a)
        est, se = rule.expect(vals), rule.standard_error(vals)
        truth = np.exp(0.5 * a @ a)
        assert se > 0
        covered += abs(est - truth) <= 3 * se
    assert covered >= 18  # 3-sigma intervals


def test_rule_limits_and_names():
    with pytest.raises(ValueError):
        gauss_hermite(8, 12)
    with pytest.raises(ValueError):
        make_rule(2, "simpson")
    assert make_rule(3, "qmc", 8).describe()["scramblings"] == 8
