"""Weak (integral) form of the regression (dynid.symbolic.weak).

With the true library, least squares on ``G @ Xi ~ B`` must give back the true coefficients:
exactly (to quadrature error) without noise, and to about the noise level with it.
"""

from functools import lru_cache

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

from dynid.symbolic.weak import (
    corner_frequency,
    quadrature,
    weak_system,
    weak_system_trials,
)

# A damped rotation x' = A x (period ~3.1, decay time 10).
A = np.array([[-0.1, 2.0], [-2.0, -0.1]])


def linear(t, x0=(2.0, 0.0)):
    return np.array([expm(A * (s - t[0])) @ np.asarray(x0) for s in t])


def _lorenz_rhs(_, state):
    x, y, z = state
    return [10 * (y - x), x * (28 - z) - y, x * y - 8 / 3 * z]


@lru_cache(maxsize=None)
def _lorenz_cached(times: tuple, x0: tuple):
    t = np.array(times)
    sol = solve_ivp(_lorenz_rhs, (t[0], t[-1]), list(x0), t_eval=t, method="DOP853",
                    rtol=1e-10, atol=1e-12)
    return sol.y.T


def lorenz(t, x0=(-8.0, 8.0, 27.0)):
    return _lorenz_cached(tuple(t), tuple(x0)).copy()


def lorenz_library(x):
    """The terms Lorenz-63 uses: x, y, z, xy, xz (p = 5)."""
    return np.column_stack([x[:, 0], x[:, 1], x[:, 2], x[:, 0] * x[:, 1], x[:, 0] * x[:, 2]])


# Xi (p, d) for lorenz_library: x' = 10 (y - x), y' = 28 x - y - xz, z' = xy - 8/3 z.
LORENZ_XI = np.zeros((5, 3))
LORENZ_XI[[0, 1], 0] = [-10, 10]
LORENZ_XI[[0, 1, 4], 1] = [28, -1, -1]
LORENZ_XI[[2, 3], 2] = [-8 / 3, 1]


def noisy(x, level, seed=0):
    rng = np.random.default_rng(seed)
    return x + level * x.std(axis=0) * rng.standard_normal(x.shape)


def jittered(n, step, fraction, seed=0):
    rng = np.random.default_rng(seed)
    return np.arange(n) * step + rng.uniform(-fraction, fraction, n) * step


def solve(theta, x, t, **options):
    g, b, info = weak_system(theta, x, t, **options)
    return np.linalg.lstsq(g, b, rcond=None)[0], info


def relative_error(estimate, truth):
    return float(np.max(np.abs(estimate - truth)) / np.max(np.abs(truth)))


# --- linear ODE ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [150, 1000])
def test_linear_ode_noise_free_is_recovered(n):
    t = np.linspace(0, 10, n)
    x = linear(t)
    xi, info = solve(x, x, t)
    assert relative_error(xi.T, A) < 1e-4
    assert info["rule"] == "corner" and info["K"] >= 10


def test_linear_ode_noise_free_on_irregular_times():
    t = jittered(1000, 0.01, 0.4)
    x = linear(t)
    xi, _ = solve(x, x, t)
    assert relative_error(xi.T, A) < 1e-4  # measured ~1e-6


@pytest.mark.parametrize("grid", ["uniform", "irregular"])
def test_linear_ode_with_five_percent_noise(grid):
    t = np.linspace(0, 10, 1000) if grid == "uniform" else jittered(1000, 0.01, 0.4)
    data = noisy(linear(t), 0.05)
    xi, _ = solve(data, data, t)
    assert relative_error(xi.T, A) < 0.05  # measured 0.1-0.5%


# --- Lorenz-63 --------------------------------------------------------------------------------


@pytest.mark.parametrize("grid", ["uniform", "irregular"])
def test_lorenz_true_terms_noise_free(grid):
    t = np.arange(2000) * 0.01 if grid == "uniform" else jittered(2000, 0.01, 0.4)
    x = lorenz(t)
    xi, _ = solve(lorenz_library(x), x, t)
    nonzero = LORENZ_XI != 0
    assert np.max(np.abs(xi - LORENZ_XI)[nonzero] / np.abs(LORENZ_XI[nonzero])) < 0.01
    assert np.max(np.abs(xi[~nonzero])) < 0.01


