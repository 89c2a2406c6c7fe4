"""The `aim` and `paths` commands hold as the phase diagram does: --out checked, locked and refused
before anything is computed, one run per folder, rows checked against their settings and identities
before a folder is verified or sealed, the API refusing what the CLI refuses, memory refused up front,
signals ending a run cleanly, and no traceback on valid input."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
from clitools import ENV, dotattn_command, run, start_until

from dotattn.core.io import read_csv, write_csv
from dotattn.core.validation import ParameterError

ROOT = Path(__file__).resolve().parent.parent
AIM = ROOT / "results" / "aim"
SE = AIM / "se_softmax_T2_rho0.5"
AMP = AIM / "amp_softmax_d100_rho0.5_T2"
SE_ARGS = ["aim", "state-evolution", "--rho", "0.5", "--alpha", "0.1,0.2"]
AMP_ARGS = ["aim", "amp", "--d", "10", "--alpha", "0.3", "--seeds", "2", "--max-iter", "20"]


def one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    return lines[0]


def _edit_cell(path: Path, row: int, column: str, value: str) -> None:
    comment = path.read_text().splitlines()[0].lstrip("# ")
    rows = read_csv(path)
    rows[row][column] = value
    write_csv(path, rows, list(rows[0]), comment=comment)


# ---------------------------------------------------------------------------------------------
# --out: checked before computing, locked, one run per folder
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "out, why", [("/proc/dotattn-x", "cannot be written"), ("a" * 300, "at most 255"), ("/", "file-system root")]
)
def test_bad_out_refused_before_solving(out, why, tmp_path):
    before = set(os.listdir("/"))
    proc = subprocess.run(
        [*dotattn_command(), *SE_ARGS, "--out", out], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120
    )
    line = one_line(proc)
    assert why in line and "alpha=" not in proc.stderr  # nothing solved first
    assert set(os.listdir("/")) == before and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        SE_ARGS,
        AMP_ARGS,
        ["paths", "theory", "--P", "20", "--P-test", "20", "--T", "10", "--N", "10", "--subsets", "all"],
    ],
)
@pytest.mark.serial
def test_a_folder_in_use_is_refused(args, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / ".dotattn.lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")  # this live process holds it
    line = one_line(run(*args, "--out", str(out), timeout=300))
    assert "in use by another run" in line and sorted(p.name for p in out.iterdir()) == [".dotattn.lock"]


@pytest.mark.slow
def test_another_commands_folder_and_other_settings_are_refused(tmp_path):
    se = tmp_path / "se"
    assert run(*SE_ARGS, "--quiet", "--out", str(se), timeout=300).returncode == 0
    before = {p.name: p.read_bytes() for p in se.iterdir()}
    assert "another command's output" in one_line(run(*AMP_ARGS, "--quiet", "--out", str(se), timeout=300))
    assert {p.name: p.read_bytes() for p in se.iterdir()} == before
    line = one_line(run("aim", "state-evolution", "--rho", "1", "--alpha", "0.1", "--out", str(se), timeout=300))
    assert "made for other settings" in line and "rho = 0.5 there, 1.0 now" in line
    amp = tmp_path / "amp"
    shutil.copytree(AMP, amp)
    assert "another command's output" in one_line(run(*SE_ARGS, "--out", str(amp), timeout=300))


@pytest.mark.slow
def test_amp_past_perfect_recovery_and_resume_from_cached_runs(tmp_path):
    """alpha = 0.5 at rho = 0.5 is above perfect recovery: AMP's own state evolution reaches V = 0 (it
    raised 'q must be < Q0' after every run). A second run with the same settings takes every run from
    the folder's cache; other settings are refused."""
    out = tmp_path / "amp"
    first = run("aim", "amp", "--d", "10", "--alpha", "0.5", "--seeds", "1", "--out", str(out), timeout=600)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert "1 runs of up to 300 iterations" in first.stderr and "ETA" in first.stderr
    assert run("verify", str(out)).returncode == 0
    again = run("aim", "amp", "--d", "10", "--alpha", "0.5", "--seeds", "1", "--out", str(out), timeout=600)
    assert again.returncode == 0 and "1 cached" in again.stderr and "(cached)" in again.stderr
    assert "d = 10 there, 12 now" in one_line(
        run("aim", "amp", "--d", "12", "--alpha", "0.5", "--seeds", "1", "--out", str(out), timeout=600)
    )


