"""Long runs: progress, clean stops with real signals, the run lock, stale temporary files."""

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clitools import alive as _alive
from clitools import children as _children
from clitools import run, start_until
from clitools import wait_for as _wait_for

from dotattn.core.io import atomic_write_text, remove_stale_tmp
from dotattn.core.runner import (
    Interrupted,
    ProgressReporter,
    ProgressState,
    RunLock,
    RunLockedError,
    run_tasks,
    stop_on_signals,
)

CHEAP_REFINE = ["--refine-rules", "2", "--refine-order", "4"]
"""The smallest refinement rules (2 rules of 2 x 2^4 points): the roots are still refined (the same code path),
but not on the default 8 rules of 2 x 2^13 points, which took most of these tests' time; what they check (signals,
locks, progress lines) does not depend on the rules' size."""

# a small diagram on a coarse rule: a column takes a few seconds
SMALL = [
    "--omega",
    "0.1,0.3,0.45",
    "--alpha",
    "0.8:1.4:4",
    "--quad-order",
    "6",
    "--coarse-order",
    "4",
    "--workers",
    "2",
    *CHEAP_REFINE,
]
SIGNALLED = ["--omega", "0.05,0.1,0.2,0.3,0.45,0.6", *SMALL[2:]]
"""Six columns on two workers: when the first column is cached, at least three are still to run, so the
signal always lands on a running sweep (with three columns the last two could finish first under load)."""


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find the worker processes")
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.serial
def test_signal_stops_cleanly_and_the_run_resumes(tmp_path, sig, status):
    out = tmp_path / "pd"
    proc = start_until(
        ["phase-diagram", *SIGNALLED, "--out", str(out), "--quiet"], out / "cache", "omega_*.json"
    )  # until a column is cached
    workers = _children(proc.pid)
    assert workers  # the pool is running
    assert (out / RunLock.NAME).read_text().split()[0] == str(proc.pid)
    proc.send_signal(sig)  # the main process only, as a notebook or a scheduler does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("phase-diagram: interrupted;"), err
    cached = sorted((out / "cache").glob("omega_*.json"))
    assert f"{len(cached)} of 6 columns cached in {out / 'cache'}" in lines[0] and len(cached) < 6
    _wait_for(lambda: not [w for w in workers if _alive(w)], 15, f"workers {sorted(workers)} to exit")  # no orphans
    assert not list(out.rglob("*.tmp")) and not (out / RunLock.NAME).exists()
    # a write killed half-way leaves a temporary file; the next run removes it
    (out / "cache" / ".omega_0.300000.json.x1.tmp").write_text("{")
    again = run("phase-diagram", *SIGNALLED, "--out", str(out), "--quiet")
    assert again.returncode == 0, again.stderr
    assert f"({len(cached)} columns from cache)" in again.stdout
    assert not list(out.rglob("*.tmp")) and len(list((out / "cache").glob("omega_*.json"))) == 6


