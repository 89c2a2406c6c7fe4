"""ERM α_c: the crossing estimator (synthetic curves), the batched L-BFGS, the orthonormal teacher,
and `dotattn erm-alpha-c` end to end (bad input, cache, a reduced study in a band around the theory)."""

from __future__ import annotations

import json
import math
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from clitools import ENV, dotattn_command, start_until, with_workers
from test_erm import _one_thread  # noqa: F401  (autouse: one torch thread)

from dotattn.core.io import read_csv
from dotattn.theory_vs_erm.crossing import (
    CROSSING,
    NO_CROSSING,
    SEVERAL,
    CellSummary,
    FiniteSizeFit,
    SeedCrossing,
    bootstrap_mean_ci,
    crossings,
    fit_finite_size,
    summarise_cell,
)


# -- estimator -------------------------------------------------------------------------------
def _linear_curves(roots: np.ndarray, alphas: np.ndarray, slope: float = 1e-3) -> np.ndarray:
    """Δ_s(α) = slope (root_s − α): + below the root, − above; linear, so interpolation is exact."""
    return slope * (roots[:, None] - alphas[None, :])


def test_crossing_recovers_known_roots_exactly_on_linear_curves():
    rng = np.random.default_rng(1)
    alphas = np.linspace(0.5, 2.0, 16)
    roots = rng.uniform(0.6, 1.9, size=50)
    root, lo, hi, changes, valid = crossings(alphas, _linear_curves(roots, alphas))
    np.testing.assert_allclose(root, roots, atol=1e-12)
    assert np.all((lo <= roots) & (roots <= hi)) and np.all(changes == 1) and np.all(valid == 16)
    np.testing.assert_allclose(hi - lo, alphas[1] - alphas[0], atol=1e-12)


def test_crossing_skips_invalid_points_and_reports_none_and_several():
    alphas = np.array([1.0, 1.1, 1.2, 1.3, 1.4])
    D = np.array(
        [
            [2.0, 1.0, -1.0, -2.0, -3.0],  # root 1.15
            [1.0, 2.0, 3.0, 4.0, 5.0],  # no crossing (always positional)
            [-1.0, -2.0, -3.0, -4.0, -5.0],  # no + -> - change (always semantic)
            [1.0, -1.0, 1.0, -1.0, -2.0],  # several: first root 1.05, 3 changes
            [1.0, 99.0, -1.0, -1.0, -1.0],
        ]
    )  # point 1.1 invalid: root between 1.0 and 1.2
    valid = np.ones_like(D, dtype=bool)
    valid[4, 1] = False
    root, lo, hi, changes, n_valid = crossings(alphas, D, valid)
    np.testing.assert_allclose(root[[0, 3, 4]], [1.15, 1.05, 1.1], atol=1e-12)
    assert np.isnan(root[1]) and np.isnan(root[2])
    assert changes.tolist() == [1, 0, 0, 3, 1]
    assert n_valid.tolist() == [5, 5, 5, 5, 4]
    assert (lo[4], hi[4]) == (1.0, 1.2)


def test_bootstrap_interval_covers_the_true_root_at_its_level():
    """Synthetic seeds: root_s = 1.25 + N(0, 0.12) (known noise); 400 repetitions of 24 seeds."""
    rng = np.random.default_rng(7)
    alphas = np.linspace(0.5, 2.0, 31)
    true, hits, reps = 1.25, 0, 400
    for r in range(reps):
        roots = true + 0.12 * rng.standard_normal(24)
        est, *_ = crossings(alphas, _linear_curves(roots, alphas))
        lo, hi = bootstrap_mean_ci(est, 0.95, n_boot=1000, seed=r)
        hits += lo <= true <= hi
    coverage = hits / reps
    # percentile bootstrap of a mean of 24 normal values: slightly below 0.95; binomial sd ~0.011
    assert 0.90 <= coverage <= 0.985, coverage


def test_bootstrap_is_reproducible_and_needs_two_values():
    x = np.array([1.0, 1.2, 1.1, 1.4])
    assert bootstrap_mean_ci(x, seed=3) == bootstrap_mean_ci(x, seed=3)
    assert all(math.isnan(v) for v in bootstrap_mean_ci(np.array([1.0])))


def test_summarise_cell_counts_outcomes_and_averages_only_crossings():
    recs = [
        SeedCrossing(0.3, 100, s, CROSSING if s < 3 else NO_CROSSING, [1.0, 1.2, 1.4, np.nan][s], 1.0, 1.1, 1, 5, "")
        for s in range(4)
    ]
    recs.append(SeedCrossing(0.3, 100, 4, SEVERAL, 1.6, 1.5, 1.7, 3, 5, "1.1:same_minimum"))
    s = summarise_cell(0.3, 100, recs, excluded_points=1, seconds=2.0)
    assert (s.seeds, s.crossings, s.no_crossing, s.several) == (5, 4, 1, 1)
    assert s.alpha_c == pytest.approx(1.3)
    assert s.sd == pytest.approx(np.std([1.0, 1.2, 1.4, 1.6], ddof=1))
    assert s.ci_lo < s.alpha_c < s.ci_hi


