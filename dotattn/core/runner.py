"""Running long sweeps: executors with per-unit progress, clean stops, a run lock, a progress reporter.

Reusable by every command that runs many independent tasks (the phase diagram's ω columns,
α_c studies); nothing here knows about physics.

* :func:`run_tasks` runs ``fn(*task, report=...)`` for every task in-process, on a process
  pool or on a Dask cluster. ``report()`` is called by the task after each unit of work (a fixed
  point); the main process sees it as ``on_unit(task_index)`` (pool: through a
  ``multiprocessing`` queue; Dask: not forwarded, only whole tasks). ``on_result(task_index,
  result)`` is called in the main process as each task finishes, so the caller can cache it at
  once. On any exception or signal in the main process, pending tasks are cancelled and the
  worker processes are terminated and reaped before the exception propagates: no orphans.
* :class:`Interrupted` is what SIGINT/SIGTERM become inside :func:`stop_on_signals` (and what
  :func:`run_tasks`'s callers raise with a one-line ``detail`` of what is kept); exit status
  128 + signal number (130 for SIGINT, 143 for SIGTERM).
* :class:`RunLock`: one run per output folder, a lock file with the owner's pid and host created
  with ``O_CREAT | O_EXCL``; a lock whose owner is dead (same host) is taken over.
* :class:`ProgressState` (a snapshot) and :class:`ProgressReporter` (a bar with ETA on a
  terminal, a line every few seconds on stderr otherwise).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue as _queue
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from dotattn.core.io import defer_stop, signals_deferred
from dotattn.core.validation import ParameterError, check_dask_scheme, check_int

__all__ = [
    "run_isolated",
    "StatefulServer",
    "ServerError",
    "DASK_TIMEOUT",
    "MAX_WORKERS",
    "check_dask_address",
    "jobqueue_spec",
    "jobqueue_cluster",
    "job_script",
    "connect_dask",
    "check_workers",
    "Interrupted",
    "stop_on_signals",
    "run_tasks",
    "RunLock",
    "RunLockedError",
    "ProgressState",
    "ProgressReporter",
    "format_duration",
]

POLL_SECONDS = 0.2
"""How often the main process looks at finished tasks and progress messages (s)."""


# ----------------------------------------------------------------------------------------------
# signals
# ----------------------------------------------------------------------------------------------
class Interrupted(BaseException):
    """A run stopped by a signal. ``signum``: the signal; ``detail``: what was kept (one line) or '';
    ``message``: the whole line for the user, if a caller composed one (``str()`` otherwise).

    A BaseException (like KeyboardInterrupt), so ``except Exception`` blocks do not swallow it.
    """

    def __init__(self, signum: int, detail: str = "", message: str | None = None) -> None:
        super().__init__(signum, detail)
        self.signum, self.detail, self.message = int(signum), detail, message

    @property
    def exit_status(self) -> int:
        """128 + the signal number: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    def __str__(self) -> str:
        if self.message:
            return self.message
        return f"interrupted ({signal.Signals(self.signum).name})" + (f"; {self.detail}" if self.detail else "")


