"""The one-shot image study (``dotattn paths images``): a network with learned queries and keys trained
by gradient descent on Omniglot episodes; the finite-width theory and its GP limit with those queries
and keys frozen, the temperature chosen per width on the validation characters; head scores against
the pruning drops of the trained network; a posterior-sampling check. Written as CSV + JSON + PNG with
provenance and a manifest (docs/attention_paths.md, "One-shot images").
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special, stats

from dotattn.core.progress import Cost
from dotattn.core.status import CONVERGED
from dotattn.core.validation import ParameterError, check_int, check_number
from dotattn.paths.analysis import POINT_COLUMNS, PathsPoint, correct_predictions, head_scores, prune_heads
from dotattn.paths.data import PathData
from dotattn.paths.images import (
    DIGIT_CLASSES,
    EMBEDDING_SCALE,
    MAX_WAYS,
    CharacterSplit,
    Episodes,
    ImageSet,
    episode_length,
    episode_tokens,
    make_episodes,
    read_digits,
    read_fashion_mnist,
    read_omniglot,
    roles,
    split_characters,
    token_dim,
)
from dotattn.paths.network import FactoredKernels, attention, path_inputs, path_kernel_diagonal, path_kernels
from dotattn.paths.theory import (
    MAX_EXTENDED_PATHS,
    N_RANGE,
    TEMPERATURE_RANGE,
    PathsModel,
    TheoryResult,
    gp_order_parameters,
    minimise_action,
    predict,
)

__all__ = [
    "ImageStudyConfig",
    "ImageData",
    "load_image_data",
    "run_image_study",
    "EVAL_SETS",
    "GD_FILE",
    "HEAD_COLUMNS",
    "gibbs",
    "paired_difference",
    "spearman_bootstrap",
    "IMAGE_STUDY_FILES",
    "NetworkSource",
    "read_network_file",
]

EVAL_SETS: tuple[str, ...] = ("test", "fashion_mnist", "digits")
"""Where accuracies are reported: Omniglot test characters (in distribution) and the two OOD sets."""
GD_FILE = "gd_network.npz"
HEAD_COLUMNS = ["layer", "head", "score", "rank"] + [
    f"{w}_{s}" for w in ("gd_accuracy_pruned", "gd_drop", "theory_accuracy_pruned", "theory_drop") for s in EVAL_SETS
]
IMAGE_STUDY_FILES = (
    "summary.json",
    "points.csv",
    "selection.csv",
    "fixed_temperature.csv",
    "heads.csv",
    "gd_history.csv",
    GD_FILE,
    "episodes.png",
    "accuracy_vs_N.png",
    "U_smallest_N.png",
    "head_scores_pruning.png",
)
P_RANGE = (10, 5000)
"""Training episodes of the theory: below 10 the temperature choice is noise; the factored kernels
make P = 5000 cost ~25 s per action evaluation (a P × P Cholesky factorisation and two P × P × 16·N0
products)."""


@dataclass(frozen=True)
class ImageStudyConfig:
    """Everything the study depends on (validates itself; ParameterError names the field)."""

    omniglot: str
    fashion_mnist: str
    gd: Any = None  # GDConfig (imported lazily: torch)
    P: int = 600
    P_validation: int = 500
    P_test: int = 1000
    P_ood: int = 1000
    widths: tuple[float, ...] = (10, 20, 50, 100, 200, 500, 1000, 10000)
    temperatures: tuple[float, ...] = (0.01, 0.1, 1.0)
    sigma2: float = 1.0
    split_seed: int = 0
    train_fraction: float = 0.6
    validation_fraction: float = 0.2
    seed: int = 0
    bootstrap: int = 1000
    sample_N: int = 10
    sample_P: int = 100
    sample_chains: int = 2
    sample_warmup: int = 200
    sample_draws: int = 200
    sample_tree_depth: int = 10
    sample_collapsed: bool = False
    theory_tol: float = 1e-8
    ways: int = 2
    """Classes per episode: 2 is the two-way task with one output (±1); N ≥ 3 has M = N one-hot outputs."""

    @property
    def outputs(self) -> int:
        """M: 1 for two ways (the ±1 label), N for N ≥ 3 ways (one-hot targets)."""
        return 1 if self.ways == 2 else self.ways

    def __post_init__(self) -> None:
        object.__setattr__(self, "ways", check_int("ways", self.ways, 2, MAX_WAYS))
        for name in ("omniglot", "fashion_mnist"):
            v = getattr(self, name)
            if not isinstance(v, str) or not v.strip():
                raise ParameterError(f"--{name.replace('_', '-')} must be a path, got {v!r}")
        object.__setattr__(self, "P", check_int("P (training episodes of the theory)", self.P, *P_RANGE))
        object.__setattr__(self, "P_validation", check_int("P-validation", self.P_validation, 10, 100_000))
        object.__setattr__(self, "P_test", check_int("P-test", self.P_test, 10, 100_000))
        object.__setattr__(self, "P_ood", check_int("P-ood", self.P_ood, 10, 100_000))
        if not self.widths:
            raise ParameterError("N grid is empty; give at least one width")
        lo, hi = N_RANGE
        object.__setattr__(
            self,
            "widths",
            tuple(sorted(check_number("N (width)", N, lo, False, hi, f"in [{lo:g}, {hi:g}]") for N in self.widths)),
        )
        if not self.temperatures:
            raise ParameterError("temperature grid is empty; give at least one temperature")
        lo, hi = TEMPERATURE_RANGE
        object.__setattr__(
            self,
            "temperatures",
            tuple(
                sorted(check_number("temperature", t, lo, False, hi, f"in [{lo:g}, {hi:g}]") for t in self.temperatures)
            ),
        )
        object.__setattr__(self, "sigma2", check_number("sigma2", self.sigma2, 1e-4, False, 1e4, "in [1e-4, 1e4]"))
        for name in ("split_seed", "seed"):
            object.__setattr__(self, name, check_int(name.replace("_", "-"), getattr(self, name), 0, 2**32 - 1))
        object.__setattr__(self, "bootstrap", check_int("bootstrap", self.bootstrap, 10, 100_000))
        object.__setattr__(self, "sample_N", check_int("sample-N (0: no sampling check)", self.sample_N, 0, 200))
        object.__setattr__(self, "sample_P", check_int("sample-P", self.sample_P, 10, 2000))
        if self.sample_N and self.sample_P > self.P:  # it samples the first sample_P of the P training episodes
            raise ParameterError(
                f"sample-P must be at most P = {self.P} (the training episodes it samples from), got {self.sample_P}"
            )
        object.__setattr__(self, "sample_chains", check_int("sample-chains", self.sample_chains, 1, 64))
        object.__setattr__(self, "sample_warmup", check_int("sample-warmup", self.sample_warmup, 1, 100_000))
        object.__setattr__(self, "sample_draws", check_int("sample-draws", self.sample_draws, 4, 100_000))
        object.__setattr__(self, "sample_tree_depth", check_int("sample-tree-depth", self.sample_tree_depth, 1, 15))
        if not isinstance(self.sample_collapsed, bool):
            raise ParameterError(f"sample-collapsed must be true or false, got {self.sample_collapsed!r}")
        object.__setattr__(
            self, "theory_tol", check_number("theory-tol", self.theory_tol, 1e-14, False, 1e-2, "in [1e-14, 1e-2]")
        )
        if self.gd is None:
            from dotattn.paths.images_gd import GDConfig

            object.__setattr__(self, "gd", GDConfig(outputs=self.outputs))
        elif self.gd.outputs != self.outputs:
            object.__setattr__(self, "gd", replace(self.gd, outputs=self.outputs))
        if self.outputs > 1 and self.gd.heads**self.gd.layers * self.outputs > MAX_EXTENDED_PATHS:
            raise ParameterError(
                f"ways: {self.outputs} outputs x {self.gd.heads**self.gd.layers} paths must be <= "
                f"{MAX_EXTENDED_PATHS}, got {self.outputs * self.gd.heads**self.gd.layers}"
            )
        if self.sample_collapsed and self.sample_N:
            from dotattn.paths.collapsed import MAX_COLLAPSED_PARAMETERS, collapsed_layout

            dim = collapsed_layout((self.gd.heads,) * self.gd.layers, self.sample_N, self.outputs).n_params
            if dim > MAX_COLLAPSED_PARAMETERS:
                raise ParameterError(
                    f"sample-N: {self.gd.layers} layers x {self.gd.heads} heads at N = {self.sample_N} "
                    f"give {dim} collapsed coordinates; at most {MAX_COLLAPSED_PARAMETERS}"
                )

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "gd"}
        if self.ways == 2:  # the two-way task: the record of every earlier run, unchanged
            del d["ways"]
        d["gd"] = self.gd.to_dict()
        return d


@dataclass(frozen=True)
class ImageData:
    """The image sets, the character split and the episodes of every part (with their tokens)."""

    omniglot: ImageSet
    ood: dict[str, ImageSet]
    split: CharacterSplit
    episodes: dict[str, tuple[ImageSet, Episodes]]
    tokens: dict[str, np.ndarray]

    def counts(self) -> dict[str, Any]:
        return {
            "characters": {
                "train": len(self.split.train),
                "validation": len(self.split.validation),
                "test": len(self.split.test),
            },
            "images": {
                "omniglot": int(len(self.omniglot.images)),
                **{k: int(len(v.images)) for k, v in self.ood.items()},
            },
            "episodes": {k: int(len(e)) for k, (_, e) in self.episodes.items()},
        }


def _rng(seed: int, stream: str) -> np.random.Generator:
    index = {"theory_train": 0, "validation": 1, "test": 2, "fashion_mnist": 3, "digits": 4, "gd_epoch": 5}[stream]
    return np.random.default_rng(np.random.SeedSequence([seed, index]))


def load_image_data(config: ImageStudyConfig) -> ImageData:
    """Read and standardise the three image sets, split Omniglot by character and draw every episode set
    (seeded per set). Bad data (missing, incomplete, undecodable) raise ParameterError before anything
    is written."""
    w = config.ways
    om = read_omniglot(config.omniglot)
    sp = split_characters(om.n_classes, (config.train_fraction, config.validation_fraction), config.split_seed)
    for part, chars in (("train", sp.train), ("validation", sp.validation), ("test", sp.test)):
        if len(chars) < w:
            raise ParameterError(f"ways must be at most the {len(chars)} {part} characters of the split, got {w}")
    digits = read_digits(DIGIT_CLASSES if w == 2 else tuple(range(w)))
    ood = {"fashion_mnist": read_fashion_mnist(config.fashion_mnist, w), "digits": digits}
    eps = {
        "theory_train": (om, make_episodes(om, sp.train, config.P, _rng(config.seed, "theory_train"), w)),
        "validation": (om, make_episodes(om, sp.validation, config.P_validation, _rng(config.seed, "validation"), w)),
        "test": (om, make_episodes(om, sp.test, config.P_test, _rng(config.seed, "test"), w)),
    }
    for name, s in ood.items():
        eps[name] = (s, make_episodes(s, np.arange(s.n_classes), config.P_ood, _rng(config.seed, name), w))
    tokens = {k: episode_tokens(s, e) for k, (s, e) in eps.items()}
    return ImageData(om, ood, sp, eps, tokens)


def gd_epoch_sampler(data: ImageData, config: ImageStudyConfig) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """Fresh training-character episodes for each GD epoch (seeded by the network's training seed and the
    epoch, so a resumed run sees the same episodes)."""

    def sample(epoch: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(np.random.SeedSequence([config.gd.seed, 5, epoch]))
        ep = make_episodes(data.omniglot, data.split.train, config.gd.epoch_episodes, rng, config.ways)
        return episode_tokens(data.omniglot, ep), ep.targets

    return sample


def gibbs(mean: np.ndarray, var: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Accuracy and loss of the mean predictor and of the Gibbs predictor (one posterior draw
    f ~ N(mean, var)): Gibbs accuracy = ⟨Φ(y·mean/√var)⟩, Gibbs loss = bias² + variance.

    M outputs (``mean``, ``var``: (P, M), ``y`` one-hot): accuracy of the argmax, losses averaged over the
    outputs; no Gibbs accuracy (it needs the M × M posterior covariance of every input, not its diagonal)."""
    v = np.clip(var, 0.0, None)
    if np.ndim(mean) == 2:
        bias2 = float(np.mean((mean - y) ** 2))
        return {
            "accuracy": float(np.mean(correct_predictions(mean, y))),
            "loss": bias2,
            "bias2": bias2,
            "variance": float(np.mean(v)),
            "gibbs_loss": bias2 + float(np.mean(v)),
        }
    z = np.where(v > 0, y * mean / np.sqrt(np.where(v > 0, v, 1.0)), np.where(y * mean > 0, np.inf, -np.inf))
    bias2 = float(np.mean((mean - y) ** 2))
    return {
        "accuracy": float(np.mean(np.sign(mean) == y)),
        "loss": bias2,
        "bias2": bias2,
        "variance": float(np.mean(v)),
        "gibbs_accuracy": float(np.mean(special.ndtr(z))),
        "gibbs_loss": bias2 + float(np.mean(v)),
    }


