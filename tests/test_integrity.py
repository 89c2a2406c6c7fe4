"""Files that prove their integrity (issue 18 item 2): every reader verifies the folder's manifest and
the rows' own consistency, and refuses a truncated, edited or mismatched file with one line naming
the file; cache units that fail verification are recomputed and said so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from clitools import run

from dotattn.core.io import (
    MANIFEST_NAME,
    IntegrityError,
    read_cache_unit,
    read_checked_json,
    sha256_file,
    verify_manifest,
    write_cache_unit,
    write_checked_json,
    write_manifest,
)

pytest.importorskip("torch")  # the ERM folders come from train-erm

QUAD = ("gauss-hermite", 4, None)


pytestmark = pytest.mark.xdist_group("test_integrity")
"""Every test here runs on one xdist worker (``--dist loadgroup``): most use the module-scoped ``folders``,
which is then computed once per run, not once per worker."""


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny phase diagram (2 ω × 2 α), two tiny train-erm folders (σ = 0.5 and 0.4) and one
    comparison, each written by the package itself."""
    from dotattn.positional_semantic.catalogue import QuadratureSpec
    from dotattn.positional_semantic.output import write_phase_diagram
    from dotattn.positional_semantic.phase_diagram import SweepSettings, run_phase_diagram
    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.output import compare_and_write

    root = tmp_path_factory.mktemp("integrity")
    settings = SweepSettings(QuadratureSpec(*QUAD))
    pd = run_phase_diagram(Problem(omega=0.3), [0.2, 0.3], [1.0, 1.5], settings=settings)
    write_phase_diagram(pd, root / "pd")
    for name, sigma in (("erm", "0.5"), ("erm_sigma04", "0.4")):
        r = run(
            "train-erm",
            "--d",
            "20",
            "--alpha",
            "1,1.5",
            "--omega",
            "0.3",
            "--sigma",
            sigma,
            "--seeds",
            "2",
            "--steps",
            "30",
            "--test-samples",
            "200",
            "--threads",
            "1",
            "--out",
            str(root / name),
            "--quiet",
        )
        assert r.returncode == 0, r.stderr
    compare_and_write(root / "erm", root / "cmp", str(root / "pd"), [], settings=settings)
    return root


