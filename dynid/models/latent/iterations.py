"""The EM iteration every latent backend runs: E-step, stop when the log-likelihood gains less
than ``tol`` per observed value, M-step; the model-specific steps are passed in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from dynid.errors import ComputationError

Model = TypeVar("Model")
Expected = TypeVar("Expected")


@dataclass
class EMResult(Generic[Model]):
    """The fitted model and the log-likelihood before each M-step (history[-1] is that of
    ``model`` itself); converged: the gain fell below the tolerance."""

    model: Model
    history: list[float]
    converged: bool


def iterate_em(
    start: Model,
    expect: Callable[[Model], tuple[Expected, float]],
    maximise: Callable[[Model, Expected], Model],
    log_likelihood: Callable[[Model], float],
    *,
    n_values: int,
    max_iter: int,
    tol: float,
) -> EMResult[Model]:
    """EM from ``start``: ``expect`` gives the E-step's expectations and the log-likelihood of
    the current model, ``maximise`` the next model; at most ``max_iter`` iterations."""
    model, history = start, []
    for _ in range(max_iter):
        expected, total = expect(model)
        if not np.isfinite(total):
            raise ComputationError("EM diverged: the log-likelihood is not finite")
        history.append(total)
        if len(history) > 1 and history[-1] - history[-2] < tol * n_values:
            return EMResult(model, history, True)
        model = maximise(model, expected)
    history.append(log_likelihood(model))
    return EMResult(model, history, False)
