"""The seams between stages: typed records, validation in the configurations, one status
vocabulary, one labeller, failures that keep the last iterate, plotting without pyplot state."""

import json

import numpy as np
import pytest
from clitools import run_python

from dotattn.core.status import STATUSES, from_training
from dotattn.core.validation import ParameterError
from dotattn.positional_semantic.catalogue import QuadratureSpec, default_quadrature
from dotattn.positional_semantic.labels import branch_label
from dotattn.positional_semantic.overlaps import InvalidOverlaps, overlaps_from_scalars
from dotattn.positional_semantic.phase_diagram import SweepSettings, check_grids
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import gauss_hermite
from dotattn.positional_semantic.records import BranchPoint
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate


@pytest.mark.parametrize(
    "make, word",
    [
        (lambda: SolverOptions(tol=0.0), "tol"),
        (lambda: SolverOptions(damping=1.0), "damping"),
        (lambda: SolverOptions(warm_damping=-0.1), "warm_damping"),
        (lambda: SolverOptions(max_iter=0), "max_iter"),
        (lambda: SolverOptions(hat_form="x"), "hat_form"),
        (lambda: SolverOptions(global_every=0), "global_every"),
        (lambda: SolverOptions(anderson=-1), "anderson"),
        (lambda: SolverOptions(random_starts=-1), "random_starts"),
        (lambda: QuadratureSpec("simpson"), "kind"),
        (lambda: QuadratureSpec(order=0), "order"),
        (lambda: QuadratureSpec(coarse_order=0), "coarse_order"),
        (lambda: QuadratureSpec("qmc", scramblings=1), "scramblings"),
        (lambda: SweepSettings(QuadratureSpec(), spinodal_tol=0.0), "spinodal_tol"),
        (lambda: SweepSettings(QuadratureSpec(), critical_tol=-1.0), "critical_tol"),
        (lambda: SweepSettings("gauss-hermite"), "quadrature"),
        (lambda: check_grids([1.2], [1.0]), "omega"),
        (lambda: check_grids([0.3], [0.0]), "alpha"),
    ],
)
def test_configurations_validate_themselves(make, word):
    with pytest.raises(ParameterError, match=word) as err:
        make()
    assert "\n" not in str(err.value) and "--" not in str(err.value)  # one line, no CLI flag


def test_problem_dependent_checks():
    with pytest.raises(ParameterError, match="stein"):
        SolverOptions(hat_form="stein").check(Problem(rank=2))
    with pytest.raises(
        ParameterError, match=r"quadrature order must be in \[1, 6\] for the gauss-hermite rule in 8 dim"
    ):
        QuadratureSpec("gauss-hermite", 20).check(Problem(rank=3))
    assert default_quadrature(Problem(), "qmc") == QuadratureSpec.standard("qmc")
    assert default_quadrature(Problem(), "gauss-hermite") == default_quadrature(Problem())


def test_one_status_vocabulary_and_one_labeller():
    assert from_training("max_steps") == "not_converged" and from_training("diverged") == "diverged"
    assert {from_training(s) for s in ("converged", "max_steps", "diverged")} <= set(STATUSES)
    assert [branch_label(p, s) for p, s in ((1, 0), (0, 1), (1, 1), (0, 0))] == [
        "positional",
        "semantic",
        "mixed",
        "uninformative",
    ]


