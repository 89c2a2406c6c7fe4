"""The default phase diagram, recomputed, agrees with the committed ``results/phase_diagram``.

Guards every speed lever of the main job: α_c and α_lin within their stated standard errors, each
refinement rule's root within ``REFINED_ROOT_TOL`` of the committed root of the same rule, the sweep
rule's roots and spinodals within their tolerances, and every grid record (status, selection, RS
verdicts, overlaps, e_t, ε_g, replicon, jump weight) within its tolerance
(:func:`dotattn.positional_semantic.output.disagreements`, which states each tolerance and its reason).

Reduced form (default, ~10 s CPU): the ω = 0.3 column on the grid cells that bracket α_c and α_lin
(α = 1.2 … 1.5, so Brent's brackets and the refinement's starts are the committed ones) with the first
two refinement rules (seeds 1000, 1001), compared rule by rule. Full form (DOTATTN_SLOW=1): the whole
default phase diagram (10 ω × 25 α, 8 rules; minutes on 2 cores).
"""

from __future__ import annotations

from pathlib import Path

from conftest import reduced_and_full

from dotattn.positional_semantic.catalogue import default_quadrature
from dotattn.positional_semantic.output import disagreements, read_phase_diagram
from dotattn.positional_semantic.phase_diagram import DEFAULT_ALPHAS, DEFAULT_OMEGAS, SweepSettings, run_phase_diagram
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.refine import RefineSpec

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "phase_diagram"


@reduced_and_full("omegas, alphas, rules", ((0.3,), (1.2, 1.3, 1.4, 1.5), 2), (DEFAULT_OMEGAS, DEFAULT_ALPHAS, 8))
def test_phase_diagram_agrees_with_the_committed_one(omegas, alphas, rules):
    problem = Problem()
    settings = SweepSettings(default_quadrature(problem), refine=RefineSpec(rules=rules))
    pd = run_phase_diagram(problem, omegas, alphas, settings=settings, workers=2 if len(omegas) > 1 else 1)
    assert disagreements(list(pd.summaries), list(pd.rows), COMMITTED) == []


def test_disagreements_sees_a_moved_record_and_a_moved_root():
    """The check can fail: a committed column with one record's e_t moved by 1e-4 relative and α_c moved by
    two standard errors is reported on both counts."""
    from dataclasses import replace

    from dotattn.positional_semantic.output import read_phase_summaries

    summary = next(s for s in read_phase_summaries(COMMITTED) if s.omega == 0.3)
    rows = [p for p in read_phase_diagram(COMMITTED, 0.3) if p.alpha in (1.2, 1.3)]
    assert disagreements([summary], rows, COMMITTED) == []  # the committed folder agrees with itself
    moved = replace(summary, alpha_c=summary.alpha_c + 2 * summary.alpha_c_error)
    rows[0] = replace(rows[0], train_loss=rows[0].train_loss * (1 + 1e-4))
    found = disagreements([moved], rows, COMMITTED)
    assert len(found) == 2 and "alpha_c" in found[0] and "train_loss" in found[1]
