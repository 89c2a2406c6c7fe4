"""Integrity of output folders read back: a registry of folder kinds, the manifest check
(:mod:`dotattn.core.io`) and the rows' own consistency. Every failure is an
:class:`~dotattn.core.io.IntegrityError` whose one line names the file and the mismatch.

This module knows no theory. Each package registers its folder kinds next to its writer
(:func:`register_kind` in ``<package>/integrity.py``): the data files a kind must hold, how to tell
it from another kind with the same marker file, and the check of its rows against the settings the
folder records. :func:`verify_folder` dispatches through the registry; :mod:`dotattn.core.integrity` imports
every package's kinds, so ``dotattn verify`` knows them all.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.io import (
    MANIFEST_NAME,
    IntegrityError,
    csv_comment,
    read_csv,
    read_json_if_valid,
    to_jsonable,
    verify_manifest,
    write_manifest,
)
from dotattn.core.validation import ParameterError

__all__ = [
    "FolderKind",
    "register_kind",
    "registered_kinds",
    "folder_kind",
    "folders_with_manifest",
    "verify_folder",
    "seal_folder",
    "read_verified_csv",
    "read_verified_json",
    "read_record",
    "read_records",
    "check_matrix",
    "check_finite",
    "on_grid",
    "check_provenance_line",
    "first_difference",
    "MATRIX_BOUND",
    "GRID_TOL",
    "check_output_folder",
    "SETTING_FREE_KEYS",
    "NOTE_PATTERNS",
    "meta_parameters",
    "unknown_files",
    "same_number",
    "STRICT_RTOL",
]

MATRIX_BOUND = 1e12
"""Largest matrix entry a row may hold (overlaps, order parameters): every theory's matrices are O(1)
up to ridge-inverse factors ≤ 1e8; 1e12 leaves room and still refuses an overflowed or edited value."""

GRID_TOL = 1e-9
"""Grid points are compared to 1e-9 (relative): they are written with repr() and read back exactly."""


@dataclass(frozen=True)
class FolderKind:
    """One kind of output folder.

    ``files``: the data files it must hold (``files[0]``, the marker, names the kind); every other file
    its manifest lists is checked too. ``check(folder, manifest)``: the row checks (``manifest`` is the
    verified manifest dict, or None when the rows are checked before sealing), including the checks of
    its files against each other. ``recognise(folder)``: an extra test where two kinds share a marker
    file. ``meta_file``: the JSON file holding the provenance (read when a folder is sealed).
    ``optional``: the other files the kind may hold (names or ``fnmatch`` patterns; figures ``*.png``
    always); a file that is neither required nor optional is refused by ``verify`` and ``--seal``.
    ``companions``: files other tools add to a folder of this kind afterwards, which may stay out of the
    manifest (no reader takes them from here). ``parameters(folder)``: how the parameters the folder was
    made for are read back from its own files (default :func:`meta_parameters` of ``meta_file``);
    ``verify`` compares them with the manifest's ``made_for``. ``strict(folder)``: what ``verify --strict``
    re-derives beyond ``check`` (summary statistics recomputed from the rows, a selection rule applied
    again): cheap (seconds, no solver run), run after every default check passed.
    """

    name: str
    files: tuple[str, ...]
    check: Callable[[Path, Mapping[str, Any] | None], None]
    recognise: Callable[[Path], bool] | None = None
    meta_file: str = "summary.json"
    optional: tuple[str, ...] = ()
    companions: tuple[str, ...] = ()
    parameters: Callable[[Path], dict[str, Any]] | None = None
    strict: Callable[[Path], None] | None = None

    def knows(self, name: str) -> bool:
        """Whether ``name`` is a file this kind writes (required, optional or a figure)."""
        return name in self.files or any(fnmatch.fnmatchcase(name, pat) for pat in (*self.optional, "*.png"))

    def read_parameters(self, folder: Path) -> dict[str, Any]:
        """The parameters the folder was made for, read back from its own files."""
        return (self.parameters or (lambda f: meta_parameters(f / self.meta_file)))(folder)


NOTE_PATTERNS: tuple[str, ...] = ("*.md", "*.txt", "*.py")
"""Files a person adds beside a run (a README, a wall-clock note, the script that made a table): never
read by dotattn, so they may stay out of a manifest; every other unlisted file is refused."""


def meta_parameters(path: Path) -> dict[str, Any]:
    """The parameters a JSON file of a folder records: ``provenance.parameters``, or ``parameters`` at
    the top (IntegrityError, one line, when it has neither)."""
    meta = read_verified_json(path)
    stored = meta.get("provenance")
    prov: dict[str, Any] = stored if isinstance(stored, dict) else meta
    params = prov.get("parameters")
    if not isinstance(params, dict):
        raise IntegrityError(f"{path}: no parameters (neither 'provenance.parameters' nor 'parameters')")
    return params


_KINDS: dict[str, FolderKind] = {}


def register_kind(kind: FolderKind) -> FolderKind:
    """Add a folder kind to the registry (registering the same name again replaces it)."""
    _KINDS[kind.name] = kind
    return kind


def registered_kinds() -> dict[str, FolderKind]:
    """The registered kinds by name (a copy)."""
    return dict(_KINDS)


def folders_with_manifest(root: str | os.PathLike[str]) -> list[Path]:
    """Every folder at or below ``root`` that holds a ``manifest.json`` (sorted; hidden folders, whose
    names start with '.', are skipped). ParameterError if ``root`` is not a folder."""
    root = Path(root)
    if not root.is_dir():
        raise ParameterError(f"{root}: not a folder")
    found = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if MANIFEST_NAME in files:
            found.append(Path(here))
    return sorted(found)


def folder_kind(folder: str | os.PathLike[str]) -> str:
    """The kind of a dotattn output folder, from its files; IntegrityError when none fits.

    A kind fits when its marker file exists and its ``recognise`` (if any) accepts the folder; of
    several that fit, the one with the most of its data files present wins (a restarts folder also
    holds an ERM folder's runs.csv)."""
    folder = Path(folder)
    fits = [
        k for k in _KINDS.values() if (folder / k.files[0]).is_file() and (k.recognise is None or k.recognise(folder))
    ]
    if not fits:
        markers = ", ".join(sorted({k.files[0] for k in _KINDS.values()}))
        raise IntegrityError(f"{folder}: not a dotattn output folder (none of {markers})")
    score = {k.name: (sum((folder / f).is_file() for f in k.files), len(k.files)) for k in fits}
    best = max(score.values())
    winners = [k for k in fits if score[k.name] == best]
    if len(winners) > 1:
        raise IntegrityError(f"{folder}: its files fit several folder kinds ({', '.join(k.name for k in winners)})")
    return winners[0].name


def header_has(path: Path, column: str) -> bool:
    """Whether the first non-comment line of a CSV names ``column`` (tells apart two kinds that share a
    file name)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith("#"):
                    return column in line.strip().split(",")
    except (OSError, UnicodeDecodeError):
        return False
    return False


def read_verified_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV whose folder manifest was verified; IntegrityError if unreadable or empty."""
    try:
        rows = read_csv(path)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise IntegrityError(f"{path}: unreadable ({err})") from None
    return rows


def read_verified_json(path: Path) -> dict[str, Any]:
    obj = read_json_if_valid(path)
    if not isinstance(obj, dict):
        raise IntegrityError(f"{path}: unreadable or not a JSON object")
    return obj


def check_matrix(path: Path, row: int, name: str, value: Any, shape: tuple[int, int], finite: bool) -> None:
    """A matrix cell of data row ``row`` (1-based) must have ``shape`` and, if ``finite``, finite entries."""
    if value is None:
        if finite:
            raise IntegrityError(f"{path}: row {row}: {name} is missing")
        return
    a = np.asarray(value, dtype=float)
    if a.shape != shape:
        raise IntegrityError(f"{path}: row {row}: {name} has shape {a.shape}, the problem needs {shape}")
    if finite and not np.all(np.isfinite(a)):
        raise IntegrityError(f"{path}: row {row}: {name} has non-finite entries")
    if np.any(np.abs(a[np.isfinite(a)]) > MATRIX_BOUND):
        raise IntegrityError(f"{path}: row {row}: {name} has entries beyond {MATRIX_BOUND:g}")


def check_finite(path: Path, row: int, name: str, x: float, bound: float = 1e6) -> None:
    if not math.isfinite(x) or abs(x) > bound:
        raise IntegrityError(f"{path}: row {row}: {name} = {x!r} is not a finite number within ±{bound:g}")


def on_grid(x: float, grid: Sequence[float]) -> bool:
    return any(abs(x - g) <= GRID_TOL * max(1.0, abs(g)) for g in grid)


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        try:
            x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        except (TypeError, ValueError):
            return bool(a == b)
        return x.shape == y.shape and bool(np.allclose(x, y, rtol=1e-12, atol=1e-15))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    return bool(a == b)


def first_difference(asked: dict[str, Any], stored: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The first field (dotted name, in the order of ``asked``) where two nested parameter dicts differ,
    with (asked value, stored value; "missing" if absent), or None if every field of ``asked`` matches."""
    a, s = _flat(asked), _flat(stored)
    for k, v in a.items():
        if k not in s:
            return k, v, "missing"
        if not _equal(v, s[k]):
            return k, v, s[k]
    return None


STRICT_RTOL = 1e-9
"""``verify --strict``: a statistic recomputed from the rows against the stored one. Both come from the same
float64 values (written with repr(), read back exactly) through the same numpy reductions; 1e-9 (relative)
leaves room for a summation order and still refuses any edit a reader would see."""


def same_number(a: Any, b: Any, rtol: float = STRICT_RTOL) -> bool:
    """Two numbers, or two nested lists of numbers, equal to ``rtol`` (relative; NaN equals NaN, None and
    an empty cell are NaN)."""

    def scalar(x: Any) -> float | None:  # a plain number or number cell (the common case), without numpy
        if x is None or (isinstance(x, str) and (x == "" or not x.lstrip().startswith("["))):
            return math.nan if x is None or x == "" else float(x)
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return float(x)
        return None

    try:
        u, v = scalar(a), scalar(b)
    except ValueError:
        return False
    if u is not None and v is not None:
        return u == v or (math.isnan(u) and math.isnan(v)) or abs(u - v) <= rtol * abs(v)

    def arr(x: Any) -> np.ndarray:
        if x is None or (isinstance(x, str) and x == ""):
            return np.array(np.nan)
        if isinstance(x, str):
            x = json.loads(x) if x.lstrip().startswith("[") else float(x)
        return np.asarray(x, dtype=float)

    try:
        x, y = arr(a), arr(b)
    except (TypeError, ValueError):
        return False
    if x.shape != y.shape:
        return False
    return bool(np.all(np.isclose(x, y, rtol=rtol, atol=0.0, equal_nan=True) | (x == y)))


def check_provenance_line(path: Path, parameters: Mapping[str, Any]) -> None:
    """The provenance comment of a CSV, ``...; provenance: {JSON}``, must carry
    the same parameters as the folder's summary.json (sample.json)."""
    comment = csv_comment(path)
    start = comment.find("{")
    if start < 0:
        return
    try:
        prov = json.loads(comment[start:])
    except ValueError:
        raise IntegrityError(f"{path}: its provenance line is not valid JSON") from None
    theirs = prov.get("parameters") if isinstance(prov, dict) else None
    if not isinstance(theirs, dict):
        return
    diff = first_difference(dict(parameters), theirs)
    if diff is not None:
        raise IntegrityError(
            f"{path}: its provenance line was made for {diff[0]} = {diff[2]}, summary.json says "
            f"{diff[1]} (a file from another run)"
        )


def verify_folder(
    folder: str | os.PathLike[str], *, manifest: bool = True, kind: str | None = None, strict: bool = False
) -> str:
    """Every check a reader makes, for a whole folder (manifest of every listed file, then the rows);
    returns the folder kind. ``manifest=False`` checks the rows only (used before sealing); ``kind``:
    the kind the caller needs (IntegrityError if the folder is another); ``strict``: then also re-derive
    what is cheap to recompute (the kind's :attr:`FolderKind.strict`; ``dotattn verify --strict``)."""
    if not isinstance(strict, bool):
        raise ParameterError(f"strict must be a bool, got {type(strict).__name__}")
    if folder is None or not isinstance(folder, (str, os.PathLike)):
        raise ParameterError(f"folder must be a folder path, got {type(folder).__name__}")
    folder = Path(folder)
    if kind is None:
        found = folder_kind(folder)
    else:
        if kind not in _KINDS:
            raise ParameterError(f"folder kind {kind!r} is not registered (known: {', '.join(sorted(_KINDS))})")
        want = _KINDS[kind]
        if not ((folder / want.files[0]).is_file() and (want.recognise is None or want.recognise(folder))):
            try:
                other = folder_kind(folder)
            except IntegrityError:
                raise IntegrityError(f"{folder}: not a {kind} folder (no {want.files[0]} of that kind)") from None
            raise IntegrityError(f"{folder}: a {other} folder, not a {kind} folder")
        found = kind
    spec = _KINDS[found]
    man = None
    if manifest:
        man = verify_manifest(folder, spec.files)
        verify_manifest(folder, tuple(man["files"]))
        _check_listed_files(folder, spec, man)
    else:
        _check_files_known(folder, spec)
    try:
        spec.check(folder, man)
    except ParameterError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:  # a field missing or of a wrong type
        raise IntegrityError(f"{folder}: its files cannot be read ({type(err).__name__}: {err})") from None
    if man is not None:
        _check_made_for(folder, spec, man)
    if strict and spec.strict is not None:
        try:
            with np.errstate(all="ignore"):  # a zero spread or a null ESS gives inf/NaN, compared as such
                spec.strict(folder)
        except ParameterError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
            raise IntegrityError(
                f"{folder}: a quantity verify --strict recomputes cannot be read ({type(err).__name__}: {err})"
            ) from None
    return found


def unknown_files(folder: Path, spec: FolderKind, listed: Sequence[str] = ()) -> list[str]:
    """The plain files of ``folder`` that are neither in ``listed`` nor notes (:data:`NOTE_PATTERNS`) nor
    the kind's companions, and are not hidden (a lock or a temporary file of a run) or the manifest;
    folders below (a cache, a run of its own) are not looked into."""
    out = []
    for p in sorted(folder.iterdir()):
        name = p.name
        if not p.is_file() or name == MANIFEST_NAME or name.startswith(".") or name in listed:
            continue
        if any(fnmatch.fnmatchcase(name, pat) for pat in (*NOTE_PATTERNS, *spec.companions)):
            continue
        out.append(name)
    return out


def _check_listed_files(folder: Path, spec: FolderKind, man: Mapping[str, Any]) -> None:
    """Every file the manifest lists is one of the kind's, and every data file of the folder is listed."""
    for name in man["files"]:
        if not spec.knows(name):
            raise IntegrityError(f"{folder / MANIFEST_NAME}: lists {name}, which is not a file of a {spec.name} folder")
    extra = unknown_files(folder, spec, tuple(man["files"]))
    if extra:
        raise IntegrityError(
            f"{folder / extra[0]}: not listed in {MANIFEST_NAME} (a file added after the run, or dropped "
            f"from the manifest's list)"
        )


def _check_files_known(folder: Path, spec: FolderKind) -> None:
    """Before sealing: every data file of the folder is one of the kind's."""
    for name in unknown_files(folder, spec):
        if not spec.knows(name):
            raise IntegrityError(f"{folder / name}: not a file of a {spec.name} folder (remove it before sealing)")


def _check_made_for(folder: Path, spec: FolderKind, man: Mapping[str, Any]) -> None:
    """The manifest's ``made_for`` is what the folder's own files say it was made for (keys of
    :data:`SETTING_FREE_KEYS` aside), both ways: a field edited, added or deleted on either side fails."""
    made_for = man["made_for"]
    try:
        params = spec.read_parameters(folder)
    except IntegrityError:
        raise
    except (KeyError, TypeError, ValueError, ParameterError) as err:
        raise IntegrityError(f"{folder}: its parameters cannot be read back from its files ({err})") from None
    mine = {k: v for k, v in params.items() if k not in SETTING_FREE_KEYS}
    theirs = {k: v for k, v in made_for.items() if k not in SETTING_FREE_KEYS}
    diff = first_difference(theirs, mine)
    if diff is not None:
        raise IntegrityError(
            f"{folder / MANIFEST_NAME}: made_for says {diff[0]} = {_short(diff[1])}, the folder's files "
            f"{_short(diff[2])} (edited, or a manifest from another run)"
        )
    diff = first_difference(mine, theirs)
    if diff is not None:
        raise IntegrityError(
            f"{folder / MANIFEST_NAME}: made_for has {diff[0]} = {_short(diff[2])}, the folder's files "
            f"{_short(diff[1])} (edited, or a manifest from another run)"
        )


SETTING_FREE_KEYS: frozenset[str] = frozenset(
    {
        "command",
        "cli",
        "device",
        "resolved_device",
        "quiet",
        "workers",
        "threads",
        "torch_threads",
        "torch_version",
        "dask",
        "sampler_library",
    }
)
"""Keys of a manifest's ``made_for`` that say how or where a run was made (command line, device, worker
processes and threads, library versions), not what it computes: a folder made with other values of these
holds a run of the same settings."""


def check_output_folder(
    folder: str | os.PathLike[str], kind: str, made_for: Mapping[str, Any] | None = None, what: str | None = None
) -> None:
    """Refuse (ParameterError, one line) to write a ``kind`` run made for ``made_for`` into ``folder``
    when the folder holds another command's files (another kind) or a finished run of this kind made
    for other settings (its manifest's ``made_for`` differs from ``made_for``, if given, in a key other
    than :data:`SETTING_FREE_KEYS`).

    A folder with no dotattn files, or with an unfinished run of this kind (no manifest: interrupted
    before its end), may be written; a finished run of the same settings is rewritten (resumed)."""
    folder = Path(folder)
    what = what or kind
    if kind not in _KINDS:
        raise ParameterError(f"folder kind {kind!r} is not registered (known: {', '.join(sorted(_KINDS))})")
    if not folder.is_dir():
        return
    fits = [
        k.name
        for k in _KINDS.values()
        if (folder / k.files[0]).is_file() and (k.recognise is None or k.recognise(folder))
    ]
    if not fits:
        return
    try:
        found = folder_kind(folder)
    except IntegrityError:  # the files of several kinds (e.g. a comparison written into an ERM folder)
        found = kind if kind in fits else fits[0]
    if found != kind:
        raise ParameterError(
            f"{what}: --out {str(folder)!r} holds another command's output (a folder of kind {found}); "
            f"choose another --out"
        )
    man = read_json_if_valid(folder / MANIFEST_NAME)
    if man is None or made_for is None:
        return
    stored = man.get("made_for") if isinstance(man, dict) else None
    if not isinstance(stored, dict):
        raise ParameterError(
            f"{what}: --out {str(folder)!r} holds a {kind} run whose manifest is unreadable; "
            f"choose another --out or remove that folder"
        )
    asked = {k: v for k, v in to_jsonable(dict(made_for)).items() if k not in SETTING_FREE_KEYS}
    diff = first_difference(asked, {k: v for k, v in stored.items() if k not in SETTING_FREE_KEYS})
    if diff is None:
        diff = first_difference({k: v for k, v in stored.items() if k not in SETTING_FREE_KEYS}, asked)
        diff = None if diff is None else (diff[0], diff[2], diff[1])
    if diff is not None:
        raise ParameterError(
            f"{what}: --out {str(folder)!r} holds a finished run made for other settings "
            f"({diff[0]} = {_short(diff[2])} there, {_short(diff[1])} now); choose another --out "
            f"or remove that folder"
        )


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def read_record(path: Path, i: int, cls: Any, row: Mapping[str, Any]) -> Any:
    try:
        return cls.from_row(row)
    except (KeyError, TypeError, ValueError) as err:
        raise IntegrityError(f"{path}: row {i} cannot be read ({type(err).__name__}: {err})") from None


def read_records(path: Path, cls: Any) -> list[Any]:
    """Every row of a CSV as a record of ``cls`` (its ``from_row``), IntegrityError naming the first bad row."""
    return [read_record(path, i, cls, r) for i, r in enumerate(read_verified_csv(path), start=1)]


def seal_folder(folder: str | os.PathLike[str], command: str | None = None) -> Path:
    """Write the manifest of a folder made before manifests existed, after its rows pass every
    consistency check; the manifest says it was sealed after the fact, by which commit."""
    folder = Path(folder)
    if (folder / MANIFEST_NAME).exists():
        raise ParameterError(f"{folder / MANIFEST_NAME} exists already; verify the folder instead")
    kind = verify_folder(folder, manifest=False)
    spec = _KINDS[kind]
    made_for = spec.read_parameters(folder)
    meta = read_verified_json(folder / spec.meta_file)
    stored_prov = meta.get("provenance")
    prov: dict[str, Any] = stored_prov if isinstance(stored_prov, dict) else meta
    files = [folder / name for name in unknown_files(folder, spec) if spec.knows(name)]
    from dotattn.core.io import provenance

    sealer = provenance({})
    return write_manifest(
        folder,
        files,
        made_for,
        command=command,
        provenance_record={
            "git_commit": prov.get("git_commit"),
            "dotattn_version": prov.get("dotattn_version"),
            "created_utc": prov.get("created_utc"),
        },
        note=f"sealed after the fact by dotattn verify --seal at commit {sealer['git_commit']} "
        f"({sealer['created_utc']}); the rows passed every consistency check then",
    )