def accuracy_error(acc: float, n: int) -> float:
    """Binomial standard error √(a(1−a)/n) of an accuracy on n independent episodes."""
    return math.sqrt(max(acc * (1 - acc), 0.0) / n)


def paired_difference(correct_a: np.ndarray, correct_b: np.ndarray) -> dict[str, float]:
    """Accuracy of a minus accuracy of b on the same n episodes (``correct_*``: booleans (n,)), with
    the paired standard error sd(a_i − b_i)/√n (episodes independent; much smaller than the unpaired
    √(se_a² + se_b²) when a and b get mostly the same episodes right)."""
    d = np.asarray(correct_a, dtype=float) - np.asarray(correct_b, dtype=float)
    if d.ndim != 1 or len(d) < 2:
        raise ValueError("paired_difference needs two boolean vectors of the same length >= 2")
    return {"difference": float(d.mean()), "error": float(d.std(ddof=1) / math.sqrt(len(d)))}


def spearman_bootstrap(
    scores: np.ndarray, correct_base: np.ndarray, correct_pruned: np.ndarray, n_boot: int, rng: np.random.Generator
) -> dict[str, float]:
    """Spearman correlation between head scores (k,) and the accuracy drops of pruning each head,
    drop_k = mean(correct_base) − mean(correct_pruned[k]) over the episodes (``correct_*``: booleans,
    (P,) and (k, P)); 95 % percentile interval from ``n_boot`` resamples of the episodes."""

    def rho(idx: np.ndarray) -> float:
        drops = correct_base[idx].mean() - correct_pruned[:, idx].mean(axis=1)
        if np.ptp(drops) == 0:
            return float("nan")
        return float(stats.spearmanr(scores, drops).statistic)

    P = len(correct_base)
    point = rho(np.arange(P))
    boots = np.array([rho(rng.integers(0, P, P)) for _ in range(n_boot)])
    boots = boots[np.isfinite(boots)]
    lo, hi = np.percentile(boots, [2.5, 97.5]) if len(boots) else (float("nan"), float("nan"))
    return {"spearman": point, "low": float(lo), "high": float(hi), "resamples": int(len(boots))}


