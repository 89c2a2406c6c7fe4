"""Every writing command goes through the one output-folder path before computing (issue 46): `solve
--rsb 1 --out` and `aim figure --out` included; phase-diagram, train-erm and erm-alpha-c refuse a finished
folder made for other settings; options that were silently ignored are refused in one line (exit 2)."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
from clitools import run

from dotattn.core.io import MANIFEST_NAME

RESULTS = Path(__file__).resolve().parent.parent / "results"
RSB = RESULTS / "rsb/toy_omega0.1_alpha0.75"
PD = RESULTS / "general/L2_r2_rt1/phase_diagram"
SE = RESULTS / "aim/se_hardmax_rho1"


def one_line(r) -> str:
    """The refusal: exit status 2, one line on stderr, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def copy_files(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file():
            shutil.copy2(p, dst / p.name)
    return dst


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


# the committed toy rsb folder's settings (omega 0.1, alpha 0.75, outer/inner 6/4 default rules)
SOLVE = ("solve", "--alpha", "0.75", "--omega", "0.1", "--rsb", "1")


def test_solve_rsb_out_unwritable_refused_before_computing(tmp_path):
    r = run(*SOLVE, "--out", "/proc/dotattn-x")
    assert "cannot be written" in one_line(r) and r.stdout == ""  # no RS table: nothing was computed


def test_solve_rsb_out_into_another_commands_folder_refused(tmp_path):
    folder = copy_files(PD, tmp_path / "pd")
    before = snapshot(folder)
    line = one_line(run(*SOLVE, "--out", str(folder)))
    assert "another command's output" in line and "phase-diagram" in line
    assert snapshot(folder) == before


def test_solve_rsb_out_finished_run_of_other_settings_refused(tmp_path):
    folder = copy_files(RSB, tmp_path / "rsb")
    before = snapshot(folder)
    line = one_line(run("solve", "--alpha", "0.8", "--omega", "0.1", "--rsb", "1", "--out", str(folder)))
    assert "other settings" in line and "alpha = 0.75 there, 0.8 now" in line
    assert snapshot(folder) == before


def test_solve_rsb_out_locked_folder_refused(tmp_path):
    out = tmp_path / "rsb"
    out.mkdir()
    (out / ".dotattn.lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")  # this live process holds it
    assert "in use by another run" in one_line(run(*SOLVE, "--out", str(out)))


def test_aim_figure_out_unwritable_names_out(tmp_path):
    line = one_line(run("aim", "figure", "--from", str(SE), "--out", "/proc/dotattn-x/f.png"))
    assert "--out" in line and "cannot be written" in line and ".tmp" not in line


def test_aim_figure_out_into_a_dotattn_folder_refused(tmp_path):
    folder = copy_files(SE, tmp_path / "se")
    before = snapshot(folder)
    line = one_line(run("aim", "figure", "--from", str(SE), "--out", str(folder / "mmse.png")))
    assert "--out" in line and MANIFEST_NAME in line
    assert snapshot(folder) == before


def test_aim_figure_out_folder_left_clean_when_refused(tmp_path):
    out = tmp_path / "new" / "sub" / "f.png"
    bad = tmp_path / "not-a-folder"
    bad.write_text("x")
    one_line(run("aim", "figure", "--from", str(bad), "--out", str(out)))
    assert not (tmp_path / "new").exists()


TINY_PD = ("phase-diagram", "--omega", "0.2,0.3", "--alpha", "1,1.5", "--quad-order", "4", "--coarse-order", "2")


def test_phase_diagram_refuses_a_finished_run_of_other_settings(tmp_path):
    folder = copy_files(PD, tmp_path / "pd")
    before = snapshot(folder)
    line = one_line(run(*TINY_PD, "--out", str(folder), "--quiet"))
    assert "other settings" in line
    assert snapshot(folder) == before and not (folder / "cache").exists()


def test_phase_diagram_of_correlated_tokens_into_an_untied_folder_refused(tmp_path):
    folder = copy_files(RESULTS / "variants/theory_untied", tmp_path / "pd")
    line = one_line(
        run(
            "phase-diagram",
            "--omega",
            "0.05",
            "--alpha",
            "0.2",
            "--token-correlation",
            "0.2",
            "--out",
            str(folder),
        )
    )
    assert "other settings" in line


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            ("train-erm", "--d", "20", "--alpha", "1", "--value-rank", "2"),
            "value-rank is only used with --value low-rank",
        ),
        (("erm-alpha-c", "--value-rank", "2", "--value", "scalar"), "value-rank is only used with --value low-rank"),
    ],
)
def test_value_rank_without_low_rank_refused(args, match, tmp_path):
    out = tmp_path / "out"
    assert match in one_line(run(*args, "--out", str(out)))
    assert not out.exists()


