"""What the order parameter U does: test accuracy and loss, head scores, pruning, kernel-label alignment.

Records crossing stage boundaries (:class:`PathsPoint`) have one ``to_row`` / ``from_row``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dotattn.core.rows import matrix_cell, read_float, read_int, read_matrix, read_text
from dotattn.paths.data import PathData
from dotattn.paths.network import OutputKernels
from dotattn.paths.theory import Kernels, PathsModel, kernel, output_labels, predict

__all__ = [
    "Evaluation",
    "evaluate",
    "correct_predictions",
    "PathsPoint",
    "POINT_COLUMNS",
    "head_scores",
    "prune_head",
    "prune_heads",
    "alignment",
    "path_alignments",
]


@dataclass(frozen=True)
class Evaluation:
    """Test accuracy of sign(mean predictor), test loss (1/P_t) Σ (mean − y)², mean predictive variance."""

    accuracy: float
    loss: float
    variance: float


def correct_predictions(mean: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which test inputs the mean predictor gets right: sign(mean) = y for one output, argmax over the M outputs
    = argmax of the one-hot target for (P_test, M) predictions."""
    if np.ndim(mean) == 2:
        return np.argmax(mean, axis=1) == np.argmax(y, axis=1)
    return np.sign(mean) == y


def evaluate(U: np.ndarray, data: PathData, model: PathsModel) -> Evaluation:
    """The predictor of order parameter U on the test set (loss: the mean over test inputs and outputs)."""
    mean, var = predict(U, data.C_train, data.y_train, data.C_cross, data.C_diag, model)
    return Evaluation(
        accuracy=float(np.mean(correct_predictions(mean, data.y_test))),
        loss=float(np.mean((mean - data.y_test) ** 2)),
        variance=float(np.mean(var)),
    )


POINT_COLUMNS = [
    "subset",
    "method",
    "N",
    "temperature",
    "accuracy",
    "accuracy_error",
    "loss",
    "loss_error",
    "variance",
    "status",
    "stationarity",
    "iterations",
    "seconds",
    "paths",
    "U",
]


