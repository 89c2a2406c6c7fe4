"""ERM variants (docs/variants.md): the untied student, correlated token contents, the trainable value,
their CLI options and refusals, and a tiny untied erm-alpha-c study end to end."""

import json
import math

import numpy as np
import pytest
import torch

from dotattn.core.io import read_csv
from dotattn.core.validation import ParameterError
from dotattn.erm.config import ErmConfig, WeightLayout
from dotattn.erm.data import (
    BLOCK,
    STREAM_TRAIN,
    content_noise,
    generator,
    make_dataset,
    positional_embeddings,
    teacher_weights,
)
from dotattn.erm.experiment import _risk_function, _sample_errors, initial_student, run_erm
from dotattn.erm.models import attention, sample_stats
from dotattn.positional_semantic.problem import Problem

RTOL_SUMS = 1e-11
"""Two float64 evaluations of the same sum of O(n L²) terms in another order (or through the Gram
identity instead of the (n, L, d) tensors) agree to ~n·1e-16 relative; 1e-11 leaves a margin of 1e3."""


def _data(problem: Problem, d: int, n: int, seed: int = 0):
    P = positional_embeddings(problem.G, d)
    Q_star = teacher_weights(d, problem.teacher_rank, seed)
    return P, Q_star, make_dataset(problem, Q_star, P, n, seed)


def _risk(problem: Problem, ds, P, layout: WeightLayout):
    pf = lambda M: M.permute(1, 2, 0).contiguous()[:, :, None]  # (n, L, L) -> (L, L, 1, n)
    Cxx, Cyx, cyy = sample_stats(ds.T, P @ P.T, ds.Cpz, ds.Czz)
    return _risk_function(ds.X[None], pf(Cxx), pf(Cyx), cyy[None], [ds.n], problem.ridge, layout, pf(ds.T), P)


def _direct_errors(ds, Q, K, v=1.0, U=None, Wv=None):
    """‖S X V − T Z‖² per sample from the (n, L, d) tensors themselves."""
    d = ds.X.shape[-1]
    out = v * attention(ds.X, Q, K)
    if U is not None:
        out = out + attention(ds.X, Q, K) @ U @ Wv.T / d
    return (out - ds.y).square().sum((-1, -2))


def test_untied_with_k_equal_q_is_tied_with_twice_the_ridge():
    """R_untied(Q, K = Q; λ) = R_tied(Q; 2λ): the data terms are one function of Q, and the ridge
    (λ/2)(‖Q‖² + ‖K‖²) is λ‖Q‖² there."""
    tied = Problem(omega=0.3, ridge=0.02)
    untied = tied.replace(student="untied", ridge=0.01)
    d, n = 30, 45
    P, Q_star, ds = _data(untied, d, n)
    Q = torch.randn(d, 1, generator=generator(5, 9), dtype=torch.float64)
    r_tied = _risk(tied, ds, P, WeightLayout(1))(Q.T[None, None, None])
    r_untied = _risk(untied, ds, P, WeightLayout(1, untied=True))(torch.cat([Q.T, Q.T])[None, None, None])
    assert torch.allclose(r_tied, r_untied, rtol=RTOL_SUMS, atol=0)
    K = Q + 0.1 * torch.randn(d, 1, generator=generator(6, 9), dtype=torch.float64)
    r_other = _risk(untied, ds, P, WeightLayout(1, untied=True))(torch.cat([Q.T, K.T])[None, None, None])
    assert not torch.allclose(r_tied, r_other, rtol=1e-6)  # the identity is not one of every K