def test_erm_alpha_c_value_with_a_phase_diagram_refused(tmp_path):
    out = tmp_path / "out"
    line = one_line(
        run("erm-alpha-c", "--value", "scalar", "--phase-diagram", str(RESULTS / "phase_diagram"), "--out", str(out))
    )
    assert "--phase-diagram" in line and "V = I" in line and not out.exists()


def test_erm_alpha_c_untied_with_a_tied_phase_diagram_refused_before_training(tmp_path):
    out = tmp_path / "out"
    line = one_line(
        run(
            "erm-alpha-c",
            "--student",
            "untied",
            "--omega",
            "0.1",
            "--d",
            "20",
            "--alpha",
            "0.5,1.0",
            "--seeds",
            "2",
            "--phase-diagram",
            str(RESULTS / "phase_diagram"),
            "--out",
            str(out),
        )
    )
    assert "--phase-diagram" in line and not out.exists()


def test_train_erm_refuses_a_finished_run_of_other_settings(tmp_path):
    out = tmp_path / "erm"
    args = ("train-erm", "--d", "20", "--alpha", "1", "--seeds", "1", "--steps", "20", "--test-samples", "100")
    r = run(*args, "--threads", "1", "--quiet", "--out", str(out))
    assert r.returncode == 0, r.stderr
    before = snapshot(out)
    assert "problem.sigma = 0.5 there, 0.4 now" in one_line(run(*args, "--sigma", "0.4", "--out", str(out)))
    assert "erm.value = missing there, scalar now" in one_line(run(*args, "--value", "scalar", "--out", str(out)))
    assert snapshot(out) == before
    r = run(*args, "--threads", "2", "--quiet", "--out", str(out))  # threads do not change the run: rerun
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------------------------------
# options that were silently ignored or wrong
# ---------------------------------------------------------------------------------------------------
def test_variants_d_max_below_every_study_refused(tmp_path):
    out = tmp_path / "v"
    line = one_line(
        run(
            "variants",
            "--theory",
            f"tied={RESULTS / 'phase_diagram'}",
            "--erm",
            f"tied={RESULTS / 'alpha_c_erm'}",
            "--baseline",
            "tied",
            "--d-max",
            "10",
            "--out",
            str(out),
        )
    )
    assert "d-max = 10" in line and "alpha_c_erm" in line and not out.exists()


def test_paths_theory_repeated_subset_refused(tmp_path):
    out = tmp_path / "t"
    line = one_line(run("paths", "theory", "--subsets", "all,all", "--N", "10", "--out", str(out)))
    assert "'all' is given twice" in line and not out.exists()


def test_paths_theory_config_refuses_a_repeated_subset():
    from dotattn.core.validation import ParameterError
    from dotattn.paths.study import StudyConfig
    from dotattn.paths.task import MarkovTask

    with pytest.raises(ParameterError, match="each network once"):
        StudyConfig(task=MarkovTask(), widths=(10.0,), subsets=("all", "good", "all"))


def test_images_sample_P_above_P_refused():
    from dotattn.core.validation import ParameterError
    from dotattn.paths.images_study import ImageStudyConfig

    with pytest.raises(ParameterError, match="sample-P must be at most P = 10"):
        ImageStudyConfig(omniglot="o", fashion_mnist="f", P=10, sample_N=10, sample_P=20)
    assert ImageStudyConfig(omniglot="o", fashion_mnist="f", P=10, sample_N=0, sample_P=20).sample_P == 20