def test_records_round_trip_through_rows():
    x = SeedCrossing(0.1, 250, 3, CROSSING, 0.8, 0.7, 0.9, 1, 15, "0.5:same_minimum")
    assert SeedCrossing.from_row({k: str(v) for k, v in x.to_row().items()}) == x
    c = CellSummary(0.1, 250, 32, 30, 2, 1, 0.8, 0.02, 0.1, 0.76, 0.84, 0.95, 3, 12.5)
    assert CellSummary.from_row(c.to_row()) == c
    f = FiniteSizeFit("1/d", 1.0, 1.2, 1.1, 1.3, 40.0, 0.5, 1, 0.95)
    assert FiniteSizeFit.from_row(f.to_row()) == f
    # a missing integer cell is named (a missing float is NaN, a missing text "")
    for empty in ("", None):
        with pytest.raises(ValueError, match="seed is missing"):
            SeedCrossing.from_row({**x.to_row(), "seed": empty})


def test_finite_size_fit_recovers_a_known_limit():
    rng = np.random.default_rng(11)
    ds = [250, 500, 1000, 2000]
    exact = [np.full(8, 1.25 + 40.0 / d) + 1e-9 * rng.standard_normal(8) for d in ds]
    f = fit_finite_size(ds, exact, "1/d")
    assert f.alpha_inf == pytest.approx(1.25, abs=1e-6) and f.slope == pytest.approx(40.0, rel=1e-4)
    assert f.dof == 2
    hits = 0
    for r in range(100):  # coverage of the extrapolated interval with known noise
        noisy = [1.25 + 40.0 / d + 0.1 * rng.standard_normal(32) for d in ds]
        g = fit_finite_size(ds, noisy, "1/d", n_boot=500, seed=r)
        hits += g.ci_lo <= 1.25 <= g.ci_hi
    assert hits >= 85
    assert math.isnan(fit_finite_size([250], [np.ones(4)]).alpha_inf)


# -- optimiser and teacher ---------------------------------------------------------------------
def test_batched_lbfgs_reaches_relative_stationarity_and_the_gd_minimum():
    import sys

    from dotattn.core.training import STATUS_CONVERGED, relative_stationarity, train

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "benchmarks"))
    from erm_optimizer import setup

    risk, W0, ridge = setup(40, 1.5, 2, 0.3, "orthonormal")
    out = train(risk, W0, optimizer="batched-lbfgs", steps=500, tol=1e-7, ridge=ridge)
    assert set(out.status_names()) == {STATUS_CONVERGED}
    Q = out.Q.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(risk(Q).sum(), Q)
    assert float(relative_stationarity(g, out.Q, ridge).max()) <= 1e-7
    gd = train(risk, W0, optimizer="gd", steps=20000, lr=1.5, tol=1e-15)
    np.testing.assert_allclose(out.loss.numpy(), gd.loss.numpy(), rtol=1e-8)
    assert int(out.steps.max()) < 300 and out.evaluations < 400


def test_batched_lbfgs_needs_the_ridge():
    from dotattn.core.training import train

    with pytest.raises(ValueError, match="ridge"):
        train(lambda W: W.square().sum((-1, -2)), torch.ones(2, 1, 3, dtype=torch.float64), optimizer="batched-lbfgs")


def test_orthonormal_teacher_is_exactly_orthonormal():
    from dotattn.erm.data import teacher_weights

    Qs = teacher_weights(50, 2, seed=4, kind="orthonormal")
    np.testing.assert_allclose((Qs.T @ Qs / 50).numpy(), np.eye(2), atol=1e-12)
    G = teacher_weights(50, 2, seed=4)
    assert float((Qs[:, 0] * G[:, 0]).sum()) > 0  # the same draw, normalised (first column's direction)


