"""The attention-paths theory with M outputs (docs/attention_paths.md §16): the kernel of the network with M
readouts, the extended-path kernels, gradient and Hessian by finite differences, the four limits (M = 1,
identical label columns, the GP limit and its factorisation over outputs, N → ∞), output rotations, and the
posterior of the weights (NUTS, the ``paths`` extra) against the exact collapsed posterior."""

import math

import numpy as np
import pytest
from conftest import reduced_and_full

from dotattn.core.validation import ParameterError
from dotattn.paths.network import (
    FactoredKernels,
    OutputKernels,
    attention,
    network_output,
    order_parameter,
    path_inputs,
    path_kernel_diagonal,
    path_kernels,
)
from dotattn.paths.theory import (
    PathsModel,
    _theta_objective,
    action,
    action_gradient,
    energy_hessian,
    gp_order_parameters,
    level_dims,
    minimise_action,
    predict,
    theta_from_levels,
    theta_hessian,
)

HEADS = (2, 2)


def _problem(seed=4, P=10, N0=9, heads=HEADS, M=3):
    """Random path inputs (with a shared part, so the paths are correlated) and M label columns."""
    rng = np.random.default_rng(seed)
    n = math.prod(heads)
    xi = rng.standard_normal((n, P, N0)) + 0.5 * rng.standard_normal((1, P, N0))
    Y = np.sign(xi[0, :, :M] + 0.3 * rng.standard_normal((P, M)))
    return xi, Y


def _random_levels(rng, heads, M):
    out = []
    for d in level_dims(heads, M):
        A = rng.standard_normal((d, d))
        out.append(A @ A.T / d + 0.5 * np.eye(d))
    return out


def test_kernel_of_the_network_with_M_outputs_is_c_sum_U_kron_C():
    """Exact: the M P outputs are linear in V0, so their covariance over V0 is sigma2 J J^T (J the Jacobian of
    the forward pass with a (M, N)); it must equal K[(m, mu), (m', nu)] = c sum U^{(pi m)(pi' m')} C_pipi'."""
    rng = np.random.default_rng(1)
    P, N0, T, N, M = 3, 5, 4, 6, 3
    x = rng.standard_normal((P, N0, T))
    omegas = [np.stack([attention(x, rng.standard_normal((N0, N0))) for _ in range(H)]) for H in HEADS]
    a = rng.standard_normal((M, N))
    values = [rng.standard_normal((H, N, N)) for H in HEADS]
    J = np.empty((M * P, N * N0))
    for k in range(N * N0):
        E = np.zeros(N * N0)
        E[k] = 1.0
        J[:, k] = network_output(x, omegas, E.reshape(N, N0), values, a).T.reshape(-1)  # rows (m, mu)
    xi = path_inputs(x, omegas)
    U = order_parameter(a, values)
    assert U.shape == (4 * M, 4 * M)
    K = OutputKernels(path_kernels(xi, xi), M).contract(U) / 4  # c = sigma2 / prod H = 1/4
    # rounding of sums of ~30 products of O(1) numbers
    assert np.allclose(J @ J.T, K, rtol=1e-12, atol=1e-12)
    # each output is the one-output network with that row of a as its readout
    V0 = rng.standard_normal((N, N0))
    assert np.array_equal(network_output(x, omegas, V0, values, a)[:, 1], network_output(x, omegas, V0, values, a[1]))


