"""API types (issue 46): one check_real / check_bool / check_choice in dotattn.core.validation, used by the
public entry points: a bool is not a number, a string is not a number, a flag is a bool; the refusal is a
ParameterError in one line, before any computation. A property test feeds random bad values to public
entry points and to command-line options: ParameterError, or exit status 2 with one line, and no folder."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import numpy as np
import pytest

from dotattn.core.validation import ParameterError, check_bool, check_choice, check_int, check_real

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# a few examples each: these are refusals before any computation (milliseconds), and the default suite
# stays quick; derandomized so that a run is reproducible
FAST = settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

NOT_NUMBERS = st.one_of(
    st.booleans(),
    st.text(max_size=6),
    st.none(),
    st.complex_numbers(allow_nan=False, allow_infinity=False).filter(lambda z: z.imag != 0),
    st.lists(st.floats(allow_nan=False), max_size=3),
    st.just(np.bool_(True)),
)
NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf, np.float64("nan")])
NOT_BOOLS = st.one_of(st.text(max_size=6), st.integers(), st.floats(allow_nan=False), st.none())


# ---------------------------------------------------------------------------------------------------
# the checks themselves
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [True, False, np.bool_(False), "0.5", "1", b"1", None, 1j, [1.0], {}])
def test_check_real_refuses_what_is_not_a_real_number(value):
    with pytest.raises(ParameterError, match=r"^x must be a real number in \[0, 1\], got "):
        check_real("x", value, 0, 1)


@pytest.mark.parametrize("value", [0, 1, 0.5, np.float32(0.25), np.int64(1), np.array(0.5)])
def test_check_real_takes_real_numbers(value):
    assert check_real("x", value, 0, 1) == float(value)


def test_check_real_range_and_finiteness():
    with pytest.raises(ParameterError, match="finite"):
        check_real("x", math.nan)
    with pytest.raises(ParameterError, match=r"x must be in \(0, 1\], got 0"):
        check_real("x", 0, 0, 1, low_open=True)
    with pytest.raises(ParameterError, match="x must be >= 2"):
        check_real("x", 1, 2)


@pytest.mark.parametrize("value", ["no", "False", 0, 1, 1.0, None, [True]])
def test_check_bool_refuses_what_is_not_a_bool(value):
    with pytest.raises(ParameterError, match=r"^flag must be True or False, got "):
        check_bool("flag", value)


def test_check_bool_and_choice_take_their_values():
    assert check_bool("flag", np.bool_(True)) is True and check_bool("flag", False) is False
    assert check_choice("c", "a", ("a", "b")) == "a"
    for bad in ("A", "c", 1, None, True):
        with pytest.raises(ParameterError, match=r"^c must be one of a, b, got "):
            check_choice("c", bad, ("a", "b"))


@pytest.mark.parametrize("value", ["3", True, 3.5, None])
def test_check_int_refuses_strings_and_bools(value):
    with pytest.raises(ParameterError, match="must be an integer"):
        check_int("n", value, 0)


# ---------------------------------------------------------------------------------------------------
# public entry points: the probe's cases
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def problem():
    from dotattn.positional_semantic.problem import Problem

    return Problem()


@pytest.mark.parametrize("stability", ["no", 0, 1, None, "False"])
def test_solve_refuses_a_flag_that_is_not_a_bool(problem, stability):
    from dotattn import solve

    with pytest.raises(ParameterError, match="stability must be True or False"):
        solve(problem, 2, stability=stability)
    with pytest.raises(ParameterError, match="check_quadrature must be True or False"):
        solve(problem, 2, check_quadrature=stability)


@pytest.mark.parametrize("alpha", [True, "2", None, [2.0]])
def test_solve_refuses_an_alpha_that_is_not_a_number(problem, alpha):
    from dotattn import solve

    with pytest.raises(ParameterError, match="alpha must be a real number"):
        solve(problem, alpha)


@pytest.mark.parametrize(
    "inits", ["positional", [], [("a", 1)], [("a",)], [(1, None)], {"a": 1}, [("x", "not overlaps")]]
)
def test_solve_refuses_malformed_inits(problem, inits):
    from dotattn import solve

    with pytest.raises(ParameterError, match="inits"):
        solve(problem, 2, inits=inits)


def test_solve_refuses_inits_of_another_shape(problem):
    from dotattn import solve
    from dotattn.positional_semantic.catalogue import initialisations
    from dotattn.positional_semantic.problem import Problem

    other = initialisations(Problem(rank=2), 0, 0)
    with pytest.raises(ParameterError, match="q has shape"):
        solve(problem, 2, inits=other)


@pytest.mark.parametrize("cache_dir", [3, 1.5, True, ["a"], b"x"])
def test_run_phase_diagram_refuses_a_cache_dir_that_is_not_a_path(problem, cache_dir):
    from dotattn.positional_semantic.phase_diagram import run_phase_diagram

    with pytest.raises(ParameterError, match="cache_dir must be a folder path"):
        run_phase_diagram(problem, [0.1], [1.0], cache_dir=cache_dir)


def test_run_study_refuses_wrong_types(problem):
    pytest.importorskip("torch")
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, run_study

    config = AlphaCConfig(omegas=(0.1,), ds=(20,), alphas=(0.5, 1.0), seeds=2)
    with pytest.raises(ParameterError, match="cache_dir must be a folder path"):
        run_study(problem, config, cache_dir=3)
    with pytest.raises(ParameterError, match="supplied must be a mapping"):
        run_study(problem, config, supplied=[1, 2])
    with pytest.raises(ParameterError, match="theory must be True or False"):
        run_study(problem, config, theory="no")


@pytest.mark.parametrize(("name", "value"), [("paired", "no"), ("nested", 1), ("teacher", "Gaussian")])
def test_alpha_c_config_refuses_wrong_flags_and_choices(name, value):
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig

    with pytest.raises(ParameterError, match=name):
        AlphaCConfig(omegas=(0.1,), ds=(20,), alphas=(0.5, 1.0), seeds=2, **{name: value})


def test_write_alpha_c_study_refuses_what_is_not_a_study(tmp_path):
    from dotattn.theory_vs_erm.output import write_alpha_c_study

    with pytest.raises(ParameterError, match="study must be a dotattn.theory_vs_erm.alpha_c.AlphaCStudy"):
        write_alpha_c_study(object(), tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------------
# property: random bad values, public entry points
# ---------------------------------------------------------------------------------------------------
@FAST
@given(value=st.one_of(NOT_NUMBERS, NOT_FINITE))
def test_property_solve_alpha(problem, value):
    from dotattn import solve

    with pytest.raises(ParameterError) as err:
        solve(problem, value)
    assert "\n" not in str(err.value) and "alpha" in str(err.value)


@FAST
@given(value=NOT_BOOLS)
def test_property_solve_flags(problem, value):
    from dotattn import solve

    for name in ("stability", "check_quadrature"):
        with pytest.raises(ParameterError) as err:
            solve(problem, 1.0, **{name: value})
        assert "\n" not in str(err.value) and name in str(err.value)


@FAST
@given(name=st.sampled_from(["omega", "sigma", "ridge"]), value=st.one_of(NOT_NUMBERS, NOT_FINITE))
def test_property_problem_numbers(name, value):
    from dotattn.positional_semantic.problem import Problem

    with pytest.raises(ParameterError) as err:
        Problem(**{name: value})
    assert "\n" not in str(err.value)


@FAST
@given(
    name=st.sampled_from(["seeds", "first_seed", "steps", "seed_chunk", "level", "tol"]),
    value=st.one_of(NOT_NUMBERS, NOT_FINITE),
)
def test_property_alpha_c_config_numbers(name, value):
    from dotattn.theory_vs_erm.alpha_c import AlphaCConfig

    with pytest.raises(ParameterError) as err:
        AlphaCConfig(omegas=(0.1,), ds=(20,), alphas=(0.5, 1.0), **{name: value})
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------------
# property: random bad values, command-line options (in process: the refusals come before any work)
# ---------------------------------------------------------------------------------------------------
BAD_TEXT = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "1e400", "x", "", "true", "0x10", "1,2", "1:2", "--"]),
    st.text(alphabet="abc-+.,:eE0 ", min_size=1, max_size=5).filter(lambda t: not _is_number(t)),
)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


COMMANDS = {
    # option: (command line before it, after it); every value the property draws is refused
    "solve --alpha": (["solve", "--alpha"], []),
    "solve --omega": (["solve", "--alpha", "1", "--omega"], []),
    "solve --sigma": (["solve", "--alpha", "1", "--sigma"], []),
    "phase-diagram --omega": (["phase-diagram", "--omega"], []),
    "train-erm --d": (["train-erm", "--alpha", "1", "--d"], []),
    "train-erm --alpha": (["train-erm", "--d", "20", "--alpha"], []),
    "erm-alpha-c --seeds": (["erm-alpha-c", "--seeds"], []),
    "aim state-evolution --rho": (["aim", "state-evolution", "--rho"], []),
    "paths theory --N": (["paths", "theory", "--N"], []),
}


def _run_cli(argv: list[str]) -> tuple[int, str]:
    from dotattn.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


@FAST
@given(option=st.sampled_from(sorted(COMMANDS)), value=BAD_TEXT)
def test_property_cli_options(option, value, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "out"
    before, after = COMMANDS[option]
    argv = [*before, value, *after]
    if argv[0] not in ("solve",):
        argv += ["--out", str(out)]
    code, err = _run_cli(argv)
    lines = err.strip().splitlines()
    assert code == 2, (argv, code, err)
    assert len(lines) == 1 and "Traceback" not in err, (argv, err)
    assert not out.exists() and not list(Path(out.parent).iterdir()), argv
