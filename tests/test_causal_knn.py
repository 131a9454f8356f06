"""kNN information estimators: closed forms for Gaussians, exact agreement with a brute-force
count, ties, and the (local) permutation test's behaviour under dependence and independence."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy import special, stats

from dynid.causal.knn import (
    CMIEstimator,
    cmi_ksg,
    cmi_permutation_test,
    mi_ksg,
    restricted_permutation,
)

N = 2000
# Spread of the KSG estimate (k=5) for one Gaussian sample of N=2000: about 0.014 nats (measured
# over 20 seeds at rho=0.6). Averaging 4 seeds gives about 0.007, so 0.03 is about 4 sd of the
# mean plus the estimator's small bias.
TOL_MEAN = 0.03
TOL_ONE = 0.06


def gaussian(cov: np.ndarray, seed: int, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).multivariate_normal(np.zeros(len(cov)), cov, size=n)


def gaussian_mi(cov: np.ndarray, a: list[int], b: list[int]) -> float:
    """I(a; b) of a zero-mean Gaussian with covariance ``cov``, in nats."""
    det = lambda idx: np.linalg.det(cov[np.ix_(idx, idx)])  # noqa: E731
    return 0.5 * np.log(det(a) * det(b) / det(a + b))


@pytest.mark.parametrize("rho", [0.0, 0.6, 0.9])
def test_mi_of_correlated_gaussians(rho: float):
    truth = -0.5 * np.log(1 - rho**2)
    errors = []
    for seed in range(4):
        xy = gaussian(np.array([[1, rho], [rho, 1]]), seed)
        errors.append(mi_ksg(xy[:, 0], xy[:, 1]) - truth)
    assert abs(np.mean(errors)) < TOL_MEAN
    assert np.max(np.abs(errors)) < TOL_ONE


def test_mi_of_multivariate_gaussians():
    cov = np.array([[1.0, 0.3, 0.5, 0.1], [0.3, 1.0, 0.2, 0.4], [0.5, 0.2, 1.0, 0.3],
                    [0.1, 0.4, 0.3, 1.0]])
    data = gaussian(cov, 7)
    estimate = mi_ksg(data[:, :2], data[:, 2:])
    assert abs(estimate - gaussian_mi(cov, [0, 1], [2, 3])) < TOL_ONE


def test_cmi_of_gaussian_chain_given_middle_is_zero():
    # X -> Z -> Y: X and Y are dependent, independent given Z.
    rng = np.random.default_rng(3)
    x = rng.standard_normal(N)
    z = 0.8 * x + 0.6 * rng.standard_normal(N)
    y = 0.8 * z + 0.6 * rng.standard_normal(N)
    assert mi_ksg(x, y) > 0.2
    assert abs(cmi_ksg(x[:, None], y[:, None], z[:, None])) < TOL_MEAN


def test_cmi_matches_gaussian_partial_correlation():
    # I(X; Y | Z) = -0.5 log(1 - partial_corr^2) for Gaussians.
    cov = np.array([[1.0, 0.5, 0.4], [0.5, 1.0, 0.3], [0.4, 0.3, 1.0]])
    data = gaussian(cov, 11)
    precision = np.linalg.inv(cov)
    partial = -precision[0, 1] / np.sqrt(precision[0, 0] * precision[1, 1])
    truth = -0.5 * np.log(1 - partial**2)
    estimate = cmi_ksg(data[:, :1], data[:, 1:2], data[:, 2:])
    assert abs(estimate - truth) < TOL_ONE


def brute_force_counts(x, y, z, k):
    """(n_xz, n_yz, n_z): per row, the rows strictly closer than its k-th joint neighbour's
    max-norm distance in xz-, yz- and z-space, the row itself included, by pairwise distances
    of the prepared (standardised, jittered) columns; ``z=None``: an empty z-space."""
    from dynid.causal.knn import _X, _Y, _Z, _prepare

    x, y = _prepare(x, _X), _prepare(y, _Y)
    z = np.zeros((len(x), 0)) if z is None else _prepare(z, _Z)

    def distances(a):
        return np.max(np.abs(a[:, None, :] - a[None, :, :]), axis=2)

    joint = distances(np.hstack([x, y, z]))
    np.fill_diagonal(joint, np.inf)
    eps = np.sort(joint, axis=1)[:, k - 1]

    def counts(a):  # includes the point itself
        if a.shape[1] == 0:
            return np.full(len(a), len(a))
        return (distances(a) < eps[:, None]).sum(axis=1)

    return counts(np.hstack([x, z])), counts(np.hstack([y, z])), counts(z)


def brute_force_cmi(x, y, z, k):
    """Frenzel-Pompe from ``brute_force_counts``."""
    n_xz, n_yz, n_z = brute_force_counts(x, y, z, k)
    return special.digamma(k) - np.mean(
        special.digamma(n_xz) + special.digamma(n_yz) - special.digamma(n_z)
    )


def test_cmi_equals_brute_force_exactly():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 1))
    z = x + rng.standard_normal((300, 2))
    y = z[:, :1] + 0.5 * x**2 + rng.standard_normal((300, 1))
    assert cmi_ksg(x, y, z, k=4) == pytest.approx(brute_force_cmi(x, y, z, 4), abs=1e-12)


@pytest.mark.parametrize("near_list", [3, 128])
@pytest.mark.parametrize(("dims", "ties"), [((1, 1, 1), False), ((1, 1, 1), True),
                                            ((2, 1, 3), False), ((1, 2, 0), True)])
def test_neighbour_searches_equal_brute_force_exactly(monkeypatch, near_list, dims, ties):
    # knn_search walks each row's list of nearest rows in yz-space and falls back to scans along
    # one sorted coordinate where a list is too short (a 3-row list forces that for most rows).
    # Both must give exactly the brute-force counts, ties (jittered) included.
    monkeypatch.setattr("dynid.causal.knn._NEAR_LIST", near_list)
    rng = np.random.default_rng(sum(dims) + 10 * ties)
    dx, dy, dz = dims
    n = 240
    z = rng.standard_normal((n, dz)) if dz else None
    x = rng.standard_normal((n, dx)) + (z[:, :1] if dz else 0)
    y = x[:, :1] ** 2 + (z.sum(axis=1, keepdims=True) if dz else 0) + rng.standard_normal((n, dy))
    if ties:
        x, y = np.round(x, 1), np.round(y, 1)
    for k in (1, 4):
        assert cmi_ksg(x, y, z, k=k) == pytest.approx(brute_force_cmi(x, y, z, k), abs=1e-12)


@pytest.mark.parametrize("near_list", [3, 128])
@pytest.mark.parametrize(("dims", "ties"), [((1, 1, 1), False), ((1, 1, 1), True),
                                            ((1, 1, 2), True), ((2, 1, 3), False),
                                            ((1, 2, 0), False), ((2, 1, 0), True)])
def test_ksg_counts_equal_brute_force_counts(monkeypatch, near_list, dims, ties):
    # The one compiled pass (knn_search.ksg_counts) behind every estimate: its yz, z and zx
    # counts, row by row, are exactly the brute-force ones, for one or several z and x columns
    # (the vectorised and the general window count), no z (the x count by the same window
    # search), ties, and lists so short that the scans take over.
    from dynid.causal import knn_search
    from dynid.causal.knn import _X, _prepare

    monkeypatch.setattr("dynid.causal.knn._NEAR_LIST", near_list)
    rng = np.random.default_rng(sum(dims) + 10 * ties + near_list)
    dx, dy, dz = dims
    n = 200
    z = rng.standard_normal((n, dz)) if dz else None
    x = rng.standard_normal((n, dx)) + (z[:, :1] if dz else 0)
    y = np.sin(2 * x[:, :1]) + (z.sum(axis=1, keepdims=True) if dz else 0) + rng.standard_normal((n, dy))
    if ties:
        x, y = np.round(x, 1), np.round(y, 1)
        z = None if z is None else np.round(z, 1)
    for k in (1, 5):
        estimator = CMIEstimator(y, z, k)
        xp = _prepare(x, _X)
        if z is None:
            order = np.argsort(xp[:, 0], kind="stable")
            z_sorted, x_by_z, z_rank = xp[order], xp[:, :0], np.argsort(order)
        else:
            order = estimator._z_order.order
            z_sorted, x_by_z, z_rank = estimator._z_sorted, xp[order], estimator._z_order.rank
        n_yz, n_z, n_zx = knn_search.ksg_counts(
            np.hstack([estimator._yz, xp]), estimator._yz.shape[1], estimator._near,
            estimator._near_distance, estimator._yz_order.order, estimator._yz_order.rank, k,
            z_sorted, x_by_z, z_rank)
        want_xz, want_yz, want_z = brute_force_counts(x, y, z, k)
        np.testing.assert_array_equal(n_yz, want_yz)
        np.testing.assert_array_equal(n_zx if z is not None else n_z, want_xz)
        if z is not None:
            np.testing.assert_array_equal(n_z, want_z)


def test_affine_invariance_and_no_jitter_on_continuous_data():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(500), rng.standard_normal(500)
    y = y + x
    assert mi_ksg(3.0 * x - 7.0, y) == pytest.approx(mi_ksg(x, y), abs=1e-9)


def test_ties_are_broken():
    # Discrete data would make eps zero; jitter restores the estimate: I(B; B) = log 2 for a fair
    # bit, and about 0 for two independent bits.
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2, 3000).astype(float)
    assert mi_ksg(bits, bits) == pytest.approx(np.log(2), abs=0.02)
    assert abs(mi_ksg(bits, rng.integers(0, 2, 3000))) < 0.03


def test_restricted_permutation_stays_in_neighbourhoods():
    rng = np.random.default_rng(1)
    n, k_perm = 400, 5
    z = rng.standard_normal((n, 1))
    estimator = CMIEstimator(rng.standard_normal(n), z, k=5)
    neighbours = estimator._z_tree.query(estimator.z, k=[*range(1, k_perm + 1)], p=np.inf)[1]
    perm = restricted_permutation(neighbours, rng)
    assert all(perm[i] in neighbours[i] for i in range(n))
    # Mostly without replacement: only rows whose whole neighbourhood was taken repeat.
    assert np.unique(perm).size > 0.8 * n
    # With every row as neighbour it is an ordinary permutation.
    everything = np.tile(np.arange(20), (20, 1))
    assert sorted(restricted_permutation(everything, rng)) == list(range(20))


def test_signature_is_stable():
    # PCMCI imports this exact signature.
    params = inspect.signature(cmi_permutation_test).parameters
    assert list(params)[:3] == ["x", "y", "z"]
    for name in ("k", "k_perm", "n_permutations", "rng"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["k"].default == 5 and params["k_perm"].default == 5
    assert params["n_permutations"].default == 200


def test_permutation_test_dependent_gives_floor_p():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(400)
    y = np.sin(2 * x) + 0.5 * rng.standard_normal(400)  # nonlinear, nearly uncorrelated
    estimate, p = cmi_permutation_test(x, y, None, n_permutations=99, rng=0)
    assert estimate > 0.1
    assert p == pytest.approx(1 / 100)


def test_local_permutation_test_dependent_given_z():
    rng = np.random.default_rng(6)
    z = rng.standard_normal(400)
    x = z + 0.5 * rng.standard_normal(400)
    y = z + x + 0.5 * rng.standard_normal(400)
    _, p = cmi_permutation_test(x, y, z, n_permutations=49, rng=1)
    assert p == pytest.approx(1 / 50)


@pytest.mark.parametrize("conditional", [False, True])
def test_p_values_of_independent_data_are_not_small(conditional: bool):
    # Under the null the p-value is (nearly) uniform: over 20 independent data sets its mean
    # is near 1/2 and few fall below 0.1. With z the data follow a chain X <- Z -> Y, so X and Y
    # are dependent but conditionally independent: exactly where a plain shuffle would mislead.
    p_values = []
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        z = rng.standard_normal(250)
        x = (0.8 * z if conditional else 0) + 0.6 * rng.standard_normal(250)
        y = (0.8 * z if conditional else 0) + 0.6 * rng.standard_normal(250)
        _, p = cmi_permutation_test(x, y, z if conditional else None, n_permutations=39,
                                    rng=seed)
        p_values.append(p)
    p_values = np.array(p_values)
    assert 0.3 < p_values.mean() < 0.7
    assert np.sum(p_values <= 0.1) <= 5
    assert stats.kstest(p_values, "uniform").pvalue > 0.01


def test_sequential_stop_and_determinism():
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal(300), rng.standard_normal(300)
    full = cmi_permutation_test(x, y, None, n_permutations=200, rng=3)
    assert full == cmi_permutation_test(x, y, None, n_permutations=200, rng=3)
    estimate, p = cmi_permutation_test(x, y, None, n_permutations=200, rng=3, stop_after=5)
    assert estimate == full[0]
    assert p > 0.05  # stopped early at 5 exceedances: p = 5 / permutations done


def test_bad_input():
    with pytest.raises(ValueError, match="finite"):
        mi_ksg(np.r_[np.nan, np.arange(9.0)], np.arange(10.0), k=3)
    with pytest.raises(ValueError, match="rows"):
        mi_ksg(np.arange(10.0), np.arange(11.0), k=3)
    with pytest.raises(ValueError, match="k must"):
        mi_ksg(np.arange(5.0), np.arange(5.0), k=5)
