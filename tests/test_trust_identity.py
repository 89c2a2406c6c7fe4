"""A folder's identity (issue 46): the manifest lists plain names of a known manifest_version, every data
file of the folder is listed, the manifest's ``made_for`` is what the folder's own files say it was made
for (every kind, through the registry), the files agree with each other, and ``verify --seal`` refuses
what ``verify`` would refuse. Each test tampers with a copy of a committed folder (reads files only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from clitools import run

from dotattn.core.io import MANIFEST_NAME, IntegrityError, sha256_file
from dotattn.verify import registered_kinds, seal_folder, verify_folder

RESULTS = Path(__file__).resolve().parent.parent / "results"

ONE_PER_KIND = {
    "phase-diagram": "general/L2_r2_rt1/phase_diagram",
    "rsb": "rsb/toy_omega0.1_alpha0.75",
    "complexity": "rsb/complexity_omega0.1",
    "erm": "erm/finite_size/d100",
    "restarts": "general/toy_restarts/lambda1_d250",
    "comparison": "erm/comparison_omega0.3_d1000",
    "alpha-c": "variants/untied_d500_1000",
    "variants": "variants/figure",
    "landscape": "landscape",
    "aim-state-evolution": "aim/se_hardmax_rho1",
    "aim-algorithms": "aim/amp_hardmax_d100_rho0.5_T2",
    "aim-free-entropy": "aim/fe_hardmax_rho0.1",
    "paths-theory": "paths/markov",
    "paths-sample": "paths/markov/collapsed_N10",
    "paths-images": "paths/omniglot",
    "paths-networks": "paths/omniglot_networks",
}


def test_every_kind_has_a_committed_folder_here():
    assert set(ONE_PER_KIND) == set(registered_kinds())


def copy_folder(rel: str, tmp_path: Path) -> Path:
    """The committed folder's own files (not the folders below it) copied into ``tmp_path``."""
    src, dst = RESULTS / rel, tmp_path / Path(rel).name
    dst.mkdir()
    for p in src.iterdir():
        if p.is_file():
            shutil.copy2(p, dst / p.name)
    return dst


def edit_manifest(folder: Path, change) -> None:
    man = json.loads((folder / MANIFEST_NAME).read_text())
    change(man)
    (folder / MANIFEST_NAME).write_text(json.dumps(man))


def reseal_entry(folder: Path, name: str) -> None:
    """Recompute a file's SHA-256 and size in the manifest (a forger's edit)."""

    def change(man):
        man["files"][name]["sha256"] = sha256_file(folder / name)
        man["files"][name]["bytes"] = (folder / name).stat().st_size

    edit_manifest(folder, change)


def refused(folder: Path, match: str) -> None:
    with pytest.raises(IntegrityError, match=match):
        verify_folder(folder)


def first_leaf(d: dict) -> tuple[list[str], object]:
    """The path to the first number or string of a nested dict (made_for), skipping setting-free keys."""
    for k, v in d.items():
        if k in ("command", "device", "quiet", "workers", "threads", "sampler_library"):
            continue
        if isinstance(v, dict):
            sub = first_leaf(v)
            if sub[0]:
                return [k, *sub[0]], sub[1]
        elif isinstance(v, (int, float, str)) and not isinstance(v, bool):
            return [k], v
    return [], None


@pytest.mark.parametrize("kind", sorted(ONE_PER_KIND))
def test_committed_folder_verifies(kind, tmp_path):
    assert verify_folder(copy_folder(ONE_PER_KIND[kind], tmp_path)) == kind


@pytest.mark.parametrize("kind", sorted(ONE_PER_KIND))
def test_edited_made_for_fails_for_every_kind(kind, tmp_path):
    folder = copy_folder(ONE_PER_KIND[kind], tmp_path)
    keys, value = first_leaf(json.loads((folder / MANIFEST_NAME).read_text())["made_for"])
    assert keys, kind
    new = value + 1 if isinstance(value, (int, float)) else f"{value}x"

    def change(man):
        node = man["made_for"]
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = new

    edit_manifest(folder, change)
    refused(folder, "made_for says|the manifest")  # the aim kinds name the setting in their own words


