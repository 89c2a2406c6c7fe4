import numpy as np
import pytest

from dotattn.core.validation import ParameterError, parse_matrix
from dotattn.positional_semantic.problem import Problem


def test_defaults_are_the_toy_model():
    p = Problem()
    assert (p.L, p.rank, p.teacher_rank, p.sigma, p.ridge) == (2, 1, 1, 0.5, 0.01)
    np.testing.assert_array_equal(p.A, [[0.6, 0.4], [0.4, 0.6]])
    np.testing.assert_array_equal(p.G, [[1, -1], [-1, 1]])
    assert p.is_toy_layout and p.gaussian_dim == 4
    np.testing.assert_allclose(p.rho, 0.25 * np.eye(1))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(omega=1.5), "omega"),
        (dict(omega=-0.1), "omega"),
        (dict(sigma=0), "sigma"),
        (dict(sigma=-1), "sigma"),
        (dict(ridge=0), "lambda"),
        (dict(ridge=-0.1), "lambda"),
        (dict(L=1), "L"),
        (dict(rank=0), "rank"),
        (dict(teacher_rank=0), "teacher_rank"),
        (dict(positional_attention=[[0.6, 0.4, 0.0], [0.4, 0.6, 0.0]]), "A"),
        (dict(positional_attention=[[1.2, -0.2], [0.4, 0.6]]), "A"),
        (dict(positional_attention=[[0.6, 0.5], [0.4, 0.6]]), "A"),
        (dict(positional_gram=[[1, 2], [2, 1]]), "positional_gram"),
        (dict(positional_gram=[[1, 0.5], [0.4, 1]]), "positional_gram"),
        (dict(positional_gram=[[1, 0, 0], [0, 1, 0], [0, 0, 1]]), "positional_gram"),
        (dict(sigma=float("nan")), "sigma"),
        (dict(omega=float("inf")), "omega"),
        (dict(positional_attention=[[np.nan, 0.4], [0.4, 0.6]]), "A"),
        (dict(L=3), "A"),
    ],
)
def test_invalid_input_names_the_field(kwargs, field):
    with pytest.raises(ParameterError) as err:
        Problem(**kwargs)
    msg = str(err.value)
    assert field in msg and "\n" not in msg


def test_stochastic_tolerance_and_general_L():
    Problem(positional_attention=[[0.6, 0.4 + 5e-10], [0.4, 0.6]])
    p = Problem(L=3, positional_attention=[[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    np.testing.assert_array_equal(p.G, np.eye(3))
    assert not p.is_toy_layout


def test_round_trip_and_parse_matrix():
    p = Problem(omega=0.2, sigma=0.7)
    assert Problem.from_dict(p.to_dict()) == p
    assert parse_matrix("0.3,0.7;0.8,0.2") == [[0.3, 0.7], [0.8, 0.2]]
    with pytest.raises(ParameterError):
        parse_matrix("a,b;c,d")
