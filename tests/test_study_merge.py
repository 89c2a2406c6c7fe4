"""One α_c study from several folders (issue 19): merged cells, the refit over every d, refusals."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dotattn.core.io import IntegrityError
from dotattn.core.status import STATUS_CONVERGED
from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.problem import Problem
from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, CellRuns, StudyPart, merge_parts, run_study
from dotattn.theory_vs_erm.crossing import fit_finite_size

ALPHAS = (0.5, 0.7, 0.9, 1.1)


def _cell(omega: float, d: int, seeds: list[int], shift: float = 0.0) -> CellRuns:
    """Synthetic paired losses whose Δe_t crosses zero at α = 0.8 ± 0.01 (sign alternating with the
    seed, so seeds {0, 1} and {0, 1, 2, 3} have the same mean) − 20/d + shift."""
    a = np.array(ALPHAS)
    roots = np.array([0.8 + 0.01 * (-1) ** s - 20.0 / d + shift for s in seeds])
    et_pos = np.tile(1e-3 * a, (len(seeds), 1))
    et_sem = et_pos + 1e-4 * (roots[:, None] - a[None, :])
    status = np.full(et_pos.shape, STATUS_CONVERGED, dtype=object)
    return CellRuns(
        omega=omega,
        d=d,
        alphas=ALPHAS,
        seeds=tuple(seeds),
        et_sem=et_sem,
        et_pos=et_pos,
        status_sem=status.copy(),
        status_pos=status.copy(),
        same=np.zeros(et_pos.shape, bool),
        seconds=1.0,
        device="cpu",
    )


def _config(**kw) -> AlphaCConfig:
    return AlphaCConfig(**{"omegas": (0.3,), "ds": (250, 500), "alphas": ALPHAS, "seeds": 4, "n_boot": 200, **kw})


def _parts():
    p = Problem(omega=0.3)
    main = StudyPart("main", p, _config(), (_cell(0.3, 250, [0, 1, 2, 3]), _cell(0.3, 500, [0, 1, 2, 3])))
    extra = StudyPart(
        "extra",
        p,
        _config(ds=(250, 500, 2000), seeds=2),
        (_cell(0.3, 250, [0, 1]), _cell(0.3, 500, [0, 1]), _cell(0.3, 2000, [0, 1])),
    )
    return p, main, extra


def test_merge_joins_cells_and_the_refit_uses_every_d():
    p, main, extra = _parts()
    cells, sources = merge_parts(p, _config(), [main, extra])
    assert sorted(cells) == [(0.3, 250), (0.3, 500), (0.3, 2000)]
    assert cells[(0.3, 250)].seeds == (0, 1, 2, 3) and cells[(0.3, 2000)].seeds == (0, 1)
    assert sources[(0.3, 250)] == ["main", "extra"] and sources[(0.3, 2000)] == ["extra"]
    study = run_study(p, _config(), theory=False, supplied=cells)
    assert study.config.ds == (250, 500, 2000) and study.from_cache == 0
    by_d = {s.d: s for s in study.summaries}
    assert by_d[250].seeds == 4 and by_d[2000].seeds == 2
    # the refit is the weighted fit over all three d, seed sets of different sizes included
    per_d = [np.array([x.alpha_c for x in study.crossings if x.d == d]) for d in (250, 500, 2000)]
    want = fit_finite_size((250, 500, 2000), per_d, "1/d", 0.95, 200)
    assert study.fits[0].alpha_inf == pytest.approx(want.alpha_inf, rel=1e-12)
    # Δe_t is linear in α, so the crossings are exactly 0.8 ± 0.01 − 20/d and the fit gives 0.8 (to rounding)
    assert study.fits[0].alpha_inf == pytest.approx(0.8, abs=1e-9)
    assert study.fits[0].slope == pytest.approx(-20.0, rel=1e-9)


def test_merge_refuses_other_problems_grids_and_conflicting_seeds():
    p, main, extra = _parts()
    with pytest.raises(ParameterError, match="another alphas"):
        merge_parts(p, _config(), [main, replace(extra, config=_config(alphas=(0.5, 0.7, 0.9)))])
    with pytest.raises(ParameterError, match="another optimizer"):
        merge_parts(p, _config(), [main, replace(extra, config=_config(optimizer="gd"))])
    with pytest.raises(ParameterError, match="another problem: sigma"):
        merge_parts(p, _config(), [main, replace(extra, problem=Problem(omega=0.3, sigma=0.7))])
    bad = replace(extra, cells=(_cell(0.3, 250, [0, 1], shift=0.05),))
    with pytest.raises(ParameterError, match="seed 0 of cell omega = 0.3, d = 250 differs"):
        merge_parts(p, _config(), [main, bad])


def test_study_folder_round_trip_and_tampering(tmp_path):
    """A written study is read back cell by cell (verified); an edited row is refused."""
    from dotattn.theory_vs_erm.output import read_alpha_c_part, write_alpha_c_study

    p, main, extra = _parts()
    cells, _ = merge_parts(p, _config(), [main, extra])
    study = run_study(p, _config(), theory=False, supplied=cells)
    out = tmp_path / "study"
    out.mkdir()
    write_alpha_c_study(study, out, command="test")
    part = read_alpha_c_part(out)
    assert [(c.omega, c.d, c.seeds) for c in part.cells] == [(c.omega, c.d, c.seeds) for c in study.cells]
    for a, b in zip(part.cells, study.cells, strict=True):
        assert np.array_equal(a.et_sem, b.et_sem) and np.array_equal(a.delta, b.delta)
    text = (out / "delta.csv").read_text().splitlines()
    text[3] = text[3].replace(",converged,", ",not_converged,", 1)
    (out / "delta.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(IntegrityError):
        read_alpha_c_part(out)


def test_erm_alpha_c_include_refuses_a_folder_without_manifest(tmp_path):
    """Bad input: one line, exit 2, nothing created (a legacy folder must be sealed first)."""
    from clitools import run

    from dotattn.theory_vs_erm.output import write_alpha_c_study

    p, main, extra = _parts()
    cells, _ = merge_parts(p, _config(), [main])
    folder = tmp_path / "legacy"
    folder.mkdir()
    write_alpha_c_study(run_study(p, _config(), theory=False, supplied=cells), folder, command="test")
    (folder / "manifest.json").unlink()
    out = tmp_path / "merged"
    r = run(
        "erm-alpha-c",
        "--omega",
        "0.3",
        "--d",
        "250,500",
        "--alpha",
        "0.5,0.7,0.9,1.1",
        "--seeds",
        "4",
        "--include",
        str(folder),
        "--no-theory",
        "--out",
        str(out),
    )
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "--include" in lines[0] and "seal" in lines[0], r.stderr
    assert not out.exists()


def test_study_written_to_a_relative_folder_gets_its_manifest(tmp_path, monkeypatch):
    """--out given relative to the working directory (the writers pass OUT/name): the manifest is
    written (before, write_manifest joined the folder twice and the command failed at its end)."""
    from dotattn.theory_vs_erm.output import read_alpha_c_part, write_alpha_c_study

    p, main, _ = _parts()
    cells, _ = merge_parts(p, _config(), [main])
    monkeypatch.chdir(tmp_path)
    Path("results/study").mkdir(parents=True)
    write_alpha_c_study(run_study(p, _config(), theory=False, supplied=cells), Path("results/study"), command="t")
    assert (tmp_path / "results/study/manifest.json").is_file()
    assert len(read_alpha_c_part(Path("results/study")).cells) == 2


def test_include_with_phase_diagram_theory_and_headline(tmp_path):
    """erm-alpha-c with --include only (nothing computed) and --phase-diagram: the theory α_c of
    the study is the phase diagram's (refined) one and headline.png is drawn."""
    import json

    from clitools import run

    from dotattn.theory_vs_erm.output import write_alpha_c_study

    pd = tmp_path / "pd"
    r = run(
        "phase-diagram",
        "--omega",
        "0.3",
        "--alpha",
        "0.5,0.7,0.9,1.1,1.3",
        "--quad-order",
        "6",
        "--coarse-order",
        "4",
        "--refine-order",
        "8",
        "--refine-rules",
        "3",
        "--workers",
        "1",
        "--quiet",
        "--out",
        str(pd),
    )
    assert r.returncode == 0, r.stderr
    p, main, _ = _parts()
    cfg = _config(n_boot=4000)  # the command's default
    cells, _ = merge_parts(p, cfg, [replace(main, config=cfg)])
    folder = tmp_path / "study"
    folder.mkdir()
    write_alpha_c_study(run_study(p, cfg, theory=False, supplied=cells), folder, command="test")
    out = tmp_path / "merged"
    r = run(
        "erm-alpha-c",
        "--omega",
        "0.3",
        "--d",
        "250,500",
        "--alpha",
        "0.5,0.7,0.9,1.1",
        "--seeds",
        "4",
        "--include",
        str(folder),
        "--phase-diagram",
        str(pd),
        "--quiet",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    theory = json.loads((pd / "summary.json").read_text())["omegas"][0]
    study = json.loads((out / "summary.json").read_text())["omegas"][0]
    assert study["theory_alpha_c"] == theory["alpha_c"]
    assert (out / "headline.png").stat().st_size > 10_000
    assert json.loads((out / "manifest.json").read_text())["files"]["headline.png"]
