"""erm-restarts (many restarts on the same data) and the theory at a run's exact overlaps (issue 14)."""

import json
import math

import numpy as np
import pytest
from clitools import run

from dotattn.core.status import CONVERGED
from dotattn.core.validation import ParameterError
from dotattn.erm.restart_records import PairRecord, RestartRecord, RestartSummary, summarise_restarts
from dotattn.positional_semantic import loss_channel
from dotattn.positional_semantic.overlaps import overlaps_from_scalars
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.quadrature import make_rule
from dotattn.positional_semantic.state_evolution import iterate
from dotattn.theory_vs_erm import diagnostics as dg
from dotattn.theory_vs_erm.diagnostics import noise_overlap, train_loss_at


# ---------------------------------------------------------------------------------------------- theory side
@pytest.fixture(scope="module")
def toy_fixed_point():
    pb = Problem(omega=0.3)
    rule = make_rule(pb.gaussian_dim, "gauss-hermite", 8)
    fp = iterate(pb, 2.0, overlaps_from_scalars(pb, 0.25, 0.0, 1.0, 0.2), rule)
    assert fp.converged
    return pb, rule, fp


def test_train_loss_at_a_fixed_point_is_the_solvers(toy_fixed_point):
    """At the overlaps of a converged fixed point (ρ = σ² I, ν = 0) e_t at fixed overlaps is −Φ and V is the fixed point's."""
    pb, rule, fp = toy_fixed_point
    o = fp.overlaps
    res = train_loss_at(pb, 2.0, o.q, o.theta, o.mu, pb.rho, np.zeros((1, 2)), rule)
    assert res.status == CONVERGED
    assert res.train_loss == pytest.approx(fp.train_loss, rel=1e-8)
    assert res.V[0, 0] == pytest.approx(o.V[0, 0], rel=1e-6)
    assert res.q_hat[0, 0] == pytest.approx(fp.hats.q_hat[0, 0], rel=1e-5)


def test_train_loss_at_is_minimal_in_q_at_the_fixed_point(toy_fixed_point):
    """Moving q off the fixed point (θ, μ held) raises e_t at fixed overlaps: the fixed point minimises it."""
    pb, rule, fp = toy_fixed_point
    o = fp.overlaps
    e0 = train_loss_at(pb, 2.0, o.q, o.theta, o.mu, pb.rho, np.zeros((1, 2)), rule).train_loss
    for f in (0.9, 1.1):
        e = train_loss_at(pb, 2.0, f * o.q, o.theta, o.mu, pb.rho, np.zeros((1, 2)), rule).train_loss
        assert e > e0


def test_test_error_at_with_identity_rho_is_the_loss_channels(toy_fixed_point):
    pb, rule, fp = toy_fixed_point
    o = fp.overlaps
    assert dg.test_error_at(o.q, o.theta, o.mu, pb.rho, rule, pb)[0] == pytest.approx(
        loss_channel.test_error(o, rule, pb)[0], rel=1e-12
    )
    # a teacher of larger norm is a different target: the error changes
    assert dg.test_error_at(o.q, o.theta, o.mu, 1.2 * pb.rho, rule, pb)[0] != pytest.approx(
        loss_channel.test_error(o, rule, pb)[0], rel=1e-3
    )


def test_noise_overlap_is_the_part_outside_teacher_and_embeddings():
    """q₀ = σ² Q_⊥ᵀQ_⊥/d computed directly from finite-d matrices (teacher not orthogonal to P)."""
    rng = np.random.default_rng(0)
    d, rt = 40, 2
    pb = Problem(teacher_rank=rt, omega=0.3)
    s2 = pb.sigma**2
    P = np.array([np.ones(d), -np.ones(d)]) / math.sqrt(d)  # P Pᵀ = toy G
    Qs = rng.normal(size=(d, rt))
    Q = rng.normal(size=(d, 1)) + Qs[:, :1] + 3 * P[0][:, None]
    q, theta, mu = s2 * Q.T @ Q / d, s2 * Q.T @ Qs / d, P @ Q / math.sqrt(d)
    rho, nu = s2 * Qs.T @ Qs / d, Qs.T @ P.T / math.sqrt(d)
    basis = np.hstack([Qs, P.T])
    proj = basis @ np.linalg.pinv(basis)
    Qp = Q - proj @ Q
    assert noise_overlap(q, theta, mu, rho, nu, pb) == pytest.approx(s2 * Qp.T @ Qp / d, rel=1e-10)


