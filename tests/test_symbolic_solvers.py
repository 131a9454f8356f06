"""Sparse solvers against ground truth: exact supports, brute-force best subsets, invariances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dynid.errors import DataError
from dynid.symbolic.cache import CACHE
from dynid.symbolic.solvers import (
    RegressionProblem,
    describe_subset_search,
    iter_best_subsets,
    lstsq_on_support,
    sr3,
    stlsq,
    stlsq_path,
)

TRUE_COLUMNS = [2, 7, 11, 19, 26]
TRUE_VALUES = [0.5, -1.0, 2.0, -5.0, 10.0]


def correlated_problem(seed: int, n: int = 600, p: int = 30, noise: float = 0.1, rho: float = 0.6):
    """theta (n, p) with corr(column i, column j) = rho^|i-j|; y = theta @ xi + N(0, noise^2)."""
    rng = np.random.default_rng(seed)
    cov = rho ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    theta = rng.standard_normal((n, p)) @ np.linalg.cholesky(cov).T
    xi = np.zeros(p)
    xi[TRUE_COLUMNS] = TRUE_VALUES
    return theta, theta @ xi + noise * rng.standard_normal(n), xi


def rss(theta, y, columns):
    """Least-squares residual sum of squares on columns (index list or (p,) bool mask)."""
    columns = np.flatnonzero(columns) if np.asarray(columns).dtype == bool else list(columns)
    coef = np.linalg.lstsq(theta[:, columns], y, rcond=None)[0]
    residual = y - theta[:, columns] @ coef
    return residual @ residual


def best_subsets(theta, y, max_k, **limits):
    """(best subset of each size 1..max_k, the search's one-line description) for theta, y."""
    problem = RegressionProblem.from_data(theta, y)
    found = list(iter_best_subsets(problem, max_k, **limits))
    return found, describe_subset_search(problem.p, all(f.exact for f in found), **limits)


def best_subset(theta, y, k):
    """The (p,) bool support of the best k-subset."""
    return best_subsets(theta, y, k)[0][k - 1].support


def half_smallest_true_term(theta, y, xi):
    """A threshold between noise and the smallest true term, in normalised units (module doc)."""
    problem = RegressionProblem.from_data(theta, y)
    w = xi * problem.col_norm / problem.y_norm
    return 0.5 * np.abs(w[xi != 0]).min()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solvers_recover_the_exact_support_with_correlated_columns(seed):
    theta, y, xi = correlated_problem(seed)
    threshold = half_smallest_true_term(theta, y, xi)
    # Noise on a normalised coefficient is ~ noise / ||y|| / sqrt(1 - R^2) ≈ 1e-3, far below it.
    assert threshold > 0.01
    for coef in (stlsq(theta, y, threshold), sr3(theta, y, threshold)):
        np.testing.assert_array_equal(np.flatnonzero(coef), TRUE_COLUMNS)
        # Least squares on the true support: standard errors ~ 0.1 / sqrt(600) ≈ 0.005.
        np.testing.assert_allclose(coef[TRUE_COLUMNS], TRUE_VALUES, atol=0.03)
    np.testing.assert_array_equal(np.flatnonzero(best_subset(theta, y, 5)), TRUE_COLUMNS)


@pytest.mark.parametrize("seed", range(6))
def test_best_subset_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, p = 40, 12
    cov = 0.8 ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    theta = rng.standard_normal((n, p)) @ np.linalg.cholesky(cov).T * rng.uniform(0.1, 10, p)
    # Even seeds: pure noise, where nothing prunes easily; odd: a sparse signal.
    y = rng.standard_normal(n) if seed % 2 == 0 else theta[:, :4] @ rng.standard_normal(4)
    y = y + 0.1 * rng.standard_normal(n)
    found, method = best_subsets(theta, y, 5)
    assert all(f.exact for f in found) and method == "exact branch and bound"
    for k in range(1, 6):
        brute = min(rss(theta, y, c) for c in itertools.combinations(range(p), k))
        support = found[k - 1].support
        assert support.sum() == k
        assert rss(theta, y, support) == pytest.approx(brute, rel=1e-9)
        assert found[k - 1].rss * (y @ y) == pytest.approx(brute, rel=1e-6)
    brute3 = min(rss(theta, y, c) for c in itertools.combinations(range(p), 3))
    assert rss(theta, y, best_subset(theta, y, 3)) == pytest.approx(brute3, rel=1e-9)


def test_best_subset_falls_back_to_a_labelled_beam_search_for_large_libraries():
    rng = np.random.default_rng(3)
    theta = rng.standard_normal((300, 50))
    y = theta[:, [4, 20, 33]] @ [1.0, -2.0, 3.0] + 0.1 * rng.standard_normal(300)
    found, method = best_subsets(theta, y, 4)
    assert not any(f.exact for f in found) and "heuristic" in method
    np.testing.assert_array_equal(np.flatnonzero(found[2].support), [4, 20, 33])


def test_node_budget_is_reported_not_silently_exact():
    theta, y, _ = correlated_problem(0, rho=0.95)
    y = y + theta @ np.random.default_rng(0).standard_normal(30)  # dense: hard to prune
    found, method = best_subsets(theta, y, 12, max_nodes=20)
    assert not all(f.exact for f in found) and "budget" in method
    assert [f.support.sum() for f in found] == list(range(1, 13))  # still one subset per size


def test_thresholds_are_scale_free():
    theta, y, xi = correlated_problem(4)
    threshold = half_smallest_true_term(theta, y, xi)
    scale = np.random.default_rng(0).uniform(1e-3, 1e3, theta.shape[1])
    for solver in (stlsq, sr3):
        base = solver(theta, y, threshold)
        scaled = solver(theta * scale, 7.0 * y, threshold)
        np.testing.assert_allclose(scaled * scale / 7.0, base, rtol=1e-7, atol=1e-12)
    np.testing.assert_array_equal(best_subset(theta * scale, y, 5), best_subset(theta, y, 5))


def test_lstsq_on_support_is_least_squares_with_exact_zeros():
    theta, y, _ = correlated_problem(5)
    support = np.zeros(30, dtype=bool)
    support[[0, 3, 11]] = True
    coef = lstsq_on_support(theta, y, support)
    assert np.all(coef[~support] == 0)
    expected = np.linalg.lstsq(theta[:, support], y, rcond=None)[0]
    np.testing.assert_allclose(coef[support], expected, rtol=1e-10)
    # Ridge shrinks the normalised coefficients and is dimensionless: scaling y scales coef.
    ridged = lstsq_on_support(theta, y, support, ridge=10.0)
    assert np.linalg.norm(ridged) < np.linalg.norm(coef)
    np.testing.assert_allclose(lstsq_on_support(theta, 3 * y, support, ridge=10.0), 3 * ridged)
    assert not lstsq_on_support(theta, y, np.zeros(30, dtype=bool)).any()


def test_stlsq_threshold_extremes():
    theta, y, _ = correlated_problem(6)
    assert np.all(stlsq(theta, y, 0.0) != 0)  # no threshold: plain least squares
    assert not stlsq(theta, y, 10.0).any()  # above every normalised coefficient: nothing left


def test_stlsq_path_spans_every_model_size_and_contains_the_truth():
    theta, y, xi = correlated_problem(7)
    path = stlsq_path(RegressionProblem.from_data(theta, y))
    sizes = {int(s.sum()) for s in path}
    assert max(sizes) == 30 and min(sizes) <= 1
    assert any(np.array_equal(s, xi != 0) for s in path)


def test_noise_free_data_and_degenerate_columns():
    rng = np.random.default_rng(8)
    base = rng.standard_normal((200, 4))
    # Column 4 duplicates column 0 and column 5 is all zero: neither can add anything.
    theta = np.column_stack([base, base[:, 0], np.zeros(200)])
    y = base @ [1.0, 0.0, -2.0, 0.0]
    np.testing.assert_array_equal(np.sort(np.flatnonzero(best_subset(theta, y, 2)) % 4), [0, 2])
    coef = stlsq(theta, y, 0.05)
    # Duplicated columns are ambiguous: least squares may share the weight between them.
    assert coef[5] == 0 and coef[0] + coef[4] == pytest.approx(1.0)
    np.testing.assert_allclose(theta @ coef, y, atol=1e-10)
    assert not stlsq(theta, np.zeros(200), 0.05).any()


def test_bad_input_raises_dynid_errors():
    theta, y, _ = correlated_problem(9, n=50)
    with pytest.raises(DataError):
        stlsq(theta, y[:-1], 0.1)
    bad = theta.copy()
    bad[3, 2] = np.nan
    with pytest.raises(DataError):
        sr3(bad, y, 0.1)


def test_remembered_searches_resume_with_the_same_answers(monkeypatch):
    """A search asked for again (more sizes, or the same ones) continues where it stopped and
    returns what a fresh search would; its supports cannot be modified by a caller."""
    rng = np.random.default_rng(11)
    theta = rng.standard_normal((200, 14))
    y = theta[:, [1, 4, 9]] @ [1.0, -2.0, 0.5] + 0.1 * rng.standard_normal(200)
    problem = RegressionProblem.from_data(theta, y)
    monkeypatch.setitem(CACHE.limits, "search", 0)
    fresh = [(found.support.copy(), found.rss) for found in iter_best_subsets(problem, 6)]
    monkeypatch.setitem(CACHE.limits, "search", 8)
    CACHE.clear()
    first = list(iter_best_subsets(problem, 3))
    again = list(iter_best_subsets(RegressionProblem.from_data(theta, y), 6))
    assert CACHE.size("search") == 1 and again[:3] == first
    for (support, rss), found in zip(fresh, again, strict=True):
        np.testing.assert_array_equal(found.support, support)
        assert found.rss == rss
    with pytest.raises(ValueError):
        again[0].support[0] = True
    np.testing.assert_array_equal(np.flatnonzero(again[2].support), [1, 4, 9])


def test_bounded_cache_drops_the_least_recently_used_entry_of_a_kind():
    from dynid.symbolic.cache import BoundedCache

    cache = BoundedCache({"a": 2, "b": 1})
    made = []

    def make(value):
        made.append(value)
        return value

    cache.get("a", 1, lambda: make(1))
    cache.get("a", 2, lambda: make(2))
    assert cache.get("a", 1, lambda: make(-1)) == 1  # a hit: 1 is now the most recent
    cache.get("b", 9, lambda: make(9))  # another kind has its own bound
    cache.get("a", 3, lambda: make(3))  # over the bound of "a": 2 goes
    assert made == [1, 2, 9, 3] and cache.size("a") == 2 and cache.size("b") == 1
    assert cache.get("a", 1, lambda: make(-1)) == 1
    assert cache.get("a", 2, lambda: make(20)) == 20 and made[-1] == 20
