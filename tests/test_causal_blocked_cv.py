"""The blocked cross-validation that crosspred and auto share (``dynid.causal.blocked_cv``)."""

import numpy as np

from dynid.causal.blocked_cv import GAP, RIDGE, blocked_folds, ridge_design, ridge_gram


def test_folds_are_the_contiguous_blocks_and_gapped_training_rows_both_methods_used():
    # 103 rows in 5 blocks split at linspace(0, 103, 6) truncated: 0, 20, 41, 61, 82, 103;
    # training rows: those more than GAP = 20 rows from the block (worked out by hand).
    assert GAP == 20
    expected = [
        (slice(0, 20), list(range(40, 103))),
        (slice(20, 41), list(range(61, 103))),
        (slice(41, 61), list(range(0, 21)) + list(range(81, 103))),
        (slice(61, 82), list(range(0, 41)) + list(range(102, 103))),
        (slice(82, 103), list(range(0, 62))),
    ]
    folds = list(blocked_folds(103))
    assert [test for test, _ in folds] == [test for test, _ in expected]
    for (_, train), (_, want) in zip(folds, expected):
        np.testing.assert_array_equal(train, want)
    # Other fold counts split the same way: 3 blocks of 30 rows.
    assert [t for t, _ in blocked_folds(90, 3)] == [slice(0, 30), slice(30, 60), slice(60, 90)]


def test_ridge_gram_shrinks_every_standardized_column_but_the_intercept():
    design = np.random.default_rng(0).normal(5.0, 3.0, (50, 2))
    a = ridge_design(design)
    np.testing.assert_array_equal(a[:, 0], 1.0)
    np.testing.assert_allclose(a[:, 1:].mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(a[:, 1:].std(axis=0), 1.0)
    shrink = ridge_gram(a[:10]) - a[:10].T @ a[:10]
    np.testing.assert_allclose(shrink, np.diag([0.0, RIDGE * 10, RIDGE * 10]), atol=1e-15)
