"""How record fields are written in rows (JSON and CSV) and read back: one codec for every record.

In JSON a row holds plain values: numbers, ``null`` for a missing or non-finite number, booleans,
strings, and every matrix as a nested list (rows of columns; a 1×1 matrix is ``[[x]]``). In CSV
the same row is written cell by cell: numbers by ``repr`` (exact round trip), ``""`` for a missing
or non-finite number, booleans as ``True`` / ``False``, matrices as their JSON text (a nested list
in one quoted cell). The ``read_*`` functions accept either form, so ``from_row`` of a record reads
JSON rows and CSV rows alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["matrix_cell", "read_float", "read_int", "read_bool", "read_matrix", "read_text", "read_flat"]


def matrix_cell(a: Any) -> list[list[float]] | None:
    """A matrix as a nested list of floats (2-D), or None."""
    if a is None:
        return None
    cell: list[list[float]] = np.atleast_2d(np.asarray(a, dtype=float)).tolist()
    return cell


def read_float(x: Any) -> float:
    """A number, or NaN for None / ``""``."""
    if x is None or (isinstance(x, str) and not x.strip()):
        return float("nan")
    return float(x)


def read_int(x: Any) -> int:
    return int(float(x))


def read_bool(x: Any) -> bool:
    """A boolean written as JSON ``true``/``false`` or as the CSV cells ``True``/``False``."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, str) and x in ("True", "False"):
        return x == "True"
    raise ValueError(f"not a boolean cell: {x!r}")


def read_matrix(x: Any, column: bool = False) -> np.ndarray | None:
    """A nested list (or its JSON text) as a read-only 2-D float array; None for a missing cell.

    ``column``: a flat list is a column (L, 1) rather than a row (1, L) (rows of older files that
    wrote μ of a rank-1 student as its L values)."""
    if isinstance(x, str):
        if not x.strip():
            return None
        x = json.loads(x)
    if x is None:
        return None
    a = np.asarray(x, dtype=float)
    a = a.reshape(-1, 1) if (column and a.ndim == 1) else np.atleast_2d(a)
    a.setflags(write=False)
    return a


def read_text(x: Any) -> str:
    return "" if x is None else str(x)


def read_flat(
    row: Mapping[str, Any], columns: Sequence[str], ints: Sequence[str] = (), texts: Sequence[str] = ()
) -> dict[str, Any]:
    """The fields of a record with scalar columns only, from a JSON or CSV row: ``ints`` as int,
    ``texts`` as str, every other column as float."""
    return {
        k: read_int(row[k]) if k in ints else read_text(row[k]) if k in texts else read_float(row[k]) for k in columns
    }
