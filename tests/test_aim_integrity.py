"""AIM output folders are verified when read (manifest, then rows), like every other dotattn folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from clitools import run

from dotattn.aim.plotting import read_algorithm_points, read_state_evolution
from dotattn.core.io import IntegrityError, read_csv, write_csv, write_manifest
from dotattn.verify import folder_kind, verify_folder

RESULTS = Path(__file__).resolve().parent.parent / "results" / "aim"
SE = RESULTS / "se_softmax_T2_rho0.5"
AMP = RESULTS / "amp_softmax_d100_rho0.5_T2"


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def _edit_first_row(folder: Path, name: str, column: str, value: str, reseal: bool) -> None:
    """Change one cell of a CSV (keeping its comment line); ``reseal``: rewrite the manifest so that only
    the row checks can catch the edit."""
    import json

    path = folder / name
    comment = path.read_text().splitlines()[0].lstrip("# ")
    rows = read_csv(path)
    rows[0][column] = value
    write_csv(path, rows, list(rows[0]), comment=comment)
    if reseal:
        man = json.loads((folder / "manifest.json").read_text())
        write_manifest(folder, man["files"], man["made_for"], command=man.get("command"), provenance_record=man)


def test_state_evolution_and_paths_folders_are_told_apart():
    """Both write points.csv + summary.json: the header decides."""
    assert folder_kind(SE) == "aim-state-evolution"
    assert folder_kind(RESULTS.parent / "paths" / "markov") == "paths-theory"
    assert folder_kind(AMP) == "aim-algorithms"


def test_committed_folders_read_back():
    points, thresholds = read_state_evolution(SE)
    assert len(points) > 10 and all(0.0 <= p.mmse <= 1.0 + p.rho for p in points)
    assert read_algorithm_points(AMP)[0]["alpha"].size > 3


def test_edited_points_refused_by_checksum(tmp_path):
    folder = _copy(SE, tmp_path)
    _edit_first_row(folder, "points.csv", "mmse", "0.5", reseal=False)
    with pytest.raises(IntegrityError, match="points.csv"):
        read_state_evolution(folder)


@pytest.mark.parametrize("column, value", [("mmse", "1.6"), ("mmse", "nan"), ("status", "fine"), ("alpha", "-1")])
def test_resealed_impossible_rows_refused(tmp_path, column, value):
    """MMSE above the prior's error Q0 = 1 + rho = 1.5, non-finite, an unknown status, alpha <= 0."""
    folder = _copy(SE, tmp_path)
    _edit_first_row(folder, "points.csv", column, value, reseal=True)
    with pytest.raises(IntegrityError, match="points.csv: row 1"):
        verify_folder(folder)


def test_algorithm_summary_must_count_the_runs(tmp_path):
    folder = _copy(AMP, tmp_path)
    _edit_first_row(folder, "alphas.csv", "runs", "9", reseal=True)
    with pytest.raises(IntegrityError, match="alphas.csv: row 1"):
        verify_folder(folder)


def test_figure_command_refuses_a_tampered_folder_in_one_line(tmp_path):
    folder = _copy(SE, tmp_path)
    _edit_first_row(folder, "points.csv", "mmse", "0.5", reseal=False)
    out = tmp_path / "fig.png"
    res = run("aim", "figure", "--from", str(folder), "--out", str(out), timeout=120)
    assert res.returncode == 2, res.stderr
    assert "points.csv" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not out.exists()


def _free_entropy_folder(tmp_path: Path) -> Path:
    from click.testing import CliRunner
    from dotattn.cli.main import cli

    out = tmp_path / "fe"
    r = CliRunner().invoke(
        cli,
        [
            "aim",
            "free-entropy",
            "--rho",
            "0.5",
            "--alpha",
            "0.05,0.1",
            "--test-samples",
            "500",
            "--out",
            str(out),
            "--quiet",
        ],
    )
    assert r.exit_code == 0, (r.output, r.exception)
    return out


@pytest.mark.parametrize(
    "column, value", [("start", "random"), ("alpha", "0.07"), ("mmse", "1.3"), ("test_error", "2.5"), ("rho", "1")]
)
def test_free_entropy_rows_checked_against_the_manifest(tmp_path, column, value):
    from dotattn.aim.plotting import read_free_entropy

    folder = _free_entropy_folder(tmp_path)
    assert folder_kind(folder) == "aim-free-entropy" and len(read_free_entropy(folder)) == 4
    _edit_first_row(folder, "free_entropy.csv", column, value, reseal=True)
    with pytest.raises(IntegrityError, match="free_entropy.csv"):
        verify_folder(folder)


def test_gd_runs_checked_against_the_recorded_initialisations(tmp_path):
    folder = _copy(RESULTS / "gd_softmax_d40_rho0.5_T2", tmp_path)
    verify_folder(folder)
    _edit_first_row(folder, "runs.csv", "seed", "9", reseal=True)  # 8 data sets were made
    with pytest.raises(IntegrityError, match="runs.csv"):
        verify_folder(folder)
