"""`dotattn compare` on a tiny real ERM run, theory computed on the fly and read from a phase diagram."""

import json

from clitools import run


def test_compare_on_tiny_erm_run(tmp_path):
    erm = tmp_path / "erm"
    r = run("train-erm", "--d", "40", "--alpha", "1.5,2", "--omega", "0.3", "--seeds", "2", "--steps", "200",
            "--test-samples", "500", "--out", str(erm), "--quiet")
    assert r.returncode == 0, r.stderr
    fs = []
    for d in (30, 40):
        f = tmp_path / f"fs{d}"
        r = run("train-erm", "--d", str(d), "--alpha", "1.5", "--seeds", "2", "--steps", "100", "--test-samples", "300",
                "--out", str(f), "--quiet")
        assert r.returncode == 0, r.stderr
        fs += ["--finite-size", str(f)]
    out = tmp_path / "cmp"
    r = run("compare", "--erm", str(erm), "--quad-order", "6", "--out", str(out), *fs)
    assert r.returncode == 0, r.stderr
    table = json.loads((out / "comparison.json").read_text())["table"]
    assert {(row["alpha"], row["branch"]) for row in table} == {(a, b) for a in (1.5, 2.0)
                                                                for b in ("semantic", "positional")}
    for row in table:
        assert row["theory_test_error"] > 0 and row["erm_test_error_mean"] > 0
    for name in ("comparison.png", "comparison.csv", "finite_size.png", "finite_size.json"):
        assert (out / name).stat().st_size > 0
    fsj = json.loads((out / "finite_size.json").read_text())
    assert {p["d"] for p in fsj["points"]} == {30, 40} and set(fsj["theory"]) == {"semantic", "positional"}


def test_compare_bad_folder(tmp_path):
    r = run("compare", "--erm", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "summary.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1
