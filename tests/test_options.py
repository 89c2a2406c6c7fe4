"""Options that had no test (issue 22 item 6): erm-alpha-c --unpaired / --independent / --teacher orthonormal /
--dtype (float32 refused), train-erm --optimizer batched-lbfgs, solve --quad qmc and --hat-form stein from the CLI, the
writers and readers of dotattn.theory_vs_erm.output called directly, and the scaling of estimate_seconds."""

import dataclasses
import json
import math

import numpy as np
import pytest
from clitools import run

from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.catalogue import QuadratureSpec
from dotattn.positional_semantic.phase_diagram import SweepSettings
from dotattn.positional_semantic.problem import Problem


# -- erm-alpha-c -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def alpha_c_cells():
    """One small cell (ω = 0.3, d = 32, 2 seeds, α = 0.8, 1.3, 1.8) with the default choices and with each
    non-default one alone."""
    pytest.importorskip("torch")
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, run_study

    base = AlphaCConfig(omegas=(0.3,), ds=(32,), alphas=(0.8, 1.3, 1.8), seeds=2, device="cpu")
    out = {}
    for name, change in [
        ("default", {}),
        ("unpaired", {"paired": False}),
        ("independent", {"nested": False}),
        ("orthonormal", {"teacher": "orthonormal"}),
    ]:
        (out[name],) = run_study(Problem(omega=0.3), dataclasses.replace(base, **change), theory=False, threads=1).cells
    return out


def test_unpaired_changes_only_the_positional_starts_data(alpha_c_cells):
    """--unpaired trains the positional start on the data of seed s + UNPAIRED_OFFSET: the semantic runs are
    the default ones (same seeds, same data: equal to round-off), the positional ones are not (other data)."""
    base, un = alpha_c_cells["default"], alpha_c_cells["unpaired"]
    np.testing.assert_allclose(un.et_sem, base.et_sem, rtol=1e-10)
    assert np.all(np.abs(un.et_pos / base.et_pos - 1) > 1e-3)


def test_independent_gives_each_alpha_its_own_samples(alpha_c_cells):
    """--independent: α = 0.8 uses the first block of the stream in both modes (the same runs), every later α
    its own disjoint block instead of the nested first round(α d) samples (other runs)."""
    base, ind = alpha_c_cells["default"], alpha_c_cells["independent"]
    for a in ("et_sem", "et_pos"):
        x, y = getattr(ind, a), getattr(base, a)
        np.testing.assert_allclose(x[:, 0], y[:, 0], rtol=1e-10)
        assert np.all(np.abs(x[:, 1:] / y[:, 1:] - 1) > 1e-3)


def test_orthonormal_teacher_has_the_identity_overlap():
    """--teacher orthonormal: Q*ᵀQ*/d = I exactly, so the untrained semantic start (Q = Q*; one step of
    lr = 1e-300) has q/σ² = θ/σ² = 1 to round-off, where a Gaussian teacher gives 1 + O(1/√d)."""
    pytest.importorskip("torch")
    from dotattn.erm.experiment import run_erm

    kw = dict(d=32, alphas=[2.0], inits="semantic", seeds=2, steps=1, lr=1e-300, test_samples=50, device="cpu")
    orth = run_erm(Problem(omega=0.3), teacher="orthonormal", **kw)
    gauss = run_erm(Problem(omega=0.3), **kw)
    for r in orth.runs:
        assert r.q_over_sigma2.item() == pytest.approx(1.0, rel=1e-12)
        assert r.theta_over_sigma2.item() == pytest.approx(1.0, rel=1e-12)
    assert all(abs(r.q_over_sigma2.item() - 1) > 1e-6 for r in gauss.runs)


def test_orthonormal_teacher_changes_the_study(alpha_c_cells):
    base, orth = alpha_c_cells["default"], alpha_c_cells["orthonormal"]
    assert np.all(np.abs(orth.et_sem / base.et_sem - 1) > 1e-3)


