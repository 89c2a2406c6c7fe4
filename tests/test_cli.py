"""The real commands on small inputs, through the installed console script."""

import json

import pytest
from clitools import run


def test_help_and_version():
    r = run("--help")
    assert r.returncode == 0 and "phase-diagram" in r.stdout and "solve" in r.stdout
    from dotattn import __version__

    r = run("--version")
    assert r.returncode == 0 and __version__ in r.stdout


def test_solve_json_small_rule():
    r = run("solve", "--alpha", "2", "--omega", "0.3", "--quad-order", "8", "--random-starts", "1", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"params", "fixed_points", "linear_baseline_test_error", "quadrature", "seconds"}
    fps = out["fixed_points"]
    keys = {"branch", "status", "q", "m", "theta", "V", "train_loss", "test_error", "selected"}
    assert all(keys <= set(fp) for fp in fps)
    selected = [fp for fp in fps if fp["selected"]]
    assert len(selected) == 1 and selected[0]["branch"] == "semantic"
    assert selected[0]["train_loss"] == min(fp["train_loss"] for fp in fps if fp["status"] == "converged")
    assert out["quadrature"]["order"] == 8 and out["quadrature"]["nodes"] == 8**4
    for fp in fps:  # RS stability of every converged fixed point (docs/rs_stability.md)
        if fp["status"] == "converged":
            assert fp["stability"] == "computed" and fp["replicon"] > 0 and 0 <= fp["jump_weight"] <= 1
            if fp["at_stable"] is None:  # undecided: 1 lies within two standard errors of the replicon
                assert abs(fp["replicon"] - 1) <= 2 * fp["replicon_error"]
            else:
                assert fp["at_stable"] == (fp["replicon"] < 1)
            if fp["jump_weight"] > 0 or fp["at_stable"] is False:
                assert fp["rs_stable"] is False
            else:
                assert fp["rs_stable"] == fp["at_stable"]
            assert fp["stability_reason"]


def test_solve_table_and_quadrature_check():
    r = run(
        "solve",
        "--alpha",
        "1.25",
        "--quad-order",
        "6",
        "--coarse-order",
        "0",
        "--random-starts",
        "0",
        "--check-quadrature",
    )
    assert r.returncode == 0, r.stderr
    assert "positional" in r.stdout and "semantic" in r.stdout and "linear baseline" in r.stdout
    assert "quadrature check" in r.stdout and "dtrain_loss" in r.stdout
    assert "replicon" in r.stdout and "RS stability of positional" in r.stdout


@pytest.mark.parametrize(
    "args, word",
    [
        (["solve", "--alpha", "-1"], "alpha"),
        (["solve", "--alpha", "1", "--omega", "1.5"], "omega"),
        (["solve", "--alpha", "1", "--sigma", "0"], "sigma"),
        (["solve", "--alpha", "1", "--lambda", "-0.1"], "lambda"),
        (["solve", "--alpha", "1", "--A", "0.5,0.6;0.4,0.6"], "A"),
        (["solve", "--alpha", "1", "--A", "0.5,0.5,0;0.4,0.6,0"], "A"),
        (["solve", "--alpha", "1", "--positional-gram", "1,2;2,1"], "positional_gram"),
        (["solve", "--alpha", "1", "--L", "1"], "L"),
        (["solve", "--alpha", "1", "--damping", "1.5"], "damping"),
        (["solve", "--alpha", "1", "--rank", "3", "--quad", "gauss-hermite", "--quad-order", "20"], "quad"),
        (["solve", "--alpha", "abc"], "alpha"),
        (["phase-diagram", "--alpha", "0:1:3"], "alpha"),
        (["phase-diagram", "--omega", "1.2"], "omega"),
        (["phase-diagram", "--omega", "0:0.4:0"], "count"),
        (["phase-diagram", "--omega", ","], "empty"),
    ],
)
def test_bad_input_exit_2_one_line(args, word, tmp_path):
    r = run(*args, "--out", str(tmp_path / "out")) if args[0] == "phase-diagram" else run(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and word in lines[0], r.stderr
    assert r.stdout == ""
    assert not (tmp_path / "out").exists()


def test_phase_diagram_unwritable_output(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run("phase-diagram", "--omega", "0.3", "--alpha", "1,2", "--out", str(blocker / "sub"))
    assert r.returncode == 2 and "cannot be written" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_phase_diagram_small_run_and_resume(tmp_path):
    out = tmp_path / "pd"
    args = [
        "phase-diagram",
        "--omega",
        "0.3",
        "--alpha",
        "1.0,1.5",
        "--quad-order",
        "6",
        "--coarse-order",
        "0",
        "--workers",
        "1",
        "--out",
        str(out),
        "--quiet",
    ]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    for name in ("phase_diagram.csv", "summary.json", "test_error.png", "overlaps.png"):
        assert (out / name).stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dotattn_version"] and "git_commit" in summary and summary["wall_seconds"] > 0
    assert summary["parameters"]["omegas"] == [0.3]
    col = summary["omegas"][0]
    assert set(col) >= {"omega", "alpha_c", "spinodal_semantic", "spinodal_positional", "alpha_lin"}
    assert col["alpha_c"] is not None and 1.0 < col["alpha_c"] < 1.5
    assert "0 columns from cache" in r.stdout
    r2 = run(*args)
    assert r2.returncode == 0 and "1 columns from cache" in r2.stdout
    assert json.loads((out / "summary.json").read_text())["omegas"] == summary["omegas"]
