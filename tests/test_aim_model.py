"""The AIM generator: normalisations of the teacher and the attention index by simulation, the
sensing operator against explicitly built sensing matrices, its adjoint, the outputs, bad input."""

import math

import numpy as np
import pytest

from dotattn.aim.model import (
    attention_index,
    hardmax_rows,
    make_data,
    outputs,
    sample_teacher,
    sample_tokens,
    sensing_adjoint,
    softmax_rows,
    teacher_rank,
)
from dotattn.core.validation import ParameterError


def test_teacher_normalisation_by_simulation():
    # E (1/d) Tr S*² = 1 + ρ + 1/d exactly (Wishart fourth moments); the mean over seeds within 4 standard errors
    d, rho = 120, 0.5
    r = teacher_rank(d, rho)
    q = np.array([np.sum(sample_teacher(d, r, s) ** 2) / d for s in range(40)])
    se = q.std(ddof=1) / math.sqrt(q.size)
    assert abs(q.mean() - (1 + r / d + 1 / d)) < 4 * se
    # and the prior mean: E S* = √ρ I, so (1/d) Tr S* → √ρ
    t = np.array([np.trace(sample_teacher(d, r, s)) / d for s in range(40)])
    assert abs(t.mean() - math.sqrt(r / d)) < 4 * t.std(ddof=1) / math.sqrt(t.size)


def test_attention_index_variances_by_simulation():
    # for a fixed S: Var h_ab = (1/d) Tr S² (a != b) and 2 (1/d) Tr S² (a = b) exactly for Gaussian tokens
    d, T, n = 60, 3, 20000
    S = sample_teacher(d, teacher_rank(d, 0.5), 3)
    Q0 = np.sum(S * S) / d
    h = attention_index(sample_tokens(n, T, d, 4), S)
    off = h[:, 0, 1]
    diag = h[:, 1, 1]
    for x, target in ((off, Q0), (diag, 2 * Q0)):
        se_mean = x.std() / math.sqrt(n)
        assert abs(x.mean()) < 4 * se_mean
        se_var = np.std(x**2) / math.sqrt(n)  # standard error of the second moment
        assert abs(np.mean(x**2) - target) < 4 * se_var
    # distinct entries are uncorrelated (the covariance of h given S is diagonal)
    assert abs(np.mean(h[:, 0, 1] * h[:, 0, 2])) < 4 * np.std(h[:, 0, 1] * h[:, 0, 2]) / math.sqrt(n)
    assert np.allclose(h, h.transpose(0, 2, 1), rtol=0, atol=1e-12 * np.abs(h).max())


def _explicit_Z(x: np.ndarray) -> dict:
    """Z_ab = sym(x_a x_bᵀ − δ_ab I)/√d for one sample, built entry by entry (a <= b)."""
    T, d = x.shape
    Z = {}
    for a in range(T):
        for b in range(a, T):
            M = (np.outer(x[a], x[b]) + np.outer(x[b], x[a])) / 2 - (a == b) * np.eye(d)
            Z[a, b] = M / math.sqrt(d)
    return Z


def test_sensing_operator_and_adjoint_against_explicit_matrices():
    rng = np.random.default_rng(7)
    n, T, d = 5, 3, 6
    X = rng.standard_normal((n, T, d))
    S = rng.standard_normal((d, d))
    S = (S + S.T) / 2
    G = rng.standard_normal((n, T, T))
    G = (G + G.transpose(0, 2, 1)) / 2
    h = attention_index(X, S)
    adj = np.zeros((d, d))
    for mu in range(n):
        for (a, b), Z in _explicit_Z(X[mu]).items():
            assert np.isclose(h[mu, a, b], np.sum(S * Z), rtol=1e-12, atol=1e-12)  # rounding only
            adj += G[mu, a, b] * Z
    assert np.allclose(sensing_adjoint(X, G), adj, rtol=1e-12, atol=1e-12)


def test_adjoint_identity_on_random_inputs():
    # <A S, G> over the upper triangles = <S, Aᵀ G>; relative tolerance 1e-10: the two sides sum the
    # same O(n T² d²) products in different orders (float64 rounding, ~1e-13 here)
    rng = np.random.default_rng(11)
    n, T, d = 300, 4, 25
    X = rng.standard_normal((n, T, d))
    S = rng.standard_normal((d, d))
    S = S + S.T
    G = rng.standard_normal((n, T, T))
    G = G + G.transpose(0, 2, 1)
    iu = np.triu_indices(T)
    lhs = np.sum(attention_index(X, S)[:, iu[0], iu[1]] * G[:, iu[0], iu[1]])
    rhs = np.sum(S * sensing_adjoint(X, G))
    assert math.isclose(lhs, rhs, rel_tol=1e-10)
    # counting the pair a < b twice (the full T × T sum) is a different operator: the test can tell
    full = np.sum(attention_index(X, S) * G)
    assert not math.isclose(full, rhs, rel_tol=1e-3)


def test_outputs():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((50, 3, 3)) * 5
    y = softmax_rows(h, beta=2.0)
    assert np.allclose(y.sum(-1), 1.0, rtol=0, atol=1e-12)
    assert np.allclose(softmax_rows(h + 3.0, beta=2.0), y, rtol=0, atol=1e-12)  # row-shift invariance
    assert np.allclose(np.log(y[..., 0] / y[..., 1]), 2.0 * (h[..., 0] - h[..., 1]), rtol=1e-9, atol=1e-9)
    hm = hardmax_rows(h)
    assert np.array_equal(hm.argmax(-1), h.argmax(-1)) and np.array_equal(hm.sum(-1), np.ones((50, 3)))
    assert np.array_equal(outputs(h, "hardmax"), hm)
    big = softmax_rows(np.array([[[1e4, 0.0]]]), beta=10.0)  # no overflow
    assert np.all(np.isfinite(big))


def test_make_data_is_seeded_and_consistent():
    a = make_data(20, 0.5, 2, 0.5, "softmax", seed=3)
    b = make_data(20, 0.5, 2, 0.5, "softmax", seed=3)
    c = make_data(20, 0.5, 2, 0.5, "softmax", seed=4)
    assert a.n == 200 and a.r == 10 and a.T == 2 and a.d == 20
    assert np.array_equal(a.X, b.X) and np.array_equal(a.S, b.S)
    assert not np.array_equal(a.S, c.S)
    assert np.allclose(a.y, softmax_rows(attention_index(a.X, a.S)), rtol=0, atol=1e-14)
    assert a.mse(a.S) == 0.0


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(rho=0.0), "rho"),
        (dict(rho=float("nan")), "rho"),
        (dict(T=1), "tokens"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=float("inf")), "alpha"),
        (dict(channel="relu"), "channel"),
        (dict(rho=0.01), "rho * d"),
    ],
)
def test_make_data_refuses_bad_input(kwargs, word):
    args = dict(d=20, rho=0.5, T=2, alpha=0.5, channel="softmax")
    args.update(kwargs)
    with pytest.raises(ParameterError, match=word.replace("*", r"\*")):
        make_data(**args)
