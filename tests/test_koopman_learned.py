"""The koopman backend's learned bases: ``-p basis=learned`` (singular functions by the nested
LoRA objective) and ``-p basis=autoencoder``, against systems whose Koopman spectra are known.

- AR(1) x_{t+1} = a x_t + sqrt(1 - a^2) e_t (stationary N(0, 1), reversible): the Koopman
  operator is self-adjoint with the Hermite polynomials He_n as eigenfunctions and a^n as
  eigenvalues, so its singular values are 1, a, a^2, ... (1 and a are the constant and the
  state, which the basis contains; a^2 is the first learned one).
- The slow-manifold system of tests/test_koopman.py (mu, 2 mu and lambda).
- A linear oscillator (eigenvalues +-i omega) for long rollouts.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_koopman import DT, MU, LAMBDA, TARGETS, matched_relative_errors, trajectories

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.errors import UsageError
from dynid.modelfile import describe_fit, load_model, save_model
from dynid.models.operator.koopman import Koopman, KoopmanParams
from dynid.training import TrainingOptions

A = 0.8


def ar1(n: int, seed: int = 0) -> Dataset:
    """n samples of the stationary AR(1) process (dt = 1)."""
    from scipy.signal import lfilter

    noise = np.random.default_rng(seed).normal(size=n)
    # x_0 ~ N(0, 1), then x_t = a x_{t-1} + sqrt(1 - a^2) e_t.
    rest = lfilter([np.sqrt(1 - A**2)], [1.0, -A], noise[1:], zi=[A * noise[0]])[0]
    return Dataset.from_arrays(np.concatenate([noise[:1], rest])[:, None], dt=1.0)


def test_learned_singular_values_of_an_ar1_process():
    params = KoopmanParams(basis="learned", features=1, epochs=25, batch=256, lr=3e-3,
                           width=32)
    model = Koopman(params).fit(ar1(2000), seed=0)
    values = np.array(model.metrics_["singular_values"])
    # The constant (sigma = 1, clipped) and the state (sigma = a) are in the basis; the learned
    # function must find He_2 (sigma = a^2 = 0.64). Sampling error of a canonical correlation
    # rho from N = 2000 pairs: (1 - rho^2) / sqrt(N) = 0.013, so 0.04 is 3 standard errors.
    np.testing.assert_allclose(values, [1.0, A, A**2], atol=0.04)
    # The operator on the aligned basis has the same spectrum (K is self-adjoint here).
    np.testing.assert_allclose(np.sort(model.eigenvalues_.real)[::-1], [1.0, A, A**2],
                               atol=0.04)
    assert np.all(np.abs(model.eigenvalues_.imag) <= 1e-8)
    np.testing.assert_allclose(model.continuous_eigenvalues_, np.log(model.eigenvalues_))


# Tiny networks and a few epochs: what these check (files, seeds, resuming) does not depend on
# how well the bases are trained.
TINY = {"width": 8, "depth": 1, "epochs": 3, "batch": 256}
TINY_BASES = {"learned": {"features": 2}, "autoencoder": {"latent": 3, "horizon": 4}}


@pytest.mark.parametrize("basis", sorted(TINY_BASES))
def test_learned_bases_round_trip_through_a_model_file(basis, tmp_path):
    data = trajectories(4, 41)
    params = KoopmanParams(basis=basis, **TINY, **TINY_BASES[basis])
    model = Koopman(params).fit(data, seed=0)
    again = Koopman(params).fit(data, seed=0)
    path = str(tmp_path / "model.dynid")
    save_model(model, path, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.0))
    restored = load_model(path).model
    assert restored.params == model.params
    history = data.trials[0]
    forecast = model.simulate(history, 20)
    assert forecast.shape == (20, 2) and np.all(np.isfinite(forecast))
    np.testing.assert_array_equal(restored.simulate(history, 20), forecast)
    np.testing.assert_array_equal(again.simulate(history, 20), forecast)  # seeded
    arrays = restored.arrays()
    r = arrays["eigenvalues"].shape[0]
    assert arrays["modes"].shape == (2, r) and arrays["timescales"].shape == (r,)
    np.testing.assert_allclose(arrays["continuous_eigenvalues"],
                               np.log(arrays["eigenvalues"]) / DT)


class Interrupt(Exception):
    pass


class StopAt:
    """A progress display that interrupts the fit when epoch ``epoch`` reports."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def update(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.epoch == self.epoch:
            raise Interrupt

    def notice(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("basis", sorted(TINY_BASES))
def test_an_interrupted_fit_resumes_bit_identically(basis, tmp_path):
    data = trajectories(4, 41)
    params = KoopmanParams(basis=basis, **{**TINY, "epochs": 5}, **TINY_BASES[basis])
    whole = Koopman(params).fit(data, seed=2)
    with pytest.raises(Interrupt):
        Koopman(params).fit(data, seed=2, training=TrainingOptions(
            checkpoint_dir=str(tmp_path), checkpoint_every_s=0.0, progress=StopAt(3)))
    resumed = Koopman(params).fit(data, seed=2, training=TrainingOptions(
        checkpoint_dir=str(tmp_path), resume=True))
    assert resumed.metrics_["resumed_from"] == 2 and resumed.metrics_["epochs"] == 5
    for name, value in whole.arrays().items():
        assert np.array_equal(resumed.arrays()[name], value), name


def test_training_options_need_a_trained_basis():
    data = trajectories(2, 41)
    with pytest.raises(UsageError, match="trains no network"):
        api.fit(data, "koopman", {"basis": "poly"}, training=TrainingOptions(max_time_s=5.0))
    fitted = api.fit(data, "koopman", ["basis=learned", "features=1", "width=4", "depth=1",
                                       "epochs=50"], training=TrainingOptions(max_time_s=1e-3))
    assert fitted.model.metrics_["stopped"] == "max_time"


def hermite_features(z: np.ndarray) -> np.ndarray:
    """He_0..He_3 of z (N,), orthonormal under N(0, 1) (He_n / sqrt(n!))."""
    return np.column_stack([np.ones_like(z), z, (z**2 - 1) / np.sqrt(2), (z**3 - 3 * z) / np.sqrt(6)])


def test_the_nested_loss_is_lowest_at_the_ordered_singular_functions():
    import torch

    from dynid.models.operator.singular_functions import nested_lora_loss

    x = ar1(100_000, seed=1).trials[0].x[:, 0]
    now, later = hermite_features(x[:-1]), hermite_features(x[1:])
    sigma = A ** np.arange(4)
    w = np.arange(4, 0, -1) / 4

    def loss(order: list[int], scale: np.ndarray) -> float:
        return float(nested_lora_loss(torch.as_tensor(now[:, order] * scale),
                                      torch.as_tensor(later[:, order] * scale)))

    # f_i = g_i = sqrt(sigma_i) He_i: the loss is -sum_i w_i sigma_i^2 (up to sampling error,
    # about 1 / sqrt(N) = 0.003 relative, of fourth moments).
    best = loss([0, 1, 2, 3], np.sqrt(sigma))
    np.testing.assert_allclose(best, -np.sum(w * sigma**2), rtol=0.02)
    # The nesting orders the modes: the same functions in another order, or scaled otherwise,
    # do worse.
    assert loss([0, 2, 1, 3], np.sqrt(sigma[[0, 2, 1, 3]])) > best + 0.01
    assert loss([0, 1, 2, 3], np.ones(4)) > best + 0.01


def test_the_cca_step_gives_the_singular_values_and_spectrum_of_exact_features():
    from dynid.models.operator.singular_functions import cca_estimate

    x = ar1(100_000, seed=2).trials[0].x[:, 0]
    # Any invertible mix of the features spans the same space: the CCA undoes it.
    mix = np.random.default_rng(0).normal(size=(4, 4))
    now, later = hermite_features(x[:-1]) @ mix, hermite_features(x[1:]) @ mix
    estimate = cca_estimate(now, later, later)
    expected = A ** np.arange(4)
    # Sampling error of the He_3 correlation from 1e5 pairs is about 0.01.
    np.testing.assert_allclose(estimate.singular_values, expected, atol=0.02)
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(estimate.operator).real)[::-1],
                               expected, atol=0.02)
