"""dotattn.core.runner.StatefulServer: one spawned process that keeps state between requests, its failures
reported as ServerError, never a hang, and never left behind."""

from __future__ import annotations

import os
import signal
import time

import pytest

from dotattn.core.runner import ServerError, StatefulServer


def _setup(start: int) -> list[int]:
    if start < 0:
        raise ValueError("start must be >= 0")
    return [start]


def _serve(state: list[int], message: tuple[str, int]) -> tuple[int, int]:
    """("add", k): append k, answer (sum so far, pid); ("fail", _): raise; ("sleep", s): sleep s seconds."""
    kind, value = message
    if kind == "fail":
        raise RuntimeError("asked to fail")
    if kind == "sleep":
        time.sleep(value)
    state.append(value)
    return sum(state), os.getpid()


def test_state_is_kept_between_requests_in_another_process():
    with StatefulServer(_setup, _serve, 10) as server:
        answers = []
        for k in (1, 2, 3):
            server.submit(("add", k))
            answers.append(server.result())
        process = server._process
    assert [a[0] for a in answers] == [11, 13, 16]
    assert {a[1] for a in answers} == {process.pid} and process.pid != os.getpid()
    assert process.exitcode == 0  # told to end, and it ended by itself


def test_a_failing_request_is_reported_with_the_childs_error():
    with pytest.raises(ServerError, match="asked to fail"), StatefulServer(_setup, _serve, 0) as server:
        server.submit(("fail", 0))
        server.result()
    assert not server._process.is_alive()


def test_a_failing_setup_is_reported_at_the_first_request():
    with pytest.raises(ServerError, match="start must be >= 0"), StatefulServer(_setup, _serve, -1) as server:
        server.submit(("add", 1))
        server.result()
    assert not server._process.is_alive()


def test_a_child_that_dies_is_reported_not_waited_for():
    """SIGKILL of the child during a 60 s request: the parent's wait ends within seconds with ServerError."""
    with pytest.raises(ServerError, match="ended"), StatefulServer(_setup, _serve, 0) as server:
        server.submit(("add", 0))
        server.result()
        server.submit(("sleep", 60))
        t0 = time.perf_counter()
        os.kill(server._process.pid, signal.SIGKILL)
        try:
            server.result()
        finally:
            assert time.perf_counter() - t0 < 10
    assert not server._process.is_alive()


def test_an_exception_in_the_block_terminates_the_child():
    """A request still running when the block raises (as Interrupted does on a signal): the child is
    terminated and reaped on leaving, not left to finish."""
    with pytest.raises(KeyError), StatefulServer(_setup, _serve, 0) as server:
        server.submit(("add", 0))
        server.result()
        server.submit(("sleep", 60))
        raise KeyError("stop")
    assert not server._process.is_alive() and server._process.exitcode is not None
