"""Lyapunov spectra by the QR method (dynid.metrics.lyapunov): the Hénon map and Lorenz-63 against
their published exponents, the catalogue's exponents against its own equations, and fitted
models (``api.lyapunov_scores``) against the system they were fitted to."""

from __future__ import annotations

import numpy as np
import pytest

from dynid import api
from dynid.data.dataset import Dataset
from dynid.metrics.lyapunov import lyapunov_spectrum
from dynid.models.base import Backend
from dynid.systems import SYSTEMS, rhs, simulate

LORENZ = SYSTEMS["lorenz"].lyapunov  # (0.9056, 0, -14.5723)
HENON_A, HENON_B = 1.4, 0.3


def rk4_map(name: str, dt: float):
    """The catalogued flow ``name``'s one-step RK4 map on states (n, d)."""
    f = rhs(name)

    def step(x: np.ndarray) -> np.ndarray:
        y = x.T
        k1 = f(0, y)
        k2 = f(0, y + dt / 2 * k1)
        k3 = f(0, y + dt / 2 * k2)
        k4 = f(0, y + dt * k3)
        return (y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)).T

    return step


def henon(x: np.ndarray) -> np.ndarray:
    return np.stack([1.0 - HENON_A * x[:, 0] ** 2 + x[:, 1], HENON_B * x[:, 0]], axis=1)


def henon_jacobian(x: np.ndarray) -> np.ndarray:
    rows = np.zeros((len(x), 2, 2))
    rows[:, 0, 0] = -2.0 * HENON_A * x[:, 0]
    rows[:, 0, 1] = 1.0
    rows[:, 1, 0] = HENON_B
    return rows


def test_henon_map_has_its_published_exponents_and_exact_sum():
    spectrum = lyapunov_spectrum(henon, np.full((4, 2), 0.1), 1.0, 5000,
                                 jacobian=henon_jacobian, transient=100)
    # Published: 0.41922 and log(0.3) - 0.41922; the sum is log|det J| = log(b) exactly.
    np.testing.assert_allclose(spectrum.exponents, [0.41922, np.log(HENON_B) - 0.41922], atol=5e-3)
    assert spectrum.exponents.sum() == pytest.approx(np.log(HENON_B), abs=1e-9)
    assert (spectrum.standard_error < 5e-3).all()
    # Finite differences of the map agree with the analytic Jacobian.
    by_differences = lyapunov_spectrum(henon, np.full((4, 2), 0.1), 1.0, 5000, transient=100)
    np.testing.assert_allclose(by_differences.exponents, spectrum.exponents, atol=1e-4)


def test_lorenz_spectrum_from_the_true_map_within_five_percent():
    start = np.random.default_rng(0).normal([0.0, 0.0, 25.0], 8.0, (8, 3))
    spectrum = lyapunov_spectrum(rk4_map("lorenz", 0.01), start, 0.01, 5000, transient=1000)
    assert spectrum.exponents[0] == pytest.approx(LORENZ[0], rel=0.05)
    assert abs(spectrum.exponents[1]) < 0.05
    assert spectrum.exponents[2] == pytest.approx(LORENZ[2], rel=0.05)
    # The divergence of Lorenz's field is -(sigma + 1 + beta) everywhere.
    assert spectrum.exponents.sum() == pytest.approx(-(10 + 1 + 8 / 3), rel=0.005)
    assert spectrum.kaplan_yorke_dimension == pytest.approx(2.06, abs=0.02)
    # The largest exponent alone: one direction is enough.
    top = lyapunov_spectrum(rk4_map("lorenz", 0.01), start, 0.01, 5000, count=1, transient=1000)
    assert top.largest == pytest.approx(spectrum.largest, rel=0.02)


def test_a_stable_fixed_point_has_its_eigenvalues_log_moduli():
    matrix = np.array([[0.5, 0.2], [0.0, -0.25]])
    spectrum = lyapunov_spectrum(lambda x: x @ matrix.T, np.ones(2), 0.1, 100)
    np.testing.assert_allclose(spectrum.exponents, np.log([0.5, 0.25]) / 0.1, rtol=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="count"):
        lyapunov_spectrum(henon, np.zeros(2), 1.0, 100, count=3)
    with pytest.raises(ValueError, match="dt"):
        lyapunov_spectrum(henon, np.zeros(2), 0.0, 100)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, spec in SYSTEMS.items() if spec.lyapunov])
