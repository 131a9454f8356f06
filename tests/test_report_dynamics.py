"""Phase portraits and residuals in the report, against quantities computed independently."""

from __future__ import annotations

import dataclasses

import numpy as np

from dynid.data.dataset import Dataset
from dynid.report import build_report
from dynid.report.dynamics import autocorrelation, one_step_residuals, portrait_pairs
from dynid.report.svg import Series, line_plot
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
    assert ("the free run dynid score scores: 10,000 steps from the first 1 sample(s) of the "
            "first trial of") in page
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
    from dynid.api import range_escape_step, score_free_run

    data = rotation_data()
    model_file = fitted(data=data)
    model = model_file.model
    model.A_ = np.array([[np.cos(0.2), -np.sin(0.2)], [np.sin(0.2), np.cos(0.2)]]) * 1.001
    raw = np.asarray(model.simulate(data.trials[0].slice(0, 1), 10_000), dtype=float)
    low, high = data.trials[0].x.min(axis=0), data.trials[0].x.max(axis=0)
    outside = np.any((raw < 2 * low - high) | (raw > 2 * high - low), axis=1)
    expected = int(np.argmax(outside)) + 1
    assert 900 < expected < 1300 and np.abs(raw[:expected]).max() < 100
    assert range_escape_step(model, raw) == expected
    run = score_free_run(model, data)
    assert run.diverged_at == expected and run.escaped
    page = build_report([("m.dynid", model_file)], [], data)
    check_page(page)
    assert f"The free run diverges at step {expected} " in page
    assert "Its D_stsp is none (the run diverged)" in page
    # The spectra, of the same run, stop where the portrait does.
    assert f"its spectrum is of the {expected - 1} steps before" in page
    model.data_range_ = None  # an older model file: only leaving the finite numbers counts
    assert score_free_run(model, data).diverged_at is None


def test_the_pictures_draw_the_run_the_table_scores_computed_once():
    """The phase portrait, spectra and equations' free run drew a 2,000-step run of their own
    from the LAST trial while the table (and score) scored max(samples, 10,000) steps from the
    FIRST: here the two trials start apart, so the old run differs from score's at every step.
    Each picture now draws score's run (the equations' plot a prefix of it), simulated once per
    model for the table and the section together."""
    from dynid.api import free_run_scores, score_free_run
    from dynid.report.spectra import welch_spectrum

    first = rotation_data(n=150).trials[0].x
    # The second trial starts elsewhere (x and y swapped, half the size).
    data = Dataset.from_arrays([first, 0.5 * first[:, ::-1]], dt=1.0, variables=["x", "y"])
    models = [("a.dynid", fitted(data=data)), ("b.dynid", fitted(data=data))]
    models[1][1].model.A_ = models[1][1].model.A_ * 0.98  # decays: another row, another run
    long_runs = []
    for _, model_file in models:
        model = model_file.model
        simulate = model.simulate

        def counting(history, steps, *args, simulate=simulate, **kwargs):
            if steps >= 10_000:
                long_runs.append(steps)
            return simulate(history, steps, *args, **kwargs)

        model.simulate = counting
    page = build_report(models, [], data)
    check_page(page)
    assert long_runs == [10_000, 10_000]  # one free run per model, shared by table and section
    for _, model_file in models:
        model = model_file.model
        run = score_free_run(model, data).states
        old = np.asarray(model.simulate(data.trials[-1].slice(0, 1), 2000), dtype=float)
        assert np.linalg.norm(run[:50] - old[:50], axis=1).mean() > 0.3  # apart from the start
        # The portrait draws it: the same plot, drawn from these points, is in the page.
        observed = np.vstack([data.trials[0].x, np.full((1, 2), np.nan), data.trials[1].x])
        portrait = line_plot([Series("data", observed[:, 0], observed[:, 1]),
                              Series("model", run[:, 0], run[:, 1], dashed=True)],
                             title="y against x", xlabel="x", ylabel="y", width=320, height=300)
        assert portrait in page
        # (the old run's would not be)
        assert line_plot([Series("data", observed[:, 0], observed[:, 1]),
                          Series("model", old[:, 0], old[:, 1], dashed=True)],
                         title="y against x", xlabel="x", ylabel="y", width=320, height=300) not in page
        # The spectra are of the same run.
        f_data, p_data = welch_spectrum(data.trials[0].x, model.dt_)
        f_run, p_run = welch_spectrum(run, model.dt_)
        spectrum = line_plot(
            [Series("data", np.log10(f_data), np.log10(p_data[:, 0])),
             Series("model", np.log10(f_run), np.log10(p_run[:, 0]), dashed=True)],
            title="x", xlabel="log10 frequency (1/time)", ylabel="log10 power", width=320, height=240)
        assert spectrum in page
        # The table's D_stsp is of this run, and the portrait's caption gives it.
        scored = free_run_scores(model, data)
        assert f'<td class="num">{scored["d_stsp"]:.5g}</td>' in page
        assert f"Its D_stsp is {scored['d_stsp']:.5g}," in page


def test_no_portrait_for_one_variable():
    x = 0.9 ** np.arange(40.0)
    data = Dataset.from_arrays(x[:, None], dt=0.1, variables=["v"])
    page = build_report([("m.dynid", fitted(LinearMap, data))], [], data)
    check_page(page)
    assert "Phase portrait" not in page and "<h3>Residuals</h3>" in page


def _residual_plot(model, trial) -> str:
    """The residuals figure the report draws of ``trial`` (as ``dynamics._residuals`` draws it)."""
    from dynid.report.dynamics import MAX_RESIDUALS

    t, r = one_step_residuals(model, trial, MAX_RESIDUALS)
    return line_plot([Series(name, t, r[:, j]) for j, name in enumerate(model.variables_)],
                     title="One-step residuals", xlabel="t", ylabel="data \u2212 prediction",
                     width=420, height=240)


def test_residuals_are_of_the_test_data_when_given():
    """The residuals were of the last trial of --data even with --test (the data the forecast,
    free run and table are judged on): with --test they are of its last trial, and the caption
    says which data they are."""
    data = rotation_data()
    # Held-out data from another start: a model off by 5 % leaves other residuals on them.
    x = np.array([[0.0, 2.0]])
    for _ in range(99):
        x = np.vstack([x, 0.99 * np.array([[np.cos(0.2), -np.sin(0.2)], [np.sin(0.2), np.cos(0.2)]]) @ x[-1]])
    test = dataclasses.replace(Dataset.from_arrays(x, dt=0.1, variables=["x", "y"]), source="held.csv")
    model_file = fitted(data=data)
    model_file.model.A_ = model_file.model.A_ * 0.95
    model = model_file.model
    on_test, on_data = _residual_plot(model, test.trials[-1]), _residual_plot(model, data.trials[-1])
    assert on_test != on_data
    page = build_report([("m.dynid", model_file)], [], data, test=test)
    check_page(page)
    assert on_test in page and on_data not in page
    assert "The last 99 samples of the last trial of held.csv (the --test data), each" in page
    # --test alone: residuals too (none were drawn without --data).
    page = build_report([("m.dynid", model_file)], [], None, test=test)
    assert on_test in page
    # No --test: of --data, and said so.
    page = build_report([("m.dynid", model_file)], [], data)
    assert on_data in page and "(the --data; no --test given)" in page
