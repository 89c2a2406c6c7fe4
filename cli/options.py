"""Options shared by several commands, and their conversion to library objects."""

from __future__ import annotations

from typing import Callable

import click

from dotattn.problem import ParameterError, Problem, parse_matrix

__all__ = ["problem_options", "problem_from_options", "parse_grid"]


def problem_options(func: Callable) -> Callable:
    """Add --L, --rank, --teacher-rank, --sigma, --lambda, --A, --positional-gram."""
    opts = [
        click.option("--L", "L", type=int, default=2, show_default=True, help="Sequence length L (>= 2)."),
        click.option("--rank", type=int, default=1, show_default=True, help="Student rank r (>= 1)."),
        click.option("--teacher-rank", type=int, default=1, show_default=True, help="Teacher rank r_t (>= 1)."),
        click.option("--sigma", type=float, default=0.5, show_default=True, help="Token noise std sigma (> 0)."),
        click.option("--lambda", "ridge", type=float, default=0.01, show_default=True, help="Ridge lambda (> 0)."),
        click.option("--A", "A", type=str, default=None,
                     help="Positional attention A, rows separated by ';' (default for L=2: '0.6,0.4;0.4,0.6')."),
        click.option("--positional-gram", type=str, default=None,
                     help="Gram matrix of the positional embeddings, rows separated by ';' "
                          "(default for L=2: '1,-1;-1,1'; identity otherwise)."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def problem_from_options(omega: float, L: int, rank: int, teacher_rank: int, sigma: float,
                         ridge: float, A: str | None, positional_gram: str | None) -> Problem:
    """Build and validate a Problem from the shared CLI options."""
    return Problem(L=L, rank=rank, teacher_rank=teacher_rank, sigma=sigma, ridge=ridge, omega=omega,
                   positional_attention=None if A is None else parse_matrix(A),
                   positional_gram=None if positional_gram is None else parse_matrix(positional_gram))


def parse_grid(name: str, values: tuple[str, ...] | list[str], integer: bool = False) -> list[float]:
    """Parse repeated values, comma lists and ``start:stop:count`` ranges into a sorted list.

    Raises ParameterError for an empty grid, a malformed entry or a count <= 0.
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
                try:
                    start, stop = float(bits[0]), float(bits[1])
                    count = int(bits[2])
                except ValueError:
                    raise ParameterError(f"{name} range {part!r} must be start:stop:count with an integer count") from None
                if count <= 0:
                    raise ParameterError(f"{name} range {part!r}: count must be >= 1")
                if count == 1:
                    out.append(start)
                else:
                    out.extend(start + (stop - start) * i / (count - 1) for i in range(count))
            else:
                try:
                    out.append(float(part))
                except ValueError:
                    raise ParameterError(f"{name} value {part!r} is not a number") from None
    if not out:
        raise ParameterError(f"{name} grid is empty; give at least one value")
    return sorted(set(round(x, 12) for x in out))
