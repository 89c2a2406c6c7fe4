"""Attention paths (dotattn.paths): the Markov task generator, path inputs and kernels against the
network itself, the action's gradient, its limits (GP, H = L = 1 closed form) and the saddle point."""

import math

import numpy as np
import pytest

from dotattn.core.rows import read_matrix
from dotattn.core.validation import ParameterError
from dotattn.paths.analysis import PathsPoint, evaluate, head_scores, prune_head
from dotattn.paths.data import PathData, markov_path_data, subset_heads
from dotattn.paths.network import (
    FactoredKernels,
    attention,
    effective_weights,
    network_output,
    order_parameter,
    path_inputs,
    path_kernels,
    path_labels,
)
from dotattn.paths.task import MarkovTask, markov_heads, markov_sequences
from dotattn.paths.theory import (
    PathsModel,
    TheoryResult,
    _theta_objective,
    action,
    action_gradient,
    energy_hessian,
    gp_order_parameters,
    level_dims,
    minimise_action,
    saddle_point_residual,
    scalar_renormalisation,
    theta_from_levels,
    theta_hessian,
)

# -- the task ---------------------------------------------------------------------------------------


def test_markov_shapes_labels_and_layout():
    task = MarkovTask(P=20, P_test=10)
    x, y, states = markov_sequences(task, "train")
    assert task.N0 == 231 and x.shape == (20, 231, 31) and states.shape == (20, 30)
    assert np.all(y[:10] == 1) and np.all(y[10:] == -1)
    assert np.all(x[:, :200, 0] == 0)  # the BOS token carries no feature
    assert np.array_equal(x[0, 200:, :], np.eye(31))  # one-hot positions, BOS = position 0
    assert markov_sequences(task, "test")[0].shape == (10, 231, 31)


def test_markov_stay_probabilities_by_counting():
    """Counted stay frequencies within 5 binomial standard errors of 0.7 / 0.3; first state fair."""
    task = MarkovTask(P=4000, P_test=2, width=2)
    _, y, s = markov_sequences(task, "train")
    stays = s[:, 1:] == s[:, :-1]
    for label, p in ((1, 0.7), (-1, 0.3)):
        freq = stays[y == label].mean()
        n = stays[y == label].size
        assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / n), (label, freq)
    assert abs(np.mean(s[:, 0] == 1) - 0.5) < 5 * math.sqrt(0.25 / 4000)


def test_markov_noise_components_and_seed():
    """Noise variance along v+ + v-, along v+ - v- and per out-of-plane direction: 1, 1, sigma_perp^2."""
    task = MarkovTask(P=400, P_test=2, noise_perp=5.0)
    x, _, s = markov_sequences(task, "train")
    vp, vm = task.directions()
    clean = np.where(s[:, None, :] > 0, vp[None, :, None], vm[None, :, None])
    noise = x[:, :200, 1:] - clean
    e1, e2 = (vp + vm) / np.linalg.norm(vp + vm), (vp - vm) / np.linalg.norm(vp - vm)
    c1, c2 = np.einsum("i,pit->pt", e1, noise), np.einsum("i,pit->pt", e2, noise)
    rest = noise - e1[None, :, None] * c1[:, None] - e2[None, :, None] * c2[:, None]
    n = c1.size  # 12000 draws: relative SE of a variance sqrt(2/n) ~ 1.3 %
    assert abs(np.var(c1) - 1) < 5 * math.sqrt(2 / n) and abs(np.var(c2) - 1) < 5 * math.sqrt(2 / n)
    assert abs(np.mean(rest**2) * 200 / 198 - 25) < 25 * 5 * math.sqrt(2 / (n * 198))
    again = markov_sequences(MarkovTask(P=400, P_test=2, noise_perp=5.0), "train")[0]
    other = markov_sequences(MarkovTask(P=400, P_test=2, noise_perp=5.0, seed=1), "train")[0]
    assert np.array_equal(x, again) and not np.allclose(x, other)