@pytest.mark.slow
@pytest.mark.serial
def test_amp_interrupted_keeps_finished_runs_and_resumes(tmp_path):
    out = tmp_path / "amp"
    args = ["aim", "amp", "--d", "12", "--alpha", "0.2,0.3", "--seeds", "2", "--max-iter", "40", "--out", str(out)]
    proc = start_until(args, out / "cache", "amp_alpha*.json", timeout=600)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert "run the same command again to resume" in err.strip().splitlines()[-1]
    assert not (out / "manifest.json").exists() and list((out / "cache").glob("amp_alpha*.json"))
    done = run(*args, timeout=600)
    assert done.returncode == 0 and "cached" in done.stderr, done.stderr
    assert run("verify", str(out)).returncode == 0


def test_amp_state_evolution_past_perfect_recovery_reduced():
    """Reduced form of the test above: AMP's own state evolution at alpha = 0.5, rho = 0.5 (above perfect
    recovery) reaches V = 0 and stays there."""
    from dotattn.aim.algo_study import StudySpec, _theory
    from dotattn.aim.amp import se_trajectory

    spec = StudySpec(d=10, rho=0.5, T=2, alphas=(0.5,), seeds=1)
    _, _, q_hat, _, mmse_prior = _theory(spec)
    V = se_trajectory(lambda v: q_hat(0.5, v), lambda D: mmse_prior(D, 0.5), 40)
    assert V[0] == 1.0 and V[-1] == 0.0 and all(v >= 0 for v in V)


def test_amp_study_resumes_from_its_cache_reduced(tmp_path):
    """Reduced form of the tests above: a second study with the same settings takes every run from the
    cache (identical rows); one more seed computes only that seed."""
    from dotattn.aim.algo_study import StudySpec, cached_runs, run_amp_study
    from dotattn.aim.amp import AMPConfig

    spec, config = StudySpec(d=6, rho=0.5, T=2, alphas=(0.2,), seeds=2), AMPConfig(max_iter=5)
    flags: list[bool] = []
    first = run_amp_study(spec, config, cache_dir=tmp_path, on_run=flags.append)
    assert flags == [False, False] and cached_runs(tmp_path, "amp", spec, config) == 2
    again = run_amp_study(spec, config, cache_dir=tmp_path, on_run=flags.append)
    key = lambda runs: [(r.seed, r.mse, r.status, r.iterations, r.seconds, r.message) for r in runs]
    assert flags[2:] == [True, True] and key(again[0]) == key(first[0]) and len(again[2]) == len(first[2])
    more = StudySpec(d=6, rho=0.5, T=2, alphas=(0.2,), seeds=3)
    run_amp_study(more, config, cache_dir=tmp_path, on_run=flags.append)
    assert flags[4:] == [True, True, False]


def test_a_finished_folder_of_other_settings_is_refused_reduced(tmp_path):
    """Reduced form of the folder tests: the check every writing command makes before computing."""
    from dotattn.verify import check_output_folder

    folder = _copy(ROOT / "results" / "paths" / "markov_2paths", tmp_path, "th")
    made_for = json.loads((folder / "manifest.json").read_text())["made_for"]
    check_output_folder(folder, "paths-theory", {**made_for, "command": "another command line"})  # same run
    with pytest.raises(ParameterError, match="made for other settings .N = "):
        check_output_folder(folder, "paths-theory", {**made_for, "N": [10.0]})
    with pytest.raises(ParameterError, match="another command's output"):
        check_output_folder(folder, "aim-algorithms", {})
    check_output_folder(tmp_path / "new", "aim-algorithms", {})  # nothing there yet


