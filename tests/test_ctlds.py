"""Continuous time: the exact discretisation against scipy, the continuous-discrete filter
against the exact Gaussian conditionals at irregular times, ``lds`` on irregular timestamps
against a known continuous system (and interpolation onto a grid, which misses it), and
``ctlds``'s identifiability checks."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
import torch
from scipy.integrate import quad_vec
from scipy.linalg import expm
from scipy.optimize import linear_sum_assignment

from dynid import api
from dynid.data.dataset import Dataset
from dynid.linear.continuous import ContinuousStateSpace, discretise, from_discrete, principal_generator
from dynid.linear.kalman import StateSpace, kalman_filter
from dynid.modelfile import ModelFile, describe_fit
from dynid.models.latent.ctlds import identifiability
from dynid.models.latent.lds import LDS
from dynid.report import build_report

from test_lds import assert_exact_gaussian, simulate_lds
from tests.test_report import SVG_XMLNS, check_page

N_LATENT, N_OBSERVED = 4, 8
# Per unit of time: a damped oscillation (period ~2.1) and two decays.
TRUE_CONTINUOUS = np.array([-0.5 + 3j, -0.5 - 3j, -1.0, -2.0])
# Two lightly damped oscillations (periods ~2.1 and ~0.63), chosen so that 3000 irregular samples
# determine them: the Cramer-Rao bound from the whole path over those ~330 time units allows
# relative standard deviations of 0.82% and 0.35% (benchmarks/lds_goals.py --determined).
DETERMINED_CONTINUOUS = np.array([-0.1 + 3j, -0.1 - 3j, -0.2 + 10j, -0.2 - 10j])


def real_form(eigenvalues: tuple[complex, ...]) -> np.ndarray:
    """The real block-diagonal matrix (n, n) with these n eigenvalues (conjugate pairs both
    listed): a block [[a, -w], [w, a]] per pair a +- wi, a diagonal entry per real one."""
    block = np.zeros((len(eigenvalues), len(eigenvalues)))
    k = 0
    for value in eigenvalues:
        if value.imag == 0:
            block[k, k] = value.real
            k += 1
        elif value.imag > 0:
            block[k:k + 2, k:k + 2] = [[value.real, -value.imag], [value.imag, value.real]]
            k += 2
    return block


@functools.cache
def true_continuous(inputs: int = 0, seed: int = 0, eigenvalues: tuple[complex, ...] = tuple(TRUE_CONTINUOUS)) -> ContinuousStateSpace:
    """The known system: generator with ``eigenvalues`` (per time unit) in a random basis, 8
    observed variables with noise sd 0.3, state noise intensity 4 I."""
    rng = np.random.default_rng(seed)
    block = real_form(eigenvalues)
    basis = rng.normal(size=(N_LATENT, N_LATENT))
    return ContinuousStateSpace(
        f=basis @ block @ np.linalg.inv(basis),
        g=rng.normal(size=(N_LATENT, inputs)),
        sigma=4.0 * np.eye(N_LATENT),
        c=rng.normal(size=(N_OBSERVED, N_LATENT)),
        d=rng.normal(size=(N_OBSERVED, inputs)),
        offset=np.ones(N_OBSERVED),
        r=np.full(N_OBSERVED, 0.09),
        m0=np.zeros(N_LATENT),
        p0=np.eye(N_LATENT),
    )


def irregular_times(n: int, seed: int) -> np.ndarray:
    """n times with independent steps uniform in [0.02, 0.2] (mean 0.11)."""
    steps = np.random.default_rng(seed).uniform(0.02, 0.2, size=n - 1)
    return np.concatenate([[0.0], np.cumsum(steps)])


def simulate_irregular(model: ContinuousStateSpace, t: np.ndarray, seed: int, missing: float) -> np.ndarray:
    """Observations (T, p) of ``model`` at times t, a ``missing`` fraction of cells NaN."""
    rng = np.random.default_rng(seed)
    course = model.course(t)
    z = np.empty((t.shape[0], model.n_latent))
    state = rng.multivariate_normal(model.m0, model.p0)
    for k in range(t.shape[0]):
        z[k] = state
        if k + 1 < t.shape[0]:
            state = course.a[k] @ state + rng.multivariate_normal(np.zeros(model.n_latent), course.q[k])
    y = z @ model.c.T + model.offset + rng.normal(size=(t.shape[0], N_OBSERVED)) * np.sqrt(model.r)
    y[rng.random(y.shape) < missing] = np.nan
    return y


def matched_relative_errors(found: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """|found - truth| / |truth| (n,) per true eigenvalue (n <= len(found)), over the one-to-one
    matching that minimises their sum."""
    distance = np.abs(found[:, None] - truth[None, :]) / np.abs(truth)[None, :]
    rows, cols = linear_sum_assignment(distance)
    out = np.empty(truth.shape[0])
    out[cols] = distance[rows, cols]
    return out


def relative_error(found: np.ndarray, truth: np.ndarray) -> float:
    """Largest |found - truth| / |truth| over the matching of ``matched_relative_errors``."""
    return float(matched_relative_errors(found, truth).max())


def dataset(y: np.ndarray, t: np.ndarray) -> Dataset:
    return Dataset.from_arrays(y, t=t, variables=[f"y{i}" for i in range(y.shape[1])])


def interpolated_fit(y: np.ndarray, t: np.ndarray) -> LDS:
    """The baseline the goal says misses: ``y`` (T, p) at times t (T,), gaps included, linearly
    interpolated onto a grid at the median step and fitted there by the discrete lds."""
    step = float(np.median(np.diff(t)))
    grid = np.arange(t[0], t[-1], step)
    filled = np.column_stack([np.interp(grid, t[~np.isnan(col)], col[~np.isnan(col)]) for col in y.T])
    return api.fit(dataset(filled, grid), "lds", {"latent": 4, "max_iter": 100}, device="cpu").model


# -- discretisation and filtering ------------------------------------------------------------------
@pytest.mark.parametrize("defective", [False, True])
def test_discretisation_matches_expm_and_the_noise_integral(defective):
    model = true_continuous(inputs=2)
    # A Jordan block (repeated eigenvalue, no eigenvector basis) takes the exponential path.
    f = np.array([[-1.0, 1.0], [0.0, -1.0]]) if defective else model.f
    n = f.shape[0]
    g, sigma = model.g[:n], model.sigma[:n, :n] + 0.5
    h = np.array([0.01, 0.13, 0.7])
    a, b, q = (x.numpy() for x in discretise(*(torch.from_numpy(x) for x in (f, g, sigma, h))))
    for k, step in enumerate(h):
        np.testing.assert_allclose(a[k], expm(f * step), rtol=1e-10, atol=1e-12)
        integral_b = quad_vec(lambda s: expm(f * s) @ g, 0, step, epsabs=1e-13)[0]
        integral_q = quad_vec(lambda s: expm(f * s) @ sigma @ expm(f * s).T, 0, step, epsabs=1e-13)[0]
        np.testing.assert_allclose(b[k], integral_b, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(q[k], integral_q, rtol=1e-8, atol=1e-12)


def test_from_discrete_inverts_the_discretisation():
    model = true_continuous(inputs=2)
    sampled = model.at_step(0.1)
    back = from_discrete(sampled, 0.1, principal_generator(sampled.a, 0.1))
    for name in ("f", "g", "sigma"):
        np.testing.assert_allclose(getattr(back, name), getattr(model, name), rtol=1e-7, atol=1e-9, err_msg=name)


def test_continuous_discrete_filter_matches_the_exact_gaussian_at_irregular_times():
    model = true_continuous(inputs=2)
    t = irregular_times(10, seed=1)
    y = simulate_irregular(true_continuous(), t, seed=2, missing=0.3)
    assert_exact_gaussian(model.course(t, np.random.default_rng(3).normal(size=(10, 2))), y)


# -- fitting on irregular timestamps --------------------------------------------------------------
@functools.cache
def small_irregular_fit():
    """A few EM iterations of lds on 200 irregular, gappy samples, and those data."""
    t = irregular_times(200, seed=4)
    data = dataset(simulate_irregular(true_continuous(), t, seed=5, missing=0.3), t)
    return api.fit(data, "lds", {"latent": 4, "max_iter": 4}, device="cpu").model, data


def test_continuous_em_log_likelihood_never_decreases_and_states_work_at_irregular_times():
    model, data = small_irregular_fit()
    t = data.trials[0].t
    history = model.arrays()["log_likelihood"]
    assert len(history) > 2 and model.metrics_["time"] == "continuous"
    assert np.all(np.diff(history) >= -1e-9 * np.abs(history[1:])), np.diff(history).min()
    assert model.eigenvalues() is None and model.arrays()["eigenvalues"].shape == (0,)
    states = api.states(model, data)
    np.testing.assert_array_equal(states.t, t)
    assert states.means.shape == (200, 4) and np.all(states.sds > 0)


def test_report_shows_latent_states_and_continuous_eigenvalues():
    model, data = small_irregular_fit()
    page = build_report([("m.dynid", ModelFile(model, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.1)))], [], data)
    titles = [svg.find(f"{{{SVG_XMLNS}}}title").text for svg in check_page(page)]
    assert [f"z_{k}" for k in range(4)] == [title for title in titles if title.startswith("z_")]
    assert "Continuous-time eigenvalues" in page and "e^(\u03bb dt)" in "".join(titles)
    assert "\u00b11.96 standard deviation bands" in page


def test_forecasts_at_any_times_agree_with_steps_of_dt_and_with_the_filter_over_gaps():
    model, data = small_irregular_fit()
    history = data.trials[0].slice(0, 150)
    grid = history.t[-1] + model.dt_ * np.arange(1, 6)
    np.testing.assert_allclose(model.simulate_at(history, grid), model.simulate(history, 5), rtol=1e-9, atol=1e-12)
    # At irregular times: the filter run on, with nothing observed after the history, predicts
    # the same observations.
    times = data.trials[0].t[150:160]
    blind = np.vstack([history.x, np.full((10, N_OBSERVED), np.nan)])
    course = model.model_.course(np.concatenate([history.t, times]))
    predicted = kalman_filter(course, blind).predicted_means[150:] @ course.c.T + course.offsets[150:]
    np.testing.assert_allclose(model.simulate_at(history, times), predicted, rtol=1e-9, atol=1e-12)


def test_score_rolls_out_to_the_irregular_times_of_the_data():
    model, _ = small_irregular_fit()
    t = irregular_times(300, seed=10)
    trial = dataset(simulate_irregular(true_continuous(), t, seed=11, missing=0.0), t).trials[0]
    data = dataset(trial.x, t)
    horizon, starts = 8, 6
    found = api.score(model, data, horizon=horizon, starts=starts, free_run=500)
    # The same rollouts by the filter over hidden future samples (see the test above).
    course = model.model_.course(t)
    picks = np.linspace(1, 300 - horizon, starts).round().astype(int)
    errors, vpt = [], []
    scale = trial.x.std(axis=0)
    for s in picks:
        blind = trial.x.copy()
        blind[s:] = np.nan
        predicted = kalman_filter(course, blind).predicted_means[s:s + horizon] @ course.c.T + course.offsets[s:s + horizon]
        error = predicted - trial.x[s:s + horizon]
        errors.append(error)
        invalid = np.sqrt(np.mean((error / scale) ** 2, axis=1)) > found["vpt_threshold"]
        vpt.append(t[s + int(np.argmax(invalid))] - t[s - 1] if invalid.any() else t[s + horizon - 1] - t[s - 1])
    errors = np.stack(errors)
    assert found["starts"] == starts and found["horizon"] == horizon
    np.testing.assert_allclose(found["rmse_per_step"], np.sqrt(np.mean(errors**2, axis=(0, 2))), rtol=1e-9)
    assert found["valid_prediction_time"] == pytest.approx(np.mean(vpt), rel=1e-12)
    assert found["d_stsp"] is not None and found["d_h"] is None  # no power spectrum of irregular samples


def test_continuous_em_reaches_the_true_parameters_log_likelihood():
    # The maximum-likelihood fit can only be above the truth (by about half the number of free
    # parameters); an EM or a start that fails lands below it.
    model, data = small_irregular_fit()
    trial = data.trials[0]
    truth = kalman_filter(true_continuous().course(trial.t), trial.x).loglik.sum()
    assert model.arrays()["log_likelihood"][-1] > truth


@pytest.mark.slow
def test_irregular_fit_is_above_the_truth_and_finds_the_oscillation_where_interpolation_misses():
    """The goal data (3000 samples, steps uniform in [0.02, 0.2], 30% missing). What they
    determine: the oscillation -0.5 +- 3i (Cramer-Rao bound from the whole path observed
    exactly: 1.9% relative standard deviation), not the decays -1 and -2 (16% and 12%: no
    estimator gets them within 3% here; measured 2026-12-01, the fit merged them into
    -1.36 +- 0.34i with a log-likelihood 34 above the true parameters', see benchmarks/README.md)."""
    t = irregular_times(3000, seed=6)
    y = simulate_irregular(true_continuous(), t, seed=7, missing=0.3)
    model = api.fit(dataset(y, t), "lds", {"latent": 4, "max_iter": 100}, device="cpu").model
    truth = kalman_filter(true_continuous().course(t), y).loglik.sum()
    assert model.arrays()["log_likelihood"][-1] > truth
    oscillation = TRUE_CONTINUOUS[:2]
    assert relative_error(model.continuous_eigenvalues(), oscillation) < 0.03
    assert relative_error(interpolated_fit(y, t).continuous_eigenvalues_, oscillation) > 0.03


@pytest.mark.slow
def test_irregular_fit_finds_the_eigenvalues_the_data_determine_within_3_percent():
    """The 3% goal where the data determine the eigenvalues: two lightly damped oscillations
    (DETERMINED_CONTINUOUS; Cramer-Rao bound from the whole exact path 0.82% and 0.35%), 3000
    samples at steps uniform in [0.02, 0.2], 30% missing. Measured 2026-12-02 on these data:
    the fit 0.90% off at most (164 s for the test, load ~3), interpolation onto a grid 3.3%; on
    the benchmark's three data seeds 0.32-0.93%, interpolated 3.2-3.9%, missing only the fast
    oscillation (benchmarks/README.md)."""
    truth = true_continuous(eigenvalues=tuple(DETERMINED_CONTINUOUS))
    t = irregular_times(3000, seed=6)
    y = simulate_irregular(truth, t, seed=7, missing=0.3)
    model = api.fit(dataset(y, t), "lds", {"latent": 4, "max_iter": 100}, device="cpu").model
    assert model.arrays()["log_likelihood"][-1] > kalman_filter(truth.course(t), y).loglik.sum()
    found = relative_error(model.continuous_eigenvalues(), DETERMINED_CONTINUOUS)
    gridded = relative_error(interpolated_fit(y, t).continuous_eigenvalues_, DETERMINED_CONTINUOUS)
    assert found < 0.03, found
    assert gridded > 0.03, gridded


# -- ctlds ----------------------------------------------------------------------------------------
def test_ctlds_on_uniform_steps_is_the_logarithm_of_the_lds_fit():
    t = np.arange(800) * 0.1
    y = simulate_irregular(true_continuous(), t, seed=8, missing=0.1)
    data = Dataset.from_arrays(y, dt=0.1, variables=[f"y{i}" for i in range(N_OBSERVED)])
    params = {"latent": 4, "max_iter": 15}
    discrete = api.fit(data, "lds", params, device="cpu").model
    continuous = api.fit(data, "ctlds", params, device="cpu").model
    np.testing.assert_allclose(
        np.sort_complex(continuous.continuous_eigenvalues()),
        np.sort_complex(np.log(discrete.eigenvalues()) / 0.1), rtol=1e-7,
    )
    np.testing.assert_allclose(continuous.eigenvalues(), discrete.eigenvalues(), rtol=1e-7)
    report = continuous.metrics_["identifiability"]
    assert report["nyquist"] == pytest.approx(np.pi / 0.1) and report["warnings"] == []
    assert report["negative_real_eigenvalues"] == 0
    # Same forecasts: the continuous model sampled at dt is the discrete one.
    np.testing.assert_allclose(
        continuous.simulate(data.trials[0], 5), discrete.simulate(data.trials[0], 5), rtol=1e-6, atol=1e-9
    )


def test_ctlds_warns_of_a_negative_real_sampled_eigenvalue():
    one = StateSpace(
        a=np.array([[-0.7]]), c=np.array([[1.0], [0.5]]), offset=np.zeros(2), q=np.eye(1),
        r=np.full(2, 0.01), m0=np.zeros(1), p0=np.eye(1),
    )
    _, y = simulate_lds(one, 400, seed=9)
    data = Dataset.from_arrays(y, dt=1.0, variables=["a", "b"])
    with pytest.warns(UserWarning, match="negative real axis"):
        model = api.fit(data, "ctlds", {"latent": 1, "max_iter": 10}, device="cpu").model
    assert model.metrics_["identifiability"]["negative_real_eigenvalues"] == 1


def test_identifiability_names_aliasing_and_slow_sampling():
    t = np.arange(100) * 0.1
    trials = list(dataset(np.zeros((100, 1)), t).trials)
    quiet = identifiability(np.array([-0.5 + 3j, -0.5 - 3j]), trials, 0.1, 0)
    assert quiet["warnings"] == [] and quiet["highest_frequency"] == pytest.approx(3.0)
    near_nyquist = identifiability(np.array([-0.5 + 25j, -0.5 - 25j]), trials, 0.1, 0)
    assert len(near_nyquist["warnings"]) == 1 and "Nyquist" in near_nyquist["warnings"][0]
    fast_decay = identifiability(np.array([-30.0, -1.0]), trials, 0.1, 0)
    assert len(fast_decay["warnings"]) == 1 and "sample faster" in fast_decay["warnings"][0]
    assert fast_decay["slowest_time_constants_in_horizon"] == pytest.approx(9.9)
    # Irregular intervals: aliasing is judged against the shortest step's Nyquist frequency.
    irregular = list(dataset(np.zeros((4, 1)), np.array([0.0, 0.01, 0.2, 0.4])).trials)
    assert identifiability(np.array([-0.5 + 25j, -0.5 - 25j]), irregular, None, None)["warnings"] == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checks themselves never warn
        identifiability(np.array([-1.0]), trials, 0.1, 0)
