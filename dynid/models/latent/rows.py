"""Row reductions of the (steps, K) arrays of the hidden Markov code, and its one message for a
sample the model cannot produce."""

from __future__ import annotations

import numpy as np

ZERO_PROBABILITY = "the hidden Markov model gives a sample zero probability"


def row_sums(x: np.ndarray) -> np.ndarray:
    """Sums of the rows of x (n, K): as a matrix-vector product, several times faster than
    numpy's reduction along a short last axis."""
    return x @ np.ones(x.shape[1])


def row_max(x: np.ndarray) -> np.ndarray:
    """Largest entry of each row of x (n, K), reduced along the long axis of a transposed copy
    (numpy's reduction along a short last axis is slow)."""
    return np.ascontiguousarray(x.T).max(axis=0)
