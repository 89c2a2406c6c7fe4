"""Test error of the attention-indexed model: the Bayes-optimal predictor at d → ∞, and plug-in
predictors of finite-d estimators on fresh samples (docs/aim_algorithms.md, section 10).

Test error of a predictor ŷ of the outputs y = g(h) of a new sample: ε = (1/T) E‖ŷ − y‖²_F (the squared
error per row of the T × T output; a row of softmax or one-hot hardmax outputs has ‖y_a‖² ≤ 1).

Bayes-optimal: given the data, the new sample's index is h = ω + ξ with ω ~ N(0, q D) (the posterior
mean's index) and ξ ~ N(0, V D), V = Q0 − q (D: 2 on the diagonal, 1 off it); the predictor minimising the
squared error is ŷ(ω) = E_ξ g(ω + ξ), and ε_BO = (1/T) E_ω Σ Var_ξ g(ω + ξ) = (1/2T) E‖g(ω + ξ) − g(ω + ξ')‖²
for two independent posterior draws ξ, ξ' (two replicas): an unbiased Monte-Carlo average with an exact
standard error. Hardmax, T = 2, in closed form: ε_BO = ½ − asin(q/Q0)/π.
"""

from __future__ import annotations

import math

import numpy as np

from dotattn.aim.channels import softmax_rows
from dotattn.aim.prior import prior_second_moment

__all__ = [
    "symmetric_gaussian",
    "predict",
    "bayes_test_error",
    "hardmax_bayes_test_error",
    "plugin_test_error",
    "TEST_SAMPLES",
]

TEST_SAMPLES = 200_000
"""Monte-Carlo pairs of the Bayes-optimal test error (standard error ≈ 2e-4 × ε at q ≈ Q0/2, measured)."""
_CHUNK = 50_000
_STREAM_TEST = 4


def symmetric_gaussian(rng: np.random.Generator, m: int, T: int, var: float) -> np.ndarray:
    """m symmetric T × T Gaussian matrices, off-diagonal variance ``var``, diagonal 2·var: (m, T, T)."""
    A = rng.standard_normal((m, T, T)) * math.sqrt(max(var, 0.0))
    return (A + np.swapaxes(A, 1, 2)) / math.sqrt(2.0)


def predict(h: np.ndarray, channel: str, beta: float = 1.0) -> np.ndarray:
    """g(h) row-wise: softmax_β or one-hot argmax; (…, T, T)."""
    if channel == "softmax":
        return softmax_rows(h, beta)
    y = np.zeros_like(h)
    np.put_along_axis(y, h.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return y


def hardmax_bayes_test_error(q: float, rho: float) -> float:
    """ε_BO for hardmax, T = 2: each row's label is sign(u), u = h_aa − h_ab ~ N(ω_u, 3V), ω_u ~ N(0, 3q);
    the row's error is 2p(1 − p) with p = Φ(ω_u/√(3V)), and E[Φ(aZ)Φ(−aZ)] = ¼ − asin(a²/(1 + a²))/(2π)."""
    Q0 = prior_second_moment(rho)
    return 0.5 - math.asin(min(max(q / Q0, 0.0), 1.0)) / math.pi


def bayes_test_error(
    channel: str, q: float, rho: float, T: int, beta: float = 1.0, samples: int = TEST_SAMPLES, seed: int = 0
) -> tuple[float, float]:
    """(ε_BO, its standard error) at overlap q: closed form for hardmax T = 2 (error 0), else the
    two-replica Monte-Carlo average over ``samples`` pairs (seeded)."""
    Q0 = prior_second_moment(rho)
    q = min(max(float(q), 0.0), Q0)
    if channel == "hardmax" and T == 2:
        return hardmax_bayes_test_error(q, rho), 0.0
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_TEST]))
    vals = []
    for s in range(0, int(samples), _CHUNK):
        m = min(_CHUNK, int(samples) - s)
        w = symmetric_gaussian(rng, m, T, q)
        a = predict(w + symmetric_gaussian(rng, m, T, Q0 - q), channel, beta)
        b = predict(w + symmetric_gaussian(rng, m, T, Q0 - q), channel, beta)
        vals.append(0.5 * np.sum((a - b) ** 2, axis=(1, 2)) / T)
    v = np.concatenate(vals)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def plugin_test_error(h_hat: np.ndarray, y: np.ndarray, channel: str, beta: float = 1.0) -> tuple[float, float]:
    """(mean, standard error over samples) of (1/T)‖g(ĥ) − y‖²_F for fresh samples: ĥ (m, T, T) the
    estimator's indices, y (m, T, T) the teacher's outputs."""
    T = y.shape[-1]
    e = np.sum((predict(h_hat, channel, beta) - y) ** 2, axis=(1, 2)) / T
    return float(e.mean()), float(e.std(ddof=1) / math.sqrt(e.size)) if e.size > 1 else math.nan