@dataclass
class ImageStudy:
    config: ImageStudyConfig
    data: ImageData
    gd: Any = None
    gd_eval: dict[str, Any] = field(default_factory=dict)
    selection: list[PathsPoint] = field(default_factory=list)
    points: list[PathsPoint] = field(default_factory=list)
    fixed_temperature: list[PathsPoint] = field(default_factory=list)
    per_N: dict[str, Any] = field(default_factory=dict)
    heads: list[dict[str, Any]] = field(default_factory=list)
    pruning: dict[str, Any] = field(default_factory=dict)
    sample: dict[str, Any] | None = None
    U_smallest: np.ndarray | None = None
    path_names: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    gd_source: dict[str, Any] | None = None
    """Where the trained network came from when it was given with --network (recorded in provenance)."""


def _path_meta(L: int, H: int) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[int, ...], ...], tuple[str, ...]]:
    import itertools

    head_names = tuple(tuple(f"L{l + 1}H{h + 1}" for h in range(H)) for l in range(L))
    keys = tuple(itertools.product(*[range(H) for _ in range(L)]))
    names = tuple(">".join(head_names[l][k[l]] for l in range(L)) for k in keys)
    return head_names, keys, names


def path_data_sets(
    data: ImageData, weights: dict[str, np.ndarray], L: int, H: int, P_sample: int = 0, sample_factored: bool = False
) -> dict[str, PathData]:
    """One :class:`PathData` per evaluation part (validation, test, OOD), training kernels on the
    theory's training episodes, all factored (:class:`FactoredKernels`), attention from the trained
    queries and keys. ``P_sample`` > 0: also a part ``sample`` whose training kernels are those of the
    first ``P_sample`` training episodes, with the test part as test: dense for the sampler over the
    weights, factored with ``sample_factored`` (the collapsed sampler packs them pair by pair)."""
    from dotattn.paths.images_gd import key_query_matrices

    Ws = key_query_matrices(weights)
    xi = {}
    for name, x in data.tokens.items():
        om = [np.stack([attention(x, W) for W in layer]) for layer in Ws]
        xi[name] = path_inputs(x, om, "mean")
    head_names, keys, names = _path_meta(L, H)
    tr = xi["theory_train"]
    y = data.episodes["theory_train"][1].targets
    out = {}
    for name in ("validation",) + EVAL_SETS:
        out[name] = PathData(
            head_names=head_names,
            path_keys=keys,
            path_names=names,
            C_train=FactoredKernels(tr, tr),
            y_train=y,
            C_cross=FactoredKernels(xi[name], tr),
            C_diag=path_kernel_diagonal(xi[name]),
            y_test=data.episodes[name][1].targets,
        )
    if P_sample:
        sub = tr[:, :P_sample]
        out["sample"] = PathData(
            head_names=head_names,
            path_keys=keys,
            path_names=names,
            C_train=FactoredKernels(sub, sub) if sample_factored else path_kernels(sub, sub),
            y_train=y[:P_sample],
            C_cross=FactoredKernels(xi["test"], sub),
            C_diag=path_kernel_diagonal(xi["test"]),
            y_test=data.episodes["test"][1].targets,
        )
    return out