def test_train_loss_at_rank_two_reports_invalid():
    pb = Problem(rank=2, omega=0.3)
    rule = make_rule(pb.gaussian_dim, "gauss-hermite", 2)
    res = train_loss_at(pb, 2.0, 0.1 * np.eye(2), np.zeros((2, 1)), np.zeros((2, 2)), pb.rho, np.zeros((1, 2)), rule)
    assert res.status == "invalid" and "rank 1" in res.message and math.isnan(res.train_loss)


# ---------------------------------------------------------------------------------------------- ERM side
torch = pytest.importorskip("torch")


def test_pair_distance_is_gauge_invariant_and_zero_for_copies():
    from dotattn.erm.restarts import pair_distance

    g = torch.Generator().manual_seed(0)
    Q = torch.randn(50, 1, generator=g, dtype=torch.float64)
    D, ov = pair_distance(Q, -Q)
    assert float(D) == pytest.approx(0.0, abs=1e-12) and float(ov) == pytest.approx(1.0)
    Q2 = torch.randn(50, 2, generator=g, dtype=torch.float64)
    c, s = math.cos(0.7), math.sin(0.7)
    U = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    assert float(pair_distance(Q2, Q2 @ U)[0]) == pytest.approx(0.0, abs=1e-12)
    R = torch.randn(50, 1, generator=g, dtype=torch.float64)
    D, _ = pair_distance(Q, R)
    direct = min(float((Q - R).square().sum()), float((Q + R).square().sum())) / float(Q.norm() * R.norm())
    assert float(D) == pytest.approx(direct, rel=1e-12)


def test_restart_config_validates():
    from dotattn.erm.restarts import RestartConfig

    with pytest.raises(ParameterError, match="starts"):
        RestartConfig(d=20, alpha=1.0, seeds=(0,), starts=("bogus",))
    with pytest.raises(ParameterError, match="sector"):
        RestartConfig(d=20, alpha=1.0, seeds=(0,), starts=("random",), sector="nope")
    with pytest.raises(ParameterError, match="positional"):
        RestartConfig(d=20, alpha=1.0, seeds=(0,), starts=("positional",), sector="semantic")
    with pytest.raises(ParameterError, match="alpha"):
        RestartConfig(d=20, alpha=-1.0, seeds=(0,), starts=("random",))


@pytest.fixture(scope="module")
def tiny_restarts():
    from dotattn.erm.restarts import RestartConfig, run_restarts

    pb = Problem(teacher_rank=2, omega=0.3)
    cfg = RestartConfig(
        d=40, alpha=2.0, seeds=(0, 1), starts=("random",) * 3 + ("semantic",) * 3, sector="semantic", test_samples=200
    )
    return pb, cfg, run_restarts(pb, cfg)


def test_restarts_same_data_semantic_sector(tiny_restarts):
    pb, cfg, res = tiny_restarts
    assert len(res.runs) == 12
    for r in res.runs:
        assert np.max(np.abs(r.mu)) < 1e-12  # μ = 0 sector
        assert r.teacher_rho == pytest.approx(res.runs[6 * (r.seed != 0)].teacher_rho)  # one teacher per seed
        assert r.status == CONVERGED and r.stationarity <= cfg.tol
    # the pairs are the converged runs on one branch, per seed; D >= 0 and overlap in [0, 1]
    for p in res.pairs:
        a, b = (next(r for r in res.runs if r.seed == p.seed and r.restart == k) for k in (p.a, p.b))
        assert a.branch == b.branch == p.branch and p.distance >= -1e-12 and -1e-12 <= p.overlap <= 1 + 1e-12
        # D and the overlap (from the weights, pair_distance) against the runs' own overlaps q = σ²QᵀQ/d:
        # ‖Q‖² ∝ tr q, so D = (tr q_a + tr q_b) / √(tr q_a tr q_b) − 2 overlap; absolute 1e-9 for the
        # cancellation of O(1) terms computed separately in float64
        ta, tb = float(np.trace(a.q)), float(np.trace(b.q))
        assert p.distance == pytest.approx((ta + tb) / math.sqrt(ta * tb) - 2 * p.overlap, abs=1e-9)
        assert p.train_loss_diff >= 0