@pytest.mark.parametrize("kind", sorted(ONE_PER_KIND))
def test_deleted_made_for_field_fails_for_every_kind(kind, tmp_path):
    folder = copy_folder(ONE_PER_KIND[kind], tmp_path)
    keys, _ = first_leaf(json.loads((folder / MANIFEST_NAME).read_text())["made_for"])

    def change(man):
        node = man["made_for"]
        for k in keys[:-1]:
            node = node[k]
        del node[keys[-1]]

    edit_manifest(folder, change)
    refused(folder, "made_for has .* = missing|the manifest")  # the aim kinds name the setting in their own words


@pytest.mark.parametrize(
    ("rel", "keys", "value", "match"),
    [
        ("variants/theory_untied", ("problem", "student"), "tied", "problem.student = tied"),
        ("variants/untied_d500_1000", ("problem", "student"), "tied", "problem.student = tied"),
        ("general/L2_r2_rt1/phase_diagram", ("problem", "L"), 3, "problem.L = 3"),
        ("erm/finite_size/d100", ("problem", "L"), 3, "problem.L = 3"),
        ("variants/theory_correlated0.3", ("problem", "token_correlation"), None, "token_correlation = missing"),
        ("variants/correlated0.3_d500_1000", ("problem", "token_correlation"), None, "token_correlation = missing"),
    ],
)
def test_the_probes_made_for_edits_fail(rel, keys, value, match, tmp_path):
    folder = copy_folder(rel, tmp_path)

    def change(man):
        node = man["made_for"]
        for k in keys[:-1]:
            node = node[k]
        if value is None:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value

    edit_manifest(folder, change)
    refused(folder, match)


@pytest.mark.parametrize("kind", sorted(ONE_PER_KIND))
def test_unknown_file_fails_for_every_kind(kind, tmp_path):
    folder = copy_folder(ONE_PER_KIND[kind], tmp_path)
    (folder / "extra.csv").write_text("a\n1\n")
    refused(folder, "extra.csv: not listed in manifest.json")


@pytest.mark.parametrize("kind", sorted(ONE_PER_KIND))
def test_file_dropped_from_the_manifest_fails(kind, tmp_path):
    folder = copy_folder(ONE_PER_KIND[kind], tmp_path)
    listed = json.loads((folder / MANIFEST_NAME).read_text())["files"]
    required = registered_kinds()[kind].files
    name = next((n for n in sorted(listed) if n not in required), None) or sorted(listed)[0]
    edit_manifest(folder, lambda man: man["files"].pop(name))
    with pytest.raises(IntegrityError, match=name.replace(".", r"\.")):
        verify_folder(folder)


def test_notes_may_stay_out_of_the_manifest(tmp_path):
    folder = copy_folder(ONE_PER_KIND["erm"], tmp_path)
    (folder / "README.md").write_text("how this was made\n")
    (folder / "wall.txt").write_text("12 s\n")
    assert verify_folder(folder) == "erm"


@pytest.mark.parametrize("version", [99, 0, "1", True, None])
def test_unknown_manifest_version_fails(version, tmp_path):
    folder = copy_folder(ONE_PER_KIND["rsb"], tmp_path)
    edit_manifest(folder, lambda man: man.__setitem__("manifest_version", version))
    refused(folder, "manifest_version")


@pytest.mark.parametrize("name", ["../rsb.json", "sub/rsb.json", "/etc/passwd", ".hidden", "", MANIFEST_NAME])
def test_only_plain_names_in_a_manifest(name, tmp_path):
    folder = copy_folder(ONE_PER_KIND["rsb"], tmp_path)
    edit_manifest(folder, lambda man: man["files"].__setitem__(name, man["files"]["rsb.json"]))
    refused(folder, "not a plain file name")


def test_listed_file_of_another_kind_fails(tmp_path):
    folder = copy_folder(ONE_PER_KIND["rsb"], tmp_path)
    (folder / "extra.csv").write_text("a\n1\n")
    edit_manifest(
        folder,
        lambda man: man["files"].__setitem__(
            "extra.csv", {"sha256": sha256_file(folder / "extra.csv"), "bytes": 4, "rows": 1}
        ),
    )
    refused(folder, "lists extra.csv, which is not a file of a rsb folder")


def test_rsb_json_swapped_from_another_rsb_folder_fails(tmp_path):
    folder = copy_folder(ONE_PER_KIND["rsb"], tmp_path)
    shutil.copy(RESULTS / "rsb/toy_omega0.1_alpha0.75_outer8/rsb.json", folder / "rsb.json")
    reseal_entry(folder, "rsb.json")
    refused(folder, "made_for says options.outer_order")


