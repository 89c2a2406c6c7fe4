"""ERM stopping and progress: a stalled L-BFGS run is ``stalled``, never ``converged``; the readers accept
the status and never count it as converged; every finished run is reported as it stops."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_erm import _one_thread  # noqa: F401  (autouse: one torch thread)

from dotattn.core import status
from dotattn.core.io import IntegrityError
from dotattn.core.training import STATUS, train
from dotattn.positional_semantic.problem import Problem
from dotattn.theory_vs_erm.alpha_c import AlphaCConfig, CellRuns, run_cell

F64 = torch.float64
LAM = 0.01
C = torch.tensor([[[1.0], [2.0], [3.0]], [[-1.0], [0.5], [0.0]]], dtype=F64)


def _kinked(Q: torch.Tensor) -> torch.Tensor:
    """R_b(Q) = ||Q - c_b||_1 + (λ/2)||Q||²: its minimiser sits on the kinks, where the gradient never
    vanishes (its relative stationarity stays ~1), so a line search can only stall there."""
    return (Q - C).abs().sum((-1, -2)) + 0.5 * LAM * (Q**2).sum((-1, -2))


def _nowhere_else(Q: torch.Tensor) -> torch.Tensor:
    """R = ||Q - c||²/2 + (λ/2)||Q||², plus 1e300 away from Q = 0 (a step, invisible to the gradient): no
    trial point of a line search from Q = 0 is lower, so every line search fails."""
    value = 0.5 * ((Q - C) ** 2).sum((-1, -2)) + 0.5 * LAM * (Q**2).sum((-1, -2))
    return value + 1e300 * (Q != 0).flatten(-2).any(-1).to(Q.dtype)


def test_lbfgs_that_stalls_is_stalled_not_converged():
    """The strong-Wolfe line search stops moving at the kinks: the former rule (relative change of R per
    step <= tol) called that converged at stationarity ~1; it is ``stalled`` now."""
    out = train(_kinked, torch.zeros_like(C), optimizer="lbfgs", steps=500, lr=1.0, tol=1e-7, ridge=LAM)
    assert out.status_names() == ["stalled", "stalled"]
    assert bool((out.stationarity > 0.5).all())
    assert out.steps.max() < 500  # it stopped at the stall, not on the budget


def test_lbfgs_converges_by_relative_stationarity_and_never_below_tol_it_cannot_reach():
    quad = lambda Q: 0.5 * ((Q - C) ** 2).sum((-1, -2)) + 0.5 * LAM * (Q**2).sum((-1, -2))  # noqa: E731
    out = train(quad, torch.zeros_like(C), optimizer="lbfgs", steps=200, lr=1.0, tol=1e-9, ridge=LAM)
    assert out.status_names() == ["converged", "converged"] and bool((out.stationarity <= 1e-9).all())
    np.testing.assert_allclose(out.Q.numpy(), (C / (1 + LAM)).numpy(), atol=1e-8)
    # a stationarity below float64 rounding cannot be met: the run ends stalled or on its budget
    out = train(quad, torch.zeros_like(C), optimizer="lbfgs", steps=200, lr=1.0, tol=1e-300, ridge=LAM)
    assert set(out.status_names()) <= {"stalled", "max_steps"}
    with pytest.raises(ValueError, match="ridge"):
        train(quad, torch.zeros_like(C), optimizer="lbfgs", steps=5)


def test_batched_lbfgs_line_search_failure_is_stalled():
    """A run whose line search fails twice (the second time along -grad R) was frozen as max_steps."""
    out = train(_nowhere_else, torch.zeros_like(C), optimizer="batched-lbfgs", steps=50, lr=1.0, tol=1e-7, ridge=LAM)
    assert out.status_names() == ["stalled", "stalled"] and out.steps.tolist() == [0, 0]


def test_stalled_is_in_the_vocabulary_and_is_not_converged():
    assert status.from_training("stalled") == status.STALLED == "stalled"
    assert status.STALLED in status.STATUSES and status.STALLED in status.ERM_STATUSES
    assert status.STALLED != status.CONVERGED
    assert {status.from_training(w) for w in STATUS} | {"max_steps"} == set(status.ERM_STATUSES)


@pytest.mark.parametrize("optimizer,steps", [("gd", 400), ("adam", 400), ("lbfgs", 100), ("batched-lbfgs", 100)])
def test_every_run_is_reported_once_as_it_stops(optimizer, steps):
    """Three runs of different curvature stop at different steps; each is reported exactly once, and
    reporting does not change the optimisation."""
    c = torch.tensor([[[1.0]], [[2.0]], [[-1.0]]], dtype=F64)
    scale = torch.tensor([1.0, 0.2, 0.05], dtype=F64)
    f = lambda Q: 0.5 * scale * ((Q - c) ** 2).sum((-1, -2)) + 0.5 * LAM * (Q**2).sum((-1, -2))  # noqa: E731
    kw = dict(
        optimizer=optimizer,
        steps=steps,
        lr={"gd": 1.0, "adam": 0.1}.get(optimizer, 1.0),
        tol=1e-6 if optimizer in ("gd", "adam") else 1e-8,
        ridge=LAM,
    )
    masks = []
    out = train(f, torch.zeros_like(c), finished=lambda m: masks.append(m.clone()), **kw)
    total = torch.stack(masks).sum(0)
    assert total.tolist() == [1, 1, 1]
    if optimizer == "gd":  # runs frozen one by one, reported as they stop (batched-lbfgs: the cell test below)
        assert len(masks) >= 2
    plain = train(f, torch.zeros_like(c), **kw)
    assert torch.equal(plain.Q, out.Q) and plain.status_names() == out.status_names()


def test_alpha_c_cell_reports_every_run_with_its_share_of_the_cost(tmp_path):
    """run_cell reports finished runs as they stop (many reports per chunk of seeds), and the reports add
    up to the cell's runs and cost; a chunk read from the cache is reported at once."""
    cfg = AlphaCConfig(omegas=(0.3,), ds=(24,), alphas=(0.8, 1.2, 1.6), seeds=2, seed_chunk=2)
    calls: list[tuple[float, int]] = []
    row = run_cell(
        Problem(omega=0.3).to_dict(),
        0.3,
        24,
        cfg.to_dict(),
        str(tmp_path),
        progress=lambda cost, runs: calls.append((cost, runs)),
    )
    assert len(calls) > 1  # per run, not per chunk (the chunk holds both seeds)
    assert sum(r for _, r in calls) == cfg.seeds * cfg.runs_per_seed == 12
    assert sum(c for c, _ in calls) == pytest.approx(cfg.cost(24), rel=1e-12)
    assert len(CellRuns.from_row(row).seeds) == 2
    again: list[tuple[float, int]] = []
    run_cell(
        Problem(omega=0.3).to_dict(),
        0.3,
        24,
        cfg.to_dict(),
        str(tmp_path),
        progress=lambda cost, runs: again.append((cost, runs)),
    )
    assert again == [(pytest.approx(cfg.cost(24)), 12)]


