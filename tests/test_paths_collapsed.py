"""The collapsed posterior of the order parameters (dotattn.paths.collapsed, the ``paths`` extra) and the
first-order mean estimate (dotattn.paths.finite_n). Fast by default: no NUTS run except under ``slow``."""

import numpy as np
import pytest
from scipy import special

from dotattn.core.validation import ParameterError
from dotattn.paths.finite_n import laplace_mean
from dotattn.paths.network import order_parameter
from dotattn.paths.sampler import SamplerConfig
from dotattn.paths.theory import PathsModel, minimise_action, scalar_renormalisation

jax = pytest.importorskip("jax")
from dotattn.paths.collapsed import (
    StopRule,
    check_collapsed,
    collapsed_layout,
    gaussian_evidence,  # noqa: E402
    log_density_fn,
    order_parameters_fn,
    pack_kernels,
    pooled_covariance,
    prior_draw,
    run_collapsed,
)
from dotattn.paths.network import FactoredKernels  # noqa: E402


def _toy(n_paths, P=10, N0=15, seed=0):
    rng = np.random.default_rng(seed)
    xi = rng.standard_normal((n_paths, P, N0))
    C = np.einsum("api,bqi->abpq", xi, xi) / N0
    return C, np.where(np.arange(P) < P // 2, 1.0, -1.0)


@pytest.mark.parametrize("heads,N,dim", [((2, 2), 10, 14), ((2, 2), 2, 11), ((4, 4), 10, 126), ((1,), 5, 2)])
def test_layout_dimension(heads, N, dim):
    """Σ_k Σ_{i ≤ n_k} min(i, N): 1 + 3 + 10 for the Markov network; rank-N factors below d_k."""
    assert collapsed_layout(heads, N).n_params == dim


@pytest.mark.parametrize(
    "heads,N",
    [((2, 2), 3), pytest.param((2, 1), 7, marks=pytest.mark.slow), pytest.param((3,), 2, marks=pytest.mark.slow)],
)
def test_prior_chain_equals_the_weights_prior(heads, N):
    """The Bartlett chain pushed to U_1 has the law of U = V_eff V_effᵀ/N under the prior of the weights:
    mean and variance of every entry agree within 5 combined standard errors (5 000 draws each),
    including N < d_k where U_1 has rank N."""
    rng = np.random.default_rng(3)
    layout = collapsed_layout(heads, N)
    levels = order_parameters_fn(layout, 1.0)  # float64 from here on
    to_U = jax.jit(jax.vmap(lambda z: levels(z)[0]))
    n = 5_000
    Uc = np.asarray(to_U(np.stack([prior_draw(layout, rng) for _ in range(n)])))
    Uw = np.stack(
        [order_parameter(rng.standard_normal(N), [rng.standard_normal((H, N, N)) for H in heads]) for _ in range(n)]
    )
    for stat in (lambda U: U, lambda U: U**2):
        a, b = stat(Uc), stat(Uw)
        se = np.sqrt(a.var(0) / n + b.var(0) / n)
        assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se + 1e-12)
    assert np.linalg.matrix_rank(Uc[0], tol=1e-9) == min(N, int(np.prod(heads)))


@pytest.mark.parametrize("heads,N", [((2, 2), 6), pytest.param((4,), 2, marks=pytest.mark.slow)])
def test_log_density_gradient_by_finite_differences(heads, N):
    """JAX gradient of the collapsed log density against central differences (step 1e-5, float64:
    truncation ~1e-10, round-off ~1e-11 of a density of order 10): relative 1e-6."""
    C, y = _toy(int(np.prod(heads)))
    model = PathsModel(N=N, temperature=0.05, heads=heads)
    layout, logd = log_density_fn(C, y, model)
    z = prior_draw(layout, np.random.default_rng(1))
    g = np.asarray(jax.grad(logd)(jax.numpy.asarray(z)))
    h = 1e-5
    fd = np.array([(float(logd(z + h * e)) - float(logd(z - h * e))) / (2 * h) for e in np.eye(len(z))])
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(g).max())


