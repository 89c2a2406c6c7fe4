"""Issue 18 (items 4, 5, 7), library side: ParameterError for wrong types and missing keys, the
bounded positional Gram matrix, the Dask schemes, the output-folder check, one branch labeller and
one converged status."""

import numpy as np
import pytest

import dotattn
from dotattn.core.validation import ParameterError, check_dask_scheme, check_out_dir
from dotattn.positional_semantic.labels import branch_label
from dotattn.positional_semantic.problem import GRAM_MAX, PROBLEM_KEYS, Problem


# ---------------------------------------------------------------------------------------------
# wrong types and missing keys
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: dotattn.solve("toy", alpha=2), "problem"),
        (lambda: dotattn.solve(Problem(), 2, options="fast"), "options"),
        (lambda: dotattn.solve(Problem(), 2, quadrature="gauss-hermite"), "quadrature"),
        (lambda: Problem.from_dict({}), "missing the key"),
        (lambda: Problem.from_dict("toy"), "problem must be a dict"),
        (lambda: Problem.from_dict({**Problem().to_dict(), "sigma2": 1.0}), "unknown key"),
    ],
)
def test_api_refuses_wrong_types_and_missing_keys(call, name):
    with pytest.raises(ParameterError, match=name):
        call()


def test_from_dict_names_each_missing_key_and_round_trips():
    d = Problem(omega=0.2).to_dict()
    assert tuple(d) == PROBLEM_KEYS and Problem.from_dict(d) == Problem(omega=0.2)
    for key in PROBLEM_KEYS:
        partial = {k: v for k, v in d.items() if k != key}
        with pytest.raises(ParameterError, match=rf"missing the key\(s\) {key} "):
            Problem.from_dict(partial)


def test_alpha_c_config_and_run_study_refuse_before_any_work(tmp_path):
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, run_study

    base = dict(omegas=(0.3,), ds=(20,), alphas=(1.0, 2.0), seeds=2)
    with pytest.raises(ParameterError, match=r"alpha must be in \(0, 10000\], got 20000"):
        AlphaCConfig(**{**base, "alphas": (1, 2e4)})
    with pytest.raises(ParameterError, match="fit in memory"):
        AlphaCConfig(**{**base, "ds": (100_000_000,)})
    with pytest.raises(ParameterError, match="level"):
        AlphaCConfig(**base, level="high")
    with pytest.raises(ParameterError, match="model"):
        AlphaCConfig(**base, model=["1/d"])
    cfg = AlphaCConfig(**base)
    cache = tmp_path / "cache"
    for kwargs, name in (
        (dict(workers=0), "workers"),
        (dict(threads=-1), "threads"),
        (dict(dask_address="tls://127.0.0.1:8786"), "tls"),
    ):
        with pytest.raises(ParameterError, match=name):
            run_study(Problem(), cfg, cache_dir=cache, theory=False, **kwargs)
    with pytest.raises(ParameterError, match="problem must be a dotattn.Problem"):
        run_study("toy", cfg, cache_dir=cache)
    with pytest.raises(ParameterError, match="config must be"):
        run_study(Problem(), "config", cache_dir=cache)
    assert not cache.exists()


def test_erm_config_and_runners_refuse_wrong_types():
    from dotattn.erm.config import ErmConfig
    from dotattn.erm.restarts import RestartConfig

    with pytest.raises(ParameterError, match="init must be one of"):
        ErmConfig(d=10, alphas=(1.0,), inits=3)
    with pytest.raises(ParameterError, match="problem must be a dotattn.Problem"):
        ErmConfig(d=10, alphas=(1.0,)).check("toy")
    cfg = RestartConfig(d=10, alpha=1.0, seeds=(0,), starts=("random",))
    with pytest.raises(ParameterError, match="problem must be a dotattn.Problem"):
        cfg.check({"L": 2})
    torch = pytest.importorskip("torch")  # noqa: F841  (run_config / run_restarts live beside torch)
    from dotattn.erm.experiment import run_config
    from dotattn.erm.restarts import run_restarts

    with pytest.raises(ParameterError, match="config must be a dotattn.erm.ErmConfig"):
        run_config(Problem(), {"d": 10})
    with pytest.raises(ParameterError, match="config must be a dotattn.erm.restarts.RestartConfig"):
        run_restarts(Problem(), "config")