def _scored(U: np.ndarray, d: PathData, model: PathsModel) -> tuple[dict[str, float], np.ndarray]:
    """The scores of :func:`gibbs` on the test episodes of ``d`` and which episodes the mean predictor
    gets right (booleans, (P_test,))."""
    mean, var = predict(U, d.C_train, d.y_train, d.C_cross, d.C_diag, model)
    return gibbs(mean, var, d.y_test), correct_predictions(mean, d.y_test)


def _evaluate(U: np.ndarray, d: PathData, model: PathsModel) -> dict[str, float]:
    return _scored(U, d, model)[0]


def _point(
    part: str,
    method: str,
    N: float,
    U: np.ndarray,
    ev: dict[str, float],
    model: PathsModel,
    names: tuple[str, ...],
    res: TheoryResult | None,
) -> PathsPoint:
    return PathsPoint(
        subset=part,
        method=method,
        N=N,
        temperature=model.temperature,
        accuracy=ev["accuracy"],
        loss=ev["loss"],
        variance=ev["variance"],
        status=res.status if res else CONVERGED,
        stationarity=res.stationarity if res else 0.0,
        iterations=res.iterations if res else 0,
        seconds=res.seconds if res else 0.0,
        paths=names,
        U=U,
    )


def select_and_evaluate(
    study: ImageStudy, sets: dict[str, PathData], heads: tuple[int, ...], progress: Callable[[str], None] | None
) -> None:
    """For every temperature: the GP limit and the saddle point at each width (largest first, each
    started from the last converged one), scored on the validation episodes; per width (and for the GP)
    the temperature of the best validation accuracy (ties: lower validation loss) is kept and evaluated
    on the test and OOD parts. Every converged (width, temperature) is also evaluated on the test and OOD
    parts into ``fixed_temperature`` (the width at a fixed 𝒯: read, never used to choose anything)."""
    cfg = study.config
    val = sets["validation"]
    names = val.path_names
    cand: dict[float, list[tuple[float, float, float, np.ndarray, TheoryResult | None]]] = {}
    for T in cfg.temperatures:
        gp_model = PathsModel(N=N_RANGE[1], temperature=T, sigma2=cfg.sigma2, heads=heads, outputs=cfg.outputs)
        U_gp = gp_order_parameters(gp_model)[0]
        ev = _evaluate(U_gp, val, gp_model)
        study.selection.append(_point("validation", "gp", float("nan"), U_gp, ev, gp_model, names, None))
        cand.setdefault(math.inf, []).append((ev["accuracy"], -ev["loss"], T, U_gp, None))
        for part in EVAL_SETS:
            study.fixed_temperature.append(
                _point(part, "gp", float("nan"), U_gp, _evaluate(U_gp, sets[part], gp_model), gp_model, names, None)
            )
        start = None
        for N in sorted(cfg.widths, reverse=True):
            model = PathsModel(N=N, temperature=T, sigma2=cfg.sigma2, heads=heads, outputs=cfg.outputs)
            res = minimise_action(val.C_train, val.y_train, model, start=start, tol=cfg.theory_tol)
            start = res.levels if res.converged else start
            ev = _evaluate(res.U, val, model)
            study.selection.append(_point("validation", "theory", N, res.U, ev, model, names, res))
            if res.converged:
                cand.setdefault(N, []).append((ev["accuracy"], -ev["loss"], T, res.U, res))
                for part in EVAL_SETS:
                    study.fixed_temperature.append(
                        _point(part, "theory", N, res.U, _evaluate(res.U, sets[part], model), model, names, res)
                    )
            if progress:
                progress(
                    f"theory: T={T:<6g} N={N:<8g} {res.status:>13s} it={res.iterations:<4d} "
                    f"stat={res.stationarity:.1e} validation accuracy {ev['accuracy']:.3f} ({res.seconds:.1f} s)"
                )
    gp_correct: dict[str, np.ndarray] = {}
    for N in [math.inf] + list(cfg.widths):
        if not cand.get(N):
            study.per_N["gp" if N == math.inf else f"{N:g}"] = {"status": "no converged temperature"}
            continue
        acc, negloss, T, U, chosen = max(cand[N], key=lambda c: (c[0], c[1]))
        method = "gp" if N == math.inf else "theory"
        model = PathsModel(
            N=N_RANGE[1] if N == math.inf else N, temperature=T, sigma2=cfg.sigma2, heads=heads, outputs=cfg.outputs
        )
        entry: dict[str, Any] = {
            "temperature": T,
            "validation_accuracy": acc,
            "validation_loss": -negloss,
            "status": chosen.status if chosen else CONVERGED,
        }
        for part in EVAL_SETS:
            scores, correct = _scored(U, sets[part], model)
            part_ev: dict[str, Any] = dict(scores)  # and the accuracy's error, the paired difference to the GP
            n = len(sets[part].y_test)
            part_ev["accuracy_error"] = accuracy_error(part_ev["accuracy"], n)
            if N == math.inf:
                gp_correct[part] = correct
            elif part in gp_correct:
                part_ev["minus_gp"] = paired_difference(correct, gp_correct[part])
            entry[part] = part_ev
            study.points.append(
                _point(part, method, float("nan") if N == math.inf else N, U, part_ev, model, names, chosen)
            )
        study.per_N["gp" if N == math.inf else f"{N:g}"] = entry