def test_good_head_attends_previous_same_state_token_else_bos():
    task = MarkovTask(P=40, P_test=2, noise_sum=0, noise_diff=0, noise_perp=0)
    x, _, s = markov_sequences(task, "train")
    (good, W), _ = markov_heads(task)[0]
    om = attention(x, W)
    for t in range(2, 31):  # query token t (1-based state index t-1), previous token t-1
        same = s[:, t - 1] == s[:, t - 2]
        # score 20 for the same-state previous key; else BOS (15) against e^10 per other same-state key
        assert np.all(om[same, t - 1, t] > 0.9)
        assert np.all(om[~same, :, t].argmax(axis=1) == 0) and np.all(om[~same, 0, t] > 0.8)
    assert [n for n, _ in markov_heads(task)[1]] == ["uniform", "random"]
    assert len(markov_heads(MarkovTask(variant="2paths"))[1]) == 1


@pytest.mark.parametrize(
    "field, value",
    [
        ("T", 1),
        ("P", 3),
        ("P", 0),
        ("stay_plus", 1.5),
        ("noise_perp", -1),
        ("noise_perp", float("nan")),
        ("variant", "3paths"),
        ("width", 7),
        ("beta", float("inf")),
        ("seed", -1),
    ],
)
def test_markov_task_refuses_bad_parameters(field, value):
    with pytest.raises(ParameterError, match=field.split("_")[0]):
        MarkovTask(**{field: value})


# -- the network and its kernels -----------------------------------------------------------------


def _random_net(rng, P=3, N0=5, T=4, heads=(2, 2)):
    x = rng.standard_normal((P, N0, T))
    omegas = [np.stack([attention(x, rng.standard_normal((N0, N0))) for _ in range(H)]) for H in heads]
    return x, omegas


@pytest.mark.parametrize("readout", ["last", "mean"])
def test_kernel_of_the_network_given_U_is_c_sum_U_C(readout):
    """Exact check: f is linear in V0, so Cov_{V0}(f(x), f(x')) = sigma2 J J^T with J the Jacobian of the
    forward pass in V0; it must equal K = c sum U C with U from the effective weights and C from xi."""
    rng = np.random.default_rng(1)
    x, omegas = _random_net(rng)
    N, N0, heads = 6, x.shape[1], (2, 2)
    a = rng.standard_normal(N)
    values = [rng.standard_normal((H, N, N)) for H in heads]
    J = np.empty((x.shape[0], N * N0))
    for k in range(N * N0):
        E = np.zeros(N * N0)
        E[k] = 1.0
        J[:, k] = network_output(x, omegas, E.reshape(N, N0), values, a, readout)
    xi = path_inputs(x, omegas, readout)
    U = order_parameter(a, values)
    K = np.tensordot(U, path_kernels(xi, xi), axes=([0, 1], [0, 1])) / 4  # c = sigma2 / prod H = 1/4
    assert np.allclose(J @ J.T, K, rtol=1e-12, atol=1e-12)


def test_gp_kernel_by_monte_carlo_over_all_weights():
    """E[f(x) f(x')] over the prior = (1/prod H) sum_pi C_pipi (U -> I at any N): Monte Carlo over all
    weights, 4000 draws, within 5 standard errors entry by entry."""
    rng = np.random.default_rng(2)
    x, omegas = _random_net(rng)
    N, N0, heads = 8, x.shape[1], (2, 2)
    draws = 4000
    f = np.empty((draws, x.shape[0]))
    for d in range(draws):
        f[d] = network_output(
            x,
            omegas,
            rng.standard_normal((N, N0)),
            [rng.standard_normal((H, N, N)) for H in heads],
            rng.standard_normal(N),
        )
    prods = f[:, :, None] * f[:, None, :]
    xi = path_inputs(x, omegas)
    C = path_kernels(xi, xi)
    K = sum(C[p, p] for p in range(4)) / 4
    se = prods.std(axis=0) / np.sqrt(draws)
    assert np.all(np.abs(prods.mean(axis=0) - K) < 5 * se), (prods.mean(axis=0), K, se)


def test_effective_weights_order_and_labels():
    rng = np.random.default_rng(3)
    N = 4
    a = rng.standard_normal(N)
    V1, V2 = rng.standard_normal((2, N, N)), rng.standard_normal((3, N, N))
    v = effective_weights(a, [V1, V2])  # 2 x 3 paths, h_1 most significant
    assert np.allclose(v[1 * 3 + 2], a @ V2[2] @ V1[1] / N)
    assert path_labels([("g", "r"), ("u", "r", "s")])[5] == "r>s"