# ---------------------------------------------------------------------------------------------
# bounded positional Gram matrix
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("g", [4.5, 1e3, 1e150, 1e308])
def test_large_positional_gram_refused_with_the_reason(g):
    with pytest.raises(ParameterError, match=r"positional_gram entries must be in \[-4, 4\].*saturate"):
        Problem(positional_gram=[[g, -g], [-g, g]])
    with pytest.raises(ParameterError, match="positional_gram entries"):
        Problem(L=3, positional_attention=np.full((3, 3), 1 / 3).tolist(), positional_gram=(g * np.eye(3)).tolist())


def test_positional_branch_found_at_the_gram_bound():
    """The bound is where the measurement said the positional start still converges: G = 4 [[1,-1],[-1,1]]
    at alpha = 2 (the hardest alpha measured), a cheap Gauss-Hermite 6 rule as in the measurement."""
    p = Problem(omega=0.3, positional_gram=[[GRAM_MAX, -GRAM_MAX], [-GRAM_MAX, GRAM_MAX]])
    cat = dotattn.solve(
        p, 2.0, quadrature=dotattn.QuadratureSpec("gauss-hermite", 6, None), n_random=0, stability=False
    )
    pos = [e for e in cat.fixed_points if e.init == "positional"][0]
    assert pos.converged and np.isfinite(pos.result.train_loss)


# ---------------------------------------------------------------------------------------------
# Dask schemes and the output folder
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "address, need",
    [
        ("tls://127.0.0.1:8786", "TLS certificates"),
        ("wss://127.0.0.1:8786", "TLS certificates"),
        ("ucx://127.0.0.1:8786", "UCX"),
        ("udp://127.0.0.1:8786", "unknown scheme"),
    ],
)
def test_dask_schemes_without_configuration_are_refused(address, need):
    from dotattn.core.runner import check_dask_address

    with pytest.raises(ParameterError, match=need):
        check_dask_scheme(address)
    with pytest.raises(ParameterError, match=need):
        check_dask_address(address)


def test_dask_accepted_schemes():
    for a in ("127.0.0.1:8786", "tcp://127.0.0.1:8786", "ws://host:1", "inproc://10.0.0.1/1/2"):
        assert check_dask_scheme(a) == a


def _double(x, report=None):
    return 2 * x


@pytest.mark.parametrize("protocol", ["tcp://", "ws://"])
def test_dask_scheme_runs_tasks_on_a_local_cluster(protocol):
    """Each accepted scheme reaches a real scheduler through the address string (connect_dask), the
    port chosen by the OS."""
    distributed = pytest.importorskip("distributed")
    from dotattn.core.runner import run_tasks

    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol=protocol,
        host="127.0.0.1",
        scheduler_port=0,
        dashboard_address=None,
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith(protocol)
        got = {}
        run_tasks(_double, [(1,), (5,)], dask_address=address, on_result=got.__setitem__)
    assert got == {0: 2, 1: 10}


@pytest.mark.parametrize("value", ["", "   ", None, 3])
def test_empty_or_non_path_out_refused(value):
    with pytest.raises(ParameterError, match="out must be"):
        check_out_dir(value)


# ---------------------------------------------------------------------------------------------
# one labeller, one converged status
# ---------------------------------------------------------------------------------------------
def test_rank_one_is_never_mixed():
    assert branch_label(True, True) == "mixed" and branch_label(True, True, rank=2) == "mixed"
    assert branch_label(True, True, rank=1, positional_dominant=True) == "positional"
    assert branch_label(True, True, rank=1, positional_dominant=False) == "semantic"
    assert branch_label(True, False, rank=1) == "positional" and branch_label(False, False, rank=1) == "uninformative"