@pytest.mark.parametrize(
    "layout",
    [
        WeightLayout(2, untied=True),
        WeightLayout(1, value="scalar"),
        WeightLayout(2, untied=True, value="low-rank", value_rank=2),
    ],
)
def test_gram_form_equals_the_materialised_residual(layout):
    """The Gram-matrix residual (fields and L x L statistics only) equals ‖S X V − T Z‖² computed from
    the (n, L, d) tensors, for the untied student and the value options (correlated tokens, L = 3)."""
    problem = Problem(
        L=3,
        rank=2,
        omega=0.2,
        token_correlation=0.3,
        positional_attention=np.full((3, 3), 1 / 3),
        positional_gram=0.5 * np.eye(3),
        student="untied" if layout.untied else "tied",
    )
    d, n = 24, 20
    P, Q_star, ds = _data(problem, d, n, seed=3)
    W = 0.7 * torch.randn(layout.rows, d, generator=generator(1, 9), dtype=torch.float64)
    if layout.has_scale:
        W[-1, 1:] = 0.0
    pf = lambda M: M.permute(1, 2, 0).contiguous()[:, :, None]
    Cxx, Cyx, cyy = sample_stats(ds.T, P @ P.T, ds.Cpz, ds.Czz)
    gram = _sample_errors(W[None, None], ds.X[None], pf(Cxx), pf(Cyx), cyy[None], layout, pf(ds.T), P)[0, 0]
    Q = W[: layout.rank].T
    K = W[layout.key_rows].T
    v = 1.0 + float(W[-1, 0]) / math.sqrt(d) if layout.has_scale else 1.0
    U = W[layout.u_rows].T if layout.value_rank else None
    Wv = W[layout.w_rows].T if layout.value_rank else None
    direct = _direct_errors(ds, Q, K, v, U, Wv)
    assert torch.allclose(gram, direct, rtol=RTOL_SUMS, atol=0)


@pytest.mark.parametrize(
    "layout", [WeightLayout(1, untied=True), WeightLayout(1, untied=True, value="low-rank", value_rank=1)]
)
def test_gradient_matches_finite_differences(layout):
    """Autograd's ∇R along random directions against central differences (step 1e-5: truncation
    O(h²) ~ 1e-10 relative, rounding ~1e-16 R/h ~ 1e-11 R; tolerance 1e-7 relative)."""
    problem = Problem(omega=0.3, student="untied", token_correlation=0.2)
    d, n = 20, 30
    P, Q_star, ds = _data(problem, d, n, seed=1)
    risk = _risk(problem, ds, P, layout)
    W = 0.8 * torch.randn(1, 1, 1, layout.rows, d, generator=generator(2, 9), dtype=torch.float64)
    W.requires_grad_(True)
    (grad,) = torch.autograd.grad(risk(W).sum(), W)
    for k in range(3):
        D = torch.randn(W.shape, generator=generator(3, 9, k), dtype=torch.float64)
        h = 1e-5
        with torch.no_grad():
            fd = (risk(W + h * D) - risk(W - h * D)).sum() / (2 * h)
        exact = (grad * D).sum()
        assert abs(float(fd - exact)) <= 1e-7 * float(grad.norm() * D.norm()), (float(fd), float(exact))


def test_correlated_contents_have_the_stated_covariance():
    """E[z_l z_l'ᵀ]/d = σ² C_ll' with C = (1 − c) I + c 1 1ᵀ, estimated from n d = 1e5 products per entry:
    each estimate has standard deviation σ² √(1 + C²)/√(n d) <= 4.5e-3 σ²; tolerance 6 of them."""
    L, d, n, sigma, c = 3, 50, 2000, 0.5, 0.4
    Z = content_noise(n, L, d, sigma, seed=7, stream=STREAM_TRAIN, correlation=c)
    emp = torch.einsum("nld,nmd->lm", Z, Z).numpy() / (n * d) / sigma**2
    C = (1 - c) * np.eye(L) + c * np.ones((L, L))
    assert np.max(np.abs(emp - C)) < 6 * math.sqrt(2) / math.sqrt(n * d)
    # the data set's Gram matrix Czz = Z Zᵀ is that of these contents
    problem = Problem(
        L=3,
        omega=0.2,
        token_correlation=c,
        positional_attention=np.full((3, 3), 1 / 3),
        positional_gram=0.5 * np.eye(3),
        sigma=sigma,
    )
    P, Q_star, ds = _data(problem, d, 600, seed=7)
    assert torch.allclose(ds.Czz, ds.Z @ ds.Z.transpose(-1, -2), rtol=1e-12, atol=1e-12)
    emp_ds = ds.Czz.mean(0).numpy() / d / sigma**2
    assert np.max(np.abs(emp_ds - C)) < 6 * math.sqrt(2) / math.sqrt(600 * d)


