"""Many Monte Carlo (permutation or surrogate) tests at once, each run only as long as its
decision needs.

A test's null samples come in rounds: 99, then 199, 399, ... up to ``n_max`` in all. A test
stops

- when ``stop_after`` null values have reached the observed statistic: Besag and Clifford's
  sequential p-value ``stop_after / samples_done`` (Biometrika 78:301, 1991), valid and cheap
  for clearly null links;
- when its decision under the multiple-testing correction is settled: after each round every
  test gets a Clopper-Pearson interval for its p-value (error ``SETTLE_ERROR`` per test), and a
  test that the correction rejects with every p-value at its upper bound, or keeps with every
  p-value at its lower bound, needs no more samples (the MMCTest idea of Gandy and Hahn, Scand.
  J. Stat. 41:1083, 2014). Many strong links lower the resolution each one needs (BH's
  threshold for the k-th smallest p grows with k), so a rich graph stops far below ``n_max``,
  while a lone link still runs all ``n_max`` samples, which is what it needs to pass.

Otherwise ``p = (1 + exceedances) / (1 + samples_done)``. The decisions agree with those of
``n_max`` samples for every test except, with probability about ``SETTLE_ERROR`` each, a test
whose p-value lies within its Monte Carlo error of the threshold.

A fitted null (``fit``, ``normal_null_pvalues``) settles most tests within a few dozen
samples. A permutation p-value can never be below ``1 / (n + 1)``, so a strong link in a family
of ``m`` tests needs about ``m / (alpha R)`` samples when ``R`` links are rejected, several
hundred on a rich graph, and more to make its Clopper-Pearson bound pass; yet the null values of
a kNN estimate (a mean over rows) are close to normal. So where a test's null values pass a
normality check, its p-value is the normal-theory one of its statistic against them, and the
interval that decides whether it is settled is that p-value's own (from the uncertainty of the
fitted mean and spread) instead of Clopper-Pearson's: a strong link settles in the first round,
a borderline one goes on sampling, and a test whose fit is poor keeps the permutation count.
Moment-matched nulls with fewer permutations: Gretton et al.'s gamma approximation for HSIC
(NIPS 2007); for the tail, Knijnenburg et al., "Fewer permutations, more accurate P-values"
(Bioinformatics 25:i161, 2009).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from dynid.causal.fdr import Correction, adjust_pvalues

# Chance that a test's Clopper-Pearson interval misses its true p-value.
SETTLE_ERROR = 1e-3
FIRST_ROUND = 99
# A fitted normal null is used unless Shapiro-Wilk rejects normality of the null values at this
# level: at 1% about one test in a hundred falls back to sampling by chance alone.
NORMALITY_LEVEL = 0.01
# Fewest null values a normal null is fitted to (Shapiro-Wilk has next to no power below).
FEWEST_TO_FIT = 8

# draw(tests, count, need) -> (exceedances, done), each (len(tests),): up to ``count`` more null
# samples of each test in ``tests`` (indices), a test stopping early once ``need[k]`` of them
# reached its observed statistic. Tests are drawn together so that a method can share work
# between them (CCM: the libraries of one target serve all its sources).
Draw = Callable[[np.ndarray, int, np.ndarray], tuple[np.ndarray, np.ndarray]]


def one_by_one(draw_one: Callable[[int, int, int], tuple[int, int]]) -> Draw:
    """A ``Draw`` from a function drawing for a single test."""

    def draw(tests: np.ndarray, count: int, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = [draw_one(int(t), count, int(n)) for t, n in zip(tests, need)]
        return np.array([o[0] for o in out], dtype=np.int64), np.array([o[1] for o in out], dtype=np.int64)

    return draw


# fit(tests) -> (p, low, high, trusted), each (len(tests),): for each test in ``tests`` (indices)
# the p-value of its statistic under a null fitted to the samples it has drawn, the interval
# around it that holds the true p-value up to an error of SETTLE_ERROR, and whether the fit is
# trusted (where it is not, the Clopper-Pearson interval and permutation p-value stand).
Fit = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def round_totals(n_max: int, first: int = FIRST_ROUND) -> list[int]:
    """Samples done after each round: ``first`` (99 by default), then ``2 n + 1`` each (199, 399,
    ...), the last ``n_max``."""
    totals = [min(first, n_max)]
    while totals[-1] < n_max:
        totals.append(min(2 * totals[-1] + 1, n_max))
    return totals


def clopper_pearson(exceed: np.ndarray, done: np.ndarray, error: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided ``1 - error`` Clopper-Pearson interval for each proportion ``exceed / done``."""
    exceed, done = np.asarray(exceed, dtype=float), np.asarray(done, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(exceed > 0, stats.beta.ppf(error / 2, exceed, done - exceed + 1), 0.0)
        high = np.where(exceed < done, stats.beta.ppf(1 - error / 2, exceed + 1, done - exceed), 1.0)
    return low, high


def normal_null_pvalues(
    observed: np.ndarray, null: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``Fit`` for normal nulls: (p, low, high, trusted), each (m,), of each ``observed[i]``
    against its null values ``null[i]``.

    p: the p-value of a prediction interval: under the null the observed statistic is
    exchangeable with the ``n`` null values, so if they are normal, ``(observed - mean) /
    (sd sqrt(1 + 1/n))`` follows Student's t with ``n - 1`` degrees of freedom (sd with
    ``n - 1``): exact for a normal null, the estimated mean and spread included. low, high: the
    true tail probability ``Phi(-z)``, ``z = (observed - mu) / sigma``, lies within them up to an
    error of SETTLE_ERROR: ``z`` estimated with standard error ``sqrt((1 + z^2 / 2) / n)`` (delta
    method for the mean and sd of a normal sample). trusted: at least 8 values, not all equal,
    and Shapiro-Wilk (Biometrika 52:591, 1965) does not reject their normality at
    ``NORMALITY_LEVEL`` (on the first 5,000, where its p-value is accurate).
    """
    m = len(null)
    p, low, high = np.ones(m), np.zeros(m), np.ones(m)
    trusted = np.zeros(m, dtype=bool)
    margin = stats.norm.isf(SETTLE_ERROR / 2)
    for i, values in enumerate(null):
        n = values.size
        sd = values.std(ddof=1) if n > 1 else 0.0
        if n < FEWEST_TO_FIT or not sd > 0:
            continue
        z = (observed[i] - values.mean()) / sd
        p[i] = stats.t.sf(z / np.sqrt(1.0 + 1.0 / n), n - 1)
        spread = margin * np.sqrt((1.0 + z * z / 2.0) / n)
        low[i], high[i] = stats.norm.sf(z + spread), stats.norm.sf(z - spread)
        trusted[i] = stats.shapiro(values[:5000]).pvalue >= NORMALITY_LEVEL
    return p, low, high, trusted


def sequential_pvalues(
    draw: Draw, n_tests: int, n_max: int, *, alpha: float, correction: Correction,
    stop_after: int | None, fit: Fit | None = None, first_round: int = FIRST_ROUND,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Monte Carlo p-values (n_tests,), the null samples each used (n_tests,) and whether each
    p-value is the fitted null's (n_tests,), as the module docstring says.

    ``stop_after`` None or 0 turns the Besag-Clifford stop off. ``fit`` None: permutation
    p-values only; else, after every round, each test that has not stopped and whose fit is
    trusted takes the fitted p-value and interval. ``first_round``: samples of the first round.
    """
    exceed = np.zeros(n_tests, dtype=np.int64)
    done = np.zeros(n_tests, dtype=np.int64)
    stopped = np.zeros(n_tests, dtype=bool)  # by Besag-Clifford
    fitted = np.zeros(n_tests, dtype=bool)
    p_fit, low_fit, high_fit = np.zeros(n_tests), np.zeros(n_tests), np.ones(n_tests)
    active = np.ones(n_tests, dtype=bool)
    totals = round_totals(n_max, first_round)
    for k, total in enumerate(totals):
        tests = np.flatnonzero(active)
        if tests.size == 0:
            break
        # Every active test has done the previous round's total.
        need = stop_after - exceed[tests] if stop_after else np.full(tests.size, total + 1)
        more, ran = draw(tests, total - int(done[tests[0]]), need)
        exceed[tests] += more
        done[tests] += ran
        if stop_after:
            stopped |= exceed >= stop_after
            active &= ~stopped
            fitted &= ~stopped  # a stopped test's p-value is Besag and Clifford's
        if fit is not None:
            tests = np.flatnonzero(active)
            p_fit[tests], low_fit[tests], high_fit[tests], fitted[tests] = fit(tests)
        if k == len(totals) - 1:
            break
        low, high = clopper_pearson(exceed, done, SETTLE_ERROR)
        low[fitted], high[fitted] = low_fit[fitted], high_fit[fitted]
        surely = adjust_pvalues(high, correction) <= alpha
        possibly = adjust_pvalues(low, correction) <= alpha
        active &= possibly & ~surely
        if not active.any():
            break
    p = np.where(stopped, exceed / np.maximum(done, 1), (1 + exceed) / (1 + done))
    return np.where(fitted, p_fit, p), done, fitted
