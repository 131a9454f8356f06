"""The ``slds`` backend against ground truth: the block-tridiagonal solve against a dense
inverse; with one regime the variational bound is exact, equal to the Kalman filter's
log-likelihood; on two regimes of rotation at different frequencies, the switch times, the
regimes (up to relabelling) and the frequencies; the bound never decreases; ``dynid states``."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from dynid import api
from dynid.data.dataset import Dataset
from dynid.linear.kalman import StateSpace, kalman_filter
from dynid.models.latent import markov, switching

from conftest import write_csv

FREQUENCIES = (0.1, 0.5)  # radians per step of the two regimes
OBSERVATION = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
N = 400


def rotation(angle: float, radius: float = 0.99) -> np.ndarray:
    return radius * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


def two_regimes(seed: int, missing: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Regimes (N,) switching every 60-119 steps and observations (N, 3) of a 2-D latent state
    rotating at FREQUENCIES, process and observation noise sd 0.05; ``missing`` of the cells NaN."""
    rng = np.random.default_rng(seed)
    regimes = np.concatenate([np.full(rng.integers(60, 120), k % 2) for k in range(N // 60 + 1)])[:N]
    z = np.zeros((N, 2))
    z[0] = [1.0, 0.0]
    for t in range(1, N):
        z[t] = rotation(FREQUENCIES[regimes[t]]) @ z[t - 1] + 0.05 * rng.normal(size=2)
    y = z @ OBSERVATION.T + 0.05 * rng.normal(size=(N, 3))
    y[rng.random(y.shape) < missing] = np.nan
    return regimes, y


def dataset(y: np.ndarray) -> Dataset:
    return Dataset.from_arrays(y, dt=0.1, variables=["a", "b", "c"])


@functools.cache
def fitted(missing: float):
    regimes, y = two_regimes(seed=0, missing=missing)
    model = api.fit(dataset(y), "slds", {"regimes": 2, "latent": 2, "restarts": 2}, seed=0, device="cpu").model
    return model, regimes, y


def test_block_tridiagonal_solve_matches_the_dense_inverse():
    rng = np.random.default_rng(0)
    steps, n = 6, 2
    root = np.tril(rng.normal(size=(steps * n, steps * n)))
    precision = root @ root.T + steps * n * np.eye(steps * n)
    band = np.abs(np.subtract.outer(np.arange(steps * n) // n, np.arange(steps * n) // n)) <= 1
    precision = np.where(band, precision, 0.0) + 10 * np.eye(steps * n)  # block tridiagonal, SPD
    linear = rng.normal(size=steps * n)
    blocks = precision.reshape(steps, n, steps, n)
    chain = switching._solve_block_tridiagonal(
        np.stack([blocks[t, :, t] for t in range(steps)]),
        np.stack([blocks[t + 1, :, t] for t in range(steps - 1)]),
        linear.reshape(steps, n),
    )
    cov = np.linalg.inv(precision)
    np.testing.assert_allclose(chain.means.ravel(), cov @ linear, rtol=1e-10)
    full = cov.reshape(steps, n, steps, n)
    np.testing.assert_allclose(chain.covs, np.stack([full[t, :, t] for t in range(steps)]), rtol=1e-10)
    np.testing.assert_allclose(chain.cross, np.stack([full[t + 1, :, t] for t in range(steps - 1)]), rtol=1e-9, atol=1e-14)
    assert chain.log_det == pytest.approx(np.linalg.slogdet(precision)[1], rel=1e-12)


def test_one_regime_bound_is_the_exact_kalman_log_likelihood():
    """With K = 1, q(s) is exact and q(z) is the exact posterior: the ELBO is log p(y)."""
    _, y = two_regimes(seed=1, missing=0.2)
    a, q = rotation(0.3), 0.01 * np.eye(2)
    r, m0, p0 = np.array([0.01, 0.02, 0.03]), np.array([0.5, -0.5]), 0.2 * np.eye(2)
    offset = np.array([0.1, 0.0, -0.1])
    model = switching.Switching(
        chain=markov.Chain(np.ones(1), np.ones((1, 1))), dynamics=a[None], offsets=np.zeros((1, 2)), noise=q[None],
        emission=OBSERVATION, emission_offset=offset, emission_noise=r, initial_mean=m0, initial_cov=p0, floor=0.0,
    )
    _, elbo = switching.infer(model, y, np.ones((N, 1)), None)
    exact = kalman_filter(StateSpace(a=a, c=OBSERVATION, offset=offset, q=q, r=r, m0=m0, p0=p0), y).loglik.sum()
    assert elbo == pytest.approx(exact, rel=1e-10)


@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_switch_times_regimes_and_frequencies(missing):
    model, regimes, y = fitted(missing)
    states = api.states(model, dataset(y))
    found = states.state if np.mean(states.state == regimes) >= 0.5 else 1 - states.state
    assert np.mean(found == regimes) >= 0.9
    true_switches = np.flatnonzero(np.diff(regimes))
    found_switches = np.flatnonzero(np.diff(found))
    assert len(found_switches) == len(true_switches), (true_switches, found_switches)
    assert np.abs(found_switches - true_switches).max() <= 3, (true_switches, found_switches)
    angles = np.sort(np.abs(np.angle(model.eigenvalues())))
    np.testing.assert_allclose(angles, np.repeat(FREQUENCIES, 2), atol=0.03)


@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_elbo_never_decreases(missing):
    model, _, _ = fitted(missing)
    history = model.arrays()["elbo"]
    assert len(history) > 2
    assert np.all(np.diff(history) >= -1e-9 * np.abs(history[1:])), np.diff(history).min()


def test_forecast_continues_the_current_rotation():
    """From a history in the slow regime, the one-step forecast is near C A_slow z_T + d."""
    model, regimes, y = fitted(0.0)
    end = int(np.flatnonzero(np.diff(regimes))[0])  # the last sample of the first (slow) regime
    history = dataset(y[: end + 1]).trials[0]
    forecast = model.simulate(history, 3)
    assert forecast.shape == (3, 3) and np.all(np.isfinite(forecast))
    assert np.abs(forecast[0] - y[end + 1]).max() < 0.3


def test_states_command_writes_regimes_and_latent_columns(cli, tmp_path):
    from dynid.modelfile import describe_fit, save_model

    model, _, y = fitted(0.0)
    data_path = write_csv(tmp_path / "slds.csv", y, ["a", "b", "c"], dt=0.1)
    model_path = str(tmp_path / "m.slds.dynid")
    save_model(model, model_path, describe_fit(model, dataset(y), seed=0, device="cpu", fit_seconds=0.0))
    result = cli("states", model_path, data_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "t,state,p_state_0,p_state_1,z_0,z_1,z_0_sd,z_1_sd"
    table = np.loadtxt(lines[1:], delimiter=",")
    expected = api.states(model, dataset(y))
    np.testing.assert_array_equal(table[:, 1], expected.state)
    np.testing.assert_allclose(table[:, 4:6], expected.means, rtol=1e-9, atol=1e-12)


def test_report_draws_the_regimes_as_a_band_over_the_data():
    from dynid.modelfile import ModelFile, describe_fit
    from dynid.report import build_report
    from dynid.report.regimes import state_runs
    from tests.test_report import SVG_XMLNS, check_page

    model, regimes, y = fitted(0.0)
    data = dataset(y)
    page = build_report([("m.slds.dynid", ModelFile(model, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.0)))], [], data)
    svgs = check_page(page)
    assert "Regimes over time" in page
    states = api.states(model, data)
    runs = state_runs(states.t, states.state)
    assert len(runs) == len(np.flatnonzero(np.diff(regimes))) + 1
    rect, title = f"{{{SVG_XMLNS}}}rect", f"{{{SVG_XMLNS}}}title"
    band = [svg for svg in svgs if any((r.findtext(title) or "").startswith("state ") for r in svg.iter(rect))]
    assert len(band) == 1
    tips = [r.findtext(title) for r in band[0].iter(rect) if (r.findtext(title) or "").startswith("state ")]
    assert tips == [f"state {k}: t = {lo:g} to {hi:g}" for lo, hi, k in runs]


def test_state_runs_cover_the_samples():
    from dynid.report.regimes import state_runs

    t = np.arange(6) * 0.5
    assert state_runs(t, np.array([0, 0, 1, 1, 1, 0])) == [(0.0, 1.0, 0), (1.0, 2.5, 1), (2.5, 2.5, 0)]


def test_labels_fix_regimes_with_their_own_numbers():
    """10% of the rows labelled with the true regime, numbered against the unlabelled fit's
    convention (regime 1 = the fast one): the labelled fit keeps the labels' numbering."""
    regimes, y = two_regimes(seed=0)
    labels = np.where(np.random.default_rng(3).random(N) < 0.1, 1 - regimes, np.nan)  # fast regime = 0 here
    data = Dataset.from_arrays(np.column_stack([y, labels]), dt=0.1, variables=["a", "b", "c", "label"])
    model = api.fit(data, "slds", {"regimes": 2, "latent": 2, "restarts": 1}, seed=0, device="cpu", labels="label").model
    states = api.states(model, data, labels="label")
    given = ~np.isnan(labels)
    assert model.metrics_["labelled_samples"] == int(given.sum())
    np.testing.assert_array_equal(states.state[given], labels[given])
    assert np.mean(states.state == 1 - regimes) >= 0.9  # no relabelling
    fast = np.abs(np.angle(np.linalg.eigvals(model.arrays()["dynamics"][0]))).max()
    assert fast == pytest.approx(FREQUENCIES[1], abs=0.03)
