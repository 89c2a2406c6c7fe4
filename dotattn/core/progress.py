"""How every long command speaks: one start line with an estimate, then progress per finished unit.

A long command (phase diagram, ERM training, AMP/GD studies, NUTS chains, ...) does a known number of
units of work (columns, runs, chains, fixed points). :class:`CommandProgress` is the one way to say so:

* :meth:`CommandProgress.start` prints one start line on stderr: what it computes, how many units
  (and how many come from a cache), where it writes, and an estimate of the wall time that counts
  every unit still to do: ``units × seconds per unit`` from a :class:`Cost` calibrated per command
  on a stated measurement (``benchmarks/`` or a committed results README), divided over the cores it
  will use (``workers × threads``, at most the cores) and stretched by the load it finds
  (:func:`load_factor`, from the threads runnable at that moment); the line states the load it assumes.
* Bound or typical, one rule (:func:`estimate_words`): where the work per unit has a budget (steps,
  iterations) that units may stop short of, the per-unit seconds a command multiplies out are those of the
  whole budget (a bound), and :attr:`Cost.typical` is the calibrated fraction of it a unit typically uses;
  the line says ``typically ~X, at most Y if every run uses its whole budget``. Where there is no budget to
  stop short of, or the cost was measured per unit at convergence, the fraction is 1 and the line says
  ``typically ~X`` alone.
* :meth:`CommandProgress.unit_done` after every finished unit: on a terminal a bar redrawn in place
  with rate and ETA; off a terminal one line at most every ``interval`` seconds (and at the last
  unit), through :class:`dotattn.core.runner.ProgressReporter`. The denominator is fixed at the
  start: it never grows during a run.
* ``quiet``: nothing at all.

Nothing here knows about physics; the costs live beside each command's code.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from dotattn.core.runner import ProgressReporter, ProgressState, format_duration

__all__ = [
    "Cost",
    "CommandProgress",
    "UnitReport",
    "load_factor",
    "estimate_seconds",
    "estimate_words",
    "cores",
    "present_load",
    "runnable_others",
]


@dataclass(frozen=True)
class Cost:
    """A calibrated cost: ``seconds`` of CPU time (one thread) per unit of some measure of work that the
    command's own estimate multiplies out (e.g. per sample × d × gradient step of one ERM run), and
    ``source``: where the measurement is written down, with its conditions (e.g.
    ``benchmarks/README.md "Start-line estimates"``).

    ``typical``: the fraction of the budgeted work (steps, iterations) a unit typically does, calibrated on
    measured runs; 1 where every unit does its whole budget, or where ``seconds`` was measured per unit at
    convergence (then the estimate is the typical time and there is no bound to state)."""

    seconds: float
    source: str
    typical: float = 1.0

    def __post_init__(self) -> None:
        if not (self.seconds >= 0 and self.seconds < float("inf")):
            raise ValueError(f"Cost.seconds must be finite and >= 0, got {self.seconds!r}")
        if not 0 < self.typical <= 1:
            raise ValueError(f"Cost.typical must be in (0, 1], got {self.typical!r}")


def cores() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


LOADAVG = "/proc/loadavg"
"""Where Linux says how many threads are runnable now (the fourth field, ``running/total``)."""


def runnable_others(loadavg_text: str) -> float:
    """Threads runnable at this moment besides the one reading: the ``R`` of ``/proc/loadavg``'s fourth field
    ``R/T`` minus one (the reader is running while it reads). ValueError if the text has no such field."""
    fields = loadavg_text.split()
    if len(fields) < 4 or "/" not in fields[3]:
        raise ValueError(f"not a /proc/loadavg line: {loadavg_text!r}")
    return float(max(0, int(fields[3].split("/")[0]) - 1))


def present_load(path: str | None = None) -> float:
    """The load a command starting now will share the cores with: the threads runnable at this moment besides
    this one (:func:`runnable_others` of ``path``). An instantaneous count, not the one-minute average: the
    average still counts, for a minute, a command that has just ended, so a command started right after
    another would pick fewer threads and state a longer estimate. Where there is no ``/proc`` (not Linux): the
    one-minute load average, 0 where the platform has none either. ``path``: default :data:`LOADAVG`."""
    try:
        with open(LOADAVG if path is None else path) as fh:
            return runnable_others(fh.read())
    except (OSError, ValueError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return 0.0


def load_factor(parallel: int, load: float | None = None, n_cores: int | None = None) -> float:
    """How much longer than on idle cores a run of ``parallel`` busy threads takes when ``load`` other
    runnable threads share ``n_cores``: max(1, (load + parallel) / cores) (the cores are shared evenly)."""
    load = present_load() if load is None else load
    n_cores = cores() if n_cores is None else n_cores
    return max(1.0, (load + parallel) / max(1, n_cores))


def estimate_seconds(
    cpu_seconds: float, workers: int = 1, threads: int = 1, load: float | None = None, n_cores: int | None = None
) -> float:
    """Wall seconds of ``cpu_seconds`` of work (measured on one thread) spread over ``workers × threads``
    (at most the cores), at ``load`` (default: :func:`present_load`, the threads runnable now)."""
    n_cores = cores() if n_cores is None else n_cores
    parallel = max(1, min(workers * max(threads, 1), n_cores))
    return cpu_seconds / parallel * load_factor(parallel, load, n_cores)


def estimate_words(typical: float, bound: float | None = None) -> str:
    """The one wording of an estimate (wall seconds): ``typically ~12 min``, and, where the bound differs from it
    (by more than the rounding of the printed durations), ``typically ~3 min, at most 12 min if every run uses
    its whole budget``. ``bound`` None: no budget to state. A zero typical time (nothing left to compute) reads
    ``nothing left to compute``. ValueError for a negative or non-finite time, or a bound below the typical."""
    for name, v in (("typical", typical), ("bound", bound)):
        if v is not None and not (v >= 0 and v < float("inf")):
            raise ValueError(f"estimate_words: {name} must be finite and >= 0, got {v!r}")
    if bound is not None and bound < typical * (1 - 1e-9):
        raise ValueError(f"estimate_words: the bound {bound!r} is below the typical time {typical!r}")
    if typical == 0 and not bound:
        return "nothing left to compute"
    words = f"typically {_about(typical)}"
    if bound is not None and _about(bound) != _about(typical):
        words += f", at most {format_duration(bound)} if every run uses its whole budget"
    return words


def _about(seconds: float) -> str:
    """``~41 s``, ``~7 min``; ``under 1 s`` for what rounds to 0 s."""
    return "under 1 s" if seconds < 0.5 else f"~{format_duration(seconds)}"


def _singular(unit: str) -> str:
    return unit[:-1] if unit.endswith("s") else unit


class CommandProgress:
    """The start line and the per-unit progress of one long command (see the module docstring).

    ``label``: the command as the user typed it (``train-erm``); ``total``: units this run does or takes
    from a cache (fixed: never grows); ``unit``: their name in the plural (``runs``); ``cached``: how many of
    them come from a cache (counted done at once)."""

    def __init__(
        self,
        label: str,
        total: int,
        unit: str,
        *,
        cached: int = 0,
        quiet: bool = False,
        stream: TextIO | None = None,
        interval: float = 5.0,
        tty: bool | None = None,
        t0: float | None = None,
    ) -> None:
        self.label, self.total, self.unit, self.quiet = label, int(total), unit, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.cached = min(int(cached), self.total)
        self.done = self.cached
        self.reporter = ProgressReporter(label, quiet=quiet, stream=self.stream, interval=interval, tty=tty)
        self.t0 = time.monotonic() if t0 is None else t0  # CLOCK_MONOTONIC: comparable across processes

    @property
    def computed(self) -> int:
        """Units finished by this run (not taken from a cache)."""
        return self.done - self.cached

    def estimate_line(
        self,
        cpu_seconds_per_unit: float,
        cost: Cost,
        workers: int = 1,
        threads: int = 1,
        n_cores: int | None = None,
        fixed: float = 0.0,
        typical: float | None = None,
        load: float | None = None,
    ) -> str:
        """``typically ~3 min, at most 12 min if every run uses its whole budget; the 60 runs left on 1
        worker(s) x 2 thread(s) at the present load 1 ... (0.8 CPU-s per run with its whole budget, typically
        25 % of it; calibrated in SOURCE)``: the estimate that counts every unit still to do (plus ``fixed`` CPU
        seconds once: a process to start, imports), worded by :func:`estimate_words`.
        ``cpu_seconds_per_unit``: one unit's whole budget (or its measured cost where it has none);
        ``typical``: the fraction of it a unit typically does (default :attr:`Cost.typical`; 1 where the
        settings let no unit stop early, e.g. a tolerance of 0); ``load``: default :func:`present_load`."""
        frac = cost.typical if typical is None else typical
        if not 0 < frac <= 1:
            raise ValueError(f"estimate_line: typical must be in (0, 1], got {frac!r}")
        left = self.total - self.cached
        load = present_load() if load is None else load
        n_cores = cores() if n_cores is None else n_cores
        bound = estimate_seconds(left * cpu_seconds_per_unit + fixed, workers, threads, load, n_cores)
        usual = estimate_seconds(left * cpu_seconds_per_unit * frac + fixed, workers, threads, load, n_cores)
        per = f"{cpu_seconds_per_unit:.3g} CPU-s per {_singular(self.unit)}"
        if frac < 1:
            per += f" with its whole budget, typically {100 * frac:.2g} % of it"
        return (
            f"{estimate_words(usual, bound if frac < 1 else None)}; the {left} {self.unit} left on {workers} "
            f"worker(s) x {threads} thread(s) at the present load {load:g} (threads runnable now) on {n_cores} "
            f"cores, assumed to stay ({per}; calibrated in {cost.source})"
        )

    def start(self, what: str, estimate: str = "", where: str | None = None, first_line: bool = True) -> None:
        """One line: ``LABEL: WHAT; N UNITS (K cached); writing WHERE; ESTIMATE``; then the first progress line
        (``first_line``; off where the command reports finer units through its own reporter)."""
        if self.quiet:
            return
        parts = [
            f"{self.label}: {what}",
            f"{self.total} {self.unit}" + (f" ({self.cached} cached)" if self.cached else ""),
        ]
        if where:
            parts.append(f"writing {where}")
        if estimate:
            parts.append(estimate)
        self.stream.write("; ".join(parts) + "\n")
        self.stream.flush()
        if first_line:
            self._emit()

    def unit_done(self, n: int = 1) -> None:
        """``n`` more units finished (by this run)."""
        self.done = min(self.total, self.done + n)
        self._emit()

    def _emit(self) -> None:
        if self.quiet or self.total <= 0:
            return
        self.reporter(
            ProgressState(
                units_done=self.computed,
                units_total=self.total - self.cached,  # fixed at the start: never grows
                tasks_done=self.done,
                tasks_total=self.total,
                tasks_cached=self.cached,
                elapsed=time.monotonic() - self.t0,
                unit=self.unit,
                task="",
            )
        )

    def kept(self, where: str) -> str:
        """What an interruption keeps, truthfully: ``the 3 runs finished (2 now, 1 before) are kept in WHERE``,
        or ``no run finished, nothing is kept``."""
        if self.done == 0:
            return f"none of the {self.total} {self.unit} finished, nothing is kept"
        before = f" ({self.computed} now, {self.cached} before)" if self.cached else ""
        return f"the {self.done} {self.unit} finished{before} are kept in {where}"

    def close(self) -> None:
        self.reporter.close()


class UnitReport:
    """A picklable ``report(cached)`` for work that runs in another process (:func:`dotattn.core.runner.run_isolated`):
    it builds, in that process, the :class:`CommandProgress` whose start line the parent printed, and counts a
    unit there after each one computed. Lines, never a bar (a library's own bar may be drawing on a terminal)."""

    def __init__(self, label: str, total: int, unit: str, cached: int = 0, quiet: bool = False) -> None:
        self.label, self.total, self.unit, self.cached, self.quiet = label, total, unit, cached, quiet
        self.t0 = time.monotonic()
        self._progress: CommandProgress | None = None

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_progress": None}

    def __call__(self, cached: bool) -> None:
        if self._progress is None:
            self._progress = CommandProgress(
                self.label, self.total, self.unit, cached=self.cached, quiet=self.quiet, tty=False, t0=self.t0
            )
        if not cached:
            self._progress.unit_done()