def test_uncorrelated_stream_is_unchanged_bit_for_bit():
    """c = 0 draws exactly the numbers of the i.i.d. stream (σ times the N(0, 1) blocks), so committed
    results stay reproducible; c ≠ 0 is the Cholesky factor times the same draw."""
    L, d, n, start, sigma = 2, 16, 300, 200, 0.5  # crosses a block boundary
    Z = content_noise(n, L, d, sigma, seed=4, stream=STREAM_TRAIN, start=start)
    blocks = torch.cat(
        [torch.randn(BLOCK, L, d, generator=generator(4, STREAM_TRAIN, b), dtype=torch.float64) for b in (0, 1, 2)]
    )
    old = sigma * blocks[start : start + n]
    assert torch.equal(Z, old)
    Zc = content_noise(n, L, d, sigma, seed=4, stream=STREAM_TRAIN, start=start, correlation=0.5)
    chol = torch.tensor([[1.0, 0.0], [0.5, math.sqrt(0.75)]], dtype=torch.float64)
    assert torch.allclose(Zc, sigma * (chol @ blocks[start : start + n]), rtol=1e-15, atol=1e-15)


def test_informed_starts_of_the_untied_student():
    """Semantic start: Q and K carry Q*; positional start: both along the positional direction with
    max |μ| = positional_m0; tied starts are unchanged by the layout."""
    problem = Problem(omega=0.3, student="untied")
    d = 40
    P = positional_embeddings(problem.G, d)
    Q_star = teacher_weights(d, 1, 0)
    tied = initial_student("semantic", Q_star, P, WeightLayout(1), 0)
    W = initial_student("semantic", Q_star, P, WeightLayout(1, untied=True), 0)
    assert torch.equal(W[0], tied[0]) and torch.equal(W[1], Q_star[:, 0])
    W = initial_student("positional", Q_star, P, WeightLayout(1, untied=True), 0, positional_m0=0.3)
    mu = P @ W.T / math.sqrt(d)  # (L, 2): μ of Q and of K
    assert np.allclose(mu.abs().max(0).values.numpy(), 0.3, rtol=1e-12)
    W2 = initial_student("positional", Q_star, P, WeightLayout(2, untied=True), 0, positional_m0=0.3)
    assert torch.equal(W2[0], W2[2]) and not torch.equal(W2[1], W2[3])  # informed column alike, noise their own


def test_untied_and_value_runs_record_their_overlaps():
    res = run_erm(
        Problem(omega=0.3, student="untied"),
        d=30,
        alphas=(0.8,),
        inits="both",
        seeds=2,
        optimizer="batched-lbfgs",
        steps=300,
        tol=1e-7,
        test_samples=50,
        device="cpu",
        value="low-rank",
        value_rank=1,
    )
    for run in res.runs:
        assert run.status == "converged"
        assert run.mu_k.shape == (2, 1) and run.theta_k.shape == (1, 1) and run.q_kk.shape == run.q_qk.shape == (1, 1)
        assert run.value_scale is not None and run.value_correction is not None
        assert np.isfinite(run.train_loss)
    row = res.runs[0].to_row()
    assert {"mu_k", "q_qk", "value_scale"} <= set(row)
    tied = run_erm(
        Problem(omega=0.3),
        d=30,
        alphas=(0.8,),
        inits="semantic",
        seeds=1,
        optimizer="batched-lbfgs",
        steps=300,
        test_samples=10,
        device="cpu",
    )
    assert "mu_k" not in tied.runs[0].to_row() and tied.runs[0].value_scale is None


def test_config_value_validation_and_dict():
    with pytest.raises(ParameterError, match="value must be one of"):
        ErmConfig(d=10, alphas=(1,), value="full")
    with pytest.raises(ParameterError, match="value_rank"):
        ErmConfig(d=10, alphas=(1,), value="low-rank", value_rank=65)
    assert "value" not in ErmConfig(d=10, alphas=(1,)).to_dict()  # folders of before keep their parameters
    assert ErmConfig(d=10, alphas=(1,), value="low-rank", value_rank=3).to_dict()["value_rank"] == 3
    from dotattn.erm.restarts import RestartConfig

    with pytest.raises(ParameterError, match="student must be one of tied for erm-restarts"):
        RestartConfig(d=10, alpha=1.0, seeds=(0,), starts=("random",)).check(Problem(student="untied"))


def _cli(argv, capsys):
    from dotattn.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr()


_CORRELATION = [
    (["--token-correlation", "1"], ["token_correlation", "(-1, 1)"]),
    (["--token-correlation", "-1.5"], ["token_correlation"]),
]
_STUDENT_VALUE = [
    (["--student", "shared"], ["student", "tied, untied"]),
    (["--value", "full"], ["value", "none, scalar, low-rank"]),
    (["--value", "low-rank", "--value-rank", "0"], ["value_rank", "[1, 64]"]),
]


