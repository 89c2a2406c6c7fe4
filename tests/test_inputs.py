"""Every refusal of bad input: through the real console script (exit 2, one line on stderr naming the
parameter, nothing written) and through the Python API (ParameterError). Each rejection happens
before any computation, so these tests are fast (the unreachable Dask scheduler waits its 5 s)."""

import json

import numpy as np
import pytest
from clitools import run

PD = ["phase-diagram", "--omega", "0.3", "--alpha", "1,2"]


def _one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize(
    "args, words",
    [
        (["phase-diagram", "--alpha", "nan", "--omega", "0.3"], ["alpha", "finite"]),
        (["phase-diagram", "--alpha", "1,inf", "--omega", "0.3"], ["alpha", "finite"]),
        (["phase-diagram", "--omega", "nan"], ["omega", "finite"]),
        (["phase-diagram", "--omega", "0.1,inf"], ["omega", "finite"]),
        (["phase-diagram", "--alpha", "2:1:5", "--omega", "0.3"], ["alpha", "start <= stop"]),
        (["phase-diagram", "--omega", "0.3", "--alpha", "0.1:2:100000"], ["alpha", "count", "10000"]),
        (["phase-diagram", "--omega", "0.3", "--alpha", "1e5"], ["alpha", "(0, 10000]"]),
        ([*PD, "--figure-omega", "7"], ["figure_omega", "0.3"]),
        ([*PD, "--figure-omega", "nan"], ["figure_omega"]),
        ([*PD, "--quad", "qmc", "--quad-order", "40"], ["quadrature order", "[1, 18]", "3,000,000"]),
        ([*PD, "--quad-order", "50"], ["quadrature order", "[1, 41]"]),
        ([*PD, "--coarse-order", "-3"], ["coarse-order", ">= 0"]),
        ([*PD, "--quad-order", "0"], ["quad-order", ">= 1"]),
        ([*PD, "--workers", "0"], ["workers", "[1, 1024]"]),
        ([*PD, "--workers", "100000"], ["workers", "[1, 1024]"]),
        ([*PD, "--dask", "not a url"], ["dask", "host:port"]),
        ([*PD, "--sigma", "1e-200"], ["sigma", "[0.01, 2]"]),
        ([*PD, "--lambda", "1e200"], ["lambda", "[1e-08, 10000]"]),
        ([*PD, "--sigma", "nan"], ["sigma", "finite"]),
        ([*PD, "--tol", "0"], ["tol", "[1e-14, 0.1]"]),
        ([*PD, "--max-iter", "10000000"], ["max_iter", "1000000"]),
        ([*PD, "--L", "100"], ["L", "[2, 64]"]),
        ([*PD, "--L", "1"], ["L", "[2, 64]"]),
        ([*PD, "--rank", "0"], ["rank", "[1, 64]"]),
        ([*PD, "--rank", "65"], ["rank", "[1, 64]"]),
        ([*PD, "--teacher-rank", "0"], ["teacher", "[1, 64]"]),
        ([*PD, "--rank", "2", "--quad-order", "100"], ["quadrature order", "6 dimensions"]),
        ([*PD, "--student", "shared"], ["student", "tied, untied"]),
        ([*PD, "--student", "untied", "--token-correlation", "0.3"], ["token_correlation", "untied student"]),
    ],
)
def test_phase_diagram_refuses(args, words, tmp_path):
    out = tmp_path / "out"
    _one_line_exit_2(run(*args, "--out", str(out)), *words)
    assert not out.exists()