def _stalled_folder(tmp_path: Path) -> Path:
    """A train-erm folder with one run's status set to ``stalled`` (manifest resealed)."""
    from dotattn.core.integrity import seal_folder
    from dotattn.erm.experiment import run_erm
    from dotattn.theory_vs_erm.output import write_erm

    res = run_erm(
        Problem(omega=0.3),
        d=16,
        alphas=[1.0],
        inits="both",
        seeds=1,
        optimizer="batched-lbfgs",
        steps=200,
        test_samples=50,
        device="cpu",
    )
    folder = tmp_path / "erm"
    write_erm(folder, res, {"command": "test"})
    lines = (folder / "runs.csv").read_text().splitlines()
    assert lines[2].startswith("1.0,16,16,semantic,0,converged,")
    lines[2] = lines[2].replace(",converged,", ",stalled,", 1)
    (folder / "runs.csv").write_text("\n".join(lines) + "\n")
    # summary.csv counts the same run as stalled (runs, converged, not_converged, diverged, stalled), so the
    # folder is consistent across its files (verify compares the counts)
    lines = (folder / "summary.csv").read_text().splitlines()
    assert lines[2].startswith("1.0,16,16,semantic,1,1,0,0,0,")
    lines[2] = lines[2].replace("semantic,1,1,0,0,0,", "semantic,1,0,0,0,1,", 1)
    (folder / "summary.csv").write_text("\n".join(lines) + "\n")
    (folder / "manifest.json").unlink()
    seal_folder(folder)
    return folder


