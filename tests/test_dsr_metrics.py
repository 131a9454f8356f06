"""D_stsp and D_H (dynid.metrics.dsr) against values known in closed form, and the floor two
independent runs of one attractor leave."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.metrics.dsr import power_spectrum_distance, state_space_divergence
from dynid.systems import rhs


def gaussian_kl(mean: float, sd: float) -> float:
    """KL(N(0, 1) || N(mean, sd^2)) in nats."""
    return float(np.log(sd) + (1.0 + mean**2) / (2.0 * sd**2) - 0.5)


def lorenz_run(n: int, start: list[float], dt: float = 0.01) -> np.ndarray:
    """n samples (n, 3) of Lorenz-63 by RK4 at dt, after 1000 steps of transient."""
    f = rhs("lorenz")
    x = np.array(start, dtype=float)
    out = np.empty((n + 1000, 3))
    for k in range(n + 1000):
        k1 = f(0, x)
        k2 = f(0, x + dt / 2 * k1)
        k3 = f(0, x + dt / 2 * k2)
        k4 = f(0, x + dt * k3)
        x = out[k] = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return out[1000:]


@pytest.fixture(scope="module")
def two_lorenz_runs() -> tuple[np.ndarray, np.ndarray]:
    return lorenz_run(50_000, [-8.0, 8.0, 27.0]), lorenz_run(50_000, [1.0, 1.0, 1.0])


def test_identical_data_score_zero():
    x = np.random.default_rng(0).standard_normal((5000, 3))
    assert state_space_divergence(x, x) == 0.0
    assert power_spectrum_distance(x, x) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(("mean", "sd"), [(0.5, 1.0), (0.0, 1.5), (1.0, 0.8)])
def test_binned_divergence_of_two_gaussians_is_their_kl(mean, sd):
    rng = np.random.default_rng(1)
    true = rng.standard_normal((1_000_000, 1))
    generated = mean + sd * rng.standard_normal((1_000_000, 1))
    # 30 bins of 0.3 sd: the binning error of a smooth density is a few per cent.
    assert state_space_divergence(true, generated) == pytest.approx(gaussian_kl(mean, sd), rel=0.05)


def test_binned_divergence_adds_over_independent_variables():
    rng = np.random.default_rng(2)
    true = rng.standard_normal((1_000_000, 2))
    generated = np.array([0.5, 0.0]) + np.array([1.0, 1.5]) * rng.standard_normal((1_000_000, 2))
    expected = gaussian_kl(0.5, 1.0) + gaussian_kl(0.0, 1.5)
    assert state_space_divergence(true, generated) == pytest.approx(expected, rel=0.05)


def test_mixture_divergence_above_five_variables_is_the_smoothed_gaussians_kl():
    rng = np.random.default_rng(3)
    true = rng.standard_normal((20_000, 6))
    # Unit-variance kernels turn N(0, I) and N(m, I) into N(0, 2I) and N(m, 2I): KL = |m|^2 / 4.
    shifted = 0.5 + rng.standard_normal((20_000, 6))
    assert state_space_divergence(true, shifted) == pytest.approx(6 * 0.25 / 4, rel=0.1)
    assert state_space_divergence(true, rng.standard_normal((20_000, 6))) < 0.03


def test_a_diverged_run_scores_the_worst():
    true = np.random.default_rng(4).standard_normal((1000, 2))
    diverged = true.copy()
    diverged[500:] = np.nan
    assert state_space_divergence(true, diverged) == np.inf
    assert power_spectrum_distance(true, diverged) == 1.0


def test_spectrum_distance_of_two_sines_is_that_of_two_gaussian_bumps():
    # A sine with a whole number of cycles has all its power in one bin; smoothing makes it a
    # Gaussian of sigma 20 bins, and two such bumps D bins apart have Bhattacharyya coefficient
    # exp(-D^2 / (8 sigma^2)).
    t = np.arange(2000)
    first = np.sin(2 * np.pi * 200 * t / 2000)[:, None]
    second = np.sin(2 * np.pi * 240 * t / 2000 + 1.0)[:, None]
    expected = np.sqrt(1.0 - np.exp(-(40**2) / (8 * 20.0**2)))
    assert power_spectrum_distance(first, second) == pytest.approx(expected, rel=0.01)
    # Phase and amplitude do not matter, only the frequency content.
    assert power_spectrum_distance(first, 3.0 * np.roll(first, 7, axis=0)) < 1e-6


def test_runs_of_different_lengths_compare_on_the_shorter_grid():
    t = np.arange(20_000)
    long = np.sin(2 * np.pi * 200 * t / 2000 + 0.3)[:, None]
    short = long[:2000]
    assert power_spectrum_distance(short, long) < 1e-6
    assert power_spectrum_distance(long, short) < 1e-6
    noise = np.random.default_rng(5).standard_normal((20_000, 1))
    assert power_spectrum_distance(short, noise) > 0.8


def test_independent_lorenz_runs_sit_at_the_quoted_floor(two_lorenz_runs):
    first, second = two_lorenz_runs
    # The issue quotes about 0.08 and 0.05 for two clean 50,000-step runs.
    assert 0.02 < state_space_divergence(first, second) < 0.2
    assert power_spectrum_distance(first, second) < 0.08
    # 10,000 samples do not sample the attractor well: far above the floor (quoted 0.4-1.5).
    assert state_space_divergence(first[:10_000], second[:10_000]) > 0.3


def test_another_attractor_is_far_from_lorenz(two_lorenz_runs):
    first, second = two_lorenz_runs
    squashed = second * np.array([1.0, 1.0, 0.7]) + np.array([0.0, 0.0, 8.0])
    assert state_space_divergence(first, squashed) > 10 * state_space_divergence(first, second)
    slowed = second[::2]  # the same orbit at half the sampling step: twice the frequencies
    assert power_spectrum_distance(first, slowed) > 5 * power_spectrum_distance(first, second)


def test_bad_shapes_are_a_caller_error():
    with pytest.raises(ValueError, match="expected"):
        state_space_divergence(np.zeros((10, 2)), np.zeros((10, 3)))
    with pytest.raises(ValueError, match="at least 2"):
        power_spectrum_distance(np.zeros((1, 2)), np.zeros((10, 2)))


def test_a_run_escapes_beyond_the_range_widened_by_the_range_or_when_not_finite():
    from dynid.metrics.dsr import escapes

    data = np.column_stack([np.linspace(0.0, 1.0, 50), np.linspace(-2.0, 2.0, 50)])
    inside = np.array([[-0.99, -5.9], [1.99, 5.9]])  # within one range beyond each side
    assert not escapes(data, inside)
    assert escapes(data, np.array([[0.5, 0.0], [2.01, 0.0]]))  # x beyond 1 + 1
    assert escapes(data, np.array([[0.5, 0.0], [0.5, -6.01]]))  # y beyond -2 - 4
    assert escapes(data, np.array([[0.5, np.nan], [0.5, 0.0]]))
    assert not escapes(data, np.array([[0.5, 0.0], [2.01, 0.0]]), margin=1.5)


def test_spectra_need_a_grid_wider_than_their_smoothing():
    """sigma 20 bins, truncated at 4 sigma: the kernel spans 161 bins, a grid of length // 2 + 1
    holds it from 320 samples on. Below, every spectrum is flattened: white noise against a
    sine reads near 0 on 60 samples, near its long-record value from 320 on."""
    from dynid.metrics.dsr import spectrum_min_length

    assert spectrum_min_length() == 320
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((5000, 1))
    sine = np.sin(2 * np.pi * 0.05 * np.arange(5000))[:, None]
    assert power_spectrum_distance(sine[:60], noise) < 0.15
    assert power_spectrum_distance(sine[:320], noise) > 0.5
