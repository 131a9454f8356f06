"""The sindy backend against systems whose equations are known exactly."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from dynid.data.dataset import Dataset, Trial
from dynid.errors import ComputationError, DataError, UsageError
from dynid.models.sindy import SINDy, SINDyParams, TermLibrary

SIGMA, RHO, BETA = 10.0, 28.0, 8.0 / 3.0
DT = 0.002
# The Lorenz-63 equations as {variable: {pysindy feature: coefficient}} over x0=x, x1=y, x2=z.
LORENZ = {
    "x": {"x0": -SIGMA, "x1": SIGMA},
    "y": {"x0": RHO, "x1": -1.0, "x0 x2": -1.0},
    "z": {"x2": -BETA, "x0 x1": 1.0},
}


def lorenz(t: float, s: np.ndarray) -> list[float]:
    x, y, z = s
    return [SIGMA * (y - x), x * (RHO - z) - y, x * y - BETA * z]


def integrate(f, x0, t: np.ndarray) -> np.ndarray:
    """(n, d) exact-to-1e-10 samples of the ODE f at times t."""
    sol = solve_ivp(f, (t[0], t[-1]), x0, method="DOP853", t_eval=t, rtol=1e-10, atol=1e-12)
    return sol.y.T


def truth_matrix(model: SINDy, truth: dict[str, dict[str, float]]) -> np.ndarray:
    names = model.feature_names_
    matrix = np.zeros_like(model.coefficients_)
    for row, variable in enumerate(model.variables_):
        for feature, value in truth[variable].items():
            matrix[row, names.index(feature)] = value
    return matrix


def assert_recovers(model: SINDy, truth: dict[str, dict[str, float]], rtol: float) -> None:
    """Exact support, and every true coefficient within rtol relative error."""
    expected = truth_matrix(model, truth)
    np.testing.assert_array_equal(model.coefficients_ != 0, expected != 0)
    support = expected != 0
    error = np.abs(model.coefficients_[support] - expected[support]) / np.abs(expected[support])
    assert error.max() < rtol, error


@pytest.fixture(scope="module")
def lorenz_data() -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(5000) * DT
    return t, integrate(lorenz, [-8.0, 8.0, 27.0], t)


@pytest.fixture(scope="module")
def lorenz_model(lorenz_data) -> SINDy:
    t, x = lorenz_data
    return SINDy().fit(Dataset.from_arrays(x, t=t, variables=["x", "y", "z"]))


def test_lorenz_default_recovers_every_coefficient_with_exact_support(lorenz_model):
    assert_recovers(lorenz_model, LORENZ, rtol=0.01)
    assert lorenz_model.metrics_["n_terms"] == 7
    assert lorenz_model.metrics_["n_features"] == 10
    assert min(lorenz_model.metrics_["r2"].values()) > 0.9999


def test_lorenz_with_sr3(lorenz_data):
    t, x = lorenz_data
    params = SINDyParams(optimizer="sr3", alpha=0.5)
    model = SINDy(params).fit(Dataset.from_arrays(x, t=t, variables=["x", "y", "z"]))
    assert_recovers(model, LORENZ, rtol=0.01)


def test_simulate_tracks_lorenz_for_half_a_time_unit(lorenz_model, lorenz_data):
    t, x = lorenz_data
    steps = round(0.5 / DT)
    forecast = lorenz_model.simulate(Trial(t[:1], x[:1]), steps)
    assert forecast.shape == (steps, 3)
    assert np.max(np.abs(forecast - x[1 : steps + 1])) < 1e-3 * np.std(x)


def test_noisy_lorenz_with_smoothed_derivatives(lorenz_data):
    t, x = lorenz_data
    noisy = x + 0.01 * np.random.default_rng(0).normal(size=x.shape)
    params = SINDyParams(differentiation="smoothed_finite_difference")
    model = SINDy(params).fit(Dataset.from_arrays(noisy, t=t, variables=["x", "y", "z"]))
    # Worst error over seeds 0-5 was 0.5 %; at noise 0.1 a constant of about the threshold
    # (0.1) enters dz/dt, so this level is where exact support is still expected.
    assert_recovers(model, LORENZ, rtol=0.02)


def test_multiple_trials(lorenz_data):
    t = np.arange(1500) * DT
    starts = ([-8.0, 8.0, 27.0], [1.0, 1.0, 1.0], [5.0, -5.0, 20.0])
    data = Dataset.from_arrays([integrate(lorenz, s, t) for s in starts], dt=DT,
                               variables=["x", "y", "z"])
    assert data.n_trials == 3
    assert_recovers(SINDy().fit(data), LORENZ, rtol=0.01)


def test_irregular_time_stamps():
    rng = np.random.default_rng(0)
    t = np.concatenate([[0.0], np.cumsum(DT * rng.uniform(0.5, 1.5, 4999))])
    data = Dataset.from_arrays(integrate(lorenz, [-8.0, 8.0, 27.0], t), t=t,
                               variables=["x", "y", "z"])
    assert data.dt is None
    assert_recovers(SINDy().fit(data), LORENZ, rtol=0.01)


def forced_oscillator(t: np.ndarray) -> np.ndarray:
    return np.sin(1.3 * t) + 0.5 * np.cos(0.7 * t)


def test_input_coefficient_recovered_and_used_in_simulate():
    # x' = y, y' = -x - 0.2 y + 0.5 u: SINDYc with a polynomial library over (x, y, u).
    def f(t, s):
        return [s[1], -s[0] - 0.2 * s[1] + 0.5 * forced_oscillator(t)]

    dt = 0.01
    t = np.arange(3000) * dt
    x, u = integrate(f, [1.0, 0.0], t), forced_oscillator(t)
    data = Dataset.from_arrays(x, t=t, u=u, variables=["x", "y"], inputs=["u"])
    model = SINDy().fit(data)
    truth = {"x": {"x1": 1.0}, "y": {"x0": -1.0, "x1": -0.2, "u0": 0.5}}
    assert_recovers(model, truth, rtol=0.01)

    steps = 200
    forecast = model.simulate(Trial(t[:1], x[:1], u[:1, None]), steps, u[1 : steps + 1, None])
    assert np.max(np.abs(forecast - x[1 : steps + 1])) < 1e-3
    with pytest.raises(DataError):
        model.simulate(Trial(t[:1], x[:1], u[:1, None]), steps)


def test_fourier_library_recovers_pendulum():
    def f(t, s):
        return [s[1], -np.sin(s[0])]

    dt = 0.01
    t = np.arange(3000) * dt
    data = Dataset.from_arrays(integrate(f, [2.0, 0.0], t), t=t, variables=["theta", "omega"])
    model = SINDy(SINDyParams(library="polynomial+fourier", degree=1)).fit(data)
    truth = {"theta": {"x1": 1.0}, "omega": {"sin(1 x0)": -1.0}}
    assert_recovers(model, truth, rtol=0.01)


def test_discrete_logistic_map():
    r, x = 3.7, [0.3]
    for _ in range(300):
        x.append(r * x[-1] * (1.0 - x[-1]))
    data = Dataset.from_arrays(np.array(x), dt=1.0, variables=["p"])
    model = SINDy(SINDyParams(discrete=True)).fit(data)
    assert_recovers(model, {"p": {"x0": r, "x0^2": -r}}, rtol=1e-6)
    forecast = model.simulate(Trial(np.zeros(1), np.array([[x[0]]])), 5)
    np.testing.assert_allclose(forecast[:, 0], x[1:6], rtol=1e-5)
    assert model.equations()[0][0] == "p"


def test_discrete_map_with_input():
    # x[k+1] = 0.5 x[k] + u[k]: the first forecast step uses the last history input.
    u = np.random.default_rng(2).normal(size=100)
    x = np.zeros(100)
    for k in range(99):
        x[k + 1] = 0.5 * x[k] + u[k]
    data = Dataset.from_arrays(x, u=u, dt=1.0, variables=["x"], inputs=["u"])
    model = SINDy(SINDyParams(discrete=True, degree=1)).fit(data)
    assert_recovers(model, {"x": {"x0": 0.5, "u0": 1.0}}, rtol=1e-9)
    history = Trial(np.arange(50.0), x[:50, None], u[:50, None])
    forecast = model.simulate(history, 10, u[50:60, None])
    np.testing.assert_allclose(forecast[:, 0], x[50:60], rtol=1e-9, atol=1e-12)


def test_restore_refuses_mismatched_arrays(lorenz_model):
    arrays = lorenz_model.arrays()
    kwargs = {"variables": ("x", "y", "z"), "inputs": (), "dt": DT}
    with pytest.raises(DataError, match="feature names"):
        SINDy.restore(SINDyParams(), dict(arrays, feature_names=arrays["feature_names"][::-1]),
                      **kwargs)
    with pytest.raises(DataError):  # degree 3 library has more columns than the stored matrix
        SINDy.restore(SINDyParams(degree=3), arrays, **kwargs)
    with pytest.raises(DataError, match="lacks"):
        SINDy.restore(SINDyParams(), {"coefficients": arrays["coefficients"]}, **kwargs)


def test_blow_up_raises_computation_error():
    # x' = x^2 from x(0) = 1 reaches infinity at t = 1.
    library = TermLibrary(SINDyParams(), 1, 0)
    coefficients = np.zeros((1, len(library)))
    coefficients[0, library.names.index("x0^2")] = 1.0
    model = SINDy.restore(
        SINDyParams(),
        {"coefficients": coefficients, "feature_names": np.array(library.names, dtype="S")},
        variables=("x",), inputs=(), dt=0.1,
    )
    with pytest.raises(ComputationError, match="diverged"):
        model.simulate(Trial(np.zeros(1), np.ones((1, 1))), 20)


def test_term_library_matches_pysindy():
    import pysindy as ps

    z = np.random.default_rng(1).normal(size=(7, 3))
    for params in (SINDyParams(degree=3), SINDyParams(library="polynomial+fourier",
                                                      n_frequencies=2)):
        ours = TermLibrary(params, 2, 1)
        theirs = SINDy(params)._pysindy_model().feature_library.fit(z)
        assert theirs.get_feature_names(ours.coordinates) == ours.names
        np.testing.assert_allclose(ours(z), np.asarray(theirs.transform(z)), rtol=1e-13)


def test_too_short_data_is_a_data_error():
    with pytest.raises(DataError, match="shorter"):
        SINDy().fit(Dataset.from_arrays(np.zeros((3, 2)), dt=0.1))


@pytest.mark.parametrize(
    "assignment",
    ["degree=0", "n_frequencies=0", "threshold=-1", "alpha=-0.1", "library=spline"],
)
def test_bad_hyperparameters_are_usage_errors(assignment):
    with pytest.raises(UsageError):
        SINDyParams.parse([assignment])


def test_sr3_needs_positive_alpha():
    with pytest.raises(UsageError, match="alpha"):
        SINDyParams.parse(["optimizer=sr3", "alpha=0"])
    assert SINDyParams.parse(["optimizer=sr3", "alpha=0.5"]).alpha == 0.5


def test_importing_the_backend_does_not_import_pysindy_or_sympy():
    code = (
        "import sys, dynid.models.sindy, dynid.symbolic; "
        "print('pysindy' in sys.modules, 'sympy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
