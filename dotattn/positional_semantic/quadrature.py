"""Expectations over a standard normal vector in D dimensions: nodes and weights.

Two rules (SPEC section 7):

* :func:`gauss_hermite` — tensor Gauss-Hermite with probabilists' weights, order k per axis,
  exact for polynomials of degree <= 2k - 1 in each variable; for D <= 6.
* :func:`sobol_qmc` — randomised quasi-Monte Carlo: scrambled Sobol points mapped to Gaussians
  by the inverse CDF, in R independent scramblings; the spread between the scramblings gives a
  standard-error estimate (:meth:`GaussianRule.standard_error`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

__all__ = ["GaussianRule", "Fold", "gauss_hermite", "sobol_qmc", "make_rule", "MAX_TENSOR_NODES"]

MAX_TENSOR_NODES = 3_000_000  # beyond this a tensor rule does not fit comfortably in memory


@dataclass(frozen=True)
class GaussianRule:
    """Nodes x (N, D) and weights w (N,) with E[f(X)] ≈ Σ_n w_n f(x_n), X ~ N(0, I_D).

    ``groups`` (N,) labels the independent QMC scramblings (None for deterministic rules);
    weights sum to 1 overall and to 1/R within each of the R groups.
    """

    nodes: np.ndarray
    weights: np.ndarray
    kind: str
    order: int
    groups: np.ndarray | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # derived objects (folds)

    @property
    def dim(self) -> int:
        return int(self.nodes.shape[1])

    @property
    def size(self) -> int:
        return int(self.nodes.shape[0])

    def expect(self, values: np.ndarray) -> np.ndarray:
        """Σ_n w_n values[n, ...]; ``values`` has leading axis N.

        By einsum, not BLAS: a threaded BLAS dot over ~10⁴ nodes costs milliseconds in thread
        start-up and leaves spinning threads that slow the rest (and a process pool's other workers).
        """
        return np.einsum("n,n...->...", self.weights, values)

    def standard_error(self, values: np.ndarray) -> np.ndarray:
        """Standard error of :meth:`expect` from the spread over scramblings (0 for GH rules)."""
        if self.groups is None:
            return np.zeros(np.shape(values)[1:])
        R = int(self.groups.max()) + 1
        per = np.stack(
            [
                self.expect(np.where((self.groups == g).reshape((-1,) + (1,) * (np.ndim(values) - 1)), values, 0.0)) * R
                for g in range(R)
            ]
        )
        return per.std(axis=0, ddof=1) / np.sqrt(R)

    def fold(self, maps: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]) -> Fold | None:
        """Orbits of the nodes under a group of signed coordinate permutations (cached).

        ``maps``: every element g of the group (identity included), each as (perm (D,), sign (D,))
        acting by (g x)_d = sign_d · x_{perm_d}. Returns None unless the rule is invariant: every
        image g x_n is a node (to 1e-10) with the same weight (to 1e-12 relative). QMC rules are
        never treated as invariant (their scramblings are not symmetric).
        """
        key = tuple((tuple(int(i) for i in p), tuple(int(s) for s in sg)) for p, sg in maps)
        if ("fold", key) not in self._cache:
            self._cache["fold", key] = None if self.groups is not None else Fold.of(self.nodes, self.weights, key)
        return self._cache["fold", key]

    def describe(self) -> dict:
        d = {"kind": self.kind, "order": self.order, "dim": self.dim, "nodes": self.size}
        if self.groups is not None:
            d["scramblings"] = int(self.groups.max()) + 1
        return d


@dataclass(frozen=True)
class Fold:
    """A rule folded by a finite group G of signed coordinate permutations under which it is invariant.

    rep (M,): one node per orbit (the smallest index).  weights (M,): total weight of each orbit.
    rep_of (N,): position in ``rep`` of each node's orbit.  elem_of (N,): index in ``maps`` of an
    element g with g · x_rep = x_n.  maps: the group elements, as given to :meth:`GaussianRule.fold`.

    For an integrand Q with Q(g x) = c(g) Q(x):  E[Q] = Σ_m weights_m · avg_g c(g) · Q(x_rep_m)
    (orbit-sum of the weights times the average of the character over the group).
    """

    rep: np.ndarray
    weights: np.ndarray
    rep_of: np.ndarray
    elem_of: np.ndarray
    maps: tuple

    @property
    def size(self) -> int:
        return int(self.rep.size)

    @classmethod
    def of(cls, nodes: np.ndarray, weights: np.ndarray, maps: tuple) -> Fold | None:
        N = len(nodes)
        images = []
        for perm, sign in maps:
            idx = _find_rows(nodes, nodes[:, list(perm)] * np.asarray(sign, dtype=float))
            if idx is None or not np.allclose(weights[idx], weights, rtol=1e-12, atol=0.0):
                return None
            images.append(idx)
        img = np.stack(images)  # (|G|, N): img[g, n] = index of g x_n
        orbit_min = img.min(axis=0)
        rep, rep_of = np.unique(orbit_min, return_inverse=True)
        # an element mapping the representative to n: g with img[g, rep_n] == n
        hits = img[:, orbit_min] == np.arange(N)[None, :]
        elem_of = np.argmax(hits, axis=0)
        if not np.all(hits[elem_of, np.arange(N)]):
            return None  # not a group action (maps not closed): refuse rather than guess
        w = np.bincount(rep_of, weights=weights, minlength=rep.size)
        return cls(rep=rep, weights=w, rep_of=rep_of, elem_of=elem_of, maps=maps)


def _find_rows(nodes: np.ndarray, targets: np.ndarray, tol: float = 1e-10) -> np.ndarray | None:
    """Index of the row of ``nodes`` equal (to ``tol``) to each row of ``targets``, or None.

    Coordinates are replaced by their rank among the distinct values of their column (few for a
    tensor rule), and a row by one mixed-radix integer; None if that integer would overflow.
    """
    N, D = nodes.shape
    key = np.zeros(N, dtype=np.int64)
    tkey = np.zeros(len(targets), dtype=np.int64)
    radix = 1
    for d in range(D):
        vals = np.unique(nodes[:, d])
        if radix * len(vals) >= 2**62:
            return None
        rank = np.searchsorted(vals, nodes[:, d])
        hi = np.clip(np.searchsorted(vals, targets[:, d]), 0, len(vals) - 1)  # nearest value: hi or hi − 1
        lo = np.maximum(hi - 1, 0)
        t = np.where(np.abs(vals[lo] - targets[:, d]) <= np.abs(vals[hi] - targets[:, d]), lo, hi)
        key += rank * radix
        tkey += t * radix
        radix *= len(vals)
    order = np.argsort(key)
    pos = np.clip(np.searchsorted(key[order], tkey), 0, N - 1)
    idx = order[pos]
    if not np.all(np.abs(nodes[idx] - targets) <= tol):
        return None
    return idx


def _hermite_1d(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilists' Gauss-Hermite nodes and weights normalised to sum 1 (N(0,1) expectation)."""
    x, w = special.roots_hermitenorm(k)
    return x, w / w.sum()


def gauss_hermite(dim: int, order: int) -> GaussianRule:
    """Tensor Gauss-Hermite rule of ``order`` points per axis in ``dim`` dimensions (order**dim nodes)."""
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    if order < 1:
        raise ValueError(f"quadrature order must be >= 1, got {order}")
    if order**dim > MAX_TENSOR_NODES:
        raise ValueError(
            f"a Gauss-Hermite rule of order {order} in {dim} dimensions has {order**dim:,} nodes "
            f"(limit {MAX_TENSOR_NODES:,}); use a lower order or the QMC rule"
        )
    x, w = _hermite_1d(order)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    wgrids = np.meshgrid(*([w] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    weights = np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)
    return GaussianRule(nodes=nodes, weights=weights, kind="gauss-hermite", order=order)


def sobol_qmc(dim: int, log2_points: int, scramblings: int = 8, seed: int = 0) -> GaussianRule:
    """Scrambled Sobol rule: ``scramblings`` independent randomisations of 2**log2_points points each."""
    if scramblings < 2:
        raise ValueError("QMC needs at least 2 scramblings for an error estimate")
    from scipy.stats.qmc import Sobol  # imported here: scipy.stats is slow to import

    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(scramblings):
        engine = Sobol(d=dim, scramble=True, seed=rng)
        u = engine.random_base2(m=log2_points)
        blocks.append(special.ndtri(np.clip(u, 1e-16, 1 - 1e-16)))
    n = 2**log2_points
    nodes = np.concatenate(blocks, axis=0)
    weights = np.full(n * scramblings, 1.0 / (n * scramblings))
    groups = np.repeat(np.arange(scramblings), n)
    return GaussianRule(nodes=nodes, weights=weights, kind="qmc", order=log2_points, groups=groups)


def make_rule(
    dim: int, kind: str = "gauss-hermite", order: int = 12, scramblings: int = 8, seed: int = 0
) -> GaussianRule:
    """Build a rule by name: 'gauss-hermite' (order per axis) or 'qmc' (order = log2 points)."""
    if kind in ("gauss-hermite", "gh"):
        return gauss_hermite(dim, order)
    if kind == "qmc":
        return sobol_qmc(dim, order, scramblings, seed)
    raise ValueError(f"quadrature kind must be 'gauss-hermite' or 'qmc', got {kind!r}")
