"""The names and default step sizes of the shared batched optimisers (:mod:`dotattn.core.training`),
importable without torch so that configurations validate before torch is loaded."""

from __future__ import annotations

__all__ = ["OPTIMIZERS", "DEFAULT_LR"]

OPTIMIZERS: tuple[str, ...] = ("gd", "adam", "lbfgs", "batched-lbfgs")
DEFAULT_LR: dict[str, float] = {"gd": 0.15, "adam": 0.01, "lbfgs": 1.0, "batched-lbfgs": 1.0}