@pytest.mark.parametrize(
    "command, args, words",
    [(c, a, w) for c in ("train-erm", "erm-alpha-c") for a, w in _CORRELATION + _STUDENT_VALUE]
    + [("erm-restarts", a, w) for a, w in _CORRELATION],
)
def test_cli_refusals(command, args, words, tmp_path, capsys):
    out = tmp_path / "out"
    code, cap = _cli([command, "--d", "20", *args, "--out", str(out)], capsys)
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, cap
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


def test_erm_restarts_refuses_student_option(tmp_path, capsys):
    code, cap = _cli(["erm-restarts", "--student", "untied", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "--student" in cap.err and not (tmp_path / "o").exists()


def test_theory_refusal():
    """The tied, uncorrelated problem is the theory's; a variant is refused with require_variant's line or taken."""
    from dotattn.theory_vs_erm.alpha_c import theory_refusal

    assert theory_refusal(Problem()) is None
    refusal = theory_refusal(Problem(student="untied"))
    assert refusal is None or ("student" in refusal and "\n" not in refusal)


def test_erm_alpha_c_untied_end_to_end(tmp_path, capsys, monkeypatch):
    """A tiny untied study (d = 40, 2 seeds, 3 α) whose theory is refused (the refusal is pinned here so that
    the test does not depend on what the theory handles): it runs as with --no-theory, says so in one
    line, and its folder verifies."""
    import dotattn.theory_vs_erm.alpha_c as alpha_c

    line = "student must be one of tied for the replica theory, got 'untied'"
    monkeypatch.setattr(alpha_c, "theory_refusal", lambda problem: line)
    out = tmp_path / "ac"
    code, cap = _cli(
        [
            "erm-alpha-c",
            "--student",
            "untied",
            "--omega",
            "0.3",
            "--d",
            "40",
            "--alpha",
            "0.5,1,1.5",
            "--seeds",
            "2",
            "--seed-chunk",
            "2",
            "--threads",
            "1",
            "--workers",
            "1",
            "--out",
            str(out),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, cap
    said = [ln for ln in cap.err.splitlines() if "as with --no-theory" in ln]
    assert len(said) == 1 and line in said[0], cap.err
    from dotattn.verify import verify_folder

    verify_folder(out)
    summary = json.loads((out / "summary.json").read_text())
    assert '"student": "untied"' in json.dumps(summary)
    assert all(w["theory_alpha_c"] is None for w in summary["omegas"])
    assert len(read_csv(out / "cells.csv")) == 1
    assert len(read_csv(out / "crossings.csv")) == 2


def test_train_erm_value_folder_verifies(tmp_path, capsys):
    out = tmp_path / "erm"
    code, cap = _cli(
        [
            "train-erm",
            "--student",
            "untied",
            "--token-correlation",
            "0.2",
            "--value",
            "low-rank",
            "--d",
            "30",
            "--alpha",
            "0.6,1.2",
            "--seeds",
            "2",
            "--optimizer",
            "batched-lbfgs",
            "--steps",
            "300",
            "--tol",
            "1e-7",
            "--test-samples",
            "50",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--out",
            str(out),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, cap
    from dotattn.verify import verify_folder

    verify_folder(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["made_for"]["erm"]["value"] == "low-rank" and manifest["made_for"]["erm"]["value_rank"] == 1
    assert manifest["made_for"]["problem"]["student"] == "untied"
    rows = read_csv(out / "runs.csv")
    assert rows and all(r["mu_k"] and r["value_correction"] for r in rows)
    from dotattn.theory_vs_erm.output import load_erm

    run = load_erm(out).runs[0]
    assert run.q_qk.shape == (1, 1) and run.value_scale is not None


def test_erm_alpha_c_refuses_a_phase_diagram_the_theory_cannot_give(tmp_path, capsys, monkeypatch):
    import dotattn.theory_vs_erm.alpha_c as alpha_c

    monkeypatch.setattr(alpha_c, "theory_refusal", lambda problem: "token_correlation must be 0 for the theory")
    out = tmp_path / "ac"
    code, cap = _cli(
        ["erm-alpha-c", "--token-correlation", "0.2", "--d", "40", "--phase-diagram", str(tmp_path), "--out", str(out)],
        capsys,
    )
    assert code == 2 and "--phase-diagram" in cap.err and len(cap.err.strip().splitlines()) == 1, cap
    assert not out.exists()
