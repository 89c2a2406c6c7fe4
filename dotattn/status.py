"""The shared vocabulary of results: run statuses and branch labels (no imports from dotattn).

Statuses (theory and ERM alike):

* ``converged``: the stopping rule was met (theory: relative overlap change < tol; ERM: relative
  change of R per step <= tol);
* ``not_converged``: the iteration / step budget was spent (ERM's training loop calls this
  ``max_steps``; :func:`from_training` maps it here);
* ``invalid`` (theory only): the overlaps left the admissible set (q, ρ − θᵀq⁻¹θ or K not
  positive definite);
* ``diverged`` (ERM only): the risk became NaN or infinite;
* ``absent`` (branch continuation only): the followed branch does not exist at this α (the
  solver converged onto another branch, named in the record's message; a followed branch whose
  solver failed keeps that failure's status).

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

__all__ = ["CONVERGED", "STATUS_CONVERGED", "NOT_CONVERGED", "INVALID", "DIVERGED", "ABSENT", "STATUSES", "BRANCHES", "NO_BRANCH",
           "branch_label", "from_training"]

CONVERGED, NOT_CONVERGED, INVALID, DIVERGED, ABSENT = "converged", "not_converged", "invalid", "diverged", "absent"
STATUSES: tuple[str, ...] = (CONVERGED, NOT_CONVERGED, INVALID, DIVERGED, ABSENT)
STATUS_CONVERGED: str = CONVERGED
"""The status of an ERM run that met its optimiser's stopping criterion (the training loop's own
word, equal to the shared :data:`CONVERGED`); :mod:`dotattn.erm.training` re-exports it."""
BRANCHES: tuple[str, ...] = ("positional", "semantic", "mixed", "uninformative")
NO_BRANCH = "none"
"""Label of a theory result that did not converge (it is on no branch)."""

_TRAINING = {"converged": CONVERGED, "max_steps": NOT_CONVERGED, "diverged": DIVERGED}


def branch_label(positional: bool, semantic: bool, rank: int | None = None,
                 positional_dominant: bool | None = None) -> str:
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
    return {(True, False): "positional", (False, True): "semantic",
            (True, True): "mixed", (False, False): "uninformative"}[(positional, semantic)]


def from_training(name: str) -> str:
    """The shared status of an ERM training status word (``max_steps`` -> ``not_converged``)."""
    return _TRAINING[name]