# -- the theory -----------------------------------------------------------------------------------


def _random_problem(seed=4, P=12, N0=9, heads=(2, 2)):
    rng = np.random.default_rng(seed)
    n = math.prod(heads)
    xi = rng.standard_normal((n, P, N0)) + 0.5 * rng.standard_normal((1, P, N0))
    C = path_kernels(xi, xi)
    y = np.sign(xi[0, :, 0] + 0.3 * rng.standard_normal(P))
    return C, y


def _random_levels(rng, heads):
    out = []
    for d in level_dims(heads):
        A = rng.standard_normal((d, d))
        out.append(A @ A.T / d + 0.5 * np.eye(d))
    return out


@pytest.mark.parametrize("heads", [(2, 2), (3,), (2, 1, 2)])
def test_action_gradient_matches_finite_differences(heads):
    """dS/dU_k against central differences of S along random symmetric directions (relative 1e-6)."""
    rng = np.random.default_rng(5)
    C, y = _random_problem(heads=heads)
    model = PathsModel(N=7.0, temperature=0.05, sigma2=1.3, heads=heads)
    levels = _random_levels(rng, heads)
    grads = action_gradient(levels, C, y, model)
    for k in range(len(levels)):
        D = rng.standard_normal(levels[k].shape)
        D = D + D.T
        h = 1e-6
        up = [U + (h * D if i == k else 0) for i, U in enumerate(levels)]
        dn = [U - (h * D if i == k else 0) for i, U in enumerate(levels)]
        fd = (action(up, C, y, model) - action(dn, C, y, model)) / (2 * h)
        an = float(np.sum(grads[k] * D))
        assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (k, fd, an)


def test_energy_hessian_factored_dense_and_finite_differences():
    """The analytic ∂²E/∂U² (docs §8): the factored path (n N0)² route equals the dense one (round-off,
    1e-10 relative), and both equal central differences of the analytic gradient (step 1e-6: 1e-6 relative)."""
    rng = np.random.default_rng(8)
    heads = (2, 2)
    n, P, N0 = 4, 12, 9
    xi = rng.standard_normal((n, P, N0)) + 0.5 * rng.standard_normal((1, P, N0))
    y = np.sign(xi[0, :, 0])
    model = PathsModel(N=7.0, temperature=0.05, heads=heads)
    U = _random_levels(rng, heads)[0]
    Hd = energy_hessian(U, path_kernels(xi, xi), y, model)
    Hf = energy_hessian(U, FactoredKernels(xi, xi), y, model)
    scale = np.max(np.abs(Hd))
    assert np.max(np.abs(Hd - Hf)) <= 1e-10 * scale
    from dotattn.paths.theory import _energy

    C, h = path_kernels(xi, xi), 1e-6
    for a, b in ((0, 0), (1, 3), (2, 1)):
        E = np.zeros((n, n))
        E[a, b] = E[b, a] = 1.0  # K is symmetric only for symmetric U
        fd = (_energy(U + h * E, C, y, model)[1] - _energy(U - h * E, C, y, model)[1]) / (2 * h)
        col = np.einsum("abcd,cd->ab", Hd, E)  # _energy returns the symmetrised gradient
        an = 0.5 * (col + col.T)
        assert np.max(np.abs(fd - an)) <= 1e-6 * scale, (a, b)


@pytest.mark.parametrize("heads", [(2, 2), (2, 1, 2)])
def test_theta_hessian_matches_finite_differences_of_the_gradient(heads):
    """∇²S in θ (analytic energy part, differenced entropy part) against central differences of the
    analytic θ-gradient (step 1e-5: truncation ~1e-10, round-off ~1e-11; tolerance 1e-6 relative)."""
    rng = np.random.default_rng(9)
    C, y = _random_problem(heads=heads)
    model = PathsModel(N=5.0, temperature=0.05, heads=heads)
    theta = theta_from_levels(_random_levels(rng, heads))
    H = theta_hessian(theta, C, y, model)
    h, fd = 1e-5, np.empty_like(H)
    for i in range(len(theta)):
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        fd[:, i] = (_theta_objective(tp, C, y, model)[1] - _theta_objective(tm, C, y, model)[1]) / (2 * h)
    assert np.max(np.abs(H - 0.5 * (fd + fd.T))) <= 1e-6 * np.max(np.abs(H))