def test_failure_keeps_the_last_iterate_and_the_step_count(monkeypatch):
    import dotattn.positional_semantic.state_evolution as se

    toy = Problem(omega=0.3)
    calls = {"n": 0}
    real = se.hat_update

    def failing(overlaps, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise InvalidOverlaps("test")
        return real(overlaps, *args, **kwargs)

    monkeypatch.setattr(se, "hat_update", failing)
    init = overlaps_from_scalars(toy, 0.9, 0.0, 15.0, 0.35)
    fp = iterate(toy, 2.0, init, gauss_hermite(4, 6), SolverOptions(anderson=0))
    assert fp.status == "invalid" and fp.iterations == 4 and np.isfinite(fp.residual)
    assert not np.allclose(fp.overlaps.q, init.q) and np.isnan(fp.train_loss)


def test_branch_point_rows_round_trip_through_json_and_csv(tmp_path):
    from dotattn.core.io import read_csv, write_csv
    from dotattn.positional_semantic.records import BRANCH_POINT_COLUMNS

    p = BranchPoint(
        omega=0.3,
        alpha=1.5,
        branch="positional",
        status="converged",
        selected=True,
        iterations=12,
        residual=1e-9,
        q=np.array([[0.05]]),
        V=np.array([[12.0]]),
        theta=np.array([[0.0]]),
        mu=np.array([[-0.25], [0.25]]),
        train_loss=0.0045,
        test_error=0.0035,
    )
    row = p.to_row()
    assert row["m"] == -0.25 and row["m_norm"] == 0.25 and row["q"] == [[0.05]] and row["mu"] == [[-0.25], [0.25]]
    assert BranchPoint.from_row(json.loads(json.dumps(row))) == p
    write_csv(tmp_path / "x.csv", [row], BRANCH_POINT_COLUMNS)
    (cells,) = read_csv(tmp_path / "x.csv")
    assert BranchPoint.from_row(cells) == p


def test_plotting_leaves_pyplot_and_the_backend_alone(tmp_path):
    code = (
        "import sys, matplotlib; raw = lambda: dict.__getitem__(matplotlib.rcParams, 'backend'); b = raw(); "
        "import dotattn.positional_semantic.plotting, dotattn.theory_vs_erm.output, dotattn.cli.phase, dotattn.cli.compare; "
        "assert raw() == b and 'matplotlib.pyplot' not in sys.modules"
    )
    r = run_python(code, tmp_path)
    assert r.returncode == 0, r.stderr
    from pathlib import Path

    import dotattn

    for f in Path(dotattn.__file__).parent.rglob("*.py"):
        assert "matplotlib.use(" not in f.read_text() and "import matplotlib.pyplot" not in f.read_text(), f


def test_figures_are_built_from_records():
    from matplotlib.figure import Figure

    from dotattn.positional_semantic import plotting
    from dotattn.positional_semantic.phase_diagram import ColumnSummary

    pts = [
        BranchPoint(
            omega=0.3,
            alpha=a,
            branch=b,
            status="converged",
            selected=(b == "semantic") == (a > 1),
            iterations=1,
            residual=0.0,
            q=np.eye(1),
            V=np.eye(1),
            theta=np.array([[0.1 * (b == "semantic")]]),
            mu=np.array([[0.2], [-0.2]]) * (b == "positional"),
            train_loss=a,
            test_error=0.01 / a,
        )
        for a in (0.5, 1.5)
        for b in ("positional", "semantic")
    ]
    s = ColumnSummary(
        omega=0.3,
        alpha_c=1.0,
        alpha_lin=None,
        spinodal_semantic=None,
        spinodal_positional=None,
        spinodals={},
        linear_baseline_test_error=0.005,
        seconds=0.0,
    )
    for fig in (plotting.figure_test_error(pts, s), plotting.figure_overlaps(pts, s, 0.5)):
        assert isinstance(fig, Figure)
    a, v, sel = plotting.branch_series(pts, 0.3, "positional", "m_norm")
    assert a.tolist() == [0.5, 1.5] and v.tolist() == [0.2, 0.2] and sel.tolist() == [True, False]


def test_train_erm_rejects_bad_input_without_importing_torch(tmp_path):
    code = (
        "import sys\nfrom dotattn.cli.main import main\n"
        f"try:\n    main(['train-erm', '--seeds', '0', '--out', {str(tmp_path / 'x')!r}])\n"
        "except SystemExit as e:\n    assert e.code == 2 and 'torch' not in sys.modules, sys.modules.get('torch')\n"
    )
    r = run_python(code, tmp_path)
    assert r.returncode == 0 and "seeds must be" in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()


def test_quadrature_check_record_round_trips_through_json():
    from dotattn.positional_semantic.catalogue import QuadratureCheck

    done = QuadratureCheck(
        branch="semantic",
        init="semantic (informed)",
        finer_rule={"kind": "gauss-hermite", "order": 16, "nodes": 65536},
        status="converged",
        change={"q": 1e-5, "V": 2e-3, "theta": 3e-6, "mu": 0.0, "train_loss": -1e-7, "test_error": 4e-7},
        finer_train_loss=0.0036,
        finer_test_error=0.0014,
    )
    failed = QuadratureCheck(
        branch="positional",
        init="random 3",
        finer_rule={"kind": "qmc", "order": 14, "nodes": 131072},
        status="not_converged",
    )
    for c in (done, failed):
        row = json.loads(json.dumps(c.to_row()))
        back = QuadratureCheck.from_row(row)
        assert back.to_row() == c.to_row() and back.change == c.change
    assert "change" not in failed.to_row()