def _pruning(
    study: ImageStudy,
    sets: dict[str, PathData],
    scores: np.ndarray,
    model: PathsModel,
    U: np.ndarray,
    rng: np.random.Generator,
) -> None:
    """Every head of the trained network pruned alone, then the two lowest-scoring together, with no
    retraining; the same prunings in the theory (U of the smallest width); the rank correlations."""
    from dotattn.paths.images_gd import correct, predict_network, prune_mask

    cfg = study.config
    L, H = cfg.gd.layers, cfg.gd.heads
    heads = [(l, h) for l in range(L) for h in range(H)]
    order = np.argsort(scores, kind="stable")
    lowest = [heads[i] for i in order[:2]]
    base_correct, pruned_correct = {}, {}
    rows = []
    for part in EVAL_SETS:
        x, y = study.data.tokens[part], sets[part].y_test
        base_correct[part] = correct(predict_network(study.gd.weights, cfg.gd, x), y)
        pruned_correct[part] = np.array(
            [correct(predict_network(study.gd.weights, cfg.gd, x, prune_mask(L, H, [lh])), y) for lh in heads]
        )
    theory_base = {p: _evaluate(U, sets[p], model)["accuracy"] for p in EVAL_SETS}
    for k, (l, h) in enumerate(heads):
        row: dict[str, Any] = {
            "layer": l + 1,
            "head": h + 1,
            "score": float(scores[k]),
            "rank": int(np.flatnonzero(order == k)[0]) + 1,
        }
        for part in EVAL_SETS:
            g = float(pruned_correct[part][k].mean())
            t = prune_heads(U, sets[part], model, [(l, h)]).accuracy
            row.update(
                {
                    f"gd_accuracy_pruned_{part}": g,
                    f"gd_drop_{part}": float(base_correct[part].mean()) - g,
                    f"theory_accuracy_pruned_{part}": t,
                    f"theory_drop_{part}": theory_base[part] - t,
                }
            )
        rows.append(row)
    study.heads = rows
    two: dict[str, Any] = {"heads": [f"L{l + 1}H{h + 1}" for l, h in lowest]}
    for part in EVAL_SETS:
        x, y = study.data.tokens[part], sets[part].y_test
        right = correct(predict_network(study.gd.weights, cfg.gd, x, prune_mask(L, H, lowest)), y)
        acc = float(np.mean(right))
        n = len(y)
        base = float(base_correct[part].mean())
        two[part] = {
            "gd_accuracy": base,
            "gd_accuracy_error": accuracy_error(base, n),
            "gd_accuracy_pruned": acc,
            "gd_accuracy_pruned_error": accuracy_error(acc, n),
            "gd_change": paired_difference(right, base_correct[part]),
            "theory_accuracy": theory_base[part],
            "theory_accuracy_pruned": prune_heads(U, sets[part], model, lowest).accuracy,
        }
        two[part]["spearman_score_vs_gd_drop"] = spearman_bootstrap(
            scores, base_correct[part], pruned_correct[part], cfg.bootstrap, rng
        )
        td = np.array([r[f"theory_drop_{part}"] for r in rows])
        two[part]["spearman_score_vs_theory_drop"] = (
            float(stats.spearmanr(scores, td).statistic) if np.ptp(td) > 0 else float("nan")
        )
    study.pruning = two


def _sampling_check(
    study: ImageStudy, sets: dict[str, PathData], heads: tuple[int, ...], progress: Callable[[str], None] | None
) -> None:
    """NUTS at N = sample_N on the first sample_P training episodes, temperature as chosen at the
    smallest width, against the theory's saddle point on the same episodes (test accuracy): over the
    weights (a, V) with V⁰ integrated out, or, with ``sample_collapsed``, over the order parameters of the
    exact collapsed posterior (:mod:`dotattn.paths.collapsed`; same posterior of U, a chain whose dimension
    does not grow with N0 or P)."""
    from dotattn.paths.sampler import SamplerConfig, run_nuts, sampled_evaluation

    cfg = study.config
    d = sets["sample"]
    small = f"{cfg.widths[0]:g}"
    T = study.per_N.get(small, {}).get("temperature", cfg.temperatures[0])
    model = PathsModel(N=cfg.sample_N, temperature=T, sigma2=cfg.sigma2, heads=heads, outputs=cfg.outputs)
    th = minimise_action(d.C_train, d.y_train, model, tol=cfg.theory_tol)
    th_ev = _evaluate(th.U, d, model)
    sc = SamplerConfig(
        chains=cfg.sample_chains,
        warmup=cfg.sample_warmup,
        draws=cfg.sample_draws,
        max_tree_depth=cfg.sample_tree_depth,
        seed=cfg.seed,
    )
    what = "collapsed posterior of U" if cfg.sample_collapsed else "weights"
    if progress:
        progress(
            f"sampling: NUTS ({what}) N={cfg.sample_N} P={cfg.sample_P} T={T:g}, {cfg.sample_chains} chains "
            f"of {cfg.sample_warmup} + {cfg.sample_draws}"
        )
    if cfg.sample_collapsed:
        from dotattn.paths.collapsed import run_collapsed

        res = run_collapsed(d.C_train, d.y_train, model, sc)
    else:
        res = run_nuts(d, model, sc)
    ev, acc_err, loss_err = sampled_evaluation(res, d, model)
    converged = res.rhat_max < 1.01 and res.divergences == 0 and res.ess_min >= 100
    z = (res.U_mean - th.U) / res.U_mcse
    sampler = (
        "NUTS over the order parameters of the collapsed posterior"
        if cfg.sample_collapsed
        else "NUTS over (a, V) with V0 integrated out"
    )
    study.sample = {
        "sampler": sampler,
        "N": cfg.sample_N,
        "P": cfg.sample_P,
        "temperature": T,
        "config": sc.to_dict(),
        "status": CONVERGED if converged else "not_converged",
        "accuracy_sampled": ev.accuracy,
        "accuracy_sampled_error": acc_err,
        "loss_sampled": ev.loss,
        "loss_sampled_error": loss_err,
        "accuracy_theory": th_ev["accuracy"],
        "loss_theory": th_ev["loss"],
        "theory_status": th.status,
        "U_max_abs_z": float(np.nanmax(np.abs(z))),
        "rhat_max": res.rhat_max,
        "ess_min": res.ess_min,
        "divergences": res.divergences,
        "seconds": res.seconds,
    }


