"""Ground truth for linearised noise training of the reservoir read-outs (``lmnt`` module): the
LMNT read-out is the limit of training on many noisy copies of the inputs, and it predicts
better than the plain read-out from inputs that carry that noise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid.data.dataset import Dataset
from dynid.models.reservoir.esn import ESNParams, Reservoir, ReservoirSetting
from dynid.models.reservoir.lmnt import LMNT_GRID, NoisePenalty
from dynid.models.reservoir.ngrc import NGRC, NGRCParams, ngrc_feature_jacobian, ngrc_features
from dynid.models.reservoir.readout import RidgeSolver, Standardiser
from dynid.systems import simulate

from conftest import write_csv

DT = 0.025
RIDGE = 1e-7
SIGMA = 0.03  # noise amplitude of the augmented copies; LMNT's beta is its square
COPIES = 200  # noisy copies, in +-eps pairs (antithetic: odd orders of the noise cancel)
# The LMNT read-out must lie within this fraction of the augmented read-out's distance from the
# plain one; leaving out LMNT's cross term, or (ngrc) the delayed samples' noise, reads 0.3-1.
CONVERGED = 0.05


def lorenz_z(n: int) -> np.ndarray:
    """(n, 3) standardised Lorenz samples on the attractor."""
    x = simulate("lorenz", n=n + 400, dt=DT, x0=(-8.0, 8.0, 27.0)).x[400:]
    return Standardiser.of([x]).forward(x)


def antithetic_noise(shape: tuple[int, ...], sigma: float = SIGMA, copies: int = COPIES,
                     seed: int = 0) -> np.ndarray:
    """(copies, *shape) Gaussian noise of sd sigma, the second half the first negated."""
    half = np.random.default_rng(seed).normal(0.0, sigma, (copies // 2, *shape))
    return np.concatenate([half, -half])


def assert_converges(augmented: RidgeSolver, lmnt: RidgeSolver, plain: RidgeSolver,
                     ridge: float = RIDGE) -> None:
    """The LMNT read-out is within CONVERGED of the augmented one's distance from the plain
    one."""
    target, _ = augmented.solve(ridge)
    gap = np.linalg.norm(target - lmnt.solve(ridge)[0])
    effect = np.linalg.norm(target - plain.solve(ridge)[0])
    assert gap < CONVERGED * effect, (gap, effect)


def test_esn_lmnt_readout_is_the_limit_of_training_on_noisy_copies_of_the_input():
    """Noise eps on the current input z_t (the state before it clean, as LMNT's k = 1 takes
    it): features [r_t(z_t + eps), z_t + eps], target z_{t+1} - (z_t + eps)."""
    z = lorenz_z(460)
    params = ESNParams(units=40, squared_readout=True)
    reservoir = Reservoir.draw(params, ReservoirSetting(1.25, 0.3, 1.0), 3, seed=1)
    states = reservoir.run(z)
    rows = np.arange(60, len(z) - 1)
    features = reservoir.readout_features(states[rows], z[rows])
    targets = z[rows + 1] - z[rows]
    noise = antithetic_noise((len(rows), 3))
    previous = states[rows - 1]
    noisy_r = (1 - reservoir.leak) * previous + reservoir.leak * np.tanh(
        previous @ reservoir.recurrent.T + (z[rows] + noise) @ reservoir.input.T + reservoir.bias)
    noisy_features = reservoir.readout_features(noisy_r, z[rows] + noise).reshape(-1, 43)
    augmented = RidgeSolver(noisy_features, (targets - noise).reshape(-1, 3))
    penalty = reservoir.noise_penalty(reservoir.noise_gains(previous, states[rows]))
    assert_converges(augmented, RidgeSolver(features, targets, penalty, SIGMA**2),
                     RidgeSolver(features, targets))


def test_esn_lmnt_with_k_steps_is_the_limit_of_noise_on_every_input():
    """Noise on every input sample, the reservoir run on each noisy copy (the paper's
    multi-noise training): LMNT with k = 40 steps (rho 0.5, leak 1: the noise's effect decays
    by 0.5 a step) is its limit, and k = 1 (the current input only) is not."""
    z = lorenz_z(400)
    params = ESNParams(units=30)
    reservoir = Reservoir.draw(params, ReservoirSetting(0.5, 1.0, 1.0), 3, seed=2)
    states = reservoir.run(z)
    rows = np.arange(60, len(z) - 1)
    features = reservoir.readout_features(states[rows], z[rows])
    targets = z[rows + 1] - z[rows]
    noisy = z + antithetic_noise(z.shape, copies=400)  # (copies, T, 3)
    noisy_states = np.zeros((len(noisy), 30))
    noisy_features = np.empty((len(noisy), len(rows), 33))
    for t in range(rows[-1] + 1):
        noisy_states = reservoir.step(noisy_states, noisy[:, t])
        if t >= rows[0]:
            noisy_features[:, t - rows[0]] = reservoir.readout_features(noisy_states, noisy[:, t])
    augmented = RidgeSolver(noisy_features.reshape(-1, 33),
                            (z[rows + 1] - noisy[:, rows]).reshape(-1, 3))
    gains = reservoir.noise_gains(states[rows - 1], states[rows])
    plain = RidgeSolver(features, targets)
    many = reservoir.noise_penalty(gains, reservoir.propagated_noise(states, 40)[:, rows])
    assert_converges(augmented, RidgeSolver(features, targets, many, SIGMA**2), plain)
    with pytest.raises(AssertionError):
        assert_converges(augmented, RidgeSolver(features, targets,
                                                reservoir.noise_penalty(gains), SIGMA**2), plain)


def test_ngrc_lmnt_readout_is_the_limit_of_training_on_noisy_copies_of_every_sample():
    """Smaller noise, more copies and a ridge than for the esn: the quadratic monomials' own
    fourth-order noise terms, which LMNT leaves out, move an unridged read-out along its
    ill-conditioned directions (a gap of 6 % at sigma 0.03 that no number of copies closes)."""
    z = lorenz_z(400)
    delays, skip, sigma, ridge = 2, 3, 0.01, 1e-4
    rows = np.arange((delays - 1) * skip, len(z) - 1)
    features = ngrc_features(z, rows, delays, skip)
    targets = z[rows + 1] - z[rows]
    noisy = z + antithetic_noise(z.shape, sigma, copies=1000)  # (copies, n, 3)
    noisy_features = ngrc_features(noisy, rows, delays, skip).reshape(-1, features.shape[1])
    augmented = RidgeSolver(noisy_features, (z[rows + 1] - noisy[:, rows]).reshape(-1, 3))
    penalty = NoisePenalty.of_jacobians(ngrc_feature_jacobian(z, rows, delays, skip), current=3)
    assert_converges(augmented, RidgeSolver(features, targets, penalty, sigma**2),
                     RidgeSolver(features, targets), ridge)


def test_ngrc_feature_jacobian_matches_finite_differences():
    z = lorenz_z(50)
    rows, delays, skip, h = np.array([20, 33]), 3, 4, 1e-6
    jacobian = ngrc_feature_jacobian(z, rows, delays, skip)
    for j in range(delays):
        for i in range(3):
            shifted = z.copy()
            shifted[rows - j * skip, i] += h
            numeric = (ngrc_features(shifted, rows, delays, skip)
                       - ngrc_features(z, rows, delays, skip)) / h
            np.testing.assert_allclose(jacobian[:, :, 3 * j + i], numeric, atol=1e-5)


def test_the_lmnt_readout_predicts_better_from_noisy_inputs_and_is_recorded():
    """Fitted through the backend on clean Lorenz with beta = SIGMA^2, the ngrc's one-step
    increments from held-out inputs carrying noise of sd SIGMA err less than the plain
    read-out's; the model records beta, and a file without it (older versions) loads."""
    x = simulate("lorenz", n=3400, dt=DT, x0=(-8.0, 8.0, 27.0)).x[400:]
    train, test = x[:2000], x[2000:]
    data = Dataset.from_arrays(train, dt=DT, variables=["x", "y", "z"])
    fixed = dict(delays=2, skip=1, ridge=RIDGE, denoise=False)
    plain = NGRC(NGRCParams(**fixed)).fit(data)
    noisy = NGRC(NGRCParams(**fixed, lmnt=SIGMA**2)).fit(data)
    assert noisy.metrics_["lmnt"] == SIGMA**2 and "lmnt" not in plain.metrics_
    scaling = Standardiser(plain.mean_, plain.scale_)
    z = scaling.forward(test)
    rows = np.arange(1, len(z) - 1)
    noise = np.random.default_rng(5).normal(0.0, SIGMA, z.shape)

    def error(model: NGRC) -> float:
        features = ngrc_features(z + noise, rows, 2, 1)
        predicted = (z + noise)[rows] + features @ model.weights_ + model.bias_
        return float(np.sqrt(np.mean((predicted - z[rows + 1]) ** 2)))

    assert error(noisy) < 0.8 * error(plain)