def test_phase_diagram_unreachable_dask_scheduler(tmp_path, refused_port):
    out = tmp_path / "out"
    r = run(*PD, "--dask", f"tcp://127.0.0.1:{refused_port}", "--out", str(out), timeout=60)
    _one_line_exit_2(r, "dask", f"127.0.0.1:{refused_port}", "5 s")
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--alpha", "1e12"], ["alpha", "(0, 10000]"]),
        (["--alpha", "nan"], ["alpha", "finite"]),
        (["--alpha", "1", "--seed", "-1"], ["seed", ">= 0"]),
        (["--alpha", "1", "--random-starts", "100000"], ["random-starts", "[0, 1000]"]),
        (["--alpha", "1", "--random-starts", "-1"], ["random-starts", "[0, 1000]"]),
        (["--alpha", "1", "--rank", "1000"], ["rank", "[1, 64]"]),
        (["--alpha", "1", "--teacher-rank", "1000000"], ["teacher_rank", "[1, 64]"]),
        (["--alpha", "1", "--sigma", "1e-200"], ["sigma", "[0.01, 2]"]),
        (["--alpha", "1", "--lambda", "1e200"], ["lambda", "[1e-08, 10000]"]),
        (["--alpha", "1", "--damping", "inf"], ["damping", "finite"]),
        (
            ["--alpha", "1", "--check-quadrature", "--quad-order", "40"],
            ["quadrature order", "check_quadrature", "[1, 37]"],
        ),
    ],
)
def test_solve_refuses(args, words):
    _one_line_exit_2(run("solve", *args), *words)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--d", "1000000", "--alpha", "1000"], ["d x alpha x seeds", "memory", "GiB"]),
        (["--alpha", "1e12"], ["alpha", "(0, 10000]"]),
        (["--alpha", "0.5,nan"], ["alpha", "finite"]),
        (["--alpha", "2:1:3"], ["alpha", "start <= stop"]),
        (["--threads", "100000"], ["threads", "[0, 1024]"]),
        (["--steps", "1000000000"], ["steps", "[1, 1e+08]"]),
        (["--sigma", "1e-200"], ["sigma", "[0.01, 2]"]),
        (["--first-seed", "-1"], ["first_seed", ">= 0"]),
        (["--seeds", "100000"], ["seeds", "[1, 10000]"]),
        (["--test-samples", "100000000"], ["test_samples", "[1, 1e+07]"]),
    ],
)
def test_train_erm_refuses(args, words, tmp_path):
    out = tmp_path / "out"
    _one_line_exit_2(run("train-erm", *args, "--out", str(out)), *words)
    assert not out.exists()


# ----------------------------------------------------------------------------------------------
# compare: the theory folder must be for the same problem and solver settings
# ----------------------------------------------------------------------------------------------
def _erm_folder(path, problem):
    from dotattn.core.io import write_csv, write_json, write_manifest
    from dotattn.erm.records import RUN_COLUMNS, RunRecord

    run_ = RunRecord(
        alpha=1.0,
        n=100,
        init="semantic",
        seed=0,
        status="converged",
        steps=1,
        rel_change=0.0,
        grad_norm=0.0,
        train_loss=0.004,
        train_error=0.004,
        test_error=0.004,
        test_error_se=0.0,
        linear_train_error=0.0,
        linear_test_error=0.0,
        mu=np.zeros((2, 1)),
        theta=np.full((1, 1), 0.05),
        q=np.full((1, 1), 0.1),
        theta_over_sigma2=np.full((1, 1), 0.2),
        q_over_sigma2=np.full((1, 1), 0.4),
        branch="semantic",
        selected=True,
        d=100,
    )
    path.mkdir()
    write_csv(path / "runs.csv", [run_.to_row()], RUN_COLUMNS)
    params = {"problem": problem.to_dict(), "erm": {"d": 100, "alphas": [1.0], "inits": ["semantic"], "seeds": [0]}}
    write_json(path / "summary.json", {"provenance": {"parameters": params}})
    write_manifest(path, ["runs.csv", "summary.json"], params)  # as train-erm does: a verified folder
    return path


def _theory_folder(path, problem, settings, omegas=(0.3,)):
    from dotattn.core.io import write_csv, write_json
    from dotattn.positional_semantic.phase_diagram import ROW_COLUMNS

    path.mkdir()
    write_csv(path / "phase_diagram.csv", [], ROW_COLUMNS)
    write_json(
        path / "summary.json",
        {"parameters": {"problem": problem.to_dict(), "omegas": list(omegas), "alphas": [1.0], **settings.to_dict()}},
    )
    return path


