"""The replica theory of the untied student softmax(X Q Kᵀ Xᵀ/d) X (docs/untied.md).

Three independent checks, as for the tied theory: cases with a known answer (the tied subspace
k = h of the loss, the bound by the tied model at ridge 2λ, the balance QᵀQ = KᵀK of every
stationary point), finite differences (loss derivatives, hats, stationarity of the discretised
potential), and a simulation at finite d (the test error of an attention layer whose Q, K carry
the fixed point's overlaps, against the quadrature).
"""

import numpy as np
import pytest
from conftest import reduced_and_full

from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.catalogue import QuadratureSpec, initialisations, solve
from dotattn.positional_semantic.loss import attention_loss, loss_derivatives, teacher_attention, teacher_gradient
from dotattn.positional_semantic.loss_channel import hat_update
from dotattn.positional_semantic.loss_channel import test_error as quadrature_test_error
from dotattn.positional_semantic.overlaps import Overlaps, overlaps_from_scalars, untied_lift
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import gauss_hermite, sobol_qmc
from dotattn.positional_semantic.stability import rs_stability
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate, potential

UNTIED = Problem(student="untied")
L3 = dict(
    L=3,
    positional_attention=[[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]],
    positional_gram=[[1.0, 0.2, 0.0], [0.2, 1.0, 0.1], [0.0, 0.1, 0.5]],
)
SHAPES = [dict(), dict(rank=2), dict(teacher_rank=2), L3]


def _points(p: Problem, n: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(n, p.L, p.field_rank))
    h_star = 0.5 * rng.normal(size=(n, p.L, p.teacher_rank))
    return g, h_star, teacher_attention(h_star, p)


