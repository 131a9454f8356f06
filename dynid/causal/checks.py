"""Data checks shared by every lag-based causal method: one message per problem."""

from __future__ import annotations

import numpy as np

from dynid.data.dataset import Dataset
from dynid.errors import DataError


def check_values(data: Dataset, method: str) -> None:
    """DataError for missing/infinite values, a constant column, or irregular sampling.

    ``method`` names the method in the message (e.g. "Granger", "PCMCI").
    """
    x, _ = data.stacked()
    for j in np.flatnonzero(~np.isfinite(x).all(axis=0)):
        raise DataError(
            f"{data.source}: column '{data.variables[j]}' has missing or infinite values; "
            "choose a --nan policy that removes them"
        )
    for j in np.flatnonzero(np.all(x == x[0], axis=0)):
        raise DataError(
            f"{data.source}: column '{data.variables[j]}' is constant; drop it, "
            "it cannot cause or be caused"
        )
    if data.dt is None:
        raise DataError(
            f"{data.source}: {method} lags count samples, so the trials need one common, uniform "
            "time step; interpolate onto a uniform grid first with --resample DT"
        )