def test_minimiser_converges_and_satisfies_the_saddle_point_equation():
    C, y = _random_problem()
    model = PathsModel(N=5.0, temperature=0.02)
    res = minimise_action(C, y, model)
    assert res.converged and res.stationarity <= 1e-8, res
    assert saddle_point_residual(res.levels[0], res.levels[1], C, y, model) < 1e-7
    # U is a local minimum of S: random positive-definite perturbations raise it
    rng = np.random.default_rng(6)
    for _ in range(5):
        pert = [U + 1e-3 * (lambda A: A @ A.T)(rng.standard_normal(U.shape)) for U in res.levels]
        assert action(pert, C, y, model) > res.action
    back = TheoryResult.from_row(res.to_row())
    assert np.allclose(back.U, res.U) and back.status == res.status


def test_single_head_single_layer_is_the_scalar_kernel_renormalisation():
    """H = L = 1: the two-level Cholesky/L-BFGS minimiser equals the closed form U = u^2 of the 1-D
    equation in the eigenbasis of C (Brent), and the readout level is U_a = sqrt(U)."""
    C, y = _random_problem(heads=(1,), P=15)
    for N, T, s2 in ((3.0, 0.01, 1.0), (20.0, 0.1, 0.7), (1e3, 0.05, 1.0)):
        model = PathsModel(N=N, temperature=T, sigma2=s2, heads=(1,))
        res = minimise_action(C, y, model)
        ref = scalar_renormalisation(C[0, 0], y, N, T, s2)
        assert res.converged
        assert res.U[0, 0] == pytest.approx(ref, rel=1e-7)
        assert res.levels[1][0, 0] == pytest.approx(math.sqrt(ref), rel=1e-7)


def test_wide_limit_is_the_gp_value():
    """N -> infinity (alpha -> 0): U_k -> sigma^(2(L+2-k)) I, with a deviation shrinking like 1/N."""
    C, y = _random_problem()
    devs = []
    for N in (1e4, 1e6):
        model = PathsModel(N=N, sigma2=1.5)
        res = minimise_action(C, y, model)
        gp = gp_order_parameters(model)
        devs.append(max(np.max(np.abs(U - G)) / np.max(np.abs(G)) for U, G in zip(res.levels, gp, strict=True)))
    assert devs[1] < 1e-3 and devs[1] < devs[0] / 50  # 1/N: 100 x smaller, allow 2x slack
    assert np.allclose(gp_order_parameters(PathsModel(N=1, sigma2=2.0))[0], 8 * np.eye(4))


def test_gp_point_has_zero_entropy():
    C, y = _random_problem()
    model = PathsModel(N=1e12)
    S = action(gp_order_parameters(model), C, y, model)
    assert 0 < S < 1e-9  # only the energy / N is left


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"N": 0}, "N"),
        ({"N": float("nan")}, "N"),
        ({"N": 1e13}, "N"),
        ({"N": 10, "temperature": 0}, "temperature"),
        ({"N": 10, "sigma2": -1}, "sigma2"),
        ({"N": 10, "heads": ()}, "L"),
        ({"N": 10, "heads": (0, 2)}, "H"),
        ({"N": 10, "heads": (8, 8, 8)}, "paths"),
    ],
)
def test_model_refuses_bad_parameters(kw, word):
    with pytest.raises(ParameterError, match=word):
        PathsModel(**kw)


# -- on the Markov task (small test set) ---------------------------------------------------------


@pytest.fixture(scope="module")
def markov():
    return markov_path_data(MarkovTask(P_test=200))


