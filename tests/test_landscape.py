"""``dotattn landscape``: best of K on hand-built runs, crossings by K on a synthetic Δ with a known root, the
1/ln K and 1/d fits on exact synthetic means, the verdict, the records' round trips, the command's refusals and
one small study made with the real ``erm-restarts`` and read back by the real command."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from clitools import run

from dotattn.core.io import IntegrityError, read_csv, sha256_file, write_csv
from dotattn.core.validation import ParameterError
from dotattn.theory_vs_erm.landscape import (
    DIFFERS,
    EQUALS,
    EVERY_START,
    UNDECIDED,
    BestOfK,
    KCrossing,
    KSummary,
    analyse,
    best_of_k,
    crossings_by_k,
    d_fits,
    k_fits,
    k_max_of,
    k_values,
    summarise_by_k,
    verdict,
)

ROOT = Path(__file__).resolve().parents[1]
PHASE_DIAGRAM = ROOT / "results" / "phase_diagram"


@dataclass(frozen=True)
class Run:
    seed: int
    restart: int
    start: str
    status: str
    branch: str
    train_loss: float


def _value(rows, branch, k):
    (row,) = [r for r in rows if r.branch == branch and r.k == k]
    return row


# ----------------------------------------------------------------------------------------------
# best of K
# ----------------------------------------------------------------------------------------------
def test_k_values_and_k_max():
    assert k_values(64) == (1, 2, 4, 8, 16, 32, 64)
    assert k_values(1) == (1,)
    assert [k_max_of(c) for c in (0, 1, 2, 3, 31, 62, 63, 64)] == [1, 2, 2, 4, 32, 32, 64, 64]
    for bad in (0, 3, 48, True, 2.0):
        with pytest.raises(ParameterError, match="k_max must be a power of two"):
            k_values(bad)


def test_best_of_k_on_hand_built_runs():
    """Known minima: copies are taken in restart order among those that converged on the branch; a copy that
    ended on the other branch, a copy that did not converge and a random start enter only the every-start
    value (of the branch they ended on)."""
    informed = [
        Run(0, 0, "semantic", "converged", "semantic", 1.0),
        Run(0, 1, "positional", "converged", "positional", 2.0),
    ]
    restarts = [
        Run(0, 0, "random", "converged", "positional", 0.5),
        Run(0, 5, "semantic", "converged", "semantic", 0.85),  # given out of order: restart order counts
        Run(0, 1, "semantic", "converged", "semantic", 0.9),
        Run(0, 2, "semantic", "converged", "semantic", 0.95),
        Run(0, 3, "semantic", "converged", "positional", 0.8),  # ended on the other branch
        Run(0, 4, "semantic", "not_converged", "semantic", 0.7),  # not converged
        Run(0, 6, "semantic", "converged", "semantic", 0.6),  # the 4th copy on the branch: beyond K = 4
        Run(0, 7, "positional", "converged", "positional", 1.9),
        Run(0, 8, "positional", "converged", "positional", 2.1),
        Run(0, 9, "positional", "converged", "positional", 1.5),
    ]
    rows = best_of_k(100, 0.7, 0, informed, restarts, 4)
    assert len(rows) == 2 * 4  # (1, 2, 4, every) per branch
    assert all(r.valid and r.excluded == "" for r in rows)
    sem = {k: _value(rows, "semantic", k) for k in (1, 2, 4, EVERY_START)}
    assert [sem[k].train_loss for k in (1, 2, 4)] == [1.0, 0.9, 0.85]
    assert [sem[k].runs for k in (1, 2, 4)] == [1, 2, 4]
    assert (sem[EVERY_START].train_loss, sem[EVERY_START].runs) == (0.6, 5)
    pos = {k: _value(rows, "positional", k) for k in (1, 2, 4, EVERY_START)}
    assert [pos[k].train_loss for k in (1, 2, 4)] == [2.0, 1.9, 1.5]
    # every start on positional: the random start (0.5) and the semantic copy that ended there (0.8) count
    assert (pos[EVERY_START].train_loss, pos[EVERY_START].runs) == (0.5, 6)


def test_best_of_k_with_fewer_copies_than_k_uses_what_there_is():
    informed = [
        Run(3, 0, "semantic", "converged", "semantic", 1.0),
        Run(3, 1, "positional", "converged", "positional", 2.0),
    ]
    restarts = [Run(3, 0, "positional", "converged", "positional", 1.2)]
    rows = best_of_k(50, 0.5, 3, informed, restarts, 4)
    assert [(_value(rows, "positional", k).train_loss, _value(rows, "positional", k).runs) for k in (1, 2, 4)] == [
        (2.0, 1),
        (1.2, 2),
        (1.2, 2),
    ]
    assert [_value(rows, "semantic", k).train_loss for k in (1, 2, 4)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "informed_pos, why",
    [
        (Run(0, 1, "positional", "converged", "semantic", 1.0), "informed positional run: converged, on semantic"),
        (Run(0, 1, "positional", "not_converged", "positional", 1.0), "informed positional run: not_converged"),
    ],
)
def test_an_informed_run_off_its_branch_or_not_converged_makes_the_point_invalid(informed_pos, why):
    informed = [Run(0, 0, "semantic", "converged", "semantic", 1.0), informed_pos]
    restarts = [Run(0, 2, "positional", "converged", "positional", 0.9)]
    rows = best_of_k(100, 0.7, 0, informed, restarts, 2)
    pos = [r for r in rows if r.branch == "positional"]
    assert all(not r.valid and r.excluded.startswith(why) for r in pos)
    assert all(r.valid for r in rows if r.branch == "semantic")
    # the invalid informed run does not count: K = 1 has no run, K = 2 only the copy
    assert math.isnan(_value(rows, "positional", 1).train_loss) and _value(rows, "positional", 1).runs == 0
    assert _value(rows, "positional", 2).train_loss == 0.9


def test_best_of_k_refuses_a_point_without_exactly_one_informed_run_per_branch():
    two = [Run(0, 0, "semantic", "converged", "semantic", 1.0), Run(0, 1, "semantic", "converged", "semantic", 1.1)]
    with pytest.raises(ParameterError, match="2 informed semantic runs, exactly one needed"):
        best_of_k(100, 0.7, 0, two, [], 2)
    with pytest.raises(ParameterError, match="a run of seed 1 among the runs of seed 0"):
        best_of_k(100, 0.7, 0, [Run(1, 0, "semantic", "converged", "semantic", 1.0)], [], 2)


# ----------------------------------------------------------------------------------------------
# crossings by K on a synthetic Δ
# ----------------------------------------------------------------------------------------------
ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)


def _synthetic_rows(d, roots, invalid=()):
    """Best-of-K rows whose Δ is linear in α: e_sem = 1 at every K, e_pos(K) = 1 − (c_K − α), so that the
    positional search crosses exactly at c_K and the semantic search at c_1 (linear interpolation is exact)."""
    rows = []
    for seed, by_k in roots.items():
        ks = sorted(by_k)
        for a in ALPHAS:
            bad = (seed, a) in invalid
            for k in (*ks, EVERY_START):
                c = by_k[ks[-1] if k == EVERY_START else k]
                for branch, loss in (("semantic", 1.0), ("positional", 1.0 - (c - a))):
                    why = "informed positional run: not_converged, on positional" if bad else ""
                    valid = not (bad and branch == "positional")
                    rows.append(BestOfK(d, a, seed, branch, k, loss, k, valid, "" if valid else why))
    return rows


def test_crossings_by_k_find_the_known_roots():
    roots = {0: {1: 0.62, 2: 0.66, 4: 0.71}, 1: {1: 0.55, 2: 0.58, 4: 0.83}}
    xs = crossings_by_k(_synthetic_rows(100, roots, invalid={(1, 0.6)}))
    got = {(x.search, x.k, x.seed): x for x in xs}
    for seed, by_k in roots.items():
        for k, c in by_k.items():
            # tolerance: the root is a ratio of differences of float64 losses near 1 (a few ulps of 1)
            assert got[("positional", k, seed)].alpha_c == pytest.approx(c, abs=1e-12)
            assert got[("both", k, seed)].alpha_c == pytest.approx(c, abs=1e-12)
            assert got[("semantic", k, seed)].alpha_c == pytest.approx(by_k[1], abs=1e-12)
        assert got[("positional", EVERY_START, seed)].alpha_c == pytest.approx(by_k[4], abs=1e-12)
    # seed 1's invalid point at alpha = 0.6 is skipped (the root 0.55 is bracketed by 0.5 and 0.7) and listed
    x = got[("positional", 1, 1)]
    assert (x.lo, x.hi, x.valid, x.outcome) == (0.5, 0.7, 4, "crossing")
    assert x.excluded == "0.6:informed positional run: not_converged, on positional"
    summ = {(s.search, s.k): s for s in summarise_by_k(xs)}
    s = summ[("positional", 4)]
    assert (s.seeds, s.crossings, s.no_crossing, s.several) == (2, 2, 0, 0)
    assert s.mean == pytest.approx(0.77, abs=1e-12) and s.sd == pytest.approx(np.std([0.71, 0.83], ddof=1))


def test_a_seed_without_a_crossing_is_counted_not_averaged():
    roots = {0: {1: 0.62, 2: 0.66}, 1: {1: 0.95, 2: 0.97}}  # seed 1 crosses beyond the grid
    summ = {(s.search, s.k): s for s in summarise_by_k(crossings_by_k(_synthetic_rows(100, roots)))}
    s = summ[("positional", 2)]
    assert (s.seeds, s.crossings, s.no_crossing) == (2, 1, 1)
    assert s.mean == pytest.approx(0.66, abs=1e-12) and math.isnan(s.se)


# ----------------------------------------------------------------------------------------------
# K -> inf, d -> inf
# ----------------------------------------------------------------------------------------------
def _fit_crossings(d, c_inf, b, offsets, ks=(1, 2, 4, 8, 16)):
    """Crossings c_inf + b/ln K + offset_s (K >= 2; K = 1 an arbitrary 0.6), identical in every search."""
    out = []
    for search in ("positional", "semantic", "both"):
        for k in (*ks, EVERY_START):
            for s, off in enumerate(offsets):
                c = 0.6 + off if k == 1 else c_inf + b / math.log(ks[-1] if k == EVERY_START else k) + off
                out.append(KCrossing(d, search, k, s, "crossing", c, 0.5, 0.9, 1, 5, ""))
    return out


def test_the_1_over_ln_k_fit_recovers_c_inf_and_saturation_is_paired():
    offsets = np.array([-0.03, -0.01, 0.0, 0.015, 0.025])  # sum to zero: the per-K means lie on the law exactly
    fits, boots = k_fits(_fit_crossings(500, 0.74, -0.05, offsets))
    for f in fits:
        # tolerance: least squares on 4 exact points, rounding of float64 sums only
        assert f.c_inf == pytest.approx(0.74, abs=1e-12) and f.slope == pytest.approx(-0.05, abs=1e-12)
        assert f.ks == (2, 4, 8, 16) and f.replicas == 4000
        assert f.ci_lo < 0.74 < f.ci_hi
        # every replica shifts all K by the same resampled mean offset: the interval is that of the mean offset
        assert f.ci_hi - f.ci_lo < offsets.max() - offsets.min()
        want = -0.05 / math.log(16) + 0.05 / math.log(8)
        assert f.sat_diff == pytest.approx(want, abs=1e-12) and f.sat_n == 5
        assert f.sat_se == pytest.approx(0.0, abs=1e-12) and not f.saturated  # identical paired differences
    # reproducible: the same replicas again
    again = k_fits(_fit_crossings(500, 0.74, -0.05, offsets))[1]
    assert all(np.array_equal(boots[key], again[key]) for key in boots)


def test_saturated_where_the_difference_is_within_two_paired_standard_errors():
    xs = _fit_crossings(500, 0.74, 0.0, np.zeros(4))
    # K_max = 16 against K = 8: paired differences +0.01, -0.01, +0.02, -0.02 (mean 0: saturated)
    noisy = []
    for x in xs:
        if x.k == 16:
            x = KCrossing(**{**x.to_row(), "alpha_c": x.alpha_c + (0.01, -0.01, 0.02, -0.02)[x.seed]})
        noisy.append(x)
    fits, _ = k_fits(noisy)
    assert all(f.saturated and f.sat_diff == pytest.approx(0.0, abs=1e-12) and f.sat_se > 0 for f in fits)


def test_the_1_over_d_fit_recovers_the_limit():
    offsets = np.array([-0.02, 0.0, 0.02])
    xs = [x for d in (500, 1000, 2000) for x in _fit_crossings(d, 0.70 + 20.0 / d, -0.05, offsets)]
    fits, boots = k_fits(xs)
    (both,) = [f for f in d_fits(fits, boots) if f.search == "both"]
    # tolerance: weighted least squares on three exact points, float64 rounding only
    assert both.c_inf == pytest.approx(0.70, abs=1e-10) and both.slope == pytest.approx(20.0, abs=1e-7)
    assert both.ds == (500, 1000, 2000) and both.dof == 1 and both.chi2 == pytest.approx(0.0, abs=1e-12)
    assert both.ci_lo < 0.70 < both.ci_hi
    one = d_fits([f for f in fits if f.d == 500], boots)
    assert all(math.isnan(f.c_inf) and f.ds == (500,) for f in one)  # one d: no limit


def test_the_verdict_has_three_outcomes():
    a = 0.7516
    assert verdict(0.75, 0.735, 0.765, a).outcome == EQUALS
    assert verdict(0.70, 0.69, 0.71, a).outcome == DIFFERS
    assert verdict(0.77, 0.755, 0.79, a).outcome == DIFFERS  # excluded from above
    wide = verdict(0.75, 0.70, 0.80, a)
    assert wide.outcome == UNDECIDED and "half-width 0.0500 is > 0.02" in wide.reason
    assert verdict(math.nan, math.nan, math.nan, a).outcome == UNDECIDED
    assert verdict(0.75, 0.732, 0.77, a).outcome == EQUALS  # half-width 0.019
    assert verdict(0.75, 0.729, 0.771, a).outcome == UNDECIDED  # half-width 0.021


def test_analyse_summary_has_the_shape_the_folder_promises():
    offsets = np.array([-0.02, 0.0, 0.02])
    rows = []
    for d in (500, 1000):
        roots = {s: {1: 0.6 + o, 2: 0.65 + o, 4: 0.7 + o} for s, o in enumerate(offsets)}
        rows += _synthetic_rows(d, roots)
    study = analyse(rows, 0.7516, 0.0013)
    summary = study.summary_dict()
    assert set(summary["crossing_by_K"]) == {"500", "1000"}
    entry = summary["crossing_by_K"]["500"]["both"]
    assert set(entry) == {"1", "2", "4", "every"} and set(entry["4"]) >= {"mean", "se", "n"}
    assert entry["4"]["mean"] == pytest.approx(0.7, abs=1e-12) and entry["4"]["n"] == 3
    assert set(summary["k_infinity"]["1000"]) == {"positional", "semantic", "both"}
    assert set(summary["k_infinity"]["500"]["both"]["saturation"]) >= {"difference", "se", "saturated"}
    assert summary["verdict"]["outcome"] in (EQUALS, DIFFERS, UNDECIDED) and summary["rule"]
    assert summary["beside"]["d"] == 1000 and summary["beside"]["k_max"] == 4


# ----------------------------------------------------------------------------------------------
# records
# ----------------------------------------------------------------------------------------------
def test_records_round_trip_through_csv(tmp_path):
    records = [
        BestOfK(500, 0.46, 3, "positional", 8, 0.00139, 8, True, ""),
        BestOfK(500, 0.5, 1, "semantic", 0, math.nan, 0, False, "informed semantic run: stalled, on semantic"),
        KCrossing(500, "both", 4, 2, "crossing", 0.7123, 0.7, 0.74, 1, 14, "0.5:why"),
        KCrossing(1000, "semantic", 0, 0, "no_crossing", math.nan, math.nan, math.nan, 0, 14, ""),
        KSummary(2000, "positional", 32, 16, 15, 1, 2, 0.74, 0.05, 0.0125),
    ]
    for rec in records:
        cls = type(rec)
        path = tmp_path / f"{cls.__name__}.csv"
        write_csv(path, [rec.to_row()], list(cls.__dataclass_fields__))
        back = cls.from_row(read_csv(path)[0])
        assert back.to_row().keys() == rec.to_row().keys()
        for k, v in rec.to_row().items():
            w = back.to_row()[k]
            assert (isinstance(v, float) and math.isnan(v) and math.isnan(w)) or v == w, (cls.__name__, k)
        if not any(isinstance(v, float) and math.isnan(v) for v in rec.to_row().values()):
            assert cls.from_row(rec.to_row()) == rec


# ----------------------------------------------------------------------------------------------
# the command, on a tiny study made with the real erm-restarts
# ----------------------------------------------------------------------------------------------
TINY_ALPHAS = ("0.6", "1.0", "1.4")


def _main(args):
    """The real command line in this process: (exit status, stderr lines are the caller's capsys)."""
    from dotattn.cli.main import main

    try:
        main(list(args))
    except SystemExit as exc:
        return exc.code
    return 0


def _restarts(out, alpha, role, extra=(), omega="0.1", tol="1e-7", d="20", seeds="2", first_seed="0"):
    flags = {
        "informed": ["--random", "0", "--semantic", "1", "--positional", "1", "--informed-noise", "0"],
        "restarts": ["--random", "1", "--semantic", "3", "--positional", "3", "--informed-noise", "0.3"],
    }[role]
    code = _main(
        [
            "erm-restarts",
            "--omega",
            omega,
            "--seeds",
            seeds,
            "--first-seed",
            first_seed,
            "--d",
            d,
            "--alpha",
            alpha,
            "--steps",
            "3000",
            "--tol",
            tol,
            "--test-samples",
            "50",
            "--threads",
            "1",
            "--quiet",
            *flags,
            *extra,
            "--out",
            str(out),
        ]
    )
    assert code == 0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """d = 20, seeds 0-1, three alpha, K_max = 4 (3 noisy copies of each informed start, one random start):
    six erm-restarts folders made by the real command (about 5 s, most of it importing torch)."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("tiny") / "runs"
    for a in TINY_ALPHAS:
        for role in ("informed", "restarts"):
            _restarts(root / "d20" / f"alpha{a}" / role, a, role)
    return root


def _copy(tiny, tmp_path, name="runs"):
    dst = tmp_path / name
    shutil.copytree(tiny, dst)
    return dst


def _refused(capsys, args, out, match):
    capsys.readouterr()
    code = _main(["landscape", *args, "--phase-diagram", str(PHASE_DIAGRAM), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("Error: ") and match in err[0], err
    assert not out.exists()


def test_refuses_a_folder_with_another_tol(tiny, tmp_path, capsys):
    root = _copy(tiny, tmp_path)
    shutil.rmtree(root / "d20" / "alpha1.0" / "restarts")
    _restarts(root / "d20" / "alpha1.0" / "restarts", "1.0", "restarts", tol="1e-6")
    _refused(capsys, ["--runs", str(root)], tmp_path / "out", "has another tol")


def test_refuses_a_folder_with_another_omega(tiny, tmp_path, capsys):
    root = _copy(tiny, tmp_path)
    shutil.rmtree(root / "d20" / "alpha1.4" / "informed")
    _restarts(root / "d20" / "alpha1.4" / "informed", "1.4", "informed", omega="0.3")
    _refused(capsys, ["--runs", str(root)], tmp_path / "out", "was made for another problem: omega")


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--informed-noise", "0.1"], "informed_noise = 0.1, not 0"),
        (["--semantic", "2"], "exactly one semantic and one positional start"),
    ],
)
def test_refuses_an_informed_folder_that_is_not_one_noise_free_start_per_branch(tiny, tmp_path, capsys, extra, match):
    root = _copy(tiny, tmp_path)
    shutil.rmtree(root / "d20" / "alpha0.6" / "informed")
    _restarts(root / "d20" / "alpha0.6" / "informed", "0.6", "informed", extra=extra)
    _refused(capsys, ["--runs", str(root)], tmp_path / "out", match)


def test_refuses_a_point_in_two_roots(tiny, tmp_path, capsys):
    _refused(capsys, ["--runs", str(tiny), "--runs", str(_copy(tiny, tmp_path))], tmp_path / "out", "(each point once)")


def test_refuses_a_missing_folder_an_incomplete_grid_and_a_tampered_file(tiny, tmp_path, capsys):
    root = _copy(tiny, tmp_path)
    shutil.rmtree(root / "d20" / "alpha1.0" / "restarts")
    _refused(capsys, ["--runs", str(root)], tmp_path / "out", "has no finished erm-restarts output")
    # seeds 2-3 in a second root at one alpha only: the grid of d = 20 is not complete for them
    other = tmp_path / "other"
    for role in ("informed", "restarts"):
        _restarts(other / "d20" / "alpha0.6" / role, "0.6", role, first_seed="2")
    _refused(capsys, ["--runs", str(tiny), "--runs", str(other)], tmp_path / "out", "seed 2 has no runs at alpha = 1")
    # a runs.csv edited after the run: the folder fails verification before it is read
    root = _copy(tiny, tmp_path, "edited")
    path = root / "d20" / "alpha1.4" / "restarts" / "runs.csv"
    path.write_text(path.read_text().replace("converged", "stalled", 1))
    _refused(capsys, ["--runs", str(root)], tmp_path / "out", "runs.csv")


def test_refuses_a_phase_diagram_of_another_problem(tiny, tmp_path, capsys):
    capsys.readouterr()
    other = ROOT / "results" / "general" / "L2_r2_rt1" / "phase_diagram"
    code = _main(["landscape", "--runs", str(tiny), "--phase-diagram", str(other), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--phase-diagram" in err[0], err
    assert not (tmp_path / "o").exists()


def _independent_best(root):
    """Best of K = 1, 2, 4 per (alpha, seed, branch) from the input runs.csv files, computed here without the
    package: the informed run if it converged on its branch, then the copies in restart order that did."""
    out = {}
    for a in TINY_ALPHAS:
        inf = read_csv(root / "d20" / f"alpha{a}" / "informed" / "runs.csv")
        rs = read_csv(root / "d20" / f"alpha{a}" / "restarts" / "runs.csv")
        for seed in ("0", "1"):
            for b in ("semantic", "positional"):
                (i,) = [r for r in inf if r["seed"] == seed and r["start"] == b]
                ok = i["status"] == "converged" and i["branch"] == b
                copies = sorted(
                    (r for r in rs if r["seed"] == seed and r["start"] == b),
                    key=lambda r: int(r["restart"]),
                )
                losses = [float(r["train_loss"]) for r in copies if r["status"] == "converged" and r["branch"] == b]
                first = [float(i["train_loss"])] if ok else []
                for k in (1, 2, 4):
                    pool = first + losses[: k - 1]
                    out[(float(a), int(seed), b, k)] = (min(pool) if pool else math.nan, ok)
    return out


def _reseal(folder, name):
    man = json.loads((folder / "manifest.json").read_text())
    man["files"][name]["sha256"] = sha256_file(folder / name)
    man["files"][name]["bytes"] = (folder / name).stat().st_size
    (folder / "manifest.json").write_text(json.dumps(man))


def test_end_to_end_on_a_tiny_study(tiny, tmp_path):
    """The real command on six real erm-restarts folders; its folder verifies (strict), its best-of-K rows are
    those computed here from the input rows, and edits are caught (by the manifest, by the rows against each
    other, and by --strict for an edit of a derived number made consistent with the manifest)."""
    out = tmp_path / "landscape"
    r = run("landscape", "--runs", str(tiny), "--phase-diagram", str(PHASE_DIAGRAM), "--out", str(out), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "landscape: 3 (d, alpha) cells of d = 20 (K_max 4)" in r.stderr and "verdict (search both)" in r.stdout
    assert {p.name for p in out.iterdir()} == {
        "study_runs.csv",
        "best.csv",
        "crossings.csv",
        "crossing_by_k.csv",
        "summary.json",
        "crossing_vs_K.png",
        "manifest.json",
    }
    from dotattn.verify import verify_folder

    assert verify_folder(out, strict=True) == "landscape"

    want = _independent_best(tiny)
    rows = [BestOfK.from_row(x) for x in read_csv(out / "best.csv")]
    assert len(rows) == 3 * 2 * 2 * 4  # alpha x seeds x branches x (K = 1, 2, 4, every)
    for x in rows:
        if x.k == EVERY_START:
            continue
        loss, ok = want[(x.alpha, x.seed, x.branch, x.k)]
        assert x.valid == ok and (x.train_loss == loss or (math.isnan(loss) and math.isnan(x.train_loss)))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["replica_alpha_c"]["alpha_c"] == pytest.approx(0.7516, abs=1e-4)  # read, not typed in
    assert summary["k_max"] == {"20": 4} and summary["rule"]
    assert set(summary["crossing_by_K"]["20"]) == {"positional", "semantic", "both"}
    assert summary["provenance"]["parameters"]["inputs"][0]["role"] == "informed"

    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    rows = read_csv(edited / "crossing_by_k.csv")
    rows[0]["seeds"] = "3"
    write_csv(edited / "crossing_by_k.csv", rows, list(rows[0]))
    with pytest.raises(IntegrityError, match="crossing_by_k.csv"):  # the manifest's SHA-256
        verify_folder(edited)
    _reseal(edited, "crossing_by_k.csv")
    with pytest.raises(IntegrityError, match=r"crossing_by_k.csv: row 1 .*counts"):  # against crossings.csv
        verify_folder(edited)
    shutil.rmtree(edited)
    shutil.copytree(out, edited)
    rows = read_csv(edited / "best.csv")
    i = next(j for j, x in enumerate(rows) if x["k"] == "2" and x["valid"] == "True")
    rows[i]["train_loss"] = repr(float(rows[i]["train_loss"]) * 2)  # best of 2 above best of 1
    write_csv(edited / "best.csv", rows, list(rows[0]))
    _reseal(edited, "best.csv")
    with pytest.raises(IntegrityError, match="best.csv"):
        verify_folder(edited)
    shutil.rmtree(edited)
    shutil.copytree(out, edited)
    rows = read_csv(edited / "study_runs.csv")
    assert len(rows) == 3 * 2 * (2 + 2 * 3 + 1)  # alpha x seeds x (informed + noisy copies + random)
    i = next(j for j, x in enumerate(rows) if x["role"] == "restarts" and x["status"] == "converged")
    rows[i]["train_loss"] = repr(float(rows[i]["train_loss"]) / 2)  # a lower minimum than the one recorded
    write_csv(edited / "study_runs.csv", rows, list(rows[0]))
    _reseal(edited, "study_runs.csv")
    with pytest.raises(
        IntegrityError, match="is not the best of K of study_runs.csv"
    ):  # best.csv against study_runs.csv
        verify_folder(edited)
    shutil.rmtree(edited)
    shutil.copytree(out, edited)
    s = json.loads((edited / "summary.json").read_text())
    s["verdict"]["outcome"] = EQUALS if s["verdict"]["outcome"] != EQUALS else DIFFERS
    (edited / "summary.json").write_text(json.dumps(s))
    _reseal(edited, "summary.json")
    assert verify_folder(edited) == "landscape"  # consistent with the manifest and the rows' counts
    with pytest.raises(IntegrityError, match="verdict"):
        verify_folder(edited, strict=True)


def test_references_are_read_from_verified_folders_and_drawn_on_the_headline(tiny, tmp_path):
    """--alpha-c and --rsb: the informed-start crossings at the runs' omega and the 1RSB crossings are recorded in
    summary.json exactly as their folders hold them, and headline.png is drawn; the folder still verifies."""
    alpha_c = ROOT / "results" / "alpha_c_erm"
    rsb = ROOT / "results" / "rsb" / "complexity_omega0.1"
    out = tmp_path / "with_refs"
    args = ["--alpha-c", str(alpha_c), "--rsb", str(rsb), "--out", str(out), "--quiet"]
    r = run("landscape", "--runs", str(tiny), "--phase-diagram", str(PHASE_DIAGRAM), *args, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (out / "headline.png").stat().st_size > 0
    refs = json.loads((out / "summary.json").read_text())["references"]
    held = json.loads((rsb / "summary.json").read_text())
    for key in ("alpha_threshold", "alpha_equilibrium"):
        assert refs["rsb"][key]["value"] == held[key]["value"]  # copied from the folder, not recomputed
    erm = json.loads((alpha_c / "summary.json").read_text())["omegas"]
    at = next(o for o in erm if abs(o["omega"] - 0.1) < 1e-9)
    assert refs["informed_start"]["by_d"] == at["by_d"]
    from dotattn.verify import verify_folder

    assert verify_folder(out, strict=True) == "landscape"


def test_refuses_references_of_another_kind_or_omega(tiny, tmp_path, capsys):
    other_rsb = ROOT / "results" / "rsb" / "toy_omega0.1_alpha0.75"  # an rsb folder, not a complexity one
    _refused(capsys, ["--runs", str(tiny), "--rsb", str(other_rsb)], tmp_path / "out", "--rsb")
    other_erm = ROOT / "results" / "general" / "L2_r2_rt1" / "phase_diagram"  # not an erm-alpha-c folder
    _refused(capsys, ["--runs", str(tiny), "--alpha-c", str(other_erm)], tmp_path / "out", "--alpha-c")
