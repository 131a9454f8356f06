"""VAR / VARX against simulated processes with known coefficients, and against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.data.dataset import Dataset, Trial
from dynid.errors import ComputationError, DataError, UsageError
from dynid.linear.least_squares import fit_var_least_squares
from dynid.models.var import VAR

D = 4
_rng = np.random.default_rng(0)
A1 = 0.4 * np.eye(D) + 0.1 * _rng.normal(size=(D, D))
A2 = -0.2 * np.eye(D) + 0.1 * _rng.normal(size=(D, D))
TRUE_COEFS = np.stack([A1, A2])
INTERCEPT = np.array([0.5, -1.0, 0.0, 2.0])
B = np.array([[1.0, 0.0], [0.5, -0.5], [0.0, 0.0], [-1.0, 2.0]])


def simulate_var(n: int, seed: int, u: np.ndarray | None = None, noise: float = 1.0) -> np.ndarray:
    """n samples of x_t = c + A1 x_{t-1} + A2 x_{t-2} (+ B u_{t-1}) + noise * e_t."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, D))
    e = noise * rng.normal(size=(n, D))
    for t in range(2, n):
        x[t] = INTERCEPT + A1 @ x[t - 1] + A2 @ x[t - 2] + e[t]
        if u is not None:
            x[t] += B @ u[t - 1]
    return x


@pytest.fixture(scope="module")
def long_series() -> np.ndarray:
    return simulate_var(20000, seed=1)


@pytest.fixture(scope="module")
def fitted(long_series) -> VAR:
    return VAR().fit(Dataset.from_arrays(long_series))


def test_bic_selects_true_order_and_coefficients_within_standard_errors(fitted):
    assert fitted.metrics_["order"] == 2
    assert fitted.metrics_["order_selected_by"] == "bic"
    values = fitted.metrics_["criterion_values"]
    assert set(values) == {str(p) for p in range(1, 11)}
    assert min(values, key=values.get) == "2"
    error = np.abs(fitted.coefs_ - TRUE_COEFS)
    assert np.all(error < 4 * fitted.coef_stderr_)
    assert np.all(error < 0.03)
    # stderr ~ 1/sqrt(T var(x)) - a wrong formula (e.g. missing sigma or sqrt) is far off
    assert np.all((fitted.coef_stderr_ > 0.003) & (fitted.coef_stderr_ < 0.01))
    np.testing.assert_allclose(fitted.intercept_, INTERCEPT, atol=0.1)
    np.testing.assert_allclose(fitted.noise_cov_, np.eye(D), atol=0.05)
    assert fitted.metrics_["n_obs"] == 20000 - 2


def test_matches_statsmodels(long_series, fitted):
    statsmodels_api = pytest.importorskip("statsmodels.tsa.api")
    reference = statsmodels_api.VAR(long_series).fit(2, trend="c")
    np.testing.assert_allclose(fitted.coefs_, reference.coefs, atol=1e-12)
    np.testing.assert_allclose(fitted.intercept_, reference.intercept, atol=1e-12)
    np.testing.assert_allclose(fitted.noise_cov_, reference.sigma_u, atol=1e-12)
    stderr = np.stack([reference.stderr[1 + k * D : 1 + (k + 1) * D].T for k in range(2)])
    np.testing.assert_allclose(fitted.coef_stderr_, stderr, rtol=1e-9)
    assert fitted.metrics_["loglik"] == pytest.approx(reference.llf, rel=1e-12)
    assert fitted.metrics_["aic"] == pytest.approx(reference.aic, abs=1e-9)
    assert fitted.metrics_["bic"] == pytest.approx(reference.bic, abs=1e-9)
    # Order selection on the common sample, as statsmodels (and Lütkepohl) do it.
    ics = statsmodels_api.VAR(long_series).select_order(10, trend="c").ics["bic"]
    chosen = [fitted.metrics_["criterion_values"][str(p)] for p in range(1, 11)]
    np.testing.assert_allclose(chosen, ics[1:], atol=1e-9)


