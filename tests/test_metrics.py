"""Forecast metrics against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynid.errors import DataError
from dynid.metrics import (
    normalised_error,
    nrmse,
    nrmse_per_variable,
    r2,
    rmse,
    rmse_per_variable,
    valid_prediction_time,
)

# Errors (pred - true) of 2 steps x 2 variables: 1, 2 / 3, 4.
PRED = np.array([[1.0, 2.0], [3.0, 4.0]])
TRUE = np.zeros((2, 2))
SCALE = np.array([1.0, 2.0])


def test_rmse_over_all_elements():
    assert rmse(PRED, TRUE) == pytest.approx(math.sqrt((1 + 4 + 9 + 16) / 4))


def test_rmse_per_variable():
    np.testing.assert_allclose(rmse_per_variable(PRED, TRUE), [math.sqrt(5), math.sqrt(10)])


def test_per_variable_reduces_all_leading_axes():
    batch = np.stack([PRED, -PRED])  # (K=2, H=2, d=2): same squared errors twice
    expected = [math.sqrt(5), math.sqrt(10)]
    np.testing.assert_allclose(rmse_per_variable(batch, np.zeros_like(batch)), expected)


def test_nrmse_divides_each_variable_by_its_scale():
    expected = [math.sqrt(5), math.sqrt(10) / 2]
    np.testing.assert_allclose(nrmse_per_variable(PRED, TRUE, SCALE), expected)
    # RMS over variables of the normalised RMSEs: sqrt((5 + 10/4) / 2).
    assert nrmse(PRED, TRUE, SCALE) == pytest.approx(math.sqrt(3.75))


def test_normalised_error_per_step():
    # Step 0: sqrt((1 + (2/2)^2) / 2) = 1; step 1: sqrt((9 + (4/2)^2) / 2) = sqrt(6.5).
    np.testing.assert_allclose(normalised_error(PRED, TRUE, SCALE), [1.0, math.sqrt(6.5)])


# Rows chosen so the normalised error (scale 1, 2) is 0.1, 0.3, sqrt(0.125)=0.354, sqrt(0.18)=0.424.
VPT_ERRORS = np.array([[0.1, 0.2], [0.3, 0.6], [0.5, 0.0], [0.6, 0.0], [0.0, 0.0]])


def test_vpt_is_time_of_first_step_over_threshold():
    # Row 3 (the 4th forecast step) is the first above 0.4: VPT = 4 * dt.
    vpt = valid_prediction_time(VPT_ERRORS, np.zeros((5, 2)), SCALE, dt=0.5)
    assert vpt == pytest.approx(2.0)
    # A later step falling back under the threshold does not extend VPT (row 4 is 0 error).


def test_vpt_full_horizon_when_never_exceeded_and_dt_when_wrong_at_once():
    true = np.zeros((5, 2))
    never = valid_prediction_time(VPT_ERRORS, true, SCALE, dt=0.5, threshold=1.0)
    at_once = valid_prediction_time(VPT_ERRORS, true, SCALE, dt=0.5, threshold=0.05)
    assert (never, at_once) == (pytest.approx(2.5), pytest.approx(0.5))


def test_vpt_threshold_is_strict():
    # One variable, error exactly 0.5 at every step: equal to the threshold is still valid.
    pred = np.full((3, 1), 0.5)
    assert valid_prediction_time(pred, np.zeros((3, 1)), [1.0], dt=1.0, threshold=0.5) == 3.0


def test_vpt_batch_mean_and_per_rollout():
    early = VPT_ERRORS.copy()
    early[1] = [0.9, 0.0]  # first exceedance at row 1: VPT = 2 * dt
    pred = np.stack([VPT_ERRORS, early])
    true = np.zeros_like(pred)
    per = valid_prediction_time(pred, true, SCALE, dt=0.5, per_rollout=True)
    np.testing.assert_allclose(per, [2.0, 1.0])
    assert valid_prediction_time(pred, true, SCALE, dt=0.5) == pytest.approx(1.5)


def test_vpt_counts_a_diverged_rollout_as_failed():
    pred = np.zeros((4, 2))
    pred[2:] = np.nan
    assert valid_prediction_time(pred, np.zeros((4, 2)), SCALE, dt=0.1) == pytest.approx(0.3)


def test_r2_per_variable_and_nan_for_constant_truth():
    true = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
    pred = np.array([[1.0, 5.0], [2.0, 5.0], [4.0, 6.0]])
    # Variable 0: SS_res = 1, SS_tot = 2 -> 0.5. Variable 1: constant truth -> undefined.
    out = r2(pred, true)
    assert out[0] == pytest.approx(0.5)
    assert math.isnan(out[1])
    np.testing.assert_allclose(r2(true[:, :1], true[:, :1]), [1.0])


def test_bad_inputs():
    with pytest.raises(ValueError, match="shape"):
        rmse(PRED, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="scale"):
        nrmse(PRED, TRUE, [1.0, 2.0, 3.0])
    with pytest.raises(DataError, match="variable 1"):
        nrmse(PRED, TRUE, [1.0, 0.0])
    with pytest.raises(ValueError, match="dt"):
        valid_prediction_time(PRED, TRUE, SCALE, dt=0.0)
    with pytest.raises(ValueError, match=r"\(H, d\)"):
        valid_prediction_time(np.zeros((2, 2, 2, 2)), np.zeros((2, 2, 2, 2)), SCALE, dt=1.0)
