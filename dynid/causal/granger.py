"""Conditional (multivariate) Granger causality from one VAR(max_lag) least-squares fit.

For every target ``i`` the regression is
``x_i(t) = c_i + sum_{k=1..L} sum_j B[k, j, i] x_j(t-k) + e`` over all variables (self-lags
included). ``x_j -> x_i`` at lag ``k`` is tested by the t-test of
``B[k, j, i]`` (the single-restriction F-test, ``F(1, dof) = t^2``); the joint test over all lags
of ``j`` is the Wald form of the restricted-vs-unrestricted F-test, ``F(L, dof)``, which equals
it exactly for least squares, so nothing is refitted. All targets share one design matrix, so
the whole method is one QR factorisation.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import linalg, stats

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.common import (
    EXACT_FIT,
    Redundancy,
    SelfPrediction,
    check_columns_after_lags,
    check_lagged_regression,
    check_lambda,
    redundant_columns,
    report_self_predicted,
    self_predicted_columns,
)
from dynid.causal.fdr import adjust_pvalues, check_correction
from dynid.causal.graph import CausalGraph, lagged_edges, pair_scores
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.linear.design import lagged_design
from dynid.params import Hyperparameters, param

# A null-space direction component counts towards naming a variable above this fraction of the max.
_NULL_WEIGHT = 1e-6
# What Granger does with a redundant column, for its warning.
_CONSEQUENCE = (
    "it is left out of the regressors, and its links out (and in from what it copies) cannot be "
    "separated: reported with p = 1, strength 0"
)


@dataclass(frozen=True)
class GrangerParams(Hyperparameters):
    """``-p`` options of ``--method granger``."""

    penalty: Literal["none", "group-lasso"] = param(
        "none",
        "none: least-squares t/F-tests; group-lasso: sparse VAR for many variables and few "
        "samples, significance = selected (no p-values)",
    )
    lam: float | None = param(
        None,
        "group-lasso penalty on standardised data; none = per target by 5-fold CV, 1-SE rule",
    )

    def __post_init__(self) -> None:
        if self.lam is not None and self.penalty != "group-lasso":
            raise ValueError("lam is only used with penalty=group-lasso")
        check_lambda(self.lam)


class Granger(CausalMethod):
    """``--method granger``: conditional VAR Granger causality, t-tests per link and lag, or
    with ``-p penalty=group-lasso`` the group-lasso VAR of ``dynid.causal.group_lasso``."""

    name = "granger"
    use_when = (
        "lagged, roughly linear coupling (VAR-like data, or smooth nonlinear systems sampled finely, e.g. Lorenz-96); fastest"
    )
    summary = (
        "conditional (multivariate) VAR Granger causality: F/t-tests per link and lag, or a "
        "group-lasso VAR for many variables and few samples"
    )
    Params = GrangerParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        params = self.params
        assert isinstance(params, GrangerParams)
        if params.penalty == "group-lasso":
            from dynid.causal.group_lasso import group_lasso_granger

            return group_lasso_granger(
                data, max_lag=settings.max_lag, alpha=settings.alpha, lam=params.lam
            )
        return granger(
            data, max_lag=settings.max_lag, alpha=settings.alpha, correction=settings.correction
        )


def granger(
    data: Dataset, *, max_lag: int = 5, alpha: float = 0.05, correction: str = "bh"
) -> CausalGraph:
    """Conditional Granger causality between every ordered pair of ``data``'s variables.

    Trials are independent: lagged rows never reach across a trial boundary, and each trial of
    ``n`` samples contributes ``n - max_lag`` rows. Lags are in samples (times ``data.dt`` in time
    units), so sampling must be uniform. Inputs (``data.inputs``) are not used.

    Result: one ``Edge`` per (source, target, lag) with ``source != target`` and lag in
    ``1..max_lag``: ``p_value`` is the per-lag test's p-value adjusted by ``correction`` over
    all ``d * (d - 1) * max_lag`` such tests (self-lags are regressors but neither edges nor part
    of the family), ``significant`` is ``p_value <= alpha``, and ``strength`` is the signed
    partial correlation of ``x_target(t)`` with ``x_source(t - lag)`` given every other regressor,
    ``t / sqrt(t^2 + dof)`` in [-1, 1] (the sign says whether the source pushes the target up or
    down; scale-free, comparable across pairs and with ParCorr-based methods).
    ``score_matrix[s, t] = -log10`` of the pair's summary p-value, adjusted by ``correction``
    over the pairs (``extra["summary"]["p_value"]``), capped at 300: the joint test of all lags
    ``1..p`` of the source in the VAR(p) for each order ``p = 1..max_lag``, all fitted on the same
    rows (the leading columns of one design, so one QR serves them all), and the smallest of the
    ``max_lag`` p-values times ``max_lag`` (Bonferroni over orders, so it stays a p-value). A
    joint test pools evidence spread over several lags, so it ranks pairs better than the
    smallest per-lag p; but it divides the evidence by its degrees of freedom, so a coupling that
    the first lags already carry is diluted by the lags it does not need: the order that fits
    the coupling gives the most powerful test (Lorenz-96 N=10 at dt 0.05, max_lag 3: AUROC 0.95
    against 0.90 for the max_lag joint test alone; benchmarks/README.md).
    ``extra`` holds ``correction``, ``dof``, ``n_rows``, ``dt``, ``residual_std`` (d,), per-lag
    arrays (d, d, max_lag) ``[source][target][lag - 1]`` ``coefficient`` (target units per
    source unit), ``t_statistic`` and ``p_value_raw`` (diagonal = self-lags), and ``joint``: the
    all-lags test per pair, ``f_statistic`` and ``p_value_raw`` (d, d), ``p_value`` adjusted over
    the ``d * (d - 1)`` pairs and ``significant`` (diagonal null/false), ``df_num``, ``df_den``;
    ``summary``: ``p_value_by_order`` (max_lag, d, d) the joint test's raw p-value in each VAR(p),
    ``order`` (d, d) the order giving the smallest (0 where untested), ``p_value_raw`` (d, d) the
    Bonferroni min-p and ``p_value`` its adjusted value (both 1 for untestable pairs).

    Redundant columns (``common.redundant_columns``: exact or near, R^2 >= 0.999, linear copies
    of earlier columns at the same time step) are not refused: each is left out of the
    regressors (its past is, to that precision, the past of what it copies) but stays a target.
    The tests that cannot be separated are reported with ``p_value`` 1 (raw and adjusted),
    ``strength`` 0 and ``significant`` false, NaN ``t_statistic`` and joint ``f_statistic``, and
    are left out of the multiple-testing family: every link from a redundant column, and every
    link from a column it copies into it (indistinguishable from its self-dependence); its own
    self-lags are not regressors either (NaN ``t_statistic``, coefficient 0). Each
    redundant column gives one Python warning and one line of ``extra["warnings"]`` (always
    present, empty when none); ``extra["redundant"]`` lists ``{"column", "copies",
    "r_squared"}``.

    Self-predicted columns (``common.self_predicted_columns``: exactly a linear function of their
    own last ``order <= max_lag`` values, e.g. a clean sinusoid, order 2) are not refused either:
    their lags beyond ``order`` (combinations of lags 1..order) are left out of the regressors,
    so their joint tests have ``order`` numerator degrees of freedom (``df_num`` gives
    ``max_lag``, the others'), and the tests reported as above (``p_value`` 1, ``strength`` 0,
    NaN statistics, outside the family) are every link into them (their past leaves nothing to
    explain) and every link from their lags beyond ``order``. One warning each, as above;
    ``extra["self_predicted"]`` lists ``{"column", "order"}``.

    Raises UsageError for a bad option and DataError for data that cannot be tested: missing
    values, a constant column, too few samples for ``max_lag``, irregular sampling, lagged
    regressors that are still exactly collinear (e.g. one column a delayed copy of another), or a
    column exactly predicted by the others' lags.
    """
    _check_options(max_lag, alpha, correction)
    d, lags = data.n_variables, int(max_lag)
    # 1 + d*L coefficients per target plus at least one residual degree of freedom.
    check_lagged_regression(data, lags, d * lags + 2, f"max_lag={lags} with {d} variables")
    redundant = redundant_columns(data.stacked()[0])
    self_predicted = self_predicted_columns(data, lags)
    lagged = lagged_design([trial.x for trial in data.trials], lags, trend=False)
    check_columns_after_lags(data, lagged.regressors, lags)
    # in_model[lag - 1, source]: whether that lag of that source is a regressor. Regressor columns
    # are (lag-1)*d + source, the order of in_model.ravel(), so the design stays lag-major.
    in_model = np.ones((lags, d), dtype=bool)
    in_model[:, [item.column for item in redundant]] = False
    for item in self_predicted:
        in_model[item.order:, item.column] = False
    design, target = lagged.regressors[:, in_model.ravel()], lagged.targets
    n_rows = design.shape[0]
    dof = n_rows - 1 - int(in_model.sum())

    # Centre and scale the lagged columns: the intercept is then orthogonal to them and the QR is
    # well conditioned; slopes' t-statistics do not change, coefficients are rescaled below.
    std = design.std(axis=0)
    z = design
    z -= design.mean(axis=0)  # in place: the raw design is not needed again
    z /= std
    q, r = np.linalg.qr(z)
    _check_rank(data, r, n_rows, in_model)
    y = target - target.mean(axis=0)
    beta = linalg.solve_triangular(r, q.T @ y)  # (k*L, d), standardised regressors
    resid = y - z @ beta
    sigma2 = np.sum(resid**2, axis=0) / dof  # (d,) residual variance per target
    untestable = _untestable_pairs(redundant, self_predicted, d)
    # A self-predicted target has no residual (its tests are reported untestable); the others
    # must have one.
    exempt = np.isin(np.arange(d), [item.column for item in self_predicted])
    _check_residuals(data, sigma2 * dof, y, exempt)
    r_inv = linalg.solve_triangular(r, np.eye(r.shape[0]))
    cov_unit = r_inv @ r_inv.T  # (Z'Z)^{-1}; times sigma2_i = covariance of target i's beta
    # Division by a self-predicted target's zero residual variance: masked as untestable below.
    with np.errstate(divide="ignore", invalid="ignore"):
        p_by_order = _joint_p_by_order(q, r_inv, y, in_model)
        stderr = np.sqrt(np.outer(np.diag(cov_unit), sigma2))
        t_model = beta / stderr
        f_joint = _joint_wald(beta, cov_unit, sigma2, in_model)

    # Back to every source, [source][target][lag-1]; a lag left out has coefficient 0.
    def by_pair(a: np.ndarray, fill: float) -> np.ndarray:
        full = np.full((lags, d, d), fill)
        full[in_model] = a
        return full.transpose(1, 2, 0)

    coef = by_pair(beta / std[:, None], 0.0)
    t_pair = np.where(untestable[:, :, None], np.nan, by_pair(t_model, np.nan))
    p_pair = np.where(np.isnan(t_pair), 1.0, 2.0 * stats.t.sf(np.abs(t_pair), dof))
    f_joint[untestable] = np.nan
    p_joint = np.where(
        np.isnan(f_joint), 1.0, stats.f.sf(f_joint, in_model.sum(axis=0)[:, None], dof)
    )

    cross = ~np.eye(d, dtype=bool)
    tested = cross & ~untestable
    p_adj = np.where(np.repeat(untestable[:, :, None], lags, axis=2), 1.0, np.nan)
    p_adj[tested] = adjust_pvalues(p_pair[tested], correction)  # type: ignore[arg-type]
    significant = np.zeros_like(p_pair, dtype=bool)
    significant[tested] = p_adj[tested] <= alpha
    strength = np.nan_to_num(t_pair / np.sqrt(t_pair**2 + dof), nan=0.0)

    p_joint_adj = np.where(untestable, 1.0, np.nan)
    p_joint_adj[tested] = adjust_pvalues(p_joint[tested], correction)  # type: ignore[arg-type]
    p_by_order[:, untestable] = 1.0
    p_summary = np.minimum(lags * p_by_order.min(axis=0), 1.0)
    p_summary_adj = np.where(untestable, 1.0, np.nan)
    p_summary_adj[tested] = adjust_pvalues(p_summary[tested], correction)  # type: ignore[arg-type]
    best_order = np.where(tested, p_by_order.argmin(axis=0) + 1, 0)
    notes = [item.message(data, _CONSEQUENCE) for item in redundant]
    for note in notes:
        warnings.warn(note, stacklevel=2)
    reported = report_self_predicted(data, self_predicted)

    names = data.variables
    edges = lagged_edges(names, strength, p_adj, significant, range(1, lags + 1))
    score = pair_scores(p_summary_adj[:, :, None])
    return CausalGraph(
        variables=names,
        method="granger",
        max_lag=lags,
        alpha=float(alpha),
        edges=edges,
        score_matrix=score,
        adjacency=significant.any(axis=2).astype(np.int8),
        extra={
            "correction": correction,
            "strength_kind": "partial_correlation",
            "dof": int(dof),
            "n_rows": int(n_rows),
            "dt": data.dt,
            "warnings": notes + reported["warnings"],
            "redundant": [
                {"column": names[item.column], "copies": [names[k] for k in item.copies],
                 "r_squared": item.r_squared}
                for item in redundant
            ],
            "self_predicted": reported["self_predicted"],
            "residual_std": np.sqrt(sigma2),
            "coefficient": coef,
            "t_statistic": t_pair,
            "p_value_raw": p_pair,
            "joint": {
                "f_statistic": f_joint,
                "p_value_raw": p_joint,
                "p_value": p_joint_adj,
                "significant": cross & (np.nan_to_num(p_joint_adj, nan=1.0) <= alpha),
                "df_num": lags,
                "df_den": int(dof),
            },
            "summary": {
                "p_value_by_order": np.where(cross, p_by_order, np.nan),
                "order": best_order,
                "p_value_raw": np.where(cross, p_summary, np.nan),
                "p_value": p_summary_adj,
            },
        },
    )


def _untestable_pairs(
    redundant: list[Redundancy], self_predicted: list[SelfPrediction], d: int
) -> np.ndarray:
    """(d, d) [source][target]: links a regression cannot separate, given the redundant columns
    (every link from a redundant column, and from each column it copies into it) and the
    self-predicted ones (every link into them)."""
    untestable = np.zeros((d, d), dtype=bool)
    for item in redundant:
        untestable[item.column, :] = True
        untestable[list(item.copies), item.column] = True
    for prediction in self_predicted:
        untestable[:, prediction.column] = True
    np.fill_diagonal(untestable, False)
    return untestable


def _joint_wald(
    beta: np.ndarray, cov_unit: np.ndarray, sigma2: np.ndarray, in_model: np.ndarray
) -> np.ndarray:
    """F-statistic (d, t) [source][target] of "all lags of source are zero" for each of the t
    targets, NaN for a source with no lag in the model; ``in_model`` (L, d) [lag-1][source]
    says which lags are regressors, and ``beta`` (in_model.sum(), t) has their rows in the
    order of ``in_model.ravel()``.

    Wald form ``b_S' (V_SS)^{-1} b_S / (L_S * sigma2)`` with ``V = (Z'Z)^{-1}`` and ``L_S`` the
    source's lags in the model: for least squares this is exactly
    ``((RSS_restricted - RSS) / L_S) / (RSS / dof)``.
    """
    source_of = np.nonzero(in_model)[1]  # the source of each regressor, in design order
    f = np.full((in_model.shape[1], beta.shape[1]), np.nan)
    for j in np.unique(source_of):
        rows = np.flatnonzero(source_of == j)
        block = beta[rows]  # (L_S, t): source j's coefficients for every target
        quad = np.einsum("ki,kl,li->i", block, np.linalg.inv(cov_unit[np.ix_(rows, rows)]), block)
        f[j] = quad / (rows.size * sigma2)
    return f


def _joint_p_by_order(
    q: np.ndarray, r_inv: np.ndarray, y: np.ndarray, in_model: np.ndarray
) -> np.ndarray:
    """(lags, d, t) [order - 1][source][target]: p-value of "lags 1..p of source are zero" in the
    VAR(p) of each order p, fitted on the same rows as the VAR(lags); 1 for a source with no
    lag in the model.

    q, r_inv: the QR factor Q (rows, k) and R^{-1} of the centred, scaled lag-major design, the
    lags that ``in_model`` (lags, d) marks; the leading columns (those of lags 1..p) are the
    VAR(p) design: their QR is the leading block, and so is the inverse of that block of R.
    y: (rows, t) centred targets.
    """
    n_rows = q.shape[0]
    qty = q.T @ y
    out = np.empty((in_model.shape[0], in_model.shape[1], y.shape[1]))
    for p in range(1, in_model.shape[0] + 1):
        m = int(in_model[:p].sum())
        beta = r_inv[:m, :m] @ qty[:m]
        dof = n_rows - 1 - m
        sigma2 = np.sum((y - q[:, :m] @ qty[:m]) ** 2, axis=0) / dof
        cov_unit = r_inv[:m, :m] @ r_inv[:m, :m].T
        f = _joint_wald(beta, cov_unit, sigma2, in_model[:p])
        p_value = stats.f.sf(f, in_model[:p].sum(axis=0)[:, None], dof)
        out[p - 1] = np.where(np.isnan(f), 1.0, p_value)
    return out


def _check_options(max_lag: int, alpha: float, correction: str) -> None:
    if isinstance(max_lag, bool) or not isinstance(max_lag, (int, np.integer)) or max_lag < 1:
        raise UsageError(f"--max-lag must be a whole number of samples >= 1, got {max_lag!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise UsageError(
            f"--alpha must be a significance level strictly between 0 and 1, got {alpha!r}"
        )
    check_correction(correction)


def _check_residuals(data: Dataset, rss: np.ndarray, y: np.ndarray, exempt: np.ndarray) -> None:
    """DataError for a target its lags predict exactly: with no noise left, tests are undefined.
    ``exempt`` (d,): targets whose tests are all reported untestable instead."""
    tss = np.sum(y**2, axis=0)
    for i in np.flatnonzero((rss <= EXACT_FIT * tss) & ~exempt):
        raise DataError(
            f"{data.source}: column '{data.variables[i]}' is an exact linear function of the "
            "lagged variables (no noise is left), so Granger tests are undefined for it; drop it"
        )


def _check_rank(data: Dataset, r: np.ndarray, n_rows: int, in_model: np.ndarray) -> None:
    """DataError naming the variables behind an exact linear dependence among the regressors,
    the lags that ``in_model`` (lags, d) marks."""
    _, sv, vt = np.linalg.svd(r)
    tol = sv.max() * max(n_rows, r.shape[0]) * np.finfo(float).eps
    null = vt[sv <= tol]
    if null.size == 0:
        return
    weight = np.zeros(in_model.shape[1])
    np.maximum.at(weight, np.nonzero(in_model)[1], np.abs(null).max(axis=0))
    involved = [data.variables[j] for j in np.flatnonzero(weight > _NULL_WEIGHT * weight.max())]
    names = ", ".join(f"'{name}'" for name in involved)
    raise DataError(
        f"{data.source}: columns {names} are exactly collinear (one is a linear combination of "
        "the others, possibly at other lags), so their effects cannot be separated; drop one"
    )
