"""Ground truth for the ``ltc`` backend (closed-form continuous-time cells): a damped oscillator
sampled at irregular times is forecast over one period, and a fit interrupted mid-training
resumes to the same weights, bit for bit, on the CPU. Round trips, shapes and the seed contract
are in tests/test_backend_contract.py."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.linalg

from dynid.data.dataset import Dataset, Trial
from dynid.models.ltc import LTC, LTCParams

from conftest import assert_same_arrays, fit_interrupted_and_resumed

# x' = A x: period pi, decay time 20; samples 0.1 apart on median, each gap jittered by +-50 %.
A = np.array([[-0.05, 2.0], [-2.0, -0.05]])
X0 = np.array([2.0, 0.0])
N_FIT = 200
SMALL = LTCParams(hidden=16, window=16, epochs=40, lr=5e-3)


def exact(times: np.ndarray) -> np.ndarray:
    return np.stack([scipy.linalg.expm(A * s) @ X0 for s in times])


@functools.cache
def oscillator() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    t = np.concatenate([[0.0], np.cumsum(0.1 * (1 + rng.uniform(-0.5, 0.5, N_FIT - 1)))])
    return t, exact(t)


def test_forecasts_an_irregularly_sampled_damped_oscillator_for_a_period():
    t, x = oscillator()
    data = Dataset.from_arrays(x, t=t)
    assert data.dt is None
    model = LTC(SMALL).fit(data, seed=0)
    assert model.dt_ == pytest.approx(np.median(np.diff(t)))
    horizon = int(np.ceil(np.pi / model.dt_))
    forecast = model.simulate(Trial(t, x), horizon)
    truth = exact(t[-1] + model.dt_ * np.arange(1, horizon + 1))
    # Measured 0.024 at these settings; a model that only holds the last value scores ~0.5.
    assert np.sqrt(np.mean((forecast - truth) ** 2)) / x.std() < 0.1
    assert model.metrics_["training_curve"]["epoch"][-1] == model.metrics_["epochs"]


def test_an_interrupted_fit_resumes_bit_identically(tmp_path):
    t, x = oscillator()
    data = Dataset.from_arrays(x, t=t)
    params = LTCParams(hidden=8, backbone=16, window=8, epochs=6)
    whole, resumed = fit_interrupted_and_resumed(lambda: LTC(params), data, 4, 4, tmp_path)
    assert resumed.metrics_["resumed_from"] == 3 and resumed.metrics_["epochs"] == 6
    assert_same_arrays(whole, resumed)