@pytest.fixture
def toy_settings():
    from dotattn.positional_semantic.catalogue import default_quadrature
    from dotattn.positional_semantic.phase_diagram import SweepSettings
    from dotattn.positional_semantic.problem import Problem

    return SweepSettings(default_quadrature(Problem()))


@pytest.mark.parametrize(
    "theory_change, extra, words",
    [
        (dict(sigma=0.4), [], ["sigma", "0.4 there", "0.5 here"]),
        (dict(ridge=0.02), [], ["lambda", "0.02 there", "0.01 here"]),
        (dict(positional_attention=[[0.7, 0.3], [0.3, 0.7]]), [], ["A"]),
        ({}, ["--quad-order", "8"], ["quadrature.order", "12 there", "8 here"]),
        ({}, ["--tol", "1e-6"], ["options.tol"]),
        ({}, ["--max-iter", "50"], ["options.max_iter"]),
    ],
)
def test_compare_refuses_a_theory_of_another_problem_or_setting(theory_change, extra, words, tmp_path, toy_settings):
    from dotattn.positional_semantic.problem import Problem

    erm = _erm_folder(tmp_path / "erm", Problem())
    theory = _theory_folder(tmp_path / "pd", Problem(**theory_change), toy_settings)
    out = tmp_path / "cmp"
    _one_line_exit_2(run("compare", "--erm", str(erm), "--theory", str(theory), "--out", str(out), *extra), *words)
    assert not out.exists()


def test_compare_refuses_an_omega_not_in_the_theory(tmp_path, toy_settings):
    from dotattn.positional_semantic.problem import Problem

    erm = _erm_folder(tmp_path / "erm", Problem())
    theory = _theory_folder(tmp_path / "pd", Problem(), toy_settings, omegas=(0.1, 0.2))
    out = tmp_path / "cmp"
    _one_line_exit_2(run("compare", "--erm", str(erm), "--theory", str(theory), "--out", str(out)), "omega", "0.3")
    assert not out.exists()


def test_compare_refuses_theory_metadata_without_parameters(tmp_path):
    from dotattn.positional_semantic.problem import Problem

    erm = _erm_folder(tmp_path / "erm", Problem())
    theory = tmp_path / "pd"
    theory.mkdir()
    (theory / "phase_diagram.csv").write_text("omega,alpha\n")
    (theory / "summary.json").write_text(json.dumps({"omegas": []}))
    out = tmp_path / "cmp"
    r = run("compare", "--erm", str(erm), "--theory", str(theory), "--out", str(out))
    _one_line_exit_2(r, "summary.json", "parameters")
    assert not out.exists() and "KeyError" not in r.stderr


def test_compare_refuses_finite_size_runs_of_another_problem(tmp_path):
    from dotattn.positional_semantic.problem import Problem

    erm = _erm_folder(tmp_path / "erm", Problem())
    other = _erm_folder(tmp_path / "fs", Problem(omega=0.2))
    out = tmp_path / "cmp"
    r = run("compare", "--erm", str(erm), "--finite-size", str(other), "--out", str(out))
    _one_line_exit_2(r, "finite-size", "omega", "0.2 there", "0.3 in the ERM folder")
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words", [(["--tolerance", "nan"], ["tolerance", "finite"]), (["--tolerance", "5"], ["tolerance", "(0, 1]"])]
)
def test_compare_refuses_bad_tolerance(args, words, tmp_path):
    from dotattn.positional_semantic.problem import Problem

    erm = _erm_folder(tmp_path / "erm", Problem())
    out = tmp_path / "cmp"
    _one_line_exit_2(run("compare", "--erm", str(erm), "--out", str(out), *args), *words)
    assert not out.exists()


