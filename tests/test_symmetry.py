"""Fast paths of the solver: folded quadrature rules, the token symmetry of the loss channel,
the toy-model prox kernel, and the fixed point they give against the plain iteration."""

import numpy as np
import pytest

from dotattn.positional_semantic.catalogue import initialisations
from dotattn.positional_semantic.loss_channel import hat_update, token_symmetry
from dotattn.positional_semantic.overlaps import Overlaps, overlaps_from_scalars
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.prox import AttentionPointLoss, _newton, _newton_toy, multistart_points
from dotattn.positional_semantic.quadrature import gauss_hermite, sobol_qmc
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate

HATS = ("q_hat", "V_hat", "theta_hat", "mu_hat")


def test_fold_by_reflection_integrates_like_the_full_rule():
    rule = gauss_hermite(2, 5)
    fold = rule.fold([((0, 1), (1, 1)), ((0, 1), (-1, -1))])  # {x, −x}
    assert fold.size == (25 + 1) // 2  # pairs plus the origin
    np.testing.assert_allclose(fold.weights.sum(), 1.0, rtol=1e-14)
    x = rule.nodes
    even = np.cos(x[:, 0]) * (1 + x[:, 1] ** 2) + x[:, 0] * x[:, 1]  # invariant under x → −x
    np.testing.assert_allclose(fold.weights @ even[fold.rep], rule.expect(even), rtol=1e-13)
    # every node is the image of its representative under the recorded element
    sign = np.array([1.0, -1.0])[fold.elem_of]
    np.testing.assert_allclose(sign[:, None] * x[fold.rep[fold.rep_of]], x, atol=1e-14)


def test_fold_refuses_rules_without_the_symmetry():
    maps = [((0, 1), (1, 1)), ((1, 0), (1, 1))]  # swap of the two axes
    assert sobol_qmc(2, 6, 2).fold(maps) is None
    rule = gauss_hermite(2, 4)
    shifted = type(rule)(nodes=rule.nodes + np.array([0.1, 0.0]), weights=rule.weights, kind="gh", order=4)
    assert shifted.fold(maps) is None
    assert rule.fold(maps).size == (16 + 4) // 2


