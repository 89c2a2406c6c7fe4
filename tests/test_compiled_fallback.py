"""numba is a default dependency; where it cannot be imported the toy model's prox falls back to the vectorised
numpy kernel and says so once, on stderr (issue 50).

Each check runs in a fresh interpreter in which ``import numba`` raises ImportError (``sys.modules["numba"] =
None``), so that the module-level choice of :mod:`dotattn.positional_semantic.compiled` runs as a user meets it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from clitools import ENV

NOTICE = "numba could not be imported"

FALLBACK = r"""
import sys
sys.modules["numba"] = None  # any `import numba` now raises ImportError
import numpy as np
from dotattn.positional_semantic import compiled, prox as P
from dotattn.positional_semantic.loss import teacher_attention
from dotattn.positional_semantic.problem import Problem

calls = []
numpy_kernel = P._newton_toy
P._newton_toy = lambda *a: calls.append(1) or numpy_kernel(*a)
rng = np.random.default_rng(0)
p = Problem(omega=0.3)
centre = rng.normal(scale=0.6, size=(50, 2, 1))
target = teacher_attention(rng.normal(scale=p.sigma, size=(50, 2, 1)), p)
P.prox(centre, target, np.array([[11.0]]), p)
P.prox(centre, target, np.array([[12.0]]), p)
print("AVAILABLE", compiled.AVAILABLE, "numpy kernel calls", len(calls), "reason", compiled.UNAVAILABLE_REASON)
if sys.argv[1:] == ["child"]:
    import subprocess
    out = subprocess.run([sys.executable, "-c", __import__("__main__").CODE], capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    print("child:", out.stdout.strip())
"""


def _run(code: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = f"CODE = {code!r}\n" + code
    return subprocess.run(
        [sys.executable, "-c", full, *args], capture_output=True, text=True, env=env, timeout=300, cwd=os.getcwd()
    )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in ENV.items() if k not in ("DOTATTN_NUMBA_NOTICE_SHOWN", "DOTATTN_COMPILED")}
    return {**env, **extra}


def test_without_numba_the_numpy_kernel_runs_and_says_so_once():
    """The fallback is used for every prox, and the notice is one line for the whole process tree: a child
    process (as a spawned worker) inherits the mark and stays quiet."""
    out = _run(FALLBACK, "child", env=_env())
    assert out.returncode == 0, out.stderr
    assert "AVAILABLE False numpy kernel calls" in out.stdout
    calls = int(out.stdout.split("numpy kernel calls")[1].split()[0])
    assert calls >= 2  # both prox calls ran on the numpy kernel
    assert "import of numba halted" in out.stdout  # the reason is recorded
    assert "child: AVAILABLE False" in out.stdout
    assert out.stderr.count(NOTICE) == 1, out.stderr


def test_a_deliberate_DOTATTN_COMPILED_0_is_silent():
    out = _run(FALLBACK, env=_env(DOTATTN_COMPILED="0"))
    assert out.returncode == 0, out.stderr
    assert "AVAILABLE False" in out.stdout and "DOTATTN_COMPILED=0" in out.stdout
    assert NOTICE not in out.stderr