@contextlib.contextmanager
def stop_on_signals(signums: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Within the block, the first SIGINT/SIGTERM raises :class:`Interrupted` in the main thread;
    later ones are ignored while the stop is being cleaned up. Handlers are restored on exit.
    Only in the main thread (elsewhere the block does nothing)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired:
            return
        fired.append(signum)

        def stop() -> None:
            raise Interrupted(signum)

        if not defer_stop(stop):  # inside signals_deferred: raised when that block ends
            stop()

    old = {s: signal.signal(s, handler) for s in signums}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def as_interrupted(err: BaseException) -> Interrupted:
    """An Interrupted for a KeyboardInterrupt (SIGINT) or an Interrupted as is."""
    return err if isinstance(err, Interrupted) else Interrupted(signal.SIGINT)


# ----------------------------------------------------------------------------------------------
# executors
# ----------------------------------------------------------------------------------------------
_REPORT_QUEUE: Any = None  # set in each pool worker by _init_worker


PARENT_POLL_SECONDS = 0.5
"""How often a pool worker's watchdog checks that the process that started it is still alive."""


def _set_parent_death_signal(signum: int = signal.SIGKILL) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent dies (prctl PR_SET_PDEATHSIG);
    False where that is not available (then the watchdog of :func:`watch_parent` alone acts)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(1, int(signum), 0, 0, 0) == 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return False


def watch_parent(parent_pid: int, poll: float = PARENT_POLL_SECONDS) -> None:
    """End this process at once (``os._exit``) if ``parent_pid`` is no longer its parent: the parent
    died, whatever the cause (SIGKILL included), and this process was re-parented. Checked now and
    then every ``poll`` seconds by a daemon thread; the parent-death signal, where the kernel has it,
    acts even sooner."""

    def gone() -> bool:
        return os.getppid() != parent_pid

    _set_parent_death_signal()
    if gone():  # the parent died before the death signal was armed
        os._exit(1)

    def loop() -> None:
        while not gone():
            time.sleep(poll)
        os._exit(1)

    threading.Thread(target=loop, name="dotattn-parent-watchdog", daemon=True).start()


THREADED_RUNTIMES = ("jax",)
"""Top-level modules whose import starts threads in this process (JAX's runtime): after one of them is
loaded, forking the process can deadlock the child (JAX warns so at every ``os.fork()``)."""


def pool_context() -> Any:
    """The multiprocessing context of the worker pool: the platform default (fork on Linux: cheapest)
    while no threaded runtime (:data:`THREADED_RUNTIMES`) is loaded; otherwise ``spawn``: each worker is
    a fresh interpreter started by fork + exec at once (no Python code runs in between, so nothing can
    deadlock), still a child of this process (which :func:`watch_parent` relies on; a forkserver's
    workers would be the server's children). The tasks are module-level functions either way."""
    if any(name in sys.modules for name in THREADED_RUNTIMES):
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context()


def _init_worker(q: Any, parent_pid: int | None = None) -> None:
    """Pool worker set-up: the progress queue; SIGINT ignored (a Ctrl-C on the terminal reaches the
    whole process group; the main process decides and terminates the workers); SIGTERM back to
    the default (a forked worker inherits :func:`stop_on_signals`' handler), so it ends quietly;
    and :func:`watch_parent`, so that no worker outlives the main process (no orphans, even after
    a SIGKILL of the main process)."""
    global _REPORT_QUEUE
    _REPORT_QUEUE = q
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if parent_pid is not None:
        watch_parent(parent_pid)


def _pool_call(fn: Callable[..., Any], index: int, task: tuple[Any, ...]) -> Any:
    q = _REPORT_QUEUE
    result = fn(*task, report=(lambda: q.put((index, False))) if q is not None else None)
    if q is not None:
        q.put((index, True))  # after every unit of this task: the main process waits for it
    return result


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Cancel pending tasks, terminate the worker processes and reap them."""
    if hasattr(pool, "terminate_workers"):  # Python >= 3.14
        pool.shutdown(wait=False, cancel_futures=True)
        pool.terminate_workers()
        return
    procs = list((getattr(pool, "_processes", None) or {}).values())  # before 3.14: a private dict
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)


def run_isolated(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a fresh (spawned) process, its result returned here; for a computation that
    must not share this process (JAX/XLA: its threads do not survive a fork, and a signal handled
    inside one of its calls could leave the interpreter to crash or hang while tearing down).

    The child ignores SIGINT and ends with this process (:func:`_init_worker`); this process keeps
    handling signals while it waits, so :func:`stop_on_signals`' :class:`Interrupted` arrives here at
    once and the child is terminated before it propagates. ``fn`` must be a module-level function
    and ``args`` picklable."""
    pool = ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(None, os.getpid()),
    )
    ok = False
    try:
        future = pool.submit(fn, *args)
        while not future.done():
            wait([future], timeout=POLL_SECONDS)
        result = future.result()
        ok = True
        return result
    finally:
        if ok:
            pool.shutdown(wait=True)
        else:
            _terminate(pool)


class ServerError(RuntimeError):
    """A :class:`StatefulServer` failed: its set-up or a request raised (the child's exception and
    traceback, as text), or the process ended without answering."""


def _serve(conn: Any, parent_pid: int, setup: Callable[..., Any], serve: Callable[[Any, Any], Any], args: Any) -> None:
    """The child of :class:`StatefulServer`: ``state = setup(*args)``, then one reply per message until None."""
    import traceback

    _init_worker(None, parent_pid)
    try:
        state = setup(*args)
        conn.send((True, None))
        while (message := conn.recv()) is not None:
            conn.send((True, serve(state, message)))
    except BaseException as err:  # the parent raises it as ServerError; this process then ends
        with contextlib.suppress(Exception):
            conn.send((False, f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))
    finally:
        conn.close()


