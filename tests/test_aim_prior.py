"""Prior channel of the AIM (dotattn.aim.prior): moments, branch, limits, simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dotattn.aim.prior import (
    integrate_bulks,
    mmse_prior,
    prior_second_moment,
    rie_denoise,
    rie_divergence,
    rie_eigenvalues,
    sample_goe,
    sample_teacher,
    stieltjes,
    support,
)

CASES = [(0.1, 1e-3), (0.1, 0.1), (0.5, 0.01), (0.5, 1.0), (1.0, 1e-3), (1.0, 1.0), (2.0, 0.1), (2.0, 10.0)]


@pytest.mark.parametrize("rho,delta", CASES)
def test_moments(rho, delta):
    # exact: mass 1, mean √ρ, second moment Q0 + Δ; the quadrature is converged to ~1e-14 here,
    # 1e-10 leaves room for rounding in the edges (roots of a quartic)
    m = [integrate_bulks(lambda x, mu, p=p: x**p * mu, delta, rho) for p in (0, 1, 2)]
    assert m[0] == pytest.approx(1.0, abs=1e-10)
    assert m[1] == pytest.approx(math.sqrt(rho), abs=1e-10)
    assert m[2] == pytest.approx(prior_second_moment(rho) + delta, abs=1e-10)


def test_bulks():
    assert len(support(1e-3, 0.1)) == 2  # the atom 1 − ρ at 0 and the MP bulk stay apart
    assert len(support(10.0, 0.1)) == 1
    assert len(support(0.1, 2.0)) == 1


@pytest.mark.parametrize("rho,delta", [(0.1, 0.01), (0.5, 0.3), (2.0, 1.0)])
def test_stieltjes_branch_against_quadrature(rho, delta):
    # complex z and real x outside the support: the selected root equals ∫ μ/(z − x) dx
    lo, hi = support(delta, rho)[0][0], support(delta, rho)[-1][1]
    zs = [0.3 - 1.0j, 1.0 + 0.5j, -0.5 - 0.2j, hi + 0.5, lo - 0.3, hi + 5.0]
    for z in zs:
        direct = integrate_bulks(lambda x, mu, z=z: mu / (z - x), delta, rho, nodes=96)
        assert complex(stieltjes(np.array([z]), delta, rho)[0]) == pytest.approx(direct, abs=1e-9)


def test_stieltjes_inside_is_density_and_hilbert():
    rho, delta = 0.5, 0.3
    ((lo, hi),) = support(delta, rho)
    x = np.linspace(lo, hi, 7)[1:-1]
    g = stieltjes(x, delta, rho)
    assert np.all(g.imag > 0)
    # Re g(x) = p.v. ∫ μ(t)/(x − t) dt: compare with the limit from z = x − iη, η -> 0 (Richardson)
    eta = 1e-4
    g1 = stieltjes(x - 1j * eta, delta, rho)
    g2 = stieltjes(x - 2j * eta, delta, rho)
    assert np.allclose(g.real, 2 * g1.real - g2.real, atol=1e-6)


@pytest.mark.parametrize("delta", [0.1, 1.0])
def test_wigner_limit(delta):
    # ρ -> ∞: S − √ρ I -> GOE, MMSE -> Δ/(1 + Δ); the gap shrinks like 1/ρ
    gaps = [abs(mmse_prior(delta, rho) - delta / (1 + delta)) for rho in (1e2, 1e4)]
    assert gaps[1] < 2e-5
    assert gaps[1] < gaps[0] / 50


@pytest.mark.parametrize("rho", [0.1, 0.5, 1.0, 2.0])
def test_small_and_large_delta(rho):
    count = 2 * rho - rho * rho if rho < 1 else 1.0  # degrees of freedom of S per d²/2
    assert mmse_prior(1e-8, rho) / 1e-8 == pytest.approx(count, abs=1e-5)
    # Δ -> ∞: MMSE -> 1 (the prior mean √ρ I), 1 − MMSE ~ 1/Δ
    assert 1 - mmse_prior(1e4, rho) == pytest.approx(1e-4, rel=0.02)
    assert 0 <= mmse_prior(1e6, rho) <= 1


@pytest.mark.parametrize("rho,delta", [(0.5, 0.3), (1.0, 1e-2)])
def test_nodes_convergence(rho, delta):
    ref = mmse_prior(delta, rho, nodes=128)
    assert abs(mmse_prior(delta, rho) - ref) < 1e-9


def _simulate(d, rho, delta, seeds):
    errs = []
    for seed in range(seeds):
        rng = np.random.default_rng(1000 + seed)
        S = sample_teacher(d, rho, rng)
        Y = S + math.sqrt(delta) * sample_goe(d, rng)
        errs.append(np.sum((rie_denoise(Y, delta, rho) - S) ** 2) / d)
    return np.mean(errs), np.std(errs, ddof=1) / math.sqrt(seeds)


SIM = [(0.1, 0.05), (0.5, 0.3), (2.0, 1.0)]


@pytest.mark.parametrize("rho,delta", SIM)
def test_mmse_simulation_reduced(rho, delta):
    # d = 300, 4 seeds: within 4 standard errors plus 1/d (the scale of the O(1/d) finite-size bias)
    mean, se = _simulate(300, rho, delta, 4)
    assert abs(mean - mmse_prior(delta, rho)) < 4 * se + 1.0 / 300


@pytest.mark.slow
@pytest.mark.parametrize("rho,delta", SIM)
def test_mmse_simulation_d1000(rho, delta):
    mean, se = _simulate(1000, rho, delta, 4)
    assert abs(mean - mmse_prior(delta, rho)) < 4 * se + 1.0 / 1000


def test_rie_divergence_matches_spectral_formula():
    # (2/d²)[Σ ξ'(λ_i) + Σ_{i<j} (ξ_i − ξ_j)/(λ_i − λ_j)] -> MMSE/Δ; finite d = 400, one seed:
    # measured gaps 0.9e-3 and 1.5e-3 (two seeds; 2/d² vs 1/N alone is a 1/d = 2.5e-3 relative
    # effect), so 1e-2 is a 7x margin
    rho, delta, d = 0.5, 0.3, 400
    rng = np.random.default_rng(3)
    Y = sample_teacher(d, rho, rng) + math.sqrt(delta) * sample_goe(d, rng)
    lam = np.linalg.eigvalsh(Y)
    xi = rie_eigenvalues(lam, delta, rho)
    eps = 1e-6
    dxi = (rie_eigenvalues(lam + eps, delta, rho) - rie_eigenvalues(lam - eps, delta, rho)) / (2 * eps)
    dl = lam[:, None] - lam[None, :]
    off = np.where(np.eye(d, dtype=bool), 0.0, (xi[:, None] - xi[None, :]) / np.where(dl == 0, 1, dl))
    div = (2 / d**2) * (dxi.sum() + 0.5 * off.sum())
    assert div == pytest.approx(rie_divergence(delta, rho), abs=1e-2)
