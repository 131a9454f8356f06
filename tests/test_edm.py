"""The ``edm`` backend on systems whose answer is known: a chaotic map, a linear AR process and
Lorenz-63 seen through one coordinate."""

from __future__ import annotations

import numpy as np
import pytest

from dynid import api
from dynid.data.dataset import Dataset
from dynid.models.edm import embed, simplex_increments, smap_increments
from dynid.systems import simulate


def series(x: np.ndarray, name: str = "x", dt: float = 1.0) -> Dataset:
    return Dataset.from_arrays(x[:, None], t=dt * np.arange(len(x)), variables=[name])


@pytest.fixture(scope="module")
def logistic() -> Dataset:
    """x_{t+1} = 3.9 x_t (1 - x_t): chaotic, one-dimensional, strongly nonlinear."""
    x = np.empty(1000)
    x[0] = 0.4
    for t in range(999):
        x[t + 1] = 3.9 * x[t] * (1.0 - x[t])
    return series(x)


@pytest.fixture(scope="module")
def ar2() -> Dataset:
    """A stable linear AR(2) with unit innovations: the best predictor is global and linear."""
    rng = np.random.default_rng(0)
    y = np.zeros(1500)
    for t in range(2, len(y)):
        y[t] = 0.6 * y[t - 1] - 0.3 * y[t - 2] + rng.standard_normal()
    return series(y, "y")


@pytest.fixture(scope="module")
def lorenz_x() -> Dataset:
    sim = simulate("lorenz", n=3000, dt=0.01)
    return series(sim.x[:, 0], "x", dt=0.01)


def test_simplex_predicts_the_logistic_map_one_step_ahead(logistic):
    model = api.fit(logistic, "edm", ["method=simplex"], seed=0).model
    assert model.metrics_["leave_out_rho"] > 0.95
    assert model.E_ == 1  # the map is a function of the current value alone
    assert model.metrics_["theta"] is None


def test_smap_chooses_a_local_map_for_nonlinear_data(logistic):
    model = api.fit(logistic, "edm", ["E=1"], seed=0).model
    assert model.theta_ > 0
    skills = model.metrics_["theta_skill"]
    assert skills[f"{model.theta_:g}"] > skills["0"] + 0.05  # far better than a global line
    assert model.metrics_["leave_out_rho"] > 0.95


def test_smap_chooses_a_global_linear_map_for_linear_data(ar2):
    model = api.fit(ar2, "edm", ["E=2", "tau=1"], seed=0).model
    assert model.theta_ <= 0.1
    # A global linear S-map is the least-squares AR(2): its forecast is the conditional mean, up
    # to the coefficients' sampling error (about 0.025 each from 1500 samples).
    history = ar2.trials[0]
    prediction = model.simulate(history.slice(0, 1000), 1)[0, 0]
    expected = 0.6 * history.x[999, 0] - 0.3 * history.x[998, 0]
    assert prediction == pytest.approx(expected, abs=0.15)


def test_one_coordinate_of_lorenz_needs_and_gets_an_embedding(lorenz_x):
    model = api.fit(lorenz_x, "edm", ["method=simplex"], seed=0).model
    skills = model.metrics_["simplex_skill"]
    assert model.E_ >= 2 and skills["1,1"] < 0.5 < skills[f"{model.E_},{model.tau_}"]
    assert model.metrics_["leave_out_rho"] > 0.95
    assert model.history_length == (model.E_ - 1) * model.tau_ + 1
    # A forecast uses the last (E - 1) tau + 1 rows: earlier ones change nothing.
    history = lorenz_x.trials[0].slice(0, 2000)
    changed = history.x.copy()
    changed[: -model.history_length] += 5.0
    from dynid.data.dataset import Trial

    np.testing.assert_array_equal(model.simulate(Trial(history.t, changed), 20),
                                  model.simulate(history, 20))
    truth = lorenz_x.trials[0].x[2000:2020]
    spread = lorenz_x.trials[0].x.std()
    assert np.abs(model.simulate(history, 20) - truth).max() < 0.02 * spread


def test_a_multivariate_embedding_has_every_variables_lags():
    z = np.arange(20.0).reshape(10, 2)
    states = embed(z, np.array([4, 9]), E=3, tau=2)
    np.testing.assert_array_equal(states[0], [8, 9, 4, 5, 0, 1])
    np.testing.assert_array_equal(states[1], [18, 19, 14, 15, 10, 11])


def test_simplex_and_smap_reproduce_a_linear_map_exactly_where_it_is_linear():
    rng = np.random.default_rng(1)
    library = rng.uniform(-1, 1, (400, 2))
    increments = library @ np.array([[0.1, -0.2], [0.05, 0.3]])
    queries = rng.uniform(-0.5, 0.5, (20, 2))
    exact = queries @ np.array([[0.1, -0.2], [0.05, 0.3]])
    for theta in (0.0, 2.0):
        np.testing.assert_allclose(smap_increments(library, increments, queries, theta), exact,
                                   atol=1e-6)
    # Simplex averages neighbours: right to within the neighbourhood's size.
    assert np.abs(simplex_increments(library, increments, queries) - exact).max() < 0.05


def test_bad_settings_are_refused():
    from dynid.errors import UsageError

    with pytest.raises(UsageError, match="method"):
        api.fit(series(np.arange(50.0)), "edm", ["method=knn"])
    with pytest.raises(UsageError, match="theta"):
        api.fit(series(np.arange(50.0)), "edm", ["theta=-1"])
    from dynid.errors import DataError

    # E = 3, tau = 4 span 8 samples: a trial needs 4 (8 + 1) = 36, one of 35 is refused.
    with pytest.raises(DataError, match=r"4 \(\(E - 1\) tau \+ 1\) = 36 samples; the longest has 35"):
        api.fit(series(np.sin(np.arange(35.0))), "edm", ["E=3", "tau=4"])
    with pytest.raises(DataError, match="more samples than its embedding has coordinates"):
        api.fit(series(np.sin(np.arange(36.0))), "edm", ["E=3", "tau=4"])  # past that check
