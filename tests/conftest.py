"""Shared fixtures and the slow-test switch.

Tests marked ``@pytest.mark.slow`` run only when ``DOTATTN_SLOW=1`` is set in the environment; by default
the collection hook below skips them (with the reason shown in the summary). Each slow test has a reduced
form that runs by default through the same code path: parametrise the sizes with :func:`reduced_and_full`
(the ``full`` case carries the slow mark)."""

import math
import os

import matplotlib
import pytest

matplotlib.use("Agg")

SLOW = os.environ.get("DOTATTN_SLOW") == "1"


def reduced_and_full(argnames: str, reduced, full):
    """``pytest.mark.parametrize(argnames, ...)`` with a ``reduced`` case run by default and a ``full``
    case marked slow (run with ``DOTATTN_SLOW=1``); ``reduced`` and ``full`` are tuples of arguments."""
    return pytest.mark.parametrize(
        argnames, [pytest.param(*reduced, id="reduced"), pytest.param(*full, id="full", marks=pytest.mark.slow)]
    )


def pytest_collection_modifyitems(config, items):
    """Tests marked ``serial`` run on one xdist worker (``--dist loadgroup``); skip every slow test unless
    DOTATTN_SLOW=1."""
    for item in items:
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group(name="serial"))
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: set DOTATTN_SLOW=1 to run it (its reduced form runs by default)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


ROUNDOFF_KEYS = frozenset({"residual", "message", "iterations", "seconds"})
"""Record fields that are round-off diagnostics, not results: the last change of an iteration stopped at
tolerance 1e-8 (``residual``, the ``message`` that prints it, the ``iterations`` it took) and wall time."""


def assert_rows_close(got, want, rel: float = 1e-6, abs_: float = 1e-9, skip=ROUNDOFF_KEYS, where: str = "row"):
    """Nested rows (dicts, lists, numbers, strings; ``to_row()`` forms) equal in structure and in every
    non-float value, and in every float to ``rel`` (relative) or ``abs_`` (absolute), skipping the keys in
    ``skip``. The default tolerances are for two runs of the same computation that may differ in the order
    of floating-point reductions (another process, another BLAS thread count, another executor): the
    fixed-point iteration stops once the change is below tol = 1e-8, so two runs whose round-off differs
    can stop one iteration apart, and overlaps then agree to ~tol, far above round-off and far below any
    change of the physics."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, sorted(set(got) ^ set(want)))
        for k in want:
            if k not in skip:
                assert_rows_close(got[k], want[k], rel, abs_, skip, f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (where, got, want)
        for i, (x, y) in enumerate(zip(got, want, strict=True)):
            assert_rows_close(x, y, rel, abs_, skip, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool) and isinstance(got, (int, float)):
        if math.isnan(want):
            assert math.isnan(got), (where, got, want)
        else:
            assert math.isclose(got, want, rel_tol=rel, abs_tol=abs_), (where, got, want)
    else:
        assert got == want, (where, got, want)


@pytest.fixture
def refused_port():
    """A local TCP port that certainly has no listener: bound here (port 0: the OS picks a free one) but
    never listening, for as long as the test runs, so a connection to it is refused."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(scope="session")
def toy():
    from dotattn.positional_semantic.problem import Problem

    return Problem(omega=0.3)