def test_readers_accept_stalled_and_refuse_unknown_statuses(tmp_path):
    from dotattn.verify import verify_folder

    folder = _stalled_folder(tmp_path)
    verify_folder(folder)  # stalled is a known status
    lines = (folder / "runs.csv").read_text().splitlines()
    lines[2] = lines[2].replace(",stalled,", ",finished,", 1)
    (folder / "runs.csv").write_text("\n".join(lines) + "\n")
    (folder / "manifest.json").unlink()
    from dotattn.core.integrity import seal_folder

    with pytest.raises(IntegrityError, match="status 'finished'"):
        seal_folder(folder)


def test_summary_counts_stalled_runs_apart_from_converged():
    from dotattn.erm.experiment import _summarise
    from dotattn.erm.records import SummaryRecord

    res_runs = _fake_runs(["converged", "stalled", "not_converged"])
    rec = _summarise(res_runs, 1.0, 16, 16, "semantic")
    assert (rec.converged, rec.stalled, rec.not_converged, rec.diverged) == (1, 1, 1, 0)
    row = rec.to_row()
    assert row["stalled"] == 1 and SummaryRecord.from_row(json.loads(json.dumps(row))).stalled == 1
    old = {k: v for k, v in row.items() if k != "stalled"}  # rows written before the column existed
    assert SummaryRecord.from_row(old).stalled == 0


def _fake_runs(statuses):
    from dotattn.erm.experiment import run_erm

    res = run_erm(
        Problem(omega=0.3),
        d=8,
        alphas=[1.0],
        inits="semantic",
        seeds=len(statuses),
        steps=2,
        test_samples=10,
        device="cpu",
    )
    from dataclasses import replace

    return [replace(r, status=s) for r, s in zip(res.runs, statuses, strict=True)]


def test_alpha_c_refuses_float32_before_any_computation():
    """float32 never reached the study's tol 1e-7 (every point was excluded) and at a tol it reaches its
    Δe_t errors are a few % of |Δe_t| at d = 1000 (alpha_c.FLOAT32_REFUSED): refused, one line."""
    from dotattn.core.validation import ParameterError

    with pytest.raises(ParameterError, match="dtype must be float64") as err:
        AlphaCConfig(omegas=(0.3,), ds=(24,), alphas=(0.8, 1.6), dtype="float32")
    assert "\n" not in str(err.value)
    assert AlphaCConfig(omegas=(0.3,), ds=(24,), alphas=(0.8, 1.6)).dtype == "float64"


def test_alpha_c_study_on_a_pool_reports_runs_as_they_finish():
    """On a process pool every finished run reaches the main process (one unit per run), and the reports add
    up to every run and the whole cost of the study."""
    from dotattn.theory_vs_erm.alpha_c import run_study

    cfg = AlphaCConfig(omegas=(0.3,), ds=(16, 24), alphas=(0.8, 1.6), seeds=2, seed_chunk=2)
    calls: list[tuple[float, int]] = []
    run_study(
        Problem(omega=0.3),
        cfg,
        workers=2,
        threads=1,
        theory=False,
        progress=lambda cost, runs: calls.append((cost, runs)),
    )
    assert sum(r for _, r in calls) == 2 * cfg.seeds * cfg.runs_per_seed
    assert sum(c for c, _ in calls) == pytest.approx(cfg.cost(16) + cfg.cost(24), rel=1e-12)
    assert len(calls) > 2  # more than one report per cell