class StatefulServer:
    """One spawned process that holds state between requests: ``setup(*args)`` builds it there once,
    then each :meth:`submit` sends a picklable message to ``serve(state, message)`` and :meth:`result`
    waits for its answer, so this process can compute while the child does (one request outstanding at a
    time). The child ignores SIGINT and ends with this process (:func:`_init_worker`); this process keeps
    handling signals while it waits (a poll every POLL_SECONDS, which also notices a child that died
    without answering). A context manager: on leaving, the child is told to end, or terminated and
    reaped if the block raised. ``setup`` and ``serve`` must be module-level functions."""

    def __init__(self, setup: Callable[..., Any], serve: Callable[[Any, Any], Any], *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, os.getpid(), setup, serve, args))
        self._process.start()
        child.close()
        self._pending = True  # the set-up's acknowledgement

    def _ended(self, when: str) -> ServerError:
        """The error for a child that is gone (nothing is pending any more)."""
        self._pending = False
        return ServerError(f"the server process ended (exit status {self._process.exitcode}) {when}")

    def _receive(self) -> Any:
        while not self._conn.poll(POLL_SECONDS):
            if not self._process.is_alive() and not self._conn.poll(0):
                raise self._ended("without answering")
        try:
            ok, value = self._conn.recv()
        except (EOFError, OSError):  # a child killed mid-answer: end of file or a reset connection
            raise self._ended("without answering") from None
        self._pending = False
        if not ok:
            raise ServerError(f"the server process failed: {value}")
        return value

    def submit(self, message: Any) -> None:
        """Send one request (the previous one's answer must have been taken)."""
        if self._pending:
            self._receive()  # the set-up's acknowledgement, or a failure of it
        try:
            self._conn.send(message)
        except OSError:  # the child is gone: a broken pipe
            raise self._ended("before a request") from None
        self._pending = True

    def result(self) -> Any:
        """The answer to the last request."""
        return self._receive()

    def close(self) -> None:
        """Tell the child to end and reap it (terminated if it does not end within 5 s)."""
        with contextlib.suppress(Exception):
            if self._pending:
                self._receive()
            self._conn.send(None)
        self._process.join(5)
        self.terminate()

    def terminate(self) -> None:
        """Terminate and reap the child (killed if SIGTERM does not end it within 5 s)."""
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)
        with contextlib.suppress(Exception):
            self._conn.close()

    def __enter__(self) -> StatefulServer:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.terminate()


DASK_TIMEOUT = 5.0
"""Seconds to wait for a Dask scheduler before giving up (one line, exit status 2 in the CLI)."""
_DASK_ADDRESS = re.compile(
    r"^((tcp|tls|ucx|ws|wss)://)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):[0-9]{1,5}$"
    r"|^inproc://\S+$"
)


JOBQUEUE_CLUSTERS = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
"""``--dask slurm[:JOBS]`` / ``pbs[:JOBS]``: a Dask cluster of batch jobs started through dask-jobqueue (the extra
``dotattn[jobqueue]``), each job's size (cores, memory, walltime, queue, account, ...) from Dask's jobqueue
configuration (``~/.config/dask/jobqueue.yaml``, section ``jobqueue.slurm`` or ``jobqueue.pbs``)."""
_JOBQUEUE = re.compile(r"^(slurm|pbs)(?::(\d+))?$", re.IGNORECASE)
MAX_JOBS = 10_000


def jobqueue_spec(address: Any) -> tuple[str, int] | None:
    """(kind, jobs) for ``slurm``, ``slurm:JOBS``, ``pbs`` or ``pbs:JOBS`` (jobs in [1, :data:`MAX_JOBS`], default
    1); None for anything else (a scheduler address)."""
    m = _JOBQUEUE.match(str(address).strip()) if isinstance(address, str) else None
    if m is None:
        return None
    jobs = int(m[2]) if m[2] is not None else 1
    if not 1 <= jobs <= MAX_JOBS:
        raise ParameterError(f"dask: the number of {m[1].lower()} jobs must be in [1, {MAX_JOBS}], got {jobs}")
    return m[1].lower(), jobs