@dataclass(frozen=True)
class PathsPoint:
    """One (network, method, N) result: method ``theory`` (the saddle point), ``gp`` (the N → ∞ limit)
    or ``sampled`` (NUTS); ``*_error`` are Monte-Carlo errors (0 for the theory and the GP)."""

    subset: str
    method: str
    N: float
    temperature: float
    accuracy: float
    loss: float
    variance: float
    status: str
    stationarity: float
    iterations: int
    seconds: float
    paths: tuple[str, ...]
    U: np.ndarray
    accuracy_error: float = 0.0
    loss_error: float = 0.0

    def to_row(self) -> dict[str, Any]:
        return {
            "subset": self.subset,
            "method": self.method,
            "N": self.N,
            "temperature": self.temperature,
            "accuracy": self.accuracy,
            "accuracy_error": self.accuracy_error,
            "loss": self.loss,
            "loss_error": self.loss_error,
            "variance": self.variance,
            "status": self.status,
            "stationarity": self.stationarity,
            "iterations": self.iterations,
            "seconds": self.seconds,
            "paths": "|".join(self.paths),
            "U": matrix_cell(self.U),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PathsPoint:
        U = read_matrix(row["U"])
        if U is None:  # every point has its path-path order parameter (to_row writes it)
            raise ValueError("U is missing")
        return cls(
            subset=read_text(row["subset"]),
            method=read_text(row["method"]),
            N=read_float(row["N"]),
            temperature=read_float(row["temperature"]),
            accuracy=read_float(row["accuracy"]),
            accuracy_error=read_float(row["accuracy_error"]),
            loss=read_float(row["loss"]),
            loss_error=read_float(row["loss_error"]),
            variance=read_float(row["variance"]),
            status=read_text(row["status"]),
            stationarity=read_float(row["stationarity"]),
            iterations=read_int(row["iterations"]),
            seconds=read_float(row["seconds"]),
            paths=tuple(read_text(row["paths"]).split("|")),
            U=U,
        )


def head_scores(U: np.ndarray, data: PathData) -> list[np.ndarray]:
    """Per layer ℓ, the score of each head: Σ |U^{ππ'}| over the pairs where π or π' goes through the head,
    normalised to sum 1 over the layer's heads. With M outputs (U of shape (n M, n M)) |U| is summed over the
    output indices of each path pair first."""
    n = len(data.path_keys)
    M = U.shape[0] // n
    A = np.abs(U).reshape(n, M, n, M).sum(axis=(1, 3))
    out = []
    for l, names in enumerate(data.head_names):
        s = np.zeros(len(names))
        for h in range(len(names)):
            through = np.array([k[l] == h for k in data.path_keys])
            s[h] = A[np.logical_or.outer(through, through)].sum()
        out.append(s / s.sum())
    return out


def prune_head(U: np.ndarray, data: PathData, model: PathsModel, layer: int, head: int) -> Evaluation:
    """The predictor with head ``head`` of layer ``layer`` (0-based) removed at inference: the paths
    through it dropped from the test-train kernel, the remaining heads' sum rescaled by √(H/(H−1))."""
    return prune_heads(U, data, model, [(layer, head)])


def prune_heads(U: np.ndarray, data: PathData, model: PathsModel, pruned: Sequence[tuple[int, int]]) -> Evaluation:
    """The predictor with the heads ``pruned`` ((layer, head) pairs, 0-based) removed at inference: the
    paths through any of them dropped from the test-train kernel, and in each layer ℓ that lost heads the
    kept heads' sum rescaled by √(H_ℓ/kept_ℓ) (so each path weight by the product over its layers)."""
    keep = np.ones(len(data.path_keys))
    for l, H in enumerate(data.heads):
        gone = {h for ll, h in pruned if ll == l}
        kept = H - len(gone)
        through = np.array([k[l] in gone for k in data.path_keys])
        keep = keep * np.where(through, 0.0, math.sqrt(H / kept) if kept > 0 else 0.0)
    M = model.outputs
    keep = np.repeat(keep, M)  # the extended paths (π, m) of M outputs, the output least significant
    Up = U * keep[:, None]  # the test input (first path index) goes through the pruned network
    c = model.kernel_scale
    C_train: Kernels = data.C_train
    C_cross: Kernels = data.C_cross
    y = output_labels(data.y_train, M)
    if M > 1:
        C_train, C_cross = OutputKernels(data.C_train, M), OutputKernels(data.C_cross, M)
    K = kernel(U, C_train, c) + model.temperature * np.eye(len(y))
    mean = kernel(Up, C_cross, c) @ np.linalg.solve(K, y)
    if M > 1:
        mean = mean.reshape(M, -1).T
    return Evaluation(
        accuracy=float(np.mean(correct_predictions(mean, data.y_test))),
        loss=float(np.mean((mean - data.y_test) ** 2)),
        variance=float("nan"),
    )


def alignment(K: np.ndarray, y: np.ndarray) -> float:
    """Kernel-label alignment Yᵀ K Y / (‖K‖_F ‖Y‖²), in [−1, 1]; for labels Y (P, M) of M outputs and a P × P
    kernel, tr(Yᵀ K Y) / (‖K‖_F ‖Y‖_F²)."""
    if np.ndim(y) == 2:
        return float(np.sum(y * (K @ y)) / (np.linalg.norm(K) * np.sum(y * y)))
    return float(y @ K @ y / (np.linalg.norm(K) * (y @ y)))


def path_alignments(data: PathData) -> np.ndarray:
    """Alignment of each training path-path kernel (C_ππ' + C_π'π)/2 with the labels, shape (n, n)."""
    n = data.n_paths
    out = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            out[a, b] = alignment(0.5 * (data.C_train[a, b] + data.C_train[b, a]), data.y_train)
    return out
