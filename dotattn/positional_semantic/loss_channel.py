"""Loss channel: the Moreau envelope averaged over the Gaussian fields, and the hat updates.

SPEC section 3. For a quadrature rule with nodes x = (ξ, η) ∈ R^{L r} × R^{L r_t} the fields are
built by :mod:`dotattn.positional_semantic.overlaps` (Cholesky parametrisation), the global prox is taken at every
node at once (:func:`dotattn.positional_semantic.prox.prox`), and

    E[M] ≈ Σ_n w_n M(ω(x_n), T(h*(x_n)); V).

Hat updates (stationarity of Φ in the overlaps), two forms:

* ``"gradient"`` (default, any r, r_t): the exact gradient of the discretised −α E[M] in
  (q, V, μ, θ) by the envelope theorem (∂M/∂p = ∂objective/∂p at fixed ĥ), chained through the
  Cholesky factors. The fixed point is then an exact stationary point of the discretised Φ.
* ``"stein"`` (r = r_t = 1, any L): the Gaussian integration-by-parts form written in SPEC.

Both agree up to quadrature error (tested).

Token symmetry (``symmetry=True``, the default). The map is equivariant under the group of
token actions g = (s_ξ, s_η, π): ξ_l → s_ξ ξ_π(l), η_l → s_η η_π(l) whenever the state and the
problem allow it exactly: s_ξ μ_π(l) = μ_l for all l, s_ξ = s_η unless θ = 0 (then B = 0 and the
teacher fields see η only), and A_π(l)π(l') = A_ll' (ℓ is invariant under h → ±Ph, h* → ±Ph*
for a token permutation P that fixes A). Then ĥ(g x) = g · ĥ(x), f and ∂ℓ/∂h* transform like
ξ and η, and on a rule that is itself invariant (tensor Gauss-Hermite; never QMC) every
expectation is an orbit sum: the prox is taken at one node per orbit only
(:meth:`GaussianRule.fold`). The global prox search must be equivariant as well: only
permutations that map cyclic shifts to cyclic shifts (the canonical prox starts) are used. Random
prox starts (the default for L ≥ 3 or r ≥ 2) are drawn at the representative only; the folded
search is then the full one with equivariant random starts (the images of the representative's
at the other nodes of its orbit), which agrees with the unfolded search wherever both find the
global minimum (measured in benchmarks/README.md). Toy model: 2x fewer nodes on a general state with
μ_1 = −μ_2, 4x on the positional (θ = 0) and semantic (μ = 0) branches, 8x on the
uninformative one. The result equals the full rule's up to rounding (tested).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from dotattn.positional_semantic.overlaps import (
    FieldFactors,
    Hats,
    Overlaps,
    factor_jvp,
    field_factors,
    symmetric_basis,
)
from dotattn.positional_semantic.problem import Problem, require_replica_theory
from dotattn.positional_semantic.prox import ProxResult, _apply_right, point_loss, prox
from dotattn.positional_semantic.quadrature import Fold, GaussianRule
from dotattn.positional_semantic.tokens import mix_tokens, teacher_target, whitened_teacher_gradient

__all__ = [
    "Fields",
    "LossChannelResult",
    "TokenSymmetry",
    "token_symmetry",
    "local_fields",
    "hat_update",
    "test_error",
    "HAT_FORMS",
]

HAT_FORMS = ("gradient", "stein")


@dataclass(frozen=True)
class Fields:
    """Fields at the N nodes: xi (N, L, r), eta (N, L, r_t), centre ω (N, L, r), h_star (N, L, r_t).

    For tokens correlated across positions, centre and h_star are the whitened fields C^{-1/2} ω and
    C^{-1/2} h* (:mod:`dotattn.positional_semantic.tokens`); at c = 0 they are the fields themselves."""

    xi: np.ndarray
    eta: np.ndarray
    centre: np.ndarray
    h_star: np.ndarray
    factors: FieldFactors


@dataclass(frozen=True)
class LossChannelResult:
    """Hats, E[M] (scalar, per sample), the prox solution at the nodes actually used (``rep_prox``: one per
    orbit when a token symmetry folded the rule), the fields there, and that symmetry. :attr:`prox` is the
    prox at every node of the rule, expanded from the representatives when first read (the iteration itself
    only needs the representatives': :func:`hat_update`'s ``warm_from``)."""

    hats: Hats
    envelope: float
    rep_prox: ProxResult
    fields: Fields
    symmetry: TokenSymmetry | None = None

    @functools.cached_property
    def prox(self) -> ProxResult:
        """The prox at every node of the rule (the representatives' images where the rule was folded)."""
        sym, px = self.symmetry, self.rep_prox
        if sym is None:
            return px
        alts = alts_f = None
        if px.alts is not None and px.alts_f is not None:  # both or neither (ProxResult checks)
            alts = np.stack([sym.expand(a) for a in px.alts])
            alts_f = np.stack([sym.expand(a) for a in px.alts_f])
        return ProxResult(
            h=sym.expand(px.h),
            value=px.value[sym.fold.rep_of],
            f=sym.expand(px.f),
            iterations=px.iterations,
            n_starts=px.n_starts,
            residual=px.residual,  # the representatives' residual (the others are their images)
            alts=alts,
            alts_f=alts_f,
        )


@dataclass(frozen=True)
class TokenSymmetry:
    """A group of token actions g = (s_ξ, s_η, π) (see the module docstring) and the folded rule.

    elements: tuple of (s_ξ, s_η, perm) with perm a tuple of L token indices, identity first.
    fold: orbits of the rule's nodes under the group.  order: |G|.
    """

    elements: tuple
    fold: Fold

    @property
    def order(self) -> int:
        return len(self.elements)

    def token_projector(self) -> np.ndarray:
        """Π = avg_g s_ξ P_g (L, L) with (P_g a)_l = a_π(l): E[f] = Π Σ_orbits w f(x_rep) (read-only; made
        once per symmetry, which the rule keeps across the iterations)."""
        return self._projector

    @functools.cached_property
    def _projector(self) -> np.ndarray:
        L = len(self.elements[0][2])
        Pi = np.zeros((L, L))
        for s_xi, _, perm in self.elements:
            Pi[np.arange(L), list(perm)] += s_xi
        Pi = Pi / self.order
        Pi.setflags(write=False)
        return Pi

    def mixed_character(self) -> float:
        """avg_g s_ξ s_η: the factor of a ξ-η moment (E[f ηᵀ], E[ξ ∂ℓ/∂h*ᵀ])."""
        return self._mixed

    @functools.cached_property
    def _mixed(self) -> float:
        return float(np.mean([s_xi * s_eta for s_xi, s_eta, _ in self.elements]))

    @functools.cached_property
    def _gather(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index (N, L) into the flattened (M·L) representative values, s_ξ (N,), s_η (N,))."""
        L = len(self.elements[0][2])
        perms = np.array([e[2] for e in self.elements])  # (|G|, L)
        s_xi = np.array([e[0] for e in self.elements], dtype=float)
        s_eta = np.array([e[1] for e in self.elements], dtype=float)
        e = self.fold.elem_of
        return self.fold.rep_of[:, None] * L + perms[e], s_xi[e], s_eta[e]

    def expand(self, x: np.ndarray, kind: str = "xi") -> np.ndarray:
        """Values at every node (N, L, k) from the values x (M, L, k) at the orbit representatives,
        for a field that transforms like ξ (``kind='xi'``) or η: x(g x_rep) = s · x_rep[π]."""
        index, s_xi, s_eta = self._gather
        M, L, k = x.shape
        return (s_xi if kind == "xi" else s_eta)[:, None, None] * x.reshape(M * L, k)[index]


_MAX_PERMUTED_TOKENS = 4  # beyond this only the sign actions are tried (L! permutations)


@functools.cache
def _normalises_shifts(perm: tuple[int, ...]) -> bool:
    """π ∘ (cyclic shift) ∘ π⁻¹ is a cyclic shift for every shift: then the prox's canonical
    starts (±c and its cyclic shifts) at the node g·x are the images of those at x."""
    L = len(perm)
    inv = np.argsort(perm)
    shifts = {tuple(np.roll(np.arange(L), k)) for k in range(L)}
    return all(tuple(np.asarray(perm)[np.roll(np.arange(L), k)][inv]) in shifts for k in range(L))


def token_symmetry(
    overlaps: Overlaps, rule: GaussianRule, problem: Problem, random_starts: int | None = None
) -> TokenSymmetry | None:
    """The largest group of token actions under which the loss-channel map at ``overlaps`` is exactly
    equivariant and ``rule`` invariant, with the rule folded by it; None if only the identity.

    The global prox search must be equivariant too, so that the folded computation is the full
    one: only permutations that map the canonical starts to themselves. ``random_starts`` is
    accepted for compatibility and no longer matters: random starts are drawn at the
    representatives (see the module docstring).
    """
    L, r, rt = problem.L, problem.field_rank, problem.teacher_rank
    if rule.groups is not None:
        return None
    A, mu = problem.A, overlaps.mu
    theta_zero = not np.any(overlaps.theta)
    mu_tol = 1e-13 * max(1.0, float(np.max(np.abs(mu))) if mu.size else 1.0)
    perms = list(itertools.permutations(range(L))) if L <= _MAX_PERMUTED_TOKENS else [tuple(range(L))]
    elements = []
    for perm in perms:
        if not np.array_equal(A[np.ix_(perm, perm)], A) or not _normalises_shifts(perm):
            continue
        for s_xi in (1, -1):
            if np.max(np.abs(s_xi * mu[list(perm)] - mu), initial=0.0) > mu_tol:
                continue
            for s_eta in (1, -1):
                if s_eta != s_xi and not theta_zero:
                    continue
                elements.append((s_xi, s_eta, tuple(perm)))
    if len(elements) <= 1:
        return None
    key = ("token symmetry", tuple(elements))
    if key not in rule._cache:
        maps = []
        for s_xi, s_eta, perm in elements:  # signed coordinate permutation of x = (ξ (L, r), η (L, r_t))
            src = [perm[l] * r + i for l in range(L) for i in range(r)]
            src += [L * r + perm[l] * rt + k for l in range(L) for k in range(rt)]
            maps.append((tuple(src), (s_xi,) * (L * r) + (s_eta,) * (L * rt)))
        fold = rule.fold(maps)
        rule._cache[key] = None if fold is None else TokenSymmetry(elements=tuple(elements), fold=fold)
    return rule._cache[key]


def local_fields(overlaps: Overlaps, rule: GaussianRule, problem: Problem) -> Fields:
    """Student centres ω_l = μ_l + C ξ_l and teacher fields h*_l = Bᵀξ_l + D η_l at every node
    (whitened for correlated tokens: ω̃ = C_tok^{-1/2} μ + C ξ, h̃* unchanged; tied student only)."""
    require_replica_theory(problem)
    L, r, rt = problem.L, problem.field_rank, problem.teacher_rank
    if rule.dim != L * (r + rt):
        raise ValueError(
            f"quadrature rule has dimension {rule.dim}, the problem needs L(r + r_t) = {L * (r + rt)} "
            f"(r: the field rank)"
        )
    f = field_factors(overlaps, problem)
    N = rule.size
    xi = rule.nodes[:, : L * r].reshape(N, L, r)
    eta = rule.nodes[:, L * r :].reshape(N, L, rt)
    # (_apply_right: no BLAS call for r = 1, its threads cost more than they give)
    centre = mix_tokens(overlaps.mu, problem, -0.5)[None] + _apply_right(xi, f.C.T)
    h_star = _apply_right(xi, f.B) + _apply_right(eta, f.D.T)
    return Fields(xi=xi, eta=eta, centre=centre, h_star=h_star, factors=f)


def _expect(weights: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E[Σ_l a_l b_lᵀ] = Σ_n w_n Σ_l a_nl b_nlᵀ for a (N, L, i), b (N, L, j): shape (i, j)."""
    return np.einsum("n,nli,nlj->ij", weights, a, b)


def _minima(px: ProxResult, fl: Fields, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """(ĥ, f, ξ, η, h*, w) over every global minimiser of every node: a node with k degenerate
    minimisers (:attr:`ProxResult.alts`) counts each with weight w/k. Without degenerate nodes
    these are the prox's own arrays."""
    if px.alts is None or px.alts_f is None:  # both or neither (ProxResult checks)
        return px.h, px.f, fl.xi, fl.eta, fl.h_star, weights
    count = px.minima_count()
    parts = [(px.h, px.f, fl.xi, fl.eta, fl.h_star, weights / count)]
    for k in range(px.alts.shape[0]):
        i = np.flatnonzero(~np.isnan(px.alts[k, :, 0, 0]))
        parts.append((px.alts[k, i], px.alts_f[k, i], fl.xi[i], fl.eta[i], fl.h_star[i], weights[i] / count[i]))
    return tuple(np.concatenate(z) for z in zip(*parts, strict=True))


def hat_update(
    overlaps: Overlaps,
    alpha: float,
    rule: GaussianRule,
    problem: Problem,
    *,
    search: str = "global",
    warm: np.ndarray | None = None,
    form: str = "gradient",
    random_starts: int | None = None,
    symmetry: bool = True,
    warm_from: LossChannelResult | None = None,
) -> LossChannelResult:
    """Hats from the overlaps (one loss-channel step).

    ``search='global'``: multi-start global prox. ``search='local'``: one Newton run from
    ``warm`` (N, L, r; a previous ĥ) or, if None, from the centres ω. A node whose minimum is
    degenerate by an exact symmetry of its objective (:attr:`ProxResult.alts`) counts every one of
    its minimisers equally (the symmetric choice; taking whichever one rounding makes lowest would
    let the map jump between them from step to step). ``symmetry``: fold the rule
    by the exact token symmetry of the state (:func:`token_symmetry`), if any. Raises
    InvalidOverlaps if the fields cannot be formed. ``warm_from``: a previous step's result whose ĥ at every
    node is ``warm`` (which is then not needed): where both steps fold the same rule by the same symmetry, its
    representatives' ĥ are taken as they are (the same numbers as expanding and gathering them again).
    """
    if search not in ("global", "local"):
        raise ValueError(f"search must be 'global' or 'local', got {search!r}")
    if form not in HAT_FORMS:
        raise ValueError(f"hat form must be one of {HAT_FORMS}, got {form!r}")
    sym = token_symmetry(overlaps, rule, problem, random_starts) if symmetry else None
    used = rule
    if sym is not None:
        key = ("folded rule", sym.elements)  # the rule restricted to the orbit representatives, made once
        if key not in rule._cache:
            rule._cache[key] = GaussianRule(
                nodes=rule.nodes[sym.fold.rep], weights=sym.fold.weights, kind=rule.kind, order=rule.order
            )
        used = rule._cache[key]
        if warm_from is not None and warm_from.symmetry is sym:
            warm = warm_from.rep_prox.h  # = warm_from.prox.h[sym.fold.rep] (the representatives are fixed)
        elif warm is not None or warm_from is not None:
            warm = np.asarray(warm if warm_from is None else warm_from.prox.h)[sym.fold.rep]
    elif warm_from is not None:
        warm = warm_from.prox.h
    fl = local_fields(overlaps, used, problem)
    target = teacher_target(fl.h_star, problem)
    if search == "local" and warm is None:
        warm = fl.centre
    # r = 1: the node symmetries h → ±P h are token actions, and where the state has them the fold's
    # orbit sums already average over the degenerate minimisers (a node fixed by one otherwise is an
    # accident of measure zero); r >= 2 adds the student's own reflections, which the fold lacks
    px = prox(
        fl.centre,
        target,
        overlaps.V,
        problem,
        warm=warm if search == "local" else None,
        random_starts=random_starts,
        symmetric_nodes=sym is None or problem.rank > 1,
    )
    envelope = float(used.expect(px.value))
    h_all, f, xi, eta, h_star, w = _minima(px, fl, used.weights)  # f = V⁻¹(ĥ − ω), (M, L, r)
    mu_hat = alpha * np.einsum("n,nlr->lr", w, f)
    mixed = 1.0
    if sym is not None:
        mu_hat = sym.token_projector() @ mu_hat
        mixed = sym.mixed_character()
    mu_hat = mix_tokens(mu_hat, problem, -0.5)  # the conjugate of μ (whitened f: μ̂ = α C_tok^{-1/2} E[f])
    q_hat = alpha * _expect(w, f, f)
    q_hat = 0.5 * (q_hat + q_hat.T)
    if form == "stein":
        if problem.field_rank != 1 or problem.teacher_rank != 1:
            raise ValueError("the Stein form of the hats is implemented for a tied student with r = r_t = 1 only")
        q, th = overlaps.q[0, 0], overlaps.theta[0, 0]
        v_star = fl.factors.D[0, 0]
        theta_hat = mixed * alpha * _expect(w, f, eta) / v_star
        V_hat = -alpha * _expect(w, f, xi) / np.sqrt(q) + th * theta_hat / q
    else:
        g_star = whitened_teacher_gradient(h_all, h_star, problem)  # ∂ℓ/∂h* at ĥ
        G_C = -_expect(w, f, xi)  # ∂E/∂C (r, r)
        G_B = mixed * _expect(w, xi, g_star)  # ∂E/∂B (r, r_t)
        G_D = _expect(w, g_star, eta)  # ∂E/∂D (r_t, r_t)

        def directional(dq: np.ndarray, dth: np.ndarray) -> float:
            d = factor_jvp(fl.factors, dq, dth)
            return float(np.sum(G_C * d.C) + np.sum(G_B * d.B) + np.sum(G_D * d.D))

        r, rt = problem.field_rank, problem.teacher_rank
        grad_q = np.zeros((r, r))
        for i, j, E in symmetric_basis(r):
            val = directional(E, np.zeros((r, rt)))
            grad_q[i, j] = grad_q[j, i] = val if i == j else 0.5 * val
        grad_theta = np.zeros((r, rt))
        for i in range(r):
            for k in range(rt):
                E = np.zeros((r, rt))
                E[i, k] = 1.0
                grad_theta[i, k] = directional(np.zeros((r, r)), E)
        V_hat = 2 * alpha * grad_q
        theta_hat = -alpha * grad_theta
    V_hat = 0.5 * (V_hat + V_hat.T)
    hats = Hats(q_hat=q_hat, V_hat=V_hat, theta_hat=theta_hat, mu_hat=mu_hat)
    return LossChannelResult(hats=hats, envelope=envelope, rep_prox=px, fields=fl, symmetry=sym)


def test_error(overlaps: Overlaps, rule: GaussianRule, problem: Problem) -> tuple[float, float]:
    """ε_g = E[ℓ(h, h*)] with h_l = μ_l + C ξ_l (no prox), and its quadrature standard error."""
    fl = local_fields(overlaps, rule, problem)
    values = point_loss(problem).value(fl.centre, teacher_target(fl.h_star, problem))
    return float(rule.expect(values)), float(rule.standard_error(values))
