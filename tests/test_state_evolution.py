"""Channels, hat forms, the potential and the iterator."""

import json
from pathlib import Path

import numpy as np
import pytest

from dotattn.positional_semantic.loss_channel import hat_update
from dotattn.positional_semantic.overlaps import Hats, Overlaps, overlaps_from_scalars
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import gauss_hermite
from dotattn.positional_semantic.regulariser import overlap_update
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate, potential

DATA = Path(__file__).parent / "data"


def test_overlap_update_closed_form_r1(toy):
    hats = Hats(q_hat=[[0.003]], V_hat=[[0.05]], theta_hat=[[0.02]], mu_hat=[[0.01], [-0.01]])
    o = overlap_update(hats, toy)
    s2, lam = toy.sigma**2, toy.ridge
    K = lam + s2 * 0.05
    mh = np.array([0.01, -0.01])
    X = s2 * 0.003 + s2**2 * 0.02**2 + mh @ toy.G @ mh
    np.testing.assert_allclose(o.V[0, 0], s2 / K)
    np.testing.assert_allclose(o.q[0, 0], s2 * X / K**2)
    np.testing.assert_allclose(o.theta[0, 0], s2**2 * 0.02 / K)
    np.testing.assert_allclose(o.mu[:, 0], [0.02 / K, -0.02 / K])


def test_overlap_update_is_stationary_in_the_hats():
    """∂Φ/∂(hats) = 0 at overlaps = overlap_update(hats), for a matrix case (r = 2, r_t = 1, L = 3)."""
    p = Problem(
        L=3,
        rank=2,
        teacher_rank=1,
        positional_attention=[[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]],
        positional_gram=[[1.0, 0.2, 0.0], [0.2, 1.0, 0.1], [0.0, 0.1, 0.5]],
    )
    rng = np.random.default_rng(0)
    A = rng.normal(size=(2, 2)) * 0.01
    hats = Hats(
        q_hat=A @ A.T + 0.002 * np.eye(2),
        V_hat=np.diag([0.05, 0.08]) + 0.01,
        theta_hat=rng.normal(size=(2, 1)) * 0.02,
        mu_hat=rng.normal(size=(3, 2)) * 0.01,
    )
    o = overlap_update(hats, p)

    def phi(h):
        return potential(o, h, 0.0, 1.0, p)

    eps = 1e-7
    for name in ("q_hat", "V_hat", "theta_hat", "mu_hat"):
        base = getattr(hats, name)
        for idx in np.ndindex(base.shape):
            d = np.zeros_like(base)
            d[idx] = eps
            if name in ("q_hat", "V_hat"):
                d = 0.5 * (d + d.T)
            plus = Hats(**{**hats.__dict__, name: base + d})
            minus = Hats(**{**hats.__dict__, name: base - d})
            assert abs((phi(plus) - phi(minus)) / (2 * eps)) < 1e-6


@pytest.mark.parametrize(
    "point, rule, rtol",
    [
        ((2.0, 0.1148, 0.0, 12.7, 0.158), ("gh", 12), 5e-3),  # near the semantic fixed point
        ((2.0, 0.0511, 0.2583, 11.35, 0.0), ("gh", 12), 5e-3),  # near the positional fixed point
        ((1.0, 0.3, 0.12, 16.0, 0.2), ("qmc", 15), 2e-2),  # arbitrary points: the prox jumps between
        ((0.7, 0.05, 0.1, 22.0, 0.05), ("qmc", 15), 2e-2),  # minima, so use a rule that does not need smoothness
    ],
)
def test_stein_and_gradient_hats_agree(toy, point, rule, rtol):
    from dotattn.positional_semantic.quadrature import make_rule

    alpha, q, m, V, th = point
    o = overlaps_from_scalars(toy, q, m, V, th)
    rule = make_rule(4, "gauss-hermite" if rule[0] == "gh" else "qmc", rule[1])
    g = hat_update(o, alpha, rule, toy, form="gradient").hats
    s = hat_update(o, alpha, rule, toy, form="stein").hats
    for name in ("q_hat", "mu_hat"):  # identical formulas
        np.testing.assert_allclose(getattr(g, name), getattr(s, name), rtol=1e-12, atol=1e-15)
    for name in ("V_hat", "theta_hat"):
        a, b = getattr(g, name)[0, 0], getattr(s, name)[0, 0]
        assert abs(a - b) <= rtol * max(abs(a), 1e-4), (name, a, b)