IMAGES_COST = Cost(7.2, "results/paths/omniglot/summary.json (timings)")
"""CPU seconds per saddle point (one width, one temperature) at P = 600 in the committed Omniglot study (48 in
343 s); with its training (224 s, stopped early by the patience) and sampling check (4 collapsed chains of 1500
iterations at P = 200: 637 s, 0.106 s per iteration) the basis of :func:`study_seconds`."""


WAYS_COST = Cost(29.0, "docs/attention_paths.md §16, 'Cost of a five-way study'")
"""CPU seconds per saddle point of a five-way study at P = 200 (16 paths x 5 outputs, L-BFGS to 1e-6): 9.6, 13.1,
26.9 and 66.4 s at N = 10⁴, 10³, 100, 10 (warm-started sweep at 𝒯 = 0.1), mean 29 s; 0.30 s per L-BFGS iteration."""
WAYS_GD_EPOCH = 11.9
"""CPU seconds of one training epoch (100 Adam steps of 64 five-way episodes and 500 validation episodes), same
source as :data:`WAYS_COST`."""
WAYS_NUTS_ITERATION = 0.43
"""CPU seconds per NUTS iteration over the weights at N = 10 on 100 five-way episodes (a 500 × 500 kernel, 31
leapfrog steps on average over 80 iterations), same source as :data:`WAYS_COST`."""
WAYS_NUTS_CHAIN = 17.0
"""CPU seconds per chain besides its iterations (building and compiling the sampler), same source."""


def study_seconds(config: ImageStudyConfig, gd_reused: bool = False) -> float:
    """Rough CPU seconds of a whole study: the committed study's training time (unless the trained network is
    reused), widths × temperatures saddle points at :data:`IMAGES_COST` × (P/600)^1.5, and the sampling check
    at 0.106 s per iteration per chain × (sample_P/200)^1.5. N ≥ 3 ways: :data:`WAYS_COST` per saddle point ×
    (M P/1000)² (the M² blocks of P × P kernels), every epoch of the training at :data:`WAYS_GD_EPOCH` ×
    ((N + 1)/6)² (attention over T = 16 (N + 1) tokens; a bound: training stops early), the sampling check at
    :data:`WAYS_NUTS_ITERATION` per iteration × (M sample_P/500)² and :data:`WAYS_NUTS_CHAIN` per chain."""
    if config.ways > 2:
        M = config.outputs
        ways_saddles = len(config.widths) * len(config.temperatures) * WAYS_COST.seconds * (M * config.P / 1000) ** 2
        epochs = config.gd.max_epochs * config.gd.epoch_episodes / 6400
        ways_gd = 0.0 if gd_reused else epochs * WAYS_GD_EPOCH * ((config.ways + 1) / 6) ** 2
        per_iteration = WAYS_NUTS_ITERATION * (M * config.sample_P / 500) ** 2
        ways_sampling = (
            config.sample_chains * (WAYS_NUTS_CHAIN + (config.sample_warmup + config.sample_draws) * per_iteration)
            if config.sample_N
            else 0.0
        )
        return ways_gd + ways_saddles + ways_sampling
    saddles = len(config.widths) * len(config.temperatures) * IMAGES_COST.seconds * (config.P / 600) ** 1.5
    sampling = (
        config.sample_chains * (config.sample_warmup + config.sample_draws) * 0.106 * (config.sample_P / 200) ** 1.5
        if config.sample_N
        else 0.0
    )
    return (0.0 if gd_reused else 224.0) + saddles + sampling


def run_image_study(
    config: ImageStudyConfig,
    data: ImageData,
    out: Path,
    progress: Callable[[str], None] | None = None,
    network: NetworkSource | None = None,
) -> ImageStudy:
    """The whole study into ``out`` (GD weights reused from ``out/gd_network.npz`` when they were made
    with the same settings; training resumes from ``out/gd_checkpoint.pt``). ``network``
    (:func:`read_network_file`): a network trained by another run, used without training and copied into
    ``out/gd_network.npz``."""
    from dotattn.core.io import atomic_write_bytes
    from dotattn.paths.images_gd import CHECKPOINT_NAME, GDResult, correct, predict_network, train_network

    study = ImageStudy(config=config, data=data)
    t0 = time.perf_counter()
    gd_path = out / GD_FILE
    if network is not None:
        gd = network.gd
        atomic_write_bytes(gd_path, network.data)
        study.gd_source = dict(network.record)
        if progress:
            progress(f"gd: using the trained network of --network {network.record['file']}")
    else:
        gd = _read_gd(gd_path, config)
    if gd is None:
        gd = train_network(
            config.gd,
            gd_epoch_sampler(data, config),
            data.tokens["validation"],
            data.episodes["validation"][1].targets,
            checkpoint=out / CHECKPOINT_NAME,
            progress=progress,
        )
        _write_gd(gd_path, gd, config)
        (out / CHECKPOINT_NAME).unlink(missing_ok=True)
    elif progress and network is None:
        progress(f"gd: reusing the trained network in {gd_path}")
    assert isinstance(gd, GDResult)
    study.gd = gd
    study.timings["gd_seconds"] = gd.seconds
    for part in ("validation",) + EVAL_SETS:
        y = data.episodes[part][1].targets
        acc = float(np.mean(correct(predict_network(gd.weights, config.gd, data.tokens[part]), y)))
        study.gd_eval[part] = {"accuracy": acc, "accuracy_error": accuracy_error(acc, len(y))}
    heads = (config.gd.heads,) * config.gd.layers
    t1 = time.perf_counter()
    sets = path_data_sets(
        data,
        gd.weights,
        config.gd.layers,
        config.gd.heads,
        P_sample=min(config.sample_P, config.P) if config.sample_N else 0,
        sample_factored=config.sample_collapsed,
    )
    study.path_names = sets["validation"].path_names
    select_and_evaluate(study, sets, heads, progress)
    study.timings["theory_seconds"] = time.perf_counter() - t1
    small = f"{config.widths[0]:g}"
    if "temperature" not in study.per_N.get(small, {}):
        raise ParameterError(f"no temperature converged at the smallest width N = {small}: no head scores")
    sel = next(p for p in study.points if p.method == "theory" and p.N == config.widths[0])
    U = sel.U
    study.U_smallest = U
    model = PathsModel(
        N=config.widths[0], temperature=sel.temperature, sigma2=config.sigma2, heads=heads, outputs=config.outputs
    )
    scores = np.concatenate(head_scores(U, sets["validation"]))
    _pruning(study, sets, scores, model, U, np.random.default_rng(np.random.SeedSequence([config.seed, 7])))
    if config.sample_N:
        t2 = time.perf_counter()
        _sampling_check(study, sets, heads, progress)
        study.timings["sampling_seconds"] = time.perf_counter() - t2
    study.timings["total_seconds"] = time.perf_counter() - t0
    return study


