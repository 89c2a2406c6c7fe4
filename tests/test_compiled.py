"""The compiled prox Newton kernel (numba, a default dependency) against the vectorised one.

It runs the same steps node by node, so the minimisers, values and iteration counts must agree to rounding
(the exponential comes from libm there and numpy here: at most a few ulp per evaluation, which Newton's
quadratic convergence to gtol 1e-11 does not amplify; 1e-12 absolute on ĥ and 1e-15 on the values leave a
factor > 100). Nodes drawn so that every branch of the kernel runs: indefinite Hessians (the eigenvalue
solve), backtracking, and starts far from the minimum.
"""

from __future__ import annotations

import numpy as np
import pytest

from dotattn.positional_semantic import prox as P
from dotattn.positional_semantic.loss import teacher_attention
from dotattn.positional_semantic.problem import Problem

compiled = pytest.importorskip("dotattn.positional_semantic.compiled")
if not compiled.AVAILABLE:
    pytest.skip("numba cannot be imported here (it is a dependency: pip install .)", allow_module_level=True)


@pytest.mark.parametrize("V", [0.5, 12.0, 40.0])
def test_compiled_newton_is_the_vectorised_newton(V):
    rng = np.random.default_rng(3)
    p = Problem(omega=0.2)
    M = 4000
    centre = rng.normal(scale=1.5, size=(M, 2, 1))
    target = teacher_attention(rng.normal(scale=p.sigma, size=(M, 2, 1)), p)
    h0 = centre + rng.normal(scale=3.0, size=(M, 2, 1))
    args = (h0, centre, target, 1.0 / V, p.sigma**2, 100, 1e-11)
    h_np, v_np, it_np = P._newton_toy(*args)
    h_nb, v_nb, it_nb = compiled.newton_toy(*args)
    assert np.max(np.abs(h_nb - h_np)) <= 1e-12 and np.max(np.abs(v_nb - v_np)) <= 1e-15
    assert it_nb == it_np


def test_the_prox_uses_the_compiled_kernel_and_agrees():
    """The public prox (multi-start global search) gives the same global minimisers with either kernel."""
    from unittest import mock

    rng = np.random.default_rng(5)
    p = Problem(omega=0.3)
    centre = rng.normal(scale=0.6, size=(3000, 2, 1))
    target = teacher_attention(rng.normal(scale=p.sigma, size=(3000, 2, 1)), p)
    V = np.array([[11.0]])
    fast = P.prox(centre, target, V, p)
    with mock.patch.object(compiled, "AVAILABLE", False):
        slow = P.prox(centre, target, V, p)
    assert np.max(np.abs(fast.h - slow.h)) <= 1e-12 and np.max(np.abs(fast.value - slow.value)) <= 1e-15