def test_variants_summary_against_rows(tmp_path):
    folder = copy_folder(ONE_PER_KIND["variants"], tmp_path)
    summary = json.loads((folder / "summary.json").read_text())
    row = summary["points"][0]
    key = next(k for k, v in row.items() if isinstance(v, float))
    row[key] = row[key] * 1.5 + 0.1
    (folder / "summary.json").write_text(json.dumps(summary))
    reseal_entry(folder, "summary.json")
    refused(folder, "point 1 differs from row 1 of variants.csv")


def _cut_last_row(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))


def test_sample_summary_against_draws(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-sample"], tmp_path)
    meta = json.loads((folder / "sample.json").read_text())
    meta["U_sampled"][0][0] *= 1.01
    (folder / "sample.json").write_text(json.dumps(meta))
    reseal_entry(folder, "sample.json")
    refused(folder, "U_sampled is not the mean of the draws")


@pytest.mark.parametrize("ess", [-6127.0, 0.0])
def test_negative_ess_fails(ess, tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-sample"], tmp_path)
    meta = json.loads((folder / "sample.json").read_text())
    meta["diagnostics"]["ess_min"] = ess
    meta["diagnostics"]["ess_U"][0][0] = ess
    (folder / "sample.json").write_text(json.dumps(meta))
    reseal_entry(folder, "sample.json")
    refused(folder, "is not a positive number")


# ---------------------------------------------------------------------------------------------------
# verify --seal: a folder without a manifest is sealed only when it would verify
# ---------------------------------------------------------------------------------------------------
def unsealed(kind: str, tmp_path: Path) -> Path:
    folder = copy_folder(ONE_PER_KIND[kind], tmp_path)
    (folder / MANIFEST_NAME).unlink()
    return folder


def test_seal_lists_every_file_of_the_kind(tmp_path):
    folder = unsealed("paths-images", tmp_path)
    seal_folder(folder)
    listed = json.loads((folder / MANIFEST_NAME).read_text())["files"]
    assert "gd_network.npz" in listed
    assert verify_folder(folder) == "paths-images"


def test_seal_refuses_an_unknown_file(tmp_path):
    folder = unsealed("erm", tmp_path)
    (folder / "extra.csv").write_text("a\n1\n")
    with pytest.raises(IntegrityError, match="extra.csv: not a file of a erm folder"):
        seal_folder(folder)
    assert not (folder / MANIFEST_NAME).exists()


def test_seal_refuses_a_cut_crossings_csv(tmp_path):
    folder = unsealed("alpha-c", tmp_path)
    _cut_last_row(folder / "crossings.csv")
    with pytest.raises(IntegrityError, match="crossings.csv"):
        seal_folder(folder)


def test_seal_refuses_a_half_row_of_crossings_csv(tmp_path):
    """A row cut in the middle (the probe's TypeError in read_alpha_c_part): one line, the file named."""
    folder = unsealed("alpha-c", tmp_path)
    text = (folder / "crossings.csv").read_text()
    (folder / "crossings.csv").write_text(text[: len(text) - 40])
    with pytest.raises(IntegrityError, match="crossings.csv"):
        seal_folder(folder)


def test_seal_refuses_a_delta_csv_from_another_study(tmp_path):
    folder = unsealed("alpha-c", tmp_path)
    shutil.copy(RESULTS / "variants/correlated0.3_d500_1000/delta.csv", folder / "delta.csv")
    with pytest.raises(IntegrityError):
        seal_folder(folder)


def test_seal_refuses_a_deleted_phase_diagram_row(tmp_path):
    """The selected row of one grid point removed (other branches still there)."""
    folder = unsealed("phase-diagram", tmp_path)
    path = folder / "phase_diagram.csv"
    lines = path.read_text().splitlines(keepends=True)
    header = next(i for i, ln in enumerate(lines) if not ln.startswith("#"))
    col = lines[header].rstrip("\n").split(",").index("selected")
    import csv

    rows = list(csv.reader(lines[header + 1 :]))
    k = next(i for i, r in enumerate(rows) if r[col] == "True" and r[1] == "1.0")
    del lines[header + 1 + k]
    path.write_text("".join(lines))
    with pytest.raises(IntegrityError, match="none selected"):
        seal_folder(folder)


def test_verify_seal_cli_refuses_in_one_line(tmp_path):
    folder = unsealed("erm", tmp_path)
    (folder / "extra.csv").write_text("a\n1\n")
    r = run("verify", "--seal", str(folder))
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "extra.csv" in r.stderr
    assert not (folder / MANIFEST_NAME).exists()


def test_one_chain_ess_is_not_computable():
    """numpyro's ESS of one chain came out as -6127 on a collapsed run (issue 46): reported as not
    computable (NaN, null in sample.json, so the run is not converged), never as a number."""
    pytest.importorskip("numpyro")
    import numpy as np

    from dotattn.paths.sampler import bulk_ess, ess_min_of

    rng = np.random.default_rng(0)
    one = np.cumsum(rng.standard_normal((1, 400, 2, 2)), axis=1)  # a random walk: strongly autocorrelated
    assert np.all(np.isnan(bulk_ess(one)))
    assert np.isnan(ess_min_of(bulk_ess(one)))
    two = rng.standard_normal((2, 400, 2, 2))
    ess = bulk_ess(two)
    assert np.all(ess > 0) and ess_min_of(ess) == float(np.min(ess))


def _edit_csv_cell(path: Path, row: int, column: str, change) -> None:
    """Change one cell of data row ``row`` (0-based) of a dotattn CSV, keeping its comment lines."""
    import csv
    import io

    lines = path.read_text().splitlines(keepends=True)
    head = [ln for ln in lines if ln.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("".join(ln for ln in lines if not ln.startswith("#")))))
    rows[row][column] = change(rows[row][column])
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text("".join(head) + buf.getvalue())


@pytest.mark.parametrize(
    ("column", "change", "match"),
    [
        ("train_loss_mean", lambda v: repr(float(v) * 1.001), "not the mean of its runs"),
        ("converged", lambda v: str(int(v) + 1), "runs.csv has"),
        ("runs", lambda v: str(int(v) - 1), "runs.csv has"),
    ],
)
def test_erm_summary_csv_against_runs_csv(column, change, match, tmp_path):
    folder = copy_folder(ONE_PER_KIND["erm"], tmp_path)
    _edit_csv_cell(folder / "summary.csv", 0, column, change)
    reseal_entry(folder, "summary.csv")
    refused(folder, match)


def test_include_of_a_cut_crossings_csv_is_one_line(tmp_path):
    """The probe: variants and erm-alpha-c --include on a folder whose crossings.csv was cut mid-row (its
    manifest entry recomputed) raised a TypeError in read_alpha_c_part."""
    from dotattn.core.io import csv_data_rows
    from dotattn.theory_vs_erm.output import read_alpha_c_part

    folder = copy_folder(ONE_PER_KIND["alpha-c"], tmp_path)
    text = (folder / "crossings.csv").read_text()
    (folder / "crossings.csv").write_text(text[: len(text) - 40])
    reseal_entry(folder, "crossings.csv")
    edit_manifest(
        folder, lambda man: man["files"]["crossings.csv"].__setitem__("rows", csv_data_rows(folder / "crossings.csv"))
    )
    with pytest.raises(IntegrityError, match="crossings.csv"):
        read_alpha_c_part(folder)
    r = run(
        "variants",
        "--theory",
        f"tied={RESULTS / 'phase_diagram'}",
        "--erm",
        f"cut={folder}",
        "--baseline",
        "tied",
        "--out",
        str(tmp_path / "v"),
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and "crossings.csv" in r.stderr


def test_paths_theory_heads_csv_against_summary(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-theory"], tmp_path)
    _edit_csv_cell(folder / "heads.csv", 0, "accuracy_pruned", lambda v: repr(float(v) + 0.01))
    reseal_entry(folder, "heads.csv")
    refused(folder, "heads.csv: row 1: accuracy_pruned")


def test_paths_theory_summary_accuracy_against_points(tmp_path):
    folder = copy_folder(ONE_PER_KIND["paths-theory"], tmp_path)
    meta = json.loads((folder / "summary.json").read_text())
    first = next(iter(meta["per_N"]))
    meta["per_N"][first]["accuracy_theory"] += 0.01
    (folder / "summary.json").write_text(json.dumps(meta))
    reseal_entry(folder, "summary.json")
    refused(folder, "accuracy_theory at N")