def test_esn_chooses_lmnt_with_the_ridge_and_the_model_file_records_it(cli, tmp_path):
    """``-p lmnt=none`` through the CLI: every beta of the grid scored, the chosen one the best
    (ties to the larger), and ``info --json`` reads it back from the file."""
    x = simulate("lorenz", n=900, dt=DT, x0=(-8.0, 8.0, 27.0)).x[400:]
    data, model = tmp_path / "lorenz.csv", tmp_path / "m.dynid"
    write_csv(data, x, ["x", "y", "z"], dt=DT)
    fit = cli("fit", data, "--model", "esn", "-p", "units=40", "-p", "washout=20",
              "-p", "spectral_radius=0.9", "-p", "leak=1", "-p", "input_scaling=0.5",
              "-p", "lmnt=none", "-o", model)
    assert fit.returncode == 0, fit.stderr
    info = cli("info", model, "--json")
    assert info.returncode == 0, info.stderr
    metrics = json.loads(info.stdout)["metrics"]
    steps = metrics["lmnt_skill_steps"]
    assert set(steps) == {f"{b:g}" for b in LMNT_GRID}
    assert metrics["lmnt_selected_by"] == "closed-loop skill"
    best = max(steps.values())
    assert metrics["lmnt"] == max(b for b in LMNT_GRID if steps[f"{b:g}"] == best)
    assert json.loads(info.stdout)["hyperparameters"]["lmnt"] is None


def test_files_from_before_lmnt_load_without_it():
    stored = {k: v for k, v in ESNParams().to_dict().items() if k != "lmnt"}
    assert ESNParams.from_dict(stored).lmnt == 0.0
    stored = {k: v for k, v in NGRCParams().to_dict().items() if k != "lmnt"}
    assert NGRCParams.from_dict(stored).lmnt == 0.0


@pytest.mark.parametrize(("backend", "values"), [
    (ESNParams, dict(lmnt=-1e-3)), (NGRCParams, dict(lmnt=-1e-3)), (ESNParams, dict(lmnt_steps=0))])
def test_lmnt_is_checked(backend, values):
    with pytest.raises(ValueError, match="lmnt"):
        backend(**values)
