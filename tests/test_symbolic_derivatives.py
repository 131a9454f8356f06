"""Noise estimation and numerical differentiation (dynid.symbolic.noise / .derivatives).

Ground truth: polynomials and sines with known derivatives, and Lorenz-63 simulated to 1e-10 with
its derivative taken from the right-hand side. Tolerances come from the noise levels.
"""

from functools import lru_cache

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.interpolate import make_smoothing_spline
from scipy.signal import savgol_filter

from dynid.symbolic.derivatives import (
    METHODS,
    choose_method,
    differentiate,
    local_polynomial,
    smooth,
)
from dynid.symbolic.noise import estimate_noise, noise_to_signal


def _lorenz_rhs(_, state):
    x, y, z = state
    return [10 * (y - x), x * (28 - z) - y, x * y - 8 / 3 * z]


@lru_cache(maxsize=None)
def _lorenz_cached(n: int, dt: float):
    t = np.arange(n) * dt
    sol = solve_ivp(_lorenz_rhs, (0, t[-1]), [-8, 8, 27], t_eval=t, method="DOP853",
                    rtol=1e-10, atol=1e-12)
    states = sol.y.T
    return t, states, np.array([_lorenz_rhs(0, s) for s in states])


def lorenz(n: int, dt: float = 0.01):
    """(t (n,), states (n, 3), derivative (n, 3)) of Lorenz-63 from (-8, 8, 27)."""
    return tuple(a.copy() for a in _lorenz_cached(n, dt))


def noisy(x, level, seed=0):
    """x plus Gaussian noise of ``level`` times each column's std."""
    rng = np.random.default_rng(seed)
    return x + level * x.std(axis=0) * rng.standard_normal(x.shape)


def relative_rmse(estimate, truth):
    return float(np.sqrt(np.mean((estimate - truth) ** 2)) / truth.std())


def jittered(n, step, fraction, seed=0):
    """n times on a grid of ``step``, each moved by up to ``fraction`` of a step."""
    rng = np.random.default_rng(seed)
    return np.arange(n) * step + rng.uniform(-fraction, fraction, n) * step


# --- noise estimation --------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.001, 0.01, 0.1])
def test_estimate_noise_recovers_the_noise_std(level):
    t = np.linspace(0, 20, 2000)
    x = np.sin(t) + level * np.random.default_rng(1).standard_normal(t.size)
    assert estimate_noise(x, t)[0] == pytest.approx(level, rel=0.15)


def test_estimate_noise_is_zero_on_smooth_noise_free_data():
    t = np.linspace(0, 20, 2000)
    x = np.column_stack([np.sin(t), 3 * np.cos(0.5 * t) + t])
    assert np.all(estimate_noise(x, t) < 1e-7 * x.std(axis=0))


def test_estimate_noise_on_irregular_times():
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(0, 20, 2000))
    x = np.column_stack([np.sin(t), np.cos(2 * t)]) + 0.01 * rng.standard_normal((2000, 2))
    np.testing.assert_allclose(estimate_noise(x, t), 0.01, rtol=0.15)
    assert np.all(estimate_noise(np.sin(t), t) < 1e-6)


def test_noise_to_signal_is_noise_over_spread():
    t, x, _ = lorenz(2000)
    ratio = noise_to_signal(noisy(x, 0.05), t)
    np.testing.assert_allclose(ratio, 0.05, rtol=0.15)
    assert noise_to_signal(np.ones((50, 1)), np.arange(50.0))[0] == 0.0


# --- finite differences ------------------------------------------------------------------------


@pytest.mark.parametrize("grid", ["uniform", "irregular"])
def test_finite_difference_is_exact_on_cubics(grid):
    t = np.linspace(-1, 2, 40) if grid == "uniform" else np.sort(
        np.random.default_rng(3).uniform(-1, 2, 40))
    x = np.column_stack([2 * t**3 - t**2 + 3 * t - 1, -t**3 + 4 * t])
    exact = np.column_stack([6 * t**2 - 2 * t + 3, -3 * t**2 + 4])
    np.testing.assert_allclose(differentiate(x, t, "finite_difference"), exact, atol=1e-10)