def jobqueue_cluster(kind: str, **settings: Any) -> Any:
    """A dask-jobqueue cluster of ``kind`` (``slurm`` or ``pbs``; no job submitted yet), its job size from Dask's
    jobqueue configuration overridden by ``settings`` (``cores``, ``memory``, ``walltime``, ``queue``, ...);
    ParameterError (one line) when dask-jobqueue is missing or the configuration lacks what a job needs."""
    try:
        import dask_jobqueue
    except ImportError:
        raise ParameterError(
            f"dask {kind}: install the optional extra 'dotattn[jobqueue]' (dask-jobqueue) to submit Dask workers as "
            f"{kind.upper()} jobs"
        ) from None
    try:
        return getattr(dask_jobqueue, JOBQUEUE_CLUSTERS[kind])(**settings)
    except (ValueError, TypeError, KeyError) as err:
        raise ParameterError(
            f"dask {kind}: the job size is not configured ({str(err).splitlines()[0][:160]}); set cores and memory "
            f"(and walltime, queue, ...) under jobqueue.{kind} in ~/.config/dask/jobqueue.yaml"
        ) from None


def job_script(kind: str, **settings: Any) -> str:
    """The batch script one worker job of :func:`jobqueue_cluster` would submit (nothing is submitted)."""
    cluster = jobqueue_cluster(kind, **settings)
    try:
        return str(cluster.job_script())
    finally:
        cluster.close()


def check_dask_address(address: Any) -> str:
    """``address`` if it reads as a Dask scheduler address ``[tcp|tls|ucx|ws|wss://]host:port`` or
    ``inproc://...``, or as a batch-job cluster ``slurm[:JOBS]`` / ``pbs[:JOBS]`` (:func:`jobqueue_spec`);
    ParameterError otherwise."""
    if jobqueue_spec(address) is not None:
        return str(address).strip()
    text = check_dask_scheme(address)  # tcp, ws (and inproc): the schemes that work without configuration
    m = _DASK_ADDRESS.match(text)
    if m is None or (not text.startswith("inproc://") and not 1 <= int(text.rsplit(":", 1)[1]) <= 65535):
        raise ParameterError(
            f"dask must be a scheduler address [tcp://]host:port (port in [1, 65535]), got {address!r}"
        )
    return text


def connect_dask(address: str, timeout: float = DASK_TIMEOUT) -> Any:
    """A ``distributed.Client`` connected to the scheduler at ``address``; ParameterError (one line)
    if the address is malformed, Dask is not installed, or no scheduler answers within ``timeout`` s."""
    text = check_dask_address(address)
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - depends on the optional extra
        raise ParameterError("dask: install the optional extra 'dotattn[dask]' to use a Dask scheduler") from None
    spec = jobqueue_spec(text)
    if spec is not None:  # a cluster of batch jobs: its scheduler runs here, its workers as submitted jobs
        kind, jobs = spec
        cluster = jobqueue_cluster(kind)
        cluster.scale(jobs=jobs)
        return Client(cluster)
    try:
        return Client(text, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as err:
        raise ParameterError(
            f"dask: no scheduler answered at {text} within {timeout:g} s ({type(err).__name__})"
        ) from None


MAX_WORKERS = 1024


def check_workers(workers: Any) -> int:
    """``workers`` as a number of worker processes in [1, :data:`MAX_WORKERS`] (ParameterError otherwise)."""
    return check_int("workers", workers, 1, MAX_WORKERS)


def run_tasks(
    fn: Callable[..., Any],
    tasks: Sequence[tuple[Any, ...]],
    *,
    workers: int = 1,
    dask_address: Any = None,
    on_result: Callable[[int, Any], None] | None = None,
    on_unit: Callable[[int], None] | None = None,
) -> None:
    """Run ``fn(*task, report=callable_or_None)`` for each task; see the module docstring.

    ``workers`` <= 1 (or a single task): in this process. ``dask_address``: a scheduler address or
    a ``distributed.Client`` (then ``workers`` is ignored and ``report`` is None). ``fn`` must be a
    module-level function (picklable).
    """
    on_result = on_result or (lambda i, r: None)
    on_unit = on_unit or (lambda i: None)
    if not tasks:
        return
    if dask_address is not None:
        _run_dask(fn, tasks, dask_address, on_result)
        return
    if workers <= 1 or len(tasks) == 1:
        for i, t in enumerate(tasks):
            on_result(i, fn(*t, report=lambda i=i: on_unit(i)))
        return
    ctx = pool_context()
    q = ctx.Queue()
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)), mp_context=ctx, initializer=_init_worker, initargs=(q, os.getpid())
    )
    ok = False
    try:
        futures = {pool.submit(_pool_call, fn, i, t): i for i, t in enumerate(tasks)}
        pending = set(futures)
        held: dict[int, tuple[Any, float]] = {}  # task index -> (result, when it arrived)
        flushed: set[int] = set()
        while pending or held:
            if pending:
                finished, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            else:  # only waiting for the last progress messages
                finished = set()
                time.sleep(0.02)
            for fut in finished:
                held[futures[fut]] = (fut.result(), time.monotonic())  # raises a worker's exception here
            flushed |= _drain(q, on_unit)
            # hand a result on once all its units are reported (or, should a message be lost, after 10 s)
            for i in sorted(i for i in held if i in flushed or time.monotonic() - held[i][1] > 10):
                on_result(i, held.pop(i)[0])
        ok = True
    finally:
        if ok:
            pool.shutdown(wait=True)
        else:
            _terminate(pool)
        q.close()
        q.cancel_join_thread()


