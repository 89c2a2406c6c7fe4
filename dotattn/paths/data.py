"""Path kernels of a task, ready for the theory: training kernels, test-train kernels, labels.

One :class:`PathData` per (task, head selection): the kernels C_ππ' on the training set
(n, n, P, P), between test and training inputs (n, n, P_test, P) and on each test input (n, n, P_test).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dotattn.core.validation import ParameterError, check_instance
from dotattn.paths.network import FactoredKernels, attention, path_inputs, path_kernel_diagonal, path_kernels
from dotattn.paths.task import PATH_NAMES, MarkovTask, markov_heads, markov_sequences

__all__ = ["PathData", "markov_path_data", "SUBSETS", "subset_heads", "path_data_bytes"]

SUBSETS: dict[str, tuple[tuple[int, ...], ...]] = {
    "all": ((0, 1), (0, 1)),
    "good": ((0,), (0,)),
    "good+denoising": ((0, 1), (0,)),
}
"""Networks made of some heads of the 4-path Markov network, by the heads kept per layer:
all paths; the good path only (good, uniform); good + denoising (layer 2 = the uniform head only)."""


def subset_heads(task: MarkovTask, subset: str) -> tuple[tuple[int, ...], ...]:
    """The heads kept per layer for a named subset (the 2-path variant has one layer-2 head)."""
    if subset not in SUBSETS:
        raise ParameterError(f"subset must be one of {', '.join(SUBSETS)}, got {subset!r}")
    keep = SUBSETS[subset]
    if task.variant == "2paths":
        keep = (keep[0], (0,))
    return keep


@dataclass(frozen=True)
class PathData:
    """Kernels and labels of one network on one task (arrays; treat as read-only)."""

    head_names: tuple[tuple[str, ...], ...]
    path_keys: tuple[tuple[int, ...], ...]
    path_names: tuple[str, ...]
    C_train: np.ndarray | FactoredKernels
    y_train: np.ndarray
    C_cross: np.ndarray | FactoredKernels
    C_diag: np.ndarray
    y_test: np.ndarray

    @property
    def heads(self) -> tuple[int, ...]:
        return tuple(len(h) for h in self.head_names)

    @property
    def n_paths(self) -> int:
        return len(self.path_keys)

    def restrict(self, keep: Sequence[Sequence[int]]) -> PathData:
        """The network with only the heads ``keep[ℓ]`` in layer ℓ (its paths, in the code's order)."""
        if len(keep) != len(self.head_names) or any(not k for k in keep):
            raise ParameterError(f"keep one or more heads in each of the {len(self.head_names)} layers")
        idx = [self.path_keys.index(tuple(p)) for p in itertools.product(*keep)]
        ix = np.ix_(idx, idx)
        if isinstance(self.C_train, FactoredKernels) or isinstance(self.C_cross, FactoredKernels):
            raise TypeError("PathData.restrict needs dense path kernels (these are factored)")
        return PathData(
            head_names=tuple(tuple(self.head_names[l][h] for h in k) for l, k in enumerate(keep)),
            path_keys=tuple(self.path_keys[i] for i in idx),
            path_names=tuple(self.path_names[i] for i in idx),
            C_train=self.C_train[ix],
            y_train=self.y_train,
            C_cross=self.C_cross[ix],
            C_diag=self.C_diag[ix],
            y_test=self.y_test,
        )


def markov_path_data(task: MarkovTask) -> PathData:
    """Generate the task's data and heads, and compute every path kernel (readout: last token)."""
    check_instance("task", task, MarkovTask, "dotattn.paths.task.MarkovTask")
    heads = markov_heads(task)
    x, y, _ = markov_sequences(task, "train")
    xt, yt, _ = markov_sequences(task, "test")
    om = [np.stack([attention(x, W) for _, W in layer]) for layer in heads]
    omt = [np.stack([attention(xt, W) for _, W in layer]) for layer in heads]
    xi, xit = path_inputs(x, om, "last"), path_inputs(xt, omt, "last")
    keys = tuple(itertools.product(*[range(len(layer)) for layer in heads]))
    names = tuple(PATH_NAMES[task.variant].get(k, ">".join(map(str, k))) for k in keys)
    return PathData(
        head_names=tuple(tuple(n for n, _ in layer) for layer in heads),
        path_keys=keys,
        path_names=names,
        C_train=path_kernels(xi, xi),
        y_train=y,
        C_cross=path_kernels(xit, xi),
        C_diag=path_kernel_diagonal(xit),
        y_test=yt,
    )


def path_data_bytes(task: MarkovTask) -> int:
    """Estimated peak bytes of :func:`markov_path_data` (float64): the token arrays of both sets
    ((P + P_test) sequences of N0 x (T + 1)), the temporaries of generating the larger set (about seven
    arrays of width x T per sequence), the heads' attention maps and path inputs, and the kernels
    (n² (P² + P_test P + P_test) for the n = 4 paths). Measured at P = 400, P_test = 2000, T = 30:
    0.80 GB peak resident for `paths theory` (N = 10, one subset), this estimate 1.0 GB."""
    n, P, Pt = 4, task.P, task.P_test
    sequences = (P + Pt) * task.N0 * task.tokens
    generation = 7 * max(P, Pt) * task.width * task.T
    heads = 4 * (P + Pt) * task.tokens**2 + n * (P + Pt) * task.N0
    kernels = n * n * (P * P + Pt * P + Pt)
    return 8 * (sequences + generation + heads + kernels)
