"""`dotattn compare` on a tiny real ERM run, theory computed on the fly and read from a phase diagram."""

import json

import numpy as np
import pytest
from clitools import run


def test_compare_on_tiny_erm_run(tmp_path):
    erm = tmp_path / "erm"
    r = run(
        "train-erm",
        "--d",
        "40",
        "--alpha",
        "1.5,2",
        "--omega",
        "0.3",
        "--seeds",
        "2",
        "--steps",
        "200",
        "--test-samples",
        "500",
        "--out",
        str(erm),
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    fs = []
    for d in (30, 40):
        f = tmp_path / f"fs{d}"
        r = run(
            "train-erm",
            "--d",
            str(d),
            "--alpha",
            "1.5",
            "--seeds",
            "2",
            "--steps",
            "100",
            "--test-samples",
            "300",
            "--out",
            str(f),
            "--quiet",
        )
        assert r.returncode == 0, r.stderr
        fs += ["--finite-size", str(f)]
    out = tmp_path / "cmp"
    r = run("compare", "--erm", str(erm), "--quad-order", "6", "--out", str(out), *fs)
    assert r.returncode == 0, r.stderr
    table = json.loads((out / "comparison.json").read_text())["table"]
    assert {(row["alpha"], row["init"]) for row in table} == {
        (a, b) for a in (1.5, 2.0) for b in ("semantic", "positional")
    }
    for row in table:
        assert row["theory_test_error"] > 0 and row["erm_test_error_mean"] > 0
    for name in ("comparison.png", "comparison.csv", "finite_size.png", "finite_size.json"):
        assert (out / name).stat().st_size > 0
    fsj = json.loads((out / "finite_size.json").read_text())
    assert {p["d"] for p in fsj["points"]} == {30, 40} and set(fsj["theory"]) == {"semantic", "positional"}
    v = run("verify", "--strict", str(erm), str(out), str(tmp_path / "fs30"))  # fresh folders re-derive
    assert v.returncode == 0 and "(comparison)" in v.stdout and "(erm)" in v.stdout, v.stderr
    # the theory of one comparison serves another ERM run of the same problem
    again = tmp_path / "again"
    r = run("compare", "--erm", str(tmp_path / "fs30"), "--theory", str(out), "--out", str(again))
    assert r.returncode == 2 and "quadrature.order: 6 there, 12 here" in r.stderr  # the settings must match too
    assert not again.exists()
    r = run("compare", "--erm", str(tmp_path / "fs30"), "--theory", str(out), "--quad-order", "6", "--out", str(again))
    assert r.returncode == 0, r.stderr
    reused = json.loads((again / "comparison.json").read_text())
    assert reused["theory"] == [t for t in json.loads((out / "comparison.json").read_text())["theory"]]
    assert {row["alpha"] for row in reused["table"]} == {1.5}
    r = run("compare", "--erm", str(erm), "--theory", str(tmp_path / "fs30"), "--out", str(tmp_path / "bad"))
    assert r.returncode == 2 and "theory folder" in r.stderr


def test_compare_bad_folder(tmp_path):
    r = run("compare", "--erm", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "summary.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _run(alpha, init, branch, test_error, q, theta, mu):
    from dotattn.erm.records import RunRecord

    q, theta, mu = (np.asarray(x, dtype=float) for x in (q, theta, mu))
    return RunRecord(
        alpha=alpha,
        n=100,
        init=init,
        seed=0,
        status="converged",
        steps=1,
        rel_change=0.0,
        grad_norm=0.0,
        train_loss=0.004,
        train_error=0.004,
        test_error=test_error,
        test_error_se=0.0,
        linear_train_error=0.0,
        linear_test_error=0.0,
        mu=mu,
        theta=theta,
        q=q,
        theta_over_sigma2=theta,
        q_over_sigma2=q,
        branch=branch,
        selected=False,
        d=100,
    )


def _point(branch, q, theta, mu, test_error):
    from dotattn.positional_semantic.records import BranchPoint

    return BranchPoint(
        omega=0.3,
        alpha=1.0,
        branch=branch,
        status="converged",
        selected=True,
        iterations=1,
        residual=0.0,
        q=np.asarray(q, dtype=float),
        V=np.eye(2),
        theta=np.asarray(theta, dtype=float),
        mu=np.asarray(mu, dtype=float),
        train_loss=0.004,
        test_error=test_error,
    )


def test_comparison_table_uses_gauge_invariants_and_runs_that_stayed_on_the_branch():
    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.comparison import ErmRun, comparison_table, overlap_invariants

    problem = Problem(L=2, rank=2, teacher_rank=1, sigma=0.5)
    s2 = problem.sigma**2
    # a rotated student frame must give the same invariants
    U = np.array([[np.cos(0.7), -np.sin(0.7)], [np.sin(0.7), np.cos(0.7)]])
    q, th, mu = np.array([[0.2, 0.01], [0.01, 0.05]]), np.array([[0.1], [0.02]]), np.array([[0.3, 0.0], [-0.3, 0.0]])
    a = overlap_invariants(q, th, mu, problem.sigma)
    b = overlap_invariants(U.T @ q @ U, U.T @ th, mu @ U, problem.sigma)
    assert a == pytest.approx(b) and a["m_norm"] == pytest.approx(0.3) and a["q_trace"] == pytest.approx(0.25 / s2)
    theory = [_point("semantic", q, th, [[0.0, 0.0], [0.0, 0.0]], 0.004)]
    # runs: two on the branch (ε_g 3 % and 5 % high), one that flowed to the positional branch
    runs = [
        _run(1.0, "semantic", "semantic", 0.00412, q, th, [[0, 0], [0, 0]]),
        _run(1.0, "semantic", "semantic", 0.0042, U.T @ q @ U, U.T @ th, [[0, 0], [0, 0]]),
        _run(1.0, "semantic", "positional", 0.009, q, [[0.0], [0.0]], mu),
    ]
    for r in runs:  # the row form round-trips through JSON and CSV cells
        assert type(r).from_row(r.to_row()) == r
        assert (
            type(r).from_row({k: (json.dumps(v) if isinstance(v, list) else str(v)) for k, v in r.to_row().items()})
            == r
        )
    erm = ErmRun(path=None, problem=problem, d=100, runs=tuple(runs))
    (row,) = comparison_table(erm, theory, tolerance=0.05)
    assert (row.erm_runs, row.erm_runs_on_branch) == (3, 2)
    assert row.rel_diff["test_error"] == pytest.approx(0.04)
    assert row.rel_diff["theta_norm"] == pytest.approx(0.0, abs=1e-12)
    assert row.rel_diff["q_trace"] == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(row.rel_diff["m_norm"])  # zero on the semantic branch: not compared
    assert row.max_rel_diff == pytest.approx(0.04) and row.agrees
    back = type(row).from_row({k: str(v) for k, v in row.to_row().items()})  # CSV cells
    assert json.dumps(back.to_row()) == json.dumps(row.to_row())
    (strict,) = comparison_table(erm, theory, tolerance=0.03)
    assert not strict.agrees
    # with a positional theory point, the run that flowed there is compared with it
    theory.append(_point("positional", q, [[0.0], [0.0]], mu, 0.009))
    rows = comparison_table(erm, theory)
    assert [(r.init, r.branch, r.erm_runs_on_branch) for r in rows] == [
        ("semantic", "semantic", 2),
        ("semantic", "positional", 1),
    ]
    assert rows[1].rel_diff["test_error"] == pytest.approx(0.0) and np.isnan(rows[1].erm_std["test_error"])


def test_theory_follows_the_branch_whatever_the_erm_alphas():
    """With ERM points at α = 1 and 2 only, the theory at α = 2 is the followed positional branch (the informed
    start of `solve`, m = 0.258), not the fixed point that continuation straight from α = 1 lands on (m = 0.092)."""
    from dotattn.positional_semantic.catalogue import solve
    from dotattn.positional_semantic.problem import Problem
    from dotattn.theory_vs_erm.comparison import follow_grid, theory_points

    problem = Problem(L=2, rank=1, teacher_rank=1, sigma=0.5, omega=0.3)
    assert follow_grid([1.0, 2.0]) == pytest.approx([round(0.1 * k, 10) for k in range(1, 21)])
    two = {p.branch: p for p in theory_points(problem, [1.0, 2.0]) if p.alpha == 2.0}
    eight = {p.branch: p for p in theory_points(problem, [0.25 * k for k in range(1, 9)]) if p.alpha == 2.0}
    informed = {e.init: e for e in solve(problem, 2.0, n_random=0, stability=False).fixed_points}["positional"]
    pos = two["positional"]
    assert abs(pos.mu[0][0]) == pytest.approx(0.2583, abs=1e-4)  # the followed branch, not m = 0.092
    # the same fixed point three ways, to the solver's tolerance (1e-8 on the overlaps)
    for other in (eight["positional"].test_error, informed.test_error):
        assert pos.test_error == pytest.approx(other, rel=1e-6)
    assert two["semantic"].test_error == pytest.approx(eight["semantic"].test_error, rel=1e-6)


def test_compare_without_out_writes_a_folder_of_its_own(tmp_path):
    erm = tmp_path / "erm"
    r = run(*"train-erm --d 30 --alpha 1.5 --seeds 1 --steps 50 --test-samples 200 --quiet --out".split(), str(erm))
    assert r.returncode == 0, r.stderr
    before = sorted(p.name for p in erm.iterdir())
    r = run("compare", "--erm", str(erm), "--quad-order", "4", "--coarse-order", "0")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in erm.iterdir()) == before  # nothing written into the ERM folder
    assert (tmp_path / "erm-compare" / "comparison.json").is_file()
    v = run("verify", str(erm), str(tmp_path / "erm-compare"))  # both folders, one command
    assert v.returncode == 0 and "(erm)" in v.stdout and "(comparison)" in v.stdout, v.stdout + v.stderr
    r = run("compare", "--erm", str(erm), "--quad-order", "4", "--coarse-order", "0", "--out", str(erm))
    assert r.returncode == 2 and "folder of its own" in r.stderr and len(r.stderr.strip().splitlines()) == 1
