"""The runs of an erm-alpha-c study (starts.csv: overlaps and branch label per start) and the second estimator
(the first + → − change among points where the two starts ended on different branches)."""

from __future__ import annotations

import numpy as np
import pytest

from dotattn.core.io import IntegrityError
from dotattn.core.status import STATUS_CONVERGED
from dotattn.erm.records import BRANCH_M, BRANCH_THETA, run_branch
from dotattn.positional_semantic.problem import Problem
from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, CellRuns, cell_crossings, run_study
from dotattn.theory_vs_erm.alpha_c_starts import KEY_MATRICES

ALPHAS = (0.5, 0.7, 0.9, 1.1, 1.3, 1.5)


def _start(seed: int, alpha: float, init: str, branch: str, loss: float, shift: float) -> dict:
    """A row with overlaps that the labeller puts on ``branch`` (``shift`` keeps the two starts' overlaps apart)."""
    theta = 3 * BRANCH_THETA if branch == "semantic" else 0.1 * BRANCH_THETA
    m = 3 * BRANCH_M if branch == "positional" else 0.1 * BRANCH_M
    row = {
        "omega": 0.3,
        "d": 100,
        "seed": seed,
        "alpha": alpha,
        "init": init,
        "status": STATUS_CONVERGED,
        "train_loss": loss,
        "m": m + shift,
        "branch": branch,
        "mu": [[m + shift], [-m]],
        "theta_over_sigma2": [[theta]],
        "q_over_sigma2": [[1.0 + shift]],
    }
    assert run_branch(np.array(row["theta_over_sigma2"]), np.array(row["mu"])) == branch
    return row


def _cell() -> CellRuns:
    """One seed whose Δe_t changes sign early (0.5 → 0.7 and back at 0.9) while both starts sit on the
    positional branch, then crosses between 1.3 and 1.5 with the starts on different branches."""
    delta = np.array([1e-6, -2e-6, 3e-6, 5e-4, 2e-4, -3e-4])
    labels_sem = ["positional", "positional", "positional", "semantic", "semantic", "semantic"]
    et_pos = 1e-3 * np.array(ALPHAS)
    et_sem = et_pos + delta
    starts = []
    for j, a in enumerate(ALPHAS):
        starts.append(_start(0, a, "semantic", labels_sem[j], float(et_sem[j]), 1e-3))
        starts.append(_start(0, a, "positional", "positional", float(et_pos[j]), 0.0))
    status = np.full((1, len(ALPHAS)), STATUS_CONVERGED, dtype=object)
    return CellRuns(
        omega=0.3,
        d=100,
        alphas=ALPHAS,
        seeds=(0,),
        et_sem=et_sem[None, :],
        et_pos=et_pos[None, :],
        status_sem=status.copy(),
        status_pos=status.copy(),
        same=np.zeros((1, len(ALPHAS)), bool),
        seconds=0.0,
        device="cpu",
        starts=tuple(starts),
    )


def test_the_second_estimator_skips_points_where_both_starts_are_on_one_branch():
    cell = _cell()
    first = cell_crossings(cell, STATUS_CONVERGED)[0]
    second = cell_crossings(cell, STATUS_CONVERGED, by_branch=True)[0]
    assert first.changes == 3 and first.lo == 0.5 and first.hi == 0.7
    assert second.changes == 1 and second.lo == 1.3 and second.hi == 1.5 and second.valid == 3
    # root of the line through (1.3, 2e-4) and (1.5, -3e-4)
    assert second.alpha_c == pytest.approx(1.3 + 0.2 * 2 / 5, rel=1e-12)  # rounding of the interpolation only
    assert "0.5:same_branch" in second.excluded and "same_branch" not in first.excluded
    with pytest.raises(ValueError, match="no branch labels"):
        cell_crossings(CellRuns.from_row({**cell.to_row(), "starts": None}), STATUS_CONVERGED, by_branch=True)


