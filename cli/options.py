"""Options shared by several commands, and their conversion to library objects."""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import click

from dotattn.core.validation import ParameterError, parse_matrix
from dotattn.positional_semantic.problem import Problem

__all__ = [
    "problem_options",
    "problem_from_options",
    "student_option",
    "correlation_option",
    "value_options",
    "parse_grid",
    "MAX_GRID",
    "output_folder",
    "threads_per_worker",
    "command_line",
]


def problem_options(func: Callable) -> Callable:
    """Add --L, --rank, --teacher-rank, --sigma, --lambda, --A, --positional-gram."""
    opts = [
        click.option("--L", "L", type=int, default=2, show_default=True, help="Sequence length L, in [2, 64]."),
        click.option("--rank", type=int, default=1, show_default=True, help="Student rank r, in [1, 64]."),
        click.option("--teacher-rank", type=int, default=1, show_default=True, help="Teacher rank r_t, in [1, 64]."),
        click.option(
            "--sigma", type=float, default=0.5, show_default=True, help="Token noise std sigma, in [0.01, 2]."
        ),
        click.option(
            "--lambda", "ridge", type=float, default=0.01, show_default=True, help="Ridge lambda, in [1e-8, 1e4]."
        ),
        click.option(
            "--A",
            "A",
            type=str,
            default=None,
            help="Positional attention A, rows separated by ';' (default for L=2: '0.6,0.4;0.4,0.6').",
        ),
        click.option(
            "--positional-gram",
            type=str,
            default=None,
            help="Gram matrix of the positional embeddings, rows separated by ';' "
            "(default for L=2: '1,-1;-1,1'; identity otherwise).",
        ),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def student_option(func: Callable) -> Callable:
    """Add --student (tied | untied)."""
    return click.option(
        "--student",
        type=str,
        default="tied",
        show_default=True,
        help="Student attention: tied softmax(X Q Q^T X^T/d) X or untied softmax(X Q K^T X^T/d) X "
        "(Q, K in R^{d x r}, ridge on both).",
    )(func)


def correlation_option(func: Callable) -> Callable:
    """Add --token-correlation c."""
    return click.option(
        "--token-correlation",
        type=float,
        default=0.0,
        show_default=True,
        help="Correlation c of the token contents across positions: E[z_l z_l'^T] = sigma^2 C_ll' I, "
        "C = (1-c) I + c 1 1^T; c in (-1/(L-1), 1).",
    )(func)


def value_options(func: Callable) -> Callable:
    """Add --value (none | scalar | low-rank) and --value-rank k (ERM only)."""
    func = click.option(
        "--value-rank",
        type=int,
        default=None,
        help="Rank k of the value correction U W^T/d, in [1, 64] (only with --value low-rank; default 1).",
    )(func)
    return click.option(
        "--value",
        type=str,
        default="none",
        show_default=True,
        help="Trainable value matrix V of yhat = S X V: none (V = I), scalar (V = v I) or low-rank "
        "(V = v I + U W^T/d); the ridge acts on V - I.",
    )(func)


def value_rank_of(value: str, value_rank: int | None) -> int:
    """--value-rank as given (default 1); refused in one line unless --value is low-rank, where it is used."""
    if value_rank is None:
        return 1
    if str(value).strip().lower() != "low-rank":
        raise ParameterError(f"value-rank is only used with --value low-rank, got --value {value}")
    return value_rank


def _matrix(text: str) -> tuple[tuple[float, ...], ...]:
    """A matrix option as the rows of a Problem's matrix field."""
    return tuple(tuple(row) for row in parse_matrix(text))


def problem_from_options(
    omega: float,
    L: int,
    rank: int,
    teacher_rank: int,
    sigma: float,
    ridge: float,
    A: str | None,
    positional_gram: str | None,
    student: str = "tied",
    token_correlation: float = 0.0,
) -> Problem:
    """Build and validate a Problem from the shared CLI options."""
    return Problem(
        L=L,
        rank=rank,
        teacher_rank=teacher_rank,
        sigma=sigma,
        ridge=ridge,
        omega=omega,
        positional_attention=None if A is None else _matrix(A),
        positional_gram=None if positional_gram is None else _matrix(positional_gram),
        student=str(student).strip().lower(),
        token_correlation=token_correlation,
    )


MAX_GRID = 10_000
"""Most values a grid option may hold (a phase-diagram column solves one fixed point per α and branch)."""


def _grid_number(name: str, text: str, part: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise ParameterError(f"{name} value {part!r} is not a number") from None
    if not math.isfinite(x):
        raise ParameterError(f"{name} values must be finite numbers, got {part!r}")
    return x


def parse_grid(name: str, values: tuple[str, ...] | list[str], integer: bool = False) -> list[float]:
    """Parse repeated values, comma lists and ``start:stop:count`` ranges into a sorted list.

    Raises ParameterError for an empty grid, a malformed or non-finite entry, a range with
    start > stop (never reversed silently), a count outside [1, :data:`MAX_GRID`] or more than
    :data:`MAX_GRID` values in all. Ranges of the values themselves are checked by the library.
    """
    out: list[float] = []
    for item in values:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if ":" in part:
                bits = part.split(":")
                if len(bits) != 3:
                    raise ParameterError(f"{name} range {part!r} must be start:stop:count")
                start, stop = _grid_number(name, bits[0], part), _grid_number(name, bits[1], part)
                try:
                    count = int(bits[2])
                except ValueError:
                    raise ParameterError(
                        f"{name} range {part!r} must be start:stop:count with an integer count"
                    ) from None
                if not 1 <= count <= MAX_GRID:
                    raise ParameterError(f"{name} range {part!r}: count must be in [1, {MAX_GRID}]")
                if start > stop:
                    raise ParameterError(
                        f"{name} range {part!r} must have start <= stop (write it as {bits[1]}:{bits[0]}:{count})"
                    )
                if count == 1:
                    out.append(start)
                else:
                    out.extend(start + (stop - start) * i / (count - 1) for i in range(count))
            else:
                out.append(_grid_number(name, part, part))
            if len(out) > MAX_GRID:
                raise ParameterError(f"{name} grid must have at most {MAX_GRID} values")
    if not out:
        raise ParameterError(f"{name} grid is empty; give at least one value")
    return sorted(set(_tidy(x) for x in out))


def _tidy(x: float) -> float:
    """A grid value with the float noise of a range step removed: 12 decimals at |x| >= 1, 12 significant
    digits below (so that a tiny value such as 1.5e-12 is kept, not rounded to 2e-12 or 0)."""
    return round(x, 12) if abs(x) >= 1 else float(f"{x:.12g}")


@contextlib.contextmanager
def output_folder(
    out: str, what: str = "dotattn", kind: str | None = None, made_for: Mapping[str, Any] | None = None
) -> Iterator[Path]:
    """The output folder ``out`` of command ``what``, opened before anything is computed: created and
    checked (:func:`dotattn.core.io.ensure_writable_dir`), locked for this run (the
    :class:`dotattn.core.runner.RunLock` every writing command takes), refused when it holds another
    command's output or, given ``kind`` and ``made_for``, a finished run made for other settings
    (:func:`dotattn.core.integrity.check_output_folder`), its stale temporary files removed.

    SIGINT/SIGTERM in the block become :class:`dotattn.core.runner.Interrupted` (one line, exit 128 +
    signal), and if the block ends by any exception the folders this call created are removed again
    while they are still empty, so a refused, failed or interrupted run leaves no empty folder behind
    (SIGKILL cannot be caught)."""
    from dotattn.core.io import ensure_writable_dir, remove_stale_tmp
    from dotattn.core.runner import RunLock, stop_on_signals
    from dotattn.verify import check_output_folder

    with stop_on_signals():  # before the folder exists: a signal at any point below is cleaned up
        created = []
        p = Path(out).absolute()
        while not p.exists() and p != p.parent:
            created.append(p)  # deepest first
            p = p.parent
        before: set[str] | None = None
        try:
            folder = ensure_writable_dir(out)
            before = _subfolders(folder)
            with RunLock(folder, what):
                if kind is not None:
                    check_output_folder(folder, kind, made_for, what)
                remove_stale_tmp(folder)
                yield folder
        except BaseException:
            if before is not None:  # folders the run made inside (a cache/ before its first unit), if empty
                for name in sorted(_subfolders(Path(out)) - before):
                    with contextlib.suppress(OSError):
                        (Path(out) / name).rmdir()
            for c in created:
                try:
                    c.rmdir()  # only if empty
                except OSError:
                    break
            raise


def _subfolders(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir() if p.is_dir()}
    except OSError:
        return set()


@contextlib.contextmanager
def output_file(out: str, what: str, option: str = "--out") -> Iterator[Path]:
    """The output file ``out`` (a figure) of command ``what``, checked before anything is computed: a file
    path (not a folder), not a file of a dotattn output folder (its folder holds a manifest.json: another
    run's file would be replaced, or an unlisted file added), its folder created and writable. Every
    refusal is a ParameterError naming ``option``; folders created here are removed again if the block
    fails while they are still empty."""
    from dotattn.core.io import MANIFEST_NAME, ensure_writable_dir
    from dotattn.core.validation import check_out_dir

    check_out_dir(out, option.lstrip("-"))
    path = Path(out)
    if path.is_dir():
        raise ParameterError(f"{what}: {option} {out!r} is a folder; give a file name")
    if path.exists() and not path.is_file():
        raise ParameterError(f"{what}: {option} {out!r} is not a regular file")
    parent = path.absolute().parent
    if (parent / MANIFEST_NAME).is_file():
        raise ParameterError(
            f"{what}: {option} {out!r} is inside the dotattn output folder {str(parent)!r} (it has a "
            f"{MANIFEST_NAME}); choose a file elsewhere"
        )
    created = []
    p = parent
    while not p.exists() and p != p.parent:
        created.append(p)
        p = p.parent
    try:
        try:
            ensure_writable_dir(parent)
        except ParameterError as err:
            raise ParameterError(f"{what}: {option} {out!r} cannot be written ({err})") from None
        if path.exists() and not os.access(path, os.W_OK):
            raise ParameterError(f"{what}: {option} {out!r} cannot be written (permission denied)")
        try:
            yield path
        except OSError as err:
            raise ParameterError(f"{what}: {option} {out!r} cannot be written: {err.strerror or err}") from None
    except BaseException:
        for c in created:
            try:
                c.rmdir()
            except OSError:
                break
        raise


def threads_per_worker(threads: int, workers: int, cores: int | None = None, load: float | None = None) -> int:
    """Torch threads per worker process: ``threads`` if given (> 0), else ``max(1, free // workers)`` with
    ``free`` the cores not already busy (``cores`` minus the load average rounded, at least 1), so that the
    default never runs more threads than cores (on 2 cores, 2 workers with torch's default of 2 threads each
    ran 30x slower than 1 worker with 1 thread; train-erm's README example took 1344 CPU-s with torch's 2
    threads at load 3-10 against 313 s with 1 thread). ``load`` defaults to the threads runnable now
    (:func:`dotattn.core.progress.present_load`, not the one-minute average, which still counts a command that
    has just ended) when ``cores`` is not given (the machine's cores), else to 0."""
    if threads > 0:
        return threads
    from dotattn.core.progress import cores as machine_cores
    from dotattn.core.progress import present_load

    if load is None:
        load = present_load() if cores is None else 0.0
    n = cores if cores is not None else machine_cores()
    free = max(1, n - int(load + 0.5))
    return max(1, free // max(1, workers))


def command_line() -> str:
    """This process's command line as a ``dotattn`` command (recorded in provenance and manifests)."""
    return "dotattn " + " ".join(shlex.quote(a) for a in sys.argv[1:])