def test_catalogued_exponents_match_the_catalogued_equations(name):
    spec = SYSTEMS[name]
    dt = min(spec.dt, 0.1 / max(abs(v) for v in spec.lyapunov))  # RK4 well inside stability
    start = simulate(name, n=2000).x[-1] + 1e-3 * np.random.default_rng(0).standard_normal((4, 3))
    steps = int(min(400 / spec.lyapunov[0], 2000) / dt)  # up to 400 Lyapunov times per orbit
    spectrum = lyapunov_spectrum(rk4_map(name, dt), start, dt, steps, transient=int(20 / dt))
    published = np.array(spec.lyapunov)
    # Each within 5 %, the zero exponent within 5 % of the largest.
    tolerance = 0.05 * np.abs(published) + 0.05 * published[0]
    assert np.all(np.abs(spectrum.exponents - published) < tolerance), spectrum.exponents


def fitted_on_lorenz(model: str, params: list[str]) -> tuple[Backend, Dataset]:
    sim = simulate("lorenz", n=5000, dt=0.01)
    data = Dataset.from_arrays(sim.x, t=sim.t, variables=list(sim.variables))
    return api.fit(data, model, params, seed=0).model, data


def test_ngrc_fitted_on_clean_lorenz_has_lorenz_exponents():
    # The paper's k = 2, s = 1 (the default chooses them): a known 6-D state.
    model, data = fitted_on_lorenz("ngrc", ["delays=2", "skip=1"])
    scores = api.lyapunov_scores(model, data, steps=5000)
    exponents = scores["lyapunov_exponents"]
    assert scores["lyapunov_state_dimension"] == 6  # two delays of three variables
    # One orbit of 50 time units: a standard error of about 0.1 on the largest exponent.
    assert max(scores["lyapunov_standard_error"]) < 0.15
    assert exponents[0] == pytest.approx(LORENZ[0], rel=0.1)
    assert abs(exponents[1]) < 0.1
    assert exponents[2] == pytest.approx(LORENZ[2], rel=0.05)


@pytest.mark.parametrize("params", [
    ["units=60", "squared_readout=false"],
    ["units=60", "squared_readout=true"],
    # A committee of three 21-unit reservoirs (odd, so members' even units are not every
    # other unit overall), settings given to keep the fit quick.
    ["units=21", "members=3", "squared_readout=true", "spectral_radius=0.9", "leak=0.3",
     "input_scaling=0.5"],
])
def test_esn_analytic_jacobian_is_the_derivative_of_its_map(params):
    model, data = fitted_on_lorenz("esn", params)
    mapping = model.step_map(data.trials[0])
    states = mapping.state + 0.01 * np.random.default_rng(0).standard_normal((2, mapping.state.size))
    h = 1e-6
    columns = [(mapping.step(states + h * e) - mapping.step(states)) / h
               for e in np.eye(mapping.state.size)]
    np.testing.assert_allclose(mapping.jacobian(states), np.stack(columns, axis=-1), atol=1e-4)
    # Its step continues a forecast exactly (the last d coordinates are the standardised state).
    ahead = model.simulate(data.trials[0], 2)
    state = mapping.step(mapping.step(mapping.state[None]))[0]
    np.testing.assert_allclose(state[-3:] * model.scale_ + model.mean_, ahead[-1], rtol=1e-10)


@pytest.mark.slow
def test_symbolic_fitted_on_clean_lorenz_has_lorenz_exponents():
    model, data = fitted_on_lorenz("symbolic", ["library=poly2", "ensemble=0"])
    scores = api.lyapunov_scores(model, data, steps=20_000)
    np.testing.assert_allclose(scores["lyapunov_exponents"], LORENZ, atol=0.05 * abs(LORENZ[2]))
    assert scores["lyapunov_exponents"][0] == pytest.approx(LORENZ[0], rel=0.05)
