"""The Problem's architecture variants: validation, round trip, and refusal where not handled."""

import pytest

from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.problem import PROBLEM_KEYS, Problem, require_variant


def test_defaults_keep_the_old_dict():
    # folders written before the variants existed must still describe (and compare equal to) their problem
    assert tuple(Problem().to_dict()) == PROBLEM_KEYS


@pytest.mark.parametrize(
    "changes", [dict(student="untied"), dict(token_correlation=0.25), dict(student="untied", token_correlation=-0.5)]
)
def test_round_trip(changes):
    p = Problem(omega=0.2, **changes)
    assert Problem.from_dict(p.to_dict()) == p
    assert p.replace(omega=0.3).omega == 0.3 and p.replace(omega=0.3).student == p.student


@pytest.mark.parametrize(
    "changes, word",
    [
        (dict(student="shared"), "student"),
        (dict(token_correlation=1.0), "token_correlation"),
        (dict(token_correlation=-1.0), "token_correlation"),
        (dict(token_correlation=float("nan")), "token_correlation"),
    ],
)
def test_bad_values_name_the_parameter(changes, word):
    with pytest.raises(ParameterError, match=word):
        Problem(**changes)


def test_lower_correlation_bound_depends_on_L():
    A = [[1 / 3] * 3] * 3
    Problem(L=3, positional_attention=A, token_correlation=-0.49)
    with pytest.raises(ParameterError, match=r"\(-0.5, 1\)"):
        Problem(L=3, positional_attention=A, token_correlation=-0.5)


def test_require_variant():
    require_variant(Problem(), "x")
    with pytest.raises(ParameterError, match="student"):
        require_variant(Problem(student="untied"), "x")
    with pytest.raises(ParameterError, match="token_correlation"):
        require_variant(Problem(token_correlation=0.1), "x")
    require_variant(Problem(student="untied", token_correlation=0.1), "x", students=("tied", "untied"), correlated=True)
