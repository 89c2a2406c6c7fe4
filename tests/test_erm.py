"""Finite-size ERM (dotattn.erm, `dotattn train-erm`): data, models, gradients, baseline, runs, CLI."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
import torch
from clitools import dotattn_command, run_python

from dotattn import ParameterError, Problem
from dotattn.core.io import read_csv
from dotattn.core.training import train
from dotattn.erm import ErmConfig, ErmResult, run_config, run_erm
from dotattn.erm.data import (
    STREAM_TRAIN,
    content_noise,
    make_dataset,
    positional_embeddings,
    targets,
    teacher_attention,
    teacher_weights,
)
from dotattn.erm.experiment import _risk_function, _sample_errors, initial_weights
from dotattn.erm.models import (
    attention,
    fit_linear_baseline,
    linear_normal_equations,
    linear_predict,
    quadratic_residual_pf,
    residual_sq_norm,
    sample_stats,
)

F64 = torch.float64
L3_A = [[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]]
L3_G = [[1.0, 0.2, -0.5], [0.2, 0.8, 0.1], [-0.5, 0.1, 0.6]]


@pytest.fixture(autouse=True)
def _one_thread():
    """Small tensors: one thread is fastest and does not fight other jobs for the cores."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _softmax_np(M: np.ndarray) -> np.ndarray:
    E = np.exp(M - M.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


# -- data ------------------------------------------------------------------------------------
def test_toy_positional_embeddings_are_pm_ones_over_sqrt_d():
    P = positional_embeddings(Problem().G, 50)
    assert P.shape == (2, 50)
    np.testing.assert_allclose(P[0].numpy(), np.ones(50) / math.sqrt(50), atol=1e-14)
    np.testing.assert_allclose(P[1].numpy(), -np.ones(50) / math.sqrt(50), atol=1e-14)


@pytest.mark.parametrize("G", [L3_G, np.eye(3).tolist(), [[2.0, 2.0, 0], [2.0, 2.0, 0], [0, 0, 1.0]]])
def test_positional_embeddings_reproduce_the_gram(G):
    P = positional_embeddings(np.array(G), 40)
    assert P.shape == (3, 40)
    np.testing.assert_allclose((P @ P.T).numpy(), G, atol=1e-12)
    np.testing.assert_array_equal(P.numpy(), positional_embeddings(np.array(G), 40).numpy())  # deterministic


def test_shapes_L3_rank2_teacher_rank2():
    pb = Problem(L=3, rank=2, teacher_rank=2, positional_attention=L3_A, positional_gram=L3_G)
    d, n = 30, 7
    P = positional_embeddings(pb.G, d)
    Qs = teacher_weights(d, 2, seed=1)
    ds = make_dataset(pb, Qs, P, n, seed=1)
    assert ds.X.shape == (n, 3, d) and ds.T.shape == (n, 3, 3) and ds.y.shape == (n, 3, d)
    assert ds.Cpz.shape == ds.Czz.shape == (n, 3, 3)
    np.testing.assert_allclose(ds.T.sum(-1).numpy(), 1.0, atol=1e-12)
    for kind in ("semantic", "positional", "random"):
        Q = initial_weights(kind, Qs, P, 2, seed=1)
        assert Q.shape == (d, 2)
        assert attention(ds.X, Q).shape == (n, 3, d)
    np.testing.assert_array_equal(initial_weights("semantic", Qs, P, 2, 1).numpy(), Qs.numpy())
    Q3 = initial_weights("semantic", Qs, P, 3, 1)  # padded
    np.testing.assert_array_equal(Q3[:, :2].numpy(), Qs.numpy())
    assert 0 < Q3[:, 2].abs().max() < 1
    np.testing.assert_array_equal(initial_weights("semantic", Qs, P, 1, 1)[:, 0].numpy(), Qs[:, 0].numpy())


def test_positional_init_has_the_requested_overlap():
    d = 64
    P = positional_embeddings(Problem().G, d)
    Q = initial_weights("positional", teacher_weights(d, 1, 0), P, 1, 0, positional_m0=0.3)
    mu = (P @ Q / math.sqrt(d))[:, 0]
    np.testing.assert_allclose(mu.numpy(), [0.3, -0.3], atol=1e-12)


def test_targets_match_a_direct_per_sample_numpy_formula():
    pb = Problem(L=3, teacher_rank=2, omega=0.4, positional_attention=L3_A, positional_gram=L3_G)
    d, n = 25, 6
    P = positional_embeddings(pb.G, d)
    Qs = teacher_weights(d, 2, seed=3)
    ds = make_dataset(pb, Qs, P, n, seed=3)
    Zn, Qn, A = ds.Z.numpy(), Qs.numpy(), np.array(L3_A)
    for mu in range(n):
        Z = Zn[mu]
        y = ((1 - pb.omega) * _softmax_np(Z @ Qn @ Qn.T @ Z.T / d) + pb.omega * A) @ Z
        np.testing.assert_allclose(ds.y[mu].numpy(), y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(targets(ds.Z, Qs, torch.tensor(A), pb.omega).numpy(), ds.y.numpy(), atol=1e-13)
    np.testing.assert_allclose(teacher_attention(ds.Z, Qs, torch.tensor(A), pb.omega).numpy(), ds.T.numpy())
    # the content really has variance sigma^2 and the tokens are P + Z
    np.testing.assert_allclose(ds.X.numpy(), (ds.Z + P).numpy())


def test_samples_are_block_seeded_prefixes():
    full = content_noise(700, 2, 8, 0.5, seed=4, stream=STREAM_TRAIN)
    part = content_noise(300, 2, 8, 0.5, seed=4, stream=STREAM_TRAIN, start=250)
    np.testing.assert_array_equal(full[250:550].numpy(), part.numpy())
    np.testing.assert_array_equal(full[:10].numpy(), content_noise(10, 2, 8, 0.5, 4, STREAM_TRAIN).numpy())
    assert not torch.equal(full[:10], content_noise(10, 2, 8, 0.5, 5, STREAM_TRAIN))
    assert abs(float(full.std()) - 0.5) < 0.02


# -- models and loss -------------------------------------------------------------------------
def _instance(L=2, d=20, n=9, seed=0, rt=1, omega=0.3):
    if L == 2:
        pb = Problem(omega=omega, teacher_rank=rt)
    else:
        pb = Problem(L=L, teacher_rank=rt, omega=omega, positional_attention=L3_A, positional_gram=L3_G)
    P = positional_embeddings(pb.G, d)
    Qs = teacher_weights(d, rt, seed)
    return pb, P, Qs, make_dataset(pb, Qs, P, n, seed)


@pytest.mark.parametrize("L", [2, 3])
def test_gram_forms_of_the_squared_error_match_the_explicit_one(L):
    pb, P, Qs, ds = _instance(L=L, rt=2)
    Q = torch.randn(20, 2, dtype=F64, generator=torch.Generator().manual_seed(1))
    explicit = ((attention(ds.X, Q) - ds.y) ** 2).sum((-1, -2))
    h = ds.X @ Q / math.sqrt(20)
    S = torch.softmax(h @ h.transpose(-1, -2), -1)
    np.testing.assert_allclose(residual_sq_norm(S, ds.T, ds.G, ds.Cpz, ds.Czz).numpy(), explicit.numpy(), rtol=1e-11)
    Cxx, Cyx, cyy = sample_stats(ds.T, ds.G, ds.Cpz, ds.Czz)
    np.testing.assert_allclose(Cxx.numpy(), (ds.X @ ds.X.transpose(-1, -2)).numpy(), atol=1e-11)
    np.testing.assert_allclose(Cyx.numpy(), (ds.y @ ds.X.transpose(-1, -2)).numpy(), atol=1e-11)
    pf = [M.permute(1, 2, 0) for M in (S, Cxx, Cyx)]
    np.testing.assert_allclose(quadratic_residual_pf(*pf, cyy).numpy(), explicit.numpy(), rtol=1e-10)


def test_batched_risk_equals_a_loop_over_runs_with_masked_alphas():
    """Blocks over nested alpha prefixes and the batch layout give each run exactly its own risk."""
    pb, d, ns, ridge = Problem(L=3, rank=2, positional_attention=L3_A, positional_gram=L3_G), 16, [5, 9, 12], 0.07
    P = positional_embeddings(pb.G, d)
    S, A, I, r = 2, len(ns), 2, 2
    sets = [make_dataset(pb, teacher_weights(d, 1, s), P, max(ns), s) for s in range(S)]
    X = torch.stack([s.X for s in sets])
    stats = [sample_stats(s.T, s.G, s.Cpz, s.Czz) for s in sets]
    Cxx, Cyx, cyy = (torch.stack([st[j] for st in stats]) for j in range(3))
    pf = lambda M: M.permute(2, 3, 0, 1).contiguous()
    risk = _risk_function(X, pf(Cxx), pf(Cyx), cyy, ns, ridge)
    W = torch.randn(S, A, I, r, d, dtype=F64, generator=torch.Generator().manual_seed(2))
    R = risk(W)
    assert R.shape == (S, A, I)
    for s in range(S):
        for a, n in enumerate(ns):
            for i in range(I):
                Q = W[s, a, i].T
                ds = sets[s].head(n)
                want = ((attention(ds.X, Q) - ds.y) ** 2).sum() / (2 * d) + ridge / 2 * (Q**2).sum()
                assert float(R[s, a, i]) == pytest.approx(float(want), rel=1e-11)
    errs = _sample_errors(W.reshape(S, A * I, r, d), X, pf(Cxx), pf(Cyx), cyy)
    assert errs.shape == (S, A * I, max(ns))


def test_autograd_gradient_matches_central_finite_differences():
    pb, d, ns, ridge = Problem(omega=0.3), 12, [6, 10], 0.01
    P = positional_embeddings(pb.G, d)
    ds = make_dataset(pb, teacher_weights(d, 1, 0), P, 10, 0)
    Cxx, Cyx, cyy = sample_stats(ds.T, ds.G, ds.Cpz, ds.Czz)
    risk = _risk_function(
        ds.X[None],
        Cxx.permute(1, 2, 0)[:, :, None].contiguous(),
        Cyx.permute(1, 2, 0)[:, :, None].contiguous(),
        cyy[None],
        ns,
        ridge,
    )
    W = (2.0 * torch.randn(1, 2, 1, 1, d, dtype=F64, generator=torch.Generator().manual_seed(5))).requires_grad_(True)
    (grad,) = torch.autograd.grad(risk(W).sum(), W)
    eps = 1e-6
    rng = np.random.default_rng(0)
    for _ in range(6):
        idx = (0, int(rng.integers(2)), 0, 0, int(rng.integers(d)))
        Wp, Wm = W.detach().clone(), W.detach().clone()
        Wp[idx] += eps
        Wm[idx] -= eps
        fd = float((risk(Wp).sum() - risk(Wm).sum()) / (2 * eps))
        assert float(grad[idx]) == pytest.approx(fd, rel=1e-6, abs=1e-9)
    # and along a random direction (seeded: the global torch generator's state depends on which tests ran before
    # on the worker). abs=1e-9 as above: the central difference's rounding error is ~ machine epsilon x risk / eps
    # ~ 1e-10, which dominates where the directional derivative is small (one direction gave -8.07e-6).
    v = torch.randn(W.shape, dtype=F64, generator=torch.Generator().manual_seed(6))
    fd = float((risk(W.detach() + eps * v).sum() - risk(W.detach() - eps * v).sum()) / (2 * eps))
    assert float((grad * v).sum()) == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_linear_baseline_matches_cvxpy():
    cp = pytest.importorskip("cvxpy")
    pb, P, Qs, ds = _instance(L=3, d=10, n=12, seed=2)
    d, ridge = 10, 1e-3
    yx, xx = linear_normal_equations(ds.T, ds.G, ds.Cpz, ds.Czz)
    B = fit_linear_baseline(yx.sum(0), xx.sum(0), d, ridge).numpy()
    Xcat = np.concatenate(list(ds.X.numpy()), axis=1)  # (L, n d)
    Ycat = np.concatenate(list(ds.y.numpy()), axis=1)
    Bv = cp.Variable((3, 3))
    obj = cp.sum_squares(Bv @ Xcat - Ycat) / (2 * d) + ridge / 2 * cp.sum_squares(Bv)
    cp.Problem(cp.Minimize(obj)).solve()
    np.testing.assert_allclose(B, Bv.value, atol=2e-5)
    # the Gram-form residual of the baseline equals the explicit one
    explicit = ((linear_predict(ds.X, torch.tensor(B)) - ds.y) ** 2).sum((-1, -2))
    np.testing.assert_allclose(
        residual_sq_norm(torch.tensor(B), ds.T, ds.G, ds.Cpz, ds.Czz).numpy(), explicit.numpy(), rtol=1e-10
    )


# -- training --------------------------------------------------------------------------------
def _quadratic_runs():
    """Independent quadratics R_b(Q) = ||Q - c_b||^2 / 2 (two runs, Q 3x1)."""
    c = torch.tensor([[[1.0], [2.0], [3.0]], [[-1.0], [0.5], [0.0]]], dtype=F64)
    return (lambda Q: 0.5 * ((Q - c) ** 2).sum((-1, -2))), c


@pytest.mark.parametrize("optimizer,lr", [("gd", 0.5), ("adam", 0.05), ("lbfgs", 1.0)])
def test_optimisers_solve_independent_quadratics(optimizer, lr):
    f, c = _quadratic_runs()
    # lbfgs stops on the relative stationarity, whose scale needs a ridge λ (any λ > 0 here: R has no
    # ridge term, so the denominator is ~||grad R|| + 2λ||Q||); 1e-10 puts ||grad R|| below ~1e-12
    kw = dict(tol=1e-10, ridge=1e-2) if optimizer == "lbfgs" else dict(tol=1e-14)
    out = train(f, torch.zeros_like(c), optimizer=optimizer, steps=3000, lr=lr, **kw)
    np.testing.assert_allclose(out.Q.numpy(), c.numpy(), atol=1e-3 if optimizer == "adam" else 1e-6)
    assert out.loss.shape == (2,) and out.status.shape == (2,)
    if optimizer == "lbfgs":
        assert out.status_names() == ["converged", "converged"] and bool((out.stationarity <= 1e-10).all())


def test_gd_freezes_converged_runs_and_reports_status():
    c = torch.tensor([[[1.0]], [[1e-3]]], dtype=F64)
    scale = torch.tensor([1.0, 1e-4], dtype=F64)  # run 1 is almost flat: tiny relative changes

    def f(Q):
        return 0.5 * scale * ((Q - c) ** 2).sum((-1, -2)) + 1.0

    out = train(f, torch.zeros_like(c), optimizer="gd", steps=50, lr=0.5, tol=1e-6)
    assert out.status_names() == ["converged", "converged"]
    assert out.steps[1] < out.steps[0] <= 50
    out = train(f, torch.zeros_like(c), optimizer="gd", steps=5, lr=0.5, tol=0.0)
    assert out.status_names() == ["max_steps", "max_steps"] and out.steps.tolist() == [5, 5]
    out = train(lambda Q: (Q * float("nan")).sum((-1, -2)), torch.zeros_like(c), steps=5)
    assert out.status_names() == ["diverged", "diverged"]


def test_small_run_end_to_end():
    calls = []
    res = run_erm(
        Problem(omega=0.3),
        d=64,
        alphas=[0.5, 2.0],
        inits="all",
        seeds=2,
        steps=300,
        test_samples=1000,
        device="cpu",
        progress=calls.append,
    )
    assert isinstance(res, ErmResult) and len(res.runs) == 2 * 3 * 2
    assert sum(calls) == 300
    assert [r.init for r in res.runs[:6]] == ["semantic"] * 2 + ["positional"] * 2 + ["random"] * 2
    for r in res.runs:
        assert r.status in ("converged", "not_converged") and 1 <= r.steps <= 300
        assert r.mu.shape == (2, 1) and r.theta.shape == (1, 1) and r.q.shape == (1, 1)
        assert r.mu[1, 0] == pytest.approx(-r.mu[0, 0])  # p_2 = -p_1 (positional_gram [[1, -1], [-1, 1]])
        assert type(r).from_row(r.to_row()) == r
        assert r.theta_over_sigma2.item() >= 0  # Q -> -Q symmetry fixed
        assert 0 < r.test_error < 0.05 and r.test_error_se < 0.1 * r.test_error
        assert r.train_loss > 0 and np.isfinite(r.linear_test_error)
        assert r.n == round(r.alpha * 64)
    for alpha in (0.5, 2.0):
        for seed in (0, 1):
            informed = [r for r in res.select(alpha=alpha, seed=seed) if r.init != "random"]
            chosen = [r for r in informed if r.selected]
            assert len(chosen) == 1 and chosen[0].train_loss == min(r.train_loss for r in informed)
            assert not res.select(alpha=alpha, seed=seed, init="random")[0].selected
    # informed starts stay on their branches at alpha = 2
    sem, pos = res.select(alpha=2.0, init="semantic"), res.select(alpha=2.0, init="positional")
    assert all(r.theta_over_sigma2.item() > 0.4 for r in sem) and all(r.m_norm > 0.15 for r in pos)
    rows = res.summary_rows()
    assert [(row.alpha, row.init) for row in rows[:4]] == [
        (0.5, "semantic"),
        (0.5, "positional"),
        (0.5, "random"),
        (0.5, "selected"),
    ]
    sel = rows[3]
    assert sel.runs == 2 and sel.selected_inits
    np.testing.assert_allclose(sel.mean["test_error"], np.mean([r.test_error for r in res.select(0.5, "selected")]))
    for row in rows:  # the row form round-trips through JSON and CSV cells
        flat = row.to_row()
        assert type(row).from_row(json.loads(json.dumps(flat))) == row
        cells = {k: (json.dumps(v) if isinstance(v, list) else str(v)) for k, v in flat.items()}
        assert json.dumps(type(row).from_row(cells).to_row()) == json.dumps(flat)
    # the same seeds reproduce the same numbers
    again = run_erm(
        Problem(omega=0.3), d=64, alphas=[0.5, 2.0], inits="all", seeds=2, steps=300, test_samples=1000, device="cpu"
    )
    # the same seeds, process and thread count: equal up to round-off in the order of torch's reductions
    # (rel 1e-9: 300 GD steps amplify a 1e-16 difference by far less than 1e7)
    assert [r.train_loss for r in again.runs] == pytest.approx([r.train_loss for r in res.runs], rel=1e-9)


def test_overlaps_of_the_untrained_informed_starts_are_their_closed_forms():
    """One step with lr = 1e-300 leaves the weights at their start (a change ~1e-300 x the gradient), so
    the measured overlaps are the starts' closed forms (erm.experiment.initial_weights, rank 1): the
    semantic start is Q = Q*, so θ = q = σ² Q*ᵀQ*/d (two different contractions); the positional start
    is Q = c √d v with μ_1 = p_1·Q/√d = m0 = 0.3 and μ_2 = -m0 (p_2 = -p_1), so m = m_norm = m0,
    q = σ² m0² / G_11. Relative 1e-12: float64 round-off of sums over d = 64 terms."""
    p = Problem(omega=0.3)
    res = run_erm(p, d=64, alphas=[2.0], inits="both", seeds=1, steps=1, lr=1e-300, test_samples=100, device="cpu")
    (sem,) = res.select(alpha=2.0, init="semantic")
    (pos,) = res.select(alpha=2.0, init="positional")
    assert sem.theta.item() == pytest.approx(sem.q.item(), rel=1e-12) and sem.q.item() > 0
    assert sem.theta_over_sigma2.item() == pytest.approx(sem.q.item() / p.sigma**2, rel=1e-12)
    m0 = 0.3  # ErmConfig.positional_m0's default
    np.testing.assert_allclose(pos.mu.ravel(), [m0, -m0], rtol=1e-12)
    assert pos.m == pytest.approx(m0, rel=1e-12) and pos.m_norm == pytest.approx(m0, rel=1e-12)
    assert pos.q.item() == pytest.approx(p.sigma**2 * m0**2 / p.G[0, 0], rel=1e-12)


def test_general_L_rank_and_other_optimisers_run():
    pb = Problem(L=3, rank=2, teacher_rank=2, positional_attention=L3_A, positional_gram=L3_G)
    for opt in ("adam", "lbfgs"):
        res = run_erm(
            pb, d=24, alphas=[1.0], inits="both", seeds=1, optimizer=opt, steps=20, test_samples=200, device="cpu"
        )
        r = res.runs[0]
        assert r.mu.shape == (3, 2) and r.theta.shape == (2, 2) and r.q.shape == (2, 2)
        assert isinstance(res.run_rows()[0]["theta"], list)
    res32 = run_erm(
        Problem(),
        d=32,
        alphas=[1.0],
        inits="positional",
        seeds=1,
        steps=50,
        test_samples=200,
        dtype="float32",
        device="cpu",
    )
    res64 = run_erm(
        Problem(), d=32, alphas=[1.0], inits="positional", seeds=1, steps=50, test_samples=200, device="cpu"
    )
    assert res32.runs[0].test_error == pytest.approx(res64.runs[0].test_error, rel=1e-3)


@pytest.mark.parametrize(
    "kwargs,word",
    [
        (dict(d=1), "d"),
        (dict(alphas=[0.001]), "alpha"),
        (dict(optimizer="sgd"), "optimizer"),
        (dict(device="tpu"), "device"),
        (dict(device="cuda:x"), "device"),
        (dict(lr=0.0), "lr"),
        (dict(seeds=[0, 1], first_seed=2), "first_seed"),
        (dict(first_seed=-1), "first_seed"),
        (dict(steps=0), "steps"),
        (dict(seeds=0), "seeds"),
        (dict(inits="nope"), "init"),
        (dict(alphas=[]), "alpha"),
        (dict(dtype="float16"), "dtype"),
        (dict(tol=-1.0), "tol"),
        (dict(test_samples=0), "test_samples"),
    ],
)
def test_bad_configuration_raises_parameter_error(kwargs, word):
    base = dict(d=100, alphas=[1.0])
    base.update(kwargs)
    with pytest.raises(ParameterError, match=word):
        ErmConfig(**base)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_is_rejected_when_the_run_starts():
    cfg = ErmConfig(d=100, alphas=[1.0], device="cuda")  # syntactically valid: checked at the start of a run
    with pytest.raises(ParameterError, match="device"):
        run_config(Problem(), cfg)


def test_config_is_torch_free(tmp_path):
    code = (
        "import sys; from dotattn.erm import ErmConfig; from dotattn.erm.records import RunRecord; "
        "ErmConfig(d=10, alphas=[1.0]); assert 'torch' not in sys.modules"
    )
    r = run_python(code, tmp_path)
    assert r.returncode == 0, r.stderr


def test_config_normalises():
    cfg = ErmConfig(d=100, alphas=[2.0, 0.5, 2.0], inits="all", seeds=3)
    assert cfg.alphas == (0.5, 2.0) and cfg.ns == (50, 200) and cfg.seeds == (0, 1, 2) and cfg.lr == 0.15
    assert ErmConfig(d=100, alphas=[1.0], seeds=2, first_seed=5).seeds == (5, 6)
    assert cfg.inits == ("semantic", "positional", "random")
    with pytest.raises(ParameterError, match="d must be >= L"):
        run_erm(Problem(L=3, positional_attention=L3_A), d=2, alphas=[1.0], steps=1)


# -- command line ----------------------------------------------------------------------------
def _main(argv, capsys):
    from dotattn.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_cli_writes_self_describing_results(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, _ = _main(
        [
            "train-erm",
            "--d",
            "24",
            "--alpha",
            "0.5:1:2",
            "--seeds",
            "2",
            "--steps",
            "30",
            "--test-samples",
            "300",
            "--init",
            "all",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0 and "selected" in stdout
    runs, summary = read_csv(out / "runs.csv"), read_csv(out / "summary.csv")
    assert len(runs) == 2 * 3 * 2 and len(summary) == 2 * 4
    assert {"m", "m_norm", "theta_over_sigma2", "test_error", "linear_test_error", "status", "selected"} <= set(runs[0])
    meta = json.loads((out / "summary.json").read_text())
    prov = meta["provenance"]
    assert {"git_commit", "dotattn_version", "created_utc", "seconds"} <= set(prov)
    assert prov["parameters"]["erm"]["d"] == 24 and prov["parameters"]["problem"]["omega"] == 0.3
    assert meta["columns"]["test_error"] and len(meta["runs"]) == 12
    assert (out / "runs.csv").read_text().startswith("# dotattn train-erm; provenance: {")


@pytest.mark.parametrize(
    "args,word",
    [
        (["--d", "1"], "d must be"),
        (["--alpha", "0.001", "--d", "100"], "alpha must be"),
        (["--optimizer", "sgd"], "optimizer must be"),
        (["--lr", "-1"], "lr must be"),
        (["--steps", "0"], "steps must be"),
        (["--seeds", "0"], "seeds must be"),
        (["--device", "nope"], "device must be"),
        (["--omega", "2"], "omega"),
        (["--init", "x"], "init must be"),
    ]
    + ([(["--device", "cuda"], "device")] if not torch.cuda.is_available() else []),
)
def test_cli_bad_input_exits_2_with_one_line_and_no_files(tmp_path, capsys, args, word):
    out = tmp_path / "bad"
    code, stdout, err = _main(["train-erm", *args, "--out", str(out)], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and word in err
    assert not out.exists()


def test_installed_entry_point_runs(tmp_path):
    out = tmp_path / "e"
    proc = subprocess.run(
        [
            *dotattn_command(),
            "train-erm",
            "--d",
            "16",
            "--alpha",
            "1",
            "--seeds",
            "1",
            "--steps",
            "5",
            "--test-samples",
            "50",
            "--quiet",
            "--threads",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "summary.json").exists() and proc.stdout == ""
    proc = subprocess.run(
        [*dotattn_command(), "train-erm", "--steps", "0", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and not (tmp_path / "x").exists()


# -- against the replica theory -------------------------------------------------------------
@pytest.fixture(scope="module")
def semantic_theory_alpha2():
    from dotattn import solve

    problem = Problem(omega=0.3)
    sem = solve(problem, alpha=2.0, n_random=0).branch("semantic")
    assert sem is not None, "the replica solver found no converged semantic fixed point at alpha = 2"
    return problem, float(np.asarray(sem.theta).reshape(-1)[0]) / problem.sigma**2, float(sem.test_error)


@pytest.mark.parametrize(
    "seeds, steps, lr, test_samples",
    [
        pytest.param(2, 1500, 1.5, 4000, id="reduced"),  # CI: fewer seeds, larger stable step
        pytest.param(4, 5000, 0.15, 10_000, id="full", marks=pytest.mark.slow),
    ],
)
def test_semantic_branch_at_d400_matches_the_replica_prediction(semantic_theory_alpha2, seeds, steps, lr, test_samples):
    """d = 400, alpha = 2, omega = 0.3, semantic-informed GD: theta/sigma^2 and eps_g within 10 % of theory."""
    problem, theta_theory, eps_theory = semantic_theory_alpha2
    res = run_erm(
        problem,
        d=400,
        alphas=[2.0],
        inits="semantic",
        seeds=seeds,
        steps=steps,
        lr=lr,
        test_samples=test_samples,
        device="cpu",
    )
    theta_erm = np.mean([r.theta_over_sigma2.item() for r in res.runs])
    eps_erm = np.mean([r.test_error for r in res.runs])
    assert theta_erm == pytest.approx(theta_theory, rel=0.10)
    assert eps_erm == pytest.approx(eps_theory, rel=0.10)
