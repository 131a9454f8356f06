"""DMD / DMDc against systems whose operators and spectra are known exactly."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import block_diag, expm

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, UsageError
from dynid.models.dmd import DMD


def rotation(radius: float, angle: float) -> np.ndarray:
    """2x2 block with eigenvalues radius * exp(+-i angle)."""
    c, s = np.cos(angle), np.sin(angle)
    return radius * np.array([[c, -s], [s, c]])


def orthogonal(d: int, seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q * np.sign(np.diag(r))


# 6-D system with eigenvalues r e^{+-i theta} for three (r, theta), in a random basis.
TRUE_BLOCKS = [(0.99, 0.3), (0.9, 1.1), (0.95, 0.05)]
TRUE_EIGS = np.array([r * np.exp(s * 1j * th) for r, th in TRUE_BLOCKS for s in (1, -1)])
Q6 = orthogonal(6, seed=1)
A6 = Q6 @ block_diag(*[rotation(r, th) for r, th in TRUE_BLOCKS]) @ Q6.T


def iterate(a: np.ndarray, x0: np.ndarray, n: int, b=None, u=None) -> np.ndarray:
    """n samples of x_{k+1} = A x_k (+ B u_k)."""
    x = np.zeros((n, a.shape[0]))
    x[0] = x0
    for k in range(n - 1):
        x[k + 1] = a @ x[k] + (0 if b is None else b @ u[k])
    return x


def match(estimated: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """|estimate - truth| after pairing each true eigenvalue with its nearest estimate (1:1)."""
    assert estimated.shape == truth.shape
    remaining = list(estimated)
    errors = []
    for value in truth:
        i = int(np.argmin([abs(e - value) for e in remaining]))
        errors.append(abs(remaining.pop(i) - value))
    return np.array(errors)


def test_recovers_discrete_eigenvalues_noise_free():
    x = iterate(A6, np.random.default_rng(0).normal(size=6), 200)
    model = DMD().fit(Dataset.from_arrays(x, dt=0.1))
    assert model.metrics_["rank"] == 6
    assert np.max(match(model.eigenvalues(), TRUE_EIGS)) < 1e-6
    np.testing.assert_allclose(model.A_, A6, atol=1e-8)
    # modes are eigenvectors of A with the reported eigenvalues
    modes, lam = model.modes_, model.eigenvalues()
    np.testing.assert_allclose(model.A_ @ modes, modes * lam, atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(modes, axis=0), 1.0)
    assert np.all(np.diff(np.abs(lam)) <= 1e-12)  # sorted by decreasing modulus
    assert model.metrics_["one_step_rmse_overall"] < 1e-10
    assert model.metrics_["one_step_r2"] == pytest.approx([1.0] * 6)


def test_recovers_continuous_eigenvalues_of_sampled_ode():
    dt = 0.05
    true = np.array([-0.1 + 2j, -0.1 - 2j, -0.5 + 0.7j, -0.5 - 0.7j])
    blocks = [np.array([[lam.real, -lam.imag], [lam.imag, lam.real]]) for lam in true[::2]]
    q = orthogonal(4, seed=3)
    a_c = q @ block_diag(*blocks) @ q.T
    x = iterate(expm(a_c * dt), np.array([1.0, -0.5, 2.0, 0.3]), 300)
    model = DMD().fit(Dataset.from_arrays(x, dt=dt))
    arrays = model.arrays()
    assert np.max(match(arrays["continuous_eigenvalues"], true)) < 1e-6
    assert np.max(match(arrays["growth_rates"] + 0j, true.real + 0j)) < 1e-6
    assert np.max(match(arrays["frequencies"] + 0j, true.imag / (2 * np.pi) + 0j)) < 1e-6


def test_several_short_trials_pool_without_crossing_boundaries():
    # Four samples (three pairs) per trial: no trial alone determines the 6x6 operator, and a
    # pair spanning two trials would be inconsistent with A6.
    rng = np.random.default_rng(4)
    trials = [iterate(A6, rng.normal(size=6), 4) for _ in range(3)]
    model = DMD().fit(Dataset.from_arrays(trials))
    assert model.metrics_["n_pairs"] == 9
    assert np.max(match(model.eigenvalues(), TRUE_EIGS)) < 1e-6
    concatenated = DMD().fit(Dataset.from_arrays(np.vstack(trials)))
    assert np.max(match(concatenated.eigenvalues(), TRUE_EIGS)) > 1e-2


def test_rank_truncation_keeps_dominant_modes():
    blocks = [(0.99, 0.2), (0.95, 0.9), (0.9, 2.0)]
    q = orthogonal(6, seed=2)
    a = q @ block_diag(*[rotation(r, th) for r, th in blocks]) @ q.T
    x = iterate(a, q @ np.array([10.0, 0, 1e-3, 0, 1e-3, 0]), 300)
    model = DMD(DMD.Params(rank=2)).fit(Dataset.from_arrays(x))
    assert model.metrics_["rank"] == 2
    assert model.eigenvalues().shape == (2,) and model.modes_.shape == (6, 2)
    assert np.max(match(model.eigenvalues(), 0.99 * np.exp([0.2j, -0.2j]))) < 1e-6
    assert np.linalg.matrix_rank(model.A_) == 2


def test_default_rank_uses_optimal_hard_threshold_on_noisy_high_dimensional_data():
    # 40 channels carrying two oscillations (rank 4) plus white noise: the Gavish-Donoho
    # threshold separates the 4 signal singular values (>= 10) from the noise bulk (~0.37).
    rng = np.random.default_rng(5)
    j = block_diag(rotation(0.995, 0.2), rotation(0.99, 0.5))
    embed = np.linalg.qr(rng.normal(size=(40, 4)))[0]
    z = iterate(j, np.array([3.0, 0, 2, 0]), 1000)
    x = z @ embed.T + 0.01 * rng.normal(size=(1000, 40))
    model = DMD().fit(Dataset.from_arrays(x))
    assert model.metrics_["rank"] == 4
    truth = np.array([0.995 * np.exp(0.2j), 0.995 * np.exp(-0.2j),
                      0.99 * np.exp(0.5j), 0.99 * np.exp(-0.5j)])
    assert np.max(match(model.eigenvalues(), truth)) < 5e-3


def test_dmdc_recovers_a_and_b():
    rng = np.random.default_rng(6)
    q = orthogonal(4, seed=7)
    a = q @ block_diag(rotation(0.9, 0.4), rotation(0.7, 1.3)) @ q.T
    b = rng.normal(size=(4, 2))
    u = rng.normal(size=(150, 2))
    x = iterate(a, rng.normal(size=4), 150, b=b, u=u)
    model = DMD().fit(Dataset.from_arrays(x, u=u, dt=0.2))
    assert model.metrics_["rank"] == 4 and model.metrics_["input_rank"] == 6
    np.testing.assert_allclose(model.A_, a, atol=1e-6)
    np.testing.assert_allclose(model.B_, b, atol=1e-6)
    assert np.max(match(model.eigenvalues(), np.linalg.eigvals(a))) < 1e-6
    # Input timing: forecast step j uses u at the sample before it (history.u[-1] first).
    history = Trial(np.arange(10) * 0.2, x[:10], u[:10])
    forecast = model.simulate(history, 100, future_inputs=u[10:110])
    np.testing.assert_allclose(forecast, x[10:110], atol=1e-8)


def test_simulate_reproduces_noise_free_data():
    x = iterate(A6, np.random.default_rng(8).normal(size=6), 300)
    model = DMD().fit(Dataset.from_arrays(x, dt=0.1))
    history = Trial(np.array([0.0]), x[:1])
    np.testing.assert_allclose(model.simulate(history, 299), x[1:], atol=1e-8)


def test_bad_parameters_raise_usage_error():
    for bad in (["rank=0"], ["rank=-2"], ["input_rank=0"], ["rank=3", "input_rank=2"]):
        with pytest.raises(UsageError):
            DMD.Params.parse(bad)
    assert DMD.Params.parse(["rank=none"]).rank is None
    x = iterate(A6, np.ones(6), 50)
    with pytest.raises(UsageError, match="at most 6"):
        DMD(DMD.Params(rank=7)).fit(Dataset.from_arrays(x))


def test_restore_checks_array_shapes():
    x = iterate(A6, np.ones(6), 50)
    model = DMD().fit(Dataset.from_arrays(x))
    arrays = dict(model.arrays(), A=np.zeros((5, 5)))
    with pytest.raises(DataError, match="'A'"):
        DMD.restore(model.params, arrays, variables=model.variables_, inputs=(), dt=1.0)
