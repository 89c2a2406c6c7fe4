"""The positional–semantic replica theory of tied low-rank dot-product attention (theory 1 of dotattn;
docs/theory.md): when does attention learn by position, when by meaning.

Roles, bottom up: the problem (:mod:`~.problem`, :mod:`~.quadrature`); the channels (:mod:`~.loss`,
:mod:`~.prox`, :mod:`~.loss_channel`, :mod:`~.regulariser`, :mod:`~.overlaps`, :mod:`~.baseline`); the
fixed-point iteration (:mod:`~.state_evolution`, :mod:`~.stability`, :mod:`~.catalogue`, :mod:`~.refine`;
one-step RSB at zero temperature, :mod:`~.rsb`);
sweeps (:mod:`~.branch`, :mod:`~.phase_diagram`); output (:mod:`~.records`, :mod:`~.labels`,
:mod:`~.output`, :mod:`~.plotting`, :mod:`~.integrity`). No torch.

Public names are imported on first use (PEP 562), so that importing the problem specification does
not pay for the solver.
"""

from importlib import import_module
from typing import Any

_LAZY = {
    "Problem": "problem",
    "check_problem": "problem",
    "TOY_A": "problem",
    "TOY_GRAM": "problem",
    "solve": "catalogue",
    "Catalogue": "catalogue",
    "CatalogueEntry": "catalogue",
    "QuadratureSpec": "catalogue",
    "default_quadrature": "catalogue",
    "FixedPoint": "state_evolution",
    "SolverOptions": "state_evolution",
    "iterate": "state_evolution",
    "rs_stability": "stability",
    "solve_rsb": "rsb",
    "RSBOptions": "rsb",
    "RSBResult": "rsb",
    "run_phase_diagram": "phase_diagram",
    "PhaseDiagram": "phase_diagram",
    "SweepSettings": "phase_diagram",
    "ColumnSummary": "phase_diagram",
    "RefineSpec": "refine",
    "BranchPoint": "records",
    "PhaseBoundary": "records",
    "Stability": "records",
    "BRANCHES": "labels",
    "branch_label": "labels",
    "write_phase_diagram": "output",
    "read_phase_diagram": "output",
    "read_phase_summaries": "output",
    "read_boundaries": "output",
    "replot_phase_diagram": "output",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