# -- the command -------------------------------------------------------------------------------
def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*dotattn_command(), *with_workers(["erm-alpha-c", *args])],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "bad,word",
    [
        (["--alpha", "1.0"], "alpha"),
        (["--seeds", "1"], "seeds"),
        (["--d", "1"], "d"),
        (["--optimizer", "sgd"], "optimizer"),
        (["--device", "tpu"], "device"),
        (["--omega", "1.5"], "omega"),
        (["--dtype", "float32"], "dtype"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_no_folder(tmp_path, bad, word):
    out = tmp_path / "never"
    args = {"--d": "64", "--seeds": "4", "--alpha": "0.8,1.6", "--omega": "0.3"}
    for k, v in zip(bad[::2], bad[1::2], strict=True):
        args[k] = v
    flat = [x for kv in args.items() for x in kv]
    res = _run(*flat, "--out", str(out))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0]
    assert not out.exists()


def test_d64_end_to_end_and_resume_from_cache(tmp_path):
    out = tmp_path / "ac"
    args = [
        "--omega",
        "0.3",
        "--d",
        "48,64",
        "--seeds",
        "3",
        "--alpha",
        "0.8:1.8:6",
        "--threads",
        "1",
        "--no-theory",
        "--out",
        str(out),
    ]
    res = _run(*args)
    assert res.returncode == 0, res.stderr
    for name in ("crossings.csv", "cells.csv", "delta.csv", "summary.json", "delta_et.png", "alpha_c_vs_d.png"):
        assert (out / name).is_file()
    summ = json.loads((out / "summary.json").read_text())
    (w,) = summ["omegas"]
    assert set(w) >= {"omega", "theory_alpha_c", "by_d", "extrapolated"}
    assert [b["d"] for b in w["by_d"]] == [48, 64]
    for b in w["by_d"]:
        assert set(b) >= {"d", "seeds", "alpha_c", "ci", "no_crossing"} and b["seeds"] == 3
    assert set(w["extrapolated"]) >= {"alpha_c", "ci", "model"}
    assert summ["provenance"]["parameters"]["config"]["optimizer"] == "batched-lbfgs"
    rows = read_csv(out / "crossings.csv")
    assert len(rows) == 6
    first = (out / "crossings.csv").read_text().splitlines()[1:]
    res2 = _run(*args)
    assert res2.returncode == 0 and "2 units from cache" in res2.stdout
    assert (out / "crossings.csv").read_text().splitlines()[1:] == first


@pytest.mark.parametrize(
    "d, seeds, alphas, max_no_crossing, max_ci_width",
    [
        pytest.param(128, 12, "0.7:1.9:7", 4, None, id="reduced"),  # CI
        pytest.param(500, 16, "0.7:1.9:13", None, 0.3, id="full", marks=pytest.mark.slow),
    ],
)
def test_study_crosses_in_a_band_around_the_theory(tmp_path, d, seeds, alphas, max_no_crossing, max_ci_width):
    """ω = 0.3, the theory computed by the command: the finite-d crossing α_c in [0.9, 1.7] around the theory's
    α_c(0.3) ≈ 1.26 (a band for d = 128-500 finite-size shifts). Reduced (CI): d = 128, 12 seeds, at most 4
    seeds without a crossing; full (slow): d = 500, 16 seeds, a 95 % CI narrower than 0.3."""
    out = tmp_path / "ac"
    res = _run(
        "--omega",
        "0.3",
        "--d",
        str(d),
        "--seeds",
        str(seeds),
        "--alpha",
        alphas,
        "--threads",
        "1",
        "--out",
        str(out),
        timeout=3600,
    )
    assert res.returncode == 0, res.stderr
    (w,) = json.loads((out / "summary.json").read_text())["omegas"]
    assert 1.1 < w["theory_alpha_c"] < 1.4  # the theory's α_c(0.3) (SPEC section 4: α_c grows with ω, ~1.25)
    (b,) = w["by_d"]
    if max_no_crossing is not None:
        assert b["no_crossing"] <= max_no_crossing
    assert 0.9 <= b["alpha_c"] <= 1.7
    if max_ci_width is not None:
        assert b["ci"][1] - b["ci"][0] < max_ci_width


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find the worker processes")
@pytest.mark.serial
def test_sigterm_stops_cleanly_and_the_study_resumes(tmp_path):
    """SIGTERM to the main process only: exit 143 with one line, workers gone, finished cells cached, resume."""
    from clitools import alive as _alive
    from clitools import children as _children
    from clitools import wait_for as _wait_for

    out = tmp_path / "ac"
    args = [
        "--omega",
        "0.3",
        "--d",
        "48,400,500",
        "--seeds",
        "3",
        "--alpha",
        "0.8:1.8:6",
        "--threads",
        "1",
        "--workers",
        "2",
        "--no-theory",
        "--quiet",
        "--out",
        str(out),
    ]
    proc = start_until(["erm-alpha-c", *args], out / "cache", "cell_*.json")  # until a cell is cached
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    # the d = 400 and 500 cells take far longer than the first d = 48 cell: the signal lands on a running
    # study (were it to finish first, that would be a failure of this test's design, not a skip)
    assert proc.returncode == 143, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("erm-alpha-c: interrupted;"), err
    _wait_for(lambda: not [w for w in workers if _alive(w)], 15, f"workers {sorted(workers)} to exit")  # no orphans
    assert not list(out.rglob("*.tmp")) and not (out / ".dotattn.lock").exists()
    cached = len(list((out / "cache").glob("cell_*.json")))
    again = _run(*[a for a in args if a != "--quiet"])
    assert again.returncode == 0, again.stderr
    assert f"{cached} units from cache" in again.stdout


def test_dask_local_cluster_gives_the_in_process_study():
    distributed = pytest.importorskip("distributed")
    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, run_study

    cfg = AlphaCConfig(omegas=(0.3,), ds=(32, 48), alphas=(0.8, 1.3, 1.8), seeds=2, device="cpu")
    local = run_study(Problem(omega=0.3), cfg, theory=False)
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        viadask = run_study(Problem(omega=0.3), cfg, theory=False, dask_address=client)
    from conftest import assert_rows_close

    # another executor (a dask worker thread): equal to the tolerance of conftest.assert_rows_close, NaN = NaN
    assert_rows_close([x.to_row() for x in viadask.crossings], [x.to_row() for x in local.crossings])
    assert len(viadask.crossings) == 4
