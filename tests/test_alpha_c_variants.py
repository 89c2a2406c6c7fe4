"""α_c(ω) of several variants and their shifts from a baseline (``dotattn variants``)."""

from __future__ import annotations

import numpy as np
import pytest

from dotattn.core.io import IntegrityError
from dotattn.core.status import STATUS_CONVERGED
from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.problem import Problem
from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, CellRuns, run_study
from dotattn.theory_vs_erm.variants import ERM, THEORY, compare_variants

ALPHAS = (0.5, 0.7, 0.9, 1.1, 1.3)
PHASE_DIAGRAM = "results/phase_diagram"  # a committed theory folder (part of the repository)


def _cell(omega: float, d: int, seeds: list[int], shift: float, alphas=ALPHAS) -> CellRuns:
    """Paired losses whose Δe_t is linear in α and crosses zero at 0.8 + 0.013 s mod 7 − 20/d + shift."""
    a = np.array(alphas)
    roots = np.array([0.8 + 0.013 * (s % 7) - 20.0 / d + shift for s in seeds])
    et_pos = np.tile(1e-3 * a, (len(seeds), 1))
    et_sem = et_pos + 1e-4 * (roots[:, None] - a[None, :])
    status = np.full(et_pos.shape, STATUS_CONVERGED, dtype=object)
    return CellRuns(
        omega=omega,
        d=d,
        alphas=tuple(alphas),
        seeds=tuple(seeds),
        et_sem=et_sem,
        et_pos=et_pos,
        status_sem=status.copy(),
        status_pos=status.copy(),
        same=np.zeros(et_pos.shape, bool),
        seconds=1.0,
        device="cpu",
    )


def _study(folder, shift: float, seeds: list[int], ds=(250, 500), alphas=ALPHAS):
    from dotattn.theory_vs_erm.output import write_alpha_c_study

    config = AlphaCConfig(
        omegas=(0.1, 0.3), ds=tuple(ds), alphas=tuple(alphas), seeds=len(seeds), first_seed=seeds[0], n_boot=200
    )
    cells = {(w, d): _cell(w, d, seeds, shift, alphas) for w in config.omegas for d in ds}
    folder.mkdir()
    write_alpha_c_study(run_study(Problem(), config, theory=False, supplied=cells), folder, command="test")
    return str(folder)


@pytest.fixture()
def studies(tmp_path):
    base = _study(tmp_path / "tied", 0.0, list(range(8)))
    variant = _study(tmp_path / "variant", 0.25, list(range(2, 10)))  # seeds 2..7 shared with the baseline
    return base, variant


def test_erm_points_and_paired_shifts(studies):
    base, variant = studies
    points = compare_variants([], [("tied", base), ("wide", variant)], "tied")
    by = {(p.label, p.omega): p for p in points}
    assert {p.source for p in points} == {ERM} and {p.d for p in points} == {500}  # the largest d by default
    for w in (0.1, 0.3):
        v, b = by[("wide", w)], by[("tied", w)]
        # the point is the estimator of the study itself (mean, s.e., bootstrap interval of the crossings)
        roots = [0.8 + 0.013 * (s % 7) - 20.0 / 500 + 0.25 for s in range(2, 10)]
        assert v.alpha_c == pytest.approx(np.mean(roots), abs=1e-12)
        assert v.se == pytest.approx(np.std(roots, ddof=1) / np.sqrt(8), rel=1e-9)
        assert v.ci_lo < v.alpha_c < v.ci_hi and (v.seeds, v.crossings) == (8, 8)
        # the shift is paired on the 6 common seeds, whose crossings differ by exactly 0.25
        assert v.paired_seeds == 6 and v.shift == pytest.approx(0.25, abs=1e-9) and v.shift_se < 1e-9
        assert v.shift_alphas == len(ALPHAS)  # the same grid: the baseline's crossings on all its points
        assert not np.isfinite(b.shift) and b.paired_seeds == 0  # the baseline has no shift
    low = compare_variants([], [("tied", base), ("wide", variant)], "tied", d_max=499)
    assert {p.d for p in low} == {250}


