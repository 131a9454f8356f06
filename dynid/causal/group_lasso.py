"""Group-lasso VAR Granger causality, for many variables and few samples.

Ordinary least-squares Granger tests need more regression rows than ``1 + d * max_lag``
coefficients per equation, and lose power well before that. Here every target ``i`` gets a
penalised VAR(max_lag) on standardised data (zero mean, unit variance per column),

    minimise over b_i   1/(2N) ||y_i - Z b_i||^2  +  lam_i * sum_{j != i} sqrt(L) ||b_{j,i}||_2

where ``b_{j,i}`` (L,) holds the coefficients of source ``j``'s lags 1..L: one group per
(source, target) pair, so a source enters with all of its lags or with none. The target's own
lags are regressors but not penalised (as in conditional Granger, self-lags are not edges).
Solved by FISTA (accelerated proximal gradient with adaptive restart), all targets at once: they
share the design, hence the step size; the prox is the group soft-threshold.

Choosing lam: a path of ``n_lambdas`` values per target, geometric from ``lam_max_i`` (the
smallest penalty that keeps every cross group of target ``i`` at zero) down to
``lambda_ratio * lam_max_i``, warm-started. Each target takes the largest lam whose K-fold
cross-validated error is within one standard error of the path's minimum (the 1-SE rule of
Hastie, Tibshirani & Friedman, ESL 7.10, which favours the sparser model). Folds are contiguous
blocks of regression rows; for purely autoregressive models K-fold cross-validation is valid
(Bergmeir, Hyndman & Koo 2018, Comput. Stat. Data Anal. 120).

Scores need no refit. ``group_norm`` is the norm of a pair's standardised coefficients at the
chosen lam (0 = not selected). ``entry_penalty`` ranks every pair, selected or not: the largest
lam, over the path, at which the pair's group sits in the model or at its edge, i.e.
``max_k ||grad_{b_{j,i}} loss(b^(k))|| / sqrt(L)`` (the KKT statistic, equal to ``lam_k`` while
the group is active and below it while it is zero). Sweeping a threshold over it traces the
selections along the path, as the ROC of a lasso path is usually drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.causal.common import (
    check_lagged_regression,
    lambda_rule,
    mean_and_standard_error,
    one_standard_error,
)
from dynid.causal.graph import CausalGraph, support_graph
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.linear.design import lagged_design

LAMBDA_RULE = (
    "largest lambda within one standard error of the minimum {k}-fold CV error, per target"
)


@dataclass(frozen=True)
class GroupLassoVAR:
    """A fitted group-lasso VAR(L) over d variables.

    Arrays indexed ``[source][target]`` (and ``[lag - 1]``):
    ``coefficient`` (d, d, L): in target units per source unit (zero outside the support);
    ``standardised`` (d, d, L): the same for standardised variables (dimensionless);
    ``group_norm`` (d, d): ``||standardised[s, t]||`` (0 on the diagonal and off the support);
    ``entry_penalty`` (d, d): the path score above (0 on the diagonal);
    ``intercept`` (d,) in data units; ``lam`` (d,): the penalty used per target, standardised
    units. Path (``None`` when lam was given): ``path_lambda`` (K, d), ``cv_error`` and
    ``cv_se`` (K, d) in units of each target's variance, ``n_active`` (K, d) cross groups.
    """

    coefficient: np.ndarray
    standardised: np.ndarray
    group_norm: np.ndarray
    entry_penalty: np.ndarray
    intercept: np.ndarray
    lam: np.ndarray
    n_rows: int
    path_lambda: np.ndarray | None = None
    cv_error: np.ndarray | None = None
    cv_se: np.ndarray | None = None
    n_active: np.ndarray | None = None

    @property
    def support(self) -> np.ndarray:
        """(d, d) bool: the selected links (diagonal false)."""
        return self.group_norm > 0


def group_lasso_var(
    trials_x: list[np.ndarray],
    max_lag: int,
    lam: float | None = None,
    *,
    n_lambdas: int = 30,
    lambda_ratio: float = 0.01,
    n_folds: int = 5,
    tol: float = 1e-4,
    max_iter: int = 5000,
) -> GroupLassoVAR:
    """Fit the group-lasso VAR(max_lag) of the module docstring to trials (n_i, d).

    ``lam``: one penalty for every target (standardised units), or None to choose one per
    target by cross-validation. ``tol``: FISTA stops when no coefficient moves by more than
    ``tol`` times the largest one. Rows never reach across trials. The caller checks the data
    (finite, non-constant columns, enough rows for ``n_folds``).
    """
    lags = int(max_lag)
    design = lagged_design(trials_x, lags, trend=False)
    problem = _Problem.standardise(design.regressors, design.targets, lags)
    solver = _Solver(problem.z, problem.y, lags, tol, max_iter)
    lam_max = solver.lambda_max()
    # One geometric grid per target from lam_max_i down: to the given lam (the path warm-starts
    # the solver and ranks the pairs) or to lambda_ratio * lam_max_i (to choose lam from).
    ratio = np.arange(n_lambdas)[:, None] / (n_lambdas - 1)
    if lam is not None:
        top = np.maximum(lam_max, lam)
        grid = top[None, :] * (lam / top[None, :]) ** ratio
        path, kkt = solver.path(grid)
        return problem.result(path[-1], grid[-1], kkt)
    grid = lam_max[None, :] * lambda_ratio**ratio
    path, kkt = solver.path(grid)
    cv_error, cv_se = _cross_validate(problem, lags, grid, n_folds, tol, max_iter)
    chosen, _ = one_standard_error(cv_error, cv_se, grid)
    targets = np.arange(problem.d)
    b = path[chosen, :, targets].T  # (L*d, d): each target's coefficients at its own lam
    n_active = (_group_norms(path, lags) > 0).sum(axis=1) - 1  # (K, d), self group excluded
    return problem.result(
        b, grid[chosen, targets], kkt, path_lambda=grid, cv_error=cv_error, cv_se=cv_se,
        n_active=n_active,
    )


def group_lasso_granger(
    data: Dataset, *, max_lag: int = 5, alpha: float = 0.05, lam: float | None = None
) -> CausalGraph:
    """``--method granger -p penalty=group-lasso``: the CausalGraph of ``group_lasso_var``.

    Edges: one per (source, target, lag), source != target. ``significant``: the pair's group is
    nonzero (all its lags together); ``strength``: the group norm of standardised coefficients,
    >= 0, the same for every lag of the pair (signed per-lag coefficients are in
    ``extra["coefficient"]``); ``p_value``: NaN (null in JSON), since lasso selection has no
    p-values. ``score_matrix``: ``entry_penalty``; ``adjacency``: the support. ``alpha`` is
    recorded but not used.
    """
    n_folds = 5
    lags = int(max_lag)
    # Every fold must leave rows to fit and to score: two per fold at the very least.
    check_lagged_regression(
        data, lags, max(2 * n_folds, 10), f"group-lasso Granger (max_lag={lags})"
    )
    fit = group_lasso_var([trial.x for trial in data.trials], lags, lam, n_folds=n_folds)
    strength = np.repeat(fit.group_norm[:, :, None], lags, axis=2)
    extra: dict[str, Any] = {
        "penalty": "group-lasso",
        "lambda_rule": lambda_rule(lam, LAMBDA_RULE.format(k=n_folds)),
        "lambda": fit.lam,
        "strength_kind": "group_norm_standardised",
        "score_kind": "entry_penalty",
        "n_rows": fit.n_rows,
        "dt": data.dt,
        "coefficient": fit.coefficient,
        "intercept": fit.intercept,
    }
    if fit.path_lambda is not None:
        extra["path"] = {"lambda": fit.path_lambda, "cv_error": fit.cv_error,
                         "cv_se": fit.cv_se, "n_active": fit.n_active}
    return support_graph(data.variables, "granger", lags, alpha, strength,
                         np.repeat(fit.support[:, :, None], lags, axis=2), fit.entry_penalty,
                         extra)


# -- internals ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Problem:
    """Standardised design z (N, L*d), column (lag-1)*d + j, and targets y (N, d)."""

    z: np.ndarray
    y: np.ndarray
    z_mean: np.ndarray
    z_std: np.ndarray
    y_mean: np.ndarray
    y_std: np.ndarray
    lags: int

    @classmethod
    def standardise(cls, regressors: np.ndarray, targets: np.ndarray, lags: int) -> _Problem:
        z_mean, z_std = regressors.mean(axis=0), regressors.std(axis=0)
        y_mean, y_std = targets.mean(axis=0), targets.std(axis=0)
        if np.any(z_std == 0) or np.any(y_std == 0):
            raise DataError("group-lasso VAR needs columns that vary over the regression rows")
        z = (regressors - z_mean) / z_std
        y = (targets - y_mean) / y_std
        return cls(z, y, z_mean, z_std, y_mean, y_std, lags)

    @property
    def d(self) -> int:
        return int(self.y.shape[1])

    def result(
        self, b: np.ndarray, lam: np.ndarray, kkt: np.ndarray, **path: Any
    ) -> GroupLassoVAR:
        """Unstandardise coefficients b (L*d, d) into a GroupLassoVAR (kkt: the path score)."""
        d, lags = self.d, self.lags
        raw = b / self.z_std[:, None] * self.y_std[None, :]
        intercept = self.y_mean - self.z_mean @ raw

        def by_pair(a: np.ndarray) -> np.ndarray:
            return a.reshape(lags, d, d).transpose(1, 2, 0)

        norms = _group_norms(b[None], lags)[0]
        np.fill_diagonal(norms, 0.0)
        return GroupLassoVAR(
            coefficient=by_pair(raw), standardised=by_pair(b), group_norm=norms,
            entry_penalty=kkt, intercept=intercept, lam=lam, n_rows=int(self.y.shape[0]), **path,
        )


class _Solver:
    """FISTA for all d targets of one design at once; self groups unpenalised."""

    def __init__(self, z: np.ndarray, y: np.ndarray, lags: int, tol: float, max_iter: int):
        n = z.shape[0]
        self.lags, self.d = lags, y.shape[1]
        self.gram = z.T @ z / n  # (L*d, L*d)
        self.cross = z.T @ y / n  # (L*d, d)
        self.step = 1.0 / max(float(np.linalg.eigvalsh(self.gram)[-1]), 1e-12)
        self.tol, self.max_iter = tol, max_iter
        self.start = self._own_lags_fit()

    def _own_lags_fit(self) -> np.ndarray:
        """Least squares of each target on its own lags only: the solution for lam >= lam_max."""
        b = np.zeros_like(self.cross)
        for i in range(self.d):
            rows = np.arange(self.lags) * self.d + i
            b[rows, i] = np.linalg.lstsq(self.gram[np.ix_(rows, rows)], self.cross[rows, i],
                                         rcond=None)[0]
        return b

    def _kkt(self, b: np.ndarray) -> np.ndarray:
        """(d, d) [source][target]: ||gradient of the loss over the group|| / sqrt(L)."""
        gradient = self.gram @ b - self.cross
        norms = _group_norms(gradient[None], self.lags)[0] / np.sqrt(self.lags)
        np.fill_diagonal(norms, 0.0)
        return norms

    def lambda_max(self) -> np.ndarray:
        """(d,) the smallest lam per target at which every cross group is zero."""
        return np.maximum(self._kkt(self.start).max(axis=0), 1e-12)

    def kkt_score(self, path: np.ndarray) -> np.ndarray:
        """(d, d) the KKT statistic's largest value over path solutions (K, L*d, d)."""
        return np.max([self._kkt(b) for b in path], axis=0)

    def path(self, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Solutions (K, L*d, d) along lams (K, d), each warm-started from the previous one,
        and the KKT path score (d, d)."""
        b = self.start.copy()
        out = np.empty((lams.shape[0],) + b.shape)
        for k, lam in enumerate(lams):
            b = self._fista(b, lam)
            out[k] = b
        return out, self.kkt_score(out)

    def _fista(self, b: np.ndarray, lam: np.ndarray) -> np.ndarray:
        threshold = self.step * np.sqrt(self.lags) * lam  # (d,) per target
        momentum, t = b.copy(), 1.0
        for _ in range(self.max_iter):
            gradient = self.gram @ momentum - self.cross
            new = _group_soft_threshold(momentum - self.step * gradient, threshold, self.lags)
            # Adaptive restart (O'Donoghue & Candes 2015): drop the momentum once it points uphill.
            if np.sum((momentum - new) * (new - b)) > 0:
                t = 1.0
            t_next = (1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0
            momentum = new + (t - 1.0) / t_next * (new - b)
            moved = np.max(np.abs(new - b))
            b, t = new, t_next
            if moved <= self.tol * max(np.max(np.abs(b)), 1e-12):
                break
        return b


def _group_norms(b: np.ndarray, lags: int) -> np.ndarray:
    """(K, d, d) [k][source][target] norms over lags of coefficient stacks (K, L*d, d)."""
    k, rows, d = b.shape
    return np.sqrt(np.sum(b.reshape(k, lags, rows // lags, d) ** 2, axis=1))


def _group_soft_threshold(v: np.ndarray, threshold: np.ndarray, lags: int) -> np.ndarray:
    """Prox of ``sum_{j != i} threshold_i ||v_{j,i}||`` for v (L*d, d): shrink each cross group's
    norm by the target's threshold (to zero when it is smaller); self groups pass unchanged."""
    d = v.shape[1]
    groups = v.reshape(lags, d, d)
    norms = np.sqrt(np.sum(groups**2, axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(norms > threshold, 1.0 - threshold / norms, 0.0)
    np.fill_diagonal(factor, 1.0)
    return (groups * factor).reshape(v.shape)


def _cross_validate(
    problem: _Problem, lags: int, grid: np.ndarray, n_folds: int, tol: float, max_iter: int
) -> tuple[np.ndarray, np.ndarray]:
    """K-fold CV error (K_lam, d) of every path point per target, and its standard error.

    Folds are contiguous blocks of rows, each predicted by the path fitted to the others. The
    error is the mean squared standardised residual over all rows; its standard error is the
    spread of the squared residuals over sqrt(rows), rows counting as independent (they are
    for white innovations, which the VAR assumes).
    """
    n = problem.y.shape[0]
    bounds = np.linspace(0, n, n_folds + 1).astype(int)
    squared = np.empty((n,) + grid.shape)  # (rows, K_lam, d)
    for f in range(n_folds):
        test = np.zeros(n, dtype=bool)
        test[bounds[f] : bounds[f + 1]] = True
        solver = _Solver(problem.z[~test], problem.y[~test], lags, tol, max_iter)
        path, _ = solver.path(grid)
        predicted = np.einsum("np,kpd->nkd", problem.z[test], path)
        squared[test] = (problem.y[test][:, None, :] - predicted) ** 2
    return mean_and_standard_error(squared, axis=0)
