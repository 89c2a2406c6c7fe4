"""The names and default step sizes of the shared batched optimisers (:mod:`dotattn.core.training`),
importable without torch so that configurations validate before torch is loaded."""

from __future__ import annotations

__all__ = ["OPTIMIZERS", "DEFAULT_LR", "DEFAULT_TOL"]

OPTIMIZERS: tuple[str, ...] = ("gd", "adam", "lbfgs", "batched-lbfgs")
DEFAULT_LR: dict[str, float] = {"gd": 0.15, "adam": 0.01, "lbfgs": 1.0, "batched-lbfgs": 1.0}
DEFAULT_TOL: dict[str, float] = {"gd": 1e-9, "adam": 1e-9, "lbfgs": 1e-7, "batched-lbfgs": 1e-7}
"""Default stopping tolerance: the relative change of R per step (gd, adam) or the relative
stationarity (lbfgs, batched-lbfgs; 1e-7 leaves a margin of ~10 above the float64 floor of a few
1e-9, :mod:`dotattn.core.training`)."""
