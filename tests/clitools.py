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
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=cwd,
                          timeout=timeout)


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*dotattn_command(), *args], capture_output=True, text=True, env=ENV, timeout=timeout)


def start_until(args: list[str], folder: Path, pattern: str, timeout: float = 300) -> subprocess.Popen:
    """Start ``dotattn *args`` and return once ``folder`` holds a file matching ``pattern`` (a cached
    unit of work), asserting that the process is still running; for tests that then send a signal."""
    proc = subprocess.Popen([*dotattn_command(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    deadline = time.monotonic() + timeout
    while not list(folder.glob(pattern)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return proc