def test_markov_theory_at_N10(markov):
    """P = 100, 4 paths: converged to 1e-8 relative; U suppresses the adversarial paths below the GP
    value and anti-correlates good and denoising (the published qualitative claims)."""
    model = PathsModel(N=10)
    res = minimise_action(markov.C_train, markov.y_train, model)
    assert res.converged and res.stationarity <= 1e-8 and res.seconds < 10
    assert theta_from_levels(res.levels).size == 14
    i = {name: markov.path_names.index(name) for name in markov.path_names}
    U = res.U
    assert U[i["good"], i["good"]] > U[i["denoising"], i["denoising"]] > 1
    assert U[i["adversarial 1"], i["adversarial 1"]] < 1 and U[i["adversarial 2"], i["adversarial 2"]] < 1
    assert U[i["good"], i["denoising"]] < 0
    ev, gp = evaluate(U, markov, model), evaluate(gp_order_parameters(model)[0], markov, model)
    assert ev.accuracy > gp.accuracy
    scores = head_scores(U, markov)
    assert all(abs(s.sum() - 1) < 1e-12 for s in scores)
    pruned = prune_head(U, markov, model, 1, 1)  # the random layer-2 head
    assert 0 <= pruned.accuracy <= 1


def test_subsets_are_the_smaller_networks(markov):
    task = MarkovTask(P_test=200)
    good = markov.restrict(subset_heads(task, "good"))
    gd = markov.restrict(subset_heads(task, "good+denoising"))
    assert good.path_names == ("good",) and gd.path_names == ("good", "denoising") and gd.heads == (2, 1)
    assert np.array_equal(good.C_train[0, 0], markov.C_train[0, 0])
    with pytest.raises(ParameterError):
        subset_heads(task, "bad")
    assert isinstance(gd, PathData)


def test_point_row_round_trip():
    p = PathsPoint(
        subset="all",
        method="theory",
        N=10.0,
        temperature=0.01,
        accuracy=0.9,
        loss=0.3,
        variance=0.1,
        status="converged",
        stationarity=1e-10,
        iterations=5,
        seconds=0.1,
        paths=("good", "denoising"),
        U=np.array([[2.0, -1.0], [-1.0, 3.0]]),
    )
    row = p.to_row()
    q = PathsPoint.from_row({k: (str(v) if not isinstance(v, list) else v) for k, v in row.items()})
    assert q.paths == p.paths and np.array_equal(q.U, p.U) and q.accuracy == p.accuracy
    assert np.array_equal(read_matrix(row["U"]), p.U)


def test_rows_without_their_matrices_are_refused():
    """A row whose U (or one level of a theory result) is an empty cell cannot be read back: the
    records hold matrices (before, PathsPoint.U and TheoryResult.levels silently held None)."""
    p = PathsPoint(
        subset="all",
        method="theory",
        N=10.0,
        temperature=0.01,
        accuracy=0.9,
        loss=0.3,
        variance=0.1,
        status="converged",
        stationarity=1e-10,
        iterations=5,
        seconds=0.1,
        paths=("good", "denoising"),
        U=np.eye(2),
    )
    with pytest.raises(ValueError, match="U is missing"):
        PathsPoint.from_row({**p.to_row(), "U": ""})
    C, y = _random_problem(heads=(1,), P=6)
    row = minimise_action(C, y, PathsModel(N=5.0, temperature=0.1, heads=(1,))).to_row()
    assert len(row["levels"]) == 2
    with pytest.raises(ValueError, match="level 2 of 2 is missing"):
        TheoryResult.from_row({**row, "levels": [row["levels"][0], None]})


def test_restricting_factored_kernels_is_refused():
    """PathData.restrict indexes dense kernels; factored ones (the image study's) are refused by name
    (before, a matmul shape error from deep inside FactoredKernels)."""
    rng = np.random.default_rng(0)
    xi, xit = rng.standard_normal((4, 12, 5)), rng.standard_normal((4, 9, 5))
    keys = ((0, 0), (0, 1), (1, 0), (1, 1))
    data = PathData(
        head_names=(("a", "b"), ("c", "d")),
        path_keys=keys,
        path_names=tuple(map(str, keys)),
        C_train=FactoredKernels(xi, xi),
        y_train=np.ones(12),
        C_cross=FactoredKernels(xit, xi),
        C_diag=np.ones((4, 4, 9)),
        y_test=np.ones(9),
    )
    with pytest.raises(TypeError, match="dense path kernels"):
        data.restrict([[0], [0, 1]])
