"""``dynid forecast --sample`` for linear-Gaussian state-space models: one path drawn from the
same predictive distribution whose mean and variances ``--interval`` reports."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from dynid.linear.kalman import StateSpace, forecast, sample_path

from conftest import write_csv


def small_system() -> StateSpace:
    """A damped rotation observed in 3 variables, with input effects on state and observation."""
    angle = 0.3
    return StateSpace(
        a=0.95 * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]),
        c=np.array([[1.0, 0.0], [0.5, 1.0], [-1.0, 2.0]]),
        offset=np.array([1.0, -2.0, 0.5]),
        q=np.array([[0.2, 0.05], [0.05, 0.1]]),
        r=np.array([0.04, 0.09, 0.01]),
        m0=np.zeros(2), p0=np.eye(2),
        b=np.array([[1.0], [0.0]]), d=np.array([[0.0], [0.3], [0.0]]),
    )


def test_paths_have_the_predictive_mean_and_variance():
    model = small_system()
    mean, cov = np.array([1.0, -1.0]), np.array([[0.3, 0.1], [0.1, 0.2]])
    u = np.linspace(-1, 1, 9)[:, None]
    want_mean, want_var = forecast(model, mean, cov, 8, u)
    rng = np.random.default_rng(0)
    draws = np.stack([sample_path(model, mean, cov, 8, u, rng) for _ in range(4000)])
    # Monte-Carlo error of 4,000 draws: 1.6 % of the sd for the mean, about 2.2 % for the variance.
    np.testing.assert_allclose(draws.mean(axis=0), want_mean, atol=0.07 * np.sqrt(want_var).max())
    np.testing.assert_allclose(draws.var(axis=0), want_var, rtol=0.1)


def test_a_state_known_exactly_is_sampled_without_a_cholesky_failure():
    model = small_system()
    path = sample_path(model, np.zeros(2), np.zeros((2, 2)), 5, np.zeros((6, 1)), np.random.default_rng(1))
    assert path.shape == (5, 3) and np.all(np.isfinite(path))


def test_forecast_sample_is_seeded_and_refuses_an_interval(cli, tmp_path):
    rng = np.random.default_rng(3)
    model = small_system()
    z, y = np.zeros(2), np.empty((400, 3))
    for t in range(400):
        y[t] = model.c @ z + model.offset + np.sqrt(model.r) * rng.standard_normal(3)
        z = model.a @ z + rng.multivariate_normal(np.zeros(2), model.q)
    data = str(write_csv(tmp_path / "y.csv", y, ["a", "b", "c"], dt=0.1))
    fitted = str(tmp_path / "m.dynid")
    assert cli("fit", data, "--model", "lds", "-p", "latent=2", "-o", fitted).returncode == 0

    def draw(*extra: str) -> pd.DataFrame:
        result = cli("forecast", fitted, data, "-n", "20", *extra)
        assert result.returncode == 0, result.stderr
        return pd.read_csv(io.BytesIO(result.stdout))

    first, again, other, mean = draw("--sample", "--seed", "5"), draw("--sample", "--seed", "5"), \
        draw("--sample", "--seed", "6"), draw()
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first[["a", "b", "c"]], other[["a", "b", "c"]])
    assert not np.allclose(first[["a", "b", "c"]], mean[["a", "b", "c"]])
    np.testing.assert_allclose(first["t"], mean["t"])
    refused = cli("forecast", fitted, data, "-n", "5", "--sample", "--interval", "0.9")
    assert refused.returncode == 2 and b"--sample" in refused.stderr
