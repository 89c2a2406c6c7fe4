"""Gradient descent on the tied AIM student: the student's index against the generator, its gradient
against finite differences, convergence on a tiny case, and the Bayes-optimal lower bound."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dotattn.aim.algo_study import alpha_summary  # noqa: E402
from dotattn.aim.gd import GDConfig, run_gd, student_index  # noqa: E402
from dotattn.aim.model import attention_index, make_data  # noqa: E402
from dotattn.core.validation import ParameterError  # noqa: E402


def test_student_index_matches_the_generator():
    data = make_data(15, 0.4, 3, 0.2, seed=2)
    W = np.random.default_rng(0).standard_normal((15, data.r))
    S = W @ W.T / math.sqrt(data.r * 15)
    Wt = torch.as_tensor(W)
    XW = (torch.as_tensor(data.X) @ Wt)[None]  # one initialisation: (1, n, T, r)
    h = student_index(XW, (Wt * Wt).sum()[None], 15)[0].numpy()
    assert np.allclose(h, attention_index(data.X, S), rtol=1e-10, atol=1e-12)  # same sums, other order


def test_loss_gradient_by_finite_differences():
    data = make_data(10, 0.5, 2, 0.5, seed=1)
    X, y = torch.as_tensor(data.X), torch.as_tensor(data.y)
    n, T, d, r = data.n, data.T, data.d, data.r

    def loss(W):
        h = student_index((X.reshape(-1, d) @ W).reshape(1, n, T, r), (W * W).sum()[None], d)
        return 0.5 * ((torch.softmax(h, -1) - y) ** 2).sum() / n

    W = torch.randn(d, r, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    (grad,) = torch.autograd.grad(loss(W), W)
    E = torch.randn(d, r, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    eps = 1e-5  # central differences: error O(eps²) ~ 1e-10 relative, far below the 1e-6 tolerance
    with torch.no_grad():
        fd = (loss(W + eps * E) - loss(W - eps * E)) / (2 * eps)
    assert math.isclose(float(fd), float((grad * E).sum()), rel_tol=1e-6)


def test_gd_converges_and_does_not_beat_the_bayes_optimal_mmse():
    from dotattn.aim.state_evolution import solve_point

    alpha, rho, d = 0.1, 0.5, 20
    mmse = solve_point("softmax", alpha, rho, 2).mmse
    per_seed, averaged, statuses = [], [], []
    for seed in range(3):
        data = make_data(d, rho, 2, alpha, seed=seed)
        res = run_gd(data, GDConfig(inits=2, steps=1500, lr=0.05, grad_tol=1e-5))
        for k in res.runs:
            assert k.loss < 1e-3 and k.grad_rms < 1e-4  # trained (initial loss ~0.25 at gradient ~1e-3)
        per_seed.append(np.mean([k.mse for k in res.runs]))
        averaged.append(res.mse_averaged)
        statuses.append(res.runs[0].status)
        assert res.mse_averaged <= np.mean([k.mse for k in res.runs]) + 1e-12  # convexity of the squared error
    for errs in (per_seed, averaged):
        row = alpha_summary("gd", alpha, errs, ["converged"] * len(errs), mmse)
        assert not row.beats_bound, row


def test_batched_initialisations_are_independent_trainings():
    """K initialisations trained as one tensor program give, for each k, the run of that initialisation
    alone: Adam acts elementwise and the gradient of Σ_k D(W_k) in W_k is ∇D(W_k). Same numbers up to
    the summation order of the batched products (1e-9 relative after 100 steps)."""
    import dotattn.aim.gd as gd

    data = make_data(12, 0.5, 3, 0.05, seed=4)
    batched = run_gd(data, GDConfig(inits=3, steps=100))
    rng = np.random.default_rng(np.random.SeedSequence([data.seed, gd._STREAM_INIT, 0]))
    W0 = rng.standard_normal((3, data.d, data.r))
    for k in range(3):
        W = torch.as_tensor(W0[k : k + 1].copy()).requires_grad_(True)
        opt = torch.optim.Adam([W], lr=0.1)
        X = torch.as_tensor(data.X.reshape(-1, data.d))
        for _ in range(100):
            opt.zero_grad()
            h = student_index((X @ W).reshape(1, data.n, data.T, data.r), (W * W).sum(dim=(1, 2)), data.d)
            (0.5 * ((torch.softmax(h, -1) - torch.as_tensor(data.y)) ** 2).sum() / data.n).backward()
            opt.step()
        Wk = W.detach().numpy()[0]
        S = Wk @ Wk.T / math.sqrt(data.r * data.d)
        assert np.allclose(S, batched.S_runs[k], rtol=1e-9, atol=1e-11)
        assert math.isclose(data.mse(S), batched.runs[k].mse, rel_tol=1e-9)


def test_gd_config_and_channel_refusals():
    with pytest.raises(ParameterError, match="optimizer"):
        GDConfig(optimizer="lbfgs")
    with pytest.raises(ParameterError, match="inits"):
        GDConfig(inits=0)
    with pytest.raises(ParameterError, match="softmax"):
        run_gd(make_data(10, 0.5, 2, 0.2, "hardmax", seed=0))