def test_restarts_same_start_same_minimum():
    """Two restarts from the same start (zero noise) end in the same minimum: D = 0, one minimum."""
    from dotattn.erm.restarts import RestartConfig, run_restarts

    pb = Problem(omega=0.3)
    cfg = RestartConfig(
        d=30, alpha=2.0, seeds=(3,), starts=("semantic", "semantic"), informed_noise=0.0, test_samples=100
    )
    res = run_restarts(pb, cfg)
    assert len(res.pairs) == 1 and res.pairs[0].distance == pytest.approx(0.0, abs=1e-12)
    summ = summarise_restarts(list(res.runs), list(res.pairs))
    assert summ[0].minima == 1 and summ[0].converged == 2


def test_records_round_trip(tiny_restarts):
    _, _, res = tiny_restarts
    for r in res.runs:
        back = RestartRecord.from_row(json.loads(json.dumps(r.to_row())))
        assert back.to_row() == r.to_row()
    for p in res.pairs:
        assert PairRecord.from_row(p.to_row()) == p
    for s in summarise_restarts(list(res.runs), list(res.pairs)):
        assert RestartSummary.from_row(json.loads(json.dumps(s.to_row()))).to_row() == json.loads(
            json.dumps(s.to_row())
        )


def test_summary_counts_minima_by_distance():
    def rec(k, et):
        z = np.zeros((1, 1))
        return RestartRecord(
            d=10,
            alpha=1.0,
            n=10,
            seed=0,
            restart=k,
            start="random",
            status=CONVERGED,
            steps=1,
            stationarity=0.0,
            train_loss=et,
            train_error=et,
            test_error=et,
            test_error_se=0.0,
            branch="semantic",
            mu=np.zeros((2, 1)),
            theta=z,
            q=z,
            teacher_rho=z,
            teacher_nu=np.zeros((1, 2)),
        )

    runs = [rec(k, 1.0 + k) for k in range(3)]
    pair = lambda a, b, D: PairRecord(
        d=10, alpha=1.0, seed=0, a=a, b=b, branch="semantic", distance=D, overlap=1.0, train_loss_diff=0.0
    )
    pairs = [pair(0, 1, 1e-6), pair(0, 2, 0.5), pair(1, 2, 0.5)]
    per_seed = [s for s in summarise_restarts(runs, pairs) if s.seed == 0][0]
    assert per_seed.minima == 2 and per_seed.distance_max == 0.5 and per_seed.train_loss_std == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize(
    "args,word",
    [
        (["--d", "1"], "d"),
        (["--alpha", "0"], "alpha"),
        (["--random", "0", "--semantic", "0"], "restarts"),
        (["--sector", "semantic", "--positional", "1"], "positional"),
        (["--quad-order", "99"], "quad_order"),
        (["--rank", "2", "--diagnose"], "rank"),
        (["--tol", "0"], "tol"),
    ],
)
def test_cli_bad_input(args, word, tmp_path):
    out = tmp_path / "o"
    r = run("erm-restarts", *args, "--out", str(out))
    assert r.returncode == 2 and word in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_cli_tiny_run_with_diagnostics(tmp_path):
    out = tmp_path / "o"
    r = run(
        "erm-restarts",
        "--d",
        "30",
        "--alpha",
        "2",
        "--seeds",
        "1",
        "--random",
        "2",
        "--semantic",
        "2",
        "--test-samples",
        "200",
        "--threads",
        "1",
        "--diagnose",
        "--quad-order",
        "6",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    for f in ("runs.csv", "pairs.csv", "summary.csv", "summary.json", "diagnostics.csv"):
        assert (out / f).exists()
    data = json.loads((out / "summary.json").read_text())
    assert data["provenance"]["parameters"]["command"] == "erm-restarts"
    assert len(data["runs"]) == 4 and len(data["diagnostics"]) == sum(r["status"] == "converged" for r in data["runs"])
    for row in data["diagnostics"]:
        if row["status"] == "converged":
            assert row["theory_train_loss"] > 0 and row["theory_test_error"] > 0
    v = run("verify", "--strict", str(out))  # a fresh folder: its files agree and its summary re-derives
    assert v.returncode == 0 and "(restarts)" in v.stdout, v.stderr
