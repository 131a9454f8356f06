"""Blocked cross-validation of ridge regressions on standardized columns: the folds, gap and
ridge that ``crosspred`` (its held-out R^2) and ``auto`` (stage b's held-out residuals) share.

Rows are in time order. Each of ``folds`` contiguous test blocks is predicted by a fit to the
rows more than ``GAP`` away from it: the training rows next to a block share its lag windows or
delay vectors and, on smooth signals, its neighbourhood, so they would leak it. The ridge is
``RIDGE`` times the training rows on standardized columns (lagged columns and delay vectors of
smooth signals are nearly collinear); the intercept is not shrunk.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

# Test blocks (crosspred's default ``-p folds``; auto's stage b).
FOLDS = 5
# Rows left out on each side of a test block.
GAP = 20
# Ridge on standardized columns, times the training rows.
RIDGE = 1e-3


def blocked_folds(rows: int, folds: int = FOLDS) -> Iterator[tuple[slice, np.ndarray]]:
    """(test rows, training rows) of each of ``folds`` contiguous blocks of ``rows`` rows: the
    blocks split at ``linspace(0, rows, folds + 1)`` (truncated), the training rows (int array,
    ascending) those more than ``GAP`` rows from the block."""
    edges = np.linspace(0, rows, folds + 1).astype(int)
    for lo, hi in zip(edges[:-1], edges[1:]):
        yield slice(lo, hi), np.r_[0:max(lo - GAP, 0), min(hi + GAP, rows):rows]


def standardized(columns: np.ndarray) -> np.ndarray:
    """(rows, p) columns centred and scaled to unit deviation (constant ones only centred)."""
    spread = columns.std(axis=0)
    return (columns - columns.mean(axis=0)) / np.where(spread > 0, spread, 1.0)


def standardized_trials(trials: list[np.ndarray]) -> list[np.ndarray]:
    """Trials (n_k, d) with every column at zero mean and unit variance over all their samples
    pooled (constant columns only centred)."""
    stacked = np.vstack(trials)
    mean, spread = stacked.mean(axis=0), stacked.std(axis=0)
    return [(x - mean) / np.where(spread > 0, spread, 1.0) for x in trials]


def ridge_design(design: np.ndarray) -> np.ndarray:
    """(rows, 1 + p): an intercept column, then ``design`` (rows, p) standardized."""
    return np.column_stack([np.ones(len(design)), standardized(design)])


def ridge_gram(train_design: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """(1 + p, 1 + p): the normal-equation matrix of a ``ridge_design`` restricted to the
    training rows (n, 1 + p), ``ridge`` times n added to every diagonal entry but the
    intercept's."""
    penalty = np.eye(train_design.shape[1])
    penalty[0, 0] = 0.0  # the intercept is not shrunk
    return train_design.T @ train_design + ridge * len(train_design) * penalty
