"""Output channels of the AIM (dotattn.aim.channels): Φ₂, finite differences, q̂ against sampling."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dotattn.aim.channels import (
    alpha_bar,
    bvn_partials,
    flatten,
    hardmax_fisher_at_zero,
    log_bvn,
    log_z_out,
    n_entries,
    noise_weights,
    output_function,
    q_hat,
    softmax_rows,
    unflatten,
)
from dotattn.aim.prior import prior_second_moment


def _bvn_mp(h, k, r):
    """Φ₂ by mpmath quadrature of ∫_{−∞}^{h} φ(x) Φ((k − r x)/s) dx at 20 digits on 24 subintervals
    graded towards h (tanh-sinh, not Gauss–Legendre; its own error, from doubling both, is ≤ 2e-10)."""
    mpmath.mp.dps = 20
    s = mpmath.sqrt(1 - mpmath.mpf(r) ** 2)
    f = lambda x: mpmath.npdf(x) * mpmath.ncdf((k - r * x) / s)  # noqa: E731
    pts = [-mpmath.inf] + [h - 12 * (1 - j / 24) ** 2 for j in range(25)]  # graded towards h
    return mpmath.quad(f, pts, maxdegree=6)


@pytest.mark.parametrize("r", [1 / 3, -1 / 3])
@pytest.mark.parametrize("h,k", [(0.0, 0.0), (1.0, -2.0), (-12.0, -10.0), (5.0, 6.0), (-30.0, -29.0), (-8.0, 8.0)])
def test_log_bvn_relative_accuracy(h, k, r):
    ref = float(mpmath.log(_bvn_mp(h, k, r)))
    # relative accuracy of Φ₂ (64 Gauss–Legendre nodes on a log-concave integrand); 1e-9 in log Φ₂
    # is five times the reference's own error
    assert float(log_bvn(h, k, r)) == pytest.approx(ref, abs=1e-9)


def _random_case(channel, T, n, rng, V=0.7, beta=1.0):
    K = n_entries(T)
    D = noise_weights(T)
    omega = rng.standard_normal((n, K)) * np.sqrt(D)
    h = omega + np.sqrt(V * D) * rng.standard_normal((n, K))
    H = unflatten(h, T)
    if channel == "softmax":
        y = softmax_rows(H, beta)
    else:
        y = np.eye(T)[np.argmax(H, axis=-1)]
    return y, omega, V


@pytest.mark.parametrize("channel,T", [("softmax", 2), ("softmax", 3), ("softmax", 4), ("hardmax", 2)])
def test_output_function_finite_differences(channel, T):
    rng = np.random.default_rng(7)
    y, omega, V = _random_case(channel, T, 40, rng)
    g, dg = output_function(channel, y, omega, V, T)
    K = n_entries(T)
    eps = 1e-5
    for k in range(K):
        e = np.zeros(K)
        e[k] = eps
        fd = (log_z_out(channel, y, omega + e, V, T) - log_z_out(channel, y, omega - e, V, T)) / (2 * eps)
        # central differences: truncation O(eps²) ~ 1e-10, rounding ~1e-16/eps ~ 1e-11
        assert np.allclose(g[:, k], fd, rtol=1e-6, atol=1e-7)
        gp, _ = output_function(channel, y, omega + e, V, T)
        gm, _ = output_function(channel, y, omega - e, V, T)
        assert np.allclose(dg[:, :, k], (gp - gm) / (2 * eps), rtol=1e-6, atol=1e-7)


def test_hardmax_finite_differences_in_the_tails():
    # ω far on the wrong side of the labels (κ ~ −20): log Z_out, g_out and dg_out stay accurate
    T, V = 2, 0.05
    y = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])
    omega = np.array([[-3.0, 1.5, 2.0], [4.0, -1.0, -3.5]])
    g, dg = output_function("hardmax", y, omega, V, T)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(dg))
    eps = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        fd = (log_z_out("hardmax", y, omega + e, V, T) - log_z_out("hardmax", y, omega - e, V, T)) / (2 * eps)
        assert np.allclose(g[:, k], fd, rtol=1e-6)


def test_public_script_derivative_is_not_the_gradient():
    # the public SE_hardmax.py uses φ₂/Φ₂ (bivariate density over CDF) for both first derivatives of
    # log Φ₂; the gradient (checked here by central differences) is φ(h) Φ((k − r h)/s)/Φ₂ and its
    # mirror; at every point below one of the two partials differs by more than 5 %
    h, k, r = np.array([0.3, -1.0, 0.0, 2.0]), np.array([-0.2, 0.5, 0.0, 1.0]), 1 / 3
    logz, gh, gk, *_ = bvn_partials(h, k, r)
    eps = 1e-6
    fdh = (log_bvn(h + eps, k, r) - log_bvn(h - eps, k, r)) / (2 * eps)
    fdk = (log_bvn(h, k + eps, r) - log_bvn(h, k - eps, r)) / (2 * eps)
    assert np.allclose(gh, fdh, rtol=1e-7) and np.allclose(gk, fdk, rtol=1e-7)
    phi2 = np.exp(-(h * h - 2 * r * h * k + k * k) / (2 * (1 - r * r))) / (2 * math.pi * math.sqrt(1 - r * r))
    public = phi2 / np.exp(logz)
    rel = np.maximum(np.abs(public - fdh) / np.abs(fdh), np.abs(public - fdk) / np.abs(fdk))
    assert np.all(rel > 0.05)


@pytest.mark.parametrize("T,beta", [(2, 1.0), (3, 1.0), (3, 4.0), (4, 0.5)])
def test_softmax_q_hat_against_sampling(T, beta):
    # V E[gᵀ D g] = K − 1 (the softmax reveals h up to the all-ones direction), for any β
    rng = np.random.default_rng(11)
    n = 20000
    y, omega, V = _random_case("softmax", T, n, rng, beta=beta)
    g, dg = output_function("softmax", y, omega, V, T, beta=beta)
    D = noise_weights(T)
    f = V * np.sum(g * g * D, axis=1)
    se = f.std(ddof=1) / math.sqrt(n)
    assert abs(f.mean() - (n_entries(T) - 1)) < 4 * se
    # Nishimori: E[gᵀ D g] = −E[Tr(D ∂g)] (here exact per sample)
    assert np.allclose(-V * np.einsum("k,nkk->n", D, dg), n_entries(T) - 1)
    rho, q, alpha = 0.5, 0.8, 0.3
    assert q_hat("softmax", alpha, q, rho, T) == pytest.approx(alpha_bar(alpha, T) / (prior_second_moment(rho) - q))
    assert alpha_bar(alpha, T) == pytest.approx(2 * alpha * (n_entries(T) - 1))


@pytest.mark.parametrize("q", [0.2, 1.0])
def test_hardmax_q_hat_against_sampling(q):
    # the quadrature q̂ against a Monte Carlo average of gᵀ D g over ω ~ N(0, qD), h = ω + √V D^½ ξ
    rho, T, alpha = 0.5, 2, 0.7
    V = prior_second_moment(rho) - q
    rng = np.random.default_rng(21)
    n = 40000
    D = noise_weights(T)
    omega = np.sqrt(q * D) * rng.standard_normal((n, 3))
    h = omega + np.sqrt(V * D) * rng.standard_normal((n, 3))
    y = np.eye(T)[np.argmax(unflatten(h, T), axis=-1)]
    g, dg = output_function("hardmax", y, omega, V, T)
    f = 2 * alpha * np.sum(g * g * D, axis=1)
    se = f.std(ddof=1) / math.sqrt(n)
    assert abs(f.mean() - q_hat("hardmax", alpha, q, rho, T)) < 4 * se
    nish = -2 * alpha * np.einsum("k,nkk->n", D, dg)
    assert abs(nish.mean() - f.mean()) < 4 * math.hypot(se, nish.std(ddof=1) / math.sqrt(n))


def test_hardmax_fisher_at_zero_closed_form():
    rho = 0.3
    V = prior_second_moment(rho)
    assert q_hat("hardmax", 1.0, 1e-18, rho, 2) * V / 2 == pytest.approx(hardmax_fisher_at_zero(), rel=1e-9)
    assert q_hat("hardmax", 1.0, 1e-4, rho, 2) == pytest.approx(2 * hardmax_fisher_at_zero() / V, rel=1e-3)


def test_flatten_roundtrip_and_refusals():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 4, 4))
    S = A + np.swapaxes(A, -1, -2)
    assert np.array_equal(unflatten(flatten(S), 4), S)
    with pytest.raises(ValueError):
        q_hat("argmax", 1.0, 0.1, 0.5, 2)
    with pytest.raises(ValueError):
        q_hat("hardmax", 1.0, 0.1, 0.5, 3)
    with pytest.raises(ValueError):
        q_hat("softmax", 1.0, 1.5, 0.5, 2)
