"""Run the real ``dotattn`` command in a subprocess, as a user would."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ENV = {**os.environ, "MPLBACKEND": "Agg"}


def dotattn_command() -> list[str]:
    """The installed console script (beside the interpreter, else on PATH)."""
    beside = Path(sys.executable).parent / "dotattn"
    exe = str(beside) if beside.exists() else shutil.which("dotattn")
    if exe is None:
        raise RuntimeError("the dotattn console script is not installed")
    return [exe]


def run_python(code: str, cwd: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -c code`` in ``cwd``: run it outside the source tree, whose ``dotattn/`` (without the
    ``cli`` subpackage) would otherwise shadow the installed package."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout
    )


POOLED = ("phase-diagram", "erm-alpha-c")
"""Commands whose code path depends on the number of worker processes (default: the cores, or 1 with
threads from the cores)."""


def with_workers(args) -> list[str]:
    """``args`` with ``--workers 1`` added to a pooled command that names neither ``--workers`` nor
    ``--dask``, so that no test's code path depends on ``os.cpu_count()`` of the machine it runs on."""
    args = list(args)
    if args and args[0] in POOLED and "--workers" not in args and "--dask" not in args and "--help" not in args:
        args += ["--workers", "1"]
    return args


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*dotattn_command(), *with_workers(args)], capture_output=True, text=True, env=ENV, timeout=timeout
    )


def start_until(args: list[str], folder: Path, pattern: str, timeout: float = 300) -> subprocess.Popen:
    """Start ``dotattn *args`` and return once ``folder`` holds a file matching ``pattern`` (a cached
    unit of work), asserting that the process is still running; for tests that then send a signal."""
    proc = subprocess.Popen(
        [*dotattn_command(), *with_workers(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    deadline = time.monotonic() + timeout
    while not list(folder.glob(pattern)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return proc


# -- processes (Linux /proc) --------------------------------------------------------------------
def children(pid: int) -> set[int]:
    """Live (non-zombie) child processes of ``pid``, from /proc."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            out.add(int(entry.name))
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(condition, timeout: float, what: str):
    """Poll ``condition()`` every 0.05 s until it is truthy (returned) or ``timeout`` s pass (AssertionError
    naming ``what``): synchronisation by a deadline, never by a fixed sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
