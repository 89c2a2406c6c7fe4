"""The hidden-Markov-chain classification task of the attention-paths theory (docs/attention_paths.md).

A sequence of T hidden states s_t = ±1 (s_1 = ±1 with probability ½) stays in its state with
probability ``stay_plus`` (label y = +1) or ``stay_minus`` (label y = −1). State ± emits the token
v_± + noise, v_+ = √2 (1_{w/2}, 0_{w/2}), v_− = √2 (0_{w/2}, 1_{w/2}) (w = ``width``, |v_±|² = w); the
isotropic noise z ~ N(0, I_w) is split into its parts along (v_+ + v_−), along (v_+ − v_−) and out of
that plane, scaled by ``noise_sum``, ``noise_diff`` and ``noise_perp`` (σ⊥). A zero BOS token is put
first and one-hot positions (T + 1 of them) are appended: x ∈ ℝ^{N0×(T+1)}, N0 = w + T + 1
(231 for w = 200, T = 30). Labels are balanced (the first half +1).

Heads (key-query matrices W, score x_sᵀ W x_t of key s for query t, all times ``beta``):

* ``good``: feature block q qᵀ, q = (v_+ − v_−)/w (so q·v_± = ±1), position block 1 for the
  previous token and 1.5 for the BOS key (queries 1..T): a query attends to the previous token
  when it is in the same state, otherwise to BOS;
* ``uniform``: position block of ones (every key scores the same);
* ``random``: feature block N(0, 1)/w, position block N(0, 1), feature-position blocks N(0, 1)/√w.

Variant ``4paths``: layer 1 (good, random), layer 2 (uniform, random) — the paths good =
(good, uniform), denoising = (random, uniform), adversarial 1 = (good, random), adversarial 2 =
(random, random). Variant ``2paths``: layer 2 has the uniform head only (paths good, denoising).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dotattn.core.validation import ParameterError, check_int, check_number

__all__ = [
    "MarkovTask",
    "VARIANTS",
    "markov_sequences",
    "markov_heads",
    "PATH_NAMES",
    "SUMMARY_ORDER",
    "TASKS",
    "BOS_WEIGHT",
]

VARIANTS: tuple[str, ...] = ("4paths", "2paths")
TASKS: tuple[str, ...] = ("markov",)
BOS_WEIGHT = 1.5
"""Score of the BOS key in the good head: between a same-state previous token (feature 1 + position 1
= 2) and a different-state one (−1 + 1 = 0) or any other same-state token (1)."""
PATH_NAMES: dict[str, dict[tuple[int, ...], str]] = {
    "4paths": {(0, 0): "good", (1, 0): "denoising", (0, 1): "adversarial 1", (1, 1): "adversarial 2"},
    "2paths": {(0, 0): "good", (1, 0): "denoising"},
}
"""Name of each path (h_1, h_2) (head 0 of layer 1 is good, head 0 of layer 2 uniform)."""
SUMMARY_ORDER: dict[str, tuple[tuple[int, ...], ...]] = {
    "4paths": ((0, 0), (1, 0), (0, 1), (1, 1)),
    "2paths": ((0, 0), (1, 0)),
}
"""The path order of summaries and figures: good, denoising, adversarial 1, adversarial 2."""


@dataclass(frozen=True)
class MarkovTask:
    """The hidden-Markov-chain task; validates itself (ParameterError naming the field)."""

    T: int = 30
    width: int = 200
    stay_plus: float = 0.7
    stay_minus: float = 0.3
    noise_sum: float = 1.0
    noise_diff: float = 1.0
    noise_perp: float = 1.0
    beta: float = 10.0
    P: int = 100
    P_test: int = 1000
    variant: str = "4paths"
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "T", check_int("T (tokens)", self.T, 2, 1000))
        w = check_int("width (feature dimension)", self.width, 2, 10_000)
        if w % 2:
            raise ParameterError(f"width (feature dimension) must be even, got {w}")
        object.__setattr__(self, "width", w)
        for name in ("stay_plus", "stay_minus"):
            object.__setattr__(self, name, check_number(name, getattr(self, name), 0.0, False, 1.0, "in [0, 1]"))
        for name in ("noise_sum", "noise_diff", "noise_perp"):
            object.__setattr__(self, name, check_number(name, getattr(self, name), 0.0, False, 100.0, "in [0, 100]"))
        object.__setattr__(
            self,
            "beta",
            check_number("beta (inverse temperature of the heads)", self.beta, 0.0, False, 1000.0, "in [0, 1000]"),
        )
        P = check_int("P (training sequences)", self.P, 2, 20_000)
        if P % 2:
            raise ParameterError(f"P (training sequences) must be even (balanced labels), got {P}")
        object.__setattr__(self, "P", P)
        Pt = check_int("P_test (test sequences)", self.P_test, 2, 100_000)
        if Pt % 2:
            raise ParameterError(f"P_test (test sequences) must be even (balanced labels), got {Pt}")
        object.__setattr__(self, "P_test", Pt)
        if self.variant not in VARIANTS:
            raise ParameterError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0, 2**32 - 1))

    @property
    def N0(self) -> int:
        """Input dimension: features plus one-hot positions (BOS included)."""
        return self.width + self.T + 1

    @property
    def tokens(self) -> int:
        return self.T + 1

    def to_dict(self) -> dict:
        return asdict(self)

    def rng(self, stream: str) -> np.random.Generator:
        """Independent generator per stream ('train', 'test', 'heads'), fixed by the seed."""
        index = {"train": 0, "test": 1, "heads": 2}[stream]
        return np.random.default_rng(np.random.SeedSequence([self.seed, index]))

    def directions(self) -> tuple[np.ndarray, np.ndarray]:
        """v_+ and v_−, shape (width,) each, |v_±|² = width."""
        h = self.width // 2
        vp = np.concatenate([np.ones(h), np.zeros(h)]) * np.sqrt(2.0)
        return vp, vp[::-1].copy()


def markov_sequences(task: MarkovTask, stream: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, states) of the 'train' (P) or 'test' (P_test) set: x (P, N0, T+1), y (P,) = ±1 balanced
    (first half +1), states (P, T) = ±1."""
    n = task.P if stream == "train" else task.P_test
    rng = task.rng(stream)
    y = np.concatenate([np.ones(n // 2), -np.ones(n - n // 2)])
    stay = np.where(y > 0, task.stay_plus, task.stay_minus)
    first = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    flips = np.where(rng.random((n, task.T - 1)) < stay[:, None], 1.0, -1.0)
    states = first[:, None] * np.concatenate([np.ones((n, 1)), np.cumprod(flips, axis=1)], axis=1)
    vp, vm = task.directions()
    feats = np.where(states[:, None, :] > 0, vp[None, :, None], vm[None, :, None])  # (n, w, T)
    z = rng.standard_normal(feats.shape)
    e_sum = (vp + vm) / np.linalg.norm(vp + vm)
    e_diff = (vp - vm) / np.linalg.norm(vp - vm)
    c_sum = np.einsum("i,pit->pt", e_sum, z)
    c_diff = np.einsum("i,pit->pt", e_diff, z)
    along_sum = e_sum[None, :, None] * c_sum[:, None, :]
    along_diff = e_diff[None, :, None] * c_diff[:, None, :]
    noise = task.noise_sum * along_sum + task.noise_diff * along_diff + task.noise_perp * (z - along_sum - along_diff)
    tokens = np.concatenate([np.zeros((n, task.width, 1)), feats + noise], axis=2)  # BOS first
    positions = np.broadcast_to(np.eye(task.T + 1), (n, task.T + 1, task.T + 1))
    return np.concatenate([tokens, positions], axis=1), y, states


def _good_head(task: MarkovTask) -> np.ndarray:
    vp, vm = task.directions()
    q = (vp - vm) / task.width
    pos = np.zeros((task.T + 1, task.T + 1))
    idx = np.arange(1, task.T)
    pos[idx, idx + 1] = 1.0  # key s = t - 1 for query t (tokens 1..T)
    pos[0, 1:] = BOS_WEIGHT
    W = np.zeros((task.N0, task.N0))
    W[: task.width, : task.width] = np.outer(q, q)
    W[task.width :, task.width :] = pos
    return W


def _uniform_head(task: MarkovTask) -> np.ndarray:
    W = np.zeros((task.N0, task.N0))
    W[task.width :, task.width :] = 1.0
    return W


def _random_head(task: MarkovTask, rng: np.random.Generator) -> np.ndarray:
    w = task.width
    W = rng.standard_normal((task.N0, task.N0))
    W[:w, :w] /= w
    W[:w, w:] /= np.sqrt(w)
    W[w:, :w] /= np.sqrt(w)
    return W


def markov_heads(task: MarkovTask) -> tuple[tuple[tuple[str, np.ndarray], ...], ...]:
    """Per layer, the (name, β W) of each head: layer 1 (good, random), layer 2 (uniform[, random])."""
    rng = task.rng("heads")
    layer1 = (("good", task.beta * _good_head(task)), ("random", task.beta * _random_head(task, rng)))
    layer2 = [("uniform", task.beta * _uniform_head(task))]
    if task.variant == "4paths":
        layer2.append(("random", task.beta * _random_head(task, rng)))
    return layer1, tuple(layer2)
