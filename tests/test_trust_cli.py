"""Issue 18 (items 4, 5), as a user meets it: one line and the right exit status instead of a
traceback (bad --out, Dask schemes, a full disk, a read-only folder, a missing torch), nothing
created by a refusal or an interrupted run, and the papercuts of the tables and the README."""

import contextlib
import csv
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clitools import ENV, dotattn_command, run

pytest.importorskip("dotattn.cli.main", reason="the CLI needs an install (pip install -e .)")

ROOT = Path(__file__).resolve().parent.parent
TINY_ERM = ["--d", "12", "--alpha", "1", "--seeds", "2", "--steps", "20", "--test-samples", "20", "--threads", "1"]


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (no traceback)."""
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: "), lines[0]
    return lines[0]


@contextlib.contextmanager
def tmpfs(path: Path, options: str):
    """A small tmpfs at ``path`` (root only); skips the test, saying why, where mount is not permitted."""
    path.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({got.stderr.strip() or 'not root'}): a full disk / read-only "
            f"file system cannot be made for the test"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


# ---------------------------------------------------------------------------------------------
# refusals create nothing
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["solve", "--alpha", "1", "--positional-gram", "10,-10;-10,10"],
        ["train-erm", "--d", "10", "--out", ""],
        ["erm-restarts", "--out", "  "],
        ["erm-alpha-c", "--out", ""],
        ["phase-diagram", "--out", ""],
        ["compare", "--erm", "somewhere", "--out", ""],
    ],
)
def test_bad_out_and_matrix_refused_in_one_line(args, tmp_path):
    proc = subprocess.run(
        [*dotattn_command(), *args], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert ("--out must be a non-empty folder path" in line) or ("positional_gram entries" in line)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command, address, why",
    [
        ("phase-diagram", "tls://127.0.0.1:8786", "dotattn does not take"),
        ("phase-diagram", "ucx://127.0.0.1:8786", "dotattn does not take"),
        ("erm-alpha-c", "wss://127.0.0.1:8786", "dotattn does not take"),
        ("phase-diagram", "inproc://127.0.0.1/1/1", "cannot be reached from a command"),
    ],
)
def test_dask_schemes_refused_before_any_folder(command, address, why, tmp_path):
    out = tmp_path / "out"
    proc = run(command, "--dask", address, "--out", str(out), timeout=120)
    assert proc.returncode == 2 and why in one_error_line(proc)
    assert not out.exists()


@pytest.mark.parametrize(
    "extra, what",
    [(["--alpha", "1,2e4"], r"alpha must be in \(0, 10000\]"), (["--d", "100000000"], "must fit in memory")],
)
def test_erm_alpha_c_refuses_before_creating_out(extra, what, tmp_path):
    out = tmp_path / "ac"
    proc = run("erm-alpha-c", *extra, "--out", str(out), timeout=120)
    assert proc.returncode == 2 and re.search(what, one_error_line(proc))
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# disk full, read-only file system, signals, missing torch
# ---------------------------------------------------------------------------------------------
def test_disk_full_is_one_line_exit_1_and_no_partial_file(tmp_path):
    """An 8 KiB tmpfs (two pages: the run lock and runs.csv of this tiny run) holds runs.csv but not
    summary.csv: ENOSPC mid-write."""
    pytest.importorskip("torch")
    with tmpfs(tmp_path / "full", "size=8k") as disk:
        out = disk / "erm"
        proc = run("train-erm", *TINY_ERM, "--quiet", "--out", str(out), timeout=300)
        assert proc.returncode == 1
        assert "No space left on device" in one_error_line(proc)
        tmp = [p.name for p in out.rglob("*") if p.name.endswith(".tmp")]
        assert not tmp, tmp  # the atomic writer removed its temporary
        left = sorted(p.name for p in out.iterdir() if p.name != "cache")  # cache: the finished seeds
        assert set(left) <= {"runs.csv", "summary.csv"}  # never summary.json: it is written last
        for name in left:  # whatever is there is complete: every row with every column
            rows = list(csv.DictReader(ln for ln in (out / name).open() if not ln.startswith("#")))
            assert len(rows) == {"runs.csv": 4, "summary.csv": 3}[name]
            assert all(None not in r.values() for r in rows)


def test_read_only_file_system(tmp_path):
    """Refused up front (exit 2) when --out itself cannot be written; a read-only folder met during the
    run (phase-diagram's cache) ends with one line and exit 1."""
    with tmpfs(tmp_path / "ro", "size=64k,ro") as ro:
        out = ro / "pd"
        proc = run("phase-diagram", "--omega", "0.3", "--alpha", "1.2", "--out", str(out), timeout=120)
        assert proc.returncode == 2 and "cannot be written" in one_error_line(proc)
        assert not out.exists()
    out = tmp_path / "pd"
    with tmpfs(out / "cache", "size=64k,ro"):
        proc = run(
            "phase-diagram",
            "--omega",
            "0.3",
            "--alpha",
            "1.2",
            "--quad-order",
            "4",
            "--coarse-order",
            "0",
            "--workers",
            "1",
            "--out",
            str(out),
            timeout=120,
        )
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert "Traceback" not in proc.stderr
        assert "at the present load" in lines[0]  # the start line's estimate says what it assumes
        assert lines[-1].startswith("Error: Read-only file system") and len(lines) == 2


@pytest.mark.serial
def test_sigterm_to_train_erm_leaves_no_empty_folder(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "a" / "b"
    proc = subprocess.Popen(
        [
            *dotattn_command(),
            "train-erm",
            "--d",
            "200",
            "--alpha",
            "1",
            "--seeds",
            "2",
            "--steps",
            "100000000",
            "--tol",
            "0",
            "--test-samples",
            "20",
            "--threads",
            "1",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    deadline = time.monotonic() + 120
    while not out.exists():  # the folder is made just before training starts
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "Traceback" not in err and "interrupted (SIGTERM)" in err
    assert list(tmp_path.iterdir()) == []  # both folders it created are gone


def test_missing_torch_names_the_cpu_route(monkeypatch, capsys, tmp_path):
    from dotattn.cli.main import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails as if not installed
    with pytest.raises(SystemExit) as stop:
        main(["train-erm", "--d", "10", "--out", str(tmp_path / "erm")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs PyTorch" in err
    assert "-c cpu-torch.txt" in err and "download.pytorch.org/whl/cpu" in err
    assert not (tmp_path / "erm").exists()


def test_default_threads_never_oversubscribe():
    from dotattn.cli.options import threads_per_worker

    assert threads_per_worker(0, 2, cores=2) == 1 and threads_per_worker(0, 1, cores=2) == 2
    assert threads_per_worker(0, 3, cores=2) == 1 and threads_per_worker(0, 4, cores=16) == 4
    assert threads_per_worker(3, 2, cores=2) == 3  # given explicitly: as given
    for workers in range(1, 9):
        for cores in (1, 2, 3, 8, 64):
            t = threads_per_worker(0, workers, cores)
            assert t >= 1 and (workers * t <= cores or t == 1)


# ---------------------------------------------------------------------------------------------
# tables and files a user reads
# ---------------------------------------------------------------------------------------------
SHARED = pytest.mark.xdist_group("test_trust_cli.shared")
"""The tests of the module-scoped ``erm_run`` run on one xdist worker (``--dist loadgroup``), so that its
train-erm run is made once per run, not once per worker."""


@pytest.fixture(scope="module")
def erm_run(tmp_path_factory):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("trust") / "erm"
    proc = run("train-erm", *TINY_ERM, "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out, proc


@SHARED
def test_train_erm_table_is_formatted_and_warns(erm_run):
    out, proc = erm_run
    assert "[[" not in proc.stdout  # matrices are shown as numbers (their norm), not nested lists
    header = proc.stdout.splitlines()[0].split()
    assert header[:2] == ["alpha", "init"] and "converged" in header
    assert re.search(r"\b0/2\b", proc.stdout)  # 20 steps of GD do not reach tol 1e-9
    assert re.search(r"warning: 4 of 4 runs did not converge", proc.stderr)


@SHARED
def test_csv_comment_line_is_the_only_hash(erm_run):
    """What the README promises: one '#' provenance line, no '#' in any cell, so comment='#' readers work."""
    out, _ = erm_run
    for name in ("runs.csv", "summary.csv"):
        lines = (out / name).read_text().splitlines()
        assert lines[0].startswith("# dotattn train-erm; provenance: ")
        json.loads(lines[0].split("provenance: ", 1)[1])
        assert not any("#" in ln for ln in lines[1:])
        rows = list(csv.DictReader(ln for ln in lines if not ln.startswith("#")))
        assert len(rows) == (4 if name == "runs.csv" else 3)


@SHARED
def test_rank_one_runs_are_never_mixed(erm_run):
    out, _ = erm_run
    rows = list(csv.DictReader(ln for ln in (out / "runs.csv").open() if not ln.startswith("#")))
    assert {r["branch"] for r in rows} <= {"positional", "semantic", "uninformative"}


def test_erm_restarts_explains_pooled_rows_and_defaults_to_auto(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "rs"
    proc = run(
        "erm-restarts",
        "--d",
        "12",
        "--seeds",
        "2",
        "--random",
        "1",
        "--semantic",
        "1",
        "--steps",
        "50",
        "--test-samples",
        "20",
        "--threads",
        "1",
        "--out",
        str(out),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(ln.split()[:1] == ["all"] for ln in lines) and not any(ln.split()[:1] == ["-1"] for ln in lines)
    assert "seed 'all': the seeds pooled per branch, written as seed = -1" in proc.stdout
    meta = json.loads((out / "summary.json").read_text())
    assert meta["provenance"]["parameters"]["cli"]["device"] == "auto"
    assert "-1: every seed of the branch pooled" in meta["columns"]["seed"]


def test_readme_examples_write_into_ignored_paths_and_cite_the_paper():
    readme = (ROOT / "README.md").read_text()
    commands = readme.split("## Commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    outs = re.findall(r"--out\s+(\S+)", commands)
    assert outs and all(o.startswith("dotattn-output/") for o in outs), outs
    assert "/dotattn-output/" in (ROOT / ".gitignore").read_text().split()
    for text in (readme, (ROOT / "docs" / "theory.md").read_text()):
        assert "arXiv:2402.03902" in text and "Cui" in text and "Zdeborová" in text