def test_a_second_run_into_the_same_folder_is_refused(tmp_path):
    out = tmp_path / "pd"
    out.mkdir()
    (out / RunLock.NAME).write_text(f"{os.getpid()} {os.uname().nodename}\n")  # a live owner: this test
    res = run(
        "phase-diagram",
        "--omega",
        "0.3",
        "--alpha",
        "1.2",
        "--quad-order",
        "6",
        "--coarse-order",
        "4",
        "--out",
        str(out),
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert f"in use by another run (pid {os.getpid()})" in res.stderr
    assert not (out / "cache").exists()


@pytest.mark.serial
def test_a_stale_lock_is_taken_over(tmp_path):
    out = tmp_path / "pd"
    out.mkdir()
    (out / RunLock.NAME).write_text(f"{_dead_pid()} {os.uname().nodename}\n")
    res = run(
        "phase-diagram",
        "--omega",
        "0.3",
        "--alpha",
        "1.2,1.3",
        "--quad-order",
        "6",
        "--coarse-order",
        "4",
        *CHEAP_REFINE,
        "--out",
        str(out),
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr == "" and not (out / RunLock.NAME).exists()


def test_first_line_and_progress_lines_off_a_terminal(tmp_path):
    res = run(
        "phase-diagram",
        "--omega",
        "0.3",
        "--alpha",
        "1.2,1.3",
        "--quad-order",
        "6",
        "--coarse-order",
        "4",
        *CHEAP_REFINE,
        "--out",
        str(tmp_path / "pd"),
    )
    assert res.returncode == 0, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith("phase-diagram: 1 omega x 2 alpha") and str(tmp_path / "pd") in lines[0]
    # count and time estimated ("typically ~N s", or "typically under 1 s" on these small refinement rules)
    assert "about" in lines[0] and "fixed points" in lines[0] and "typically " in lines[0]
    assert lines[-1].startswith("phase-diagram: ") and "1 of 1 columns" in lines[-1]
    done, total = lines[-1].split(": ")[1].split(" ")[0].split("/")
    assert int(done) == int(total) > 2  # counted per fixed point, not per column


def test_default_output_is_untracked():
    from dotattn.cli.phase import DEFAULT_OUT

    ignored = subprocess.run(
        ["git", "check-ignore", "-q", f"{DEFAULT_OUT}/summary.json"], cwd=Path(__file__).resolve().parent.parent
    )
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0


# ----------------------------------------------------------------------------------------------
# the pieces
# ----------------------------------------------------------------------------------------------
@pytest.mark.serial
def test_run_lock_refuses_a_live_owner_and_takes_over_a_dead_one(tmp_path):
    with RunLock(tmp_path, "x") as lock:
        assert (tmp_path / RunLock.NAME).read_text().split()[0] == str(os.getpid())
        with pytest.raises(RunLockedError, match="in use"):
            RunLock(tmp_path, "x").acquire()
        assert lock.held
    assert not (tmp_path / RunLock.NAME).exists()
    (tmp_path / RunLock.NAME).write_text(f"{_dead_pid()} {os.uname().nodename}\n")
    with RunLock(tmp_path, "x"):
        assert (tmp_path / RunLock.NAME).read_text().split()[0] == str(os.getpid())


@pytest.mark.serial
def test_a_stop_during_lock_acquisition_leaves_no_lock_file(tmp_path, monkeypatch):
    """SIGTERM raised while the lock file is being created (here: from inside _create, after the link)
    is held back until the lock is taken, then stops the run through RunLock's own clean-up: the lock
    file and its temporary are gone, the folder is empty, and the stop arrives as Interrupted."""
    from dotattn.core.runner import stop_on_signals

    create = RunLock._create

    def create_then_signal(self, text):
        create(self, text)
        os.kill(os.getpid(), signal.SIGTERM)  # blocked: delivered when acquire() has finished

    monkeypatch.setattr(RunLock, "_create", create_then_signal)
    with pytest.raises(Interrupted), stop_on_signals():
        with RunLock(tmp_path, "x"):
            pytest.fail("the stop must arrive before the block runs")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.serial
def test_signals_deferred_delivers_the_signal_when_the_block_ends():
    """A SIGINT inside signals_deferred (under stop_on_signals) stops the run only when the block ends;
    outside such a block it stops at once."""
    from dotattn.core.io import signals_deferred
    from dotattn.core.runner import stop_on_signals

    seen = []
    with pytest.raises(Interrupted), stop_on_signals():
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            seen.append("block")
        seen.append("after")
    assert seen == ["block"]
    with pytest.raises(Interrupted), stop_on_signals():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        seen.append("never")
    assert seen == ["block"]


def _units(n: int, report=None) -> int:
    for _ in range(n):
        if report is not None:
            report()
    return n


@pytest.mark.parametrize("workers", [1, 2])
def test_run_tasks_reports_every_unit_and_every_result(workers):
    units, results = [], {}
    run_tasks(
        _units, [(3,), (5,)], workers=workers, on_unit=units.append, on_result=lambda i, r: results.__setitem__(i, r)
    )
    assert results == {0: 3, 1: 5} and sorted(units) == [0] * 3 + [1] * 5


def _raise(report=None):
    raise ValueError("boom")


def test_run_tasks_propagates_a_worker_error():
    with pytest.raises(ValueError, match="boom"):
        run_tasks(_raise, [(), ()], workers=2)


@pytest.mark.serial
def test_stop_on_signals_raises_interrupted_once():
    with pytest.raises(Interrupted) as info:
        with stop_on_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 10  # the handler runs at the next bytecode boundary: poll for it
            while time.monotonic() < deadline:
                time.sleep(0.01)
            pytest.fail("SIGTERM was not turned into Interrupted within 10 s")
    assert info.value.exit_status == 143
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_progress_lines_are_throttled_and_the_bar_has_an_eta():
    buf = io.StringIO()
    rep = ProgressReporter("pd", stream=buf, interval=3600, tty=False)
    for k in range(5):
        rep(ProgressState(k, 10, 0, 2, 0, 2.0 * k))
    rep(ProgressState(10, 10, 2, 2, 0, 20.0))
    lines = buf.getvalue().splitlines()
    assert lines == [
        "pd: 0/10 fixed points, 0 of 2 columns, 0 s elapsed, ETA ?",
        "pd: 10/10 fixed points, 2 of 2 columns, 20 s elapsed (2 s per fixed point), ETA 0 s",
    ]
    tty = io.StringIO()
    ProgressReporter("pd", stream=tty, tty=True)(ProgressState(5, 10, 1, 2, 0, 10.0))
    assert tty.getvalue().startswith("\rpd [") and "2 s per fixed point, ETA 10 s" in tty.getvalue()
    quiet = io.StringIO()
    ProgressReporter("pd", stream=quiet, quiet=True)(ProgressState(5, 10, 1, 2, 0, 10.0))
    assert quiet.getvalue() == ""


def test_atomic_write_leaves_no_tmp_on_error_and_stale_tmp_is_removed(tmp_path, monkeypatch):
    def fail(*a):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "a.json", "{}")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / ".a.json.abc.tmp").write_text("{")
    (tmp_path / "keep.tmp").write_text("")  # not ours: not a hidden atomic-write temporary
    assert [p.name for p in remove_stale_tmp(tmp_path)] == [".a.json.abc.tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["keep.tmp"]
