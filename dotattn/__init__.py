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

from dotattn.problem import ParameterError, Problem

# the solver is imported on first use (PEP 562), so that `import dotattn` (and the CLI's help)
# does not pay for scipy
_LAZY = {"Catalogue": "dotattn.catalogue", "CatalogueEntry": "dotattn.catalogue", "QuadratureSpec": "dotattn.catalogue",
         "solve": "dotattn.catalogue", "FixedPoint": "dotattn.state_evolution", "SolverOptions": "dotattn.state_evolution"}

__all__ = ["__version__", "Catalogue", "CatalogueEntry", "FixedPoint", "ParameterError", "Problem",
           "QuadratureSpec", "SolverOptions", "solve"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dotattn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
