"""Sequential Monte Carlo tests (``dynid.causal.montecarlo``): the Besag-Clifford stop, the
settled-decision stop, and the same decisions as running every test to the end."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dynid.causal import adjust_pvalues
from dynid.causal.montecarlo import (
    clopper_pearson,
    normal_null_pvalues,
    one_by_one,
    round_totals,
    sequential_pvalues,
)


def bernoulli_draw(true_p: np.ndarray, seed: int):
    """Null samples that reach the statistic with probability ``true_p[test]``."""
    rng = np.random.default_rng(seed)

    def draw_one(test: int, count: int, need: int) -> tuple[int, int]:
        hits = np.cumsum(rng.random(count) < true_p[test])
        reached = np.flatnonzero(hits >= need)
        done = int(reached[0]) + 1 if reached.size else count
        return int(hits[done - 1]), done

    return one_by_one(draw_one)


def test_round_totals_double_up_to_the_most():
    assert round_totals(9000) == [99, 199, 399, 799, 1599, 3199, 6399, 9000]
    assert round_totals(50) == [50]


def test_clopper_pearson_covers_the_proportion():
    low, high = clopper_pearson(np.array([0, 5, 10]), np.array([10, 10, 10]), 0.05)
    assert low[0] == 0 and high[2] == 1
    assert low[1] < 0.5 < high[1]
    assert high[0] == pytest.approx(1 - 0.025 ** (1 / 10))


def test_many_strong_links_stop_early_and_nulls_stop_at_once():
    # 100 strong links (p ~ 0) among 450 tests: BH's threshold for them is ~ 0.011, which a
    # few hundred samples settle; 350 nulls (p = 0.5) stop after ~20 samples.
    true_p = np.r_[np.zeros(100), np.full(350, 0.5)]
    p, done, _ = sequential_pvalues(bernoulli_draw(true_p, 0), 450, 9000, alpha=0.05,
                                 correction="bh", stop_after=10)
    assert done[:100].max() <= 1599 and done[100:].max() < 99
    assert np.all(adjust_pvalues(p)[:100] <= 0.05) and np.all(adjust_pvalues(p)[100:] > 0.05)
    assert np.all(p[100:] == 10 / done[100:])  # Besag-Clifford


def test_a_lone_link_runs_every_sample():
    true_p = np.r_[0.0, np.full(449, 0.5)]
    p, done, _ = sequential_pvalues(bernoulli_draw(true_p, 1), 450, 9000, alpha=0.05,
                                 correction="bh", stop_after=10)
    assert done[0] == 9000 and p[0] == 1 / 9001
    assert adjust_pvalues(p)[0] <= 0.05


@pytest.mark.parametrize("seed", range(5))
def test_same_decisions_as_every_sample(seed):
    # Links spread over the BH threshold: the decisions match running all n_max samples, except
    # with a small chance for a link within its Monte Carlo error of the threshold.
    rng = np.random.default_rng(seed)
    true_p = np.r_[np.zeros(20), rng.uniform(0, 0.004, 20), rng.uniform(0.2, 1, 160)]
    n_max = 4000
    p, done, _ = sequential_pvalues(bernoulli_draw(true_p, seed), 200, n_max, alpha=0.05,
                                 correction="bh", stop_after=10)
    full = (1 + stats.binom.rvs(n_max, true_p, random_state=seed)) / (1 + n_max)
    ours, theirs = adjust_pvalues(p) <= 0.05, adjust_pvalues(full) <= 0.05
    assert np.sum(ours != theirs) <= 1
    assert done.sum() < 0.25 * 200 * n_max


def test_without_the_besag_clifford_stop_nulls_run_until_settled():
    true_p = np.r_[np.zeros(5), np.full(15, 0.6)]
    p, done, _ = sequential_pvalues(bernoulli_draw(true_p, 2), 20, 2000, alpha=0.05,
                                 correction="bonferroni", stop_after=None)
    assert np.all(done[5:] == 99)  # settled "not rejected" after the first round
    assert np.all(p[:5] <= 0.05 / 20)


def normal_draw(shift: np.ndarray, seed: int):
    """Draw and fit for tests whose statistic sits ``shift[test]`` standard deviations above a
    standard normal null; also returns the null values drawn, per test."""
    rng = np.random.default_rng(seed)
    null: list[list[float]] = [[] for _ in shift]

    def draw_one(test: int, count: int, need: int) -> tuple[int, int]:
        values = rng.standard_normal(count)
        hits = np.cumsum(values >= shift[test])
        reached = np.flatnonzero(hits >= need)
        done = int(reached[0]) + 1 if reached.size else count
        null[test].extend(values[:done])
        return int(hits[done - 1]), done

    def fit(tests: np.ndarray):
        return normal_null_pvalues(shift[tests], [np.array(null[t]) for t in tests])

    return one_by_one(draw_one), fit


def test_normal_null_pvalue_is_uniform_under_a_normal_null():
    # The prediction-interval p-value is exact: statistic and null values from one normal.
    rng = np.random.default_rng(5)
    values = rng.normal(3.0, 2.0, (1500, 40))
    p, low, high, trusted = normal_null_pvalues(values[:, 0], list(values[:, 1:]))
    assert stats.kstest(p, "uniform").pvalue > 0.01
    assert np.mean(trusted) > 0.97  # Shapiro-Wilk at 1% rejects about 1% of normal samples
    true_p = stats.norm.sf((values[:, 0] - 3.0) / 2.0)
    assert np.mean((low <= true_p) & (true_p <= high)) > 0.995  # error 1e-3 by construction


def test_a_skewed_null_is_not_trusted():
    rng = np.random.default_rng(6)
    values = rng.exponential(1.0, (200, 40))
    _, _, _, trusted = normal_null_pvalues(values[:, 0], list(values[:, 1:]))
    assert np.mean(trusted) < 0.2


def test_fitted_null_settles_strong_links_in_the_first_round():
    # 300 links 6 sd above their null, 150 nulls: the fit settles every strong link whose null
    # values pass the normality check after 39 samples, where the permutation floor 1/40 could
    # not pass BH at m = 450; the ~1% that Shapiro-Wilk rejects by chance sample one more round.
    shift = np.r_[np.full(300, 6.0), np.zeros(150)]
    draw, fit = normal_draw(shift, 7)
    p, done, fitted = sequential_pvalues(draw, 450, 9000, alpha=0.05, correction="bh",
                                         stop_after=10, fit=fit, first_round=39)
    assert np.sum(done[:300] == 39) >= 294 and np.all(done[:300] <= 79)
    assert np.all(fitted[:300])
    assert np.all(adjust_pvalues(p)[:300] <= 0.05) and np.all(adjust_pvalues(p)[300:] > 0.05)
    assert np.all(p[:300] < 1e-4)
    assert done[300:].max() <= 39 and not fitted[300:].any()  # Besag-Clifford


@pytest.mark.parametrize("seed", range(3))
def test_fitted_null_same_decisions_as_the_true_pvalues(seed):
    # Statistics spread over the BH threshold: a borderline test samples on until its fitted
    # interval clears the threshold, so the decisions are those of the true p-values except,
    # rarely, one within the fit's error of it.
    rng = np.random.default_rng(seed)
    shift = np.r_[rng.uniform(2.0, 8.0, 100), rng.uniform(-1.0, 1.0, 100)]
    draw, fit = normal_draw(shift, seed)
    p, done, _ = sequential_pvalues(draw, 200, 4000, alpha=0.05, correction="bh",
                                    stop_after=10, fit=fit, first_round=39)
    ours = adjust_pvalues(p) <= 0.05
    theirs = adjust_pvalues(stats.norm.sf(shift)) <= 0.05
    assert np.sum(ours != theirs) <= 1
    assert done.sum() < 0.05 * 200 * 4000
