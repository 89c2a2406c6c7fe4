"""The catalogue's continued starts: at ω = 0.1 near α_c the informed positional start lands on another
positional fixed point (lower ‖μ‖, higher e_t) than the branch that continuation in α follows; `solve` adds the
branch continued from 0.9 α so that it reports (and selects by) the branch the phase diagram follows."""

import numpy as np
import pytest

from dotattn.positional_semantic.branch import Branch
from dotattn.positional_semantic.catalogue import (
    branch_label,
    continued_starts,
    default_quadrature,
    informed_branches,
    initialisations,
    solve,
    start_count,
)
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate

# Two solves of one fixed point (tolerance 1e-8 on the overlaps) agree in e_t to far better than this (e_t is
# stationary, so its error is second order; branch.DISTINCT_TRAIN_LOSS); the two positional fixed points differ
# by more than 1e-5.
SAME_FIXED_POINT = 1e-9


def test_continued_start_reaches_the_lower_positional_fixed_point_on_the_coarse_rule():
    """Reduced form (coarse 6-point rule, 0.5 CPU-s): at α = 0.76 the informed positional start ends on a fixed
    point with ‖μ‖ ≈ 0.15; the continued start on one with ‖μ‖ ≈ 0.27 and lower e_t. Both carry the label."""
    problem = Problem(omega=0.1)
    coarse = default_quadrature(problem).coarse_rule(problem.gaussian_dim)
    options = SolverOptions()
    inits = initialisations(problem, 0)
    assert [name for name, _ in informed_branches(inits)] == ["positional", "semantic"]
    continued = dict(continued_starts(problem, 0.76, inits, coarse, options))
    assert set(continued) == {"positional-continued", "semantic-continued"}
    informed = iterate(problem, 0.76, dict(inits)["positional"], coarse, options)
    followed = iterate(problem, 0.76, continued["positional-continued"], coarse, options)
    assert informed.converged and followed.converged
    assert branch_label(informed.overlaps, problem) == branch_label(followed.overlaps, problem) == "positional"
    norm_informed, norm_followed = np.linalg.norm(informed.overlaps.mu), np.linalg.norm(followed.overlaps.mu)
    assert norm_followed > norm_informed + 0.05, (norm_informed, norm_followed)
    assert followed.train_loss < informed.train_loss - 1e-5, (informed.train_loss, followed.train_loss)
    assert start_count(problem, 3) == len(initialisations(problem, 3)) + 2


@pytest.mark.slow
def test_catalogue_reports_the_branch_the_phase_diagram_follows():
    """Full form (default 12-point rule, about 30 CPU-s): the catalogue's lowest positional fixed point at α = 0.76
    is the phase diagram's branch continued from α = 0.70, and at α = 0.751 (below the default rule's α_c =
    0.7552) the catalogue selects the positional branch."""
    problem = Problem(omega=0.1)
    quad = default_quadrature(problem)
    D = problem.gaussian_dim
    cat = solve(problem, 0.76, n_random=0, stability=False)
    branch = Branch("positional", problem, quad.rule(D), quad.coarse_rule(D), SolverOptions())
    branch.follow([0.70, 0.72, 0.74, 0.76], [0])
    assert 0.76 in branch.points
    lowest = cat.branch("positional")
    assert lowest is not None and lowest.init == "positional-continued"
    assert abs(lowest.train_loss - branch.points[0.76].train_loss) < SAME_FIXED_POINT
    below = solve(problem, 0.751, n_random=0, stability=False)
    assert below.selected is not None and below.selected.branch == "positional"