def _load_gd(path: Path) -> tuple[dict[str, Any], Any]:
    """(metadata, :class:`~dotattn.paths.images_gd.GDResult`) of a gd_network.npz; OSError, ValueError, KeyError,
    TypeError, AttributeError, EOFError or zipfile.BadZipFile when it cannot be read as one."""
    from dotattn.paths.images_gd import GDResult

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        weights = {k[2:]: np.array(z[k]) for k in z.files if k.startswith("w_")}
    if not isinstance(meta, dict):
        raise TypeError("its metadata is not a JSON object")
    gd = GDResult(
        weights=weights,
        best_epoch=int(meta["best_epoch"]),
        best_validation_accuracy=float(meta["best_validation_accuracy"]),
        history=tuple(meta["history"]),
        status=str(meta["status"]),
        seconds=float(meta["seconds"]),
    )
    return meta, gd


def _manifest_lists(path: Path, sha256: Callable[[Path], str]) -> bool | None:
    """Whether the manifest.json beside ``path`` lists it with the SHA-256 ``sha256(path)`` gives; None when there
    is no readable manifest there."""
    from dotattn.core.io import MANIFEST_NAME, read_json_if_valid

    man = read_json_if_valid(path.parent / MANIFEST_NAME)
    if man is None:
        return None
    entry = (man.get("files") or {}).get(path.name) if isinstance(man, dict) else None
    return isinstance(entry, dict) and entry.get("sha256") == sha256(path)


def _read_gd(path: Path, config: ImageStudyConfig):
    """The trained network in ``path`` if it was made with ``config.gd`` on the same data settings, else None."""
    import zipfile

    from dotattn.core.io import MANIFEST_NAME, cache_notice, sha256_file

    if not path.is_file():
        return None
    if _manifest_lists(path, sha256_file) is False:  # a finished study: reuse the network only as listed
        cache_notice(path, f"not the file {MANIFEST_NAME} lists (edited or replaced after it was written)")
        return None
    try:
        meta, gd = _load_gd(path)
        return gd if meta.get("key") == _gd_key(config) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile) as err:
        cache_notice(path, f"unreadable ({type(err).__name__}: {err}; cut short or not a dotattn network)")
        return None


@dataclass(frozen=True)
class NetworkSource:
    """A trained network given with ``--network``: the result, the file's bytes (copied into the output folder as
    its gd_network.npz) and the record provenance keeps (``file``, ``sha256``, ``verified_by``: ``manifest`` when
    its folder's manifest.json lists it with that SHA-256, ``metadata`` when it has no manifest beside it)."""

    gd: Any
    data: bytes
    record: dict[str, Any]


def read_network_file(path: str | Path, config: ImageStudyConfig) -> NetworkSource:
    """The trained network of ``path`` (a gd_network.npz written by another ``paths images`` run) for a study of
    ``config``; ParameterError (one line, naming --network) when it is not a readable network, is not the file its
    folder's manifest.json lists, or was made for other settings than ``config``'s (:func:`_gd_key`: the network's
    training settings, seeds, split, validation episodes, embedding, ways)."""
    import hashlib
    import io
    import zipfile

    from dotattn.core.integrity import first_difference
    from dotattn.core.io import MANIFEST_NAME

    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"--network {str(path)!r}: not a file (a gd_network.npz of a paths images folder)")
    data = p.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    has_manifest = (p.parent / MANIFEST_NAME).exists()  # then it must list the file (unreadable: refused too)
    verified_by = "manifest" if has_manifest else "metadata"
    if has_manifest and not _manifest_lists(p, lambda _: sha):
        raise ParameterError(
            f"--network {str(path)!r}: not the file {p.parent / MANIFEST_NAME} lists (edited or replaced after "
            f"it was written, or not listed)"
        )
    try:
        meta, gd = _load_gd(io.BytesIO(data))  # type: ignore[arg-type]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile) as err:
        raise ParameterError(
            f"--network {str(path)!r}: not a trained network of paths images ({type(err).__name__}: {err})"
        ) from None
    want, have = _gd_key(config), meta.get("key")
    if not isinstance(have, dict):
        raise ParameterError(f"--network {str(path)!r}: its metadata holds no settings (key)")
    diff = first_difference(want, have) or first_difference(have, want)
    if diff is not None:
        raise ParameterError(
            f"--network {str(path)!r}: made for {diff[0]} = {diff[2]}, this command has {diff[1]} (the network's "
            f"settings must be the command's)"
        )
    return NetworkSource(gd, data, {"file": str(path), "sha256": sha, "verified_by": verified_by})


def _gd_key(config: ImageStudyConfig) -> dict[str, Any]:
    return {
        "gd": config.gd.to_dict(),
        "split_seed": config.split_seed,
        "seed": config.seed,
        "train_fraction": config.train_fraction,
        "validation_fraction": config.validation_fraction,
        "P_validation": config.P_validation,
        "embedding_scale": EMBEDDING_SCALE,
        **({} if config.ways == 2 else {"ways": config.ways}),
    }


