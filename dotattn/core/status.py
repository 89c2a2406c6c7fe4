"""The shared vocabulary of results: run statuses (no imports from dotattn).

Statuses (theory and ERM alike):

* ``converged``: the stopping rule was met (theory: relative overlap change < tol; ERM: relative
  change of R per step <= tol for gd / adam, relative stationarity <= tol for lbfgs / batched-lbfgs);
* ``not_converged``: the iteration / step budget was spent (ERM's training loop calls this
  ``max_steps``; :func:`from_training` maps it here);
* ``stalled`` (ERM only): the optimiser stopped making progress before its stopping rule was met
  (the L-BFGS line search found no lower risk, at a point that is not stationary to ``tol``); like
  ``not_converged`` it is a failure: no reader counts it as converged;
* ``invalid`` (theory only): the overlaps left the admissible set (q, ρ − θᵀq⁻¹θ or K not
  positive definite);
* ``diverged`` (ERM only): the risk became NaN or infinite;
* ``absent`` (branch continuation only): the followed branch does not exist at this α (the
  solver converged onto another branch, named in the record's message; a followed branch whose
  solver failed keeps that failure's status).
"""

from __future__ import annotations

__all__ = [
    "CONVERGED",
    "STATUS_CONVERGED",
    "NOT_CONVERGED",
    "INVALID",
    "DIVERGED",
    "ABSENT",
    "STALLED",
    "STATUSES",
    "ERM_STATUSES",
    "from_training",
]

CONVERGED, NOT_CONVERGED, INVALID, DIVERGED, ABSENT = "converged", "not_converged", "invalid", "diverged", "absent"
STALLED = "stalled"
STATUSES: tuple[str, ...] = (CONVERGED, NOT_CONVERGED, INVALID, DIVERGED, ABSENT, STALLED)
ERM_STATUSES: tuple[str, ...] = (CONVERGED, NOT_CONVERGED, DIVERGED, STALLED, "max_steps")
"""The status words an ERM row can hold: :func:`from_training` of every training status word, and
training's own ``max_steps`` (= ``not_converged``), which rows written by older versions hold."""
STATUS_CONVERGED: str = CONVERGED
"""The status of an ERM run that met its optimiser's stopping criterion (the training loop's own
word, equal to the shared :data:`CONVERGED`); :mod:`dotattn.core.training` re-exports it."""

_TRAINING = {"converged": CONVERGED, "max_steps": NOT_CONVERGED, "diverged": DIVERGED, "stalled": STALLED}


def from_training(name: str) -> str:
    """The shared status of an ERM training status word (``max_steps`` -> ``not_converged``)."""
    return _TRAINING[name]
