"""Autocorrelation times: how many rows of a regression carry one row's worth of evidence.

The regression targets are linear (or nearly linear) operators applied to the noisy samples, so
their noise is correlated between rows even when the measurement noise is white. Model selection
needs that correlation time to count the effective number of independent rows
(``selection.select``); it is a property of the operator, the same for every candidate model.
The estimators here are Sokal's integrated autocorrelation time with his automatic window.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy.sparse import sparray, spmatrix


def correlation_time(rho: Iterable[float]) -> float:
    """Integrated autocorrelation time 1 + 2 sum_k rho_k (k >= 1) of a stationary sequence with
    autocorrelations ``rho`` (lags 1, 2, ...; may be lazy), summed while they stay positive
    (Sokal's automatic window)."""
    tau = 1.0
    for value in rho:
        if not value > 0:
            break
        tau += 2.0 * float(value)
    return tau


def operator_correlation_time(operator: np.ndarray | spmatrix | sparray) -> float:
    """Autocorrelation time (rows) of ``operator @ e`` for white noise e.

    operator: (K, n) dense or scipy-sparse, rows ordered in time (e.g. weak-form test functions,
    block diagonal over trials). The covariance of the output is operator @ operator.T up to the
    noise variance; rho_k is its k-th diagonal's sum over its main diagonal's.
    """
    from scipy import sparse

    gram = sparse.csr_matrix(operator @ operator.T)
    variance = float(gram.diagonal().sum())
    if variance <= 0:
        return 1.0
    lags = range(1, max(gram.shape[0] // 2, 1))
    return correlation_time(gram.diagonal(k).sum() / variance for k in lags)


def autocorrelation_time(residual: np.ndarray, blocks: np.ndarray | None = None) -> float:
    """Integrated autocorrelation time (>= 1) of ``residual`` (m,), pooled over contiguous
    ``blocks`` (labels, (m,)): 1 + 2 sum_k rho_k, summed while rho_k stays positive (Sokal's
    automatic window: stop at the first lag where the estimate is no longer positive)."""
    r = np.asarray(residual, dtype=float)
    labels = np.zeros(r.size, dtype=int) if blocks is None else np.asarray(blocks)
    pieces = [r[labels == b] - r[labels == b].mean() for b in np.unique(labels)]
    variance = sum(float(p @ p) for p in pieces)
    if variance <= 0:
        return 1.0
    longest = max(p.size for p in pieces)
    rho = (
        sum(float(p[:-lag] @ p[lag:]) for p in pieces if p.size > lag) / variance
        for lag in range(1, longest // 2)
    )
    return correlation_time(rho)