@pytest.mark.parametrize("grid", ["uniform", "irregular"])
def test_finite_difference_converges_at_fourth_order(grid):
    errors = []
    for n in (50, 100, 200):
        t = np.linspace(0, 4, n)
        if grid == "irregular":
            # The same relative jitter pattern at every resolution, so h halves cleanly.
            t = t + 0.3 * (t[1] - t[0]) * np.sin(7.3 * np.arange(n))
        derivative = differentiate(np.sin(t), t, "finite_difference")[:, 0]
        errors.append(np.max(np.abs(derivative - np.cos(t))))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 3.5), orders


def test_finite_difference_on_a_seven_sample_record():
    t = np.linspace(0, 1, 7)
    np.testing.assert_allclose(differentiate(t**2, t, "finite_difference")[:, 0], 2 * t, atol=1e-12)


# --- Savitzky-Golay paths ----------------------------------------------------------------------


def test_local_polynomial_matches_scipy_savgol_filter_on_a_uniform_grid():
    t = np.arange(300) * 0.1
    x = np.random.default_rng(4).standard_normal((300, 1))
    value, slope = local_polynomial(t, 21, 3)
    np.testing.assert_allclose(value.apply(x)[:, 0], savgol_filter(x[:, 0], 21, 3), atol=1e-12)
    np.testing.assert_allclose(
        slope.apply(x)[:, 0], savgol_filter(x[:, 0], 21, 3, deriv=1, delta=0.1), atol=1e-12)


def test_savgol_on_irregular_times_is_exact_on_cubics():
    t = jittered(60, 0.05, 0.4)
    x = t**3 - 2 * t
    np.testing.assert_allclose(differentiate(x, t, "savgol", window=11, polyorder=3)[:, 0],
                               3 * t**2 - 2, atol=1e-9)


# --- automatic choice on Lorenz-63 -------------------------------------------------------------


@pytest.mark.parametrize("level", [0.01, 0.05])
def test_auto_beats_finite_differences_on_noisy_lorenz(level):
    t, x, truth = lorenz(1000)
    data = noisy(x, level)
    auto = relative_rmse(differentiate(data, t), truth)
    plain = relative_rmse(differentiate(data, t, "finite_difference"), truth)
    # Measured: 6x at 1%, 9x at 5%.
    assert auto * 3 < plain, (auto, plain)
    assert auto < 3 * level  # measured ~2x the relative noise level


def test_auto_on_irregular_lorenz():
    t, _, _ = lorenz(1000)
    t = jittered(1000, 0.01, 0.4)
    sol = solve_ivp(_lorenz_rhs, (0, t[-1]), [-8, 8, 27], t_eval=t, method="DOP853",
                    rtol=1e-10, atol=1e-12)
    x, truth = sol.y.T, np.array([_lorenz_rhs(0, s) for s in sol.y.T])
    data = noisy(x, 0.05)
    auto = relative_rmse(differentiate(data, t), truth)
    assert auto * 3 < relative_rmse(differentiate(data, t, "finite_difference"), truth)


def test_choose_method_follows_the_noise_level():
    t, x, _ = lorenz(1000)
    assert choose_method(x, t) == ("finite_difference", {"order": 4})
    method, options = choose_method(noisy(x, 0.01), t)
    assert method == "savgol" and len(options["window"]) == 3
    method, options = choose_method(noisy(x, 0.2), t)
    assert method == "spline" and len(options["lam"]) == 3


def test_chosen_options_reproduce_auto():
    t, x, _ = lorenz(500)
    data = noisy(x, 0.02)
    method, options = choose_method(data, t)
    np.testing.assert_array_equal(differentiate(data, t, method, **options), differentiate(data, t))


def test_smooth_removes_most_of_the_noise():
    t, x, _ = lorenz(1000)
    data = noisy(x, 0.05)
    noise_rms = np.sqrt(np.mean((data - x) ** 2, axis=0))
    # Measured: 0.36-0.51 of the noise for auto, savgol, spline, spectral; 0.52-0.67 for tv.
    for method in ("auto", "savgol", "spline", "tv", "spectral"):
        cleaned = smooth(data, t, method)
        assert np.all(np.sqrt(np.mean((cleaned - x) ** 2, axis=0)) < 0.75 * noise_rms), method