def test_aic_criterion_and_fixed_order():
    x = simulate_var(3000, seed=2)
    aic = VAR(VAR.Params(criterion="aic", max_order=4)).fit(Dataset.from_arrays(x))
    assert aic.metrics_["order_selected_by"] == "aic" and aic.metrics_["order"] >= 2
    fixed = VAR(VAR.Params(order=3)).fit(Dataset.from_arrays(x))
    assert fixed.coefs_.shape == (3, D, D) and "criterion_values" not in fixed.metrics_
    assert fixed.history_length == 3


def test_varx_recovers_input_coefficients_with_lagged_input():
    rng = np.random.default_rng(3)
    u = rng.normal(size=(20000, 2))
    x = simulate_var(20000, seed=4, u=u)
    model = VAR(VAR.Params(order=2)).fit(Dataset.from_arrays(x, u=u))
    result = fit_var_least_squares([x], 2, trials_u=[u])
    np.testing.assert_array_equal(result.input_coefs, model.input_coefs_)
    error = np.abs(model.input_coefs_ - B)
    assert np.all(error < 4 * result.input_stderr) and np.all(error < 0.03)
    assert np.all(np.abs(model.coefs_ - TRUE_COEFS) < 0.03)
    # Noise-free data: the forecast uses u_{t-1} exactly as the simulation did.
    clean = simulate_var(60, seed=5, u=u[:60], noise=0.0)
    history = Trial(np.arange(20.0), clean[:20], u[:20])
    exact = VAR.restore(
        model.params,
        dict(model.arrays(), coefs=TRUE_COEFS, intercept=INTERCEPT, input_coefs=B),
        variables=model.variables_, inputs=model.inputs_, dt=1.0,
    )
    np.testing.assert_allclose(exact.simulate(history, 40, u[20:60]), clean[20:60], atol=1e-10)


def test_ridge_matches_closed_form_and_shrinks():
    x = simulate_var(500, seed=6)
    n = 498
    z = np.hstack([np.ones((n, 1)), x[1:-1], x[:-2]])
    y = x[2:]
    ridge = 0.5
    penalty = n * ridge * np.diag([0.0] + [1.0] * (2 * D))  # intercept unpenalised
    theta = np.linalg.solve(z.T @ z + penalty, z.T @ y)
    model = VAR(VAR.Params(order=2, ridge=ridge)).fit(Dataset.from_arrays(x))
    np.testing.assert_allclose(model.coefs_[0], theta[1 : D + 1].T, atol=1e-10)
    np.testing.assert_allclose(model.coefs_[1], theta[D + 1 :].T, atol=1e-10)
    np.testing.assert_allclose(model.intercept_, theta[0], atol=1e-10)
    norms = [
        np.linalg.norm(VAR(VAR.Params(order=2, ridge=r)).fit(Dataset.from_arrays(x)).coefs_)
        for r in (0.0, 0.1, 1.0, 100.0)
    ]
    assert norms[0] > norms[1] > norms[2] > norms[3] and norms[3] < 0.02 * norms[0]


def test_eigenvalues_are_companion_eigenvalues(fitted):
    companion = np.zeros((2 * D, 2 * D))
    companion[:D, :D], companion[:D, D:] = fitted.coefs_[0], fitted.coefs_[1]
    companion[D:, :D] = np.eye(D)
    expected = np.linalg.eigvals(companion)
    got = fitted.eigenvalues()
    assert got.shape == (2 * D,)
    np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(expected), atol=1e-12)
    assert np.all(np.diff(np.abs(got)) <= 1e-12)
    assert np.all(np.abs(got) < 1)  # the simulated process is stationary


def test_too_few_samples():
    x = simulate_var(10, seed=7)
    # VAR(2) with intercept: 9 coefficients per equation, so 2 + 9 + 1 = 12 samples needed.
    with pytest.raises(DataError, match="at least 12 samples"):
        VAR(VAR.Params(order=2)).fit(Dataset.from_arrays(x))
    with pytest.raises(DataError, match="max_order"):
        VAR().fit(Dataset.from_arrays(simulate_var(40, seed=7)))


