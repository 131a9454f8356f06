"""The ``lds`` backend against ground truth: a known 4-latent / 8-observed LDS simulated with
numpy, fitted with and without missing cells; the Kalman filter and smoother against the exact
Gaussian conditionals; interval coverage; the ``states`` command and ``--interval``."""

from __future__ import annotations

import functools
import json
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.linear.kalman import Course, StateSpace, kalman_filter, rts_smoother

from conftest import write_csv

N_LATENT, N_OBSERVED = 4, 8
TRUE_EIGENVALUES = np.array([0.95 * np.exp(0.3j), 0.95 * np.exp(-0.3j), 0.8, 0.6])
OBSERVATION_SD = 0.3
N_TRAIN = 3000


@functools.cache
def true_system(seed: int = 0) -> StateSpace:
    """A = S diag-block(eigenvalues) S^-1 with random S; C random; Q = I; R = 0.09 I; offset 1."""
    rng = np.random.default_rng(seed)
    radius, angle = np.abs(TRUE_EIGENVALUES[0]), np.angle(TRUE_EIGENVALUES[0])
    block = np.zeros((N_LATENT, N_LATENT))
    block[:2, :2] = radius * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    block[2, 2], block[3, 3] = 0.8, 0.6
    basis = rng.normal(size=(N_LATENT, N_LATENT))
    return StateSpace(
        a=basis @ block @ np.linalg.inv(basis),
        c=rng.normal(size=(N_OBSERVED, N_LATENT)),
        offset=np.ones(N_OBSERVED),
        q=np.eye(N_LATENT),
        r=np.full(N_OBSERVED, OBSERVATION_SD**2),
        m0=np.zeros(N_LATENT),
        p0=np.eye(N_LATENT),
    )


