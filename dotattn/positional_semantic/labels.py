"""Branch labels of the positional–semantic theory and its ERM runs.

Branch labels: :data:`BRANCHES`, from whether a state carries a positional and/or a semantic
overlap (:func:`branch_label`, the one labeller; each caller decides what "carries" means, e.g.
the theory's exact zero up to rounding or ERM's finite-size thresholds). A student of rank 1 has
one column, hence one informed direction: ERM (:func:`dotattn.erm.records.run_branch`) passes the
rank, and a rank-1 run that carries both overlaps above its thresholds (at finite d the other
overlap is noise) gets the label of the *dominant* one, never "mixed". The theory passes no rank:
its zeros are exact (θ = 0 and μ = 0 are invariant subspaces of the fixed-point equations), so a
rank-1 fixed point carrying both would be a finding and is reported as "mixed" (none is known).
"""

from __future__ import annotations

__all__ = ["BRANCHES", "NO_BRANCH", "branch_label"]

BRANCHES: tuple[str, ...] = ("positional", "semantic", "mixed", "uninformative")
NO_BRANCH = "none"
"""Label of a theory result that did not converge (it is on no branch)."""


def branch_label(
    positional: bool, semantic: bool, rank: int | None = None, positional_dominant: bool | None = None
) -> str:
    """positional / semantic / mixed / uninformative from whether a state carries a positional
    overlap (μ ≠ 0) and a semantic one (θ ≠ 0).

    ``rank``: the student's rank, if the caller knows it. A rank-1 state carrying both is not
    mixed (one column, one informed direction): it is ``positional`` if ``positional_dominant``
    else ``semantic`` (the caller says which overlap dominates; required in that case).
    """
    positional, semantic = bool(positional), bool(semantic)
    if positional and semantic and rank == 1:
        if positional_dominant is None:
            raise ValueError("branch_label: a rank-1 state carrying both overlaps needs positional_dominant")
        return "positional" if positional_dominant else "semantic"
    return {
        (True, False): "positional",
        (False, True): "semantic",
        (True, True): "mixed",
        (False, False): "uninformative",
    }[(positional, semantic)]