def test_singular_design_suggests_ridge():
    x = simulate_var(300, seed=8)
    x[:, 3] = 1.0  # constant: collinear with the intercept
    with pytest.raises(ComputationError, match="ridge="):
        VAR(VAR.Params(order=1)).fit(Dataset.from_arrays(x))
    VAR(VAR.Params(order=1, ridge=1e-6)).fit(Dataset.from_arrays(x))


def test_multi_trial_fit_stacks_trials_without_cross_boundary_lags():
    trials = [simulate_var(n, seed=s) for n, s in ((80, 9), (5, 10), (60, 11))]
    # Reference: each trial's own lagged rows, stacked; OLS by numpy.
    rows, targets = [], []
    for x in trials:
        for t in range(2, len(x)):
            rows.append(np.concatenate([[1.0], x[t - 1], x[t - 2]]))
            targets.append(x[t])
    theta = np.linalg.lstsq(np.array(rows), np.array(targets), rcond=None)[0]
    model = VAR(VAR.Params(order=2)).fit(Dataset.from_arrays(trials))
    np.testing.assert_allclose(model.intercept_, theta[0], atol=1e-10)
    np.testing.assert_allclose(model.coefs_[0], theta[1 : D + 1].T, atol=1e-10)
    np.testing.assert_allclose(model.coefs_[1], theta[D + 1 :].T, atol=1e-10)
    assert model.metrics_["n_obs"] == 78 + 3 + 58
    concatenated = VAR(VAR.Params(order=2)).fit(Dataset.from_arrays(np.vstack(trials)))
    assert np.max(np.abs(concatenated.coefs_ - model.coefs_)) > 1e-3


def test_restore_keeps_the_order_and_checks_array_shapes():
    rng = np.random.default_rng(12)
    u = rng.normal(size=(400, 2))
    data = Dataset.from_arrays(simulate_var(400, seed=13, u=u), u=u, dt=0.5)
    model = VAR(VAR.Params(max_order=4)).fit(data)
    restored = VAR.restore(
        model.params, model.arrays(), variables=data.variables, inputs=data.inputs, dt=0.5
    )
    assert restored.history_length == model.history_length == model.metrics_["order"]
    with pytest.raises(DataError, match="coef_stderr"):
        arrays = dict(model.arrays(), coef_stderr=np.zeros((9, D, D)))
        VAR.restore(model.params, arrays, variables=data.variables, inputs=data.inputs, dt=0.5)


def test_bad_parameters_raise_usage_error():
    for bad in (["order=0"], ["max_order=0"], ["ridge=-1"], ["criterion=hqic"]):
        with pytest.raises(UsageError):
            VAR.Params.parse(bad)
    assert VAR.Params.parse(["order=3", "ridge=0.1", "trend=false"]) == VAR.Params(
        order=3, ridge=0.1, trend=False
    )


def test_order_search_stops_where_the_lags_of_a_smooth_ode_become_collinear():
    """The shipped forced oscillator (noise-free, dt 0.01): from some order on, the lagged design
    is singular; the BIC search keeps the orders below it (it failed the whole fit)."""
    from pathlib import Path

    from dynid.data import load

    data = load(str(Path(__file__).parents[1] / "sample_data" / "forced_oscillator.csv"), inputs=["u"])
    model = VAR().fit(data)
    tried = model.metrics_["criterion_values"]
    assert list(tried) == [str(p) for p in range(1, len(tried) + 1)] and len(tried) < 10
    assert model.metrics_["order"] <= len(tried)
    with pytest.raises(ComputationError, match="singular"):
        VAR(VAR.Params(order=len(tried) + 1)).fit(data)
    assert model.metrics_["one_step_r2_overall"] > 0.9999