def test_first_difference_names_the_first_differing_field():
    from dotattn.core.integrity import first_difference

    asked = {"sigma": 0.5, "A": [[0.6, 0.4], [0.4, 0.6]], "quadrature": {"kind": "qmc", "order": 14}}
    assert first_difference(asked, json.loads(json.dumps(asked))) is None
    assert first_difference(asked, {**asked, "sigma": 0.4}) == ("sigma", 0.5, 0.4)
    assert first_difference(asked, {**asked, "quadrature": {"kind": "qmc", "order": 12}}) == (
        "quadrature.order",
        14,
        12,
    )
    assert first_difference(asked, {"sigma": 0.5, "A": asked["A"]}) == ("quadrature.kind", "qmc", "missing")


# ----------------------------------------------------------------------------------------------
# near-zero theory values: absolute differences
# ----------------------------------------------------------------------------------------------
def test_theory_near_zero_is_compared_by_absolute_difference():
    from dotattn.erm.records import RunRecord
    from dotattn.positional_semantic.problem import Problem
    from dotattn.positional_semantic.records import BranchPoint
    from dotattn.theory_vs_erm.comparison import ABSOLUTE, NEAR_ZERO, RELATIVE, ComparisonRow, ErmRun, comparison_table

    problem = Problem()
    s2 = problem.sigma**2

    def point(alpha, theta):
        return BranchPoint(
            omega=0.3,
            alpha=alpha,
            branch="semantic",
            status="converged",
            selected=True,
            iterations=1,
            residual=0.0,
            q=np.full((1, 1), 0.1),
            V=np.eye(1),
            theta=np.full((1, 1), theta),
            mu=np.zeros((2, 1)),
            train_loss=0.004,
            test_error=0.004,
        )

    # θ/σ² = 0.4 at α = 2 sets the scale; at α = 0.25 the theory has θ/σ² = 1e-4 (≈ 0), ERM 0.1
    theory = [point(2.0, 0.4 * s2), point(0.25, 1e-4 * s2)]
    run_ = RunRecord(
        alpha=0.25,
        n=25,
        init="semantic",
        seed=0,
        status="converged",
        steps=1,
        rel_change=0.0,
        grad_norm=0.0,
        train_loss=0.004,
        train_error=0.004,
        test_error=0.004,
        test_error_se=0.0,
        linear_train_error=0.0,
        linear_test_error=0.0,
        mu=np.zeros((2, 1)),
        theta=np.full((1, 1), 0.1 * s2),
        q=np.full((1, 1), 0.1),
        theta_over_sigma2=np.full((1, 1), 0.1),
        q_over_sigma2=np.full((1, 1), 0.4),
        branch="semantic",
        selected=True,
        d=100,
    )
    (row,) = comparison_table(ErmRun(path=None, problem=problem, d=100, runs=(run_,)), theory, tolerance=0.05)
    assert 1e-4 < NEAR_ZERO * 0.4
    assert row.diff_kind["theta_norm"] == ABSOLUTE and np.isnan(row.rel_diff["theta_norm"])
    assert row.abs_diff["theta_norm"] == pytest.approx(0.1 - 1e-4)
    assert row.diff_kind["test_error"] == RELATIVE and row.max_rel_diff == pytest.approx(0.0, abs=1e-12)
    assert row.near_zero() == ["theta_norm"]
    assert not row.agrees  # |0.1| > 0.05 x scale 0.4
    back = ComparisonRow.from_row({k: str(v) for k, v in row.to_row().items()})  # CSV cells
    assert back.diff_kind == row.diff_kind and back.abs_diff == pytest.approx(row.abs_diff)
    (loose,) = comparison_table(ErmRun(path=None, problem=problem, d=100, runs=(run_,)), theory, tolerance=0.3)
    assert loose.agrees  # 0.1 <= 0.3 x 0.4


