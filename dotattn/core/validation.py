"""Validation shared by every theory: the error type for bad input and the checks that turn a user's
value into a typed one or refuse it in one line naming the parameter and its allowed range.

The CLI and the Python API use the same checks, so the API refuses what the CLI refuses.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "ParameterError",
    "readonly_array",
    "parse_matrix",
    "check_number",
    "check_real",
    "check_bool",
    "check_choice",
    "check_int",
    "check_alpha",
    "check_instance",
    "check_dask_scheme",
    "check_out_dir",
    "DASK_SCHEMES",
    "ALPHA_MAX",
    "NAME_MAX",
    "PATH_MAX",
]

ALPHA_MAX: float = 1e4
"""Largest sample complexity α = n/d accepted. The physics of interest is at α = O(1) (α_c ≤ 2.2 for
the toy model); α = 1e4 still solves in seconds (toy model, measured ~3 s on Gauss-Hermite 6),
while α = 1e12 kept the positional–semantic solver busy for minutes. For ERM, n = α d samples must fit too."""


def readonly_array(a: npt.ArrayLike) -> np.ndarray:
    """A float copy of ``a`` that cannot be written to (state in frozen dataclasses)."""
    arr = np.array(a, dtype=float)
    arr.setflags(write=False)
    return arr


class ParameterError(ValueError, TypeError):
    """Invalid user input; the message is one line naming the parameter and its allowed range.

    Every refusal of an argument, of a wrong value or of a wrong type, is this one class (the CLI
    turns it into one line and exit status 2). It subclasses both ValueError and TypeError, so code
    written for Python's conventions (``except TypeError`` for a wrong type, ``except ValueError``
    for a wrong value) catches it too."""


def parse_matrix(text: str) -> list[list[float]]:
    """Parse ``"0.6,0.4;0.4,0.6"`` (rows separated by ';', entries by ',' or spaces)."""
    rows = [r for r in text.replace("[", "").replace("]", "").split(";") if r.strip()]
    try:
        return [[float(x) for x in r.replace(",", " ").split()] for r in rows]
    except ValueError:
        raise ParameterError(f"matrix {text!r} must be numbers, rows separated by ';'") from None


def check_number(
    name: str,
    value: Any,
    low: float | None,
    low_open: bool,
    high: float | None = None,
    allowed: str = "",
    high_open: bool = False,
) -> float:
    """``value`` as a finite float in the range described by ``allowed`` (ParameterError naming ``name``).
    A bool or a string is not a number (:func:`is_real`)."""
    if not is_real(value):
        raise ParameterError(f"{name} must be a real number{' ' + allowed if allowed else ''}, got {_shown(value)}")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(f"{name} must be a real number {allowed}".strip()) from None
    if not math.isfinite(x):
        raise ParameterError(f"{name} must be finite {allowed}, got {x}".strip())
    bad_low = low is not None and (x <= low if low_open else x < low)
    bad_high = high is not None and (x >= high if high_open else x > high)
    if bad_low or bad_high:
        raise ParameterError(f"{name} must be {allowed}, got {x:g}")
    return x


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number of Python or NumPy (an int, a float, a NumPy integer or floating
    scalar, or a 0-d array of one): a bool, a string, None or a complex number is not."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind in "iuf"
    return isinstance(value, numbers.Real)


def _shown(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type(value).__name__} {text}"


def check_real(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float in [``low``, ``high``] (open ends with ``low_open``/``high_open``; no
    bound where None). ParameterError naming ``name`` and the range for anything else: a bool, a string
    (even ``"0.5"``) or None is not a number, NaN and ±inf are not finite."""
    lo = "" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = "" if high is None else f"{high:g}" + (")" if high_open else "]")
    if low is not None and high is not None:
        allowed = f"in {lo}, {hi}"
    elif low is not None:
        allowed = f"{'>' if low_open else '>='} {low:g}"
    elif high is not None:
        allowed = f"{'<' if high_open else '<='} {high:g}"
    else:
        allowed = ""
    return check_number(name, value, low, low_open, high, allowed, high_open)


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a bool (Python's or NumPy's); ParameterError naming ``name`` for anything else:
    a flag is True or False, never a string such as ``'no'`` (which Python would take as true) or a number."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ParameterError(f"{name} must be True or False, got {_shown(value)}")


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of the strings ``choices``; ParameterError naming ``name`` and the choices."""
    if isinstance(value, str) and value in choices:
        return value
    raise ParameterError(f"{name} must be one of {', '.join(map(str, choices))}, got {_shown(value)}")


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as an integer in [``low``, ``high``] (no upper bound if None; ParameterError naming ``name``)."""
    allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    try:
        ok = is_real(value) and float(value).is_integer()
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ParameterError(f"{name} must be {allowed}, got {value!r}")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ParameterError(f"{name} must be {allowed}, got {v}")
    return v