def _drain(q: Any, on_unit: Callable[[int], None]) -> set[int]:
    """Report the queued units; the tasks whose last message (all units sent) arrived."""
    done: set[int] = set()
    while True:
        try:
            i, last = q.get_nowait()
        except (_queue.Empty, OSError, ValueError, EOFError):
            return done
        if last:
            done.add(i)
        else:
            on_unit(i)


def _run_dask(
    fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], address: Any, on_result: Callable[[int, Any], None]
) -> None:
    client = connect_dask(address) if isinstance(address, str) else address
    from distributed import as_completed as dask_completed

    futures = []
    try:
        futures = [client.submit(fn, *t, pure=False) for t in tasks]
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in dask_completed(futures):
            on_result(index[fut.key], fut.result())
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futures)
        raise
    finally:
        if isinstance(address, str):
            cluster = getattr(client, "cluster", None) if jobqueue_spec(address) is not None else None
            client.close()
            if cluster is not None:  # the batch jobs end with the run
                cluster.close()


# ----------------------------------------------------------------------------------------------
# one run per folder
# ----------------------------------------------------------------------------------------------
class RunLockedError(ParameterError):
    """The folder is in use by another live run (exit status 2, one line)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class RunLock:
    """``with RunLock(folder, what):`` one run at a time in ``folder`` (file ``.dotattn.lock``).

        The lock file holds ``pid host``, created atomically with its content (a hard link of a written
    temporary file). If it exists
        and its owner is alive (or on another host, where we cannot tell), :class:`RunLockedError`;
        if its owner is dead, the lock is stale and is taken over. Removed on exit.
    """

    NAME = ".dotattn.lock"

    def __init__(self, folder: str | os.PathLike[str], what: str = "dotattn") -> None:
        self.path = Path(folder) / self.NAME
        self.what = what
        self.held = False

    def _owner(self) -> tuple[int | None, str]:
        try:
            text = self.path.read_text().split()
            return int(text[0]), (text[1] if len(text) > 1 else "")
        except (OSError, ValueError, IndexError):
            return None, ""

    def _create(self, text: str) -> None:
        """Create the lock file with its content in one step: written to a temporary file first, then
        hard-linked to the lock's name (FileExistsError if it exists). A full disk or a folder that
        cannot be written raises OSError and leaves neither file behind (never an empty lock)."""
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".dotattn.lock.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
            os.chmod(tmp, 0o644)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links: exclusive create, removed if the write fails
                fd2 = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                try:
                    with os.fdopen(fd2, "w") as fh:
                        fh.write(text)
                except OSError:
                    with contextlib.suppress(OSError):
                        self.path.unlink()
                    raise
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def acquire(self) -> None:
        me = f"{os.getpid()} {socket.gethostname()}\n"
        for _ in range(3):
            try:
                self._create(me)
            except FileExistsError:
                pid, host = self._owner()
                if pid is None:
                    # being written this instant, or left empty by a crash: look again once
                    time.sleep(0.1)
                    pid, host = self._owner()
                if pid is not None and (host != socket.gethostname() or _pid_alive(pid)):
                    where = f"pid {pid}" + (f" on {host}" if host and host != socket.gethostname() else "")
                    raise RunLockedError(
                        f"{self.what}: {self.path.parent} is in use by another run ({where}); "
                        f"wait for it to finish or choose another --out (remove {self.path} "
                        f"if no such run exists)"
                    ) from None
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()  # stale: its owner is dead
                continue
            self.held = True
            return
        raise RunLockedError(f"{self.what}: could not take the lock {self.path}")

    def release(self) -> None:
        if self.held:
            pid, _ = self._owner()
            if pid == os.getpid():
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
            self.held = False

    def __enter__(self) -> RunLock:
        try:
            with signals_deferred():  # a stop during acquire is delivered once the lock is held (or refused)
                self.acquire()
        except BaseException:
            self.release()  # only a lock that names this process
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


# ----------------------------------------------------------------------------------------------
# progress
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProgressState:
    """A snapshot of a run: tasks (e.g. ω columns) and units (fixed points), with elapsed seconds.

    ``units_total`` is fixed at the start of a run (an estimate of the units: a task that needs more counts
    at most its share until it finishes), so the denominator never grows.
    Tasks taken from a cache count as done and contribute no units.
    """

    units_done: int
    units_total: int
    tasks_done: int
    tasks_total: int
    tasks_cached: int
    elapsed: float
    unit: str = "fixed points"
    task: str = "columns"

    @property
    def rate(self) -> str:
        """The rate so far, e.g. ``2.1 s per fixed point`` or ``14 fixed points/s`` ('' before the first unit)."""
        if self.units_done <= 0 or self.elapsed <= 0:
            return ""
        per = self.elapsed / self.units_done
        if self.unit.startswith("%"):
            return f"{per:.2g} s per %" if per >= 1 else f"{1 / per:.2g} %/s"
        words = (self.unit or "units").split()
        plural = next((i for i, w in enumerate(words) if w.endswith("s")), None)
        one = " ".join(w[:-1] if i == plural else w for i, w in enumerate(words))
        return f"{per:.2g} s per {one}" if per >= 1 else f"{1 / per:.2g} {' '.join(words)}/s"

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far (None before the first unit)."""
        if self.units_done <= 0:
            return None
        return max(0.0, self.elapsed * (self.units_total - self.units_done) / self.units_done)