def test_lorenz_short_records_several_trials_with_noise():
    rng = np.random.default_rng(1)
    t = np.arange(150) * 0.01
    starts = rng.uniform([-15, -15, 10], [15, 15, 40], size=(5, 3))
    states = [noisy(lorenz(t, tuple(s)), 0.01, seed=k) for k, s in enumerate(starts)]
    g, b, info = weak_system_trials([lorenz_library(x) for x in states], states, [t] * 5)
    xi = np.linalg.lstsq(g, b, rcond=None)[0]
    nonzero = LORENZ_XI != 0
    assert np.max(np.abs(xi - LORENZ_XI)[nonzero] / np.abs(LORENZ_XI[nonzero])) < 0.05
    assert np.max(np.abs(xi[~nonzero])) < 0.2


def test_a_single_short_record_still_gives_enough_rows():
    t = np.arange(150) * 0.01
    x = lorenz(t)
    g, b, info = weak_system(lorenz_library(x), x, t)
    assert info["K"] >= 5 * 5 and info["rule"] == "rows"
    xi = np.linalg.lstsq(g, b, rcond=None)[0]
    nonzero = LORENZ_XI != 0
    assert np.max(np.abs(xi - LORENZ_XI)[nonzero] / np.abs(LORENZ_XI[nonzero])) < 0.01


# --- structure of the system -----------------------------------------------------------------


def test_rows_are_averages_and_constants_have_no_derivative():
    t = jittered(300, 0.02, 0.3)
    theta = np.column_stack([np.ones_like(t), np.sin(t)])
    g, b, _ = weak_system(theta, np.full((300, 1), 3.0), t)
    np.testing.assert_allclose(g[:, 0], 1.0, atol=1e-12)  # unit-integral test functions
    np.testing.assert_allclose(b, 0.0, atol=1e-10)


def test_trials_stack_without_windows_crossing_them():
    t1, t2 = np.linspace(0, 10, 400), np.linspace(0, 6, 240) + 100
    x1, x2 = linear(t1), linear(t2, (0.0, 1.5))
    g, b, info = weak_system_trials([x1, x2], [x1, x2], [t1, t2], window=1.5)
    g1, b1, info1 = weak_system(x1, x1, t1, window=1.5)
    g2, b2, _ = weak_system(x2, x2, t2, window=1.5)
    np.testing.assert_allclose(g, np.vstack([g1, g2]))
    np.testing.assert_allclose(b, np.vstack([b1, b2]))
    first = info["trial"] == 0
    assert first.sum() == info1["K"]
    spans = info["windows"]
    assert np.all(spans[first, 0] >= t1[0]) and np.all(spans[first, 1] <= t1[-1] + 1e-12)
    assert np.all(spans[~first, 0] >= t2[0]) and np.all(spans[~first, 1] <= t2[-1] + 1e-12)


def test_given_window_and_count_are_used():
    t = np.linspace(0, 10, 501)
    x = linear(t)
    g, _, info = weak_system(x, x, t, window=2.0, n_windows=7)
    assert g.shape == (7, 2) and info["K"] == 7 and info["rule"] == "given"
    np.testing.assert_allclose(info["windows"][:, 1] - info["windows"][:, 0], 2.0)


def test_a_window_longer_than_the_record_covers_it_once():
    t = np.linspace(0, 1, 50)
    x = linear(t)
    _, _, info = weak_system(x, x, t, window=5.0)
    assert info["K"] == 1 and info["rule"] == "record"
    np.testing.assert_allclose(info["windows"][0], [0.0, 1.0])


@pytest.mark.parametrize("omega", [3.0, 10.0])
def test_corner_frequency_sits_near_the_signal_band(omega):
    t = np.linspace(0, 20, 2000)
    x = np.sin(omega * t) + 0.05 * np.random.default_rng(2).standard_normal(t.size)
    assert omega / 2 < corner_frequency(x[:, None], t) < 3 * omega


def test_irregular_quadrature_integrates_linear_data_exactly():
    t = np.sort(np.random.default_rng(3).uniform(0, 2, 40))
    nodes, weights, values = quadrature(t, np.column_stack([t, 2 * t + 1]), degree=4)
    assert np.all(weights > 0)
    span = t[-1] - t[0]
    np.testing.assert_allclose(weights.sum(), span)
    np.testing.assert_allclose(weights @ values, [(t[-1] ** 2 - t[0] ** 2) / 2,
                                                  t[-1] ** 2 - t[0] ** 2 + span])


def test_bad_input_is_a_value_error():
    t = np.linspace(0, 1, 20)
    x = np.sin(t)[:, None]
    with pytest.raises(ValueError, match="shapes"):
        weak_system(x[:-1], x, t)
    with pytest.raises(ValueError, match="increasing"):
        weak_system(x, x, t[::-1])
    with pytest.raises(ValueError, match="window"):
        weak_system(x, x, t, window=-1.0)
