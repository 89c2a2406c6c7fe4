"""Finite-size PyTorch experiments: empirical risk minimisation of low-rank attention (tied or untied
student, optional trainable value, correlated token contents: ``docs/variants.md``).

Main entry point: :func:`run_erm` (many runs over alpha × initialisation × seed, vectorised in one
tensor program) returning an :class:`ErmResult`. Building blocks: :mod:`dotattn.erm.config`
(:class:`ErmConfig`, torch-free), :mod:`dotattn.erm.records` (:class:`RunRecord` and the columns,
torch-free), :mod:`dotattn.erm.data` (seeded tokens, teacher, targets), :mod:`dotattn.erm.models`
(attention, linear baseline, the Gram-form loss), :mod:`dotattn.core.training` (the shared batched GD / Adam /
L-BFGS loop). Names that need torch are imported on first use, so that ``from dotattn.erm import
ErmConfig`` does not import torch.
"""

from importlib import import_module
from typing import Any

from dotattn.erm.config import INIT_CHOICES, VALUES, ErmConfig, WeightLayout
from dotattn.erm.records import COLUMN_DOCS, RUN_COLUMNS, SUMMARY_COLUMNS, RunRecord

_LAZY = {
    "ErmResult": "dotattn.erm.experiment",
    "initial_weights": "dotattn.erm.experiment",
    "initial_student": "dotattn.erm.experiment",
    "resolve_device": "dotattn.erm.experiment",
    "run_config": "dotattn.erm.experiment",
    "run_erm": "dotattn.erm.experiment",
    "Dataset": "dotattn.erm.data",
    "make_dataset": "dotattn.erm.data",
    "positional_embeddings": "dotattn.erm.data",
    "targets": "dotattn.erm.data",
    "teacher_weights": "dotattn.erm.data",
    "attention": "dotattn.erm.models",
    "fit_linear_baseline": "dotattn.erm.models",
    "linear_predict": "dotattn.erm.models",
    "residual_sq_norm": "dotattn.erm.models",
    "TrainOutcome": "dotattn.core.training",
    "train": "dotattn.core.training",
}

__all__ = [
    "run_erm",
    "run_config",
    "ErmConfig",
    "WeightLayout",
    "VALUES",
    "initial_student",
    "ErmResult",
    "RunRecord",
    "RUN_COLUMNS",
    "SUMMARY_COLUMNS",
    "COLUMN_DOCS",
    "INIT_CHOICES",
    "resolve_device",
    "initial_weights",
    "Dataset",
    "make_dataset",
    "positional_embeddings",
    "teacher_weights",
    "targets",
    "attention",
    "fit_linear_baseline",
    "linear_predict",
    "residual_sq_norm",
    "TrainOutcome",
    "train",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dotattn.erm' has no attribute {name!r}")
