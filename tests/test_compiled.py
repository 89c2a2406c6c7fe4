"""The compiled prox Newton kernel (numba, a default dependency) against the vectorised one.

It runs the same steps node by node, so the minimisers, values and iteration counts must agree to rounding
(the exponential comes from libm there and numpy here: at most a few ulp per evaluation, which Newton's
quadratic convergence to gtol 1e-11 does not amplify; 1e-12 absolute on ĥ and 1e-15 on the values leave a
factor > 100). Nodes drawn so that every branch of the kernel runs: indefinite Hessians (the eigenvalue
solve), backtracking, and starts far from the minimum.
"""

from __future__ import annotations

import numpy as np
import pytest

from dotattn.positional_semantic import prox as P
from dotattn.positional_semantic.loss import teacher_attention
from dotattn.positional_semantic.problem import Problem

compiled = pytest.importorskip("dotattn.positional_semantic.compiled")
if not compiled.AVAILABLE:
    pytest.skip("numba cannot be imported here (it is a dependency: pip install .)", allow_module_level=True)


@pytest.mark.parametrize("V", [0.5, 12.0, 40.0])
def test_compiled_newton_is_the_vectorised_newton(V):
    rng = np.random.default_rng(3)
    p = Problem(omega=0.2)
    M = 4000
    centre = rng.normal(scale=1.5, size=(M, 2, 1))
    target = teacher_attention(rng.normal(scale=p.sigma, size=(M, 2, 1)), p)
    h0 = centre + rng.normal(scale=3.0, size=(M, 2, 1))
    args = (h0, centre, target, 1.0 / V, p.sigma**2, 100, 1e-11)
    h_np, v_np, it_np = P._newton_toy(*args)
    h_nb, v_nb, it_nb = compiled.newton_toy(*args)
    assert np.max(np.abs(h_nb - h_np)) <= 1e-12 and np.max(np.abs(v_nb - v_np)) <= 1e-15
    assert it_nb == it_np


def test_the_prox_uses_the_compiled_kernel_and_agrees():
    """The public prox (multi-start global search) gives the same global minimisers with either kernel."""
    from unittest import mock

    rng = np.random.default_rng(5)
    p = Problem(omega=0.3)
    centre = rng.normal(scale=0.6, size=(3000, 2, 1))
    target = teacher_attention(rng.normal(scale=p.sigma, size=(3000, 2, 1)), p)
    V = np.array([[11.0]])
    fast = P.prox(centre, target, V, p)
    with mock.patch.object(compiled, "AVAILABLE", False):
        slow = P.prox(centre, target, V, p)
    assert np.max(np.abs(fast.h - slow.h)) <= 1e-12 and np.max(np.abs(fast.value - slow.value)) <= 1e-15


@pytest.mark.parametrize("V", [0.5, 12.0, 40.0])
def test_fused_best_start_kernel_is_the_unfused_path_bit_for_bit(V):
    """compiled.newton_toy_best (every start, the best kept and f, in one compiled loop) against the unfused
    path (compiled.newton_toy on the flattened starts, numpy's argmin over the starts, f = (ĥ − c) V⁻¹): the
    same floating-point operations in the same order per node, so equality is exact (no tolerance). Canonical
    starts plus random ones and far starts, so that different nodes pick different starts."""
    rng = np.random.default_rng(11)
    p = Problem(omega=0.3)
    N = 3000
    centre = rng.normal(scale=1.2, size=(N, 2, 1))
    target = teacher_attention(rng.normal(scale=p.sigma, size=(N, 2, 1)), p)
    starts = P.multistart_points(centre, np.array([[V]]), P.point_loss_bound(p), random_starts=3, seed=2)
    S = starts.shape[0]
    v_inv, s2 = 1.0 / V, p.sigma**2
    h_b, val_b, f_b, it_b = compiled.newton_toy_best(starts, centre, target, v_inv, s2, 100, 1e-11)
    flat_c = np.broadcast_to(centre, (S, N, 2, 1)).reshape(S * N, 2, 1)
    flat_t = np.broadcast_to(target, (S, N, 2, 2)).reshape(S * N, 2, 2)
    h, val, it = compiled.newton_toy(starts.reshape(S * N, 2, 1), flat_c, flat_t, v_inv, s2, 100, 1e-11)
    h, val = h.reshape(S, N, 2, 1), val.reshape(S, N)
    best = np.argmin(val, axis=0)
    assert len(np.unique(best)) > 1  # the choice of start matters on these nodes
    h_u, val_u = h[best, np.arange(N)], val[best, np.arange(N)]
    assert np.array_equal(h_b, h_u) and np.array_equal(val_b, val_u)
    assert np.array_equal(f_b, (h_u - centre) * v_inv) and it_b == it
    one, one_v, one_f, _ = compiled.newton_toy_best(starts[:1], centre, target, v_inv, s2, 100, 1e-11)
    assert np.array_equal(one, h[0]) and np.array_equal(one_v, val[0])


