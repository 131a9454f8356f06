"""Time-resolved causality (--method dynamic) on a coupling that switches on halfway, and the
change-point detector it uses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter1d

from dynid.causal import CausalSettings, discover, granger
from dynid.causal.changepoints import change_points, noise_std
from dynid.causal.dynamic import DynamicCausality, DynamicParams
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError

T = 2000
DT = 0.01  # time stamps in seconds, so times are checked in data units, not samples
SWITCH = T // 2  # sample at which x starts to drive y


def switching_system(seed: int, n: int = T, *, on_first: bool = False) -> np.ndarray:
    """(n, 2) [x, y]: x AR(1); y_t = 0.5 y_{t-1} + c(t) x_{t-1} + e, c = 0 then 0.8 from n/2
    (0.8 then 0 with ``on_first``)."""
    noise = np.random.default_rng(seed).standard_normal((n, 2))
    x = np.zeros((n, 2))
    for t in range(1, n):
        coupling = 0.8 if (t >= n // 2) != on_first else 0.0
        x[t, 0] = 0.5 * x[t - 1, 0] + noise[t, 0]
        x[t, 1] = 0.5 * x[t - 1, 1] + coupling * x[t - 1, 0] + noise[t, 1]
    return x


@pytest.fixture(scope="module")
def switching() -> Dataset:
    return Dataset.from_arrays(switching_system(3), dt=DT, variables=["x", "y"])


SETTINGS = CausalSettings(max_lag=2, seed=0)
ESTIMATORS = {
    "windowed": DynamicParams(estimator="windowed"),
    "perturbation": DynamicParams(estimator="perturbation"),
    "perturbation-local": DynamicParams(estimator="perturbation", predictor="local_var"),
}


@pytest.fixture(scope="module", params=list(ESTIMATORS))
def result(request, switching):
    return DynamicCausality(ESTIMATORS[request.param]).discover(switching, SETTINGS)


def test_switch_shows_in_strength_and_change_points(result):
    dynamic = result.extra["dynamic"]
    times, strength = dynamic["times"], dynamic["strength"]
    switch_time = SWITCH * DT
    # Leave out the grid times whose windows / kernels straddle the switch.
    before = strength[times < 0.8 * switch_time]
    after = strength[times > 1.2 * switch_time]
    high = after[:, 0, 1].mean()
    assert before[:, 0, 1].mean() < 0.3 * high
    assert strength[:, 1, 0].mean() < 0.3 * high
    assert strength[:, 1, 0].max() < 0.6 * high  # y -> x low throughout, not just on average
    on = [c for c in dynamic["change_points"] if (c["source"], c["target"]) == ("x", "y")]
    assert len(on) == 1
    assert abs(on[0]["time"] - switch_time) < 0.1 * T * DT
    assert on[0]["after"] > 3 * on[0]["before"]
    for change in dynamic["change_points"]:
        if change["source"] == "y":  # a y -> x change, if any, is a small wobble
            assert abs(change["after"] - change["before"]) < 0.3 * (on[0]["after"] - on[0]["before"])


def test_output_shapes_and_static_summary(result, switching):
    dynamic = result.extra["dynamic"]
    n_times = dynamic["times"].shape[0]
    assert dynamic["strength"].shape == (n_times, 2, 2)
    assert np.all(np.diff(dynamic["times"]) > 0)
    assert np.all(dynamic["trial"] == 0)
    assert np.all(dynamic["strength"][:, [0, 1], [0, 1]] == 0)
    assert np.all(dynamic["strength"] >= 0)
    np.testing.assert_allclose(result.score_matrix, dynamic["strength"].mean(axis=0))
    static = granger(switching, max_lag=2)
    assert result.edges == static.edges
    np.testing.assert_array_equal(result.adjacency, static.adjacency)
    assert result.method == "dynamic"
    # The JSON writer takes it as it is.
    document = result.to_json_dict()
    assert len(document["dynamic"]["strength"]) == n_times


def test_default_resolution(switching):
    graph = DynamicCausality(DynamicParams(estimator="windowed")).discover(switching, SETTINGS)
    assert graph.extra["window"] == T // 10 and graph.extra["step"] == T // 100
    # Windows centred in the recording, stamped at their centres.
    times = graph.extra["dynamic"]["times"]
    assert times[0] == pytest.approx((T // 10 - 1) * DT / 2)
    assert times[-1] == pytest.approx((T - 1) * DT - times[0])


def test_perturbation_is_repeatable_with_a_seed(switching):
    method = DynamicCausality(DynamicParams(estimator="perturbation", repeats=3))
    first = method.discover(switching, SETTINGS).extra["dynamic"]["strength"]
    again = method.discover(switching, SETTINGS).extra["dynamic"]["strength"]
    other = method.discover(switching, CausalSettings(max_lag=2, seed=1)).extra["dynamic"]["strength"]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_trials_are_analysed_separately():
    trials = [switching_system(5, n=1000), switching_system(6, n=1000, on_first=True)]
    data = Dataset.from_arrays(trials, dt=DT, variables=["x", "y"])
    graph = DynamicCausality(DynamicParams(estimator="perturbation")).discover(data, SETTINGS)
    dynamic = graph.extra["dynamic"]
    assert set(dynamic["trial"]) == {0, 1}
    changes = [c for c in dynamic["change_points"] if (c["source"], c["target"]) == ("x", "y")]
    # One switch per trial, on in the first and off in the second; both trials start at t = 0.
    assert len(changes) == 2
    assert changes[0]["after"] > changes[0]["before"]
    assert changes[1]["after"] < changes[1]["before"]
    for change in changes:
        assert abs(change["time"] - 500 * DT) < 100 * DT


def test_windows_the_base_cannot_test_are_nan():
    x = switching_system(7, n=600)
    x[:150, 0] = 1.0  # x is constant in the first windows only
    data = Dataset.from_arrays(x, variables=["x", "y"])
    graph = discover(data, "dynamic", ["window=100", "step=25"], max_lag=2)
    strength = graph.extra["dynamic"]["strength"]
    assert np.isnan(strength[0, 0, 1]) and np.isfinite(strength[-1, 0, 1])
    assert np.isfinite(graph.score_matrix).all()


@pytest.mark.parametrize(
    "params, error",
    [
        (["window=2"], UsageError),
        (["estimator=spectral"], UsageError),
        (["base=dynamic"], UsageError),
        (["base=auto"], UsageError),
        (["base=nonsense"], UsageError),
        (["window=5000"], DataError),
    ],
)
def test_bad_options(params, error, switching):
    with pytest.raises(error):
        discover(switching, "dynamic", params, max_lag=2)


def test_too_short_for_the_default_window():
    data = Dataset.from_arrays(np.random.default_rng(0).standard_normal((30, 3)))
    with pytest.raises(DataError, match="window"):
        discover(data, "dynamic", max_lag=2)


# -- change points --------------------------------------------------------------------------------
def test_finds_breaks_in_a_piecewise_constant_series():
    for seed in range(10):
        y = np.random.default_rng(seed).standard_normal(600)
        y[200:] += 1.5
        y[420:] -= 2.5
        found = change_points(y)
        assert [c.index for c in found] == pytest.approx([200, 420], abs=5)
        assert found[0].before == pytest.approx(0.0, abs=0.25)
        assert found[0].after == pytest.approx(1.5, abs=0.25)
        assert found[1].after == pytest.approx(-1.0, abs=0.25)


def test_no_breaks_in_a_constant_mean_series():
    false_alarms = sum(
        bool(change_points(np.random.default_rng(seed).standard_normal(500))) for seed in range(100)
    )
    assert false_alarms <= 3
    assert change_points(np.full(100, 2.0)) == []


def test_smoothed_noise_needs_its_correlation():
    s = 10.0  # Gaussian smoothing sigma in samples
    correlation = 2 * math.sqrt(math.pi) * s
    series = [
        gaussian_filter1d(np.random.default_rng(seed).standard_normal(2000), s) for seed in range(30)
    ]
    told = sum(bool(change_points(y, correlation=correlation)) for y in series)
    untold = sum(bool(change_points(y)) for y in series)
    assert told <= 2 and untold >= 20


def test_noise_std_ignores_mean_shifts():
    y = np.random.default_rng(1).standard_normal(2000) * 0.5
    y[1000:] += 10.0
    assert noise_std(y) == pytest.approx(0.5, rel=0.1)