def format_duration(seconds: float | None) -> str:
    """'41 s', '7 min', '1 h 05 min' (rounded), or '?'."""
    if seconds is None or seconds != seconds:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


class ProgressReporter:
    """Renders :class:`ProgressState` snapshots on ``stream`` (default stderr).

    On a terminal: one bar, redrawn in place, with the ETA. Otherwise: a line such as
    ``phase-diagram: 123/500 fixed points, 2 of 10 columns, 41 s elapsed, ETA 2 min`` at most
    every ``interval`` seconds (and at the end). ``quiet``: nothing.
    """

    def __init__(
        self,
        label: str,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
        interval: float = 5.0,
        tty: bool | None = None,
    ) -> None:
        self.label, self.quiet, self.interval = label, quiet, interval
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self._last = -float("inf")
        self._drawn = False

    def line(self, s: ProgressState) -> str:
        tasks = (
            f"{s.tasks_done} of {s.tasks_total} {s.task}"
            + (f" ({s.tasks_cached} cached)" if s.tasks_cached else "")
            + ", "
            if s.task
            else ""
        )
        return (
            f"{self.label}: {s.units_done}/{s.units_total} {s.unit}, {tasks}"
            f"{format_duration(s.elapsed)} elapsed"
            + (f" ({s.rate})" if s.rate else "")
            + f", ETA {format_duration(s.eta)}"
        )

    def __call__(self, s: ProgressState) -> None:
        if self.quiet:
            return
        final = s.tasks_done >= s.tasks_total
        if self.tty:
            width = 30
            frac = min(1.0, s.units_done / s.units_total) if s.units_total else 1.0
            bar = "#" * int(round(frac * width))
            tasks = f"{s.tasks_done}/{s.tasks_total} {s.task}, " if s.task else ""
            self.stream.write(
                f"\r{self.label} [{bar:<{width}}] {s.units_done}/{s.units_total} {s.unit}, {tasks}"
                + (f"{s.rate}, " if s.rate else "")
                + f"ETA {format_duration(s.eta)}   "
            )
            if final:
                self.stream.write("\n")
            self._drawn = not final
            self.stream.flush()
            return
        now = time.monotonic()
        if final or now - self._last >= self.interval:
            self._last = now
            self.stream.write(self.line(s) + "\n")
            self.stream.flush()

    def close(self) -> None:
        """End a bar left open (e.g. after an interruption) so the next line starts clean."""
        if self.tty and self._drawn and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