L3_A = [[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]


@pytest.mark.parametrize(
    "p",
    [
        Problem(omega=0.3),
        Problem(L=2, rank=2, teacher_rank=1),
        Problem(L=2, rank=1, teacher_rank=2),
        # tokens correlated across positions (docs/correlated_tokens.md)
        Problem(omega=0.3, token_correlation=0.4),
        Problem(omega=0.2, token_correlation=-0.5),
        Problem(L=3, positional_attention=L3_A, positional_gram=np.eye(3), token_correlation=0.3),
        Problem(L=2, rank=2, teacher_rank=1, token_correlation=0.25),
    ],
)
def test_gradient_hats_are_the_gradient_of_the_discretised_envelope(p):
    """V̂ = 2α ∂E[M]/∂q, θ̂ = −α ∂E[M]/∂θ, μ̂ = −α ∂E[M]/∂μ (every token), q̂ = −2α ∂E[M]/∂V by
    finite differences (step 1e-6: rounding of E[M] ~1e-16 / 1e-6 = 1e-10)."""
    alpha = 1.5
    r, rt = p.rank, p.teacher_rank
    mu = np.zeros((p.L, r))
    mu[0], mu[1] = 0.15, -0.15 if p.L == 2 else -0.1
    o = Overlaps(
        q=0.2 * np.eye(r) + 0.03 * (r > 1) * (np.ones((r, r)) - np.eye(r)),
        V=14.0 * np.eye(r),
        theta=0.1 * np.ones((r, rt)) / r,
        mu=mu,
    )
    rule = gauss_hermite(p.gaussian_dim, 3 if p.gaussian_dim > 4 else 8)
    ch = hat_update(o, alpha, rule, p)

    def EM(**kw):
        return hat_update(Overlaps(**{**o.__dict__, **kw}), alpha, rule, p).envelope

    eps = 1e-6
    for i, j in [(0, 0)] + ([(0, 1)] if r > 1 else []):
        d = np.zeros((r, r))
        d[i, j] = d[j, i] = eps
        fd_q = (EM(q=o.q + d) - EM(q=o.q - d)) / (2 * eps)
        fd_V = (EM(V=o.V + d) - EM(V=o.V - d)) / (2 * eps)
        k = 1.0 if i == j else 2.0
        np.testing.assert_allclose(ch.hats.V_hat[i, j] * k, 2 * alpha * fd_q, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(ch.hats.q_hat[i, j] * k, -2 * alpha * fd_V, rtol=1e-5, atol=1e-9)
    for i, k in np.ndindex(r, rt):
        d = np.zeros((r, rt))
        d[i, k] = eps
        np.testing.assert_allclose(
            ch.hats.theta_hat[i, k],
            -alpha * (EM(theta=o.theta + d) - EM(theta=o.theta - d)) / (2 * eps),
            rtol=1e-5,
            atol=1e-9,
        )
    for l in range(p.L):
        d = np.zeros_like(o.mu)
        d[l, 0] = eps
        np.testing.assert_allclose(
            ch.hats.mu_hat[l, 0], -alpha * (EM(mu=o.mu + d) - EM(mu=o.mu - d)) / (2 * eps), rtol=1e-5, atol=1e-9
        )


def test_fixed_point_is_stationary_point_of_discretised_potential(toy):
    rule = gauss_hermite(4, 8)
    fp = iterate(toy, 2.0, overlaps_from_scalars(toy, 0.9, 0.0, 15.0, 0.35), rule)
    assert fp.converged and fp.residual < 1e-8
    o, h = fp.overlaps, fp.hats

    def phi(ov):
        ch = hat_update(ov, 2.0, rule, toy)
        return potential(ov, h, ch.envelope, 2.0, toy)

    eps = 1e-6
    for name in ("q", "V", "theta"):
        d = np.zeros((1, 1))
        d[0, 0] = eps
        plus = Overlaps(**{**o.__dict__, name: getattr(o, name) + d})
        minus = Overlaps(**{**o.__dict__, name: getattr(o, name) - d})
        assert abs(phi(plus) - phi(minus)) / (2 * eps) < 1e-6


def test_invalid_and_unconverged_are_reported(toy):
    rule = gauss_hermite(4, 6)
    fp = iterate(toy, 2.0, overlaps_from_scalars(toy, 0.02, 0.0, 5.0, 0.0), rule)
    assert fp.status == "invalid" and "positive definite" in fp.message and np.isnan(fp.train_loss)
    fp = iterate(toy, 2.0, overlaps_from_scalars(toy, 0.9, 0.0, 15.0, 0.35), rule, SolverOptions(max_iter=3))
    assert fp.status == "not_converged" and np.isnan(fp.test_error) and "3 iterations" in fp.message


def _spec():
    return json.loads((DATA / "spec_reference.json").read_text())


@pytest.fixture(scope="module")
def catalogues():
    from dotattn.positional_semantic.catalogue import solve

    p = Problem(omega=0.3)
    return {a: solve(p, a, n_random=0) for a in (2.0, 1.25, 0.5)}


@pytest.mark.parametrize("ref", _spec()["fixed_points"], ids=lambda r: f"{r['branch']}-{r['alpha']}")
def test_regression_against_published_values(catalogues, ref):
    e = catalogues[ref["alpha"]].branch(ref["branch"])
    assert e is not None and e.converged
    for key, tol in [
        ("q", 0.03),
        ("theta", 0.03),
        ("m", 0.03),
        ("test_error", 0.03),
        ("train_loss", 0.03),
        ("V", 0.08),
    ]:
        got = {
            "q": e.q[0, 0],
            "theta": e.theta[0, 0],
            "m": e.m,
            "V": e.V[0, 0],
            "test_error": e.test_error,
            "train_loss": e.train_loss,
        }[key]
        if ref[key] == 0:
            assert abs(got) < 1e-9, key
        else:
            assert abs(got - ref[key]) <= tol * abs(ref[key]), (key, got, ref[key])


def test_selection_switches_between_alphas(catalogues):
    c2, c05 = catalogues[2.0], catalogues[0.5]
    assert c2.branch("semantic").train_loss < c2.branch("positional").train_loss
    assert c2.selected.branch == "semantic"
    assert c05.branch("semantic") is not None
    assert c05.branch("semantic").train_loss > c05.branch("positional").train_loss
    assert c05.selected.branch == "positional"


def test_linear_baseline_against_published_value(catalogues):
    ref = _spec()["linear_baseline_test_error"]
    assert abs(catalogues[2.0].linear_baseline_test_error - ref) <= 0.03 * ref


def test_linear_baseline_against_monte_carlo():
    from dotattn.positional_semantic.baseline import linear_baseline_test_error
    from dotattn.positional_semantic.loss import teacher_attention

    p = Problem(L=3, teacher_rank=2, positional_attention=[[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    rng = np.random.default_rng(0)
    T = teacher_attention(p.sigma * rng.normal(size=(400_000, 3, 2)), p)
    mc = 0.5 * p.sigma**2 * np.mean(np.sum((T - T.mean(0)) ** 2, axis=(1, 2)))
    assert abs(linear_baseline_test_error(p) - mc) < 0.01 * mc


def _stored():
    return json.loads((DATA / "reference_fixed_points.json").read_text())["fixed_points"]


@pytest.mark.parametrize("ref", _stored(), ids=lambda r: f"stored-{r['branch']}-{r['alpha']}")
def test_regression_against_stored_fixed_points(catalogues, ref):
    """The solver's own converged values (tests/data/make_reference.py): a change beyond the
    convergence tolerance means the numerics changed."""
    e = catalogues[ref["alpha"]].branch(ref["branch"])
    got = {
        "q": e.q[0, 0],
        "m": e.m,
        "theta": e.theta[0, 0],
        "V": e.V[0, 0],
        "train_loss": e.train_loss,
        "test_error": e.test_error,
    }
    for key, value in got.items():
        assert abs(value - ref[key]) <= 1e-6 * max(abs(ref[key]), 1e-3), (key, value, ref[key])


@pytest.fixture(scope="module")
def stein_catalogues():
    from dotattn.positional_semantic.catalogue import solve

    return {a: solve(Problem(omega=0.3), a, n_random=0, options=SolverOptions(hat_form="stein")) for a in (2.0, 1.25)}


@pytest.mark.parametrize(
    "ref", [r for r in _stored() if r["branch"] == "semantic"], ids=lambda r: f"stein-{r['alpha']}"
)
def test_stored_fixed_points_by_the_stein_hat_form(catalogues, stein_catalogues, ref):
    """An independent check of the stored semantic fixed points: the hats from Stein's lemma instead of
    the gradient form. Both are exact for a Gaussian average and differ only by the rule's error, so e_t
    and ε_g agree within the fixed point's quadrature-error estimate (|order 12 − order 6|). (On the
    positional branch, θ = 0, the two forms coincide to round-off: no independent check there.)"""
    e = stein_catalogues[ref["alpha"]].branch("semantic")
    qerr = catalogues[ref["alpha"]].branch("semantic").result.quadrature_error
    assert e is not None and e.converged and qerr["train_loss"] > 0 and qerr["test_error"] > 0
    for key in ("train_loss", "test_error"):
        assert abs(getattr(e, key) - ref[key]) <= qerr[key], (key, getattr(e, key), ref[key], qerr[key])


def test_a_sign_flipping_cycle_is_not_a_fixed_point():
    """An update that maps μ to −μ is a 2-cycle of the iteration; it must not count as converged."""
    from dotattn.positional_semantic.state_evolution import _residual

    o = overlaps_from_scalars(Problem(), 0.05, 0.25, 11.0, 0.0)
    flipped = Overlaps(q=o.q, V=o.V, theta=-o.theta, mu=-o.mu)
    assert flipped.canonical().mu[0, 0] == o.mu[0, 0]
    assert _residual(o, flipped) > 0.4


@pytest.mark.parametrize(
    "p, branch",
    [
        (Problem(L=2, rank=2, teacher_rank=1), "semantic"),
        (Problem(L=2, rank=2, teacher_rank=1), "positional"),
        (Problem(L=2, rank=1, teacher_rank=2), "semantic"),
    ],
)
def test_symmetric_subspaces_hold_exact_fixed_points_of_the_full_map(p, branch):
    """Pure branches are followed inside their invariant subspace (zero teacher columns, student
    directions that carry nothing). The restricted entries stay exactly zero, the free entries
    are a fixed point of the unrestricted map, and the unrestricted map moves the restricted
    entries only slightly (by near-ties of the global prox between mirror-image minima)."""
    from dotattn.positional_semantic.catalogue import initialisations
    from dotattn.positional_semantic.state_evolution import _Subspace

    init = dict(initialisations(p, 0))[branch]
    rule = gauss_hermite(p.gaussian_dim, 4)  # even: no node at the origin, where ±ĥ tie exactly
    fp = iterate(p, 2.0, init, rule)
    assert fp.converged
    o = fp.overlaps
    sub = _Subspace.of(init.canonical())  # as iterate() sets it up
    restricted = (
        sub.apply(
            Overlaps(q=np.ones_like(o.q), V=np.ones_like(o.V), theta=np.ones_like(o.theta), mu=np.ones_like(o.mu))
        ).vector()
        == 0.0
    )
    assert restricted.any() and np.all(o.vector()[restricted] == 0.0)
    full = overlap_update(hat_update(o, 2.0, rule, p).hats, p).vector()
    free = ~restricted
    assert np.max(np.abs(full[free] - o.vector()[free]) / np.maximum(1.0, np.abs(o.vector()[free]))) < 1e-6
    assert np.max(np.abs(full[restricted])) < 5e-3


# ----------------------------------------------------------------------------------------------
# degenerate prox minima (issue 14: the rank-2 student's positional fixed point at α = 2 never converged)
# ----------------------------------------------------------------------------------------------
RANK2 = dict(L=2, rank=2, teacher_rank=1, omega=0.3)
RANK2_POSITIONAL = Overlaps(
    q=[[0.0578, 0.0], [0.0, 0.0306]],
    V=[[26.57, 0.0], [0.0, 14.79]],
    theta=[[0.0], [0.0]],
    mu=[[0.0, 0.2253], [0.0, -0.2253]],
)  # near that fixed point


def test_hats_do_not_depend_on_which_degenerate_minimum_the_search_returns():
    """Reduced form. On the positional branch of the rank-2 student many nodes of the tensor rule
    have an exactly degenerate prox minimum (h → −P h diag(−1, 1)-type symmetries fix them); which
    minimiser the multi-start search returns there depends on the starts (and on rounding), and
    a map that used that one alone moved by ~1e-5 between equivalent searches: the iteration
    then cycled at its global checks. Counting every symmetric minimiser equally makes the hats a
    function of the state: two searches that both find the global minimum agree to rounding."""
    p = Problem(**RANK2)
    rule = gauss_hermite(6, 4)
    a = hat_update(RANK2_POSITIONAL, 2.0, rule, p, random_starts=3, symmetry=False)
    b = hat_update(RANK2_POSITIONAL, 2.0, rule, p, random_starts=8, symmetry=False)
    np.testing.assert_allclose(a.prox.value, b.prox.value, rtol=1e-12, atol=1e-15)  # same global minima
    for name in ("q_hat", "V_hat", "mu_hat"):
        x, y = getattr(a.hats, name), getattr(b.hats, name)
        assert np.max(np.abs(x - y)) <= 1e-8 * np.max(np.abs(y)), name
    assert a.prox.alts is not None  # the degenerate nodes exist
    # the local map from the global result reproduces it (the iteration's convergence test relies on it)
    loc = hat_update(RANK2_POSITIONAL, 2.0, rule, p, search="local", warm=b.prox.h, symmetry=False)
    for name in ("q_hat", "V_hat", "mu_hat"):
        x, y = getattr(loc.hats, name), getattr(b.hats, name)
        assert np.max(np.abs(x - y)) <= 1e-8 * np.max(np.abs(y)), name


@pytest.mark.parametrize(
    "order, coarse", [pytest.param(4, 3, id="reduced"), pytest.param(None, None, id="full", marks=pytest.mark.slow)]
)
def test_rank2_positional_fixed_point_converges_on_the_default_rule(order, coarse):
    """Full form: the positional fixed point of (L, r, r_t) = (2, 2, 1) at α = 2 on the default rule
    (Gauss-Hermite 6 after 4) converges within the default budget (it ran into 1000 iterations,
    last change 3.9e-6, before degenerate minima were averaged). Reduced (CI): the same solve on
    Gauss-Hermite 4 after 3 (4096 nodes instead of 46,656)."""
    from dotattn.positional_semantic.catalogue import QuadratureSpec, initialisations, solve

    p = Problem(**RANK2)
    init = dict(initialisations(p, 0))["positional"]
    quad = None if order is None else QuadratureSpec("gauss-hermite", order, coarse)
    e = solve(p, 2.0, n_random=0, inits=[("positional", init)], quadrature=quad).fixed_points[0]
    assert e.converged and e.branch == "positional", e.result.message
    assert e.result.iterations < 200 and e.result.residual < SolverOptions().tol


def test_rank2_uninformative_start_keeps_its_exchangeable_directions_and_converges():
    """The uninformative start of a rank-2 student (q, V ∝ I, θ = μ = 0) is invariant under swapping
    the two student directions; kept so, it converges. (Unconstrained, the iterate alternated
    between the gauge copies (q_11, q_22) and (q_22, q_11) of a slightly asymmetric state and ran
    into the iteration budget, last change 6e-4.)"""
    from dotattn.positional_semantic.catalogue import initialisations

    p = Problem(**RANK2)
    init = dict(initialisations(p, 0))["uninformative"]
    fp = iterate(p, 2.0, init, gauss_hermite(6, 3), SolverOptions(max_iter=200))
    assert fp.converged, fp.message
    assert fp.overlaps.q[0, 0] == fp.overlaps.q[1, 1] and fp.overlaps.V[0, 0] == fp.overlaps.V[1, 1]
    assert not np.any(fp.overlaps.theta) and not np.any(fp.overlaps.mu)


def test_a_start_that_fails_on_the_coarse_rule_is_solved_on_the_fine_rule(toy):
    """solve: a start whose coarse-rule run fails (here a 1-point rule, where q loses positive
    definiteness) is solved on the fine rule from the start itself, and says so."""
    from dotattn.positional_semantic.catalogue import QuadratureSpec, solve

    cat = solve(toy, 2.0, quadrature=QuadratureSpec("gauss-hermite", 6, 1), n_random=0)
    retried = [e for e in cat.fixed_points if "directly on the fine rule" in e.result.message]
    assert retried and all(e.converged for e in retried)
    assert {e.branch for e in cat.fixed_points} >= {"positional", "semantic"}
