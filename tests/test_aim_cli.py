"""``dotattn aim state-evolution``: --json, --out (provenance, manifest), refusals."""

from __future__ import annotations

import json

import pytest
from clitools import run

from dotattn.core.io import read_csv, verify_manifest


def test_json_points_and_thresholds():
    r = run(
        "aim",
        "state-evolution",
        "--channel",
        "softmax",
        "--rho",
        "0.5",
        "--tokens",
        "3",
        "--alpha",
        "0.01,0.08",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert [p["alpha"] for p in obj["points"]] == [0.01, 0.08]
    for p in obj["points"]:
        assert {"alpha", "mmse", "q", "q_hat", "status"} <= set(p)
    assert obj["points"][1]["mmse"] == 0 and obj["points"][1]["q_hat"] is None  # perfect recovery: q̂ = inf
    assert obj["thresholds"]["alpha_bar_perfect_recovery"] == pytest.approx(0.75)


def test_out_folder_with_provenance(tmp_path):
    out = tmp_path / "se"
    r = run(
        "aim", "state-evolution", "--channel", "hardmax", "--rho", "0.5", "--alpha", "0.1", "--out", str(out), "--quiet"
    )
    assert r.returncode == 0, r.stderr
    rows = read_csv(out / "points.csv")
    assert len(rows) == 1 and rows[0]["status"] == "converged"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["provenance"]["parameters"]["channel"] == "hardmax"
    assert (out / "mmse.png").stat().st_size > 0
    verify_manifest(out, ["points.csv", "summary.json", "mmse.png"])


# one subprocess per case (~1 s each); the library refusals (check_inputs) are tested case by case
# in test_aim_state_evolution.py
@pytest.mark.parametrize(
    "args",
    [
        ["--rho", "0"],
        ["--rho", "0.5", "--tokens", "1"],
        ["--rho", "0.5", "--alpha", "0"],
        ["--rho", "nan"],
        ["--rho", "0.5", "--channel", "argmax"],
    ],
)
def test_refusals_one_line_exit_2_nothing_created(tmp_path, args):
    out = tmp_path / "never"
    full = ["aim", "state-evolution", *args]
    if "--alpha" not in args:
        full += ["--alpha", "0.1"]
    r = run(*full, "--out", str(out))
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert not out.exists()