def _write_gd(path: Path, gd: Any, config: ImageStudyConfig) -> None:
    import io

    from dotattn.core.io import atomic_write_bytes

    meta = {
        "key": _gd_key(config),
        "best_epoch": gd.best_epoch,
        "best_validation_accuracy": gd.best_validation_accuracy,
        "history": list(gd.history),
        "status": gd.status,
        "seconds": gd.seconds,
        "N0": token_dim(config.ways),
        "roles": list(roles(config.ways)),
        "shapes": {
            "V0": "(N, N0)",
            "V": "(L, H, N, N)",
            "a": "(N,)" if config.outputs == 1 else "(M, N)",
            "WQ": "(L, H, G, N0)",
            "WK": "(L, H, G, N0)",
        },
    }
    buf = io.BytesIO()
    np.savez_compressed(buf, meta=np.array(json.dumps(meta)), **{f"w_{k}": v for k, v in gd.weights.items()})
    atomic_write_bytes(path, buf.getvalue())


def _episode_rows(data: ImageData, k: int = 2) -> list[tuple[str, np.ndarray, float]]:
    rows = []
    for part, title in (("test", "Omniglot"), ("fashion_mnist", "FashionMNIST"), ("digits", "digits")):
        s, e = data.episodes[part]
        for i in range(k):
            rows.append((title, s.images[e.index[i]], float(e.y[i])))
    return rows


def _fixed_temperature_table(points: Sequence[PathsPoint]) -> dict[str, Any]:
    """{𝒯: {"gp" or width: {part: accuracy}}}: every converged saddle point at every temperature of the grid on
    the test and OOD parts (what the width does at a fixed 𝒯; the reported per-width rows use 𝒯 chosen on
    validation)."""
    table: dict[str, Any] = {}
    for p in points:
        key = "gp" if p.method == "gp" else f"{p.N:g}"
        table.setdefault(f"{p.temperature:g}", {}).setdefault(key, {})[p.subset] = p.accuracy
    return table


def write_image_study(study: ImageStudy, folder: Path, command: str) -> dict[str, Any]:
    """points.csv (test/OOD per width at the chosen temperature), selection.csv (every temperature on the
    validation episodes), heads.csv, gd_history.csv, summary.json, the figures and the manifest."""
    from dotattn.core.io import provenance, save_figure, write_csv, write_json, write_manifest
    from dotattn.paths import images_plotting as plots

    if study.U_smallest is None:  # set by run_image_study before it returns
        raise ValueError("write_image_study needs a finished study (its U at the smallest width is missing)")
    cfg, data = study.config, study.data
    source = {"network": study.gd_source} if study.gd_source else {}
    prov = provenance({**cfg.to_dict(), **source, "command": command}, seconds=study.timings.get("total_seconds"))
    comment = "dotattn paths images; provenance: " + json.dumps(prov, separators=(",", ":"))
    write_csv(folder / "points.csv", [p.to_row() for p in study.points], POINT_COLUMNS, comment=comment)
    write_csv(folder / "selection.csv", [p.to_row() for p in study.selection], POINT_COLUMNS, comment=comment)
    write_csv(
        folder / "fixed_temperature.csv", [p.to_row() for p in study.fixed_temperature], POINT_COLUMNS, comment=comment
    )
    write_csv(folder / "heads.csv", study.heads, HEAD_COLUMNS, comment=comment)
    write_csv(
        folder / "gd_history.csv",
        list(study.gd.history),
        ["epoch", "train_loss", "train_accuracy", "validation_accuracy", "seconds"],
        comment=comment,
    )
    summary = {
        "provenance": prov,
        "temperature_selected_on": "validation",
        "selection_rule": "per width, the temperature of the grid with the highest validation accuracy "
        "(ties: lower validation loss) among converged saddle points",
        "paired_differences": "per_N[width][part].minus_gp: the theory's accuracy minus the GP limit's on the same "
        "episodes (each at its own chosen temperature), with the paired standard error; "
        "pruning[part].gd_change: the two lowest-scoring heads pruned minus unpruned",
        "split": {**data.split.to_dict(), "class_names": list(data.omniglot.class_names)},
        "counts": data.counts(),
        "tokens": {
            "N0": token_dim(cfg.ways),
            "T": episode_length(cfg.ways),
            "roles": list(roles(cfg.ways)),
            "embedding_scale": EMBEDDING_SCALE,
        },
        **({} if cfg.ways == 2 else {"ways": cfg.ways, "outputs": cfg.outputs, "accuracy": "argmax of the outputs"}),
        "paths": list(study.path_names),
        "gd": {
            "config": cfg.gd.to_dict(),
            "status": study.gd.status,
            "best_epoch": study.gd.best_epoch,
            "epochs_run": len(study.gd.history),
            "seconds": study.gd.seconds,
            **study.gd_eval,
        },
        "per_N": study.per_N,
        "fixed_temperature": _fixed_temperature_table(study.fixed_temperature),
        "U_smallest_N": study.U_smallest,
        "head_scores_N": cfg.widths[0],
        "heads": study.heads,
        "pruning": study.pruning,
        "sampling_check": study.sample,
        "timings": study.timings,
        "files": list(IMAGE_STUDY_FILES),
    }
    write_json(folder / "summary.json", summary)
    meta = {"command": command, "git_commit": prov["git_commit"]}
    save_figure(plots.figure_episodes(_episode_rows(data)), folder / "episodes.png", meta)
    titles = plots.set_titles(cfg.ways)
    save_figure(
        plots.figure_accuracy_vs_N(study.per_N, study.gd_eval, EVAL_SETS, study.sample, titles),
        folder / "accuracy_vs_N.png",
        meta,
    )
    names = study.path_names
    if cfg.outputs > 1:  # the extended paths (path, output), the output least significant
        names = tuple(f"{p}:{m + 1}" for p in names for m in range(cfg.outputs))
    save_figure(plots.figure_U(study.U_smallest, names, cfg.widths[0]), folder / "U_smallest_N.png", meta)
    save_figure(
        plots.figure_heads(study.heads, study.pruning, EVAL_SETS, titles), folder / "head_scores_pruning.png", meta
    )
    write_manifest(folder, IMAGE_STUDY_FILES, prov["parameters"], command=command, provenance_record=prov)
    return summary