def simulate_lds(
    model: StateSpace, n: int, seed: int, missing: float = 0.0, u: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """States z (n, k) and observations y (n, p) with a ``missing`` fraction of cells NaN;
    inputs u (n, m) when the model has any."""
    rng = np.random.default_rng(seed)
    u = np.zeros((n, 0)) if u is None else u
    z = np.empty((n, model.n_latent))
    state = rng.multivariate_normal(model.m0, model.p0)
    for t in range(n):
        z[t] = state
        state = model.a @ state + model.b @ u[t] + rng.multivariate_normal(np.zeros(model.n_latent), model.q)
    y = z @ model.c.T + u @ model.d.T + model.offset + rng.normal(size=(n, model.c.shape[0])) * np.sqrt(model.r)
    y[rng.random(y.shape) < missing] = np.nan
    return z, y


def dataset(y: np.ndarray, dt: float = 0.1) -> Dataset:
    return Dataset.from_arrays(y, dt=dt, variables=[f"y{i}" for i in range(y.shape[1])])


@functools.cache
def fitted(missing: float):
    """The lds fit (latent=4) on N_TRAIN samples with ``missing`` cells NaN, and the true states."""
    z, y = simulate_lds(true_system(), N_TRAIN, seed=1, missing=missing)
    model = api.fit(dataset(y), "lds", {"latent": 4, "max_iter": 40}, device="cpu").model
    return model, z, y


def matched_error(found: np.ndarray, truth: np.ndarray) -> float:
    """Largest |found - truth| over the best one-to-one matching of eigenvalues."""
    distance = np.abs(found[:, None] - truth[None, :])
    rows, cols = linear_sum_assignment(distance)
    return float(distance[rows, cols].max())


# -- the filter and smoother against the exact Gaussian conditionals -----------------------------
def joint_moments(course: Course) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Means and covariances of the stacked states (T n) and observations (T p), and their
    cross-covariance, computed directly from the model laid out over T samples."""
    steps, n = course.offsets.shape[0], course.m0.shape[0]
    mean_z = np.zeros((steps, n))
    cov_z = np.zeros((steps * n, steps * n))
    mean_z[0] = course.m0
    marginal = [course.p0]
    for t in range(1, steps):
        mean_z[t] = course.a[t - 1] @ mean_z[t - 1] + course.drive[t - 1]
        marginal.append(course.a[t - 1] @ marginal[-1] @ course.a[t - 1].T + course.q[t - 1])
    for s in range(steps):
        block = marginal[s]  # Cov(z_t, z_s), t = s, s + 1, ...
        for t in range(s, steps):
            if t > s:
                block = course.a[t - 1] @ block
            cov_z[t * n:(t + 1) * n, s * n:(s + 1) * n] = block
            cov_z[s * n:(s + 1) * n, t * n:(t + 1) * n] = block.T
    lift = np.kron(np.eye(steps), course.c)
    mean_y = (mean_z @ course.c.T + course.offsets).ravel()
    cov_y = lift @ cov_z @ lift.T + np.diag(np.tile(course.r, steps))
    return mean_z.ravel(), cov_z, mean_y, cov_y, cov_z @ lift.T


def assert_exact_gaussian(course: Course, y: np.ndarray) -> None:
    """The filter's log-likelihood and last mean, and the smoother's means, covariances and
    cross-covariances, equal the Gaussian conditionals of the joint distribution."""
    steps, n = y.shape[0], course.m0.shape[0]
    mean_z, cov_z, mean_y, cov_y, cov_zy = joint_moments(course)
    seen = ~np.isnan(y.ravel())
    residual = y.ravel()[seen] - mean_y[seen]
    cov_seen = cov_y[np.ix_(seen, seen)]
    _, logdet = np.linalg.slogdet(cov_seen)
    exact_loglik = -0.5 * (seen.sum() * np.log(2 * np.pi) + logdet + residual @ np.linalg.solve(cov_seen, residual))
    gain = np.linalg.solve(cov_seen, cov_zy[:, seen].T).T
    exact_mean = (mean_z + gain @ residual).reshape(steps, -1)
    exact_cov = cov_z - gain @ cov_zy[:, seen].T

    filtered = kalman_filter(course, y)
    smoothed = rts_smoother(course, filtered)
    assert filtered.loglik.sum() == pytest.approx(exact_loglik, rel=1e-10)
    np.testing.assert_allclose(smoothed.means, exact_mean, atol=1e-9)
    for t in range(steps):
        np.testing.assert_allclose(smoothed.covs[t], exact_cov[t * n:(t + 1) * n, t * n:(t + 1) * n], atol=1e-9)
    for t in range(steps - 1):
        np.testing.assert_allclose(smoothed.cross[t], exact_cov[(t + 1) * n:(t + 2) * n, t * n:(t + 1) * n], atol=1e-9)
    # The filtered mean of the last step is the smoothed one: both condition on everything.
    np.testing.assert_allclose(filtered.means[-1], exact_mean[-1], atol=1e-9)


def test_filter_and_smoother_match_the_exact_gaussian_with_missing_cells():
    model = true_system()
    steps = 12
    _, y = simulate_lds(model, steps, seed=3, missing=0.4)
    y[5] = np.nan  # a row with nothing observed
    assert kalman_filter(model, y).loglik[5] == 0.0
    assert_exact_gaussian(model.course(steps), y)


def test_filter_with_inputs_matches_the_exact_gaussian():
    rng = np.random.default_rng(8)
    model = replace(true_system(), b=rng.normal(size=(N_LATENT, 2)), d=rng.normal(size=(N_OBSERVED, 2)))
    steps = 10
    _, y = simulate_lds(true_system(), steps, seed=9, missing=0.3)
    assert_exact_gaussian(model.course(steps, rng.normal(size=(steps, 2))), y)


# -- identification -------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_eigenvalues_within_0_02_of_the_truth(missing):
    model, _, y = fitted(missing)
    assert np.isnan(y).mean() == pytest.approx(missing, abs=0.01)
    assert model.eigenvalues().shape == (N_LATENT,)
    assert matched_error(model.eigenvalues(), TRUE_EIGENVALUES) < 0.02
    stored = model.arrays()
    np.testing.assert_allclose(stored["continuous_eigenvalues"], np.log(stored["eigenvalues"]) / 0.1)


def markov_parameters(model: StateSpace, count: int) -> np.ndarray:
    """D, C B, C A B, ... (count, p, m): the input-to-output impulse response, the same for
    every similar state basis."""
    blocks, power = [model.d], np.eye(model.n_latent)
    for _ in range(count - 1):
        blocks.append(model.c @ power @ model.b)
        power = model.a @ power
    return np.stack(blocks)


def test_inputs_impulse_response_within_10_percent_of_the_truth():
    # 10 % of the largest response: the estimate from 1500 gappy samples is off by ~6 %, while an
    # input entering one step early or late, or through the wrong matrix, is off by ~100 %.
    rng = np.random.default_rng(10)
    truth = replace(true_system(), b=rng.normal(size=(N_LATENT, 2)), d=rng.normal(size=(N_OBSERVED, 2)))
    u = rng.normal(size=(1500, 2))
    _, y = simulate_lds(truth, 1500, seed=11, missing=0.3, u=u)
    data = Dataset.from_arrays(y, dt=0.1, u=u, variables=[f"y{i}" for i in range(N_OBSERVED)], inputs=["u0", "u1"])
    model = api.fit(data, "lds", {"latent": 4, "max_iter": 40}, device="cpu").model
    assert model.inputs_ == ("u0", "u1") and model.arrays()["B"].shape == (N_LATENT, 2)
    expected = markov_parameters(truth, 6)
    found = markov_parameters(model.model_, 6)
    assert np.max(np.abs(found - expected)) < 0.1 * np.max(np.abs(expected)), np.abs(found - expected).max()
    # Forecasts use the inputs: B u and D u of the given future inputs.
    future = rng.normal(size=(5, 2))
    history = data.trials[0]
    shifted = model.simulate(history, 5, future + 1.0) - model.simulate(history, 5, future)
    np.testing.assert_allclose(shifted[0], model.model_.d @ np.ones(2), rtol=1e-9)


@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_em_log_likelihood_never_decreases(missing):
    model, _, _ = fitted(missing)
    history = model.arrays()["log_likelihood"]
    assert len(history) > 2
    steps = np.diff(history)
    assert np.all(steps >= -1e-9 * np.abs(history[1:])), steps.min()
    assert history[-1] > history[0]


def test_smoothed_states_match_the_truth_up_to_a_linear_map():
    model, z, y = fitted(0.3)
    states = api.states(model, dataset(y))
    assert states.means.shape == (N_TRAIN, N_LATENT) and states.sds.shape == (N_TRAIN, N_LATENT)
    assert np.all(states.sds > 0)
    design = np.hstack([states.means, np.ones((N_TRAIN, 1))])
    coef, *_ = np.linalg.lstsq(design, z, rcond=None)
    r2 = 1 - np.sum((z - design @ coef) ** 2, axis=0) / np.sum((z - z.mean(axis=0)) ** 2, axis=0)
    assert np.all(r2 > 0.9), r2


def test_a_column_without_values_is_named():
    _, y = simulate_lds(true_system(), 100, seed=4)
    y[:, 3] = np.nan
    with pytest.raises(DataError, match="'y3'"):
        api.fit(dataset(y), "lds", {"latent": 2})


def test_latent_auto_picks_four_and_stops_two_sizes_past_it():
    # Room for 8 states: 5 and 6 score below 4, so 7 and 8 are not fitted.
    _, y = simulate_lds(true_system(), 1500, seed=2, missing=0.1)
    model = api.fit(dataset(y), "lds", {"max_latent": 8, "max_iter": 15}, device="cpu").model
    scores = model.metrics_["held_out_log_likelihood"]
    assert model.metrics_["latent"] == 4, scores
    assert set(scores) == {str(n) for n in range(1, 7)}


def test_90_percent_interval_covers_the_truth_in_85_to_95_percent_of_steps():
    model, _, _ = fitted(0.3)
    history_length, horizon, rollouts = 50, 10, 200
    _, y = simulate_lds(true_system(), rollouts * (history_length + horizon), seed=7)
    covered = []
    for k in range(rollouts):
        window = y[k * (history_length + horizon):(k + 1) * (history_length + horizon)]
        history = Trial(np.arange(history_length) * 0.1, window[:history_length])
        band = model.predictive(history, horizon, None, 0.9)
        truth = window[history_length:]
        covered.append((band.lower <= truth) & (truth <= band.upper))
        np.testing.assert_allclose(band.mean, model.simulate(history, horizon))
    coverage = np.mean(covered)
    assert 0.85 <= coverage <= 0.95, coverage


# -- the commands ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gappy_files(tmp_path_factory):
    """A gappy CSV (30 % NaN cells) of the true system, and an lds model file fitted on it."""
    from dynid.modelfile import describe_fit, save_model

    folder = tmp_path_factory.mktemp("lds")
    _, y = simulate_lds(true_system(), 400, seed=5, missing=0.3)
    path = write_csv(folder / "gappy.csv", y, [f"y{i}" for i in range(N_OBSERVED)], dt=0.1)
    data = dataset(y)
    model = api.fit(data, "lds", {"latent": "4", "max_iter": 10}, device="cpu").model
    model_path = str(folder / "gappy.lds.dynid")
    save_model(model, model_path, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.0))
    return path, model_path, model, data


def test_states_command_writes_one_row_per_data_row(cli, gappy_files, tmp_path):
    data_path, model_path, model, data = gappy_files
    result = cli("states", model_path, data_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    names = [f"z_{k}" for k in range(N_LATENT)]
    assert lines[0] == ",".join(["t", *names, *(f"{name}_sd" for name in names)])
    assert len(lines) == 1 + data.n_samples
    table = np.loadtxt(lines[1:], delimiter=",")
    expected = api.states(model, data)
    np.testing.assert_allclose(table[:, 0], data.trials[0].t)
    np.testing.assert_allclose(table[:, 1:], np.hstack([expected.means, expected.sds]), rtol=1e-12)
    document = json.loads(cli("states", model_path, data_path, "--json").stdout)
    assert document["kind"] == "states" and document["states"] == names
    assert np.array(document["z"]).shape == (data.n_samples, N_LATENT)
    h5 = tmp_path / "states.h5"
    assert cli("states", model_path, data_path, "-o", str(h5)).returncode == 0
    from dynid.data import load

    back = load(str(h5))
    np.testing.assert_allclose(back.trials[0].x[:, :N_LATENT], expected.means, rtol=1e-12)


def test_states_and_interval_refused_by_models_without_them(cli, tmp_path):
    _, y = simulate_lds(true_system(), 200, seed=6)
    data_path = write_csv(tmp_path / "full.csv", y, [f"y{i}" for i in range(N_OBSERVED)], dt=0.1)
    dmd_path = tmp_path / "m.dmd.dynid"
    assert cli("fit", data_path, "--model", "dmd", "-o", str(dmd_path)).returncode == 0
    result = cli("states", str(dmd_path), data_path)
    assert result.returncode == 2 and "no hidden states" in result.stderr.decode()
    result = cli("forecast", str(dmd_path), data_path, "-n", "3", "--interval", "0.9")
    assert result.returncode == 2 and "--interval" in result.stderr.decode()


def test_forecast_interval_columns(cli, gappy_files):
    data_path, model_path, model, data = gappy_files
    result = cli("forecast", model_path, data_path, "-n", "5", "--interval", "0.9")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    variables = [f"y{i}" for i in range(N_OBSERVED)]
    header = ["t", *variables, *(f"{v}_lower" for v in variables), *(f"{v}_upper" for v in variables)]
    assert lines[0] == ",".join(header)
    table = np.loadtxt(lines[1:], delimiter=",")
    mean, lower, upper = np.split(table[:, 1:], 3, axis=1)
    np.testing.assert_allclose(mean, model.simulate(data.trials[0], 5), rtol=1e-12)
    assert np.all(lower < mean) and np.all(mean < upper)
    # Uncertainty grows with the horizon of a stable model started from a known state.
    assert np.all(np.diff(upper - lower, axis=0) >= -1e-12)
    document = json.loads(cli("forecast", model_path, data_path, "-n", "5", "--interval", "0.9", "--json").stdout)
    assert document["level"] == 0.9
    np.testing.assert_allclose(document["lower"], lower, rtol=1e-12)
    np.testing.assert_allclose(document["upper"], upper, rtol=1e-12)
    result = cli("forecast", model_path, data_path, "-n", "2", "--interval", "1.5")
    assert result.returncode == 2 and "--interval" in result.stderr.decode()
