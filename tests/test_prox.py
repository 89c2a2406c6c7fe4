"""The batched global prox: brute force, an independent convex solver, and the envelope theorem."""

import numpy as np
import pytest

from dotattn.positional_semantic.loss import LossDerivatives, teacher_attention
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.prox import (
    AttentionPointLoss,
    minimise_envelope,
    multistart_points,
    prox,
    prox_objective,
)


def _instances(p, n, seed):
    """Fields of the sizes the theory produces: centres μ + √q ξ, teacher fields N(0, σ²), V in [5, 40]."""
    rng = np.random.default_rng(seed)
    V = rng.uniform(5, 40, size=n)
    q = rng.uniform(0.02, 1.0, size=n)
    m = rng.uniform(-0.4, 0.4, size=n)
    centre = (np.stack([m, -m], 1) + np.sqrt(q)[:, None] * rng.normal(size=(n, 2)))[:, :, None]
    h_star = p.sigma * rng.normal(size=(n, 2, 1))
    return V, centre, h_star


def test_global_minimum_against_dense_grid_500_instances():
    p = Problem(omega=0.3)
    n = 500
    V, centre, h_star = _instances(p, n, seed=11)
    T = teacher_attention(h_star, p)
    ours = np.array([prox(centre[i : i + 1], T[i : i + 1], np.array([[V[i]]]), p).value[0] for i in range(n)])
    # brute force: a 241 x 241 grid over the ball that must hold the minimiser, then polish the 6 best cells
    g = np.linspace(-1.0, 1.0, 241)
    X, Y = np.meshgrid(g, g, indexing="ij")
    grid = np.stack([X.ravel(), Y.ravel()], 1)
    loss = AttentionPointLoss(p)
    worst = -np.inf
    for i in range(n):
        R = np.sqrt(2 * V[i] * 2 * p.sigma**2) + 0.1
        pts = (centre[i, :, 0] + R * grid)[:, :, None]
        vals = prox_objective(
            pts,
            np.broadcast_to(centre[i], pts.shape),
            np.broadcast_to(T[i], (len(pts), 2, 2)),
            np.array([[1 / V[i]]]),
            loss,
        )
        best = np.argsort(vals)[:6]
        starts = pts[best][:, None]  # (6, 1, 2, 1)
        pol = minimise_envelope(starts, centre[i : i + 1], T[i : i + 1], np.array([[V[i]]]), loss)
        brute = min(vals.min(), pol.value[0])
        worst = max(worst, (ours[i] - brute) / abs(brute))
    assert worst <= 1e-10


