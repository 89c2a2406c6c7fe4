"""Provenance and atomic output: every committed result carries who/what/when produced it."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from dotattn.problem import ParameterError

__all__ = ["provenance", "git_commit", "atomic_write_text", "atomic_write_bytes", "write_json",
           "write_csv", "read_csv", "read_json_if_valid", "remove_stale_tmp", "save_figure", "ensure_writable_dir", "to_jsonable"]


def git_commit() -> str | None:
    """Commit of the dotattn source tree ('-dirty' if modified), or None if unknown.

    Looks at the tree the package was imported from, then (for a non-editable install run
    from a clone) at the current directory's repository if it holds the dotattn sources.
    """
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        try:
            top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True,
                                 text=True, timeout=5).stdout.strip()
            if not top or not (Path(top) / "dotattn" / "__init__.py").exists():
                continue
            sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=top, capture_output=True, text=True,
                                 timeout=5).stdout.strip()
            if not sha:
                continue
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=top,
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return sha + ("-dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def provenance(parameters: Mapping[str, Any], seconds: float | None = None) -> dict[str, Any]:
    """Parameters plus package version, git commit, host and UTC time."""
    from dotattn import __version__
    out = {"parameters": to_jsonable(dict(parameters)), "dotattn_version": __version__,
           "git_commit": git_commit(), "python": platform.python_version(),
           "machine": f"{platform.machine()} {os.cpu_count()} cpu",
           "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if seconds is not None:
        out["seconds"] = round(float(seconds), 3)
    return out


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and NaN (-> None) to plain JSON values."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return x if np.isfinite(x) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def ensure_writable_dir(path: str | os.PathLike) -> Path:
    """Create the folder if needed and check that files can be written there (ParameterError if not)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".write-test-"):
            pass
    except OSError as err:
        raise ParameterError(f"output folder {str(p)!r} cannot be written: {err.strerror or err}") from None
    return p


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def remove_stale_tmp(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that :func:`atomic_write_bytes` leaves only when its process is
    killed mid-write (``.NAME.XXXX.tmp``); call it only while holding the folder (a run lock)."""
    removed = []
    for p in Path(folder).glob(".*.tmp"):
        try:
            p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n")


def write_csv(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]], columns: Sequence[str],
              comment: str | None = None) -> None:
    """Atomically write rows as CSV; ``comment`` lines (e.g. provenance) are prefixed with '#'."""
    buf = io.StringIO()
    if comment:
        for line in comment.splitlines():
            buf.write(f"# {line}\n")
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    atomic_write_text(path, buf.getvalue())


def read_json_if_valid(path: str | os.PathLike) -> Any | None:
    """The parsed JSON file, or None if it is missing or unreadable (e.g. cut short)."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    """Read a CSV written by :func:`write_csv` (skipping '#' comment lines)."""
    with open(path, newline="") as fh:
        lines = [ln for ln in fh if not ln.startswith("#")]
    return list(csv.DictReader(lines))


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (float, np.floating)):
        return "" if not np.isfinite(v) else repr(float(v))
    if isinstance(v, (list, tuple, np.ndarray)):
        return json.dumps(to_jsonable(v))
    return v


def save_figure(fig: Any, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> None:
    """Save a matplotlib figure as PNG atomically, with provenance in the PNG text chunks."""
    buf = io.BytesIO()
    meta = {"Software": "dotattn"}
    if metadata:
        meta["Description"] = json.dumps(to_jsonable(dict(metadata)))
    fig.savefig(buf, format="png", dpi=130, bbox_inches="tight", metadata=meta)
    atomic_write_bytes(path, buf.getvalue())
