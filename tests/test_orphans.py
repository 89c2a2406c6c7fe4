"""No orphans, ever (issue 18 item 3): worker processes end when their parent dies, SIGKILL
included; the run lock is never left empty or half-written."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import ENV, dotattn_command
from clitools import alive as _alive
from clitools import children as _children
from clitools import wait_for as _wait_for

pytestmark = [
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="the checks read /proc (Linux)"),
    pytest.mark.serial,
]


def test_sigkill_of_the_main_process_leaves_no_worker(tmp_path):
    """SIGKILL to `phase-diagram --workers 2` (which cannot clean up itself): both pool workers exit
    on their own, checked through /proc."""
    proc = subprocess.Popen(
        [
            *dotattn_command(),
            "phase-diagram",
            "--omega",
            "0.1,0.2,0.3,0.4",
            "--alpha",
            "0.5:2:16",
            "--workers",
            "2",
            "--quiet",
            "--out",
            str(tmp_path / "pd"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    try:
        workers = _wait_for(lambda: (c := _children(proc.pid)) and len(c) >= 2 and c, 120, "two worker processes")
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        _wait_for(lambda: not any(_alive(w) for w in workers), 15, f"workers {sorted(workers)} to exit")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_sigterm_of_a_collapsed_run_in_two_processes_leaves_no_process(tmp_path):
    """``paths sample --collapsed --processes 2``: the command, its isolated sampler process and that
    process's chain server (a grandchild). SIGTERM to the command: exit 143, and the grandchild is gone
    within seconds (terminated with its parent, never left computing)."""
    pytest.importorskip("numpyro")
    out = tmp_path / "s"
    proc = subprocess.Popen(
        [*dotattn_command(), "paths", "sample", "--P", "8", "--P-test", "8", "--T", "4", "--N", "3"]
        + ["--collapsed", "--processes", "2", "--chains", "2", "--warmup", "50000", "--draws", "50000"]
        + ["--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        grandchildren = _wait_for(
            lambda: {g for c in _children(proc.pid) for g in _children(c)}, 120, "the chain server process"
        )
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    _wait_for(lambda: not any(_alive(g) for g in grandchildren), 10, "the chain server to end")
    assert not (out / "sample.json").exists()


def test_watch_parent_ends_a_process_whose_parent_was_killed(tmp_path):
    """The watchdog alone (no death signal): a grandchild watching its parent exits after the parent
    is SIGKILLed."""
    pidfile = tmp_path / "grandchild.pid"
    code = f"""
import os, sys, time
pid = os.fork()
if pid == 0:
    import dotattn.core.runner as r
    r._set_parent_death_signal = lambda *a: False   # the watchdog thread only
    r.watch_parent(os.getppid(), poll=0.05)
    open({str(pidfile)!r}, "w").write(str(os.getpid()))
    time.sleep(120)
    os._exit(0)
time.sleep(120)
"""
    parent = subprocess.Popen([sys.executable, "-c", code], env=ENV, cwd=tmp_path)
    try:
        _wait_for(lambda: pidfile.exists() and pidfile.read_text(), 30, "the grandchild to start")
        grandchild = int(pidfile.read_text())
        assert _alive(grandchild)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        _wait_for(lambda: not _alive(grandchild), 10, "the grandchild to exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_lock_is_never_left_empty_on_a_full_disk(tmp_path, monkeypatch):
    """ENOSPC while the lock's content is written: OSError, and neither the lock nor its temporary
    file is left behind (an empty lock would block or confuse the next run)."""
    from dotattn.core import runner

    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd, *a, **k):
            self.fh = real_fdopen(fd, *a, **k)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    monkeypatch.setattr(runner.os, "fdopen", Full)
    with pytest.raises(OSError) as err:
        runner.RunLock(tmp_path).acquire()
    assert err.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_lock_in_a_folder_that_cannot_be_written(tmp_path, monkeypatch):
    """EACCES when the lock's temporary file is created (a folder the user cannot write; simulated,
    since the tests may run as root): OSError, nothing left behind."""
    from dotattn.core import runner

    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(runner.tempfile, "mkstemp", refuse)
    with pytest.raises(PermissionError):
        runner.RunLock(tmp_path).acquire()
    assert list(tmp_path.iterdir()) == []


def test_lock_holds_pid_and_host_and_refuses_a_second_run(tmp_path):
    import socket

    from dotattn.core.runner import RunLock, RunLockedError

    with RunLock(tmp_path, "test"):
        pid, host = (tmp_path / RunLock.NAME).read_text().split()
        assert int(pid) == os.getpid() and host == socket.gethostname()
        with pytest.raises(RunLockedError, match="in use by another run"):
            RunLock(tmp_path, "test").acquire()
    assert list(tmp_path.iterdir()) == []