@pytest.fixture
def copy(folders, tmp_path):
    """A fresh copy of one of the module's folders, to tamper with."""

    def make(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(folders / name, dst)
        return dst

    return make


def _settings():
    from dotattn.positional_semantic.catalogue import QuadratureSpec
    from dotattn.positional_semantic.phase_diagram import SweepSettings

    return SweepSettings(QuadratureSpec(*QUAD))


def _readers():
    from dotattn.positional_semantic.output import read_boundaries, read_phase_diagram
    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.output import load_erm, read_theory

    return {
        "read_phase_diagram": ("pd", "phase_diagram.csv", lambda f: read_phase_diagram(f)),
        "read_boundaries": ("pd", "boundaries.csv", lambda f: read_boundaries(f)),
        "read_theory(phase diagram)": (
            "pd",
            "phase_diagram.csv",
            lambda f: read_theory(f, Problem(omega=0.3), _settings()),
        ),
        "read_theory(comparison)": ("cmp", "comparison.csv", lambda f: read_theory(f, Problem(omega=0.3), _settings())),
        "load_erm(runs)": ("erm", "runs.csv", lambda f: load_erm(f)),
        "load_erm(summary)": ("erm", "summary.csv", lambda f: load_erm(f)),
    }


READERS = list(_readers())


def _data_lines(path: Path) -> tuple[list[str], list[str]]:
    lines = path.read_text().splitlines(keepends=True)
    head = [ln for ln in lines if ln.startswith("#")]
    return head, [ln for ln in lines if not ln.startswith("#")]


def _one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("reader", READERS)
def test_untouched_folder_reads(folders, copy, reader):
    kind, _, read = _readers()[reader]
    assert read(copy(kind))


@pytest.mark.parametrize("reader", READERS)
def test_truncated_csv_is_refused(copy, reader):
    kind, name, read = _readers()[reader]
    folder = copy(kind)
    head, body = _data_lines(folder / name)
    (folder / name).write_text("".join(head + body[:-1]))
    with pytest.raises(IntegrityError) as err:
        read(folder)
    assert name in _one_line(err) and "data rows" in str(err.value)


@pytest.mark.parametrize("reader", READERS)
def test_header_only_csv_is_refused(copy, reader):
    kind, name, read = _readers()[reader]
    folder = copy(kind)
    head, body = _data_lines(folder / name)
    (folder / name).write_text("".join(head + body[:1]))
    with pytest.raises(IntegrityError) as err:
        read(folder)
    assert name in _one_line(err)


@pytest.mark.parametrize("reader", READERS)
def test_edited_value_is_refused(copy, reader):
    """One number changed to 1e300 (same row count): the checksum catches it."""
    kind, name, read = _readers()[reader]
    folder = copy(kind)
    text = (folder / name).read_text()
    head, body = _data_lines(folder / name)
    row = body[1]
    cells = row.split(",")
    i = next(k for k, c in enumerate(cells) if c.replace(".", "", 1).replace("-", "", 1).isdigit() and k > 0)
    cells[i] = "1e300"
    (folder / name).write_text(text.replace(row, ",".join(cells), 1))
    with pytest.raises(IntegrityError) as err:
        read(folder)
    assert name in _one_line(err) and "SHA-256" in str(err.value)


@pytest.mark.parametrize("reader", READERS)
def test_missing_manifest_is_refused(copy, reader):
    kind, _, read = _readers()[reader]
    folder = copy(kind)
    (folder / MANIFEST_NAME).unlink()
    with pytest.raises(IntegrityError) as err:
        read(folder)
    assert MANIFEST_NAME in _one_line(err) and "--seal" in str(err.value)


@pytest.mark.parametrize("reader", READERS)
def test_garbage_manifest_is_refused(copy, reader):
    kind, _, read = _readers()[reader]
    folder = copy(kind)
    (folder / MANIFEST_NAME).write_text('{"files": [], "made_for": 3')
    with pytest.raises(IntegrityError) as err:
        read(folder)
    assert "not a dotattn manifest" in _one_line(err)


@pytest.mark.parametrize("reader", READERS)
def test_missing_file_is_refused(copy, reader):
    kind, name, read = _readers()[reader]
    folder = copy(kind)
    (folder / name).unlink()
    with pytest.raises((IntegrityError, ValueError)) as err:
        read(folder)
    assert _one_line(err)


def test_summary_json_edited_is_refused(copy):
    """The σ in summary.json changed (the issue's σ = 0.4 / 0.5 case, other way round)."""
    from dotattn.theory_vs_erm.output import load_erm

    folder = copy("erm")
    meta = json.loads((folder / "summary.json").read_text())
    meta["provenance"]["parameters"]["problem"]["sigma"] = 0.4
    (folder / "summary.json").write_text(json.dumps(meta))
    with pytest.raises(IntegrityError) as err:
        load_erm(folder)
    assert "summary.json" in _one_line(err)


def test_runs_csv_of_another_problem_is_refused(folders, copy):
    """runs.csv made for σ = 0.4 put into a folder whose summary.json says σ = 0.5."""
    from dotattn.theory_vs_erm.output import load_erm

    folder = copy("erm")
    shutil.copy(folders / "erm_sigma04" / "runs.csv", folder / "runs.csv")
    with pytest.raises(IntegrityError) as err:
        load_erm(folder)
    assert "runs.csv" in _one_line(err)


def test_phase_diagram_of_another_problem_is_refused_by_compare(folders, copy, tmp_path):
    """phase_diagram.csv of another problem (σ = 0.4) inside a folder made for σ = 0.5."""
    from dotattn.positional_semantic.catalogue import QuadratureSpec
    from dotattn.positional_semantic.output import write_phase_diagram
    from dotattn.positional_semantic.phase_diagram import SweepSettings, run_phase_diagram
    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.output import read_theory

    other = tmp_path / "pd04"
    pd = run_phase_diagram(
        Problem(omega=0.3, sigma=0.4), [0.3], [1.0, 1.5], settings=SweepSettings(QuadratureSpec(*QUAD))
    )
    write_phase_diagram(pd, other)
    folder = copy("pd")
    shutil.copy(other / "phase_diagram.csv", folder / "phase_diagram.csv")
    with pytest.raises(IntegrityError) as err:
        read_theory(folder, Problem(omega=0.3), _settings())
    assert "phase_diagram.csv" in _one_line(err)


# ---- rows' own consistency (also what `dotattn verify --seal` checks before sealing) ----------
def _rewrite_cell(path: Path, column: str, value: str, row: int = 0) -> None:
    import csv
    import io

    head, body = _data_lines(path)
    reader = list(csv.DictReader(io.StringIO("".join(body))))
    reader[row][column] = value
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(reader[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(reader)
    path.write_text("".join(head) + buf.getvalue())


@pytest.mark.parametrize(
    "kind, name, column, value, expect",
    [
        ("erm", "runs.csv", "mu", "[[0.1, 0.2, 0.3]]", "shape"),
        ("erm", "runs.csv", "train_loss", "1e300", "train_loss"),
        ("erm", "runs.csv", "alpha", "1.25", "alpha"),
        ("erm", "runs.csv", "seed", "7", "seed"),
        ("pd", "phase_diagram.csv", "q", "[[1.0, 0.0], [0.0, 1.0]]", "shape"),
        ("pd", "phase_diagram.csv", "omega", "0.7", "omega"),
        ("pd", "phase_diagram.csv", "branch", "sideways", "branch"),
        ("pd", "phase_diagram.csv", "iterations", "many", "cannot be read"),
    ],
)
def test_inconsistent_rows_are_refused_without_manifest(copy, kind, name, column, value, expect):
    from dotattn.verify import verify_folder

    folder = copy(kind)
    _rewrite_cell(folder / name, column, value)
    with pytest.raises(IntegrityError) as err:
        verify_folder(folder, manifest=False)
    assert name in _one_line(err) and expect in str(err.value)


def test_missing_runs_are_refused_without_manifest(copy):
    from dotattn.verify import verify_folder

    folder = copy("erm")
    head, body = _data_lines(folder / "runs.csv")
    (folder / "runs.csv").write_text("".join(head + body[:-2]))
    with pytest.raises(IntegrityError) as err:
        verify_folder(folder, manifest=False)
    assert "rows, the run's parameters need" in _one_line(err)


def test_provenance_line_of_another_run_is_refused_without_manifest(folders, copy):
    from dotattn.verify import verify_folder

    folder = copy("erm")
    head, _ = _data_lines(folders / "erm_sigma04" / "runs.csv")
    _, body = _data_lines(folder / "runs.csv")
    (folder / "runs.csv").write_text("".join(head + body))
    with pytest.raises(IntegrityError) as err:
        verify_folder(folder, manifest=False)
    assert "provenance line" in _one_line(err) and "sigma" in str(err.value)


def test_seal_then_verify_and_refuse_a_second_seal(copy):
    from dotattn.core.validation import ParameterError
    from dotattn.verify import seal_folder, verify_folder

    folder = copy("erm")
    (folder / MANIFEST_NAME).unlink()
    seal_folder(folder, command="test")
    man = json.loads((folder / MANIFEST_NAME).read_text())
    assert "sealed after the fact" in man["note"] and man["files"]["runs.csv"]["rows"] == 8
    assert verify_folder(folder) == "erm"
    with pytest.raises(ParameterError):
        seal_folder(folder)


def test_seal_refuses_inconsistent_rows(copy):
    from dotattn.verify import seal_folder

    folder = copy("erm")
    (folder / MANIFEST_NAME).unlink()
    _rewrite_cell(folder / "runs.csv", "test_error", "nan")
    with pytest.raises(IntegrityError):
        seal_folder(folder)
    assert not (folder / MANIFEST_NAME).exists()


def test_verify_cli(folders, copy):
    r = run("verify", str(folders / "pd"), str(folders / "erm"), str(folders / "cmp"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ok ") == 3
    bad = copy("pd")
    (bad / "boundaries.csv").write_text((bad / "boundaries.csv").read_text() + "\n0.3,1.2,a,b,brent,,\n")
    r = run("verify", str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "boundaries.csv" in r.stderr


def test_compare_cli_refuses_a_tampered_erm_folder(copy, tmp_path):
    folder = copy("erm")
    head, body = _data_lines(folder / "runs.csv")
    (folder / "runs.csv").write_text("".join(head + body[:-1]))
    out = tmp_path / "out"
    r = run("compare", "--erm", str(folder), "--quad-order", "4", "--out", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "runs.csv" in r.stderr
    assert not out.exists()


# ---- the manifest and the checksummed cache units themselves ----------------------------------
def test_manifest_lists_every_file_with_its_digest(folders):
    man = json.loads((folders / "pd" / MANIFEST_NAME).read_text())
    on_disk = {p.name for p in (folders / "pd").iterdir() if p.is_file() and p.name != MANIFEST_NAME}
    assert set(man["files"]) == on_disk
    for name, entry in man["files"].items():
        assert entry["sha256"] == sha256_file(folders / "pd" / name)
    assert man["made_for"]["problem"]["sigma"] == 0.5 and man["made_for"]["omegas"] == [0.2, 0.3]
    assert man["files"]["phase_diagram.csv"]["rows"] == 8  # 2 omega x 2 alpha x 2 branches


def test_manifest_names_a_file_it_does_not_list(tmp_path):
    (tmp_path / "a.csv").write_text("x\n1\n")
    write_manifest(tmp_path, ["a.csv"], {"p": 1})
    (tmp_path / "b.csv").write_text("x\n1\n")
    with pytest.raises(IntegrityError, match="b.csv: not listed"):
        verify_manifest(tmp_path, ["b.csv"])


def test_checked_json_detects_edits(tmp_path):
    p = tmp_path / "unit.json"
    write_checked_json(p, {"key": "k", "result": {"alpha_c": 0.75, "rows": [1, 2]}})
    assert read_checked_json(p) == ({"key": "k", "result": {"alpha_c": 0.75, "rows": [1, 2]}}, None)
    obj = json.loads(p.read_text())
    obj["payload"]["result"]["alpha_c"] = 9.999
    p.write_text(json.dumps(obj))
    payload, reason = read_checked_json(p)
    assert payload is None and "SHA-256" in reason
    p.write_text(p.read_text()[:20])
    assert read_checked_json(p)[1] == "unreadable or cut short"
    assert read_checked_json(tmp_path / "none.json") == (None, None)


def test_cache_unit_key_and_notice(tmp_path, capsys):
    p = tmp_path / "c.json"
    write_cache_unit(p, "key1", cell={"x": [1.0, 2.0]})
    assert read_cache_unit(p, "key1") == {"key": "key1", "cell": {"x": [1.0, 2.0]}}
    assert read_cache_unit(p, "key2") is None and capsys.readouterr().err == ""  # other settings: silent
    p.write_text(json.dumps({"key": "key1", "cell": {"x": [1.0, 2.0]}}))  # an unchecked (older) unit
    assert read_cache_unit(p, "key1") is None
    err = capsys.readouterr().err
    assert "c.json" in err and "recomputing" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("edit", ["alpha_c", "rows_empty", "truncate"])
def test_edited_phase_diagram_cache_column_is_recomputed(tmp_path, capsys, edit):
    """A cached ω column whose JSON was edited (α_c = 9.999, rows: [] or cut short) is not trusted:
    it is recomputed, said so on stderr, and the result equals a fresh run's."""
    from dotattn.positional_semantic.phase_diagram import run_phase_diagram
    from dotattn.positional_semantic.problem import Problem

    cache = tmp_path / "cache"
    first = run_phase_diagram(Problem(omega=0.3), [0.3], [1.0, 1.5], settings=_settings(), cache_dir=cache)
    (unit,) = cache.glob("omega_*.json")
    obj = json.loads(unit.read_text())
    if edit == "alpha_c":
        obj["payload"]["result"]["summary"]["alpha_c"] = 9.999
        unit.write_text(json.dumps(obj))
    elif edit == "rows_empty":
        obj["payload"]["result"]["rows"] = []
        unit.write_text(json.dumps(obj))
    else:
        unit.write_text(unit.read_text()[:100])
    capsys.readouterr()
    again = run_phase_diagram(Problem(omega=0.3), [0.3], [1.0, 1.5], settings=_settings(), cache_dir=cache)
    err = capsys.readouterr().err
    assert unit.name in err and "recomputing" in err
    assert again.from_cache == 0
    # the same solver on the same rule: agreement to the solver tolerance, not bitwise (BLAS reductions)
    a, b = first.summaries[0], again.summaries[0]
    assert (a.alpha_c is None) == (b.alpha_c is None)
    if a.alpha_c is not None:
        assert abs(a.alpha_c - b.alpha_c) < 1e-6
    e1 = np.array([p.train_loss for p in first.rows])
    e2 = np.array([p.train_loss for p in again.rows])
    assert np.allclose(e1, e2, rtol=1e-8, atol=1e-12)
