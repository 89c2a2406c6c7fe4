"""Holes left after the first trust round (issue 18 item 2): manifests and verification of the
attention-paths outputs, manifests written for folders named relative to the working directory,
and every committed results folder verifying against its manifest."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from clitools import ENV, dotattn_command, run

from dotattn.core.io import MANIFEST_NAME, IntegrityError, verify_manifest, write_manifest
from dotattn.core.validation import ParameterError
from dotattn.verify import folder_kind, registered_kinds, verify_folder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
MARKOV = RESULTS / "paths" / "markov"


def _run_in(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``dotattn *args`` with the working directory ``cwd`` (relative output paths)."""
    return subprocess.run([*dotattn_command(), *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600)


def _output_folders() -> list[Path]:
    out = []
    for d in sorted(p for p in RESULTS.rglob("*") if p.is_dir()):
        if any((d / kind.files[0]).is_file() for kind in registered_kinds().values()):
            out.append(d)
    return out


@pytest.mark.parametrize("folder", _output_folders(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_committed_results_folder_verifies(folder):
    assert (folder / MANIFEST_NAME).is_file(), "every committed output folder carries its manifest"
    assert verify_folder(folder) == folder_kind(folder)


def test_every_committed_output_folder_is_found():
    """The list above is not empty by accident: it holds every kind the committed results have."""
    kinds = {folder_kind(f) for f in _output_folders()}
    assert {
        "erm",
        "restarts",
        "comparison",
        "phase-diagram",
        "paths-theory",
        "paths-sample",
        "aim-state-evolution",
        "aim-algorithms",
    } <= kinds


@pytest.fixture
def sample(tmp_path):
    dst = tmp_path / "sample"
    shutil.copytree(MARKOV / "sample_N10", dst)
    return dst


@pytest.fixture
def theory(tmp_path):
    dst = tmp_path / "theory"
    dst.mkdir()
    for f in MARKOV.iterdir():
        if f.is_file():
            shutil.copy2(f, dst / f.name)
    return dst


def _drop_last_row(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))


def _edit_cell(path: Path, column: str, value: str, row: int = 0) -> None:
    """Rewrite one cell of a dotattn CSV, keeping its provenance line (through dotattn.core.io's CSV codec)."""
    from dotattn.core.io import csv_comment, read_csv, write_csv

    rows = read_csv(path)
    rows[row][column] = value
    write_csv(path, rows, list(rows[0]), comment=csv_comment(path))


def test_paths_folders_verify(sample, theory):
    assert verify_folder(sample) == "paths-sample"
    assert verify_folder(theory) == "paths-theory"


def test_sample_draws_cut_short_are_refused(sample):
    _drop_last_row(sample / "U_draws.csv")
    with pytest.raises(IntegrityError, match=r"U_draws.csv: \d+ data rows, the manifest lists"):
        verify_folder(sample)
    with pytest.raises(IntegrityError, match="U_draws.csv: .* draws, sample.json counts"):
        verify_folder(sample, manifest=False)


@pytest.mark.parametrize(
    "value, expect", [("nan", "not a finite number"), ("1e300", "not a finite number"), ("abc", "non-number")]
)
def test_sample_draw_values_are_checked(sample, value, expect):
    _edit_cell(sample / "U_draws.csv", "U_0_1", value)
    with pytest.raises(IntegrityError, match="SHA-256 differs"):
        verify_folder(sample)
    with pytest.raises(IntegrityError, match=expect):
        verify_folder(sample, manifest=False)


def test_sample_provenance_line_of_another_run_is_refused(sample):
    s = json.loads((sample / "sample.json").read_text())
    s["provenance"]["parameters"]["temperature"] = 0.5
    (sample / "sample.json").write_text(json.dumps(s))
    with pytest.raises(IntegrityError, match="provenance line was made for temperature"):
        verify_folder(sample, manifest=False)


def test_read_sample_run_verifies_the_folder(sample):
    """``paths theory --sampled`` reads a sampling run only through a verified manifest."""
    from dotattn.paths.study import StudyConfig, read_sample_run
    from dotattn.paths.task import MarkovTask

    s = json.loads((sample / "sample.json").read_text())
    cfg = StudyConfig(
        task=MarkovTask(**s["parameters"]["task_parameters"]),
        widths=(10.0,),
        temperature=s["parameters"]["temperature"],
        sigma2=s["parameters"]["sigma2"],
    )
    assert read_sample_run(sample, cfg)["N"] == 10
    (sample / MANIFEST_NAME).unlink()
    with pytest.raises(IntegrityError, match="manifest.json: missing"):
        read_sample_run(sample, cfg)


@pytest.mark.parametrize(
    "column, value, expect",
    [
        ("accuracy", "1.5", "accuracy"),
        ("loss", "inf", "loss"),
        ("U", "[[1.0, 0.5], [0.0, 1.0]]", "U has shape"),
        ("U", "[[1, 2, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]", "U is not symmetric"),
    ],
)
def test_paths_theory_rows_are_checked(theory, column, value, expect):
    _edit_cell(theory / "points.csv", column, value)
    with pytest.raises(IntegrityError, match="SHA-256 differs"):
        verify_folder(theory)
    with pytest.raises(IntegrityError, match=expect):
        verify_folder(theory, manifest=False)


def test_paths_cli_refuses_a_tampered_sampled_folder(sample, tmp_path):
    _drop_last_row(sample / "U_draws.csv")
    r = run(
        "paths",
        "theory",
        "--task",
        "markov",
        "--N",
        "10",
        "--sampled",
        str(sample),
        "--out",
        str(tmp_path / "out"),
        "--quiet",
    )
    assert r.returncode == 2 and "U_draws.csv" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_manifest_of_a_folder_named_from_the_working_directory(tmp_path, monkeypatch):
    """write_manifest took 'out/x.csv' as out/out/x.csv, so a relative --out failed at the very end."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "sub").mkdir(parents=True)
    for name in ("a.csv", "b.json", "sub/b.json"):
        (tmp_path / "out" / name).write_text("x\n1\n" if name.endswith(".csv") else "{}")
    write_manifest("out", ["out/a.csv", "b.json"], {"k": 1})
    man = verify_manifest("out", ["a.csv", "b.json"])
    assert set(man["files"]) == {"a.csv", "b.json"} and man["files"]["a.csv"]["rows"] == 1
    with pytest.raises(ParameterError, match="not a plain file name"):  # issue 46: plain names only
        write_manifest("out", ["sub/b.json"], {"k": 1})
    monkeypatch.chdir(tmp_path / "out")
    write_manifest(".", ["a.csv"], {"k": 1})
    assert set(verify_manifest(".", ["a.csv"])["files"]) == {"a.csv"}


def test_phase_diagram_and_seal_with_a_relative_out(tmp_path):
    r = _run_in(
        tmp_path,
        "phase-diagram",
        "--omega",
        "0.2,0.3",
        "--alpha",
        "1,1.5",
        "--quad-order",
        "4",
        "--coarse-order",
        "2",
        "--refine-rules",  # the smallest refinement rules: what is checked (a relative --out) does not
        "2",  # depend on their size, and the default ones (8 x 2 x 2^13 points) were most of the run
        "--refine-order",
        "4",
        "--workers",
        "1",
        "--out",
        "pd",
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    r = _run_in(tmp_path, "verify", "pd")
    assert r.returncode == 0 and "ok pd (phase-diagram)" in r.stdout
    shutil.copytree(MARKOV / "sample_N10", tmp_path / "old")
    (tmp_path / "old" / MANIFEST_NAME).unlink()
    r = _run_in(tmp_path, "verify", "--seal", "old")
    assert r.returncode == 0, r.stderr
    assert "ok old (paths-sample)" in r.stdout


def test_theory_study_writer_lists_every_file(tmp_path):
    from dotattn.paths.study import StudyConfig, run_theory_study, write_theory_study
    from dotattn.paths.task import MarkovTask

    cfg = StudyConfig(task=MarkovTask(T=4, P=8, P_test=8), widths=(3.0,), temperature=1e4)
    summary = write_theory_study(run_theory_study(cfg, []), tmp_path / "t", "test")
    man = json.loads((tmp_path / "t" / MANIFEST_NAME).read_text())
    assert set(man["files"]) == set(summary["files"])
    assert verify_folder(tmp_path / "t") == "paths-theory"


def test_every_readme_example_writes_into_an_ignored_folder():
    """Every --out (and --sampled) of a dotattn command in the README's code blocks lies under a path
    git ignores: a user following the README leaves the clone clean (the paths section wrote into
    out/paths)."""
    import re

    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```", readme, re.S | re.M)
    outs = [
        m
        for b in blocks
        for line in b.splitlines()
        if line.lstrip().startswith("dotattn ")
        for m in re.findall(r"--(?:out|sampled)\s+(\S+)", line)
    ]
    assert len(outs) >= 8, outs
    r = subprocess.run(
        ["git", "check-ignore", "--no-index", *[f"{o}/x" for o in outs]], cwd=ROOT, capture_output=True, text=True
    )
    ignored = {line[:-2] for line in r.stdout.split()}
    assert ignored == set(outs), set(outs) - ignored
