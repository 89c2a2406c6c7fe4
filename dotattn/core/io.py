"""Provenance and atomic output: every committed result carries who/what/when produced it."""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.validation import ParameterError

__all__ = [
    "signals_deferred",
    "defer_stop",
    "provenance",
    "git_commit",
    "atomic_write_text",
    "atomic_write_bytes",
    "write_json",
    "write_csv",
    "read_csv",
    "read_json_if_valid",
    "remove_stale_tmp",
    "save_figure",
    "ensure_writable_dir",
    "to_jsonable",
    "IntegrityError",
    "MANIFEST_NAME",
    "sha256_file",
    "csv_data_rows",
    "csv_comment",
    "write_manifest",
    "verify_manifest",
    "invocation",
    "write_checked_json",
    "read_checked_json",
    "cache_notice",
    "read_cache_unit",
    "write_cache_unit",
    "MANIFEST_VERSIONS",
    "check_plain_name",
]

MANIFEST_NAME = "manifest.json"
"""The manifest of an output folder: every file's SHA-256, size and data-row count, the parameters
(problem and settings) the folder was made for, and the provenance of the run that wrote it."""


MANIFEST_VERSIONS: tuple[int, ...] = (1,)
"""The manifest layouts this dotattn reads (``manifest_version``); a manifest of another version was
written by another program or edited, and is refused."""


class IntegrityError(ParameterError):
    """A file read back fails verification (manifest, checksum, row count or row consistency); the
    message is one line naming the file and the mismatch."""


