"""Model selection and ensembles against ground truth: sparse regression and Lorenz-63."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from dynid.errors import UsageError
from dynid.symbolic.ensemble import (
    bagging,
    default_block_length,
    moving_block_indices,
    pivot_interval,
)
from dynid.symbolic.folds import train_validation_split
from dynid.symbolic.selection import information_criterion, select

TRUE_COLUMNS = [2, 7, 11, 19, 26]
TRUE_VALUES = [0.5, -1.0, 2.0, -5.0, 10.0]


def noisy_problem(seed: int, n: int = 1000, noise: float = 0.5, p: int = 30):
    """theta (n, p), corr(i, j) = 0.6^|i-j|; y = theta @ xi + N(0, noise^2); 5 true terms."""
    rng = np.random.default_rng(seed)
    cov = 0.6 ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    theta = rng.standard_normal((n, p)) @ np.linalg.cholesky(cov).T
    xi = np.zeros(p)
    xi[TRUE_COLUMNS] = TRUE_VALUES
    return theta, theta @ xi + noise * rng.standard_normal(n), xi


def select_held_out(theta, y, **kwargs):
    train, val = train_validation_split([y.size])
    return select(theta[train], y[train], theta_val=theta[val], y_val=y[val], **kwargs)


def lorenz(_t, state):
    x, y, z = state
    return np.array([10 * (y - x), x * (28 - z) - y, x * y - 8 / 3 * z])


def polynomial_library(states: np.ndarray, degree: int) -> np.ndarray:
    """[1, x, y, z, x^2, xy, ...] up to ``degree``: (n, 1 + 3 + 6 + ...) columns."""
    columns = [np.ones(len(states))]
    for d in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(states.shape[1]), d):
            columns.append(np.prod(states[:, combo], axis=1))
    return np.column_stack(columns)


# Degree-2 library order: 1 x y z x^2 xy xz y^2 yz z^2.
LORENZ_TRUE = np.zeros((3, 10))
LORENZ_TRUE[0, [1, 2]] = [-10, 10]
LORENZ_TRUE[1, [1, 2, 6]] = [28, -1, -1]
LORENZ_TRUE[2, [3, 5]] = [-8 / 3, 1]


@pytest.fixture(scope="module")
def lorenz_data():
    """10000 states on the attractor (dt = 0.002) and exact derivatives from the rhs."""
    t = np.arange(10_000) * 0.002
    states = solve_ivp(lorenz, (0, t[-1]), [-8.0, 7.0, 27.0], t_eval=t, rtol=1e-9, atol=1e-9).y.T
    return states, lorenz(0, states.T).T


# ----------------------------------------------------------------------------- selection


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("criterion", ["aicc", "bic"])
def test_select_picks_the_true_support_on_held_out_rows(seed, criterion):
    # Not a certainty with noise: over seeds 0-29 held-out AICc missed the exact support twice
    # (one extra term), BIC once; seeds 0-2 are simply the first three.
    theta, y, xi = noisy_problem(seed)
    selection = select_held_out(theta, y, criterion=criterion)
    assert selection.scored_on == "validation" and selection.criterion == criterion
    np.testing.assert_array_equal(np.flatnonzero(selection.best.coef), TRUE_COLUMNS)
    # Least squares on 800 rows with noise 0.5: standard errors <= 0.03.
    np.testing.assert_allclose(selection.best.coef[TRUE_COLUMNS], TRUE_VALUES, atol=0.1)


def test_pareto_front_is_non_dominated_and_contains_the_truth():
    theta, y, xi = noisy_problem(3)
    selection = select_held_out(theta, y)
    front = selection.pareto
    for c in front:
        assert not any(
            d.n_terms <= c.n_terms
            and d.val_error <= c.val_error
            and (d.n_terms, d.val_error) != (c.n_terms, c.val_error)
            for d in selection.all
        )
    # Every candidate off the front is dominated by one on it.
    for c in selection.all:
        assert any(d.n_terms <= c.n_terms and d.val_error <= c.val_error for d in front)
    assert [c.n_terms for c in front] == sorted({c.n_terms for c in front})
    assert any(np.array_equal(c.support, xi != 0) for c in front)
    assert front[0].n_terms == 0  # the empty model is scored too
    assert selection.best in selection.all


def test_irrelevant_columns_do_not_change_the_choice():
    theta, y, _ = noisy_problem(4)
    base = select_held_out(theta, y)
    extra = np.random.default_rng(40).standard_normal((y.size, 10))
    widened = select_held_out(np.hstack([theta, extra]), y)
    np.testing.assert_array_equal(widened.best.support[:30], base.best.support)
    assert not widened.best.support[30:].any()
    np.testing.assert_allclose(widened.best.coef[:30], base.best.coef)


def test_lorenz_structure_and_coefficients_without_a_threshold(lorenz_data):
    states, derivatives = lorenz_data
    rng = np.random.default_rng(0)
    noisy = derivatives + 0.01 * derivatives.std(axis=0) * rng.standard_normal(derivatives.shape)
    theta = polynomial_library(states, 2)
    for equation in range(3):
        selection = select_held_out(theta, noisy[:, equation])
        coef, truth = selection.best.coef, LORENZ_TRUE[equation]
        np.testing.assert_array_equal(coef != 0, truth != 0)
        np.testing.assert_allclose(coef[truth != 0], truth[truth != 0], rtol=0.02)


def test_noise_free_data_choose_the_fewest_exact_terms(lorenz_data):
    states, derivatives = lorenz_data
    theta = polynomial_library(states[:2000], 2)
    for equation in range(3):
        selection = select(theta, derivatives[:2000, equation])
        assert selection.scored_on == "training"
        assert selection.best.val_error == selection.best.train_error
        np.testing.assert_array_equal(selection.best.support, LORENZ_TRUE[equation] != 0)


def test_information_criteria_formulas():
    n, k, mse = 100, 3, 0.25
    assert information_criterion(mse, n, k, "aicc") == pytest.approx(
        n * np.log(mse) + 2 * k + 2 * k * (k + 1) / (n - k - 1)
    )
    assert information_criterion(mse, n, k, "bic") == pytest.approx(n * np.log(mse) + k * np.log(n))
    assert information_criterion(mse, 4, 3, "aicc") == np.inf


def test_select_rejects_bad_arguments():
    theta, y, _ = noisy_problem(5, n=100)
    with pytest.raises(UsageError):
        select(theta, y, criterion="aic")
    with pytest.raises(UsageError):
        select(theta, y, theta_val=theta)


# ----------------------------------------------------------------------------- split


def test_split_holds_out_the_last_contiguous_fraction_of_each_trial():
    train, val = train_validation_split([100, 50])
    assert train.shape == val.shape == (150,)
    assert not (train & val).any() and (train | val).all()
    np.testing.assert_array_equal(np.flatnonzero(val), [*range(80, 100), *range(140, 150)])


def test_split_blocks_and_gap():
    train, val = train_validation_split([100], fraction=0.2, blocks=2, gap=3)
    np.testing.assert_array_equal(np.flatnonzero(val), [*range(40, 50), *range(90, 100)])
    np.testing.assert_array_equal(np.flatnonzero(~(train | val)), [37, 38, 39, 50, 51, 52, 87, 88, 89])
    # Folds: every row held out exactly once, never next to a training row.
    held = np.zeros(100, dtype=int)
    for fold in range(5):
        train, val = train_validation_split([100], fraction=0.2, blocks=2, gap=3, fold=fold)
        held += val
        assert train.sum() >= 60 and not (train & val).any()
        near = np.convolve(val, np.ones(7), mode="same") > 0
        assert not (train & near).any()
    np.testing.assert_array_equal(held, 1)
    with pytest.raises(UsageError):
        train_validation_split([100], fraction=1.0)


# ----------------------------------------------------------------------------- ensembles


def held_out_select(theta, y, theta_oob, y_oob):
    return select(theta, y, theta_val=theta_oob, y_val=y_oob).best.coef


def test_bagging_inclusion_and_intervals_on_a_noisy_problem():
    theta, y, xi = noisy_problem(6, n=400, noise=1.0)
    result = bagging(
        theta, y, held_out_select, n_models=40, rng=0, out_of_bag=True, interval=(0.5, 99.5)
    )
    assert result.n_models == 40 and result.coefs.shape == (40, 30)
    assert np.all(result.inclusion_probability[xi != 0] >= 0.95)
    assert np.all(result.inclusion_probability[xi == 0] < 0.5)
    # 99 % percentile intervals. Bootstrap spreads run at 0.9-1.0 of the least-squares standard
    # error here, so over seeds 0-11 all five covered the truth in 9 problems of 12.
    assert np.all(result.coef_low[xi != 0] <= xi[xi != 0])
    assert np.all(xi[xi != 0] <= result.coef_high[xi != 0])
    never = result.inclusion_probability == 0
    assert not result.coef_median[never].any() and not result.coef_high[never].any()
    again = bagging(theta, y, held_out_select, n_models=40, rng=0, out_of_bag=True)
    np.testing.assert_array_equal(again.coefs, result.coefs)  # seeded: reproducible


def test_pivot_interval_is_centred_on_the_estimate_and_reflects_the_ensemble():
    rng = np.random.default_rng(0)
    # Bags sitting off the estimate (another estimator's offset), right-skewed, and a term not
    # offered to any bag.
    coefs = np.column_stack([1.0 + rng.exponential(0.1, 400), np.full(400, np.nan)])
    estimate = np.array([0.5, 2.0])
    low, median, high = np.percentile(coefs[:, 0], [2.5, 50, 97.5])
    assert not low <= estimate[0] <= high  # the ensemble's own percentiles exclude the estimate
    interval = pivot_interval(estimate, coefs)
    np.testing.assert_allclose(interval[0], [0.5 - (high - median), 0.5 + (median - low)])
    assert interval[0, 0] < 0.5 < interval[0, 1]
    assert 0.5 - interval[0, 0] > 2 * (interval[0, 1] - 0.5)  # the long right tail: long left arm
    np.testing.assert_array_equal(interval[1], [2.0, 2.0])


def test_moving_block_bootstrap_rows():
    rng = np.random.default_rng(0)
    rows = moving_block_indices(103, 10, rng)
    assert rows.shape == (103,) and rows.min() >= 0 and rows.max() < 103
    blocks = rows[:100].reshape(10, 10)
    assert np.all(np.diff(blocks, axis=1) == 1)  # whole runs of consecutive rows


def test_default_block_length_follows_the_residual_correlation():
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((8000, 3))
    white = rng.standard_normal(8000)
    assert default_block_length(theta, white) == 20  # n^(1/3)
    # Residual smoothed over 101 rows: correlated over ~60 lags, so blocks must be longer.
    smooth = np.convolve(white, np.ones(101) / 101, mode="same")
    assert default_block_length(theta, smooth) > 40


def test_noise_correlation_time_of_known_operators():
    """A 3-sample moving sum of white noise has rho_1 = 2/3, rho_2 = 1/3: tau = 1 + 2 (2/3 + 1/3) = 3.
    A 5-point central difference [1, -8, 0, 8, -1] has rho_1 = -16/130 < 0: tau = 1."""
    from scipy import sparse

    from dynid.symbolic.autocorrelation import operator_correlation_time
    from dynid.symbolic.derivatives import derivative_correlation_time

    n = 400
    moving_sum = sparse.diags([1.0, 1.0, 1.0], [0, 1, 2], shape=(n - 2, n))
    assert operator_correlation_time(moving_sum) == pytest.approx(3.0, rel=0.02)
    t = np.linspace(0.0, 10.0, 2000)
    x = np.column_stack([np.sin(t), np.cos(1.7 * t)])
    assert derivative_correlation_time(x, t, "finite_difference", {"order": 4}) == pytest.approx(1.0, abs=0.15)
    # A Savitzky-Golay derivative smooths over its window: its noise is correlated over ~window/2.
    savgol = derivative_correlation_time(x, t, "savgol", {"window": 21, "polyorder": 3})
    from scipy.signal import savgol_coeffs

    taps = savgol_coeffs(21, 3, deriv=1)
    exact = operator_correlation_time(sparse.diags(taps, np.arange(21), shape=(n - 20, n)))
    assert exact > 3.0 and savgol == pytest.approx(exact, rel=0.3)


def test_select_scores_every_candidate_with_the_given_noise_time():
    theta, y, _ = noisy_problem(3, n=600)
    train, val = train_validation_split([y.size])
    chosen = select(theta[train], y[train], theta_val=theta[val], y_val=y[val], tau=4.0)
    m = int(val.sum())
    for candidate in chosen.all:
        mse = candidate.val_error**2
        expected = information_criterion(mse, round(m / 4.0), candidate.n_terms, "aicc")
        assert candidate.criterion == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert set(np.flatnonzero(chosen.best.support)) == set(TRUE_COLUMNS)


def test_folds_judge_a_term_on_the_rows_where_it_acts():
    """y = a + 2 b + s + noise with s nonzero only in rows 200-400, which the first fold's
    held-out blocks miss: one split rarely sees s pay off; pooled folds keep it every time."""
    from dynid.symbolic.folds import n_folds
    from dynid.symbolic.selection import select_folds

    n = 2000
    folds = [train_validation_split([n], blocks=3, fold=j) for j in range(n_folds(0.2))]
    held = sum(val.astype(int) for _, val in folds)
    assert held.max() == 1 and held.sum() >= n - 3 * 5  # a remainder < 5 rows per block
    train, val = folds[0]
    assert not val[200:400].any()
    single_found = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        theta = rng.standard_normal((n, 6))
        theta[:, 2] = 0.0
        theta[200:400, 2] = rng.standard_normal(200)
        y = theta[:, 0] + 2 * theta[:, 1] + theta[:, 2] + 0.3 * rng.standard_normal(n)
        single = select(theta[train], y[train], theta_val=theta[val], y_val=y[val], tau=1.0)
        single_found += bool(single.best.support[2])
        pooled = select_folds(theta, y, folds, tau=1.0)
        assert set(np.flatnonzero(pooled.best.support)) == {0, 1, 2}
        np.testing.assert_allclose(pooled.best.coef[[0, 1, 2]], [1.0, 2.0, 1.0], atol=0.05)
    assert single_found <= 4
