"""Scores for forecasts (and later for causal graphs and equations); numpy only."""

from dynid.metrics.forecast import (
    VPT_THRESHOLD,
    masked_rms,
    normalised_error,
    nrmse,
    nrmse_per_variable,
    r2,
    rmse,
    rmse_per_variable,
    valid_prediction_time,
    valid_steps,
)

__all__ = [
    "VPT_THRESHOLD",
    "masked_rms",
    "normalised_error",
    "nrmse",
    "nrmse_per_variable",
    "r2",
    "rmse",
    "rmse_per_variable",
    "valid_prediction_time",
    "valid_steps",
]