def test_starts_survive_the_cache_row_seeds_and_alphas():
    cell = _cell()
    back = CellRuns.from_row(cell.to_row())
    assert back.starts == cell.starts
    assert np.array_equal(back.different_branches(), cell.different_branches())
    sub = cell.on_alphas((0.9, 1.1))
    assert len(sub.starts) == 4 and {r["alpha"] for r in sub.starts} == {0.9, 1.1}
    assert cell.on_seeds([]).starts == ()
    assert CellRuns.concat([cell, CellRuns.from_row({**cell.to_row(), "starts": None})]).starts is None


@pytest.fixture(scope="module")
def untied_study(tmp_path_factory):
    """A real untied study, two seeds at d = 40, and its folder."""
    from dotattn.theory_vs_erm.output import write_alpha_c_study

    problem = Problem(omega=0.3, student="untied")
    config = AlphaCConfig(omegas=(0.3,), ds=(40,), alphas=(0.5, 1.5, 3.0), seeds=2, n_boot=200)
    study = run_study(problem, config, theory=False)
    out = tmp_path_factory.mktemp("untied")
    write_alpha_c_study(study, out, command="test")
    return problem, config, study, out


def test_a_real_study_records_every_start_with_its_overlaps_and_label(untied_study):
    _, config, study, out = untied_study
    (cell,) = study.cells
    assert cell.starts is not None and len(cell.starts) == 2 * len(config.alphas) * config.seeds
    for r in cell.starts:
        assert run_branch(np.array(r["theta_over_sigma2"]), np.array(r["mu"])) == r["branch"]
        assert all(r.get(k) is not None for k in KEY_MATRICES)  # the untied student's key overlaps
    losses = {(r["seed"], r["alpha"], r["init"]): r["train_loss"] for r in cell.starts}
    for k, s in enumerate(cell.seeds):
        for j, a in enumerate(cell.alphas):
            assert losses[(s, a, "semantic")] == cell.et_sem[k, j]
            assert losses[(s, a, "positional")] == cell.et_pos[k, j]
    assert (out / "starts.csv").is_file() and (out / "branch_crossings.csv").is_file()
    assert len(study.branch_crossings) == config.seeds
    assert "different_branch" in study.summary_dict()["omegas"][0]


def test_the_folder_verifies_reads_back_and_refuses_an_edited_label(untied_study, tmp_path):
    import shutil

    from dotattn.core.integrity import verify_folder
    from dotattn.theory_vs_erm.alpha_c_reader import alpha_c_rows
    from dotattn.theory_vs_erm.output import read_alpha_c_part

    _, _, study, out = untied_study
    verify_folder(out, strict=True)
    part = read_alpha_c_part(out)
    assert part.cells[0].starts is not None
    assert np.array_equal(part.cells[0].different_branches(), study.cells[0].different_branches())
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    lines = (bad / "starts.csv").read_text().splitlines()
    cells = lines[2].split(",")
    cells[8] = "semantic" if cells[8] != "semantic" else "positional"  # the branch column
    lines[2] = ",".join(cells)
    (bad / "starts.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(IntegrityError, match="branch"):
        alpha_c_rows(bad)


def test_include_keeps_the_starts_of_the_included_cells(untied_study):
    from dotattn.theory_vs_erm.alpha_c import merge_parts
    from dotattn.theory_vs_erm.output import read_alpha_c_part

    problem, config, study, out = untied_study
    more = AlphaCConfig(omegas=(0.3,), ds=(50,), alphas=config.alphas, seeds=2, n_boot=200)
    cells, _ = merge_parts(problem, more, [read_alpha_c_part(out)])
    both = run_study(problem, more, theory=False, supplied=cells)
    assert [c.d for c in both.cells] == [40, 50] and all(c.starts is not None for c in both.cells)
    assert len(both.branch_crossings) == 4 and len(both.branch_fits) == 1


def test_committed_folders_without_starts_still_read():
    from dotattn.theory_vs_erm.output import read_alpha_c_part

    part = read_alpha_c_part("results/variants/untied_d500_2000")
    assert all(c.starts is None for c in part.cells) and len(part.cells) == 9
