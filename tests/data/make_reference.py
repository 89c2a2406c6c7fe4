"""Regenerate tests/data/reference_fixed_points.json: the solver's own converged fixed points of
the toy model at omega = 0.3, stored so that any later change of the numbers is noticed.

    python tests/data/make_reference.py

Run it only when a change of the numerics is intended, and say so in the commit message.
"""

import sys
from pathlib import Path

import numpy
import scipy

from dotattn import Problem, solve
from dotattn.core.io import provenance, write_json

ALPHAS = (2.0, 1.25)


def main() -> None:
    problem = Problem(omega=0.3)
    points = []
    for alpha in ALPHAS:
        cat = solve(problem, alpha, n_random=0)
        for name in ("positional", "semantic"):
            e = cat.branch(name)
            points.append(
                {
                    "alpha": alpha,
                    "branch": name,
                    "q": float(e.q[0, 0]),
                    "m": e.m,
                    "theta": float(e.theta[0, 0]),
                    "V": float(e.V[0, 0]),
                    "train_loss": e.train_loss,
                    "test_error": e.test_error,
                }
            )
    meta = {
        "source": "the solver's own converged fixed points (dotattn.solve, default rule, n_random=0), made by "
        "`python tests/data/make_reference.py` at the git_commit below",
        "library_versions": {"python": sys.version.split()[0], "numpy": numpy.__version__, "scipy": scipy.__version__},
        "independent_check": "every number against the published values of spec_reference.json (3 %, V 8 %: "
        "tests/test_state_evolution.py::test_regression_against_published_values); the "
        "semantic e_t and eps_g also against the Stein hat form on the same rule, within the "
        "fixed point's quadrature-error estimate (test_stored_fixed_points_by_the_stein_hat_form). "
        "On the positional branch (theta = 0) the two hat forms coincide to round-off, so "
        "there only the published values are independent.",
    }
    write_json(
        Path(__file__).with_name("reference_fixed_points.json"),
        {**meta, "fixed_points": points, **provenance({"problem": problem.to_dict(), "n_random": 0})},
    )


if __name__ == "__main__":
    main()
