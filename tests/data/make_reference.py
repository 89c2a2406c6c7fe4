"""Regenerate tests/data/reference_fixed_points.json: the solver's own converged fixed points of
the toy model at omega = 0.3, stored so that any later change of the numbers is noticed.

    python tests/data/make_reference.py

Run it only when a change of the numerics is intended, and say so in the commit message.
"""

from pathlib import Path

from dotattn import Problem, solve
from dotattn.io import provenance, write_json

ALPHAS = (2.0, 1.25)


def main() -> None:
    problem = Problem(omega=0.3)
    points = []
    for alpha in ALPHAS:
        cat = solve(problem, alpha, n_random=0)
        for name in ("positional", "semantic"):
            e = cat.branch(name)
            points.append({"alpha": alpha, "branch": name, "q": float(e.q[0, 0]), "m": e.m,
                           "theta": float(e.theta[0, 0]), "V": float(e.V[0, 0]),
                           "train_loss": e.train_loss, "test_error": e.test_error})
    write_json(Path(__file__).with_name("reference_fixed_points.json"),
               {"fixed_points": points, **provenance({"problem": problem.to_dict(), "n_random": 0})})


if __name__ == "__main__":
    main()