def test_erm_alpha_c_non_default_options_through_the_cli(tmp_path):
    """--unpaired --independent --teacher orthonormal together, end to end: the study runs and records the
    choices; --dtype float32 is refused before any folder is made (its runs never reach the study's tol)."""
    pytest.importorskip("torch")
    args = [
        "erm-alpha-c",
        "--omega",
        "0.3",
        "--d",
        "24",
        "--seeds",
        "2",
        "--alpha",
        "0.8,1.6",
        "--steps",
        "30",
        "--unpaired",
        "--independent",
        "--teacher",
        "orthonormal",
        "--threads",
        "1",
        "--workers",
        "1",
        "--no-theory",
        "--quiet",
    ]
    refused = run(*args, "--dtype", "float32", "--out", str(tmp_path / "float32"))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "dtype must be float64" in refused.stderr and not (tmp_path / "float32").exists()
    out = tmp_path / "float64"
    r = run(*args, "--dtype", "float64", "--out", str(out))
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    cfg = summary["provenance"]["parameters"]["config"]
    assert (cfg["paired"], cfg["nested"], cfg["teacher"], cfg["dtype"]) == (False, False, "orthonormal", "float64")
    got = {(int(row["seed"]), float(row["alpha"])) for row in _rows(out / "delta.csv")}
    assert len(got) == 4  # 2 seeds x 2 α


def _rows(path):
    from dotattn.core.io import read_csv

    return read_csv(path)