def test_run_branch_uses_the_rank_of_mu():
    from dotattn.erm.records import BRANCH_M, BRANCH_THETA, run_branch

    # the d = 100 run of results/erm/finite_size that was labelled mixed: mu = (-0.234, 0.234), theta/s2 = 0.218
    assert run_branch(np.array([[0.218]]), np.array([[-0.234], [0.234]])) == "positional"
    # semantic dominates once theta is further above its threshold (in threshold units) than mu
    assert run_branch(np.array([[5 * BRANCH_THETA]]), np.array([[2 * BRANCH_M], [0.0]])) == "semantic"
    # rank 2: one positional and one semantic column is mixed
    assert run_branch(np.array([[0.0], [0.5]]), np.array([[0.3, 0.0], [-0.3, 0.0]])) == "mixed"


def test_status_converged_has_one_home():
    import dotattn.core.status as status

    assert status.STATUS_CONVERGED == status.CONVERGED and status.STATUS_CONVERGED in status.STATUSES
    pytest.importorskip("torch")
    from dotattn.core import training

    assert training.STATUS_CONVERGED is status.STATUS_CONVERGED
    assert training.STATUS[1] == status.STATUS_CONVERGED
    assert status.from_training(training.STATUS[0]) == status.NOT_CONVERGED


def test_pooled_seed_rows_pool_every_seed():
    from dotattn.erm.restart_records import POOLED_SEED, RestartRecord, summarise_restarts

    z = np.zeros((1, 1))
    runs = [
        RestartRecord(
            d=10,
            alpha=1.0,
            n=10,
            seed=s,
            restart=k,
            start="random",
            status="converged",
            steps=5,
            stationarity=1e-8,
            train_loss=0.1 * (s + 1),
            train_error=0.1,
            test_error=0.2,
            test_error_se=0.01,
            branch="semantic",
            mu=np.zeros((2, 1)),
            theta=z,
            q=z,
            teacher_rho=z,
            teacher_nu=np.zeros((1, 2)),
        )
        for s in (0, 1)
        for k in range(2)
    ]
    rows = summarise_restarts(runs, [])
    assert [r.seed for r in rows] == [0, 1, POOLED_SEED]
    pooled = rows[-1]
    assert pooled.runs == 4 and pooled.converged == 4
    assert pooled.train_loss_mean == pytest.approx(0.15, rel=1e-12)  # mean of 0.1, 0.1, 0.2, 0.2 (rounding only)


def test_alpha_c_config_from_dict_names_missing_and_unknown_keys():
    from dotattn.core.validation import ParameterError
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig

    with pytest.raises(ParameterError, match="lacks the key 'omegas'"):
        AlphaCConfig.from_dict({})
    with pytest.raises(ParameterError, match="unknown key 'colour'"):
        AlphaCConfig.from_dict({"omegas": [0.3], "ds": [20], "alphas": [1, 2], "colour": "red"})
    with pytest.raises(ParameterError, match="config"):
        AlphaCConfig.from_dict("omegas=0.3")
    cfg = AlphaCConfig(omegas=(0.3,), ds=(20,), alphas=(1.0, 2.0), seeds=2)
    assert AlphaCConfig.from_dict(cfg.to_dict()) == cfg


def test_solver_options_symmetry_must_be_boolean():
    from dotattn.core.validation import ParameterError
    from dotattn.positional_semantic.state_evolution import SolverOptions

    with pytest.raises(ParameterError, match="symmetry must be True or False"):
        SolverOptions(symmetry="x")
    assert SolverOptions(symmetry=False).symmetry is False


def test_run_phase_diagram_names_a_wrong_settings_type():
    from dotattn.core.validation import ParameterError
    from dotattn.positional_semantic.phase_diagram import run_phase_diagram
    from dotattn.positional_semantic.problem import Problem

    with pytest.raises(
        ParameterError, match="settings must be a dotattn.positional_semantic.phase_diagram.SweepSettings"
    ):
        run_phase_diagram(Problem(), [0.3], [1.0], settings="x")
