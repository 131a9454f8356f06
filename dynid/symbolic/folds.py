"""Blocked cross-validation folds over the regression rows.

Rows of a time series are autocorrelated, so held-out rows are contiguous blocks
(``train_validation_split``); ``make_folds`` chooses the folds of one identification, which
``selection.select_folds`` scores and on whose first fold supports are fitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dynid.errors import DataError, UsageError

if TYPE_CHECKING:
    from dynid.symbolic.rows import RegressionRows

# Held-out share of the rows, in this many interleaved contiguous blocks per trial.
VALIDATION_FRACTION = 0.2
VALIDATION_BLOCKS = 3
# Rows of a trial's strong-form regression lost at each validation boundary (derivative stencils).
BOUNDARY_GAP = 3


@dataclass(frozen=True)
class Folds:
    """Blocked cross-validation folds over the regression rows: ``pairs`` [(train, val), ...]
    boolean (N,) masks whose held-out sets are disjoint and cover (nearly) every row. Fold 0
    (``train``, ``val``) is the reference: supports are fitted, and constants refined, on its
    training rows; all folds score the number of terms (``selection.select_folds``)."""

    pairs: list[tuple[np.ndarray, np.ndarray]]

    @property
    def train(self) -> np.ndarray:
        return self.pairs[0][0]

    @property
    def val(self) -> np.ndarray:
        return self.pairs[0][1]


def make_folds(rows: RegressionRows) -> Folds:
    """The folds (``Folds``): ``VALIDATION_BLOCKS`` interleaved blocks per trial, fewer when a
    short record leaves the first fold no training or held-out rows; folds that hold out
    nothing, or the same rows as an earlier one, are dropped."""
    gap = BOUNDARY_GAP if rows.formulation == "strong" else 0
    for blocks in range(VALIDATION_BLOCKS, 0, -1):
        pairs, seen = [], set()
        for fold in range(n_folds(VALIDATION_FRACTION)):
            train, val = train_validation_split(
                rows.rows_per_trial, VALIDATION_FRACTION, blocks=blocks, gap=gap, fold=fold
            )
            usable = train.any() and val.any() and val.tobytes() not in seen
            if fold == 0 and not usable:
                break
            if usable:
                seen.add(val.tobytes())
                pairs.append((train, val))
        if pairs:
            return Folds(pairs)
    raise DataError(
        f"{sum(rows.rows_per_trial)} regression rows are too few to hold any out for model "
        "selection; a longer record is needed"
    )


def block_labels(mask: np.ndarray) -> np.ndarray:
    """For the True entries of ``mask``: which contiguous run of True each belongs to."""
    starts = np.diff(np.concatenate([[0], mask.astype(np.int8)])) == 1
    return np.cumsum(starts)[mask]


def train_validation_split(
    n_rows_per_trial: list[int], fraction: float = 0.2, *, blocks: int = 1, gap: int = 0, fold: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean (N,) masks (train, validation) over the stacked rows of all trials, N = sum(n).

    Rows of a time series are autocorrelated, so held-out rows are contiguous blocks, never
    random rows (random rows would sit between training rows and validate almost nothing). Each
    trial is cut into ``blocks`` equal consecutive segments (default 1: the whole trial) and the
    last ``fraction`` of every segment is held out; ``blocks > 1`` interleaves training and
    held-out blocks so both cover the whole trajectory. ``gap`` rows on each side of a held-out
    block belong to neither set, so that derivative stencils or integration windows spanning the
    boundary do not leak training noise into the validation rows. In fold 0 every segment keeps
    at least one training row.

    ``fold`` j (0 <= j < 1 / fraction) holds out the j-th piece of that size counted from each
    segment's end instead, so folds 0, 1, ... hold out every row once, but for a remainder of
    fewer than 1 / fraction rows per segment (blocked cross-validation).
    """
    if not 0 < fraction < 1:
        raise UsageError(f"validation fraction {fraction}: must be between 0 and 1")
    if blocks < 1 or gap < 0:
        raise UsageError("validation split: blocks must be >= 1 and gap >= 0")
    if not 0 <= fold < n_folds(fraction):
        raise UsageError(f"validation fold {fold}: must be between 0 and {n_folds(fraction) - 1}")
    lengths = [int(n) for n in n_rows_per_trial]
    if any(n < 0 for n in lengths):
        raise DataError("row counts per trial must be non-negative")
    train = np.zeros(sum(lengths), dtype=bool)
    val = np.zeros_like(train)
    start = 0
    for n in lengths:
        edges = np.linspace(start, start + n, blocks + 1).round().astype(int)
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            held = min(int(round(fraction * (hi - lo))), max(hi - lo - 1, 0))
            if not held:
                train[lo:hi] = True
                continue
            end = max(hi - fold * held, lo + held)  # a segment too short for this fold: its start
            begin = end - held
            val[begin:end] = True
            train[lo : max(begin - gap, min(lo + 1, begin))] = True
            train[min(end + gap, hi) : hi] = True
        start += n
    # The gap also separates held-out rows from the previous segment's training rows.
    for offset in range(1, gap + 1):
        train[offset:] &= ~val[:-offset]
        train[:-offset] &= ~val[offset:]
    return train, val


def n_folds(fraction: float) -> int:
    """How many disjoint held-out pieces of ``fraction`` fit in a segment: floor(1 / fraction)."""
    return max(int(np.floor(1.0 / fraction + 1e-9)), 1)