def test_a_coarser_variant_grid_recomputes_the_baseline_on_the_shared_points(studies, tmp_path):
    """A variant on a wider, coarser grid: its own crossings on its grid; the baseline's for the shift on
    the 3 points both grids have (0.5, 0.9, 1.3), where a linear Δe_t still crosses at the same α."""
    base, _ = studies
    coarse = _study(tmp_path / "coarse", 0.25, list(range(8)), alphas=(0.5, 0.9, 1.3, 1.7, 2.1))
    (v,) = [
        p
        for p in compare_variants([], [("tied", base), ("coarse", coarse)], "tied")
        if p.label == "coarse" and p.omega == 0.1
    ]
    assert v.shift_alphas == 3 and v.paired_seeds == 8 and v.shift == pytest.approx(0.25, abs=1e-9)
    from dotattn.theory_vs_erm.alpha_c import cell_crossings
    from dotattn.theory_vs_erm.output import read_alpha_c_part

    cell = read_alpha_c_part(base).cells[0]
    sub = cell.on_alphas([0.5, 0.9, 1.3, 7.0])
    assert sub.alphas == (0.5, 0.9, 1.3) and sub.et_sem.shape == (8, 3)
    np.testing.assert_allclose(
        [x.alpha_c for x in cell_crossings(sub, STATUS_CONVERGED)],
        [x.alpha_c for x in cell_crossings(cell, STATUS_CONVERGED)],
        atol=1e-12,
    )


def test_theory_points_and_shifts_against_the_baseline():
    points = compare_variants([("tied", PHASE_DIAGRAM), ("same", PHASE_DIAGRAM)], [], "tied")
    same = [p for p in points if p.label == "same"]
    assert same and all(p.source == THEORY and p.shift == 0.0 for p in same)
    assert all(p.ci_lo == pytest.approx(p.alpha_c - 2 * p.se) for p in same)


@pytest.mark.parametrize(
    "theory, erm, baseline, word",
    [
        ([], [("tied", "x"), ("tied", "y")], "tied", "twice"),
        ([("tied", PHASE_DIAGRAM)], [], "untied", "baseline"),
        ([("bad label", PHASE_DIAGRAM)], [], "bad label", "label"),
        ([("tied", "/nonexistent/folder")], [], "tied", "does not exist"),
    ],
)
def test_refusals(theory, erm, baseline, word):
    with pytest.raises(ParameterError, match=word):
        compare_variants(theory, erm, baseline)


def test_a_folder_of_another_kind_is_refused():
    with pytest.raises(IntegrityError, match="not a alpha-c folder|phase-diagram folder"):
        compare_variants([], [("tied", PHASE_DIAGRAM)], "tied")


def test_cli_writes_a_verified_folder_and_refuses_bad_input(studies, tmp_path):
    from clitools import run

    base, variant = studies
    out = tmp_path / "out"
    r = run(
        "variants",
        "--theory",
        f"tied={PHASE_DIAGRAM}",
        "--erm",
        f"tied={base}",
        "--erm",
        f"wide={variant}",
        "--baseline",
        "tied",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert "+0.250" in r.stdout
    assert run("verify", str(out)).returncode == 0
    from dotattn.theory_vs_erm.variants import read_variant_points

    assert len(read_variant_points(out / "variants.csv")) == 10 + 2 + 2
    text = (out / "variants.csv").read_text().replace(",erm,", ",ERM,", 1)
    (out / "variants.csv").write_text(text)
    assert run("verify", str(out)).returncode != 0  # the manifest catches the edit
    for args, word in (
        (["--erm", f"tied{base}"], "LABEL=FOLDER"),
        (["--erm", f"tied={base}", "--d-max", "0"], "d-max"),
        (["--erm", f"wide={variant}"], "baseline"),
    ):
        bad = tmp_path / "bad"
        r = run("variants", *args, "--baseline", "tied", "--out", str(bad))
        assert r.returncode == 2 and word in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not bad.exists()
