"""Training curve, error against horizon and power spectra in the report, checked against
quantities computed independently."""

from __future__ import annotations

import numpy as np

from dynid.data.dataset import Dataset
from dynid.report import build_report
from dynid.report.fitting import error_by_horizon, training_curve
from dynid.report.sections import ModelContext
from dynid.report.spectra import welch_spectrum
from dynid.training.loop import TRAINING_CURVE, TrainingResult
from tests.test_report import SVG_XMLNS, check_page, fitted, rotation_data


def _titles(page: str) -> list[str]:
    return [svg.find(f"{{{SVG_XMLNS}}}title").text for svg in check_page(page)]


# -- training curve ----------------------------------------------------------------------------------
def test_a_training_curve_is_drawn_from_the_fit_metrics_on_a_log_axis():
    losses = tuple(float(v) for v in 10.0 ** -np.linspace(0, 4, 50))
    validation = tuple(float(v) for v in 10.0 ** -np.linspace(0, 3, 50) + 1e-3 * np.arange(50))
    result = TrainingResult(50, 20, validation[19], "patience", None, losses, validation)
    model_file = fitted()
    model_file.metadata["metrics"] = {"rmse": 0.1, TRAINING_CURVE: result.curve()}
    page = build_report([("m.dynid", model_file)], [])
    assert "Training curve" in _titles(page)
    assert "log10 loss" in page and "(50 of 50 epochs shown)" in page
    best = int(np.argmin(validation))
    assert f"at epoch {best + 1} (dotted; the weights kept)" in page
    # the fit metrics table does not dump the curve's lists
    assert "training_curve.loss" not in page


def test_no_training_curve_without_one_or_with_a_malformed_one():
    assert "Training curve" not in build_report([("m.dynid", fitted())], [])
    assert training_curve({"metrics": {TRAINING_CURVE: {"epoch": [1, 2], "loss": [1.0]}}}, {}) is None
    assert training_curve({}, {TRAINING_CURVE: {"epoch": [1], "loss": [1.0]}}) is not None


# -- error against horizon ---------------------------------------------------------------------------
def _context(model_file, data) -> ModelContext:
    return ModelContext(model_file.model, model_file.metadata, data, None)


def test_error_against_horizon_is_zero_for_the_exact_model_and_grows_for_a_wrong_one():
    data = rotation_data(n=200)
    exact = fitted(data=data)
    total, per_variable, rollouts = error_by_horizon(_context(exact, data), 30)
    assert total.shape == (30,) and per_variable.shape == (30, 2) and rollouts == 10
    assert np.max(total) < 1e-8
    wrong = fitted(data=data)
    wrong.model.A_ = wrong.model.A_ * 0.9
    total, per_variable, _ = error_by_horizon(_context(wrong, data), 30)
    # Independently: rollouts of x[k+1] = 0.9 A x[k] from every one of the 10 starts.
    x = data.trials[0].x
    scale = x.std(axis=0)
    starts = np.unique(np.linspace(1, 200 - 30, 10).round()).astype(int)
    squared = []
    for s in starts:
        state, rows = x[s - 1], []
        for _ in range(30):
            state = wrong.model.A_ @ state
            rows.append(state)
        squared.append(((np.array(rows) - x[s : s + 30]) / scale) ** 2)
    expected = np.sqrt(np.mean(np.stack(squared), axis=0))
    np.testing.assert_allclose(per_variable, expected, rtol=1e-10)
    assert total[-1] > total[0] > 0


def test_the_model_section_shows_the_error_curve_on_the_held_out_data():
    data = rotation_data(n=200)
    page = build_report([("m.dynid", fitted(data=data))], [], data, horizon=25)
    assert "Error against horizon" in _titles(page)
    assert "of 10 free rollouts" in page and "--data data" in page


# -- power spectra -----------------------------------------------------------------------------------
def test_welch_spectrum_peaks_at_the_frequency_of_a_sine():
    dt = 0.01
    t = np.arange(4000) * dt
    x = np.c_[np.sin(2 * np.pi * 3.0 * t), np.sin(2 * np.pi * 7.0 * t)]
    frequencies, power = welch_spectrum(x, dt)
    assert frequencies[0] > 0 and power.shape == (frequencies.size, 2)
    peaks = frequencies[np.argmax(power, axis=0)]
    resolution = frequencies[1] - frequencies[0]
    np.testing.assert_allclose(peaks, [3.0, 7.0], atol=resolution)
    # the longest NaN-free stretch is used; too short a stretch gives none
    x[100] = np.nan
    assert welch_spectrum(x, dt) is not None
    assert welch_spectrum(x[:10], dt) is None


def test_the_model_section_shows_the_spectra_of_data_and_free_run():
    data = rotation_data(n=300)
    page = build_report([("m.dynid", fitted(data=data))], [], data)
    titles = _titles(page)
    assert "<h3>Power spectra</h3>" in page and "log10 power" in page
    assert titles.count("x") >= 3  # overview, forecast, spectrum
    assert "the free run dynid score scores: 10,000 steps" in page


def test_a_diverging_rollout_ends_the_error_curve_and_is_said():
    from tests.test_report import LinearMap

    class Blows(LinearMap):
        def _simulate(self, history, steps, future_inputs):
            out = super()._simulate(history, steps, future_inputs)
            out[4:] = np.inf  # finite for four steps, then gone
            return out

    data = rotation_data(n=200)
    model_file = fitted(Blows, data)
    total, per_variable, _ = error_by_horizon(_context(model_file, data), 30)
    assert np.isfinite(total[:4]).all() and np.isinf(total[4:]).all()
    page = build_report([("m.dynid", model_file)], [], data, horizon=30)
    assert "A rollout diverges after 4 steps; the curves stop there." in page
