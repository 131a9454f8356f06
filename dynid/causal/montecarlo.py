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
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from dynid.causal.fdr import Correction, adjust_pvalues

# Chance that a test's Clopper-Pearson interval misses its true p-value.
SETTLE_ERROR = 1e-3
FIRST_ROUND = 99

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


def round_totals(n_max: int) -> list[int]:
    """Samples done after each round: 99, 199, 399, ... (each ``2 n + 1``), the last ``n_max``."""
    totals = [min(FIRST_ROUND, n_max)]
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


def sequential_pvalues(
    draw: Draw, n_tests: int, n_max: int, *, alpha: float, correction: Correction,
    stop_after: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo p-values (n_tests,) and the null samples each used (n_tests,), as the module
    docstring says; ``stop_after`` None or 0 turns the Besag-Clifford stop off."""
    exceed = np.zeros(n_tests, dtype=np.int64)
    done = np.zeros(n_tests, dtype=np.int64)
    stopped = np.zeros(n_tests, dtype=bool)  # by Besag-Clifford
    active = np.ones(n_tests, dtype=bool)
    totals = round_totals(n_max)
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
        if k == len(totals) - 1:
            break
        low, high = clopper_pearson(exceed, done, SETTLE_ERROR)
        surely = adjust_pvalues(high, correction) <= alpha
        possibly = adjust_pvalues(low, correction) <= alpha
        active &= possibly & ~surely
        if not active.any():
            break
    p = np.where(stopped, exceed / np.maximum(done, 1), (1 + exceed) / (1 + done))
    return p, done
