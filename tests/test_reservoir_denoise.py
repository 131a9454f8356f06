"""Ground truth for the reservoirs' denoising (``dynid.models.reservoir.denoise``): the
smoother chosen for the estimated noise level brings noisy samples closer to the noise-free
ones, its risk estimate is the error it makes, clean records stay raw, and a model file keeps
the smoothing its forecasts apply to the history."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.data.dataset import Dataset, Trial
from dynid.models.reservoir.denoise import RAW, StateSmoothing, choose_smoothing, denoise
from dynid.models.reservoir.ngrc import NGRC, NGRCParams, ngrc_features
from dynid.systems import simulate

DT = 0.01


def lorenz_x(n: int, noise: float, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(n,) clean and noisy Lorenz x at DT, noise as a fraction of x's sd."""
    clean = simulate("lorenz", n=n + 500, dt=DT).x[500:, 0]
    rng = np.random.default_rng(seed)
    return clean, clean + noise * clean.std() * rng.standard_normal(n)


@pytest.mark.parametrize("noise", [0.01, 0.05])
def test_the_chosen_smoother_removes_most_noise_and_its_risk_estimate_is_its_error(noise):
    """Stein's estimate is unbiased for the mean squared error against the clean signal; at
    1-5 % noise on Lorenz x sampled at dt 0.01 the chosen window leaves under half the noise's
    sd (the raw record's error is the noise itself)."""
    clean, noisy = lorenz_x(5000, noise)
    sd = noise * clean.std()
    smoother, risk = choose_smoothing(noisy, sd)
    error = np.mean((smoother.apply(noisy) - clean) ** 2)
    assert smoother.window > 1
    assert np.sqrt(error) < 0.5 * sd
    assert risk == pytest.approx(error, rel=0.25)


def test_clean_records_stay_raw_and_the_raw_smoother_is_the_identity():
    clean, _ = lorenz_x(3000, 0.0)
    smoothed, used = denoise([np.column_stack([clean, clean**2])])
    assert used == [[RAW, RAW]]
    np.testing.assert_array_equal(smoothed[0][:, 0], clean)
    assert RAW.trace(100) == 100.0


def test_the_trace_is_that_of_the_smoothing_matrix():
    """tr(S), edges included, from the filter applied to the unit vectors."""
    from dynid.models.reservoir.denoise import Smoothing

    smoother, n = Smoothing(7, 3), 40
    matrix = np.column_stack([smoother.apply(column) for column in np.eye(n)])
    assert smoother.trace(n) == pytest.approx(np.trace(matrix))


def test_a_model_file_keeps_the_smoothing_and_a_forecast_smooths_its_history():
    """ngrc on noisy Lorenz: the smoothing chosen in the fit is stored, restored, and sets how
    much history a forecast needs; files without it were fitted on raw states."""
    x = simulate("lorenz", n=1500, dt=DT, noise=0.05, seed=1).x[500:]
    params = NGRCParams(delays=2, skip=5, ridge=1e-4)
    model = NGRC(params).fit(Dataset.from_arrays(x, dt=DT, variables=["x", "y", "z"]))
    smoothing = model.smoothing_
    assert all(s.window > 1 for s in smoothing.smoothers)
    assert model.history_length == 5 + smoothing.span
    arrays = model.arrays()
    restored = NGRC.restore(params, arrays, variables=model.variables_, inputs=(), dt=model.dt_)
    history = Trial(DT * np.arange(len(x)), x)
    np.testing.assert_array_equal(restored.simulate(history, 20), model.simulate(history, 20))
    del arrays["smoothing"]
    old = NGRC.restore(params, arrays, variables=model.variables_, inputs=(), dt=model.dt_)
    assert old.smoothing_ == StateSmoothing.raw(3)
    assert old.history_length == 6


def test_denoising_removes_the_attenuation_of_the_map_fitted_on_noisy_states():
    """Errors in variables: ngrc (k = 2, s = 5, ridge by held-out skill) fitted on 2,000 Lorenz
    samples with 5 % noise, its read-out then applied to the noise-free states. Fitted on the
    raw record, its increments miss the true ones by about 8 % (noise in the regressors
    attenuates the map); fitted on the denoised record, by about 2 %."""
    clean = simulate("lorenz", n=2500, dt=DT).x[500:]
    noisy = simulate("lorenz", n=2500, dt=DT, noise=0.05, seed=1).x[500:]
    errors = {}
    for smooth in (False, True):
        model = NGRC(NGRCParams(delays=2, skip=5, denoise=smooth)).fit(
            Dataset.from_arrays(noisy, dt=DT, variables=["x", "y", "z"]))
        z = (clean - model.mean_) / model.scale_
        rows = np.arange(5, len(z) - 1)
        predicted = ngrc_features(z, rows, 2, 5) @ model.weights_ + model.bias_
        true = z[rows + 1] - z[rows]
        errors[smooth] = np.sqrt(np.mean((predicted - true) ** 2) / np.mean(true**2))
    assert errors[True] <= 0.03
    assert errors[False] >= 2.5 * errors[True]