# ----------------------------------------------------------------------------------------------
# the Python API
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(L=None), "L"),
        (dict(rank="x"), "rank"),
        (dict(teacher_rank=1e9), "teacher_rank"),
        (dict(sigma=1e-200), "sigma"),
        (dict(sigma=1e3), "sigma"),
        (dict(ridge=1e200), "lambda"),
        (dict(ridge=1e-12), "lambda"),
        (dict(omega=float("nan")), "omega"),
    ],
)
def test_problem_rejects(kwargs, word):
    from dotattn.core.validation import ParameterError
    from dotattn.positional_semantic.problem import Problem

    with pytest.raises(ParameterError, match=word):
        Problem(**kwargs)


def test_python_api_rejects_bad_counts():
    from dotattn.core.validation import ParameterError
    from dotattn.positional_semantic.catalogue import QuadratureSpec, solve
    from dotattn.positional_semantic.phase_diagram import check_grids, run_phase_diagram
    from dotattn.positional_semantic.problem import Problem

    p = Problem()
    for kwargs, word in ((dict(n_random=-1), "n_random"), (dict(n_random=10**6), "n_random"), (dict(seed=-2), "seed")):
        with pytest.raises(ParameterError, match=word):
            solve(p, 1.0, **kwargs)
    with pytest.raises(ParameterError, match="alpha"):
        solve(p, 1e12)
    with pytest.raises(ParameterError, match="quadrature order"):
        solve(p, 1.0, quadrature=QuadratureSpec("qmc", 40, None))
    for kwargs, word in (
        (dict(workers=0), "workers"),
        (dict(workers=2.5), "workers"),
        (dict(dask_address="not a url"), "dask"),
    ):
        with pytest.raises(ParameterError, match=word):
            run_phase_diagram(p, [0.3], [1.0], **kwargs)
    for omegas, alphas, word in (
        ([0.3], [float("nan")], "alpha"),
        ([0.3], [1.0, float("inf")], "alpha"),
        ([float("nan")], [1.0], "omega"),
        ([0.3], [2e4], "alpha"),
    ):
        with pytest.raises(ParameterError, match=word):
            check_grids(omegas, alphas)


def test_connect_dask_times_out_with_one_line(refused_port):
    pytest.importorskip("distributed")
    from dotattn.core.runner import connect_dask
    from dotattn.core.validation import ParameterError

    with pytest.raises(ParameterError, match=f"no scheduler answered at tcp://127.0.0.1:{refused_port} within 0.5 s"):
        connect_dask(f"tcp://127.0.0.1:{refused_port}", timeout=0.5)


def test_erm_memory_estimate_refuses_runs_that_do_not_fit():
    from dotattn.core.resources import MEMORY_FRACTION
    from dotattn.core.validation import ParameterError
    from dotattn.erm.config import ErmConfig
    from dotattn.positional_semantic.problem import Problem

    p = Problem()
    small = ErmConfig(d=100, alphas=(1.0,), seeds=2)
    big = ErmConfig(d=100, alphas=(1.0,), seeds=4)
    need = small.memory_bytes(p)
    # the estimate grows with d, alpha and seeds and at least covers the training tokens
    assert big.memory_bytes(p) > need >= 2 * 100 * 2 * 100 * 8
    assert ErmConfig(d=200, alphas=(1.0,), seeds=2).memory_bytes(p) > need
    assert ErmConfig(d=100, alphas=(2.0,), seeds=2).memory_bytes(p) > need
    small.check(p, memory=int(need / MEMORY_FRACTION) + 1)
    with pytest.raises(ParameterError, match="d x alpha x seeds must fit in memory"):
        small.check(p, memory=int(need / MEMORY_FRACTION) - 1)
    small.check(p, memory=None)  # unknown memory: no check


def test_solve_table_names_the_start_of_each_fixed_point():
    from dotattn.cli.solve import start_name

    assert start_name("positional") == "positional (informed)"
    assert start_name("semantic") == "semantic (informed)"
    assert start_name("random-3") == "random 3"
    assert start_name("uninformative") == "uninformative"
