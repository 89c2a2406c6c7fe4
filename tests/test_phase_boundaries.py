"""Phase boundaries between the globally minimal phases (phase_diagram.phase_boundaries) on synthetic
branches with known crossings and spinodals, the PhaseBoundary record, and the toy default column."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import reduced_and_full

from dotattn.positional_semantic.branch import Branch
from dotattn.positional_semantic.catalogue import QuadratureSpec
from dotattn.positional_semantic.phase_diagram import ColumnSummary, SweepSettings, _critical_root, phase_boundaries
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.records import BOUNDARY_COLUMNS, PhaseBoundary

SETTINGS = SweepSettings(QuadratureSpec("gauss-hermite", 6, None))
GRID = [0.5, 0.8, 1.3, 2.0]


class Synthetic(Branch):
    """A branch whose e_t is ``f(α)`` on [lo, hi] (absent outside), with a fixed quadrature error."""

    def __init__(self, name, f, lo=-math.inf, hi=math.inf, error=0.0, grid=GRID, tol=1e-3):
        super().__init__(name, Problem(), None, None, SETTINGS.options)
        self.f, self.lo, self.hi, self.error, self.calls = f, lo, hi, error, 0
        self.points = {a: self._fp(a) for a in grid if lo <= a <= hi}
        inside = sorted(self.points)
        # the spinodal bisection's bracket ends, as Branch.spinodals keeps them
        if inside and inside[0] != grid[0]:
            self.ends["lower"] = (lo + 0.25 * tol, lo - 0.25 * tol, self._fp(lo + 0.25 * tol))
        if inside and inside[-1] != grid[-1]:
            self.ends["upper"] = (hi - 0.25 * tol, hi + 0.25 * tol, self._fp(hi - 0.25 * tol))

    def _fp(self, a):
        return SimpleNamespace(alpha=a, train_loss=self.f(a))

    def at(self, alpha):
        self.calls += 1
        return self._fp(alpha) if self.lo <= alpha <= self.hi else None

    def quadrature_error(self, fp):
        return {"train_loss": self.error}


def pos(**kw):
    return Synthetic("positional", lambda a: a, **kw)


def sem(**kw):
    return Synthetic("semantic", lambda a: 1.5 - 0.5 * a, **kw)


def test_a_crossing_is_found_by_brent_with_its_quadrature_error():
    """e_t(pos) = α, e_t(sem) = 1.5 − α/2 cross at α = 1: one boundary there, to critical_tol,
    with error (δ_pos + δ_sem) / |slope of the gap| = (2e-4 + 1e-4) / 1.5."""
    branches = {"positional": pos(error=2e-4), "semantic": sem(error=1e-4)}
    (b,) = phase_boundaries(branches, GRID, 0.3, SETTINGS)
    assert (b.below, b.above, b.method, b.omega) == ("positional", "semantic", "brent", 0.3)
    assert abs(b.alpha - 1.0) <= SETTINGS.critical_tol and b.bracket == SETTINGS.critical_tol
    assert b.error == pytest.approx(3e-4 / 1.5, rel=1e-9)


def test_alpha_c_root_is_reused_not_solved_again():
    branches = {"positional": pos(), "semantic": sem()}
    root = _critical_root(branches, GRID, SETTINGS.critical_tol)
    for b in branches.values():
        b.calls = 0
    (b,) = phase_boundaries(branches, GRID, 0.3, SETTINGS, known=(root, 0.01))
    assert b.alpha == root.alpha and b.error == 0.01
    assert sum(br.calls for br in branches.values()) == 0


def test_a_phase_that_starts_at_a_spinodal_gives_a_spinodal_boundary():
    """A mixed branch (lowest everywhere it exists) starting at α = 1.55 inside the cell [1.3, 2]:
    semantic -> mixed at its spinodal, besides the positional -> semantic crossing at 1."""
    branches = {"positional": pos(), "semantic": sem(), "mixed": Synthetic("mixed", lambda a: -1.0, lo=1.55)}
    first, second = phase_boundaries(branches, GRID, 0.3, SETTINGS)
    assert (first.below, first.above, first.method) == ("positional", "semantic", "brent")
    assert (second.below, second.above, second.method) == ("semantic", "mixed", "spinodal")
    assert abs(second.alpha - 1.55) < 1e-12 and second.bracket == pytest.approx(0.25e-3)
    assert math.isnan(second.error)


def test_a_phase_that_ends_at_a_spinodal_gives_a_spinodal_boundary():
    """The positional branch, lowest until it ends at α = 0.9 (its crossing with the semantic
    branch would be at 1, beyond its end): positional -> semantic at the spinodal."""
    branches = {"positional": pos(hi=0.9), "semantic": sem()}
    (b,) = phase_boundaries(branches, GRID, 0.3, SETTINGS)
    assert (b.below, b.above, b.method) == ("positional", "semantic", "spinodal")
    assert abs(b.alpha - 0.9) < 1e-12


def test_a_third_phase_inside_one_grid_cell_is_found():
    """pos = α, sem = 1.5 − α/2 and mixed = 0.9: on [0.8, 1.3] the ends are positional and
    semantic but mixed is lowest in between: positional -> mixed at 0.9, mixed -> semantic at 1.2."""
    branches = {"positional": pos(), "semantic": sem(), "mixed": Synthetic("mixed", lambda a: 0.9)}
    found = phase_boundaries(branches, GRID, 0.3, SETTINGS)
    assert [(b.below, b.above, b.method) for b in found] == [
        ("positional", "mixed", "brent"),
        ("mixed", "semantic", "brent"),
    ]
    assert [round(b.alpha, 3) for b in found] == [0.9, 1.2]


def test_no_boundary_without_a_change_of_phase():
    branches = {"positional": Synthetic("positional", lambda a: 0.0), "semantic": sem()}
    assert phase_boundaries(branches, GRID, 0.3, SETTINGS) == []


def test_boundary_record_round_trips(tmp_path):
    from dotattn.core.io import read_csv, write_csv

    bs = [
        PhaseBoundary(0.3, 1.2345678901234567, "positional", "mixed", "brent", 1.5e-3, 1e-4),
        PhaseBoundary(0.35, 1.55, "semantic", "mixed", "spinodal", float("nan"), 5e-4),
    ]
    assert [PhaseBoundary.from_row(b.to_row()) for b in bs] == bs
    write_csv(tmp_path / "b.csv", [b.to_row() for b in bs], BOUNDARY_COLUMNS)
    assert [PhaseBoundary.from_row(r) for r in read_csv(tmp_path / "b.csv")] == bs
    assert json.loads(json.dumps(bs[1].to_row()))["error"] is None
    # equal records (compared by row) cannot hash differently: unhashable, like BranchPoint (the
    # dataclass used to generate a field hash, and two reads of one NaN-error row hashed apart)
    with pytest.raises(TypeError):
        hash(PhaseBoundary.from_row(bs[1].to_row()))
    with pytest.raises(ValueError):
        PhaseBoundary(0.3, 1.0, "positional", "semantic", "guess")
    s = ColumnSummary(
        omega=0.3,
        alpha_c=None,
        alpha_lin=None,
        spinodal_semantic=None,
        spinodal_positional=None,
        spinodals={},
        linear_baseline_test_error=0.01,
        seconds=1.0,
        boundaries=tuple(bs),
    )
    assert ColumnSummary.from_row(json.loads(json.dumps(s.to_row()))) == s
    old = {k: v for k, v in s.to_row().items() if k != "boundaries"}  # a column cached before
    assert ColumnSummary.from_row(old).boundaries == ()


REFERENCE = Path(__file__).parent / "data" / "toy_default_alpha_c.json"
REF_COLUMNS = json.loads(REFERENCE.read_text())["columns"]
FULL_OMEGAS = tuple(float(w) for w in REF_COLUMNS)


def _default_toy(omegas, hat_form="gradient"):
    """The default toy phase diagram (default rule and α grid) at ``omegas``, with ``hat_form``."""
    import dataclasses

    from dotattn.positional_semantic.catalogue import default_quadrature
    from dotattn.positional_semantic.phase_diagram import DEFAULT_ALPHAS, run_phase_diagram

    p = Problem()
    s = SweepSettings(default_quadrature(p))
    s = dataclasses.replace(s, options=dataclasses.replace(s.options, hat_form=hat_form))
    return run_phase_diagram(p, list(omegas), DEFAULT_ALPHAS, settings=s, workers=min(2, len(omegas))), s


def _close(got, want, tol):
    return (got is None and want is None) or (got is not None and want is not None and abs(got - want) <= tol)


@reduced_and_full("omegas", ((0.3,),), (FULL_OMEGAS,))
def test_toy_default_alpha_c_alpha_lin_unchanged(omegas):
    """The default toy phase diagram (default rule and grids): α_c and α_lin as in the stored reference
    (tests/data/toy_default_alpha_c.json, made by commit ce96196 before the phase boundaries), and α_c is a
    boundary of its column. Tolerances: each root is found by Brent to critical_tol (1e-4) on the same
    rule, so two computations whose round-off differs agree to 2 critical_tol; the quadrature errors
    (|fine − coarse| of e_t over the Brent slope) move with the root and the slope, so relative 5 %.
    Reduced: the ω = 0.3 column; full (slow): every ω."""
    pd, s = _default_toy(omegas)
    for col in pd.summaries:
        ref = REF_COLUMNS[f"{col.omega:g}"]
        got = [col.alpha_c, col.alpha_lin, col.alpha_c_error, col.alpha_lin_error]
        for i, tol in enumerate((2 * s.critical_tol, 2 * s.critical_tol)):
            assert _close(got[i], ref[i], tol), (col.omega, i, got, ref)
        for i in (2, 3):
            assert _close(got[i], ref[i], 0.05 * abs(ref[i] or 0)), (col.omega, i, got, ref)
        assert col.alpha_c is not None and [
            (b.below, b.above, b.method) for b in col.boundaries if b.alpha == col.alpha_c
        ] == [("positional", "semantic", "brent")]


@reduced_and_full("omegas", ((0.3,),), (FULL_OMEGAS,))
def test_toy_default_alpha_c_alpha_lin_by_the_stein_hat_form(omegas):
    """An independent check of every stored α_c and α_lin: the same column with the hats from Stein's
    lemma (hat_form stein: no derivative of the prox) instead of the gradient form. Both are exact for a
    Gaussian average and differ only by the rule's error, which each root estimates (|fine − coarse| of
    e_t or ε_g over the slope); two values each within its own error of the exact root differ by at most
    the sum of the two errors. Measured (DOTATTN_SLOW=1): α_c agrees to ≤ 5.2e-4 at every ω (errors ≥ 1.1e-2);
    α_lin differs by 9.1e-3 at ω = 0.1 and 5.8e-3 at ω = 0.15, more than the stored (gradient-form) error
    alone (4.0e-3, 3.6e-3) but within the sum with the Stein form's (1.1e-2, 1.0e-2): the |fine − coarse|
    estimate of one form alone can understate α_lin's quadrature error there.
    Reduced: ω = 0.3 (α_c moves 3.5e-6, α_lin 6.5e-3 against errors 1.1e-2, 1.2e-2); full: every ω."""
    pd, _ = _default_toy(omegas, hat_form="stein")
    for col in pd.summaries:
        ref = REF_COLUMNS[f"{col.omega:g}"]
        for got, err, want, ref_err in (
            (col.alpha_c, col.alpha_c_error, ref[0], ref[2]),
            (col.alpha_lin, col.alpha_lin_error, ref[1], ref[3]),
        ):
            if want is None:
                assert got is None, (col.omega, got)
                continue
            assert got is not None and err is not None and ref_err is not None, (col.omega, got, err, ref_err)
            assert abs(got - want) <= err + ref_err, (col.omega, got, want, err, ref_err)


def test_rank_2_phase_diagram_through_the_cli(tmp_path, monkeypatch, capsys):
    """A small real r = 2 run (Gauss–Hermite 2 per axis, 64 nodes: a plumbing check, not physics):
    the mixed branch is followed at every α with its spinodals, every boundary is a valid record
    between the followed phases, and boundaries.csv, summary.json and the records agree. In this process,
    with the replicon on its first rule only (2^11 × 4 points; the 2^14 × 4 rule that an undecided verdict
    escalates to took 90 % of the run and is not what this test checks)."""
    from dotattn.cli.main import main

    from dotattn.positional_semantic import stability
    from dotattn.positional_semantic.output import read_boundaries, read_phase_diagram
    from dotattn.positional_semantic.records import BranchPoint

    monkeypatch.setattr(stability, "REPLICON_RULE_SIZES", stability.REPLICON_RULE_SIZES[:1])
    out = tmp_path / "pd"
    args = ["phase-diagram", "--rank", "2", "--omega", "0.3", "--alpha", "1,2", "--quad-order", "2"]
    try:
        main([*args, "--coarse-order", "0", "--workers", "1", "--quiet", "--out", str(out)])
    except SystemExit as err:
        assert err.code in (0, None), capsys.readouterr().err
    stdout = capsys.readouterr().out
    rows = read_phase_diagram(out)
    assert all(isinstance(p, BranchPoint) for p in rows)
    assert {(p.alpha, p.branch) for p in rows} == {
        (a, b) for a in (1.0, 2.0) for b in ("positional", "semantic", "mixed")
    }
    col = json.loads((out / "summary.json").read_text())["omegas"][0]
    assert set(col["spinodals"]) == {"positional", "semantic", "mixed"}
    bounds = read_boundaries(out)
    assert bounds == [PhaseBoundary.from_row(b) for b in col["boundaries"]]
    for b in bounds:
        assert b.below != b.above and {b.below, b.above} <= {"positional", "semantic", "mixed", "none"}
        assert 1.0 <= b.alpha <= 2.0 and b.omega == 0.3
    for a in (1.0, 2.0):  # the phase at each grid α: one selected record, the lowest e_t of the converged
        here = [p for p in rows if p.alpha == a and p.status == "converged"]
        sel = [p for p in rows if p.alpha == a and p.selected]
        assert here and len(sel) == 1 and sel[0].train_loss == min(p.train_loss for p in here), here
    for b in bounds:  # every boundary is printed
        assert f"boundary {b.below} -> {b.above} at alpha = {b.alpha:.4f}" in stdout, stdout
