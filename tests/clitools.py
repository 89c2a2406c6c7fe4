"""Run the real ``dotattn`` command in a subprocess, as a user would."""

import os
import shutil
import subprocess
import sys
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