@pytest.mark.parametrize("shape", SHAPES)
def test_untied_loss_derivatives_by_finite_differences(shape):
    """∂ℓ/∂g and ∂²ℓ/∂g² (the L = 2 score path and the general path) against central differences of
    ℓ and of ∂ℓ/∂g (step 1e-6: truncation ~1e-12, rounding ~1e-10 relative), and ∂ℓ/∂h*."""
    p = Problem(student="untied", **shape)
    g, h_star, T = _points(p)
    d = loss_derivatives(g, T, p)
    gen = loss_derivatives(g, T, p, general=True)
    np.testing.assert_allclose(d.value, gen.value, atol=1e-14)
    np.testing.assert_allclose(d.grad, gen.grad, atol=1e-14)
    np.testing.assert_allclose(d.hess, gen.hess, atol=1e-13)
    n, eps = g[0].size, 1e-6
    for c in range(n):
        e = np.zeros(n)
        e[c] = eps
        e = e.reshape(g.shape[1:])
        fd = (attention_loss(g + e, T, p) - attention_loss(g - e, T, p)) / (2 * eps)
        np.testing.assert_allclose(fd, d.grad.reshape(len(g), n)[:, c], atol=1e-9)
        fd2 = (loss_derivatives(g + e, T, p).grad - loss_derivatives(g - e, T, p).grad).reshape(len(g), n) / (2 * eps)
        np.testing.assert_allclose(fd2, d.hess[:, :, c], atol=1e-8)
    tg = teacher_gradient(g, h_star, p)
    for idx in np.ndindex(h_star.shape[1:]):
        e = np.zeros(h_star.shape[1:])
        e[idx] = eps
        fd = (
            attention_loss(g, teacher_attention(h_star + e, p), p)
            - attention_loss(g, teacher_attention(h_star - e, p), p)
        ) / (2 * eps)
        np.testing.assert_allclose(fd, tg[(slice(None),) + idx], atol=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
def test_untied_loss_on_the_tied_subspace_is_the_tied_loss(shape):
    """With k = h (Q = K): ℓ_untied(h, h) = ℓ_tied(h); along the subspace (δ, δ) the gradient is
    ∂ℓ/∂h + ∂ℓ/∂k = ∇ℓ_tied and the Hessian form is δᵀ∇²ℓ_tied δ (exact identities: rounding only)."""
    p = Problem(student="untied", **shape)
    t = p.replace(student="tied")
    rng = np.random.default_rng(1)
    h = rng.normal(size=(6, p.L, p.rank))
    T = _points(p)[2]
    g = np.concatenate([h, h], axis=-1)
    du, dt = loss_derivatives(g, T, p), loss_derivatives(h, T, t)
    np.testing.assert_allclose(du.value, dt.value, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(du.grad[..., : p.rank] + du.grad[..., p.rank :], dt.grad, atol=1e-14)
    delta = rng.normal(size=h.shape)
    lift = np.concatenate([delta, delta], axis=-1).reshape(len(h), -1)
    form_u = np.einsum("ni,nij,nj->n", lift, du.hess, lift)
    form_t = np.einsum("ni,nij,nj->n", delta.reshape(len(h), -1), dt.hess, delta.reshape(len(h), -1))
    np.testing.assert_allclose(form_u, form_t, rtol=1e-11, atol=1e-14)


def _state(p: Problem) -> Overlaps:
    """An arbitrary admissible untied state (2r wide) with every block non-zero."""
    w = p.field_rank
    rng = np.random.default_rng(2)
    A = rng.normal(size=(w, w)) * 0.1
    return Overlaps(
        q=0.2 * np.eye(w) + 0.05 * (np.ones((w, w)) - np.eye(w)) + 0.1 * A @ A.T,
        V=np.diag(np.linspace(12.0, 16.0, w)) + 1.0 * (np.ones((w, w)) - np.eye(w)),
        theta=0.08 * np.ones((w, p.teacher_rank)) + 0.02 * rng.normal(size=(w, p.teacher_rank)),
        mu=0.15 * np.array([[1.0] * w, [-1.0] * w]) + 0.02 * rng.normal(size=(2, w)),
    )


@reduced_and_full("shape", (dict(),), (dict(teacher_rank=2),))
def test_untied_hats_are_the_gradient_of_the_discretised_envelope(shape):
    """V̂ = 2α ∂E[M]/∂q, q̂ = −2α ∂E[M]/∂V, θ̂ = −α ∂E[M]/∂θ, μ̂ = −α ∂E[M]/∂μ by central differences on
    a fixed rule (step 1e-6; the prox is converged to 1e-11, so the differences are good to ~1e-5 relative)."""
    p = Problem(student="untied", **shape)
    alpha, o = 1.5, _state(p)
    rule = gauss_hermite(p.gaussian_dim, 3)
    ch = hat_update(o, alpha, rule, p)

    def EM(**kw):
        return hat_update(Overlaps(**{**o.__dict__, **kw}), alpha, rule, p).envelope

    eps, w = 1e-6, p.field_rank
    for i, j in [(0, 0), (0, 1), (1, 1)]:
        d = np.zeros((w, w))
        d[i, j] = d[j, i] = eps
        k = 1.0 if i == j else 2.0
        np.testing.assert_allclose(
            ch.hats.V_hat[i, j] * k, 2 * alpha * (EM(q=o.q + d) - EM(q=o.q - d)) / (2 * eps), rtol=1e-5, atol=1e-9
        )
        np.testing.assert_allclose(
            ch.hats.q_hat[i, j] * k, -2 * alpha * (EM(V=o.V + d) - EM(V=o.V - d)) / (2 * eps), rtol=1e-5, atol=1e-9
        )
    for idx in np.ndindex(o.theta.shape):
        d = np.zeros_like(o.theta)
        d[idx] = eps
        np.testing.assert_allclose(
            ch.hats.theta_hat[idx],
            -alpha * (EM(theta=o.theta + d) - EM(theta=o.theta - d)) / (2 * eps),
            rtol=1e-5,
            atol=1e-9,
        )
    for idx in [(0, 0), (0, 1), (1, 1)]:
        d = np.zeros_like(o.mu)
        d[idx] = eps
        np.testing.assert_allclose(
            ch.hats.mu_hat[idx], -alpha * (EM(mu=o.mu + d) - EM(mu=o.mu - d)) / (2 * eps), rtol=1e-5, atol=1e-9
        )


RULE = gauss_hermite(UNTIED.gaussian_dim, 4)  # 4096 nodes: ~1 s per fixed point


@pytest.fixture(scope="module")
def untied_fixed_points():
    starts = dict(initialisations(UNTIED, 0))
    return {name: iterate(UNTIED, 2.0, starts[name], RULE) for name in ("positional", "semantic")}


def test_both_branches_converge_and_are_labelled(untied_fixed_points):
    pos, sem = untied_fixed_points["positional"], untied_fixed_points["semantic"]
    assert pos.converged and sem.converged
    assert np.all(pos.overlaps.theta == 0) and np.all(np.abs(pos.overlaps.mu) > 0.1)
    assert np.all(sem.overlaps.mu == 0) and np.all(sem.overlaps.theta > 0.05)


def test_fixed_points_are_balanced(untied_fixed_points):
    """Every stationary point of Σ loss(Q Kᵀ) + (λ/2)(‖Q‖² + ‖K‖²) has λ(QᵀQ − KᵀK) = KᵀGᵀQ − QᵀGK
    antisymmetric and symmetric, so QᵀQ = KᵀK: q_QQ = q_KK. The theory is not told this; it holds at its
    fixed points to the iteration's tolerance (1e-8 relative on the overlaps; measured |q_QQ − q_KK|/q_QQ
    between 3e-11 and 1.1e-7 on all three branches at α = 1, 2, 3 on 4 and 6 points per axis), while a
    state off balance differs at O(1) (the lifted starts differ from their fixed points by ~1)."""
    for fp in untied_fixed_points.values():
        q = fp.overlaps.q
        assert abs(q[0, 0] - q[1, 1]) <= 1e-6 * q[0, 0], q
        assert abs(q[0, 1]) > 0.5 * q[0, 0]  # query and key are strongly correlated, not identical


def test_fixed_point_is_a_stationary_point_of_the_discretised_potential(untied_fixed_points):
    """∂Φ/∂(q, V, θ, μ) = 0 at the fixed point (hats held there), by central differences (step 1e-6)."""
    fp = untied_fixed_points["semantic"]
    o, h = fp.overlaps, fp.hats

    def phi(ov):
        return potential(ov, h, hat_update(ov, 2.0, RULE, UNTIED).envelope, 2.0, UNTIED)

    eps = 1e-6
    for name, idx in [("q", (0, 0)), ("q", (0, 1)), ("V", (1, 1)), ("V", (0, 1)), ("theta", (1, 0))]:
        d = np.zeros_like(getattr(o, name))
        d[idx] = eps
        if name in ("q", "V"):
            d = np.maximum(d, d.T)
        plus = Overlaps(**{**o.__dict__, name: getattr(o, name) + d})
        minus = Overlaps(**{**o.__dict__, name: getattr(o, name) - d})
        assert abs(phi(plus) - phi(minus)) / (2 * eps) < 1e-6, (name, idx)


def test_untied_training_loss_is_at_most_the_tied_one_at_twice_the_ridge(untied_fixed_points):
    """Q = K turns the untied risk into the tied one at ridge 2λ, a subset of the untied weights: the untied
    global minimum e_t cannot exceed it. Both on the same 4-point-per-axis rule family (tied: 8 points per
    axis in 4 dimensions, the same 4096 nodes); their quadrature errors (~1e-5 in e_t) are far below the
    margins measured (2.6e-4 positional, 4.7e-5 semantic)."""
    tied = Problem(ridge=2 * UNTIED.ridge)
    rule = gauss_hermite(tied.gaussian_dim, 8)
    t = {name: iterate(tied, 2.0, init, rule) for name, init in initialisations(tied, 0)[:2]}
    assert all(fp.converged for fp in t.values())
    best_untied = min(fp.train_loss for fp in untied_fixed_points.values())
    best_tied = min(fp.train_loss for fp in t.values())
    assert best_untied < best_tied
    for name in ("positional", "semantic"):  # branch by branch too (same informed starts)
        assert untied_fixed_points[name].train_loss < t[name].train_loss


def _simulated_test_error(o: Overlaps, p: Problem, d: int, n: int, seed: int) -> tuple[float, float]:
    """‖ŷ − y‖²/(2d) of softmax(X Q Kᵀ Xᵀ/d) X against the teacher on n fresh samples of the toy model at
    dimension d, with [Q K] built to carry exactly the overlaps o (μ along p₁ = 1/√d, θ along Q*, the rest
    in a random orthogonal complement); returns (mean, standard error)."""
    rng = np.random.default_rng(seed)
    s2, r = p.sigma**2, p.rank
    u = np.ones(d) / np.sqrt(d)  # p_1 = -p_2 = u
    basis, _ = np.linalg.qr(np.column_stack([u, rng.normal(size=(d, 2 * r + 1))]))
    v, rest = basis[:, 1], basis[:, 2:]
    m, b = o.mu[0], o.theta[:, 0] / s2
    R = np.linalg.cholesky(o.q / s2 - np.outer(m, m) - np.outer(b, b)).T  # (2r, 2r): RᵀR
    W = np.sqrt(d) * (np.outer(u, m) + np.outer(v, b) + rest @ R)
    Q, K, Q_star = W[:, :r], W[:, r:], np.sqrt(d) * v[:, None]
    P = np.stack([u, -u])
    from dotattn.positional_semantic.loss import softmax_rows

    err = []
    for start in range(0, n, 2000):  # batches keep the token arrays small
        Z = np.sqrt(s2) * rng.normal(size=(min(2000, n - start), 2, d))
        X = P[None] + Z
        S = softmax_rows((X @ Q) @ np.swapaxes(X @ K, 1, 2) / d)
        T = (1 - p.omega) * softmax_rows((Z @ Q_star) @ np.swapaxes(Z @ Q_star, 1, 2) / d) + p.omega * p.A
        err.append(np.sum((S @ X - T @ Z) ** 2, axis=(1, 2)) / (2 * d))
    err = np.concatenate(err)
    return float(err.mean()), float(err.std(ddof=1) / np.sqrt(n))


@reduced_and_full("d, n", (1000, 20_000), (4000, 200_000))
def test_simulated_test_error_at_the_fixed_points(untied_fixed_points, d, n):
    """An untied attention layer at finite d whose Q, K have the fixed point's overlaps has the test error
    ε_g the theory computes by quadrature: the fields are then exactly Gaussian with the theory's law,
    and what remains is X Xᵀ/d → σ² I (finite-d corrections). Reference: ε_g at these overlaps on the
    8-point rule (262144 nodes, no prox; it moves by < 1e-6 from 8 to 10 points). Measured with n = 20000:
    d = 200 is +3.6 ± 1.2 % (positional) and +1.6 ± 1.0 % (semantic) high, d = 1000 within one standard
    error; tolerance four Monte Carlo standard errors plus 1 % for the finite-d correction at d >= 1000."""
    reference = gauss_hermite(UNTIED.gaussian_dim, 8)
    for name, fp in untied_fixed_points.items():
        mean, se = _simulated_test_error(fp.overlaps, UNTIED, d, n, seed=3)
        eps_g, _ = quadrature_test_error(fp.overlaps, reference, UNTIED)
        assert abs(mean - eps_g) <= 4 * se + 0.01 * eps_g, (name, mean, se, eps_g)


def test_solve_returns_untied_fixed_points():
    cat = solve(UNTIED, 2.0, quadrature=QuadratureSpec("gauss-hermite", 3, None), n_random=0, stability=False)
    pos, sem = cat.branch("positional"), cat.branch("semantic")
    assert pos is not None and sem is not None and cat.selected is not None
    assert cat.selected.train_loss == min(e.train_loss for e in cat.fixed_points if e.converged)
    assert pos.q.shape == (2, 2) and pos.mu.shape == (2, 2)
    assert "student" in cat.to_dict()["params"]


def test_rs_stability_of_untied_fixed_points(untied_fixed_points):
    """The replicon acts on 2r x 2r matrices (here 2 x 2, a 4 x 4 operator); on a small QMC rule
    (2^9 points x 4 scramblings) it is computed with its standard error, and the mirror-jump weight too."""
    rule = sobol_qmc(UNTIED.gaussian_dim, 9, 4)
    for fp in untied_fixed_points.values():
        st = rs_stability(fp.overlaps, 2.0, UNTIED, rule=rule)
        assert st.status == "computed" and np.isfinite(st.replicon) and st.replicon_error > 0
        assert 0.0 <= st.jump_weight <= 1.0


def test_lifted_starts_are_admissible_and_keep_the_teacher_residual():
    tied = Problem()
    for name, o in initialisations(tied, 4, seed=1):
        w = untied_lift(o)
        res_t = tied.rho - o.theta.T @ np.linalg.solve(o.q, o.theta)
        res_u = tied.rho - w.theta.T @ np.linalg.solve(w.q, w.theta)
        np.testing.assert_allclose(res_u, res_t, rtol=1e-12, err_msg=name)


def test_untied_refusals():
    with pytest.raises(ParameterError, match="hat_form stein"):
        SolverOptions(hat_form="stein").check(UNTIED)
    from dotattn.positional_semantic.rsb import solve_rsb

    rule = gauss_hermite(UNTIED.gaussian_dim, 3)
    fp = iterate(UNTIED, 2.0, untied_lift(overlaps_from_scalars(Problem(), 0.9, 0.0, 15.0, 0.35)), rule)
    with pytest.raises(ParameterError, match="student"):
        solve_rsb(UNTIED, 2.0, fp)


@pytest.mark.parametrize("V", [[[0.5, 0.1], [0.1, 0.7]], [[14.0, -1.5], [-1.5, 18.0]], [[40.0, 10.0], [10.0, 30.0]]])
def test_compiled_untied_newton_is_the_vectorised_newton(V):
    """The compiled L = 2, r = 1 untied kernel runs the vectorised Newton's steps node by node: same
    minimisers and values to rounding (1e-12 on ĥ, 1e-15 on the values, as for the tied kernel; its
    Jacobi eigen-solve of indefinite Hessians and libm's exponential differ from LAPACK's and numpy's
    in the last bits) and the same iteration count. Starts far from the minimum exercise the
    indefinite-Hessian solve and the backtracking."""
    from dotattn.positional_semantic import compiled
    from dotattn.positional_semantic import prox as P

    if not compiled.AVAILABLE:
        pytest.skip("numba is not installed (pip install '.[fast]')")
    rng = np.random.default_rng(3)
    M = 3000
    centre = rng.normal(scale=1.0, size=(M, 2, 2))
    target = teacher_attention(rng.normal(scale=UNTIED.sigma, size=(M, 2, 1)), UNTIED)
    h0 = centre + rng.normal(scale=2.0, size=(M, 2, 2))
    V_inv = np.linalg.inv(np.array(V))
    h_np, v_np, it_np = P._newton(h0, centre, target, V_inv, P.AttentionPointLoss(UNTIED), 100, 1e-11)
    h_nb, v_nb, it_nb = compiled.newton_untied_pair(h0, centre, target, V_inv, UNTIED.sigma**2, 100, 1e-11)
    assert np.max(np.abs(h_nb - h_np)) <= 1e-12 and np.max(np.abs(v_nb - v_np)) <= 1e-15
    assert it_nb == it_np


@pytest.mark.parametrize(
    "args, word",
    [
        (["--student", "shared"], "student must be one of tied, untied"),
        (["--student", "untied", "--rsb", "1"], "student"),
    ],
)
def test_cli_refuses_bad_untied_options_in_one_line(args, word, tmp_path):
    from clitools import run

    res = run("solve", "--alpha", "2", *args)
    assert res.returncode == 2 and word in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_phase_diagram_of_the_untied_student(tmp_path):
    """``phase-diagram --student untied``: one ω column on a coarse rule finds the positional -> semantic
    crossing between its grid points and writes a folder that verifies as an untied study."""
    from clitools import run

    from dotattn.core.integrity import read_verified_json
    from dotattn.positional_semantic.output import read_phase_summaries

    out = tmp_path / "pd"
    res = run(
        "phase-diagram",
        "--student",
        "untied",
        "--omega",
        "0.2",
        "--alpha",
        "1.2,1.6,2.0",
        "--quad-order",
        "4",
        "--coarse-order",
        "0",
        "--no-refine",
        "--workers",
        "1",
        "--quiet",
        "--out",
        str(out),
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert read_verified_json(out / "summary.json")["parameters"]["problem"]["student"] == "untied"
    (summary,) = read_phase_summaries(out)
    assert summary.alpha_c is not None and 1.2 < summary.alpha_c < 2.0