def check_alpha(value: Any, name: str = "alpha") -> float:
    """``value`` as a sample complexity in (0, :data:`ALPHA_MAX`] (ParameterError naming ``name``)."""
    return check_number(name, value, 0.0, True, ALPHA_MAX, f"in (0, {ALPHA_MAX:g}]")


def check_instance(name: str, value: Any, kind: type | tuple[type, ...], what: str | None = None) -> Any:
    """``value`` if it is an instance of ``kind``, else ParameterError naming ``name`` and the type wanted
    (``what``: how to call it, default the class names); for API arguments such as ``options=``."""
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = what or " or ".join(k.__name__ for k in kinds)
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ParameterError(f"{name} must be a {wanted}, got {type(value).__name__} {shown}")
    return value


DASK_SCHEMES: tuple[str, ...] = ("tcp", "ws")
"""Dask comm schemes a ``--dask`` address may use, each tested against a local cluster (tcp also
when no scheme is written). ``tls``/``wss`` need certificates (a ``distributed.Security``) and
``ucx`` needs UCX-Py and its configuration, neither of which dotattn takes: refused, not crashed."""
_DASK_REFUSED = {
    "tls": "TLS certificates (a distributed.Security configuration)",
    "wss": "TLS certificates (a distributed.Security configuration)",
    "ucx": "UCX-Py and a UCX configuration",
}


def check_dask_scheme(address: Any, inproc: bool = True) -> str:
    """``address`` if its scheme (before ``://``; none means tcp) is one of :data:`DASK_SCHEMES` or,
    if ``inproc``, ``inproc`` (a scheduler in this very process: the Python API only, never a
    command line); ParameterError in one line otherwise, naming what the scheme would need."""
    text = str(address).strip()
    scheme = text.split("://", 1)[0].lower() if "://" in text else "tcp"
    if scheme in DASK_SCHEMES or (scheme == "inproc" and inproc):
        return text
    if scheme == "inproc":
        raise ParameterError(
            "dask: an inproc:// scheduler lives inside one Python process and cannot be reached "
            "from a command; give a tcp:// or ws:// scheduler address (or, in Python, "
            "dask_address=<distributed.Client>)"
        )
    if scheme in _DASK_REFUSED:
        raise ParameterError(
            f"dask: {scheme}:// addresses need {_DASK_REFUSED[scheme]}, which dotattn does not "
            f"take; give a {' or '.join(s + '://' for s in DASK_SCHEMES)} scheduler address"
        )
    raise ParameterError(
        f"dask: unknown scheme {scheme!r} in {text!r}; give a "
        f"{' or '.join(s + '://' for s in DASK_SCHEMES)} scheduler address"
    )


NAME_MAX, PATH_MAX = 255, 3800
"""Longest file name (bytes, one path component) and path an output folder may have: the limits of
Linux file systems (255, 4096), less room for the files written inside it."""


def check_out_dir(value: Any, name: str = "out") -> str:
    """An output folder name: a non-empty path (ParameterError for '' or blanks, which would mean the
    working directory, or another command's folder, without saying so), not the file-system root, with
    no name longer than :data:`NAME_MAX` bytes (refused here, in one line, before anything is computed,
    rather than by the operating system after)."""
    if value is None or not isinstance(value, (str, bytes)) and not hasattr(value, "__fspath__"):
        raise ParameterError(f"{name} must be a folder path, got {value!r}")
    text = str(value.__fspath__() if hasattr(value, "__fspath__") else value)
    if not text.strip():
        raise ParameterError(
            f"{name} must be a non-empty folder path (use '.' for the working directory), got {text!r}"
        )
    if "\0" in text:
        raise ParameterError(f"{name} must be a folder path without NUL characters")
    import os
    from pathlib import Path

    if Path(text).absolute() == Path(Path(text).absolute().anchor):
        raise ParameterError(
            f"{name} must be a folder below the file-system root, got {text!r} (its files would be "
            f"written into the root)"
        )
    long = next((part for part in Path(text).parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise ParameterError(
            f"{name}: the folder name {long[:20]}... has {len(os.fsencode(long))} bytes, at most "
            f"{NAME_MAX} are allowed in one name"
        )
    if len(os.fsencode(str(Path(text).absolute()))) > PATH_MAX:
        raise ParameterError(f"{name} must be a path of at most {PATH_MAX} bytes")
    return text