def test_output_kernels_blocks_equal_the_extended_kernels():
    """contract, adjoint and single blocks of OutputKernels (block by block on the base) equal the same
    operations on the formed extended kernels, dense and factored (round-off only: 1e-12 relative)."""
    rng = np.random.default_rng(2)
    xi, _ = _problem(P=7)
    xt = rng.standard_normal((4, 5, 9))
    M = 3
    for base in (path_kernels(xi, xt), FactoredKernels(xi, xt)):
        ok = OutputKernels(base, M)
        ext = OutputKernels(path_kernels(xi, xt), M).extended()
        U = rng.standard_normal((4 * M, 4 * M))
        B = rng.standard_normal((M * 7, M * 5))
        dense_k = np.tensordot(U, ext, axes=([0, 1], [0, 1]))
        dense_g = np.tensordot(ext, B, axes=([2, 3], [0, 1]))
        assert ok.shape == ext.shape == (12, 12, 21, 15)
        assert np.allclose(ok.contract(U), dense_k, rtol=1e-12, atol=1e-12)
        assert np.allclose(ok.adjoint(B), dense_g, rtol=1e-12, atol=1e-12)
        assert np.allclose(ok[5, 10], ext[5, 10], rtol=1e-12, atol=1e-12)
        if isinstance(base, FactoredKernels):
            fx = ok.extended()
            assert np.allclose(fx.contract(U), dense_k, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("heads,M", [((2, 2), 3), ((3,), 2), ((2, 1, 2), 2)])
def test_action_gradient_with_outputs_matches_finite_differences(heads, M):
    """dS/dU_k with M outputs against central differences of S along random symmetric directions
    (step 1e-6: truncation ~1e-12, round-off ~1e-10; tolerance 1e-6 relative, as for one output)."""
    rng = np.random.default_rng(5)
    xi, Y = _problem(heads=heads, M=M)
    C = path_kernels(xi, xi)
    model = PathsModel(N=7.0, temperature=0.05, sigma2=1.3, heads=heads, outputs=M)
    levels = _random_levels(rng, heads, M)
    grads = action_gradient(levels, C, Y, model)
    assert [g.shape[0] for g in grads] == level_dims(heads, M)
    for k in range(len(levels)):
        D = rng.standard_normal(levels[k].shape)
        D = D + D.T
        h = 1e-6
        up = [U + (h * D if i == k else 0) for i, U in enumerate(levels)]
        dn = [U - (h * D if i == k else 0) for i, U in enumerate(levels)]
        fd = (action(up, C, Y, model) - action(dn, C, Y, model)) / (2 * h)
        an = float(np.sum(grads[k] * D))
        assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (k, fd, an)
    # factored kernels: the same action and gradient (round-off)
    Cf = FactoredKernels(xi, xi)
    assert action(levels, Cf, Y, model) == pytest.approx(action(levels, C, Y, model), rel=1e-12)


def test_energy_and_theta_hessian_with_outputs_match_finite_differences():
    """The energy Hessian over the (n M)² entries of U, dense = factored (1e-10 relative, round-off), and the
    Hessian in θ against central differences of the analytic θ-gradient (step 1e-5; 1e-6 relative, as for one
    output)."""
    rng = np.random.default_rng(8)
    M = 2
    xi, Y = _problem(P=8, M=M)
    C = path_kernels(xi, xi)
    model = PathsModel(N=5.0, temperature=0.05, heads=HEADS, outputs=M)
    levels = _random_levels(rng, HEADS, M)
    Hd = energy_hessian(levels[0], C, Y, model)
    Hf = energy_hessian(levels[0], FactoredKernels(xi, xi), Y, model)
    assert Hd.shape == (8, 8, 8, 8)
    assert np.max(np.abs(Hd - Hf)) <= 1e-10 * np.max(np.abs(Hd))
    theta = theta_from_levels(levels)
    H = theta_hessian(theta, C, Y, model)
    Cp, yp = _prep(C, Y, model)
    h, fd = 1e-5, np.empty_like(H)
    for i in range(len(theta)):
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        fd[:, i] = (_theta_objective(tp, Cp, yp, model)[1] - _theta_objective(tm, Cp, yp, model)[1]) / (2 * h)
    assert np.max(np.abs(H - 0.5 * (fd + fd.T))) <= 1e-6 * np.max(np.abs(H))


def _prep(C, Y, model):
    from dotattn.paths.theory import _prepared

    return _prepared(C, Y, model)


# -- the limits ------------------------------------------------------------------------------------


def test_one_output_is_the_one_output_theory_exactly():
    """Limit 1: outputs = 1 with labels (P, 1) gives the very arrays of labels (P,), and OutputKernels with
    M = 1 is the base kernel."""
    xi, Y = _problem(M=1)
    C = path_kernels(xi, xi)
    model = PathsModel(N=5.0, temperature=0.02)
    a = minimise_action(C, Y[:, 0], model)
    b = minimise_action(C, Y, model)
    assert a.converged and all(np.array_equal(u, v) for u, v in zip(a.levels, b.levels, strict=True))
    assert a.action == b.action
    # einsum and tensordot sum in different orders: round-off only
    assert np.allclose(OutputKernels(C, 1).contract(a.U), np.tensordot(a.U, C, axes=([0, 1], [0, 1])), rtol=1e-13)
    assert model.to_dict() == {"N": 5.0, "temperature": 0.02, "sigma2": 1.0, "heads": [2, 2]}


@pytest.mark.parametrize("factored", [False, True])
def test_identical_label_columns_reduce_to_one_output(factored):
    """Limit 3 (docs §16): with Y = y 1ᵀ the minimiser is U_k = A_k ⊗ eeᵀ + B_k ⊗ (I − eeᵀ), e = 1/√M,
    A the one-output minimiser for labels √M y, B the one for zero labels, S_M = S_1(A) + (M − 1) S_1(B),
    and every output's predictor is the one-output predictor with U = A on y. Each minimiser is stationary
    to 1e-10 relative, which bounds the error of U by ~1e-8 here (tolerance 1e-7 relative)."""
    M, tol = 3, 1e-10
    xi, Y1 = _problem(M=1)
    y = Y1[:, 0]
    C = FactoredKernels(xi, xi) if factored else path_kernels(xi, xi)
    rng = np.random.default_rng(11)
    xt = rng.standard_normal((4, 6, xi.shape[2])) + 0.5 * rng.standard_normal((1, 6, xi.shape[2]))
    Cx, Cd = path_kernels(xt, xi), path_kernel_diagonal(xt)
    for N in (3.0, 30.0):
        mM = PathsModel(N=N, temperature=0.02, outputs=M)
        m1 = PathsModel(N=N, temperature=0.02)
        res = minimise_action(C, np.tile(y[:, None], (1, M)), mM, tol=tol)
        A = minimise_action(C, math.sqrt(M) * y, m1, tol=tol)
        B = minimise_action(C, 0 * y, m1, tol=tol)
        assert res.converged and A.converged and B.converged
        e = np.full((M, M), 1.0 / M)
        for U, a, b in zip(res.levels, A.levels, B.levels, strict=True):
            expected = np.kron(a, e) + np.kron(b, np.eye(M) - e)
            assert np.max(np.abs(U - expected)) <= 1e-7 * np.max(np.abs(expected))
        assert res.action == pytest.approx(A.action + (M - 1) * B.action, rel=1e-9)
        mean, var = predict(res.U, C, np.tile(y[:, None], (1, M)), Cx, Cd, mM)
        mean1, var1 = predict(A.U, C, y, Cx, Cd, m1)
        assert mean.shape == var.shape == (6, M)
        for m in range(M):
            assert np.allclose(mean[:, m], mean1, rtol=1e-6, atol=1e-8)
        # the posterior covariance over outputs is Σ_A ⊗ eeᵀ + Σ_B ⊗ (I − eeᵀ): each output's variance is
        # (v_A + (M − 1) v_B)/M with the one-output variances at U = A and U = B
        vA, vB = predict(A.U, C, y, Cx, Cd, m1)[1], predict(B.U, C, y, Cx, Cd, m1)[1]
        for m in range(M):
            assert np.allclose(var[:, m], (vA + (M - 1) * vB) / M, rtol=1e-6, atol=1e-8)


def test_gp_limit_factorises_over_outputs():
    """Limit 2: at the GP value U_1 = σ^{2(L+1)} I the kernel is I_M ⊗ K_GP, and the predictor of each output
    (mean and variance) is the one-output GP predictor trained on that column alone, for independent
    random columns (round-off: 1e-10)."""
    rng = np.random.default_rng(12)
    M = 3
    xi, _ = _problem(M=1)
    C = path_kernels(xi, xi)
    Y = rng.standard_normal((xi.shape[1], M))
    xt = rng.standard_normal((4, 6, xi.shape[2]))
    Cx, Cd = path_kernels(xt, xi), path_kernel_diagonal(xt)
    mM = PathsModel(N=10.0, temperature=0.1, sigma2=1.2, outputs=M)
    m1 = PathsModel(N=10.0, temperature=0.1, sigma2=1.2)
    gM, g1 = gp_order_parameters(mM), gp_order_parameters(m1)
    assert [g.shape[0] for g in gM] == [12, 6, 3] and np.allclose(gM[0], 1.2**3 * np.eye(12))
    K = OutputKernels(C, M).contract(gM[0])
    assert np.allclose(K, np.kron(np.eye(M), np.tensordot(g1[0], C, axes=([0, 1], [0, 1]))), atol=1e-12)
    mean, var = predict(gM[0], C, Y, Cx, Cd, mM)
    for m in range(M):
        m_1, v_1 = predict(g1[0], C, Y[:, m], Cx, Cd, m1)
        assert np.allclose(mean[:, m], m_1, rtol=1e-10, atol=1e-12)
        assert np.allclose(var[:, m], v_1, rtol=1e-10, atol=1e-12)


def test_wide_limit_with_outputs_is_the_gp_value():
    """Limit 4: N → ∞ at fixed P, every level tends to its GP value, the deviation shrinking like 1/N."""
    xi, Y = _problem(M=2)
    C = path_kernels(xi, xi)
    devs = []
    for N in (1e4, 1e6):
        model = PathsModel(N=N, sigma2=1.5, outputs=2)
        res = minimise_action(C, Y, model)
        assert res.converged
        gp = gp_order_parameters(model)
        devs.append(max(np.max(np.abs(U - G)) / np.max(np.abs(G)) for U, G in zip(res.levels, gp, strict=True)))
    assert devs[1] < 1e-3 and devs[1] < devs[0] / 50  # 1/N: 100 x smaller, 2x slack for the O(1/N²) terms


def test_rotating_the_outputs_rotates_the_order_parameters():
    """S is invariant under Y → Y Oᵀ, U_k → (I ⊗ O) U_k (I ⊗ O)ᵀ, so the minimisers are rotated copies
    (both stationary to 1e-10: 1e-7 relative) and the predictions rotate with the labels."""
    rng = np.random.default_rng(13)
    M = 2
    xi, Y = _problem(M=M)
    C = path_kernels(xi, xi)
    O = np.linalg.qr(rng.standard_normal((M, M)))[0]
    model = PathsModel(N=4.0, temperature=0.05, outputs=M)
    r = minimise_action(C, Y, model, tol=1e-10)
    s = minimise_action(C, Y @ O.T, model, tol=1e-10)
    assert r.converged and s.converged
    for U, V in zip(r.levels, s.levels, strict=True):
        R = np.kron(np.eye(U.shape[0] // M), O)
        assert np.max(np.abs(R @ U @ R.T - V)) <= 1e-7 * np.max(np.abs(U))


@pytest.mark.parametrize(
    "kw, word",
    [({"outputs": 0}, "outputs"), ({"outputs": 65}, "outputs"), ({"outputs": 40, "heads": (4, 4)}, "outputs")],
)
def test_model_refuses_bad_outputs(kw, word):
    with pytest.raises(ParameterError, match=word):
        PathsModel(N=10.0, **kw)


def test_labels_of_the_wrong_shape_are_refused():
    xi, Y = _problem(M=3)
    with pytest.raises(ParameterError, match="labels"):
        minimise_action(path_kernels(xi, xi), Y[:, :2], PathsModel(N=5.0, outputs=3))
    with pytest.raises(ParameterError, match="path kernels"):
        minimise_action(path_kernels(xi, xi), Y[:-1], PathsModel(N=5.0, outputs=3))


# -- posterior sampling (the ``paths`` extra) --------------------------------------------------------


def _synthetic_data(P=8, P_test=6, T=4, N0=5, M=3, seed=21):
    """A PathData of a random 2 x 2-head network on random inputs with M label columns (one-hot classes
    of a random linear rule), for the samplers."""
    from dotattn.paths.data import PathData

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((P + P_test, N0, T))
    omegas = [np.stack([attention(x, rng.standard_normal((N0, N0))) for _ in range(H)]) for H in HEADS]
    xi = path_inputs(x, omegas, "mean")
    cls = np.argmax(xi[0] @ rng.standard_normal((N0, M)), axis=1)
    Y = np.eye(M)[cls]
    tr, te = xi[:, :P], xi[:, P:]
    return PathData(
        head_names=(("a", "b"), ("c", "d")),
        path_keys=((0, 0), (0, 1), (1, 0), (1, 1)),
        path_names=("a>c", "a>d", "b>c", "b>d"),
        C_train=path_kernels(tr, tr),
        y_train=Y[:P],
        C_cross=path_kernels(te, tr),
        C_diag=path_kernel_diagonal(te),
        y_test=Y[P:],
    )


def test_collapsed_layout_and_prior_with_outputs():
    """The readout level of the collapsed chain is M × M (Bartlett of Wishart_M(N, σ²I/N)): the chain pushed
    to U_1 has the law of U = V_eff V_effᵀ/N with a (M, N) under the prior of the weights (mean and second
    moment of every entry within 5 combined standard errors, 4 000 draws each)."""
    jax = pytest.importorskip("jax")
    from dotattn.paths.collapsed import collapsed_layout, order_parameters_fn, prior_draw

    M, N = 2, 3
    layout = collapsed_layout(HEADS, N, M)
    # readout 2 x 2 (3 coordinates), layer 2: 4 rows, rank 3 (1 + 2 + 3 + 3), layer 1: 6 rows, rank 3
    assert [(lv.rows, lv.cols) for lv in layout.levels] == [(2, 2), (4, 3), (6, 3)]
    assert layout.n_params == 3 + 9 + 15
    rng = np.random.default_rng(3)
    levels = order_parameters_fn(layout, 1.0)  # float64 from here on
    to_U = jax.jit(jax.vmap(lambda z: levels(z)[0]))
    n = 4_000
    Uc = np.asarray(to_U(np.stack([prior_draw(layout, rng) for _ in range(n)])))
    Uw = np.stack(
        [
            order_parameter(rng.standard_normal((M, N)), [rng.standard_normal((H, N, N)) for H in HEADS])
            for _ in range(n)
        ]
    )
    assert Uc.shape == Uw.shape == (n, 8, 8)
    for stat in (lambda U: U, lambda U: U**2):
        a, b = stat(Uc), stat(Uw)
        se = np.sqrt(a.var(0) / n + b.var(0) / n) + 1e-12
        assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)


def test_weights_sampler_with_outputs_recovers_the_prior_when_the_likelihood_is_flat():
    """Reduced form of the N = 10 check below: at 𝒯 = 1e4 the likelihood is flat to 1e-3, so E[U] = I (12 × 12
    for 4 paths and M = 3, N = 3) within 5 Monte-Carlo standard errors (sd/√ESS), entry by entry."""
    pytest.importorskip("numpyro")
    from dotattn.paths.sampler import SamplerConfig, run_nuts

    data = _synthetic_data()
    model = PathsModel(N=3, temperature=1e4, outputs=3)
    res = run_nuts(data, model, SamplerConfig(chains=2, warmup=80, draws=100, seed=1))
    assert res.U.shape == (2, 100, 12, 12) and res.divergences == 0
    z = (res.U_mean - np.eye(12)) / res.U_mcse
    assert np.all(np.abs(z) < 5), z


@pytest.mark.slow
def test_weights_and_collapsed_posteriors_with_outputs_agree_at_N10():
    """N = 10, M = 3 outputs, 4 paths: NUTS over the weights (a of shape (3, 10), V; V⁰ integrated out) and
    NUTS on the exact collapsed posterior of the order parameters sample the same posterior, so the means of
    the 78 distinct entries of U_1 agree within 5 combined Monte-Carlo standard errors; the saddle point is
    the large-N approximation of both (its offset is O(1/N): only the trace of U_1 is compared, within 25 %).
    About 40 s."""
    pytest.importorskip("numpyro")
    from dotattn.paths.collapsed import run_collapsed
    from dotattn.paths.sampler import SamplerConfig, run_nuts

    data = _synthetic_data()
    model = PathsModel(N=10, temperature=0.1, outputs=3)
    config = SamplerConfig(chains=2, warmup=200, draws=300, seed=2)
    w = run_nuts(data, model, config)
    c = run_collapsed(data.C_train, data.y_train, model, config)
    assert w.divergences == 0 and c.divergences == 0 and w.rhat_max < 1.05 and c.rhat_max < 1.05
    i, j = np.triu_indices(12)
    se = np.sqrt(w.U_mcse**2 + c.U_mcse**2)[i, j]
    z = (w.U_mean - c.U_mean)[i, j] / se
    assert np.all(np.abs(z) < 5), z
    theory = minimise_action(data.C_train, data.y_train, model)
    assert theory.converged
    assert np.trace(theory.U) == pytest.approx(np.trace(c.U_mean), rel=0.25)


# -- the command ------------------------------------------------------------------------------------


@reduced_and_full("widths", ("10",), ("10,1000",))
def test_theory_command_with_two_outputs(tmp_path, widths):
    """`paths theory --outputs 2` on a small Markov task: U over 4 paths x 2 outputs, and at the GP value the
    argmax of the two one-hot outputs is the sign of the one-output GP predictor (their difference is the GP
    predictor of labels (1, 0) - (0, 1) = y, limit 2), so the GP accuracies of the two commands are equal; the
    folder verifies. Reduced: one width (the finite one, N = 10); full: also N = 1000."""
    from clitools import run

    task = ["paths", "theory", "--P", "40", "--P-test", "60", "--T", "8", "--N", widths, "--subsets", "all,good"]
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = run(*task, "--out", str(one), "--quiet", timeout=300)
    r2 = run(*task, "--outputs", "2", "--out", str(two), "--quiet", timeout=300)
    assert r1.returncode == 0 and r2.returncode == 0, (r1.stderr, r2.stderr)
    import json

    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    assert s2["outputs"] == 2 and s2["paths"][:2] == ["good:1", "good:2"] and len(s2["paths"]) == 8
    assert set(s2["per_N"]) == set(widths.split(","))
    for N in widths.split(","):
        e = s2["per_N"][N]
        assert e["status"] == "converged" and np.asarray(e["U"]).shape == (8, 8)
        assert 0 <= e["accuracy_theory"] <= 1
        assert e["accuracy_gp"] == s1["per_N"][N]["accuracy_gp"]
        assert e["accuracy_gp_good"] == s1["per_N"][N]["accuracy_gp_good"]
    assert "outputs" not in s1 and "outputs" not in s1["provenance"]["parameters"]
    v = run("verify", "--strict", str(two))
    assert v.returncode == 0, v.stderr


@pytest.mark.parametrize(
    "args, word", [(["--outputs", "3"], "outputs"), (["--outputs", "2", "--sampled", "x"], "--sampled")]
)
def test_theory_command_refuses_bad_outputs(tmp_path, args, word):
    from clitools import run

    out = tmp_path / "never"
    r = run("paths", "theory", "--P-test", "100", *args, "--out", str(out), timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and word in lines[0], r.stderr
    assert not out.exists()


def test_a_point_with_the_order_parameter_of_80_extended_paths_round_trips_through_csv(tmp_path):
    """16 paths x 5 outputs: one U cell of 6400 numbers (~150 000 characters, more than the csv module's default
    field limit of 131 072) is written and read back exactly."""
    from dotattn.core.io import read_csv, write_csv
    from dotattn.paths.analysis import POINT_COLUMNS, PathsPoint

    rng = np.random.default_rng(0)
    A = rng.standard_normal((80, 80))
    names = tuple(f"p{i}:{m + 1}" for i in range(16) for m in range(5))
    point = PathsPoint(
        subset="test",
        method="theory",
        N=10.0,
        temperature=0.1,
        accuracy=0.3,
        loss=0.2,
        variance=0.1,
        status="converged",
        stationarity=1e-7,
        iterations=40,
        seconds=1.0,
        paths=names,
        U=1e-7 * (A @ A.T),  # small entries: ~24 characters each
    )
    write_csv(tmp_path / "p.csv", [point.to_row()], POINT_COLUMNS)
    (row,) = read_csv(tmp_path / "p.csv")
    assert len(row["U"]) > 131_072
    back = PathsPoint.from_row(row)
    assert np.array_equal(back.U, point.U) and back.paths == names