def git_commit() -> str | None:
    """Commit of the dotattn source tree ('-dirty' if modified), or None if unknown.

    Looks at the tree the package was imported from, then (for a non-editable install run
    from a clone) at the current directory's repository if it holds the dotattn sources.
    """
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        try:
            top = subprocess.run(
                ["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True, timeout=5
            ).stdout.strip()
            if not top or not (Path(top) / "dotattn" / "__init__.py").exists():
                continue
            sha = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=top, capture_output=True, text=True, timeout=5
            ).stdout.strip()
            if not sha:
                continue
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=top,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return sha + ("-dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def provenance(parameters: Mapping[str, Any], seconds: float | None = None) -> dict[str, Any]:
    """Parameters plus package version, git commit, host and UTC time."""
    from dotattn.core.version import __version__

    out = {
        "parameters": to_jsonable(dict(parameters)),
        "dotattn_version": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu",
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
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


class _Deferral:
    """State of :func:`signals_deferred` (signal handlers run in the main thread only)."""

    depth = 0
    pending: list[Callable[[], None]] = []


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Within the block, a stop requested by a signal (a handler that calls :func:`defer_stop`, as
    :func:`dotattn.core.runner.stop_on_signals` does) is held back and raised when the outermost block
    ends. For short steps that create a file and must not be cut in the middle (a write test, a lock
    file), so that a stop never leaves one behind."""
    _Deferral.depth += 1
    try:
        yield
    finally:
        _Deferral.depth -= 1
        if _Deferral.depth == 0 and _Deferral.pending:
            stop = _Deferral.pending[0]
            _Deferral.pending.clear()
            stop()


def defer_stop(stop: Callable[[], None]) -> bool:
    """For a signal handler: inside :func:`signals_deferred`, keep ``stop`` (it raises) for the end of the
    block and return True; outside, return False (the handler stops at once)."""
    if _Deferral.depth > 0:
        _Deferral.pending.append(stop)
        return True
    return False


def ensure_writable_dir(path: str | os.PathLike[str]) -> Path:
    """Create the folder if needed and check that files can be written there (ParameterError if not)."""
    p = Path(path)
    try:
        with signals_deferred():  # a stop between creating and removing the test file would leave it behind
            p.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=p, prefix=".write-test-"):
                pass
    except OSError as err:
        raise ParameterError(f"output folder {str(p)!r} cannot be written: {err.strerror or err}") from None
    return p


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
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


def remove_stale_tmp(folder: str | os.PathLike[str]) -> list[Path]:
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


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n")


def write_csv(
    path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]], columns: Sequence[str], comment: str | None = None
) -> None:
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


def read_json_if_valid(path: str | os.PathLike[str]) -> Any | None:
    """The parsed JSON file, or None if it is missing or unreadable (e.g. cut short, not UTF-8, or nested
    too deeply for the parser)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None


CSV_FIELD_LIMIT = 2**26
"""Longest CSV cell read (characters): the csv module's default, 131 072, is less than one matrix cell of an
order parameter over 80 extended paths (16 paths x 5 outputs: 6400 numbers, ~150 000 characters); the largest,
320 x 320, takes ~2.5 MB."""


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Read a CSV written by :func:`write_csv` (skipping '#' comment lines)."""
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
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


def save_figure(fig: Any, path: str | os.PathLike[str], metadata: Mapping[str, Any] | None = None) -> None:
    """Save a matplotlib figure as PNG atomically, with provenance in the PNG text chunks."""
    buf = io.BytesIO()
    meta = {"Software": "dotattn"}
    if metadata:
        meta["Description"] = json.dumps(to_jsonable(dict(metadata)))
    fig.savefig(buf, format="png", dpi=130, bbox_inches="tight", metadata=meta)
    atomic_write_bytes(path, buf.getvalue())


# ----------------------------------------------------------------------------------------------
# integrity: manifests of output folders, checksummed cache units
# ----------------------------------------------------------------------------------------------
def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def csv_data_rows(path: str | os.PathLike[str]) -> int:
    """Number of data rows of a CSV written by :func:`write_csv` (comment lines and header excluded)."""
    return len(read_csv(path))


def csv_comment(path: str | os.PathLike[str]) -> str:
    """The '#' comment lines at the top of a CSV (provenance), joined, without the '# ' prefix."""
    out = []
    with open(path, newline="") as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            out.append(line[1:].strip())
    return "\n".join(out)


def write_manifest(
    folder: str | os.PathLike[str],
    files: Iterable[str | os.PathLike[str]],
    made_for: Mapping[str, Any],
    *,
    command: str | None = None,
    provenance_record: Mapping[str, Any] | None = None,
    note: str | None = None,
) -> Path:
    """Write ``folder/manifest.json`` last, atomically: for every file its SHA-256, size and (CSV)
    data-row count, plus ``made_for`` (the problem and settings it was made for) and provenance.

    ``files`` are paths inside ``folder``: absolute, relative to it (``"runs.csv"``) or, like a
    relative ``folder`` itself, relative to the working directory (``folder / "runs.csv"``).
    ``provenance_record``: the provenance the run wrote into its files (default: a fresh one);
    ``note`` says e.g. that the manifest was written after the fact by ``dotattn verify --seal``.
    """
    folder = Path(folder)
    root = folder.resolve()
    entries: dict[str, Any] = {}
    for f in files:
        p = Path(f)
        if not p.is_absolute() and not _under(p, folder):
            p = folder / p
        p = p.resolve()
        try:
            name = p.relative_to(root).as_posix()
        except ValueError:
            raise ParameterError(
                f"{p}: not inside the folder {str(folder)!r}, so it cannot be in its manifest"
            ) from None
        check_plain_name(name, ParameterError, folder / MANIFEST_NAME)
        entries[name] = {
            "sha256": sha256_file(p),
            "bytes": p.stat().st_size,
            "rows": csv_data_rows(p) if p.suffix == ".csv" else None,
        }
    prov = dict(provenance_record) if provenance_record is not None else provenance(made_for)
    if command is None:
        command = invocation()
    body = {
        "manifest_version": 1,
        "files": dict(sorted(entries.items())),
        "made_for": to_jsonable(dict(made_for)),
        "git_commit": prov.get("git_commit"),
        "dotattn_version": prov.get("dotattn_version"),
        "created_utc": prov.get("created_utc"),
        "command": command,
    }
    if note:
        body["note"] = note
    path = folder / MANIFEST_NAME
    write_json(path, body)
    return path


def check_plain_name(name: Any, error: type[Exception], where: Path) -> str:
    """``name`` if it is a plain file name inside the folder (not empty, no folder part, no '..', not
    hidden, not the manifest itself); else ``error`` (one line naming ``where``)."""
    ok = (
        isinstance(name, str)
        and name not in ("", ".", "..", MANIFEST_NAME)
        and not name.startswith(".")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
    )
    if not ok:
        raise error(f"{where}: lists {name!r}, not a plain file name inside the folder")
    return str(name)


def _under(path: Path, folder: Path) -> bool:
    """Whether the relative ``path`` already starts with the relative ``folder`` (both from the working
    directory; a folder "." holds every relative path)."""
    if folder.is_absolute():
        return False
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def invocation() -> str | None:
    """The command line of this process when it is the ``dotattn`` console script, else None."""
    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if prog != "dotattn":
        return None
    import shlex

    return " ".join(["dotattn", *(shlex.quote(a) for a in sys.argv[1:])])


def _commit_in_comment(comment: str) -> str | None:
    """The commit named in a CSV's provenance comment (``commit X`` or a JSON ``"git_commit": X``)."""
    import re

    m = re.search(r'"git_commit":\s*"?([0-9a-f]{7,40}(?:-dirty)?|null)', comment) or re.search(
        r"\bcommit ([0-9a-f]{7,40}(?:-dirty)?|None)\b", comment
    )
    if not m:
        return None
    return None if m.group(1) in ("None", "null") else m.group(1)


def verify_manifest(folder: str | os.PathLike[str], required: Sequence[str]) -> dict[str, Any]:
    """Check ``folder/manifest.json`` against the files: each ``required`` file is listed and
    present, has the listed data-row count (CSV) and SHA-256, and a CSV's provenance comment names
    the manifest's commit. Returns the manifest; :class:`IntegrityError` (one line) otherwise."""
    folder = Path(folder)
    mpath = folder / MANIFEST_NAME
    if not mpath.is_file():
        raise IntegrityError(
            f"{mpath}: missing, so the folder's files cannot be verified (written by an older "
            f"dotattn or by hand): rerun the command that made it, or check it and seal it with "
            f"'dotattn verify --seal {folder}'"
        )
    man = read_json_if_valid(mpath)
    if not isinstance(man, dict) or not isinstance(man.get("files"), dict) or not isinstance(man.get("made_for"), dict):
        raise IntegrityError(f"{mpath}: not a dotattn manifest (unreadable, or no 'files' and 'made_for')")
    version = man.get("manifest_version")
    if isinstance(version, bool) or version not in MANIFEST_VERSIONS:
        raise IntegrityError(
            f"{mpath}: manifest_version {version!r} is not one this dotattn reads "
            f"({', '.join(map(str, MANIFEST_VERSIONS))})"
        )
    for name in man["files"]:
        check_plain_name(name, IntegrityError, mpath)
    for name in required:
        p = folder / name
        entry = man["files"].get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise IntegrityError(f"{p}: not listed in {MANIFEST_NAME}")
        if not p.is_file():
            raise IntegrityError(f"{p}: missing (listed in {MANIFEST_NAME})")
        if p.suffix == ".csv":
            try:
                rows = csv_data_rows(p)
            except (OSError, UnicodeDecodeError, csv.Error) as err:
                raise IntegrityError(f"{p}: unreadable ({err})") from None
            if entry.get("rows") is not None and rows != entry["rows"]:
                raise IntegrityError(
                    f"{p}: {rows} data rows, the manifest lists {entry['rows']} (cut short or "
                    f"extended after it was written)"
                )
            commit = _commit_in_comment(csv_comment(p))
            if commit is not None and man.get("git_commit") is not None and commit != man["git_commit"]:
                raise IntegrityError(
                    f"{p}: its provenance line names commit {commit}, the manifest "
                    f"{man['git_commit']} (a file from another run)"
                )
        if sha256_file(p) != entry["sha256"]:
            raise IntegrityError(f"{p}: SHA-256 differs from {MANIFEST_NAME} (edited or replaced after it was written)")
    return man


def _digest(payload: Any) -> str:
    text = json.dumps(to_jsonable(payload), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_checked_json(path: str | os.PathLike[str], payload: Any) -> None:
    """Write a cache unit atomically with the SHA-256 of its canonical JSON, so that
    :func:`read_checked_json` detects any later edit."""
    payload = to_jsonable(payload)
    write_json(path, {"sha256": _digest(payload), "payload": payload})


def read_checked_json(path: str | os.PathLike[str]) -> tuple[Any | None, str | None]:
    """(payload, None) for a verified cache unit; (None, None) when there is none; (None, reason)
    when the file exists but fails verification (unreadable, cut short, edited, older format)."""
    p = Path(path)
    if not p.exists():
        return None, None
    obj = read_json_if_valid(p)
    if obj is None:
        return None, "unreadable or cut short"
    if not isinstance(obj, dict) or "sha256" not in obj or "payload" not in obj:
        return None, "not a checksummed cache unit (older format or edited)"
    try:
        ok = _digest(obj["payload"]) == obj["sha256"]
    except (TypeError, ValueError):
        ok = False
    if not ok:
        return None, "SHA-256 mismatch (edited after it was written)"
    return obj["payload"], None


def read_cache_unit(path: str | os.PathLike[str] | None, key: Any) -> dict[str, Any] | None:
    """The verified cache unit at ``path`` whose ``key`` matches (a dict written by
    :func:`write_cache_unit`), or None: none there, made for other settings (key differs), or failing
    verification — then one line on stderr says so (:func:`cache_notice`) and the caller recomputes it."""
    if path is None:
        return None
    payload, reason = read_checked_json(path)
    if reason is None and payload is not None and not isinstance(payload, dict):
        reason = "not a cache unit (no key)"
    if reason is not None:
        cache_notice(path, reason)
        return None
    if not isinstance(payload, dict) or payload.get("key") != to_jsonable(key):
        return None  # nothing there (None), or made for other settings
    return payload


def write_cache_unit(path: str | os.PathLike[str], key: Any, **content: Any) -> None:
    """Write one cache unit ``{"key": key, **content}`` atomically with its checksum."""
    write_checked_json(path, {"key": key, **content})


def cache_notice(path: str | os.PathLike[str], reason: str) -> None:
    """Say on stderr, in one line, that a cache unit failed verification and will be recomputed."""
    sys.stderr.write(f"dotattn: cache {Path(path).name}: {reason}; recomputing it\n")
    sys.stderr.flush()
