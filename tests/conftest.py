"""Shared fixtures and the slow-test switch.

Tests marked ``@pytest.mark.slow`` run only when ``DOTATTN_SLOW=1`` is set in the environment; by default
the collection hook below skips them (with the reason shown in the summary). Each slow test has a reduced
form that runs by default through the same code path: parametrise the sizes with :func:`reduced_and_full`
(the ``full`` case carries the slow mark)."""

import math
import os
import shutil
import tempfile

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


def pytest_configure(config):
    """Each test process (the xdist worker, or the one process with -n0) gets a JAX compilation cache of its
    own, a fresh temporary folder removed at the end, which the ``dotattn`` commands it starts share through
    the environment. NumPyro's NUTS compiles the same programs again for every chain and in every command that
    samples (a resumed run, a second width); with the cache only the first compilation of each program in a
    process's run is paid (measured: a second 2-chain run of 80 + 100 draws 5.1 -> 0.9 CPU-s; a new process
    12.9 -> 3.2 CPU-s). The compiled programs are the same, so are the numbers. One folder per worker: JAX
    writes cache entries without a lock, so processes that run at the same time never share one. A
    JAX_COMPILATION_CACHE_DIR set by the user is left alone."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") and not os.environ.get("DOTATTN_TEST_JAX_CACHE"):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = tempfile.mkdtemp(prefix=f"dotattn-test-jax-cache-{worker}-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["DOTATTN_TEST_JAX_CACHE"] = path
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # every program: under load 1 s is no guide
    config._dotattn_jax_cache = path


def pytest_unconfigure(config):
    path = getattr(config, "_dotattn_jax_cache", None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``serial`` run on one xdist worker (``--dist loadgroup``); skip every slow test unless
    DOTATTN_SLOW=1."""
    for item in items:
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group(name="serial"))
    _group_suffix(config, items)
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: set DOTATTN_SLOW=1 to run it (its reduced form runs by default)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


def _group_suffix(config, items):
    """On an xdist worker under ``--dist loadgroup``: the suffix ``@<group>`` on the node id of every test
    marked ``xdist_group``, by which the controller sends a group to one worker. xdist 3.8 sets it as
    ``item._nodeid``, which pytest 9 no longer reads (its node id is ``item._id``): without this, the groups,
    ``serial`` among them, were spread over the workers. Also here because the ``serial`` groups are added
    above, after xdist's own hook has run."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")
        }
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))
        if item.nodeid.endswith(suffix):
            continue
        if hasattr(item, "_id"):  # pytest >= 9
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(item.nodeid + suffix)
        else:
            item._nodeid = item.nodeid + suffix


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
