"""Several models on the same data: one comparison table and overlaid forecasts."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from dynid import api
from dynid.data.dataset import Dataset
from dynid.report import build_report
from dynid.report.compare import score_model
from tests.test_report import SVG_XMLNS, check_page, fitted, rotation_data


def _test_data(n: int = 80, scale: float = 3.0) -> Dataset:
    x = rotation_data(n=n).trials[0].x * scale
    return dataclasses.replace(Dataset.from_arrays(x, dt=0.1, variables=["x", "y"]), source="test.csv")


def _damped(train: Dataset):
    worse = fitted(data=train)
    worse.model.A_ = worse.model.A_ * 0.9
    return worse


def test_scores_against_independent_computation():
    train, test = rotation_data(), _test_data()
    exact = score_model("exact", fitted(data=train), test, steps=20)
    assert exact.one_step < 1e-10 and exact.multi_step < 1e-10
    assert exact.vpt == 20 * 0.1  # never off: the whole window
    assert exact.parameters == 4 and exact.held_out == "yes" and exact.fit_seconds == 0.1
    worse_file = _damped(train)
    worse = score_model("worse", worse_file, test, steps=20)
    x, a = test.trials[0].x, worse_file.model.A_
    scale = x.std(axis=0)
    residuals = x[-80 + 1 :] - x[:-1] @ a.T  # every sample after the first (<= 400)
    assert np.isclose(worse.one_step, np.sqrt(np.mean((residuals / scale) ** 2)), rtol=1e-10)
    predicted, state = [], x[59]
    for _ in range(20):
        state = a @ state
        predicted.append(state)
    errors = np.sqrt(np.mean(((np.array(predicted) - x[60:]) / scale) ** 2, axis=1))
    assert np.isclose(worse.multi_step, np.sqrt(np.mean(((np.array(predicted) - x[60:]) / scale) ** 2)))
    first_bad = np.flatnonzero(errors > 0.4)
    assert np.isclose(worse.vpt, (first_bad[0] + 1) * 0.1 if first_bad.size else 2.0)
    assert score_model("seen", fitted(data=train), train, steps=5).held_out == "no (training data)"


def test_report_of_several_models_has_one_table_and_overlaid_forecasts():
    train, test = rotation_data(), _test_data()
    other = fitted(data=rotation_data(variables=("p", "q")))
    page = build_report(
        [("exact.dynid", fitted(data=train)), ("worse.dynid", _damped(train)), ("pq.dynid", other)],
        [], train, test=test, horizon=20,
    )
    svgs = check_page(page)
    section = page.split("Model comparison on test.csv</h2>")[1].split("</section>")[0]
    assert section.count("<tr>") == 3  # header + two scored models
    assert "unseen in fitting" in section and "VPT" in section
    assert "pq.dynid: No forecast: the data&#x27;s variables (x, y) differ" in section
    overlays = [s for s in svgs if "worse.dynid" in svg_text(s) and "exact.dynid" in svg_text(s)]
    assert len(overlays) == 2  # one per variable
    assert re.search(r"<td>exact.dynid</td><td>test-linear</td><td class=\"num\">[0-9.e-]+</td>", section)


def svg_text(svg) -> str:
    """All the text of a parsed SVG figure."""
    return " ".join(t.text or "" for t in svg.iter(f"{{{SVG_XMLNS}}}text"))


def test_one_model_gets_no_comparison():
    data = rotation_data()
    page = build_report([("m.dynid", fitted(data=data))], [], data)
    assert "Model comparison" not in page


def test_dsr_measures_join_the_table_and_rank_the_exact_model_first():
    from dynid.metrics.dsr import spectrum_min_length

    # D_H needs a trial of spectrum_min_length() samples (320): 400, in the training range.
    train, test = rotation_data(), _test_data(n=400, scale=1.0)
    models = [("exact.dynid", fitted(data=train)), ("worse.dynid", _damped(train))]
    page = build_report(models, [], test)
    check_page(page)
    header = re.search(r"<thead>(.*?)</thead>", page.split("Model comparison")[2]).group(1)
    assert header.index("VPT") < header.index("D_stsp") < header.index("D_H") < header.index("fit seconds")
    values = {name: score_model(name, model_file, test, steps=20).dsr for name, model_file in models}
    # The damped model's free run decays to the origin: its geometry and spectrum are further off.
    assert values["exact.dynid"]["D_stsp"] < values["worse.dynid"]["D_stsp"]
    assert values["exact.dynid"]["D_H"] < values["worse.dynid"]["D_H"]
    # On 80 samples the spectra's smoothing spans every frequency: no D_H, D_stsp as before.
    short = _test_data(scale=1.0)
    assert short.trials[-1].n_samples < spectrum_min_length()
    dsr = score_model("exact.dynid", models[0][1], short, steps=20).dsr
    assert dsr["D_H"] is None and dsr["D_stsp"] is not None


def test_the_reports_dsr_measures_are_scores_for_the_same_model_and_data():
    """One rule (``api.free_run_scores``): the report ran 2,000 steps from the last trial where
    score runs max(samples, 10,000) from the first, and one model read D_stsp 4.30 in the
    report and 2.85 in score."""
    train, test = rotation_data(), _test_data(n=400, scale=1.0)
    models = [("exact.dynid", fitted(data=train)), ("worse.dynid", _damped(train))]
    page = build_report(models, [], test)
    for name, model_file in models:
        scored = api.score(model_file.model, test)
        assert scored["free_run_steps"] == 10_000
        dsr = score_model(name, model_file, test, steps=20).dsr
        assert dsr == {"D_stsp": scored["d_stsp"], "D_H": scored["d_h"]}
        for value in dsr.values():
            assert f"<td class=\"num\">{value:.5g}</td>" in page


def test_a_free_run_that_leaves_the_training_range_has_no_dsr_measures():
    """A rotation growing 2 % a step (0.99 x 1.03) leaves the training range widened by that
    range (about [-3, 3]) within about 60 steps of score's 10,000-step free run; D_stsp would read only
    the part inside the data's box, so neither measure is given, as score gives none."""
    train, test = rotation_data(), _test_data(n=400, scale=1.0)
    growing = fitted(data=train)
    growing.model.A_ = growing.model.A_ * 1.03
    dsr = score_model("growing.dynid", growing, test, steps=20).dsr
    assert dsr == {"D_stsp": None, "D_H": None}
    assert score_model("exact.dynid", fitted(data=train), test, steps=20).dsr["D_stsp"] is not None


