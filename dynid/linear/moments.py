"""Running sums of a lagged regression over data that arrive in pieces (a file read in chunks):
everything least squares and DMD need, in memory that does not grow with the data.

``LaggedMoments(lags, ...)`` takes pieces of trials (``add``) and keeps, for the rows
w_t = [1 (if trend), x_{t-1}, ..., x_{t-L}, u_{t-1}, x_t] with t >= L of every trial, the Gram
matrix sum w_t w_t' ((k + d) x (k + d)), plus each trial's first L samples (its "head"). From
these ``design(p, start)`` gives Z'Z, Z'Y, Y'Y and the row count of the order-p design that
``lagged_design(..., p, start=start)`` would build for any p <= L and start in p..L: the
columns of a lower order are a subset, and the rows before L come from the heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.linear.design import DesignLayout, lagged_design

# Samples turned into design rows at once: the rows take (k + d) / d times the samples' memory.
BLOCK_ROWS = 4096


@dataclass(frozen=True)
class DesignMoments:
    """The sums of one lagged design (see ``DesignLayout``) over ``n`` rows: ``ztz`` Z'Z (k, k),
    ``zty`` Z'Y (k, d), ``yty`` Y'Y (d, d); and for R^2, ``target_sst`` (d,): each target's sum
    of squares about its mean."""

    layout: DesignLayout
    ztz: np.ndarray
    zty: np.ndarray
    yty: np.ndarray
    n: int
    target_sst: np.ndarray


class LaggedMoments:
    """Running sums of the lagged regression of order ``lags`` (see the module doc).

    d variables, m inputs (0: none); ``trend``: a column of ones first.
    """

    def __init__(self, lags: int, n_variables: int, n_inputs: int = 0, trend: bool = True) -> None:
        self.layout = DesignLayout(lags, n_variables, n_inputs, trend)
        width = self.layout.n_regressors + n_variables
        self.gram = np.zeros((width, width))
        self.n = 0
        # Targets' sums about a shift (the first sample) for their variance without cancellation.
        self._shift: np.ndarray | None = None
        self._sums = np.zeros((2, n_variables))  # sum and sum of squares of (x_t - shift), t >= L
        self.heads: list[tuple[np.ndarray, np.ndarray | None]] = []
        self._tail_x = np.empty((0, n_variables))
        self._tail_u: np.ndarray | None = None if n_inputs == 0 else np.empty((0, n_inputs))

    def add(self, x: np.ndarray, u: np.ndarray | None, starts_trial: bool) -> None:
        """Samples ``x`` (n, d) and inputs ``u`` (n, m) that continue the current trial, or
        begin a new one (``starts_trial``)."""
        lags = self.layout.n_lags
        if starts_trial or not self.heads:
            self.heads.append((np.empty((0, x.shape[1])), None if u is None else np.empty((0, u.shape[1]))))
            self._tail_x, self._tail_u = x[:0], None if u is None else u[:0]
        head_x, head_u = self.heads[-1]
        if head_x.shape[0] < lags:
            need = lags - head_x.shape[0]
            self.heads[-1] = (np.vstack([head_x, x[:need]]), None if u is None else np.vstack([head_u, u[:need]]))
        # A block's design is (k + d) / d times the block: blocks keep it small.
        for start in range(0, x.shape[0], BLOCK_ROWS):
            self._add_block(x[start : start + BLOCK_ROWS], None if u is None else u[start : start + BLOCK_ROWS])

    def _add_block(self, x: np.ndarray, u: np.ndarray | None) -> None:
        lags = self.layout.n_lags
        joined_x = np.vstack([self._tail_x, x])
        joined_u = None if u is None else np.vstack([self._tail_u, u])
        # Rows t >= L of the trial: in ``joined``, from index L on (the tail is at most L long,
        # and shorter only at the start of a trial, where row L of the trial is row L here).
        design = lagged_design([joined_x], lags, trials_u=None if u is None else [joined_u],
                               trend=self.layout.trend, start=lags)
        if design.n_rows:
            rows = np.hstack([design.regressors, design.targets])
            self.gram += rows.T @ rows
            self.n += design.n_rows
            self._add_targets(design.targets, self._sums)
        self._tail_x = joined_x[-lags:]
        self._tail_u = None if joined_u is None else joined_u[-lags:]

    def _add_targets(self, targets: np.ndarray, sums: np.ndarray) -> None:
        if self._shift is None:
            self._shift = targets[0].copy()
        centred = targets - self._shift
        sums[0] += centred.sum(axis=0)
        sums[1] += (centred**2).sum(axis=0)

    def design(self, p: int, start: int | None = None) -> DesignMoments:
        """The sums of ``lagged_design(trials, p, start=start)`` (start: default p; p <= start
        <= L) over every trial added so far."""
        lags, d = self.layout.n_lags, self.layout.n_variables
        start = p if start is None else start
        if not 1 <= p <= start <= lags:
            raise ValueError(f"need 1 <= p <= start <= {lags}, got p={p}, start={start}")
        layout = DesignLayout(p, d, self.layout.n_inputs, self.layout.trend)
        full = self.layout
        columns = ([0] if full.trend else []) + list(range(full.lag_columns(1).start, full.lag_columns(p).stop))
        columns += list(range(full.input_columns.start, full.input_columns.stop))
        targets = list(range(full.n_regressors, full.n_regressors + d))
        keep = columns + targets
        gram = self.gram[np.ix_(keep, keep)].copy()
        n, sums = self.n, self._sums.copy()
        if start < lags:
            heads_x = [hx for hx, _ in self.heads]
            heads_u = None if self.layout.n_inputs == 0 else [hu for _, hu in self.heads]
            # Rows start..L-1 of each trial lie in its head; lagged_design starts them at ``start``.
            extra = lagged_design(heads_x, p, trials_u=heads_u, trend=full.trend, start=start)
            if extra.n_rows:
                rows = np.hstack([extra.regressors, extra.targets])
                gram += rows.T @ rows
                n += extra.n_rows
                self._add_targets(extra.targets, sums)
        k = layout.n_regressors
        mean = sums[0] / max(n, 1)
        return DesignMoments(layout, gram[:k, :k], gram[:k, k:], gram[k:, k:], n,
                             np.clip(sums[1] - n * mean**2, 0.0, None))