# ---------------------------------------------------------------------------------------------
# verify: rows against the manifest's settings and their identities; malformed manifests
# ---------------------------------------------------------------------------------------------
def _copy(src: Path, tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def test_an_edited_manifest_setting_is_caught(tmp_path):
    from dotattn.core.io import IntegrityError
    from dotattn.verify import verify_folder

    folder = _copy(AMP, tmp_path, "amp")
    man = json.loads((folder / "manifest.json").read_text())
    man["made_for"]["d"] = 500
    (folder / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(IntegrityError, match="manifest's d = 500"):
        verify_folder(folder)


@pytest.mark.parametrize("value", [None, ["x"], [[1.0]], "0.1"])
def test_malformed_manifest_alphas_refused_in_one_line(value, tmp_path):
    folder = _copy(SE, tmp_path, "se")
    man = json.loads((folder / "manifest.json").read_text())
    man["made_for"]["alpha"] = value
    (folder / "manifest.json").write_text(json.dumps(man))
    from dotattn.core.io import IntegrityError
    from dotattn.verify import verify_folder

    with pytest.raises(IntegrityError, match="not a list of finite numbers"):
        verify_folder(folder)
    if value is None:  # and the command reading it, as a user meets it
        assert "not a list of finite numbers" in one_line(
            run("aim", "figure", "--from", str(folder), "--out", str(tmp_path / "f.png"))
        )


def test_deeply_nested_manifest_refused_in_one_line(tmp_path):
    folder = _copy(SE, tmp_path, "se")
    (folder / "manifest.json").write_text('{"files": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "not a dotattn manifest" in one_line(run("verify", str(folder)))


@pytest.mark.parametrize(
    "src, file, column, value, why",
    [
        (SE, "points.csv", "q", "0.9", "mmse + q"),
        (SE, "points.csv", "alpha_bar", "0.5", "alpha_bar"),
        (AMP, "alphas.csv", "mse_mean", "0.3", "not the mean of its runs"),
        (AMP, "alphas.csv", "converged", "7", "converged"),
        (AMP, "alphas.csv", "gap_in_se", "-5", "its columns give"),
        (AMP, "alphas.csv", "beats_bound", "True", "beats_bound = True"),
    ],
)
def test_seal_refuses_rows_that_contradict_each_other(src, file, column, value, why, tmp_path):
    folder = _copy(src, tmp_path, src.name)
    (folder / "manifest.json").unlink()
    _edit_cell(folder / file, 3, column, value)
    assert why in one_line(run("verify", "--seal", str(folder)))
    assert not (folder / "manifest.json").exists()


@pytest.mark.parametrize("column, value, why", [("n", "12", "n = 12"), ("seed", "9", "seed 9")])
def test_rows_are_checked_against_the_manifest_settings(column, value, why, tmp_path):
    """The row check of an amp folder, given its manifest (after the checksums passed)."""
    from dotattn.aim.integrity import AIM_ALGORITHMS
    from dotattn.core.io import IntegrityError

    folder = _copy(AMP, tmp_path, "amp")
    _edit_cell(folder / "runs.csv", 3, column, value)
    with pytest.raises(IntegrityError, match=why):
        AIM_ALGORITHMS.check(folder, json.loads((folder / "manifest.json").read_text()))


def test_committed_aim_and_paths_folders_verify():
    from dotattn.verify import verify_folder

    folders = [
        p.parent
        for p in (ROOT / "results").rglob("manifest.json")
        if "cache" not in p.parts and p.parent.parts[-2] in ("aim", "paths")
    ]
    assert len(folders) >= 20
    for folder in folders:
        verify_folder(folder)


# ---------------------------------------------------------------------------------------------
# the API refuses what the CLI refuses (one error class, also a TypeError for wrong types)
# ---------------------------------------------------------------------------------------------
def test_api_refusals():
    from dotattn.cli.options import parse_grid

    from dotattn.aim import channels, model, prior, state_evolution
    from dotattn.aim.algo_study import StudySpec, check_memory, run_amp_study
    from dotattn.aim.plotting import mmse_figure, read_state_evolution
    from dotattn.paths.data import markov_path_data
    from dotattn.paths.study import run_theory_study
    from dotattn.verify import verify_folder

    for call, why in [
        (lambda: channels.q_hat("softmax", -1.0, 0.1, 0.5, 2), "alpha"),
        (lambda: channels.q_hat("softmax", 1.0, 0.1, 0.5, 2.5), "T"),
        (lambda: channels.q_hat("softmax", 1.0, 1.5, 0.5, 2), "q must be < Q0"),
        (lambda: state_evolution.solve_point("softmax", 0.1, 0.5, 2, nodes=1), "nodes"),
        (lambda: state_evolution.solve_point("softmax", 0.1, 0.5, 2, nodes=2.5), "nodes"),
        (lambda: model.make_data(10, 0.5, 2, 0.1, seed=1.5), "seed"),
        (lambda: verify_folder(None), "folder"),
        (lambda: StudySpec(d=10, rho=0.5, T=2, alphas=0.1), "alphas must be a sequence"),
        (lambda: run_amp_study(None, None), "spec"),
        (lambda: check_memory(StudySpec(d=10, rho=0.5, T=2, alphas=(0.1,)), memory="x"), "memory"),
        (lambda: run_theory_study(None), "config"),
        (lambda: markov_path_data(None), "task"),
        (lambda: read_state_evolution(None), "folder"),
        (lambda: prior.mmse_prior(-1.0, 0.5), "delta"),
        (lambda: prior.mmse_prior(0.1, 0.0), "rho"),
        (lambda: mmse_figure([[1]]), "SEPoint"),
    ]:
        with pytest.raises(ParameterError, match=why):
            call()
    assert issubclass(ParameterError, TypeError) and issubclass(ParameterError, ValueError)
    assert parse_grid("alpha", ["1.5e-12"]) == [1.5e-12]  # was rounded to 2e-12
    assert parse_grid("alpha", ["0.1:0.3:3"]) == [0.1, 0.2, 0.3]


def test_alpha_c_include_of_a_cell_without_the_asked_seeds_is_refused():
    from test_study_merge import _cell, _config

    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.alpha_c import run_study

    supplied = {(0.3, 250): _cell(0.3, 250, [0, 1])}
    with pytest.raises(ParameterError, match="seeds 2-3.*seeds 0-1"):
        run_study(Problem(omega=0.3), _config(ds=(250,), seeds=2, first_seed=2), theory=False, supplied=supplied)


# ---------------------------------------------------------------------------------------------
# no traceback on valid input
# ---------------------------------------------------------------------------------------------
def test_figure_of_an_amp_folder_whose_runs_all_diverged(tmp_path):
    from dotattn.aim.algo_study import RunRow, StudySpec, alpha_summary, write_study
    from dotattn.core.status import DIVERGED

    spec = StudySpec(d=10, rho=0.5, T=2, alphas=(0.1,), seeds=2)
    runs = [RunRow("amp", 0.1, s, -1, spec.n(0.1), float("nan"), DIVERGED, 3) for s in range(2)]
    rows = [alpha_summary("amp", 0.1, [r.mse for r in runs], [r.status for r in runs], 0.5)]
    out = tmp_path / "amp"
    out.mkdir()
    write_study(out, spec, {"estimator": "amp", "max_iter": 3, "tol": 1e-5, "damping": 0.5}, runs, rows, None, 1.0)
    proc = run("aim", "figure", "--from", str(SE), "--points", str(out), "--out", str(tmp_path / "f.png"))
    assert proc.returncode == 0 and (tmp_path / "f.png").is_file(), proc.stderr


def test_theory_study_with_a_one_chain_sample(tmp_path):
    """A one-chain sample has no Monte-Carlo error (null in sample.json): the study and its figures
    take it ('yerr must not contain None' before)."""
    from dotattn.paths.study import StudyConfig, run_theory_study, write_theory_study
    from dotattn.paths.task import MarkovTask

    config = StudyConfig(task=MarkovTask(P=20, P_test=20, T=10), widths=(10.0,), subsets=("all",))
    U = np.eye(4)
    sample = {
        "N": 10.0,
        "accuracy_sampled": 0.8,
        "accuracy_error": None,
        "loss_sampled": 0.5,
        "loss_error": None,
        "status": "not_converged",
        "draws_total": 50,
        "seconds": 1.0,
        "U_sampled_code_order": U.tolist(),
        "U_sampled": U.tolist(),
        "U_zscores": U.tolist(),
        "diagnostics": {},
    }
    study = run_theory_study(config, [sample])
    assert math.isnan(study.points[-1].accuracy_error)
    write_theory_study(study, tmp_path, "test")
    from dotattn.verify import verify_folder

    assert verify_folder(tmp_path) == "paths-theory"  # U of points.csv and summary.json agree
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(r["paths"].split("|") == summary["paths"] for r in read_csv(tmp_path / "points.csv"))  # one order


# ---------------------------------------------------------------------------------------------
# resources and signals
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["theory", "sample"])
def test_paths_memory_refused_up_front(command, tmp_path):
    out = tmp_path / "out"
    line = one_line(
        run(
            "paths",
            command,
            "--P",
            "20000",
            "--P-test",
            "100000",
            "--T",
            "1000",
            "--N",
            "10",
            "--out",
            str(out),
            timeout=120,
        )
    )
    assert "needs about" in line and "GiB" in line and not out.exists()


@pytest.mark.slow
def test_paths_theory_without_N_does_not_rewrite_an_earlier_folder(tmp_path):
    out = tmp_path / "th"
    small = ["paths", "theory", "--P", "20", "--P-test", "20", "--T", "10", "--subsets", "all", "--quiet"]
    assert run(*small, "--N", "10", "--out", str(out), timeout=600).returncode == 0
    before = (out / "points.csv").read_bytes()
    assert "N = [10.0] there" in one_line(run(*small, "--out", str(out), timeout=600))
    assert (out / "points.csv").read_bytes() == before


@pytest.mark.slow
@pytest.mark.serial
def test_paths_theory_sigterm_stops_cleanly(tmp_path):
    out = tmp_path / "th"
    proc = subprocess.Popen(
        [
            *dotattn_command(),
            "paths",
            "theory",
            "--P",
            "200",
            "--P-test",
            "2000",
            "--T",
            "30",
            "--N",
            "10,30,100,300",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        _wait_for_line(proc, "N=")  # the first width solved: computing, folder open and locked
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "paths theory: interrupted (SIGTERM); nothing was written"
    assert not out.exists()


def _wait_for_line(proc: subprocess.Popen, text: str) -> None:
    for line in proc.stderr:
        if text in line:
            return
    raise AssertionError(f"the command ended (rc {proc.wait()}) before printing {text!r}")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.serial
def test_paths_sample_stops_cleanly_on_signals(signum, tmp_path):
    """Sampling runs in a process of its own: a signal ends the command at once with 128 + signal and
    one line (it segfaulted or hung when the signal was handled inside JAX), no folder, no process left."""
    pytest.importorskip("numpyro")
    from clitools import alive, children, wait_for

    out = tmp_path / "s"
    proc = subprocess.Popen(
        [
            *dotattn_command(),
            "paths",
            "sample",
            "--P",
            "20",
            "--P-test",
            "20",
            "--T",
            "10",
            "--N",
            "4",
            "--chains",
            "2",
            "--warmup",
            "20000",
            "--draws",
            "20000",
            "--quiet",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        import time

        deadline = time.monotonic() + 300
        while not children(proc.pid) and time.monotonic() < deadline:  # the sampler's process has started
            time.sleep(0.2)
        kids = children(proc.pid)
        time.sleep(5)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum and len(err.strip().splitlines()) == 1, err
    assert "nothing was written" in err and not out.exists()
    wait_for(lambda: not any(alive(k) for k in kids), 15, f"the sampler's processes {sorted(kids)} to exit")
