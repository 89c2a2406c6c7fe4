"""Long commands speak the same way (dotattn.core.progress): a start line with an estimate, then progress
lines off a terminal; and they keep their finished units when stopped (resume)."""

import re
import signal

import pytest
from clitools import run, start_until
from conftest import reduced_and_full

ERM = ["train-erm", "--d", "60", "--alpha", "1,2", "--test-samples", "200", "--steps"]


def progress_lines(stderr: str, label: str, unit: str) -> list[tuple[int, int]]:
    """(done, total) of every progress line ``LABEL: k/N UNIT ... ETA ...`` in ``stderr``."""
    pat = re.compile(rf"^{re.escape(label)}: (\d+)/(\d+) {re.escape(unit)}\b.*ETA ")
    return [(int(m[1]), int(m[2])) for m in map(pat.match, stderr.splitlines()) if m]


def check_speaks(stderr: str, label: str, unit: str) -> list[tuple[int, int]]:
    """The start line comes first and states units, an estimate and the load it assumes; progress lines
    follow with a fixed denominator and end at it."""
    first = stderr.splitlines()[0]
    assert first.startswith(f"{label}: ") and "typically " in first and "at the present load" in first, first
    assert re.search(r"typically (~\d+ (s|min|h)|under 1 s)", first) and "calibrated in " in first, first
    seen = progress_lines(stderr, label, unit)
    assert seen, stderr
    assert len({total for _, total in seen}) == 1, seen  # the denominator never grows
    return seen


def test_train_erm_start_line_and_progress_off_a_terminal(tmp_path):
    r = run(*ERM, "100", "--seeds", "2", "--out", str(tmp_path / "erm"))  # stderr is a pipe: not a terminal
    assert r.returncode == 0, r.stderr
    assert check_speaks(r.stderr, "train-erm", "seeds")[-1] == (2, 2)  # ends at its denominator
    assert "2 alpha x 2 inits x 2 seeds = 8 runs" in r.stderr.splitlines()[0]
    q = run(*ERM, "100", "--seeds", "2", "--quiet", "--out", str(tmp_path / "erm2"))
    assert q.returncode == 0 and q.stderr == "" and q.stdout == ""


@pytest.mark.serial
def test_train_erm_keeps_finished_seeds_on_sigterm_and_resumes(tmp_path):
    out = tmp_path / "erm"
    args = [*ERM, "3000", "--tol", "1e-30", "--seeds", "3", "--out", str(out)]
    proc = start_until(args, out / "cache", "seed_*.json")  # wait for a finished seed, no fixed sleep
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    kept = len(list((out / "cache").glob("seed_*.json")))
    assert 1 <= kept < 3
    assert f"the {kept} seeds finished are kept in {out / 'cache'}" in err and "run the same command again" in err
    assert not (out / "runs.csv").exists()
    again = run(*args)
    assert again.returncode == 0, again.stderr
    assert f"3 seeds ({kept} cached)" in again.stderr.splitlines()[0]
    assert progress_lines(again.stderr, "train-erm", "seeds")[-1] == (3 - kept, 3 - kept)
    rows = (out / "runs.csv").read_text().splitlines()
    assert len([r for r in rows if not r.startswith("#")]) == 1 + 2 * 2 * 3  # header + every run
    assert run("verify", str(out)).returncode == 0


SAMPLE = ["paths", "sample", "--P", "8", "--P-test", "8", "--T", "4", "--N", "3", "--warmup", "40", "--draws", "30"]


@pytest.mark.serial
def test_paths_sample_keeps_finished_chains_on_sigterm_and_resumes(tmp_path):
    pytest.importorskip("numpyro")
    out = tmp_path / "s"
    args = [*SAMPLE, "--chains", "2", "--out", str(out)]
    proc = start_until(args, out / "cache", "chain_*.json")  # a chain finished: no fixed sleep
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    kept = len(list((out / "cache").glob("chain_*.json")))
    assert kept == 1
    assert check_speaks(err, "paths sample", "chains")[0][1] == 2
    assert f"the {kept} chains finished are kept in {out / 'cache'}, run the same command again" in err
    assert not (out / "sample.json").exists()
    again = run(*args)
    assert again.returncode == 0, again.stderr
    assert "2 chains (1 cached)" in again.stderr.splitlines()[0]
    assert check_speaks(again.stderr, "paths sample", "chains")[-1] == (1, 1)
    assert run("verify", str(out)).returncode == 0


def test_phase_diagram_start_line_and_a_fixed_denominator(tmp_path):
    args = ["phase-diagram", "--omega", "0.3", "--alpha", "1:2:3", "--quad-order", "4", "--coarse-order", "0"]
    r = run(*args, "--no-refine", "--workers", "1", "--out", str(tmp_path / "pd"))
    assert r.returncode == 0, r.stderr
    seen = check_speaks(r.stderr, "phase-diagram", "fixed points")
    assert seen[-1][0] == seen[-1][1]