@pytest.mark.parametrize(
    "p",
    [
        Problem(L=2, rank=2, teacher_rank=1),
        Problem(L=3, positional_attention=[[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]),
        Problem(L=2, rank=1, teacher_rank=2),
    ],
)
def test_general_shapes_global_against_many_restarts(p):
    rng = np.random.default_rng(5)
    n = 60
    centre = 0.3 * rng.normal(size=(n, p.L, p.rank)) + 0.6 * rng.normal(size=(n, p.L, p.rank))
    T = teacher_attention(p.sigma * rng.normal(size=(n, p.L, p.teacher_rank)), p)
    V = np.diag(rng.uniform(5, 30, size=p.rank))
    ours = prox(centre, T, V, p)
    brute = minimise_envelope(
        multistart_points(centre, V, p.sigma**2 * p.L, random_starts=200, seed=9), centre, T, V, AttentionPointLoss(p)
    )
    assert np.all(ours.value <= brute.value + 1e-10 * np.abs(brute.value))
    assert ours.grad_norm < 1e-8


def test_warm_start_reaches_the_same_point():
    p = Problem(omega=0.3)
    V, centre, h_star = _instances(p, 200, seed=2)
    T = teacher_attention(h_star, p)
    cold = prox(centre, T, np.array([[15.0]]), p)
    warm = prox(centre, T, np.array([[15.0]]), p, warm=cold.h + 1e-3)
    np.testing.assert_allclose(warm.value, cold.value, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(warm.h, cold.h, atol=1e-8)


class ConvexLoss:
    """ℓ(h; c) = Σ_{l,i} c_li · log(1 + exp(−h_li)) + ½ κ ‖h‖²: convex, smooth, not quadratic."""

    kappa = 0.3

    def value(self, h, data):
        return np.sum(data * np.logaddexp(0, -h), axis=(1, 2)) + 0.5 * self.kappa * np.sum(h * h, axis=(1, 2))

    def derivatives(self, h, data):
        s = 1 / (1 + np.exp(h))  # sigmoid(−h)
        grad = -data * s + self.kappa * h
        diag = (data * s * (1 - s) + self.kappa).reshape(len(h), -1)
        hess = np.einsum("ni,ij->nij", diag, np.eye(diag.shape[1]))
        return LossDerivatives(value=self.value(h, data), grad=grad, hess=hess)


def test_prox_machinery_against_cvxpy():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(4)
    L, r, n = 2, 2, 8
    V = np.array([[3.0, 0.8], [0.8, 2.0]])
    V_inv = np.linalg.inv(V)
    centre = rng.normal(size=(n, L, r)) * 2
    data = rng.uniform(0.5, 3.0, size=(n, L, r))
    ours = minimise_envelope(multistart_points(centre, V, 10.0, random_starts=2), centre, data, V, ConvexLoss())
    for i in range(n):
        h = cp.Variable((L, r))
        quad = sum(0.5 * cp.quad_form(h[l] - centre[i, l], V_inv) for l in range(L))
        obj = quad + cp.sum(cp.multiply(data[i], cp.logistic(-h))) + 0.5 * ConvexLoss.kappa * cp.sum_squares(h)
        prob = cp.Problem(cp.Minimize(obj))
        prob.solve()
        np.testing.assert_allclose(ours.value[i], prob.value, rtol=1e-6)
        np.testing.assert_allclose(ours.h[i], h.value, atol=1e-4)


def test_envelope_theorem():
    """Finite differences of M in the centre, V and h* equal the objective's partial derivatives at ĥ."""
    p = Problem(omega=0.3)
    rng = np.random.default_rng(8)
    n = 50
    centre = np.stack([0.25 * np.ones(n), -0.25 * np.ones(n)], 1)[:, :, None] + 0.3 * rng.normal(size=(n, 2, 1))
    h_star = p.sigma * rng.normal(size=(n, 2, 1))
    V = 12.0
    from dotattn.positional_semantic.loss import teacher_gradient

    def env(c, hs, v):
        return prox(c, teacher_attention(hs, p), np.array([[v]]), p).value

    base = prox(centre, teacher_attention(h_star, p), np.array([[V]]), p)
    eps = 1e-6
    f = base.f  # ∂M/∂c = −f
    for l in range(2):
        e = np.zeros((1, 2, 1))
        e[0, l, 0] = eps
        fd = (env(centre + e, h_star, V) - env(centre - e, h_star, V)) / (2 * eps)
        np.testing.assert_allclose(fd, -f[:, l, 0], atol=1e-7)
        fd = (env(centre, h_star + e, V) - env(centre, h_star - e, V)) / (2 * eps)
        np.testing.assert_allclose(fd, teacher_gradient(base.h, h_star, p)[:, l, 0], atol=1e-7)
    fd = (env(centre, h_star, V + 1e-4) - env(centre, h_star, V - 1e-4)) / 2e-4
    np.testing.assert_allclose(fd, -0.5 * np.sum(f**2, axis=(1, 2)), atol=1e-8)


def test_symmetric_minimisers_are_images_under_the_node_symmetries():
    """A node with P c U = c and P T Pᵀ = T (here the token swap with U = diag(−1, 1)) has a prox
    objective invariant under h → P h U: its image of any point is returned, with the same
    objective value; a node without such a symmetry gets none."""
    from dotattn.positional_semantic.prox import objective_symmetries, symmetric_minimisers

    p = Problem(L=2, rank=2, teacher_rank=1, omega=0.3)
    V = np.diag([20.0, 12.0])
    rng = np.random.default_rng(4)
    c0 = np.array([0.3, -0.2])
    centre = np.stack([np.stack([c0, c0 * [-1.0, 1.0]]), rng.normal(size=(2, 2))])  # node 0 symmetric, node 1 not
    t = 0.62
    target = np.stack([[[t, 1 - t], [1 - t, t]], [[0.7, 0.3], [0.45, 0.55]]])
    h = rng.normal(size=(2, 2, 2))
    alts = symmetric_minimisers(h, centre, target, V)
    assert alts is not None and np.all(np.isnan(alts[:, 1]))
    image = np.array([[0, 1], [1, 0]]) @ h[0] @ np.diag([-1.0, 1.0])
    assert any(np.allclose(a, image) for a in alts[:, 0] if not np.isnan(a[0, 0]))
    loss = AttentionPointLoss(p)
    V_inv = np.linalg.inv(V)
    for a in alts[:, 0]:
        if not np.isnan(a[0, 0]):
            np.testing.assert_allclose(
                prox_objective(a[None], centre[:1], target[:1], V_inv, loss),
                prox_objective(h[:1], centre[:1], target[:1], V_inv, loss),
                rtol=1e-13,
            )
    assert len(objective_symmetries(2, V)) == 2 * 4 - 1