def test_minimise_envelope_fused_and_numpy_agree():
    """minimise_envelope on the toy model takes the fused compiled kernel; with numba off it runs the vectorised
    numpy Newton and argmin. Same minimisers to rounding (libm's exp against numpy's: a few ulp per evaluation,
    not amplified by Newton's quadratic convergence to gtol 1e-11; 1e-12 on ĥ and f, 1e-15 on the values, as in
    the kernel test above)."""
    from unittest import mock

    rng = np.random.default_rng(7)
    p = Problem(omega=0.3)
    centre = rng.normal(scale=0.8, size=(2500, 2, 1))
    target = teacher_attention(rng.normal(scale=p.sigma, size=(2500, 2, 1)), p)
    V = np.array([[9.0]])
    starts = P.multistart_points(centre, V, P.point_loss_bound(p), random_starts=2, seed=4)
    loss = P.point_loss(p)
    fast = P.minimise_envelope(starts, centre, target, V, loss)
    with mock.patch.object(compiled, "AVAILABLE", False):
        slow = P.minimise_envelope(starts, centre, target, V, loss)
    assert np.max(np.abs(fast.h - slow.h)) <= 1e-12 and np.max(np.abs(fast.f - slow.f)) <= 1e-12
    assert np.max(np.abs(fast.value - slow.value)) <= 1e-15 and fast.iterations == slow.iterations


def test_warm_from_is_the_expanded_warm_start():
    """hat_update(warm_from=previous result) takes the representatives' ĥ as they are; the same step from the
    expanded ĥ at every node (warm=previous.prox.h) gives bit for bit the same result."""
    from dotattn.positional_semantic import loss_channel as LC
    from dotattn.positional_semantic.overlaps import Overlaps
    from dotattn.positional_semantic.quadrature import make_rule

    p = Problem(omega=0.3)
    rule = make_rule(4, "gauss-hermite", 12)
    ov = Overlaps(q=np.array([[0.02]]), V=np.array([[23.0]]), theta=np.array([[0.0]]), mu=np.array([[0.18], [-0.18]]))
    first = LC.hat_update(ov, 2.0, rule, p)
    assert first.symmetry is not None and len(first.rep_prox.h) < len(first.prox.h)  # the rule is folded
    ov2 = ov.mix(Overlaps(q=ov.q * 1.01, V=ov.V * 0.99, theta=ov.theta, mu=ov.mu * 1.02), 0.5)
    a = LC.hat_update(ov2, 2.0, rule, p, search="local", warm_from=first)
    b = LC.hat_update(ov2, 2.0, rule, p, search="local", warm=first.prox.h)
    assert np.array_equal(a.rep_prox.h, b.rep_prox.h) and np.array_equal(a.prox.f, b.prox.f)
    for k in ("q_hat", "V_hat", "theta_hat", "mu_hat"):
        assert np.array_equal(getattr(a.hats, k), getattr(b.hats, k))
