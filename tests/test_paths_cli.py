"""`dotattn paths`: the theory command end to end on a small test set, and every refusal of bad input
(exit 2, one line naming the parameter, nothing created)."""

import json

import pytest
from clitools import run, run_python


def _one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


TH = ["paths", "theory", "--P-test", "100"]
SA = ["paths", "sample", "--P-test", "100"]


@pytest.mark.parametrize(
    "args, words",
    [
        ([*TH, "--N", "0"], ["N (width)", "[1, 1e+12]"]),
        ([*TH, "--N", "10,nan"], ["N", "finite"]),
        ([*TH, "--N", "-5"], ["N (width)"]),
        ([*TH, "--N", "1e13"], ["N (width)"]),
        ([*TH, "--P", "3"], ["P (training sequences)", "even"]),
        ([*TH, "--P", "0"], ["P (training sequences)"]),
        ([*TH, "--T", "1"], ["T (tokens)"]),
        ([*TH, "--temperature", "0"], ["temperature", "[1e-08, 10000]"]),
        ([*TH, "--temperature", "inf"], ["temperature", "finite"]),
        ([*TH, "--sigma2", "-1"], ["sigma2"]),
        ([*TH, "--noise-perp", "nan"], ["noise_perp", "finite"]),
        ([*TH, "--task", "omniglot"], ["task", "markov"]),
        ([*TH, "--variant", "3paths"], ["variant", "4paths"]),
        ([*TH, "--subsets", "all,bad"], ["subset"]),
        ([*TH, "--subsets", "good"], ["subsets", "all"]),
        ([*TH, "--sampled", "/nonexistent/folder"], ["sampled"]),
        ([*SA, "--N", "10.5"], ["N (width) for sampling", "[1, 200]"]),
        ([*SA, "--N", "500"], ["N (width) for sampling"]),
        ([*SA, "--chains", "0"], ["chains"]),
        ([*SA, "--draws", "2"], ["draws"]),
        ([*SA, "--target-accept", "1"], ["target_accept", "(0, 1)"]),
        ([*SA, "--max-tree-depth", "0"], ["max_tree_depth"]),
        ([*SA, "--temperature", "-1"], ["temperature"]),
    ],
)
def test_bad_input_one_line_exit_2_nothing_created(args, words, tmp_path):
    out = tmp_path / "out"
    r = run(*args, "--out", str(out), timeout=120)
    _one_line_exit_2(r, *words)
    assert not out.exists()


def test_theory_end_to_end(tmp_path):
    out = tmp_path / "th"
    r = run(*TH, "--N", "10,1000", "--subsets", "all,good", "--out", str(out), "--quiet", timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["paths"] == ["good", "denoising", "adversarial 1", "adversarial 2"]
    e = s["per_N"]["10"]
    assert e["status"] == "converged" and e["stationarity"] <= 1e-8 and len(e["U"]) == 4
    assert 0.5 <= e["accuracy_theory"] <= 1 and "accuracy_gp_good" in e
    assert s["provenance"]["parameters"]["command"].startswith("dotattn paths theory")
    for f in s["files"]:
        assert (out / f).exists(), f


def test_missing_numpyro_names_the_extra(tmp_path):
    out = tmp_path / "s"
    code = (
        "import sys\nsys.modules['numpyro'] = None\nfrom dotattn.cli.main import main\n"
        f"main(['paths', 'sample', '--N', '10', '--out', {str(out)!r}])\n"
    )
    r = run_python(code, tmp_path)
    assert r.returncode == 2, r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [
        'Error: paths sample needs NumPyro; install it with pip install "dotattn[paths]"'
    ]
    assert not out.exists()
