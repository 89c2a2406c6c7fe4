"""dotattn: replica theory and finite-size experiments for positional vs semantic attention.

Quick start::

    import dotattn
    problem = dotattn.Problem(omega=0.3)          # the paper's toy model (L = 2, r = r_t = 1)
    catalogue = dotattn.solve(problem, alpha=2.0)  # every fixed point, the selected one, the baseline
    best = catalogue.selected
    print(best.branch, best.test_error, catalogue.linear_baseline_test_error)

The phase diagram: :func:`dotattn.positional_semantic.phase_diagram.run_phase_diagram`; finite-size experiments:
:mod:`dotattn.erm`.
"""

from dotattn.core.validation import ParameterError
from dotattn.core.version import __version__
from dotattn.positional_semantic.problem import Problem

# the solver is imported on first use (PEP 562), so that `import dotattn` (and the CLI's help)
# does not pay for scipy
_PS = "dotattn.positional_semantic"
_LAZY = {
    "Catalogue": f"{_PS}.catalogue",
    "CatalogueEntry": f"{_PS}.catalogue",
    "QuadratureSpec": f"{_PS}.catalogue",
    "solve": f"{_PS}.catalogue",
    "FixedPoint": f"{_PS}.state_evolution",
    "SolverOptions": f"{_PS}.state_evolution",
}

__all__ = [
    "__version__",
    "Catalogue",
    "CatalogueEntry",
    "FixedPoint",
    "ParameterError",
    "Problem",
    "QuadratureSpec",
    "SolverOptions",
    "solve",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dotattn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
