"""The contiguous-block validation split: the last part of every trial is held out.

Time series are not exchangeable: a random split would validate on samples wedged between
training samples. Holding out each trial's final block tests what a dynamics model is for,
continuing past what it saw.
"""

from __future__ import annotations

import numpy as np


def block_split(
    trials: list[np.ndarray], fraction: float, context: int = 0
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(fit trials, validation trials) from trials (n_i, ...) split in time.

    The last ``max(round(fraction * n_i), 1)`` samples of each trial are its validation block;
    the validation trial also starts ``context`` samples earlier (e.g. the lags a prediction
    needs), which may overlap the fit part. A fit part no longer than ``context`` is dropped
    (it would give no target rows).
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie strictly between 0 and 1, got {fraction}")
    head, tail = [], []
    for x in trials:
        cut = x.shape[0] - max(int(round(fraction * x.shape[0])), 1)
        if cut > context:
            head.append(x[:cut])
        tail.append(x[max(cut - context, 0) :])
    return head, tail