# -- train-erm --optimizer batched-lbfgs -------------------------------------------------------------
def test_train_erm_batched_lbfgs_reaches_one_minimum_from_both_starts(tmp_path):
    """At d = 32, α = 2 (seed 0) both informed starts of batched L-BFGS end in the same minimum (the toy has a
    single one there at this size: GD from both starts agrees to 3e-13, measured): two different paths give
    the same training loss, to 1e-8 relative, and a gradient norm below 1e-6."""
    pytest.importorskip("torch")
    out = tmp_path / "erm"
    r = run(
        "train-erm",
        "--d",
        "32",
        "--alpha",
        "2",
        "--omega",
        "0.3",
        "--seeds",
        "1",
        "--optimizer",
        "batched-lbfgs",
        "--steps",
        "300",
        "--tol",
        "1e-10",
        "--test-samples",
        "100",
        "--threads",
        "1",
        "--quiet",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    from dotattn.theory_vs_erm.output import load_erm

    runs = {x.init: x for x in load_erm(out).runs}
    assert set(runs) == {"semantic", "positional"}
    assert runs["semantic"].train_loss == pytest.approx(runs["positional"].train_loss, rel=1e-8)
    assert all(x.grad_norm < 1e-6 for x in runs.values())
    assert (
        json.loads((out / "summary.json").read_text())["provenance"]["parameters"]["erm"]["optimizer"]
        == "batched-lbfgs"
    )


# -- solve --quad qmc, --hat-form stein ------------------------------------------------------------------
def _solve_json(*extra):
    r = run("solve", "--alpha", "2", "--omega", "0.3", "--random-starts", "0", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return {f["branch"]: f for f in json.loads(r.stdout)["fixed_points"] if f["status"] == "converged"}


@pytest.fixture(scope="module")
def gauss_hermite_solve():
    return _solve_json("--quad-order", "12", "--coarse-order", "6")


def test_solve_qmc_from_the_cli(gauss_hermite_solve):
    """--quad qmc: the fixed points of a scrambled Sobol rule (2^10 points x 8) carry their standard errors,
    and e_t lies within 5 standard errors (+ the Gauss-Hermite rule's own |12 - 6| error) of the converged
    Gauss-Hermite value (a 5-sigma band: a real disagreement, not noise, if it fails)."""
    qmc = _solve_json("--quad", "qmc", "--quad-order", "10")
    for name in ("positional", "semantic"):
        q, g = qmc[name], gauss_hermite_solve[name]
        se = q["quadrature_error"]["train_loss"]
        assert se > 0 and "qmc" in q["quadrature_error"]["method"].lower(), q["quadrature_error"]
        assert abs(q["train_loss"] - g["train_loss"]) <= 5 * se + g["quadrature_error"]["train_loss"], (q, g)


def test_solve_stein_hat_form_from_the_cli(gauss_hermite_solve):
    """--hat-form stein: the same fixed points to the rule's error (|order 12 - order 6| of each)."""
    stein = _solve_json("--quad-order", "12", "--coarse-order", "6", "--hat-form", "stein")
    for name in ("positional", "semantic"):
        s, g = stein[name], gauss_hermite_solve[name]
        for key in ("train_loss", "test_error"):
            assert abs(s[key] - g[key]) <= g["quadrature_error"][key], (name, key, s[key], g[key])
    r = run("solve", "--alpha", "2", "--rank", "2", "--hat-form", "stein")
    assert r.returncode == 2 and "stein" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# -- dotattn.theory_vs_erm.output directly ---------------------------------------------------------------------------
SMALL = SweepSettings(QuadratureSpec("gauss-hermite", 4, None))


@pytest.fixture(scope="module")
def small_diagram():
    from dotattn.positional_semantic.phase_diagram import run_phase_diagram

    return run_phase_diagram(Problem(), [0.2, 0.3], [1.0, 1.6], settings=SMALL, workers=1)


def test_phase_diagram_writer_and_readers_round_trip(small_diagram, tmp_path):
    from dotattn.positional_semantic.output import read_boundaries, read_phase_diagram, write_phase_diagram
    from dotattn.theory_vs_erm.output import read_theory

    paths = write_phase_diagram(small_diagram, tmp_path / "pd")
    assert {"csv", "boundaries", "summary", "phases", "phase_plane"} <= set(paths)
    rows = read_phase_diagram(tmp_path / "pd")
    assert [r.to_row() for r in rows] == [r.to_row() for r in small_diagram.rows]  # CSV cells keep repr digits
    assert [r.to_row() for r in read_phase_diagram(tmp_path / "pd", omega=0.3)] == [
        r.to_row() for r in small_diagram.rows if r.omega == 0.3
    ]
    assert read_boundaries(tmp_path / "pd") == [b for s in small_diagram.summaries for b in s.boundaries]
    theory = read_theory(tmp_path / "pd", Problem(omega=0.3), SMALL)
    assert theory and {r.omega for r in theory} == {0.3}


def test_phase_diagram_readers_refuse(small_diagram, tmp_path):
    from dotattn.core.io import IntegrityError
    from dotattn.positional_semantic.output import read_phase_diagram, write_phase_diagram
    from dotattn.theory_vs_erm.output import read_theory

    write_phase_diagram(small_diagram, tmp_path / "pd")
    with pytest.raises(ParameterError):  # another problem (σ) than the folder's
        read_theory(tmp_path / "pd", Problem(omega=0.3, sigma=0.4), SMALL)
    with pytest.raises(ParameterError):  # other solver settings
        read_theory(tmp_path / "pd", Problem(omega=0.3), SweepSettings(QuadratureSpec("gauss-hermite", 6, None)))
    with pytest.raises(ParameterError):  # an ω the folder does not have
        read_theory(tmp_path / "pd", Problem(omega=0.25), SMALL)
    csv = tmp_path / "pd" / "phase_diagram.csv"
    csv.write_text(csv.read_text().replace("positional", "semantic", 1))  # one edited cell
    with pytest.raises(IntegrityError):
        read_phase_diagram(tmp_path / "pd")


def test_erm_writer_and_reader_round_trip_and_refuse(tmp_path):
    pytest.importorskip("torch")
    from dotattn.core.io import IntegrityError
    from dotattn.erm.experiment import run_erm
    from dotattn.theory_vs_erm.output import load_erm, write_erm

    res = run_erm(
        Problem(omega=0.3), d=16, alphas=[1.0, 2.0], inits="both", seeds=2, steps=20, test_samples=50, device="cpu"
    )
    summary = write_erm(tmp_path / "erm", res, {"command": "test"})
    assert len(summary) == len(res.summary_rows())
    back = load_erm(tmp_path / "erm")
    assert back.d == 16 and back.problem.to_dict() == res.problem.to_dict()
    assert [r.to_row() for r in back.runs] == [r.to_row() for r in res.runs]
    with pytest.raises(ParameterError):
        load_erm(tmp_path / "missing")
    runs = tmp_path / "erm" / "runs.csv"
    runs.write_text(runs.read_text() + runs.read_text().splitlines()[-1] + "\n")  # a duplicated row
    with pytest.raises(IntegrityError):
        load_erm(tmp_path / "erm")


# -- estimate_seconds ----------------------------------------------------------------------------------
def test_estimate_seconds_scales_with_columns_workers_and_nodes():
    """The estimate's structure (not wall-clock): zero for no column; proportional to the number of rounds
    ceil(columns / workers); more workers than columns do not help; for Gauss-Hermite the node term grows
    as order^D (D = 3 Gaussian dimensions of the toy), so the increments from order 4 to 8 to 12 follow
    (8³ − 4³) : (12³ − 8³); QMC counts 2^order x scramblings nodes."""
    from dotattn.positional_semantic.phase_diagram import estimate_seconds

    p, alphas = Problem(), [1.0, 1.5, 2.0]
    s = SweepSettings(QuadratureSpec("gauss-hermite", 6, None))
    one = estimate_seconds(p, alphas, s, 1, 1)
    assert estimate_seconds(p, alphas, s, 0, 4) == 0.0 and one > 0
    assert estimate_seconds(p, alphas, s, 5, 1) == pytest.approx(5 * one, rel=1e-12)
    assert estimate_seconds(p, alphas, s, 5, 2) == pytest.approx(3 * one, rel=1e-12)  # rounds of 2, 2, 1
    assert estimate_seconds(p, alphas, s, 2, 8) == pytest.approx(one, rel=1e-12)
    assert estimate_seconds(p, alphas * 2, s, 1, 1) > one  # more α, more fixed points
    D = p.gaussian_dim
    e = {
        k: estimate_seconds(p, alphas, SweepSettings(QuadratureSpec("gauss-hermite", k, None)), 1, 1)
        for k in (4, 8, 12)
    }
    assert (e[12] - e[8]) / (e[8] - e[4]) == pytest.approx((12**D - 8**D) / (8**D - 4**D), rel=1e-9)
    q1 = estimate_seconds(p, alphas, SweepSettings(QuadratureSpec("qmc", 8, None, scramblings=4)), 1, 1)
    q2 = estimate_seconds(p, alphas, SweepSettings(QuadratureSpec("qmc", 9, None, scramblings=4)), 1, 1)
    q3 = estimate_seconds(p, alphas, SweepSettings(QuadratureSpec("qmc", 8, None, scramblings=8)), 1, 1)
    assert q2 > q1 and q3 == pytest.approx(q2, rel=1e-12)  # 2^9 x 4 = 2^8 x 8 nodes
    assert math.isfinite(estimate_seconds(Problem(rank=2), alphas, s, 1, 1))
    # the untied student costs STUDENT_COST_FACTORS["untied"] times the tied one on a rule of the same size
    from dotattn.positional_semantic.phase_diagram import STUDENT_COST_FACTORS

    qmc = SweepSettings(QuadratureSpec("qmc", 10, None, scramblings=4))
    assert estimate_seconds(Problem(student="untied"), alphas, qmc, 1, 1) == pytest.approx(
        STUDENT_COST_FACTORS["untied"] * estimate_seconds(p, alphas, qmc, 1, 1), rel=1e-12
    )


def test_fixed_point_estimate_counts_every_refinement_solve():
    """The start line's count includes the refinement: a column refined on R rules solves exactly
    refine_fixed_points = 3R + 1 more fixed points than without (α_c: both branches on R rules; α_lin: one
    branch on R rules plus its slope solve), and the whole column stays within the estimate."""
    from dotattn.positional_semantic.catalogue import QuadratureSpec
    from dotattn.positional_semantic.phase_diagram import (
        SweepSettings,
        column_fixed_points_estimate,
        omega_column,
        refine_fixed_points,
    )
    from dotattn.positional_semantic.problem import Problem
    from dotattn.positional_semantic.refine import RefineSpec

    p, alphas = Problem(omega=0.3), [1.2, 1.3, 1.4, 1.5, 1.6]
    quad, refine = QuadratureSpec("gauss-hermite", 6, 4), RefineSpec(log2_points=8, rules=2)
    refined = omega_column(p.to_dict(), 0.3, alphas, SweepSettings(quad, refine=refine).to_dict())
    plain = omega_column(p.to_dict(), 0.3, alphas, SweepSettings(quad).to_dict())
    assert set(refined["summary"]["refined"]) == {"alpha_c", "alpha_lin"}
    assert refined["summary"]["refined"]["alpha_lin"] != refined["summary"]["refined"]["alpha_c"]
    assert refined["fixed_points"] - plain["fixed_points"] == refine_fixed_points(refine) == 7
    assert refined["fixed_points"] <= column_fixed_points_estimate(p, alphas, refine)
    assert column_fixed_points_estimate(p, alphas, refine) - column_fixed_points_estimate(p, alphas) == 7
    assert set(refined["cpu_seconds"]) >= {"follow", "two_sided", "refine", "stability", "records"}
