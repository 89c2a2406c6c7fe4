"""The two image claims over many trained networks (``dotattn paths networks``): per-network quantities read from
``paths images`` summaries, their distribution over networks per size, the pooled permutation test and the
verdicts.

Pure numpy/scipy (no torch, no files): a ``paths images`` summary.json (as a dict) in, frozen records out. The rule
is the one fixed before any network was trained in ``results/paths/omniglot_networks/README.md`` (section "The
rule, fixed before any run"; :data:`RULE`):

* **per network and set** (:data:`SETS`: Omniglot test characters, FashionMNIST, digits): N* is the finite width
  with the best *validation* accuracy (ties: the lower validation loss, then the smaller width), never chosen on
  test; the **gain** over the GP is the theory's test accuracy at N* minus the GP limit's (each at its own
  temperature chosen on validation, on the same episodes); the network–theory **gap** is the trained network's
  accuracy minus the theory's at N*; ρ is Spearman's rank correlation between the head scores (U at the smallest
  width) and the trained network's accuracy drops when each head is pruned alone; the **pruning change** is the
  trained network's accuracy with the two lowest-scoring heads pruned together minus unpruned;
* **per set and size** (width of the trained network): mean, standard error sd/√n (ddof = 1) and n of the gain,
  the gap and the pruning change; the mean ρ and its pooled one-sided permutation p (:func:`pooled_permutation_p`);
* **verdicts** per size with at least :data:`MIN_NETWORKS` networks (:func:`claim1_verdict`,
  :func:`claim2_verdict`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from dotattn.core.rows import read_flat, read_float, read_int
from dotattn.core.validation import ParameterError

__all__ = [
    "RULE",
    "RULE_LOCATION",
    "SETS",
    "OOD_SETS",
    "MIN_NETWORKS",
    "PERMUTATIONS",
    "PERMUTATION_SEED",
    "SES",
    "P_LEVEL",
    "REFUTE_GAIN",
    "LITTLE_COST",
    "REPRODUCED",
    "REFUTED",
    "UNDECIDED",
    "NOT_JUDGED",
    "NetworkResult",
    "HeadRow",
    "ClaimRow",
    "NETWORK_COLUMNS",
    "HEAD_COLUMNS",
    "CLAIM_COLUMNS",
    "select_width",
    "network_results",
    "head_rows",
    "mean_se",
    "spearman_rows",
    "pooled_permutation_p",
    "claim_rows",
    "claim1_verdict",
    "claim2_verdict",
    "NetworksStudy",
    "analyse",
]

RULE_LOCATION = "results/paths/omniglot_networks/README.md, section 'The rule, fixed before any run'"
SETS: tuple[str, ...] = ("test", "fashion_mnist", "digits")
"""The evaluation sets of ``paths images``: Omniglot test characters (in distribution), then out of distribution."""
OOD_SETS: tuple[str, ...] = SETS[1:]
MIN_NETWORKS = 3
"""A size is judged only with at least this many networks."""
PERMUTATIONS = 100_000
PERMUTATION_SEED = 0
"""Seed of the permutations: set s at width w draws from ``numpy.random.default_rng([PERMUTATION_SEED, w, i_s])``
(i_s the index of s in :data:`SETS`), so the p values are reproducible."""
SES = 2.0
"""'2 se' of the rule: twice the standard error over networks."""
P_LEVEL = 0.01
"""The scores predict the drops if the pooled permutation p on the Omniglot test characters is below this."""
REFUTE_GAIN = 0.01
"""Claim 1 is refuted if on every set the mean gain plus 2 se is below this (no gain of one percentage point)."""
LITTLE_COST = -0.02
"""Pruning costs little in distribution if the mean change minus 2 se is above this; claim 2 is refuted (with
p >= :data:`P_LEVEL`) if the mean change plus 2 se is below it."""
REPRODUCED, REFUTED, UNDECIDED, NOT_JUDGED = "reproduced", "refuted", "not decided", "not judged"
RULE = (
    f"The rule of {RULE_LOCATION}. Per network and set (Omniglot test characters, FashionMNIST, digits): gain over "
    "the GP = test accuracy of the finite width N* minus the GP limit's, N* the finite width with the best "
    "validation accuracy (ties: lower validation loss, then the smaller width); network - theory gap = the trained "
    "network's test accuracy minus the theory's at N*; rho = Spearman's rho between the head scores (U at the "
    "smallest width) and the trained network's accuracy drops when each head is pruned alone; pruning change = the "
    "trained network's accuracy with the two lowest-scoring heads pruned together minus unpruned. Per set and size: "
    "mean and se (sd/sqrt(n)) of gain, gap and pruning change; mean rho and its pooled one-sided permutation p "
    "(head scores permuted within each network, 1e5 seeded permutations). Verdicts per size with >= 3 networks "
    "(2 se = twice the standard error over networks): claim 1 reproduced if the mean gain exceeds 0 by more than "
    "2 se on the Omniglot test characters and on at least one out-of-distribution set, refuted if on every set the "
    "mean gain plus 2 se is below 0.01, otherwise not decided; claim 2: the scores predict the drops if the pooled "
    "p on the Omniglot test characters is below 0.01, pruning the two lowest-scoring heads costs little in "
    "distribution if the mean change minus 2 se there is above -0.02 and helps out of distribution on a set if the "
    "mean change exceeds 0 by more than 2 se there; reproduced if the scores predict the drops, the pruning costs "
    "little in distribution and helps on at least one out-of-distribution set; refuted if the pooled p is at least "
    "0.01 and the in-distribution change plus 2 se is below -0.02; otherwise not decided."
)
"""The rule as the output records it (its text is the README's; the README is the reference)."""


def _none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class NetworkResult:
    """One network on one set: the size (``width``, ``qk_dim``) and ``train_seed`` of the trained network, N* and its
    temperature and validation accuracy and loss, the accuracies of the network, the theory at N* and the GP limit
    on the set, the ``gain`` (theory at N* minus GP) with its paired episode error, the ``gap`` (network minus
    theory at N*), Spearman's ρ of scores against the network's drops and the pruning change with its paired error.
    NaN where the study has no converged finite width (N*, gain, gap) or constant drops (ρ)."""

    width: int
    qk_dim: int
    train_seed: int
    set: str
    N_star: float
    temperature: float
    validation_accuracy: float
    validation_loss: float
    network_accuracy: float
    theory_accuracy: float
    gp_accuracy: float
    gain: float
    gain_error: float
    gap: float
    spearman: float
    pruning_change: float
    pruning_change_error: float

    def to_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in NETWORK_COLUMNS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> NetworkResult:
        return cls(**read_flat(row, NETWORK_COLUMNS, ints=("width", "qk_dim", "train_seed"), texts=("set",)))


NETWORK_COLUMNS: tuple[str, ...] = tuple(NetworkResult.__dataclass_fields__)


@dataclass(frozen=True)
class HeadRow:
    """One head of one network: its ``score`` (U at the smallest width), ``rank`` among the network's heads, and the
    trained network's accuracy drop when it is pruned alone on each set (``drop_<set>``)."""

    width: int
    qk_dim: int
    train_seed: int
    layer: int
    head: int
    score: float
    rank: int
    drop_test: float
    drop_fashion_mnist: float
    drop_digits: float

    def drop(self, part: str) -> float:
        return float(getattr(self, f"drop_{part}"))

    def to_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in HEAD_COLUMNS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> HeadRow:
        ints = ("width", "qk_dim", "train_seed", "layer", "head", "rank")
        fields: dict[str, Any] = {f: read_int(row[f]) if f in ints else read_float(row[f]) for f in HEAD_COLUMNS}
        return cls(**fields)


HEAD_COLUMNS: tuple[str, ...] = tuple(HeadRow.__dataclass_fields__)


@dataclass(frozen=True)
class ClaimRow:
    """One set at one size over its ``n`` networks: mean, se and n (networks with a finite value) of the gain, the gap
    and the pruning change, the mean
    ρ over the ``rho_n`` networks whose drops are not all equal, and its pooled permutation ``p`` from
    ``permutations`` permutations."""

    set: str
    width: int
    qk_dim: int
    n: int
    gain_mean: float
    gain_se: float
    gain_n: int
    gap_mean: float
    gap_se: float
    gap_n: int
    change_mean: float
    change_se: float
    change_n: int
    rho_mean: float
    rho_n: int
    p: float
    permutations: int

    def to_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in CLAIM_COLUMNS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ClaimRow:
        ints = ("width", "qk_dim", "n", "gain_n", "gap_n", "change_n", "rho_n", "permutations")
        return cls(**read_flat(row, CLAIM_COLUMNS, ints=ints, texts=("set",)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "qk_dim": self.qk_dim,
            "gain": {"mean": _none(self.gain_mean), "se": _none(self.gain_se), "n": self.gain_n},
            "gap": {"mean": _none(self.gap_mean), "se": _none(self.gap_se), "n": self.gap_n},
            "pruning_change": {"mean": _none(self.change_mean), "se": _none(self.change_se), "n": self.change_n},
            "spearman": {"mean": _none(self.rho_mean), "n": self.rho_n, "p": _none(self.p)},
            "permutations": self.permutations,
        }


CLAIM_COLUMNS: tuple[str, ...] = tuple(ClaimRow.__dataclass_fields__)


# ----------------------------------------------------------------------------------------------
# one network
# ----------------------------------------------------------------------------------------------
def _width_value(key: str) -> float:
    try:
        return float(key)
    except ValueError:
        raise ParameterError(f"per_N: width key {key!r} is neither 'gp' nor a number") from None


def select_width(per_N: Mapping[str, Any]) -> str | None:
    """The key of N* in a ``paths images`` ``per_N``: among the finite widths with a converged temperature, the best
    validation accuracy, ties broken by the lower validation loss, then the smaller width; None if no finite width
    converged."""
    cands = []
    for key, entry in per_N.items():
        if key == "gp" or not isinstance(entry, Mapping) or "temperature" not in entry:
            continue
        cands.append((-float(entry["validation_accuracy"]), float(entry["validation_loss"]), _width_value(key), key))
    return min(cands)[3] if cands else None


def network_results(width: int, qk_dim: int, train_seed: int, summary: Mapping[str, Any]) -> list[NetworkResult]:
    """The results of one network (a ``paths images`` summary.json as a dict), one per set of :data:`SETS`."""
    per_N, gd, pruning = summary["per_N"], summary["gd"], summary["pruning"]
    star = select_width(per_N)
    gp = per_N.get("gp") or {}
    heads = head_rows(width, qk_dim, train_seed, summary)
    scores = np.array([h.score for h in heads])
    out = []
    nan = math.nan
    for part in SETS:
        net = float(gd[part]["accuracy"])
        gp_acc = float(gp[part]["accuracy"]) if part in gp else nan
        if star is None:
            N_star = T = va = vl = th = gain = gain_err = nan
        else:
            e = per_N[star]
            N_star, T = _width_value(star), float(e["temperature"])
            va, vl = float(e["validation_accuracy"]), float(e["validation_loss"])
            th = float(e[part]["accuracy"])
            gain = th - gp_acc
            gain_err = float((e[part].get("minus_gp") or {}).get("error", nan))
        drops = np.array([h.drop(part) for h in heads])
        change = pruning[part]["gd_change"]
        out.append(
            NetworkResult(
                width=width,
                qk_dim=qk_dim,
                train_seed=train_seed,
                set=part,
                N_star=N_star,
                temperature=T,
                validation_accuracy=va,
                validation_loss=vl,
                network_accuracy=net,
                theory_accuracy=th,
                gp_accuracy=gp_acc,
                gain=gain,
                gain_error=gain_err,
                gap=net - th,
                spearman=float(spearman_rows(scores[None, :], drops[None, :])[0]),
                pruning_change=float(change["difference"]),
                pruning_change_error=float(change["error"]),
            )
        )
    return out


def head_rows(width: int, qk_dim: int, train_seed: int, summary: Mapping[str, Any]) -> list[HeadRow]:
    """The heads of one network, in the order of its summary.json ``heads`` (its heads.csv)."""
    return [
        HeadRow(
            width=width,
            qk_dim=qk_dim,
            train_seed=train_seed,
            layer=int(h["layer"]),
            head=int(h["head"]),
            score=float(h["score"]),
            rank=int(h["rank"]),
            **{f"drop_{part}": float(h[f"gd_drop_{part}"]) for part in SETS},
        )
        for h in summary["heads"]
    ]


# ----------------------------------------------------------------------------------------------
# over networks
# ----------------------------------------------------------------------------------------------
def mean_se(values: Sequence[float]) -> tuple[float, float, int]:
    """(mean, standard error sd/√n with ddof = 1, n) of the finite ``values``; se is NaN for n < 2."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n == 0:
        return math.nan, math.nan, 0
    se = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return float(v.mean()), se, n


def _centred_ranks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks along the last axis, centred, and their norms (0 where all values tie)."""
    r = stats.rankdata(x, axis=-1)
    r = r - r.mean(axis=-1, keepdims=True)
    return r, np.sqrt((r * r).sum(axis=-1))


def spearman_rows(scores: np.ndarray, drops: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row of ``scores`` (n, k) against the same row of ``drops``: the Pearson correlation of
    their average ranks (scipy's ``spearmanr``); NaN for a row whose scores or drops all tie."""
    rs, ns = _centred_ranks(np.asarray(scores, dtype=float))
    rd, nd = _centred_ranks(np.asarray(drops, dtype=float))
    denom = ns * nd
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (rs * rd).sum(axis=-1) / np.where(denom > 0, denom, 1.0), np.nan)


PERMUTATION_CHUNK = 10_000
PERMUTATION_TIE = 1e-12
"""A permuted mean ρ counts as 'at least the observed one' when it is at least observed − 1e-12: the same mean
computed from another order of the same products differs from it by rounding only (~1e-16); ties count."""


def pooled_permutation_p(
    scores: np.ndarray, drops: np.ndarray, permutations: int, rng: np.random.Generator
) -> tuple[float, float]:
    """(observed mean ρ, one-sided p) of the networks' head scores ``scores`` (n, k) against their drops (n, k).

    Each of ``permutations`` draws permutes the scores of every network independently (each network keeps its own
    drops) and takes the mean over networks of Spearman's ρ (networks whose drops all tie have no ρ under any
    permutation and are left out of every mean). Convention: p = (1 + #{permuted mean ρ ≥ observed}) / (1 + B), B the
    number of permutations (the observed assignment counted as one of them, so p > 0); a permuted mean within
    :data:`PERMUTATION_TIE` of the observed counts as at least it."""
    if isinstance(permutations, bool) or not isinstance(permutations, (int, np.integer)) or permutations < 1:
        raise ParameterError(f"permutations must be an integer >= 1, got {permutations!r}")
    s, d = np.asarray(scores, dtype=float), np.asarray(drops, dtype=float)
    if s.ndim != 2 or s.shape != d.shape or s.shape[1] < 2:
        raise ParameterError(f"scores and drops must both be (networks, heads >= 2), got {s.shape} and {d.shape}")
    rs, ns = _centred_ranks(s)
    rd, nd = _centred_ranks(d)
    ok = (ns > 0) & (nd > 0)
    if not ok.any():
        return math.nan, math.nan
    rs, rd, denom = rs[ok], rd[ok], (ns * nd)[ok]
    observed = float(((rs * rd).sum(axis=-1) / denom).mean())
    n, k = rs.shape
    hits, done = 0, 0
    while done < permutations:
        c = min(PERMUTATION_CHUNK, permutations - done)
        order = np.argsort(rng.random((c, n, k)), axis=-1)
        permuted = np.take_along_axis(np.broadcast_to(rs, (c, n, k)), order, axis=-1)
        means = ((permuted * rd).sum(axis=-1) / denom).mean(axis=-1)
        hits += int(np.count_nonzero(means >= observed - PERMUTATION_TIE))
        done += c
    return observed, (1 + hits) / (1 + permutations)


def _sizes(results: Sequence[NetworkResult]) -> list[tuple[int, int]]:
    return sorted({(r.width, r.qk_dim) for r in results})


def claim_rows(
    results: Sequence[NetworkResult], heads: Sequence[HeadRow], permutations: int = PERMUTATIONS
) -> list[ClaimRow]:
    """Per set (in the order of :data:`SETS`) and size (width ascending): mean, se, n of the gain, gap and pruning
    change over the networks of that size, the mean ρ and its pooled permutation p (:func:`pooled_permutation_p`,
    generator ``default_rng([PERMUTATION_SEED, width, set index])``)."""
    out = []
    for i, part in enumerate(SETS):
        for width, qk in _sizes(results):
            mine = sorted((r for r in results if r.width == width and r.set == part), key=lambda r: r.train_seed)
            seeds = [r.train_seed for r in mine]
            by_seed = {s: [h for h in heads if h.width == width and h.train_seed == s] for s in seeds}
            k = {len(v) for v in by_seed.values()}
            if len(k) != 1 or 0 in k:
                raise ParameterError(f"width {width}: the networks hold {sorted(k)} heads; one count >= 2 needed")
            scores = np.array([[h.score for h in by_seed[s]] for s in seeds])
            drops = np.array([[h.drop(part) for h in by_seed[s]] for s in seeds])
            rng = np.random.default_rng([PERMUTATION_SEED, width, i])
            rho, p = pooled_permutation_p(scores, drops, permutations, rng)
            gain = mean_se([r.gain for r in mine])
            gap = mean_se([r.gap for r in mine])
            change = mean_se([r.pruning_change for r in mine])
            out.append(
                ClaimRow(
                    set=part,
                    width=width,
                    qk_dim=qk,
                    n=len(mine),
                    gain_mean=gain[0],
                    gain_se=gain[1],
                    gain_n=gain[2],
                    gap_mean=gap[0],
                    gap_se=gap[1],
                    gap_n=gap[2],
                    change_mean=change[0],
                    change_se=change[1],
                    change_n=change[2],
                    rho_mean=rho,
                    rho_n=int(np.isfinite(spearman_rows(scores, drops)).sum()),
                    p=p,
                    permutations=int(permutations),
                )
            )
    return out


def _above(mean: float, se: float, level: float = 0.0) -> bool:
    """mean − 2 se > level (False where either is NaN)."""
    return bool(math.isfinite(mean) and math.isfinite(se) and mean - SES * se > level)


def _below(mean: float, se: float, level: float) -> bool:
    """mean + 2 se < level (False where either is NaN)."""
    return bool(math.isfinite(mean) and math.isfinite(se) and mean + SES * se < level)


def _by_set(rows: Sequence[ClaimRow]) -> dict[str, ClaimRow]:
    by = {r.set: r for r in rows}
    if set(by) != set(SETS) or len(rows) != len(SETS) or len({(r.width, r.n) for r in rows}) != 1:
        raise ParameterError("a verdict needs one row per set of one size, with the same networks")
    return by


def claim1_verdict(rows: Sequence[ClaimRow]) -> dict[str, Any]:
    """Claim 1 (the finite-width theory beats its GP limit and the gain survives out of distribution) at one size,
    from its rows of every set: reproduced if the mean gain exceeds 0 by more than 2 se on the Omniglot test
    characters and on at least one OOD set; refuted if on every set the mean gain plus 2 se is below
    :data:`REFUTE_GAIN`; otherwise not decided. Not judged below :data:`MIN_NETWORKS` networks."""
    by = _by_set(rows)
    n = by["test"].n
    positive = {part: _above(by[part].gain_mean, by[part].gain_se) for part in SETS}
    small = {part: _below(by[part].gain_mean, by[part].gain_se, REFUTE_GAIN) for part in SETS}
    base: dict[str, Any] = {"n": n, "gain_above_2se": positive, "gain_plus_2se_below_0.01": small}
    if n < MIN_NETWORKS:
        return {"outcome": NOT_JUDGED, "reason": f"{n} networks; at least {MIN_NETWORKS} needed", **base}
    if positive["test"] and any(positive[p] for p in OOD_SETS):
        reason = "mean gain > 2 se on the Omniglot test characters and on " + ", ".join(
            p for p in OOD_SETS if positive[p]
        )
        return {"outcome": REPRODUCED, "reason": reason, **base}
    if all(small.values()):
        return {"outcome": REFUTED, "reason": "mean gain + 2 se < 0.01 on every set", **base}
    return {
        "outcome": UNDECIDED,
        "reason": "neither a gain > 2 se in and out of distribution nor < 0.01 everywhere",
        **base,
    }


def claim2_verdict(rows: Sequence[ClaimRow]) -> dict[str, Any]:
    """Claim 2 (head scores pick the heads that can be pruned) at one size, from its rows of every set: the scores
    predict the drops if the pooled p on the Omniglot test characters is below :data:`P_LEVEL`; pruning the two
    lowest-scoring heads costs little in distribution if the mean change minus 2 se there is above
    :data:`LITTLE_COST`, and helps out of distribution on a set if the mean change exceeds 0 by more than 2 se there.
    Reproduced if all three hold (help on at least one OOD set); refuted if p >= :data:`P_LEVEL` and the
    in-distribution change plus 2 se is below :data:`LITTLE_COST`; otherwise not decided. Not judged below
    :data:`MIN_NETWORKS` networks."""
    by = _by_set(rows)
    t = by["test"]
    n = t.n
    predicts = bool(math.isfinite(t.p) and t.p < P_LEVEL)
    little = _above(t.change_mean, t.change_se, LITTLE_COST)
    helps = {part: _above(by[part].change_mean, by[part].change_se) for part in OOD_SETS}
    costly = _below(t.change_mean, t.change_se, LITTLE_COST)
    base: dict[str, Any] = {
        "n": n,
        "scores_predict_drops": predicts,
        "p_test": _none(t.p),
        "costs_little_in_distribution": little,
        "helps_out_of_distribution": helps,
    }
    if n < MIN_NETWORKS:
        return {"outcome": NOT_JUDGED, "reason": f"{n} networks; at least {MIN_NETWORKS} needed", **base}
    if predicts and little and any(helps.values()):
        reason = "p < 0.01, change - 2 se > -0.02 in distribution, change > 2 se on " + ", ".join(
            p for p in OOD_SETS if helps[p]
        )
        return {"outcome": REPRODUCED, "reason": reason, **base}
    if not predicts and costly:
        return {"outcome": REFUTED, "reason": "p >= 0.01 and change + 2 se < -0.02 in distribution", **base}
    missing = [
        what
        for what, ok in (
            ("p < 0.01", predicts),
            ("change - 2 se > -0.02 in distribution", little),
            ("change > 2 se on an OOD set", any(helps.values())),
        )
        if not ok
    ]
    return {
        "outcome": UNDECIDED,
        "reason": "not reproduced (fails: " + "; ".join(missing) + ") and not refuted",
        **base,
    }


@dataclass(frozen=True)
class NetworksStudy:
    """Everything :func:`analyse` derives: the per-network results, the heads, the per-(set, size) rows and the
    verdicts per size."""

    results: tuple[NetworkResult, ...]
    heads: tuple[HeadRow, ...]
    claims: tuple[ClaimRow, ...]
    permutations: int

    @property
    def sizes(self) -> list[tuple[int, int]]:
        return _sizes(self.results)

    def verdicts(self) -> dict[str, dict[str, Any]]:
        """Per width (key ``str(width)``): ``claim1`` and ``claim2`` (:func:`claim1_verdict`, :func:`claim2_verdict`)."""
        out = {}
        for width, _ in self.sizes:
            rows = [c for c in self.claims if c.width == width]
            out[str(width)] = {"claim1": claim1_verdict(rows), "claim2": claim2_verdict(rows)}
        return out

    def claims_dict(self) -> dict[str, Any]:
        """``by_set`` (set -> width -> :meth:`ClaimRow.as_dict`), ``verdicts`` (width -> claim -> verdict),
        ``rule`` and ``rule_location``, ``permutation`` (count, seed, convention)."""
        by_set: dict[str, dict[str, Any]] = {}
        for c in self.claims:
            by_set.setdefault(c.set, {})[str(c.width)] = c.as_dict()
        return {
            "by_set": by_set,
            "verdicts": self.verdicts(),
            "rule": RULE,
            "rule_location": RULE_LOCATION,
            "permutation": {
                "permutations": self.permutations,
                "seed": PERMUTATION_SEED,
                "generator": "numpy.random.default_rng([seed, width, index of the set in (test, fashion_mnist, "
                "digits)])",
                "p": "(1 + #{permuted mean rho >= observed}) / (1 + permutations)",
            },
            "min_networks": MIN_NETWORKS,
        }

    def networks_list(self) -> list[dict[str, Any]]:
        """One record per network (width, qk_dim, train_seed and its results per set)."""
        keys = sorted({(r.width, r.qk_dim, r.train_seed) for r in self.results})
        out = []
        for w, q, s in keys:
            per_set = {}
            for r in self.results:
                if (r.width, r.qk_dim, r.train_seed) == (w, q, s):
                    per_set[r.set] = {
                        f: (_none(getattr(r, f)) if isinstance(getattr(r, f), float) else getattr(r, f))
                        for f in NETWORK_COLUMNS[4:]
                    }
            out.append({"width": w, "qk_dim": q, "train_seed": s, "sets": per_set})
        return out


def analyse(
    results: Sequence[NetworkResult], heads: Sequence[HeadRow], permutations: int = PERMUTATIONS
) -> NetworksStudy:
    """The rows over networks and the verdicts (module docstring) of the per-network ``results`` and ``heads``.
    ParameterError for a (width, train seed) twice per set, a width with two query/key dimensions, or no results."""
    if not results:
        raise ParameterError("no networks to analyse")
    seen: set[tuple[int, int, str]] = set()
    qk: dict[int, int] = {}
    for r in results:
        if r.set not in SETS:
            raise ParameterError(f"set must be one of {', '.join(SETS)}, got {r.set!r}")
        key = (r.width, r.train_seed, r.set)
        if key in seen:
            raise ParameterError(f"width {r.width}, train seed {r.train_seed}: two networks")
        seen.add(key)
        if qk.setdefault(r.width, r.qk_dim) != r.qk_dim:
            raise ParameterError(f"width {r.width}: query/key dimensions {qk[r.width]} and {r.qk_dim} (one per size)")
    claims = claim_rows(results, heads, permutations)
    return NetworksStudy(tuple(results), tuple(heads), tuple(claims), int(permutations))
