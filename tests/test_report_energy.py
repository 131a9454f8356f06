"""The report's energy plot (phnn, hnn): the energy along the free run dynid score and the
comparison table score, against the held-out data's, on a linear map whose energy is known."""

from __future__ import annotations

import dataclasses
from html import escape

import numpy as np

from dynid.data.dataset import Dataset
from dynid.report import build_report
from dynid.report.svg import Series, fmt, line_plot
from tests.test_report import LinearMap, check_page, fitted, rotation_data


class WithEnergy(LinearMap):
    """x[k+1] = A x[k] with the energy H(x) = |x|^2 / 2 (data units), and the data's centre and
    scale the energy part starts a run from when there are no data."""

    def _fit(self, data, *, seed, device, progress):
        super()._fit(data, seed=seed, device=device, progress=progress)
        x = np.vstack([t.x for t in data.trials])
        self.center_, self.scale_ = x.mean(axis=0), x.std(axis=0)

    def energy(self, x):
        return 0.5 * np.sum(np.asarray(x, dtype=float) ** 2, axis=1)


def held_out(start) -> Dataset:
    """100 samples of the training data's map (a rotation shrinking 1 % a step) from ``start``."""
    a = 0.99 * np.array([[np.cos(0.2), -np.sin(0.2)], [np.sin(0.2), np.cos(0.2)]])
    x = [np.asarray(start, dtype=float)]
    for _ in range(99):
        x.append(a @ x[-1])
    return dataclasses.replace(Dataset.from_arrays(np.array(x), dt=0.1, variables=["x", "y"]),
                               source="held.csv")


def test_the_energy_is_of_the_run_the_table_scores_against_the_held_out_data():
    """The energy part simulated 2,000 steps of its own from the last trial of --data; it now
    draws score's run (from the first trial of --test, max(samples, 10,000) steps, simulated
    once per model for the table and every figure) and the energy of that trial beside it."""
    from dynid.api import score_free_run

    data, test = rotation_data(), held_out([0.0, 2.0])
    models = [("a.dynid", fitted(WithEnergy, data)), ("b.dynid", fitted(WithEnergy, data))]
    calls = []
    for _, model_file in models:
        model, simulate = model_file.model, model_file.model.simulate

        def counting(history, steps, *args, simulate=simulate, **kwargs):
            calls.append(steps)
            return simulate(history, steps, *args, **kwargs)

        model.simulate = counting
    page = build_report(models, [], data, test=test)
    check_page(page)
    assert [steps for steps in calls if steps > 1000] == [10_000, 10_000]  # one run per model
    model, trial = models[0][1].model, test.trials[0]
    path = np.vstack([trial.x[:1], score_free_run(model, test).states])
    energy = 0.5 * np.sum(path**2, axis=1)
    # The map shrinks every state by 0.99 a step: H by 0.99^2, from H = 2 at the start.
    np.testing.assert_allclose(energy[:200], 2.0 * 0.99 ** (2 * np.arange(200)), rtol=1e-9)
    plot = line_plot([Series("data", trial.t, 0.5 * np.sum(trial.x**2, axis=1)),
                      Series("model", trial.t[0] + np.arange(path.shape[0]) * 0.1, energy, dashed=True)],
                     title="energy of a free run", xlabel="t", ylabel="H")
    assert plot in page
    assert escape("Dashed: the model's learned energy H along the free run dynid score scores: "
                  "10,000 steps from the first 1 sample(s) of the first trial of held.csv: over "
                  f"{fmt(1000.0)} time units from {fmt(2.0)} to {fmt(energy[-1])}") in page
    assert escape("Solid: H of that trial's samples (the --test data)") in page


def test_without_data_the_energy_is_of_a_run_from_off_the_mean_said_so():
    model_file = fitted(WithEnergy, rotation_data())
    page = build_report([("m.dynid", model_file)], [])
    check_page(page)
    assert escape("a free run of 2,000 steps of the model's own from one standard deviation off "
                  "the training data's mean in every variable (no --data or --test") in page


def test_a_diverging_run_is_drawn_up_to_where_it_diverges():
    data = rotation_data()
    model_file = fitted(WithEnergy, data)
    model_file.model.A_ = model_file.model.A_ * 1.2  # spirals outwards
    page = build_report([("m.dynid", model_file)], [], data)
    check_page(page)
    start = page.index("<h3>Energy")
    part = page[start:page.index("</p>", start)]
    assert "The free run diverges at step" in part and "nan" not in part.lower()