@pytest.mark.parametrize(
    "state, order",
    [
        ((0.0511, 0.2583, 11.35, 0.0), 4),  # positional: ξ → −Pξ, η → ±η
        ((0.1148, 0.0, 12.7, 0.158), 4),  # semantic: ±P on both
        ((0.1, 0.0, 25.0, 0.0), 8),  # uninformative: all sign and swap actions
        ((0.3, 0.1, 15.0, 0.2), 2),  # mixed state with μ₁ = −μ₂: −P on both
    ],
)
@pytest.mark.parametrize("form", ["gradient", "stein"])
def test_token_symmetry_gives_the_full_rule_hats(toy, state, order, form):
    rule = gauss_hermite(4, 8)
    o = overlaps_from_scalars(toy, *state)
    sym = token_symmetry(o, rule, toy)
    assert sym is not None and sym.order == order
    assert sym.fold.size < rule.size / order + rule.size**0.5
    full = hat_update(o, 2.0, rule, toy, form=form, symmetry=False)
    fast = hat_update(o, 2.0, rule, toy, form=form)
    for name in HATS:
        np.testing.assert_allclose(getattr(fast.hats, name), getattr(full.hats, name), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(fast.envelope, full.envelope, rtol=1e-12)
    # the prox is returned at every node, and is the full rule's prox
    np.testing.assert_allclose(fast.prox.h, full.prox.h, atol=1e-7)
    np.testing.assert_allclose(fast.prox.value, full.prox.value, rtol=1e-10, atol=1e-15)


def test_no_token_symmetry_where_it_is_not_exact(toy):
    rule = gauss_hermite(4, 6)
    o = Overlaps(q=[[0.3]], V=[[15.0]], theta=[[0.2]], mu=[[0.1], [-0.09]])  # μ₁ ≠ −μ₂, θ ≠ 0
    assert token_symmetry(o, rule, toy) is None
    assert token_symmetry(overlaps_from_scalars(toy, 0.1, 0.0, 12.0, 0.1), sobol_qmc(4, 8, 2), toy) is None
    # A not invariant under the token swap: only the sign action −1 (μ = 0) survives
    p = Problem(omega=0.3, positional_attention=[[0.7, 0.3], [0.4, 0.6]])
    sym = token_symmetry(overlaps_from_scalars(p, 0.1, 0.0, 12.0, 0.1), rule, p)
    assert sym.order == 2 and all(perm == (0, 1) for _, _, perm in sym.elements)


@pytest.mark.parametrize("shape", [dict(L=2, rank=2, teacher_rank=1), dict(L=3, rank=1, teacher_rank=1)])
def test_token_symmetry_general_shapes(shape):
    """L = 2 with r = 2 (swap and signs), and L = 3 on a μ = 0 state (signs and permutations fixing A).
    These shapes use random prox starts by default; folded, they are drawn at the representatives,
    and the hats agree with the unfolded search (both find the global minimum here)."""
    p = (
        Problem(omega=0.3, **shape)
        if shape["L"] == 2
        else Problem(
            omega=0.3,
            L=3,
            positional_attention=[[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]],
            positional_gram=[[1.0, -0.5, -0.5], [-0.5, 1.0, -0.5], [-0.5, -0.5, 1.0]],
        )
    )
    rule = gauss_hermite(p.gaussian_dim, 3)
    o = overlaps_from_scalars(p, 0.2, 0.0, 10.0, 0.15)
    sym = token_symmetry(o, rule, p)
    assert sym is not None and sym.order == (4 if shape["L"] == 2 else 12)
    for starts in (0, None):
        full = hat_update(o, 1.5, rule, p, symmetry=False, random_starts=starts)
        fast = hat_update(o, 1.5, rule, p, random_starts=starts)
        assert fast.symmetry is not None and full.symmetry is None
        for name in HATS:
            np.testing.assert_allclose(getattr(fast.hats, name), getattr(full.hats, name), rtol=1e-9, atol=1e-11)


def test_only_permutations_that_keep_the_canonical_starts(toy):
    """L = 4 with A invariant under every permutation: only the dihedral ones (which map cyclic
    shifts to cyclic shifts) may fold the rule."""
    A = np.full((4, 4), 0.1) + 0.6 * np.eye(4)
    p = Problem(omega=0.3, L=4, positional_attention=A.tolist(), positional_gram=np.eye(4).tolist())
    o = Overlaps(q=[[0.2]], V=[[10.0]], theta=[[0.15]], mu=np.zeros((4, 1)))
    sym = token_symmetry(o, gauss_hermite(8, 2), p, random_starts=0)
    assert sym is not None and sym.order == 2 * 8  # ± times the dihedral group D4


def test_toy_newton_kernel_matches_the_generic_newton(toy):
    rng = np.random.default_rng(3)
    N = 400
    centre = rng.normal(scale=0.6, size=(N, 2, 1))
    h_star = rng.normal(scale=0.5, size=(N, 2, 1))
    from dotattn.positional_semantic.loss import teacher_attention

    target = teacher_attention(h_star, toy)
    V = np.array([[14.0]])
    starts = multistart_points(centre, V, toy.sigma**2 * 2).reshape(-1, 2, 1)
    c = np.broadcast_to(centre, (5, N, 2, 1)).reshape(-1, 2, 1)
    t = np.broadcast_to(target, (5, N, 2, 2)).reshape(-1, 2, 2)
    h1, v1, _ = _newton(starts, c, t, np.linalg.inv(V), AttentionPointLoss(toy), 100, 1e-11)
    h2, v2, _ = _newton_toy(starts, c, t, 1.0 / 14.0, toy.sigma**2, 100, 1e-11)
    np.testing.assert_allclose(v2, v1, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(h2, h1, atol=1e-9)


@pytest.mark.parametrize("branch", ["positional", "semantic"])
def test_fast_path_and_plain_iteration_give_the_same_fixed_point(toy, branch):
    """Deliverable: the default (fast) solver and the plain one (no symmetry folding) agree to 1e-6."""
    rule = gauss_hermite(4, 8)
    init = dict(initialisations(toy, 0))[branch]
    fast = iterate(toy, 1.6, init, rule)
    plain = iterate(toy, 1.6, init, rule, SolverOptions(symmetry=False))
    assert fast.converged and plain.converged
    np.testing.assert_allclose(fast.overlaps.vector(), plain.overlaps.vector(), rtol=1e-6, atol=1e-9)
    for key in ("train_loss", "test_error"):
        np.testing.assert_allclose(getattr(fast, key), getattr(plain, key), rtol=1e-6)


def test_predict_start_is_the_secant_and_keeps_invariant_subspaces(toy):
    from dotattn.positional_semantic.state_evolution import predict_start

    rule = gauss_hermite(4, 6)
    init = dict(initialisations(toy, 0))["positional"]
    a = iterate(toy, 1.6, init, rule)
    b = iterate(toy, 1.5, a.overlaps, rule, warm=a.prox_h)
    start, warm = predict_start(toy, 1.4, b, a)
    np.testing.assert_allclose(start.vector(), 2 * b.overlaps.vector() - a.overlaps.vector(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(warm, 2 * b.prox_h - a.prox_h, rtol=1e-12, atol=1e-15)
    assert np.all(start.theta == 0) and np.all(start.mu[0] == -start.mu[1])
    # without a second point, or with a prediction outside the admissible set: the previous point
    same, w = predict_start(toy, 1.4, b)
    assert same is b.overlaps and w is b.prox_h
    far, _ = predict_start(toy, -50.0, b, a)  # q < 0 there
    assert far is b.overlaps
    fp = iterate(toy, 1.4, start, rule, warm=warm)
    ref = iterate(toy, 1.4, b.overlaps, rule, warm=b.prox_h)
    np.testing.assert_allclose(fp.overlaps.vector(), ref.overlaps.vector(), rtol=1e-6, atol=1e-9)