def test_a_vpt_that_lasts_the_whole_window_is_shown_as_a_lower_bound():
    train, test = rotation_data(), _test_data()
    exact = score_model("exact", fitted(data=train), test, steps=20)
    worse = score_model("worse", _damped(train), test, steps=20)
    assert exact.vpt_censored and not worse.vpt_censored
    page = build_report([("exact.dynid", fitted(data=train)), ("worse.dynid", _damped(train))],
                        [], test, horizon=20)
    assert "<td>\u2265 2</td>" in page


def test_models_given_their_own_data_are_compared_per_data():
    """``model_data``: each model forecast on its own data; one table per data shared by two
    or more models, titled by its variables; a model alone on its data is in none."""
    train, pq_train = rotation_data(), rotation_data(variables=("p", "q"))
    xy_test, pq_test = _test_data(), dataclasses.replace(_test_data(), variables=("p", "q"), source="test.csv")
    models = [("a.dynid", fitted(data=train)), ("pq.dynid", fitted(data=pq_train)), ("b.dynid", _damped(train))]
    page = build_report(models, [], train, test=xy_test, horizon=20,
                        model_data=[(train, xy_test), (pq_train, pq_test), (train, xy_test)])
    check_page(page)
    assert "No forecast" not in page
    assert page.count("<h2>Model comparison on ") == 1
    section = page.split("Model comparison on test.csv (x, y)</h2>")[1].split("</section>")[0]
    assert section.count("<tr>") == 3 and "pq.dynid" not in section  # header + a, b
    pq_section = page.split("<h2>Model: pq.dynid")[1].split("</section>")[0]
    assert "forecast RMSE" in pq_section
