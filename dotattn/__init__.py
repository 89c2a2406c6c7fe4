"""dotattn: replica theory and finite-size experiments for positional vs semantic attention.

Quick start::

    import dotattn
    problem = dotattn.Problem(omega=0.3)          # the paper's toy model (L = 2, r = r_t = 1)
    catalogue = dotattn.solve(problem, alpha=2.0)  # every fixed point, the selected one, the baseline
    best = catalogue.selected
    print(best.branch, best.test_error, catalogue.linear_baseline_test_error)

The phase diagram: :func:`dotattn.phase_diagram.run_phase_diagram`; finite-size experiments:
:mod:`dotattn.erm`.
"""

__version__ = "0.1.0"

from dotattn.catalogue import Catalogue, CatalogueEntry, QuadratureSpec, solve
from dotattn.problem import ParameterError, Problem
from dotattn.state_evolution import FixedPoint, SolverOptions

__all__ = ["__version__", "Catalogue", "CatalogueEntry", "FixedPoint", "ParameterError", "Problem",
           "QuadratureSpec", "SolverOptions", "solve"]
