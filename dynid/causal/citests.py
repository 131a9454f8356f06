"""Conditional-independence tests ``x _||_ y | z`` for PCMCI, run in batches.

Every test works on one node matrix ``columns`` (n_rows, n_nodes): a node is a column (in PCMCI
a variable at one lag), and a test is a triple ``(x, y, z)`` of column indices, ``z`` a tuple of
any length (the conditioning set; its order does not matter). ``run`` takes many tests at once
and returns their statistics and p-values, each (m,). Repeated tests (same x/y pair in either
order, same set z) are answered from a cache, as tigramite does, so PC1 and MCI never redo one.

- ``ParCorr``: the partial correlation of x and y given z (Pearson correlation of their OLS
  residuals on z, intercept included) with the exact t-test, ``dof = n_rows - 2 - |z|``.
  All partial correlations come from the nodes' correlation matrix, computed once: a test is
  the Cholesky factorisation of the small correlation matrix of ``[z..., x, y]``, and tests with
  equally many conditions are factorised together (one batched LAPACK call per size), so a
  test's cost does not grow with ``n_rows``. Near-collinear sets, where that route would lose
  digits, are redone by least squares (see ``ParCorr.partial_correlation``).
- ``CMIKnn``: the kNN conditional mutual information (nats) with a local-permutation p-value,
  from ``dynid.causal.knn``; a Python loop over tests (each is a set of neighbour searches).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from dynid.causal.common import EXACT_FIT
from dynid.errors import DataError

Test = tuple[int, int, tuple[int, ...]]

# Residual variance (as a fraction of the node's variance) below which x or y counts as an exact
# function of z: nothing is left to correlate, so the test reports r = 0, p = 1 (tigramite does
# the same for a constant X or Y).
_EXACT_FIT = 1e-12
# Cholesky pivots (residual variance fractions) below this make the correlation-matrix route lose
# more than ~1e-10 in a partial correlation; such tests are redone by least squares.
_GRAM_PIVOT = 1e-4
# Permutation neighbours of the local-permutation scheme (tigramite's shuffle_neighbors default).
SHUFFLE_NEIGHBORS = 5


class CITest(ABC):
    """Base of the tests: caching and batching; subclasses compute fresh tests in ``_compute``.

    ``signed``: whether the statistic has a sign (a correlation) or not (an information).
    ``exact_fit``: the residual variance fraction at or below which the test takes a node for an
    exact function of others (``common.self_predicted_columns`` then uses the same bound).
    ``n_computed``: how many distinct tests were computed so far.
    """

    name: ClassVar[str]
    signed: ClassVar[bool]
    exact_fit: ClassVar[float] = EXACT_FIT

    def __init__(self, columns: np.ndarray) -> None:
        self.n_rows, self.n_nodes = columns.shape
        self._cache: dict[tuple[int, int, tuple[int, ...]], tuple[float, float]] = {}

    @property
    def n_computed(self) -> int:
        return len(self._cache)

    def run(self, tests: Sequence[Test]) -> tuple[np.ndarray, np.ndarray]:
        """Statistics (m,) and p-values (m,) of ``tests``, in their order."""
        keys = [(min(x, y), max(x, y), tuple(sorted(z))) for x, y, z in tests]
        # First occurrence of each new key, as asked: a permutation test permutes x, not y.
        fresh: dict[tuple[int, int, tuple[int, ...]], Test] = {}
        for key, test in zip(keys, tests):
            if key not in self._cache:
                fresh.setdefault(key, test)
        if fresh:
            values, pvalues = self._compute(list(fresh.values()))
            self._cache.update(zip(fresh, zip(values.tolist(), pvalues.tolist())))
        answers = [self._cache[key] for key in keys]
        if not answers:
            return np.empty(0), np.empty(0)
        values, pvalues = (np.array(column, dtype=float) for column in zip(*answers))
        return values, pvalues

    @abstractmethod
    def _compute(self, tests: list[Test]) -> tuple[np.ndarray, np.ndarray]:
        """Statistics and p-values of distinct, uncached tests."""


class ParCorr(CITest):
    """Partial-correlation t-test on the columns' correlation matrix (see the module doc)."""

    name = "parcorr"
    signed = True
    exact_fit = _EXACT_FIT

    def __init__(self, columns: np.ndarray) -> None:
        super().__init__(columns)
        centred = columns - columns.mean(axis=0)
        # Unit-norm columns: their Gram matrix is the correlation matrix, and its Cholesky
        # pivots are residual variances as fractions of the node's variance.
        self._unit = centred / np.linalg.norm(centred, axis=0)
        self.corr = self._unit.T @ self._unit
        np.fill_diagonal(self.corr, 1.0)
        self._r_factor: np.ndarray | None = None

    def _compute(self, tests: list[Test]) -> tuple[np.ndarray, np.ndarray]:
        x = np.fromiter((t[0] for t in tests), dtype=np.intp, count=len(tests))
        y = np.fromiter((t[1] for t in tests), dtype=np.intp, count=len(tests))
        sizes = np.fromiter((len(t[2]) for t in tests), dtype=np.intp, count=len(tests))
        dof = self.n_rows - 2 - sizes
        if np.any(dof < 1):
            raise DataError(
                f"{self.n_rows} rows are too few for a partial correlation given {sizes.max()} "
                "conditions; use a smaller --max-lag, fewer variables, or more samples"
            )
        r = np.empty(len(tests))
        for k in np.unique(sizes):
            rows = np.flatnonzero(sizes == k)
            z = np.array([tests[i][2] for i in rows], dtype=np.intp).reshape(rows.size, k)
            r[rows] = self.partial_correlation(x[rows], y[rows], z)
        return r, self.pvalue(r, dof)

    def partial_correlation(self, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Partial correlations (m,) of nodes x (m,) and y (m,) given the rows of z (m, k).

        Fast path: the Cholesky factor of the correlations of ``[z..., x, y]``; its last 2x2
        block ``[[a, 0], [b, c]]`` holds the residuals' covariance ``[[a^2, ab], [ab, b^2 + c^2]]``.
        Its error grows like eps / (smallest pivot), so tests with a pivot below
        ``_GRAM_PIVOT`` (near-collinear nodes, e.g. near-unit-root series) are redone by least
        squares on the data's R factor, as accurate as OLS on the data itself.
        """
        if z.shape[1] == 0:
            return self.corr[x, y].copy()
        nodes = np.concatenate([z, x[:, None], y[:, None]], axis=1)
        try:
            chol = np.linalg.cholesky(self.corr[nodes[:, :, None], nodes[:, None, :]])
        except np.linalg.LinAlgError:  # some set is singular to rounding: all go the safe way
            return self._least_squares(nodes)
        pivots = np.diagonal(chol, axis1=1, axis2=2) ** 2
        a, b, c = chol[:, -2, -2], chol[:, -1, -2], chol[:, -1, -1]
        r = _correlation(a * b, a * a, b * b + c * c)
        shaky = np.flatnonzero(pivots.min(axis=1) < _GRAM_PIVOT)
        if shaky.size:
            r[shaky] = self._least_squares(nodes[shaky])
        return r

    def _least_squares(self, nodes: np.ndarray) -> np.ndarray:
        """Partial correlations of the last two nodes given the others, per row of nodes (m, k+2).

        Works on R from ``QR(columns)``: its columns have the data columns' inner products, so
        OLS residuals on R's columns have the data residuals' covariance. lstsq gives the
        minimum-norm fit, as tigramite's, when conditions are exactly collinear.
        """
        if self._r_factor is None:
            self._r_factor = np.linalg.qr(self._unit, mode="r")
        out = np.empty(nodes.shape[0])
        for row, (*z, x, y) in enumerate(nodes):
            design, targets = self._r_factor[:, z], self._r_factor[:, [x, y]]
            beta = np.linalg.lstsq(design, targets, rcond=None)[0]
            resid = targets - design @ beta
            gram = resid.T @ resid
            out[row] = _correlation(gram[0, 1], gram[0, 0], gram[1, 1])
        return out

    @staticmethod
    def pvalue(r: np.ndarray, dof: np.ndarray) -> np.ndarray:
        """Two-sided p-values of partial correlations r with ``dof`` degrees of freedom."""
        one_minus = 1.0 - r * r
        perfect = one_minus <= 0.0
        t = np.abs(r) * np.sqrt(dof / np.where(perfect, 1.0, one_minus))
        return np.where(perfect, 0.0, 2.0 * stats.t.sf(t, dof))


def _correlation(cov: Any, var_x: Any, var_y: Any) -> Any:
    """cov / sqrt(var_x * var_y) in [-1, 1]; 0 where x or y is an exact fit (no residual left)."""
    cov, var_x, var_y = np.asarray(cov), np.asarray(var_x), np.asarray(var_y)
    exact = (var_x <= _EXACT_FIT) | (var_y <= _EXACT_FIT)
    r = np.where(exact, 0.0, cov / np.sqrt(np.where(exact, 1.0, var_x * var_y)))
    return np.clip(r, -1.0, 1.0)


class CMIKnn(CITest):
    """kNN conditional mutual information (nats) with a local-permutation p-value.

    knn: neighbours of the estimator; n_permutations: size of the null sample; rng: draws the
    permutations (tests run in a fixed order, so a seeded generator gives reproducible p-values).
    Tests sharing y and z (in PC1, every candidate tested against the same strongest others)
    share one ``CMIEstimator``, whose trees depend only on (y, z). The estimate is not clipped, so
    it can be slightly negative for independent nodes.
    """

    name = "cmiknn"
    signed = False

    def __init__(
        self, columns: np.ndarray, *, knn: int, n_permutations: int, rng: np.random.Generator
    ) -> None:
        super().__init__(columns)
        if self.n_rows <= knn:
            raise DataError(f"cmiknn with knn={knn} needs more than {knn} rows, got {self.n_rows}")
        self.columns = columns  # the estimator standardises every column itself
        self.knn, self.n_permutations, self.rng = knn, n_permutations, rng

    def _compute(self, tests: list[Test]) -> tuple[np.ndarray, np.ndarray]:
        from dynid.causal.knn import CMIEstimator  # imported only when cmiknn is asked for

        groups: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        for i, (_, y, z) in enumerate(tests):
            groups.setdefault((y, tuple(sorted(z))), []).append(i)
        values, pvalues = np.empty(len(tests)), np.empty(len(tests))
        for (y, z), members in groups.items():
            conditions = self.columns[:, list(z)] if z else None
            estimator = CMIEstimator(self.columns[:, [y]], conditions, k=self.knn)
            for i in members:
                values[i], pvalues[i] = estimator.permutation_test(
                    self.columns[:, [tests[i][0]]],
                    k_perm=SHUFFLE_NEIGHBORS,
                    n_permutations=self.n_permutations,
                    rng=self.rng,
                )
        return values, pvalues