# --- every method on short records -------------------------------------------------------------


@pytest.mark.parametrize("method", [*METHODS, "auto"])
def test_every_method_works_on_150_samples(method):
    t, x, truth = lorenz(150)
    derivative = differentiate(noisy(x, 0.01), t, method)
    assert derivative.shape == (150, 3) and np.all(np.isfinite(derivative))
    limit = 0.2 if method != "finite_difference" else 0.3  # FD: noise-limited, ~0.14 here
    assert relative_rmse(derivative, truth) < limit


@pytest.mark.parametrize("method", [m for m in METHODS if m != "spectral"])
def test_every_method_works_on_150_irregular_samples(method):
    t = jittered(150, 0.01, 0.4, seed=5)
    x = np.column_stack([np.sin(3 * t), np.cos(2 * t)])
    derivative = differentiate(x, t, method)
    assert np.all(np.isfinite(derivative))
    truth = np.column_stack([3 * np.cos(3 * t), -2 * np.sin(2 * t)])
    assert relative_rmse(derivative, truth) < 0.05


@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_on_seven_samples(method):
    t = np.linspace(0, 1, 7)
    derivative = differentiate(np.column_stack([t, t**2]), t, method)
    assert derivative.shape == (7, 2) and np.all(np.isfinite(derivative))


# --- method-specific behaviour -----------------------------------------------------------------


def test_spectral_rejects_irregular_times():
    t = jittered(100, 0.1, 0.3)
    with pytest.raises(ValueError, match="uniform"):
        differentiate(np.sin(t), t, "spectral")


def test_spectral_is_accurate_on_a_periodic_record():
    t = np.arange(256) * (2 * np.pi / 256)
    derivative = differentiate(np.sin(3 * t), t, "spectral", extension="periodic")[:, 0]
    np.testing.assert_allclose(derivative, 3 * np.cos(3 * t), atol=1e-9)


def test_spline_matches_scipy_smoothing_spline_at_a_given_penalty():
    rng = np.random.default_rng(6)
    t = np.sort(rng.uniform(0, 10, 200))
    x = np.sin(t) + 0.05 * rng.standard_normal(200)
    reference = make_smoothing_spline(t, x, lam=0.03)
    np.testing.assert_allclose(smooth(x, t, "spline", lam=0.03)[:, 0], reference(t), atol=1e-8)
    np.testing.assert_allclose(differentiate(x, t, "spline", lam=0.03)[:, 0],
                               reference.derivative()(t), atol=1e-7)


def test_spline_penalty_follows_the_time_unit():
    # The same record in seconds and in milliseconds gives the same derivative (per unit).
    t = np.linspace(0, 10, 400)
    x = np.sin(t) + 0.05 * np.random.default_rng(7).standard_normal(400)
    seconds = differentiate(x, t, "spline")
    milliseconds = differentiate(x, 1000 * t, "spline")
    np.testing.assert_allclose(milliseconds * 1000, seconds, rtol=1e-3, atol=1e-3)


def test_tv_handles_ten_thousand_samples():
    t = np.arange(10_000) * 0.002
    x = np.sin(3 * t) + 0.05 * np.random.default_rng(8).standard_normal(t.size)
    derivative = differentiate(x, t, "tv")
    # TV's staircase suits kinks, not sines: 10% here where savgol and spline reach ~2%.
    assert relative_rmse(derivative[:, 0], 3 * np.cos(3 * t)) < 0.15


def test_bad_input_is_a_value_error():
    t = np.linspace(0, 1, 20)
    with pytest.raises(ValueError, match="unknown differentiation method"):
        differentiate(t, t, "magic")
    with pytest.raises(ValueError, match="not \\['windw'\\]"):
        differentiate(t, t, "savgol", windw=5)
    with pytest.raises(ValueError, match="increasing"):
        differentiate(t, t[::-1])
    with pytest.raises(ValueError, match="shape"):
        differentiate(t, t[:-1])