@pytest.mark.serial
def test_erm_alpha_c_interrupted_before_any_unit_says_nothing_is_kept(tmp_path):
    """The start line comes first; a stop before the first cell finished says nothing is kept (not "cached in
    .../cache", which would not exist) and leaves no empty folder."""
    import subprocess
    import time

    from clitools import ENV, dotattn_command

    out = tmp_path / "ac"
    args = ["erm-alpha-c", "--omega", "0.3", "--d", "1500", "--seeds", "2", "--alpha", "0.8:1.8:6", "--threads", "1"]
    proc = subprocess.Popen(
        [*dotattn_command(), *args, "--workers", "1", "--no-theory", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    deadline = time.monotonic() + 120
    while not (out / ".dotattn.lock").exists():  # the folder is made and locked just before the work starts
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    lines = err.strip().splitlines()
    assert lines[-1] == "erm-alpha-c: interrupted (SIGTERM); no cell or chunk of seeds had finished, nothing is kept"
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["aim", "amp", "--d", "20", "--alpha", "0.2,0.3", "--seeds", "2", "--max-iter", "30"],
        [
            "aim",
            "gd",
            "--d",
            "10",
            "--alpha",
            "0.3",
            "--seeds",
            "2",
            "--inits",
            "2",
            "--steps",
            "50",
            "--device",
            "cpu",
        ],
    ],
)
def test_aim_algorithms_speak(args, tmp_path):
    r = run(*args, "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    label = " ".join(args[:2])
    assert check_speaks(r.stderr, label, "runs")[-1][0] >= 1


def test_kept_counts_the_units_of_earlier_runs(tmp_path):
    """aim amp said "the 0 runs finished are kept" with one cached: the count includes earlier runs' units."""
    import io

    from dotattn.core.progress import CommandProgress

    p = CommandProgress("aim amp", 4, "runs", cached=1, stream=io.StringIO(), tty=False)
    assert p.kept("C") == "the 1 runs finished (0 now, 1 before) are kept in C"
    p.unit_done()
    assert p.kept("C") == "the 2 runs finished (1 now, 1 before) are kept in C"
    assert (
        CommandProgress("x", 3, "runs", stream=io.StringIO()).kept("C")
        == "none of the 3 runs finished, nothing is kept"
    )


def test_erm_restarts_speaks(tmp_path):
    args = ["erm-restarts", "--d", "30", "--alpha", "2", "--seeds", "1", "--random", "2", "--semantic", "2"]
    r = run(*args, "--out", str(tmp_path / "rs"))
    assert r.returncode == 0, r.stderr
    assert check_speaks(r.stderr, "erm-restarts", "runs")[-1] == (4, 4)


@reduced_and_full("order", ("2",), ("3",))
def test_solve_speaks_for_rank_2_only(tmp_path, order):
    """Progress lines for the rank-2 solve (informed, continued and random starts), none for the seconds-long
    toy solve. Reduced: 2 Gauss-Hermite points per axis (64 nodes in the 6 dimensions of r = 2); full: 3
    (729 nodes, about 1.7x the CPU of the test); the lines do not depend on the rule."""
    r = run("solve", "--alpha", "2", "--rank", "2", "--quad-order", order, "--random-starts", "1")
    assert r.returncode == 0, r.stderr
    # 4 informed (rank 2) + 3 continued (one per informed branch: positional, semantic, mixed) + 1 random
    assert check_speaks(r.stderr, "solve", "starts")[-1] == (8, 8)
    toy = run("solve", "--alpha", "2", "--quad-order", "4", "--random-starts", "1")
    assert toy.returncode == 0 and toy.stderr == ""  # seconds: no start line


def test_verify_says_a_folder_is_being_written_or_unfinished(tmp_path):
    import os

    from dotattn.core.integrity import folder_kind
    from dotattn.core.io import IntegrityError

    folder = tmp_path / "erm"
    folder.mkdir()
    (folder / ".dotattn.lock").write_text(f"{os.getpid()} {os.uname().nodename}\n")  # a live run holds it
    with pytest.raises(IntegrityError, match="being written by a running dotattn command"):
        folder_kind(folder)
    (folder / ".dotattn.lock").unlink()
    (folder / "cache").mkdir()
    (folder / "cache" / "seed_0.json").write_text("{}")
    with pytest.raises(IntegrityError, match="unfinished: an interrupted run"):
        folder_kind(folder)
    r = run("verify", str(folder))
    assert r.returncode != 0 and "unfinished" in r.stdout + r.stderr


def test_erm_alpha_c_speaks(tmp_path):
    args = ["erm-alpha-c", "--omega", "0.3", "--d", "20", "--seeds", "2", "--alpha", "0.8:1.8:3", "--threads", "1"]
    r = run(*args, "--no-theory", "--out", str(tmp_path / "ac"))
    assert r.returncode == 0, r.stderr
    assert "2 seeds x 3 alpha x 2 starts" in r.stderr.splitlines()[0]
    assert check_speaks(r.stderr, "erm-alpha-c", "% of the work")[-1] == (100, 100)


def test_default_threads_leave_busy_cores_alone():
    """train-erm, erm-restarts and erm-alpha-c take --threads 0 as the cores not already busy (load average
    rounded), divided over the workers: a plain example on a loaded 2-core machine runs one thread."""
    from dotattn.cli.options import threads_per_worker

    assert threads_per_worker(0, 1, cores=2, load=0.2) == 2
    assert threads_per_worker(0, 1, cores=2, load=1.6) == 1  # one core busy elsewhere
    assert threads_per_worker(0, 1, cores=2, load=7.0) == 1  # at least one
    assert threads_per_worker(0, 2, cores=16, load=3.4) == 6  # (16 - 3) // 2
    assert threads_per_worker(4, 2, cores=2, load=9.0) == 4  # given explicitly: as given