def test_packed_kernels_are_the_symmetrised_kernel_sum():
    """u @ S unpacked is ½(K + Kᵀ) with K = Σ_ab U_ab C_ab, also for kernels with C_ab ≠ C_baᵀ; packing the
    factored kernels gives the same rows as packing their dense form (rounding only: 1e-12 relative)."""
    rng = np.random.default_rng(4)
    n, P = 3, 7
    C = rng.standard_normal((n, n, P, P))  # no symmetry at all
    A = rng.standard_normal((n, n))
    U = A @ A.T
    K = np.einsum("ab,abpq->pq", U, C)
    assert np.allclose(pack_kernels(C).kernel(U), 0.5 * (K + K.T), rtol=1e-12, atol=1e-12 * np.abs(K).max())
    xi = rng.standard_normal((n, P, 5))
    dense = np.einsum("api,bqi->abpq", xi, xi) / 5
    assert np.allclose(pack_kernels(FactoredKernels(xi, xi)).S, pack_kernels(dense).S, rtol=1e-12, atol=1e-13)


def test_gaussian_evidence_value_gradient_and_refusal():
    """The LAPACK evidence against slogdet and a solve (1e-10 relative), its gradient in u against central
    differences (step 1e-6 on a value of order 10: round-off ~1e-9, truncation ~1e-11; relative 1e-6), the
    batch of two rows equal to each row alone (to rounding), and −inf with a zero gradient where K + 𝒯I is not positive
    definite."""
    C, y = _toy(3, P=9)
    packed = pack_kernels(C)
    m = packed.S.shape[0]
    rng = np.random.default_rng(5)
    u = rng.standard_normal((2, m)) * 0.3 + np.where(np.arange(m) == 0, 1.0, 0.0)
    A = rng.standard_normal((3, 3))
    a, b = packed.pairs
    u[0] = (A @ A.T)[a, b]
    values, grads = gaussian_evidence(packed, y, 0.7, 0.2, u)
    for r in range(2):
        K = 0.7 * packed.kernel(_symmetric(u[r], packed)) + 0.2 * np.eye(len(y))
        sign, logdet = np.linalg.slogdet(K)
        if sign <= 0 or np.linalg.eigvalsh(K).min() <= 0:
            assert values[r] == -np.inf and not grads[r].any()
            continue
        ref = -0.5 * logdet - 0.5 * y @ np.linalg.solve(K, y)
        assert abs(values[r] - ref) <= 1e-10 * abs(ref)
        h = 1e-6
        fd = np.array(
            [
                (
                    gaussian_evidence(packed, y, 0.7, 0.2, u[r] + h * e)[0][0]
                    - gaussian_evidence(packed, y, 0.7, 0.2, u[r] - h * e)[0][0]
                )
                / (2 * h)
                for e in np.eye(m)
            ]
        )
        assert np.allclose(grads[r], fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
        one = gaussian_evidence(packed, y, 0.7, 0.2, u[r])
        assert abs(one[0][0] - values[r]) <= 1e-12 * abs(values[r])  # a batched product rounds differently
        assert np.allclose(one[1][0], grads[r], rtol=1e-12, atol=1e-12 * np.abs(grads[r]).max())
    bad = gaussian_evidence(packed, y, 0.7, 0.2, -10 * np.abs(u[:1]))
    assert bad[0][0] == -np.inf and not bad[1].any()


def test_gaussian_evidence_gradient_equals_the_dense_formula():
    """Value and gradient of the packed evidence against the dense formulas on unsymmetric kernels
    (C_ab ≠ C_baᵀ): ℓ = −½ ln det(K + 𝒯I) − ½ yᵀ(K + 𝒯I)⁻¹y with K = c Σ_ab U_ab C_ab symmetrised, and
    dℓ/dU_ab = c Σ_pq G_pq (C_ab + C_ba)[p, q] (a < b; C_aa alone for a = b), G = −½(A − ααᵀ), A = (K + 𝒯I)⁻¹,
    α = Ay. Both sides are float64 with condition numbers ~10²: 1e-10 relative. A row that is not positive
    definite in the same batch leaves the others' values and gradients unchanged."""
    rng = np.random.default_rng(11)
    n, P, c, T = 3, 13, 0.4, 1.0
    C = (
        0.05 * rng.standard_normal((n, n, P, P)) / P
        + np.einsum("api,bqi->abpq", *(2 * [rng.standard_normal((n, P, 4))])) / 4
    )
    y = rng.standard_normal(P)
    packed = pack_kernels(C)
    a, b = packed.pairs
    rows, refs = [], []
    for _ in range(3):
        F = rng.standard_normal((n, n))
        U = F @ F.T
        K = c * np.einsum("ab,abpq->pq", U, C)
        K = 0.5 * (K + K.T) + T * np.eye(P)
        assert np.linalg.eigvalsh(K).min() > 0.1  # a valid covariance, well conditioned
        A = np.linalg.inv(K)
        alpha = A @ y
        G = -0.5 * (A - np.outer(alpha, alpha))
        dU = c * np.einsum("pq,abpq->ab", G, C)
        grad = np.where(a == b, dU[a, b], dU[a, b] + dU[b, a])
        value = -0.5 * np.linalg.slogdet(K)[1] - 0.5 * y @ alpha
        rows.append(U[a, b])
        refs.append((value, grad))
    rows.insert(1, -10 * np.abs(rows[0]))  # not positive definite
    values, grads = gaussian_evidence(packed, y, c, T, np.stack(rows))
    assert values[1] == -np.inf and not grads[1].any()
    for r, (value, grad) in zip((0, 2, 3), refs, strict=True):
        assert abs(values[r] - value) <= 1e-10 * abs(value)
        assert np.abs(grads[r] - grad).max() <= 1e-10 * np.abs(grad).max()


def test_stop_rule_range_and_decision():
    for kwargs in ({"ess_min": 0.5}, {"rhat_max": 1.0}, {"rhat_max": 3.0}, {"every": 0}, {"ess_min": float("nan")}):
        with pytest.raises(ParameterError, match=next(iter(kwargs))):
            StopRule(**kwargs)
    rule = StopRule(ess_min=400, rhat_max=1.01)
    assert rule.met(1.01, 400) and rule.met(1.0, 1e4)
    assert not rule.met(1.011, 1e4) and not rule.met(1.0, 399.9)
    assert not rule.met(float("nan"), 1e4) and not rule.met(1.0, float("nan"))


def _stopped_run(C1, y):
    model = PathsModel(N=5, temperature=0.05, heads=(1,))
    cfg = SamplerConfig(chains=2, warmup=100, draws=2000, seed=3)
    return model, run_collapsed(C1, y, model, cfg, stop=StopRule(ess_min=150, rhat_max=1.05, every=50))


def test_collapsed_nuts_stops_on_the_rule():
    """One head, one layer (one coordinate per level, fast): with a cap of 2000 draws per chain and the rule
    ESS ≥ 150, R-hat ≤ 1.05 checked every 50 draws, the run stops at a check (a multiple of 50 draws) well
    before the cap, and the diagnostics of the draws it returns meet the rule."""
    C1, y = _toy(1, P=12, N0=20, seed=1)
    _, res = _stopped_run(C1, y)
    draws = res.U.shape[1]
    assert draws % 50 == 0 and 50 <= draws < 2000
    assert res.ess_min >= 150 and res.rhat_max <= 1.05


def test_chains_in_two_processes_are_the_chains_of_one():
    """Two chains split over two processes (one here, one in a spawned server): each chain starts from the
    same point with the same keys and adapts alone, so its draws are those of the one-process run; the
    tolerance 1e-9 allows the rounding of the batched kernel product (one row instead of two), which NUTS
    could amplify over 30 iterations, and is far below the posterior's spread (~0.1)."""
    C1, y = _toy(1, P=12, N0=20, seed=1)
    model = PathsModel(N=5, temperature=0.05, heads=(1,))
    cfg = SamplerConfig(chains=2, warmup=20, draws=10, seed=3)
    one = run_collapsed(C1, y, model, cfg)
    two = run_collapsed(C1, y, model, cfg, processes=2)
    assert two.U.shape == one.U.shape == (2, 10, 1, 1)
    np.testing.assert_allclose(two.U, one.U, rtol=1e-9, atol=0)
    assert two.step_sizes == pytest.approx(one.step_sizes, rel=1e-9)
    with pytest.raises(ParameterError, match="processes"):
        run_collapsed(C1, y, model, cfg, processes=3)


@pytest.mark.slow
def test_stop_rule_only_decides_where_to_stop():
    """The same seed without a rule draws exactly the configured number, and its first draws are those of
    the stopped run (bit for bit: the rule reads the draws, never changes them)."""
    C1, y = _toy(1, P=12, N0=20, seed=1)
    model, res = _stopped_run(C1, y)
    fixed = run_collapsed(C1, y, model, SamplerConfig(chains=2, warmup=100, draws=60, seed=3))
    assert fixed.U.shape[:2] == (2, 60)
    assert np.array_equal(fixed.U[:, :50], res.U[:, :50])


def test_pooled_covariance_centres_each_chain_and_shrinks():
    """Draws of a known 3-d Gaussian in 4 chains whose means differ by 100: the pooled estimate is the
    covariance (relative error ~ √(2/n) ≈ 0.02 for n = 4000; tolerance 0.1) and not inflated by the offsets;
    with the shrinkage weight n/(n + 5) and 10⁻³ · 5/(n + 5) on the diagonal exactly as documented."""
    rng = np.random.default_rng(8)
    cov = np.array([[2.0, 0.8, 0.0], [0.8, 1.0, -0.3], [0.0, -0.3, 0.5]])
    draws = rng.multivariate_normal(np.zeros(3), cov, size=(1000, 4)) + 100.0 * np.arange(4)[None, :, None]
    est = pooled_covariance(draws)
    assert np.abs(est - cov).max() <= 0.1 * np.abs(cov).max()
    centred = (draws - draws.mean(axis=0)).reshape(-1, 3)
    n = 4000
    raw = centred.T @ centred / (n - 4)
    assert np.allclose(est, n / (n + 5) * raw + 1e-3 * 5 / (n + 5) * np.eye(3), rtol=1e-12, atol=1e-15)


@pytest.mark.slow
def test_pooled_mass_samples_the_one_dimensional_closed_form(monkeypatch):
    """The staged warm-up (diagonal, then the pooled dense mass; forced on a 2-coordinate chain by lowering
    DENSE_MASS_MAX_DIM) samples the same posterior: the mean of U_1 within 4 Monte-Carlo errors of the
    quadrature, as the default warm-up in test_collapsed_nuts_matches_the_one_dimensional_closed_form."""
    from dotattn.paths import collapsed

    monkeypatch.setattr(collapsed, "DENSE_MASS_MAX_DIM", 0)
    C1, y = _toy(1, P=12, N0=20, seed=1)
    res = run_collapsed(
        C1,
        y,
        PathsModel(N=3, temperature=0.05, heads=(1,)),
        SamplerConfig(chains=4, warmup=400, draws=500, seed=0),
        pooled_mass=True,
    )
    exact = _exact_mean(C1[0, 0], y, 3, 0.05)
    assert res.divergences == 0 and res.rhat_max < 1.01
    assert abs(res.U_mean[0, 0] - exact) < 4 * res.U_mcse[0, 0], (res.U_mean, exact)


def _symmetric(u, packed):
    a, b = packed.pairs
    U = np.zeros((packed.n, packed.n))
    U[a, b] = u
    U[b, a] = u
    return U


def test_laplace_mean_is_the_prior_mean_without_data():
    """With a flat likelihood (𝒯 = 1e4) E[U] = I exactly at any N; the first-order estimate must not move the
    saddle point away from it: |estimate − I| no larger than |saddle − I| (the likelihood's residual pull,
    ~1e-3) plus 1e-4."""
    C, y = _toy(4)
    model = PathsModel(N=20, temperature=1e4)
    res = minimise_action(C, y, model)
    est = laplace_mean(res, C, y, model)
    assert est.status == "converged"
    assert np.abs(est.U_mean - np.eye(4)).max() <= np.abs(res.U - np.eye(4)).max() + 1e-4
    assert laplace_mean(res, C, y, PathsModel(N=3)).status == "invalid"  # N below d_1 = 4


@pytest.mark.parametrize("N", [0.5, 10.5, 2e6])
def test_collapsed_width_range(N):
    with pytest.raises(ParameterError, match="N"):
        check_collapsed(PathsModel(N=N), SamplerConfig())


def _exact_mean(C, y, N, temperature):
    """H = L = 1, σ² = 1: U_1 = X Y/N² with X, Y ~ χ²_N independent, so U_1 has prior density ∝
    z^{N/2−1} K_0(√z), z = N² U_1; times the Gaussian likelihood; integrated on a log grid."""
    lam, vec = np.linalg.eigh(C)
    yk2 = (vec.T @ y) ** 2
    w = np.linspace(-40, 15, 400_001)
    u = np.exp(w)
    z = N**2 * u
    logp = (N / 2) * np.log(z) + np.log(special.kve(0, np.sqrt(z))) - np.sqrt(z)
    g = u[:, None] * np.clip(lam, 0, None)[None, :] + temperature
    logp = logp - 0.5 * np.sum(np.log(g) + yk2 / g, axis=1)
    p = np.exp(logp - logp.max())
    return np.trapezoid(p * u, w) / np.trapezoid(p, w)


@pytest.mark.slow
def test_collapsed_nuts_matches_the_one_dimensional_closed_form():
    """One head, one layer: the collapsed NUTS mean of U_1 within 4 Monte-Carlo errors of the quadrature of
    its exact 1-D posterior, at N = 3 and 10; the saddle point (scalar renormalisation) differs from it."""
    C1, y = _toy(1, P=12, N0=20, seed=1)
    C = C1[0, 0]
    for N in (3, 10):
        res = run_collapsed(
            C1, y, PathsModel(N=N, temperature=0.05, heads=(1,)), SamplerConfig(chains=4, warmup=300, draws=500, seed=0)
        )
        exact = _exact_mean(C, y, N, 0.05)
        assert res.divergences == 0 and res.rhat_max < 1.01
        assert abs(res.U_mean[0, 0] - exact) < 4 * res.U_mcse[0, 0], (N, res.U_mean, exact)
        assert np.isfinite(scalar_renormalisation(C, y, N, 0.05))


@pytest.mark.parametrize(
    "args,name",
    [
        (["--N", "0.5"], "N"),
        (["--N", "2e6"], "N"),
        (["--chains", "0"], "chains"),
        (["--draws", "3"], "draws"),
        (["--P", "3"], "P"),
        (["--processes", "5"], "processes"),
        (["--processes", "0"], "processes"),
    ],
)
def test_cli_collapsed_refuses_bad_input(tmp_path, capsys, args, name):
    """One line naming the parameter, exit 2, no folder, before any computation."""
    from dotattn.cli.main import main

    out = tmp_path / "s"
    with pytest.raises(SystemExit) as err:
        main(["paths", "sample", "--collapsed", *args, "--out", str(out)])
    msg = capsys.readouterr().err.strip()
    assert err.value.code == 2 and name in msg and len(msg.splitlines()) == 1, msg
    assert not out.exists()


def test_saddle_gap_fits_recover_a_known_series():
    """Gaps built as a/N + b/N² with a = 1, b = −3 (noise-free up to rounding; the stated errors only weight
    the fit): the series fit returns a and b to rounding (rel 1e-6, 1e-5: the design's condition number) and
    χ² ≈ 0; the power law is pulled below p = 1 by the negative b; a width without a collapsed run is
    skipped."""
    from dotattn.paths.study import GAP_ENTRIES, saddle_gap_fit, series_fit

    Ns = [10, 30, 100, 300, 1000]
    a, b = 1.0, -3.0
    per_N = {}
    for N in Ns:
        g = a / N + b / N**2
        U = np.diag([2.0, 3.0]) + 0.5
        per_N[str(N)] = {
            "U": U.tolist(),
            "U_collapsed": (U * (1 + g)).tolist(),
            "U_collapsed_mcse": (np.abs(U) * 1e-4 / N).tolist(),
            "collapsed_status": "converged",
        }
    per_N["3000"] = {"U": np.eye(2).tolist()}  # no collapsed run at this width: skipped
    out = saddle_gap_fit(per_N)
    assert {tuple(r["entry"]) for r in out["rows"]} == set(GAP_ENTRIES) and len(out["rows"]) == 3 * len(Ns)
    for key in ("0,0", "1,1", "0,1"):
        fit = out["fits"][key]
        assert fit["a_1overN"] == pytest.approx(a, rel=1e-6) and fit["b_1overN2"] == pytest.approx(b, rel=1e-5)
        assert fit["chi2_series"] < 1e-6 and fit["dof_series"] == len(Ns) - 2
        assert fit["p"] < 1.0  # b < 0 lowers the small-N gaps below a/N: the single power law is flatter
    # the error of a: independent of the data, from the design alone (one point per width, unit weights)
    N = np.array(Ns, dtype=float)
    X = np.stack([1 / N, 1 / N**2], axis=1)
    want = np.sqrt(np.linalg.inv(X.T @ X)[0, 0])
    assert series_fit(N, np.zeros(N.size), np.ones(N.size))["a_error"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("N", [10, 10_000])
def test_chain_coordinates_have_unit_prior_scale(N):
    """Every Bartlett coordinate has prior spread ≈ 1 at small and large N (so NUTS starts from a
    well-scaled identity mass matrix): the standardised diagonal s = √(2ν)(log B − ½ log ν) has the exact
    prior mean √(2ν)(½(ψ(ν/2) + log 2) − ½ log ν) (−0.28 at ν = 7, −0.007 at ν = 10⁴: the map is centred on
    the mode) and the off-diagonals mean 0; 4000 prior draws: each mean within 5 of its sampling errors, each
    sample standard deviation within [0.85, 1.15] (sampling error ≈ 0.011; the exact spread
    √((ν/2) ψ'(ν/2)) is 1.05–1.08 at ν = 7–10 and 1.00005 at ν = 10⁴)."""
    from dotattn.paths.collapsed import _indices

    layout = collapsed_layout((2, 2), N)
    rng = np.random.default_rng(3)
    z = np.stack([prior_draw(layout, rng) for _ in range(4000)])
    want = np.concatenate(
        [
            np.where(
                rows == cols, np.sqrt(2 * nu) * (0.5 * (special.digamma(nu / 2) + np.log(2)) - 0.5 * np.log(nu)), 0.0
            )
            for _, _, rows, cols, nu in _indices(layout)
        ]
    )
    sd = z.std(axis=0)
    assert np.all(np.abs(z.mean(axis=0) - want) < 5 * sd / np.sqrt(len(z))), (z.mean(axis=0), want)
    assert np.all((0.85 < sd) & (sd < 1.15)), sd
