"""Lagged regression designs over trials.

One input-timing convention holds in all of ``dynid.linear``: the state at sample t depends on
the states at t-1, ..., t-p and on the input at t-1 (the input applied during the step from t-1
to t), i.e. ``x_t = c + A_1 x_{t-1} + ... + A_p x_{t-p} + B u_{t-1}``. Regressors are built
within each trial only, so no lag ever reaches across a trial boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.data.dataset import Dataset


def trial_arrays(data: Dataset) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Per-trial states (n_i, d) and inputs (n_i, m), or None when the data have no inputs."""
    trials_x = [trial.x for trial in data.trials]
    if not data.inputs:
        return trials_x, None
    return trials_x, [trial.u for trial in data.trials if trial.u is not None]


@dataclass(frozen=True)
class DesignLayout:
    """The columns of a lagged regression: ``[1 (if trend), x_{t-1}, ..., x_{t-p}, u_{t-1}]``
    with p = ``n_lags``, d = ``n_variables``, m = ``n_inputs``."""

    n_lags: int
    n_variables: int
    n_inputs: int
    trend: bool

    @property
    def n_regressors(self) -> int:
        """k: coefficients per equation."""
        return int(self.trend) + self.n_lags * self.n_variables + self.n_inputs

    def lag_columns(self, lag: int) -> slice:
        """Columns of ``x_{t-lag}`` (lag = 1..p) in ``regressors``."""
        if not 1 <= lag <= self.n_lags:
            raise IndexError(f"lag {lag} outside 1..{self.n_lags}")
        start = int(self.trend) + (lag - 1) * self.n_variables
        return slice(start, start + self.n_variables)

    def lag_column(self, lag: int, source: int) -> int:
        """The column of variable ``source`` at ``x_{t-lag}``."""
        return self.lag_columns(lag).start + source

    @property
    def input_columns(self) -> slice:
        """Columns of ``u_{t-1}`` in ``regressors`` (empty without inputs)."""
        start = int(self.trend) + self.n_lags * self.n_variables
        return slice(start, start + self.n_inputs)


@dataclass(frozen=True)
class LaggedDesign(DesignLayout):
    """Stacked one-step regression ``targets ≈ regressors @ theta`` over all trials.

    regressors: (N, k) rows ``[1 (if trend), x_{t-1}, ..., x_{t-p}, u_{t-1}]``;
    targets: (N, d) rows ``x_t``; rows_per_trial: how many rows each trial gave (in order).
    """

    regressors: np.ndarray
    targets: np.ndarray
    rows_per_trial: tuple[int, ...]

    @property
    def n_rows(self) -> int:
        return int(self.targets.shape[0])


def lagged_design(
    trials_x: list[np.ndarray],
    p: int,
    *,
    trials_u: list[np.ndarray] | None = None,
    trend: bool = True,
    start: int | None = None,
) -> LaggedDesign:
    """Build the stacked lagged regression of order ``p`` from per-trial arrays.

    trials_x: (n_i, d) states per trial; trials_u: (n_i, m) inputs per trial or None.
    start: first target sample in each trial (default p; must be >= p). Choosing start > p
    drops the same initial samples for every candidate order, as order selection needs.
    Trials too short to give a row contribute none.
    """
    if p < 1:
        raise ValueError("the number of lags must be at least 1")
    start = p if start is None else start
    if start < p:
        raise ValueError("start must be at least the number of lags")
    d = int(trials_x[0].shape[1])
    m = 0 if trials_u is None else int(trials_u[0].shape[1])
    regressor_blocks: list[np.ndarray] = []
    target_blocks: list[np.ndarray] = []
    rows: list[int] = []
    for i, x in enumerate(trials_x):
        n = x.shape[0]
        count = max(n - start, 0)
        rows.append(count)
        if count == 0:
            continue
        parts = [np.ones((count, 1))] if trend else []
        parts += [x[start - lag : n - lag] for lag in range(1, p + 1)]
        if trials_u is not None:
            parts.append(trials_u[i][start - 1 : n - 1])
        regressor_blocks.append(np.hstack(parts))
        target_blocks.append(x[start:n])
    k = int(trend) + p * d + m
    return LaggedDesign(
        regressors=np.vstack(regressor_blocks) if regressor_blocks else np.empty((0, k)),
        targets=np.vstack(target_blocks) if target_blocks else np.empty((0, d)),
        n_lags=p,
        n_variables=d,
        n_inputs=m,
        trend=trend,
        rows_per_trial=tuple(rows),
    )
