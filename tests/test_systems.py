"""The simulated-systems catalogue: shapes, determinism, noise, and each system being itself."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

from dynid.errors import UsageError
from dynid.systems import (
    SYSTEMS,
    VAR_BURN_IN,
    linear_matrix,
    oscillator_forcing,
    rhs,
    simulate,
    var_coefficients,
    var_graph,
)

NAMES = list(SYSTEMS)
ODES = [name for name, spec in SYSTEMS.items() if spec.kind == "ode"]
REQUIRED = {"lorenz", "rossler", "vanderpol", "lotka-volterra", "duffing", "lorenz96", "linear",
            "forced-oscillator", "var", "logistic-coupled", "chen", "sprott-b", "sprott-c",
            "double-scroll"}


def test_catalogue_has_the_contracted_systems_with_consistent_specs():
    assert REQUIRED <= set(SYSTEMS)
    for name, spec in SYSTEMS.items():
        assert spec.name == name
        assert spec.kind in {"ode", "map"}
        assert spec.description and "\n" not in spec.description
        assert spec.reference
        assert len(spec.x0) == len(spec.variables)
        assert spec.dt > 0 and spec.n >= 2
        assert all(isinstance(v, float) for v in spec.params.values())
        if spec.lyapunov:  # a spectrum: one exponent per state, largest first, flows with a 0
            assert len(spec.lyapunov) == len(spec.variables)
            assert list(spec.lyapunov) == sorted(spec.lyapunov, reverse=True)
            assert spec.kind != "ode" or 0.0 in spec.lyapunov


@pytest.mark.parametrize("name", NAMES)
def test_defaults_simulate_with_the_right_shapes(name):
    spec = SYSTEMS[name]
    sim = simulate(name)
    assert sim.t.shape == (spec.n,)
    np.testing.assert_allclose(sim.t, np.arange(spec.n) * spec.dt)
    assert sim.t[0] == 0.0
    assert sim.x.shape == (spec.n, len(spec.variables))
    assert np.isfinite(sim.x).all()
    assert sim.variables == spec.variables and sim.inputs == spec.inputs
    if spec.inputs:
        assert sim.u.shape == (spec.n, len(spec.inputs)) and np.isfinite(sim.u).all()
    else:
        assert sim.u is None
    # A system that sits still identifies nothing.
    assert (sim.x.std(axis=0) > 1e-3).all()


@pytest.mark.parametrize("name", NAMES)
def test_rhs_maps_a_state_to_its_own_shape_also_batched(name):
    spec = SYSTEMS[name]
    d = 2 * len(spec.variables) if name == "var" else len(spec.variables)
    f = rhs(name)
    x = np.random.default_rng(0).uniform(0.1, 0.9, size=(d, 7))
    u = np.ones((len(spec.inputs), 7)) if spec.inputs else None
    batched = f(0.3, x, u)
    assert batched.shape == (d, 7)
    single = f(0.3, x[:, 2], None if u is None else u[:, 2])
    np.testing.assert_allclose(single, batched[:, 2], rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_is_bit_identical_and_seeds_differ_with_noise(name):
    first = simulate(name, n=300, noise=0.05, seed=7)
    again = simulate(name, n=300, noise=0.05, seed=7)
    other = simulate(name, n=300, noise=0.05, seed=8)
    assert np.array_equal(first.x, again.x) and np.array_equal(first.t, again.t)
    assert not np.array_equal(first.x, other.x)


@pytest.mark.parametrize("name", ["lorenz", "var", "logistic-coupled", "forced-oscillator"])
def test_noise_is_the_requested_fraction_of_each_variables_std(name):
    clean = simulate(name, seed=3)
    noisy = simulate(name, noise=0.05, seed=3)
    # The innovations of `var` must not change when observation noise is added.
    ratio = (noisy.x - clean.x).std(axis=0) / clean.x.std(axis=0)
    # n >= 2000 samples: the std estimate is within ~2% of the truth; 10% leaves a wide margin.
    np.testing.assert_allclose(ratio, 0.05, rtol=0.1)
    if clean.u is not None:
        assert np.array_equal(noisy.u, clean.u)


@pytest.mark.parametrize("name", ODES)
def test_ode_trajectory_follows_its_rhs(name):
    sim = simulate(name, n=400)
    f = rhs(name)
    u = None if sim.u is None else sim.u[2:-2].T
    # Fourth-order central differences: error ~(omega dt)^4 ~ 1e-4, while a
    # coefficient wrong by 1% would be off by ~1e-2.
    x = sim.x
    slope = (x[:-4] - 8 * x[1:-3] + 8 * x[3:-1] - x[4:]) / (12 * SYSTEMS[name].dt)
    expected = f(sim.t[2:-2], x[2:-2].T, u).T
    scale = np.abs(expected).max(axis=0)
    # A stencil across a kink of a piecewise-linear field measures no derivative; skip those.
    smooth = ~_stencil_crosses_a_kink(name, x)
    assert smooth.mean() > 0.8
    assert (np.abs(slope - expected)[smooth].max(axis=0) < 1e-3 * scale).all()


def _stencil_crosses_a_kink(name: str, x: np.ndarray) -> np.ndarray:
    """(n - 4,) True where the 5-sample stencil centred on a sample spans a breakpoint of a
    piecewise-linear right-hand side (Chua's diode bends at x = +-1); False elsewhere."""
    if name != "double-scroll":
        return np.zeros(len(x) - 4, dtype=bool)
    side = np.sign(x[:, 0] - 1.0) + np.sign(x[:, 0] + 1.0)  # -2, 0 or 2 between the kinks
    windows = np.lib.stride_tricks.sliding_window_view(side, 5)
    return windows.min(axis=1) != windows.max(axis=1)


@pytest.mark.parametrize(
    ("name", "x", "expected"),
    [
        # Values worked out by hand from the published equations at the default parameters.
        ("lorenz", [1.0, 2.0, 3.0], [10.0, 23.0, -6.0]),
        ("rossler", [1.0, 2.0, 3.0], [-5.0, 1.4, -13.9]),
        ("lotka-volterra", [10.0, 5.0], [5.0, -3.75]),
        ("duffing", [2.0, 1.0], [1.0, -0.1 + 2.0 - 8.0]),
        # (x_{i+1} - x_{i-2}) x_{i-1} - x_i + 8 at x_i = i + 1, indices modulo 10.
        ("lorenz96", np.arange(1.0, 11.0), [-63, -1, 11, 13, 15, 17, 19, 21, 23, -65]),
        ("logistic-coupled", [0.5, 0.4], [0.95, 0.4 * (3.5 - 1.4 - 0.05)]),
        ("chen", [1.0, 2.0, 3.0], [35.0, -7.0 - 3.0 + 56.0, 2.0 - 9.0]),
        ("sprott-b", [1.0, 2.0, 3.0], [6.0, -1.0, -1.0]),
        ("sprott-c", [1.0, 2.0, 3.0], [6.0, -1.0, 0.0]),
        # Chua's diode g(x) = m0 x inside |x| <= 1, m1 x + (m1 - m0) sign(x) beyond.
        ("double-scroll", [0.5, 2.0, 3.0], [15.6 * (2.0 - 0.5 + 4.0 / 7.0), 1.5, -56.0]),
        ("double-scroll", [2.0, 2.0, 3.0], [15.6 * (2.0 - 2.0 + 13.0 / 7.0), 3.0, -56.0]),
    ],
)
def test_rhs_values_match_the_textbook_equations(name, x, expected):
    np.testing.assert_allclose(rhs(name)(0.0, np.array(x)), expected, rtol=1e-12, atol=1e-12)


def test_vanderpol_and_forced_oscillator_by_hand():
    # vanderpol: x' = y, y' = mu (1 - x^2) y - x with mu = 1
    np.testing.assert_allclose(rhs("vanderpol")(0.0, np.array([2.0, 1.0])), [1.0, -5.0])
    f = rhs("forced-oscillator")
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(f(0.0, x, np.array([0.5])), [2.0, -4.0 - 0.4 + 0.5])
    # Without u, the system's own input u(t) drives it.
    t = 1.7
    u = np.sin(0.7 * t) + np.sin(np.sqrt(2) * t) + np.sin(np.sqrt(7) * t)
    np.testing.assert_allclose(f(t, x), [2.0, -4.0 - 0.4 + u])
    sim = simulate("forced-oscillator", n=50)
    np.testing.assert_allclose(sim.u, oscillator_forcing(sim.t))
    np.testing.assert_array_equal(f(sim.t, sim.x.T), f(sim.t, sim.x.T, sim.u.T))
    sines = np.sin(np.outer(sim.t, [0.7, np.sqrt(2), np.sqrt(7)]))
    np.testing.assert_allclose(sim.u[:, 0], sines.sum(axis=1))


def test_lorenz_stays_on_its_attractor():
    sim = simulate("lorenz", n=10_000, dt=0.02)
    settled = sim.x[500:]
    assert (np.abs(settled[:, :2]) < 30).all()
    assert (settled[:, 2] > 0).all() and (settled[:, 2] < 55).all()
    # The long-run mean of z on the rho=28 attractor is 23.5-23.6; rho=27 gives 22.5, beta=3 22.9.
    assert 23.2 < settled[:, 2].mean() < 23.9
    # The attractor's two wings are visited about equally often.
    assert 0.4 < (settled[:, 0] > 0).mean() < 0.6


def test_lorenz96_size_and_initial_state_follow_the_parameters():
    spec = SYSTEMS["lorenz96"]
    assert spec.variables == tuple(f"x{i}" for i in range(10))
    assert spec.x0 == (8.01,) + (8.0,) * 9
    sim = simulate("lorenz96", n=20, params={"N": 6, "F": 5.0})
    assert sim.variables == tuple(f"x{i}" for i in range(6)) and sim.x.shape == (20, 6)
    np.testing.assert_allclose(sim.x[0], [5.01, 5, 5, 5, 5, 5])
    for bad in (3, 6.5):
        with pytest.raises(UsageError, match="'N'"):
            simulate("lorenz96", params={"N": bad})


def test_linear_matrix_has_the_designed_eigenvalues_and_mixes_states():
    params = {"damping1": 0.2, "omega1": 1.5, "damping2": 0.05, "omega2": 0.7}
    for p, designed in [
        (None, [-0.05 + 1j, -0.05 - 1j, -0.1 + 2.5j, -0.1 - 2.5j]),
        (params, [-0.2 + 1.5j, -0.2 - 1.5j, -0.05 + 0.7j, -0.05 - 0.7j]),
    ]:
        eig = np.linalg.eigvals(linear_matrix(p))
        np.testing.assert_allclose(np.sort_complex(eig), np.sort_complex(designed), atol=1e-12)
    a = linear_matrix()
    assert (np.abs(a) > 1e-3).all(), "every state should drive every other"


def test_linear_simulation_matches_the_matrix_exponential():
    sim = simulate("linear", n=200)
    a = linear_matrix()
    exact = np.stack([expm(a * t) @ np.array(SYSTEMS["linear"].x0) for t in sim.t])
    np.testing.assert_allclose(sim.x, exact, rtol=0, atol=1e-8)


def _companion(a):
    lags, d, _ = a.shape
    top = np.hstack(list(a))
    shift = np.hstack([np.eye(d * (lags - 1)), np.zeros((d * (lags - 1), d))])
    return np.vstack([top, shift])


def test_var_is_stable_and_its_graph_matches_its_coefficients():
    a = var_coefficients()
    assert a.shape == (2, 5, 5)
    assert np.abs(np.linalg.eigvals(_companion(a))).max() < 0.9
    from_coefficients = {
        (source, target, lag + 1)
        for lag, target, source in zip(*np.nonzero(a))
        if source != target
    }
    assert var_graph() == from_coefficients
    assert {(0, 1, 1), (1, 2, 2), (3, 4, 1), (0, 3, 2)} <= var_graph()
    assert (np.diagonal(a[0]) != 0).all(), "every variable has a lag-1 self loop"
    # Without coupling there are no cross edges, and the process stays stable at any coupling.
    assert var_graph({"coupling": 0.0}) == set()
    assert np.abs(np.linalg.eigvals(_companion(var_coefficients({"coupling": 5.0})))).max() < 1


def test_var_rhs_is_its_companion_step():
    state = np.arange(10.0)
    np.testing.assert_allclose(rhs("var")(0.0, state), _companion(var_coefficients()) @ state)


def test_var_regression_recovers_its_coefficients_in_the_stated_orientation():
    x = simulate("var", n=5000, seed=1).x
    # Least squares of x_t on [x_{t-1}, x_{t-2}]: standard error about 1/sqrt(n) = 0.014.
    design = np.hstack([x[1:-1], x[:-2]])
    coef, *_ = np.linalg.lstsq(design, x[2:], rcond=None)
    estimated = np.stack([coef[:5].T, coef[5:].T])
    np.testing.assert_allclose(estimated, var_coefficients(), atol=0.07)
    innovations = x[2:] - design @ coef
    np.testing.assert_allclose(innovations.std(axis=0), 1.0, rtol=0.05)


def test_var_sigma_scales_the_innovations_and_x0_washes_out():
    base = simulate("var", n=100, seed=2)
    np.testing.assert_allclose(simulate("var", n=100, seed=2, params={"sigma": 3.0}).x, 3 * base.x)
    shifted = simulate("var", n=100, seed=2, x0=[50, 50, 50, 50, 50])
    # After VAR_BURN_IN steps the poles (|z| <= 0.62) have shrunk the start by 0.62**200.
    assert VAR_BURN_IN >= 200
    np.testing.assert_allclose(shifted.x, base.x, atol=1e-9)
    with pytest.raises(UsageError, match="sigma"):
        simulate("var", params={"sigma": -1.0})


def test_logistic_x_is_unaffected_by_y():
    sim = simulate("logistic-coupled", n=100)
    x = [0.4]
    for _ in range(19):
        x.append(3.8 * x[-1] * (1 - x[-1]))
    # Chaos doubles rounding differences each step, so compare the start with the textbook map.
    np.testing.assert_allclose(sim.x[:20, 0], x, rtol=1e-9)
    other_y = simulate("logistic-coupled", n=100, x0=(0.4, 0.7))
    assert np.array_equal(other_y.x[:, 0], sim.x[:, 0])
    assert ((sim.x > 0) & (sim.x < 1)).all()
    uncoupled = simulate("logistic-coupled", n=100, params={"beta_yx": 0.0})
    assert not np.allclose(uncoupled.x[:, 1], sim.x[:, 1])


def test_params_and_x0_override_the_defaults():
    sim = simulate("vanderpol", n=10, dt=0.1, x0=(0.5, -0.5), params={"mu": 2.0})
    np.testing.assert_allclose(sim.x[0], [0.5, -0.5])
    np.testing.assert_allclose(sim.t, np.arange(10) * 0.1)
    assert SYSTEMS["vanderpol"].params == {"mu": 1.0}, "overrides must not leak into the defaults"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 1}, "n must be at least 2"),
        ({"n": 2.5}, "n must be an integer"),
        ({"dt": 0.0}, "dt must be > 0"),
        ({"dt": -0.1}, "dt must be > 0"),
        ({"dt": float("nan")}, "dt must be finite"),
        ({"noise": -0.01}, "noise must be >= 0"),
        ({"seed": -1}, "seed"),
        ({"x0": (1.0, 2.0)}, r"x0 needs 3 values \(x, y, z\)"),
        ({"params": {"gamma": 1.0}}, "unknown parameter 'gamma' for system 'lorenz'; "
                                     "valid parameters: sigma, rho, beta"),
        ({"params": {"rho": "lots"}}, "parameter 'rho' of system 'lorenz' must be a number"),
    ],
)
def test_bad_arguments_raise_usage_error(kwargs, match):
    with pytest.raises(UsageError, match=match):
        simulate("lorenz", **kwargs)


def test_unknown_system_lists_the_valid_ones():
    message = "unknown system 'foo'; valid systems: " + ", ".join(SYSTEMS)
    for call in (lambda: simulate("foo"), lambda: rhs("foo")):
        with pytest.raises(UsageError) as error:
            call()
        assert str(error.value) == message
    with pytest.raises(UsageError, match="unknown parameter"):
        rhs("lorenz", {"nope": 1.0})