# ---------------------------------------------------------------------------------------------------
# a trained network or a checkpoint that is cut short, garbage or edited: one line naming it, retrained
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def images_config():
    pytest.importorskip("torch")
    from dotattn.paths.images_study import ImageStudyConfig

    return ImageStudyConfig(omniglot="o", fashion_mnist="f")


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_unreadable_gd_network_is_named_and_retrained(damage, images_config, tmp_path, capsys):
    from dotattn.paths.images_study import GD_FILE, _read_gd

    path = tmp_path / GD_FILE
    good = (RESULTS / "paths/omniglot" / GD_FILE).read_bytes()
    path.write_bytes({"truncated": good[: len(good) // 2], "garbage": b"\x00garbage" * 100, "empty": b""}[damage])
    assert _read_gd(path, images_config) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and GD_FILE in err[0] and "unreadable" in err[0]


def test_edited_gd_network_of_a_finished_study_is_not_reused(images_config, tmp_path, capsys):
    from dotattn.paths.images_study import GD_FILE, _read_gd

    folder = copy_files(RESULTS / "paths/omniglot", tmp_path / "omniglot")
    assert _read_gd(folder / GD_FILE, images_config) is None  # unchanged: read, made for other settings
    assert capsys.readouterr().err == ""
    with open(folder / GD_FILE, "ab") as fh:
        fh.write(b"\x00")
    assert _read_gd(folder / GD_FILE, images_config) is None
    err = capsys.readouterr().err
    assert GD_FILE in err and "manifest.json" in err


@pytest.mark.parametrize("content", [b"", b"not a pickle at all", b"\x80\x04\x95"])
def test_unreadable_gd_checkpoint_is_named_and_training_starts_afresh(content, tmp_path, capsys):
    pytest.importorskip("torch")
    from dotattn.paths.images_gd import CHECKPOINT_NAME, _read_checkpoint

    path = tmp_path / CHECKPOINT_NAME
    path.write_bytes(content)
    assert _read_checkpoint(path) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and CHECKPOINT_NAME in err[0]


def test_sigint_at_startup_of_train_erm_leaves_no_traceback(tmp_path):
    """SIGINT sent at once after the start (the probe: within the first 0.4 s, a KeyboardInterrupt
    traceback): killed by the signal before Python's handler exists, or one line and 130; no folder."""
    import signal
    import subprocess

    from clitools import ENV, dotattn_command

    out = tmp_path / "erm"
    proc = subprocess.Popen(
        [*dotattn_command(), "train-erm", "--d", "20", "--alpha", "1", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert not out.exists()


def test_keyboard_interrupt_before_the_handlers_is_one_line(monkeypatch, capsys):
    """The same path in process: a KeyboardInterrupt raised before a command installs its handlers."""
    from dotattn.cli import main as cli_main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main.cli, "main", interrupted)
    with pytest.raises(SystemExit) as exc:
        cli_main.main(["train-erm"])
    assert exc.value.code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "interrupted" in err[0]


def test_train_erm_blown_up_runs_are_diverged_and_the_folder_verifies(tmp_path):
    """--lr 1e6 blew the risk up to 1e238 (finite) within 30 steps; the run exited 0 with rows its own
    verify refused. Such runs are diverged (risk above DIVERGENCE_RISK) and their rows are read as such."""
    from dotattn.core.io import read_csv
    from dotattn.verify import verify_folder

    out = tmp_path / "erm"
    r = run(
        "train-erm",
        "--student",
        "untied",
        "--lr",
        "1e6",
        "--d",
        "20",
        "--alpha",
        "1",
        "--seeds",
        "2",
        "--steps",
        "30",
        "--test-samples",
        "200",
        "--threads",
        "1",
        "--quiet",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert {row["status"] for row in read_csv(out / "runs.csv")} == {"diverged"}
    assert verify_folder(out) == "erm"


@pytest.mark.parametrize("existed", [False, True])
def test_output_folder_removes_an_empty_cache_made_by_a_stopped_run(existed, tmp_path):
    """A run stopped before its first unit (phase-diagram, erm-alpha-c) left OUT/ with an empty cache/:
    the folders it made inside are removed while empty, then OUT itself if this run made it."""
    from dotattn.cli.options import output_folder

    from dotattn.core.runner import Interrupted

    out = tmp_path / "out"
    if existed:
        out.mkdir()
        (out / "README.md").write_text("kept\n")
    with pytest.raises(Interrupted), output_folder(str(out), "phase-diagram", "phase-diagram") as folder:
        (folder / "cache").mkdir()
        raise Interrupted(2, "stopped")
    if existed:
        assert sorted(p.name for p in out.iterdir()) == ["README.md"]
    else:
        assert not out.exists()
