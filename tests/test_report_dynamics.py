"""Phase portraits and residuals in the report, against quantities computed independently."""

from __future__ import annotations

import numpy as np

from dynid.data.dataset import Dataset
from dynid.report import build_report
from dynid.report.dynamics import autocorrelation, one_step_residuals, portrait_pairs
from tests.test_report import SVG_XMLNS, LinearMap, check_page, fitted, rotation_data


def test_portrait_pairs_all_pairs_up_to_three_then_by_variance():
    rng = np.random.default_rng(0)
    assert portrait_pairs(rng.normal(size=(50, 2))) == [(0, 1)]
    assert portrait_pairs(rng.normal(size=(50, 3))) == [(0, 1), (0, 2), (1, 2)]
    x = rng.normal(size=(50, 5)) * np.array([1.0, 10.0, 0.1, 5.0, 3.0])
    x[3, 3] = np.nan  # ignored
    assert portrait_pairs(x) == [(1, 3), (1, 4), (3, 4)]


def test_autocorrelation_matches_the_textbook_estimate():
    rng = np.random.default_rng(1)
    e = rng.normal(size=5000)
    ar = np.empty_like(e)
    ar[0] = e[0]
    for k in range(1, e.size):
        ar[k] = 0.8 * ar[k - 1] + e[k]
    acf = autocorrelation(ar, 5)
    centred = ar - ar.mean()
    expected = [np.sum(centred[: ar.size - k] * centred[k:]) / np.sum(centred**2) for k in range(6)]
    np.testing.assert_allclose(acf, expected, rtol=0, atol=2e-3)  # mean-of-products vs sum form
    assert acf[0] == 1.0 and abs(acf[1] - 0.8) < 0.03
    assert np.all(np.isnan(autocorrelation(np.ones(10), 3)))


def test_residuals_of_an_exact_model_vanish_and_of_a_wrong_one_do_not():
    data = rotation_data()
    model = fitted(data=data).model
    t, r = one_step_residuals(model, data.trials[0], 50)
    assert t.shape == (50,) and r.shape == (50, 2)
    np.testing.assert_array_equal(t, data.trials[0].t[-50:])
    assert np.max(np.abs(r)) < 1e-10
    model.A_ = model.A_ * 0.5  # predicts half of the next state
    _, r = one_step_residuals(model, data.trials[0], 50)
    x = data.trials[0].x
    np.testing.assert_allclose(r, x[-50:] - 0.5 * x[-51:-1] @ (model.A_ * 2).T, atol=1e-12)


def test_model_section_has_a_phase_portrait_and_residuals():
    data = rotation_data()
    page = build_report([("m.dynid", fitted(data=data))], [], data)
    titles = [svg.find(f"{{{SVG_XMLNS}}}title").text for svg in check_page(page)]
    assert "y against x" in titles
    assert "One-step residuals" in titles and "Autocorrelation of the residuals" in titles
    assert "a free run of 2000 steps from the trial&#x27;s first 1 sample(s)" in page
    assert "diverges" not in page


def test_a_diverging_free_run_is_said_and_not_drawn_out_of_range():
    data = rotation_data()
    model_file = fitted(data=data)
    model_file.model.A_ = model_file.model.A_ * 1.2  # spirals outwards
    page = build_report([("m.dynid", model_file)], [], data)
    check_page(page)
    assert "The free run diverges at step" in page


def test_the_portrait_marks_divergence_by_forecast_and_score_rule():
    # A rotation growing 0.1 % a step leaves the training range widened by that range on each
    # side (x and y span about [-1, 1]: the box is about [-3, 3]) at about ln 3 / 0.001 = 1100
    # steps, well before it reaches 100x the data's size (about 4600 steps): the portrait says
    # so at the step forecast and score would.
    from dynid.api import range_escape_step
    from dynid.report.dynamics import free_run, free_run_divergence

    data = rotation_data()
    model_file = fitted(data=data)
    model = model_file.model
    model.A_ = np.array([[np.cos(0.2), -np.sin(0.2)], [np.sin(0.2), np.cos(0.2)]]) * 1.001
    run = free_run(model, data.trials[0])
    low, high = data.trials[0].x.min(axis=0), data.trials[0].x.max(axis=0)
    outside = np.any((run < 2 * low - high) | (run > 2 * high - low), axis=1)
    expected = int(np.argmax(outside)) + 1
    assert 900 < expected < 1300 and np.abs(run).max() < 100
    assert free_run_divergence(model, run) == range_escape_step(model, run) == expected
    page = build_report([("m.dynid", model_file)], [], data)
    check_page(page)
    assert f"The free run diverges at step {expected} " in page
    # The spectra, of the same run, stop where the portrait does.
    assert f"its spectrum is of the {expected - 1} steps before" in page
    model.data_range_ = None  # an older model file: only leaving the finite numbers counts
    assert free_run_divergence(model, run) is None


def test_no_portrait_for_one_variable():
    x = 0.9 ** np.arange(40.0)
    data = Dataset.from_arrays(x[:, None], dt=0.1, variables=["v"])
    page = build_report([("m.dynid", fitted(LinearMap, data))], [], data)
    check_page(page)
    assert "Phase portrait" not in page and "<h3>Residuals</h3>" in page
