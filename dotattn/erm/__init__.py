"""Finite-size PyTorch experiments: empirical risk minimisation of tied low-rank attention.

Main entry point: :func:`run_erm` (many runs over alpha × initialisation × seed, vectorised in one
tensor program) returning an :class:`ErmResult`. Building blocks: :mod:`dotattn.erm.data`
(seeded tokens, teacher, targets), :mod:`dotattn.erm.models` (attention, linear baseline, the
Gram-form loss), :mod:`dotattn.erm.training` (batched GD / Adam / L-BFGS).
"""

from dotattn.erm.data import Dataset, make_dataset, positional_embeddings, targets, teacher_weights
from dotattn.erm.experiment import (COLUMN_DOCS, INIT_CHOICES, RUN_COLUMNS, SUMMARY_COLUMNS, ErmConfig,
                                    ErmResult, RunRecord, initial_weights, resolve_device, run_config, run_erm)
from dotattn.erm.models import attention, fit_linear_baseline, linear_predict, residual_sq_norm
from dotattn.erm.training import DEFAULT_LR, OPTIMIZERS, TrainOutcome, train

__all__ = ["run_erm", "run_config", "ErmConfig", "ErmResult", "RunRecord", "RUN_COLUMNS", "SUMMARY_COLUMNS",
           "COLUMN_DOCS", "INIT_CHOICES", "OPTIMIZERS", "DEFAULT_LR", "resolve_device", "initial_weights",
           "Dataset", "make_dataset", "positional_embeddings", "teacher_weights", "targets", "attention",
           "fit_linear_baseline", "linear_predict", "residual_sq_norm", "TrainOutcome", "train"]
