"""dotattn: replica theory and finite-size experiments for positional vs semantic attention.

Quick start::

    import dotattn
    problem = dotattn.Problem(omega=0.3)
    catalogue = dotattn.solve(problem, alpha=2.0)
    print(catalogue.selected)
"""

__version__ = "0.1.0"

from dotattn.problem import ParameterError, Problem

__all__ = ["__version__", "ParameterError", "Problem"]
