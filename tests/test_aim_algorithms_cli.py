"""`amp_command` and `gd_command` (cli/aim.py) with click's CliRunner: every refusal of bad
input (exit 2, one line, nothing created) and a tiny end-to-end run of each with its files."""

import json

import pytest
from click.testing import CliRunner
from dotattn.cli.aim import amp_command, gd_command

from dotattn.core.io import read_csv, verify_manifest


@pytest.mark.parametrize("command", [amp_command, gd_command])
@pytest.mark.parametrize(
    "args, words",
    [
        (["--rho", "0"], ["rho", "[0.0001, 10000]"]),
        (["--rho", "-1"], ["rho"]),
        (["--rho", "nan"], ["rho", "finite"]),
        (["--tokens", "1"], ["tokens", "[2, 64]"]),
        (["--alpha", "0"], ["alpha", "(0, 10000]"]),
        (["--alpha", "0.1,inf"], ["alpha", "finite"]),
        (["--alpha", "-0.5"], ["alpha"]),
        (["--channel", "relu"], ["channel", "softmax"]),
        (["--d", "1"], ["d"]),
        (["--d", "2000", "--alpha", "1000"], ["needs about", "GiB"]),  # ~10^14 bytes: refused before any allocation
        (["--seeds", "0"], ["seeds"]),
        (["--beta", "0"], ["beta"]),
        (["--rho", "0.001", "--d", "100"], ["rho * d"]),
    ],
)
def test_bad_input_one_line_exit_2_nothing_created(command, args, words, tmp_path):
    out = tmp_path / "out"
    base = ["--d", "20", "--alpha", "0.1"]
    r = CliRunner().invoke(command, [*base, *args, "--out", str(out)])
    assert r.exit_code == 2, (r.output, r.exception)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    for w in words:
        assert w in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    "command, args, word",
    [
        (amp_command, ["--channel", "hardmax", "--tokens", "3"], "hardmax"),
        (amp_command, ["--damping", "1"], "damping"),
        (amp_command, ["--max-iter", "0"], "max_iter"),
        (gd_command, ["--channel", "hardmax"], "softmax"),
        (gd_command, ["--optimizer", "sgd"], "optimizer"),
        (gd_command, ["--device", "tpu"], "device"),
        (gd_command, ["--inits", "0"], "inits"),
    ],
)
def test_command_specific_refusals(command, args, word, tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(command, ["--d", "20", "--alpha", "0.1", *args, "--out", str(out)])
    assert r.exit_code == 2 and word in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not out.exists()


def test_amp_end_to_end(tmp_path):
    out = tmp_path / "amp"
    r = CliRunner().invoke(
        amp_command, ["--d", "30", "--alpha", "0.3", "--seeds", "2", "--max-iter", "40", "--out", str(out), "--quiet"]
    )
    assert r.exit_code == 0, (r.output, r.exception)
    verify_manifest(out, ["runs.csv", "alphas.csv", "iterations.csv", "summary.json"])
    runs = read_csv(out / "runs.csv")
    assert len(runs) == 2 and {row["estimator"] for row in runs} == {"amp"}
    s = json.loads((out / "summary.json").read_text())
    assert s["made_for"]["damping"] == 0.5 and s["made_for"]["d"] == 30
    assert "bound_check" in s and len(s["alphas"]) == 1
    it = read_csv(out / "iterations.csv")
    assert {row["iteration"] for row in it} >= {"0", "1"} and all(row["V_se"] for row in it)
    assert "estimator" in r.output and "conv/sets" in r.output  # --quiet drops progress lines, not the table
    assert all(0.0 <= float(row["test_error"]) <= 2.0 for row in runs)
    a = s["alphas"][0]
    assert 0.0 <= a["test_error_bo"] <= a["test_mean"] + 4 * a["test_se"]  # a lower bound (0 past perfect recovery)


def test_gd_end_to_end(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "gd"
    r = CliRunner().invoke(
        gd_command,
        [
            "--d",
            "12",
            "--alpha",
            "0.3",
            "--seeds",
            "2",
            "--inits",
            "2",
            "--steps",
            "200",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, (r.output, r.exception)
    assert "gd_averaged" in r.output
    runs = read_csv(out / "runs.csv")
    assert (
        sum(row["estimator"] == "gd" for row in runs) == 4
        and sum(row["estimator"] == "gd_averaged" for row in runs) == 2
    )
    s = json.loads((out / "summary.json").read_text())
    assert {a["estimator"] for a in s["alphas"]} == {"gd", "gd_averaged"}
    assert "data sets all of whose 2 initialisations" in r.output  # what conv/sets counts
    assert all(0.0 <= float(row["test_error"]) <= 2.0 for row in runs)


def test_gd_without_torch_names_the_extra(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ModuleNotFoundError
    out = tmp_path / "gd"
    r = CliRunner().invoke(gd_command, ["--d", "12", "--alpha", "0.3", "--out", str(out)])
    assert r.exit_code == 2 and "erm" in r.output and "PyTorch" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and not out.exists()
