"""issue 46, the rest: cross-file checks for restarts, comparison and paths-images folders, and ``verify
--strict``, which also re-derives what is cheap to recompute per kind. Each forgery edits files consistently
with the manifest (SHA-256 recomputed): the cross-file ones fail the default verify; the strict ones pass it
(every file the default check reads agrees) and fail --strict (a re-derived quantity does not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import run
from test_trust_identity import ONE_PER_KIND, RESULTS, _edit_csv_cell, copy_folder, reseal_entry

from dotattn.core.io import IntegrityError
from dotattn.verify import verify_folder


def edit_json(folder: Path, name: str, change) -> None:
    obj = json.loads((folder / name).read_text())
    change(obj)
    (folder / name).write_text(json.dumps(obj, indent=2))
    reseal_entry(folder, name)


def edit_cell(folder: Path, name: str, row: int, column: str, change) -> None:
    _edit_csv_cell(folder / name, row, column, change)
    reseal_entry(folder, name)


def refused(folder: Path, match: str, strict: bool = False) -> None:
    with pytest.raises(IntegrityError, match=match):
        verify_folder(folder, strict=strict)


def strict_only(folder: Path, match: str) -> None:
    """The forgery passes the default verify and fails --strict."""
    verify_folder(folder)
    refused(folder, match, strict=True)


def csv_rows(path: Path) -> list[dict[str, str]]:
    from dotattn.core.io import read_csv

    return read_csv(path)


def bump(v: str) -> str:
    return repr(float(v) * 1.01 + 1e-3)


# ---------------------------------------------------------------- cross-file checks (default verify)


def test_restarts_pairs_csv_against_runs_csv(tmp_path):
    folder = copy_folder(ONE_PER_KIND["restarts"], tmp_path)
    edit_cell(folder, "pairs.csv", 0, "train_loss_diff", bump)
    refused(folder, "train_loss_diff")


def test_restarts_summary_json_runs_against_runs_csv(tmp_path):
    folder = copy_folder(ONE_PER_KIND["restarts"], tmp_path)
    edit_cell(folder, "runs.csv", 0, "test_error", bump)  # runs.csv alone: summary.json's runs disagree
    refused(folder, "runs entry 1: test_error")


def test_restarts_summary_counts_against_runs(tmp_path):
    folder = copy_folder(ONE_PER_KIND["restarts"], tmp_path)
    edit_cell(folder, "summary.csv", 0, "converged", lambda v: str(int(v) - 1))
    edit_json(folder, "summary.json", lambda m: m["summary"][0].update(converged=m["summary"][0]["converged"] - 1))
    refused(folder, "runs.csv and pairs.csv have")


def test_comparison_csv_against_json_table(tmp_path):
    folder = copy_folder(ONE_PER_KIND["comparison"], tmp_path)
    edit_cell(folder, "comparison.csv", 0, "erm_test_error_mean", bump)
    refused(folder, "table row 1: erm_test_error_mean")


def test_comparison_theory_column_against_theory_points(tmp_path):
    folder = copy_folder(ONE_PER_KIND["comparison"], tmp_path)
    edit_cell(folder, "comparison.csv", 0, "theory_q_trace", bump)
    edit_json(
        folder,
        "comparison.json",
        lambda m: m["table"][0].update(theory_q_trace=m["table"][0]["theory_q_trace"] * 1.01 + 1e-3),
    )
    refused(folder, "theory_q_trace")


@pytest.mark.parametrize(
    ("name", "column", "match"),
    [
        ("points.csv", "accuracy", r"per_N\[.*\]\.accuracy"),
        ("selection.csv", "loss", "validation accuracy and loss"),
        ("fixed_temperature.csv", "accuracy", "fixed_temperature is not"),
        ("heads.csv", "gd_accuracy_pruned_test", "heads entry 1 differs"),
    ],
)
def test_images_summary_against_csvs(name, column, match, tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-images"], tmp_path)
    row = 0
    if name == "selection.csv":  # the row per_N reads: the GP's at its chosen temperature
        T = json.loads((folder / "summary.json").read_text())["per_N"]["gp"]["temperature"]
        row = next(
            i for i, r in enumerate(csv_rows(folder / name)) if r["method"] == "gp" and float(r["temperature"]) == T
        )
    edit_cell(folder, name, row, column, lambda v: repr(float(v) * 0.9))
    refused(folder, match)


def test_images_heads_drop_against_pruning(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-images"], tmp_path)
    edit_cell(folder, "heads.csv", 0, "gd_drop_test", bump)
    edit_json(
        folder, "summary.json", lambda m: m["heads"][0].update(gd_drop_test=m["heads"][0]["gd_drop_test"] * 1.01 + 1e-3)
    )
    refused(folder, "gd_drop_test is not pruning")


def test_images_epochs_against_history(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-images"], tmp_path)
    edit_json(folder, "summary.json", lambda m: m["gd"].update(epochs_run=m["gd"]["epochs_run"] + 1))
    refused(folder, "epochs_run")


# ---------------------------------------------------------------- verify --strict


def test_committed_folders_verify_strict():
    for kind in ONE_PER_KIND:
        assert verify_folder(RESULTS / ONE_PER_KIND[kind], strict=True) == kind


def test_strict_erm_summary_std(tmp_path):
    folder = copy_folder(ONE_PER_KIND["erm"], tmp_path)
    edit_cell(folder, "summary.csv", 0, "test_error_std", bump)
    strict_only(folder, "test_error_std .* recomputed from runs.csv")


def test_strict_restarts_summary_statistics(tmp_path):
    folder = copy_folder(ONE_PER_KIND["restarts"], tmp_path)
    edit_cell(folder, "summary.csv", 0, "train_loss_max", bump)
    edit_json(
        folder,
        "summary.json",
        lambda m: m["summary"][0].update(train_loss_max=m["summary"][0]["train_loss_max"] * 1.01 + 1e-3),
    )
    strict_only(folder, "train_loss_max .* recomputed from runs.csv and pairs.csv")


def test_strict_comparison_agrees(tmp_path):
    folder = copy_folder(ONE_PER_KIND["comparison"], tmp_path)
    flip = {"True": "False", "False": "True"}
    edit_cell(folder, "comparison.csv", 0, "agrees", lambda v: flip[v])
    edit_json(folder, "comparison.json", lambda m: m["table"][0].update(agrees=not m["table"][0]["agrees"]))
    strict_only(folder, "agrees = .* recomputed at tolerance")


def test_strict_comparison_rel_diff(tmp_path):
    folder = copy_folder(ONE_PER_KIND["comparison"], tmp_path)
    edit_cell(folder, "comparison.csv", 0, "test_error_abs_diff", bump)
    edit_json(
        folder,
        "comparison.json",
        lambda m: m["table"][0].update(test_error_abs_diff=m["table"][0]["test_error_abs_diff"] * 1.01 + 1e-3),
    )
    strict_only(folder, "test_error's differences")


def test_strict_phase_diagram_refined_alpha_c(tmp_path):
    folder = copy_folder("phase_diagram", tmp_path)

    def change(m):
        col = m["omegas"][0]
        col["refined"]["alpha_c"]["alpha"] += 0.01
        col["alpha_c"] = col["refined"]["alpha_c"]["alpha"]

    edit_json(folder, "summary.json", change)
    strict_only(folder, "not the mean and standard error of its 8 roots")


def test_strict_phase_diagram_bracketing(tmp_path):
    folder = copy_folder("phase_diagram", tmp_path)
    # a positional -> semantic boundary moved one grid cell up, in summary.json and boundaries.csv alike
    edit_cell(folder, "boundaries.csv", 1, "alpha", lambda v: repr(float(v) + 0.1))
    edit_json(
        folder,
        "summary.json",
        lambda m: m["omegas"][0]["boundaries"][1].update(alpha=m["omegas"][0]["boundaries"][1]["alpha"] + 0.1),
    )
    strict_only(folder, "do not bracket")


def test_strict_images_selection_rule(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-images"], tmp_path)
    # per_N's GP temperature, points.csv's GP rows and the validation numbers moved together to another
    # temperature of selection.csv: consistent files, but not the temperature the rule picks
    meta = json.loads((folder / "summary.json").read_text())
    sel = [r for r in csv_rows(folder / "selection.csv") if r["method"] == "gp"]
    T0 = meta["per_N"]["gp"]["temperature"]
    other = next(r for r in sel if float(r["temperature"]) != T0)
    T1 = float(other["temperature"])

    def change(m):
        e = m["per_N"]["gp"]
        e.update(temperature=T1, validation_accuracy=float(other["accuracy"]), validation_loss=float(other["loss"]))

    edit_json(folder, "summary.json", change)
    for i, r in enumerate(csv_rows(folder / "points.csv")):
        if r["method"] == "gp":
            _edit_csv_cell(folder / "points.csv", i, "temperature", lambda v: repr(T1))
    reseal_entry(folder, "points.csv")
    strict_only(folder, "the selection rule picks")


def test_strict_images_ranks_and_spearman(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-images"], tmp_path)
    edit_json(folder, "summary.json", lambda m: m["pruning"]["test"].update(spearman_score_vs_theory_drop=0.99))
    strict_only(folder, "spearman_score_vs_theory_drop")


def test_strict_cli_one_line(tmp_path):
    folder = copy_folder(ONE_PER_KIND["erm"], tmp_path)
    edit_cell(folder, "summary.csv", 0, "test_error_std", bump)
    ok = run("verify", str(folder))
    assert ok.returncode == 0, ok.stderr
    r = run("verify", "--strict", str(folder))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "test_error_std" in r.stderr
    r = run("verify", "--recursive", "--strict", str(tmp_path))
    assert r.returncode == 2 and "1 of 1 folders failed" in r.stderr


def test_strict_must_be_a_bool(tmp_path):
    from dotattn.core.validation import ParameterError

    with pytest.raises(ParameterError, match="strict must be a bool"):
        verify_folder(copy_folder(ONE_PER_KIND["erm"], tmp_path), strict="yes")


def test_strict_sample_ess(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-sample"], tmp_path)

    def change(m):  # every ESS doubled: ess_min is still the smallest, the default checks hold
        d = m["diagnostics"]
        d["ess_U"] = [[2 * v for v in row] for row in d["ess_U"]]
        d["ess_min"] = 2 * d["ess_min"]

    edit_json(folder, "sample.json", change)
    strict_only(folder, "diagnostics.ess_U is not what U_draws.csv's draws give")


def test_strict_sample_zscores(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-sample"], tmp_path)
    edit_json(folder, "sample.json", lambda m: m["U_zscores"][0].__setitem__(0, m["U_zscores"][0][0] + 1.0))
    strict_only(folder, "U_zscores is not")


def test_strict_alpha_c_cell_mean(tmp_path):
    folder = copy_folder(ONE_PER_KIND["alpha-c"], tmp_path)
    edit_cell(folder, "cells.csv", 0, "alpha_c", bump)
    strict_only(folder, "alpha_c = .* recomputed from crossings.csv")


@pytest.mark.parametrize("strict", [False, True])
def test_a_missing_field_is_one_line(strict, tmp_path):
    """A summary.json field the cross-file checks read, deleted (SHA recomputed): one IntegrityError line,
    never a KeyError."""
    folder = copy_folder(ONE_PER_KIND["paths-images"], tmp_path)
    edit_json(folder, "summary.json", lambda m: m["pruning"]["test"].pop("theory_accuracy"))
    refused(folder, "cannot be read", strict=strict)
    r = run("verify", *(["--strict"] if strict else []), str(folder))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
