"""Granger causality between groups of variables (``--clusters "A=x1,x2;B=x3,x4"``).

One VAR(max_lag) with every variable (clustered or not) is fitted by least squares. For each
ordered pair of clusters ``S -> T`` the hypothesis "all lags of all of S's variables are zero in
the equations of all of T's variables" is tested with the multivariate likelihood ratio

    LR = (n - c) * (log det Sigma_restricted - log det Sigma_full)  ~  chi2(q),

where ``Sigma`` are the ML residual covariances of T's equations (T x T), n the regression
rows, ``q = (number of lags tested) * |S| * |T|`` and ``c = 1 + d * max_lag`` the coefficients
per equation (Sims' small-sample correction of ``n``; it makes the test less liberal when
``c`` is not small next to ``n``). Because every equation has the same regressors, least
squares per equation is the ML fit of T's block, so nothing but the restricted regressions
needs refitting. This is a group test, not a maximum over member links: many weak links that
are each insignificant can add up to a clear group link.

Variables in no cluster are not nodes of the graph but stay in the VAR, so every test
conditions on them too (name each in a cluster of its own to see it as a node).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

from dynid.causal.base import CausalSettings
from dynid.causal.fdr import adjust_pvalues
from dynid.causal.granger import granger
from dynid.causal.graph import CausalGraph, lagged_edges, pair_scores
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.linear.design import lagged_design

SYNTAX = '"NAME=var1,var2;NAME2=var3,..."'


def parse_clusters(text: str, variables: tuple[str, ...] | list[str]) -> dict[str, list[str]]:
    """``"A=x1,x2;B=x3"`` -> ``{"A": ["x1", "x2"], "B": ["x3"]}``, in the order written.

    Spaces around names are ignored. UsageError for malformed text (a group without ``=``, an
    empty name or member list, a repeated cluster name); then ``check_clusters``.
    """
    clusters: dict[str, list[str]] = {}
    groups = [group.strip() for group in text.split(";")]
    for group in groups:
        if not group:
            continue
        name, sep, members_text = group.partition("=")
        name = name.strip()
        members = [member.strip() for member in members_text.split(",")]
        if not sep or not name or not any(members) or not all(members):
            raise UsageError(f"--clusters: cannot read {group!r}; expected {SYNTAX}")
        if name in clusters:
            raise UsageError(f"--clusters: cluster {name!r} is defined twice")
        clusters[name] = members
    return check_clusters(clusters, variables)


def check_clusters(
    clusters: Mapping[str, Sequence[str]], variables: tuple[str, ...] | list[str]
) -> dict[str, list[str]]:
    """``clusters`` (name -> member variables) as a plain dict, after checking it: UsageError
    for an empty name or member list, a variable in two clusters, or fewer than two clusters;
    DataError naming a variable that is not among ``variables``."""
    checked: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for name, members in clusters.items():
        if isinstance(members, str) or not name or not members or not all(members):
            raise UsageError(f"--clusters: cannot read cluster {name!r} = {members!r}; expected {SYNTAX}")
        for member in members:
            if member in owner:
                raise UsageError(
                    f"--clusters: variable {member!r} is in both {owner[member]!r} and {name!r}"
                )
            owner[member] = name
        checked[str(name)] = [str(member) for member in members]
    if len(checked) < 2:
        raise UsageError(f"--clusters needs at least two clusters, e.g. {SYNTAX}")
    known = set(variables)
    for member in owner:
        if member not in known:
            raise DataError(
                f"--clusters: unknown variable {member!r}; the variables are {', '.join(variables)}"
            )
    return checked


def cluster_granger(
    data: Dataset, clusters: dict[str, list[str]], settings: CausalSettings
) -> CausalGraph:
    """Group Granger causality between ``clusters`` (name -> member variables) of ``data``.

    Result over the cluster names (k of them): one ``Edge`` per (S, T, lag), S != T, testing lag
    ``lag`` of all of S's variables in T's equations (``q = |S| * |T|``); ``p_value`` adjusted by
    ``settings.correction`` over the ``k * (k - 1) * max_lag`` such tests; ``strength`` is the
    generalised partial R^2 ``1 - det Sigma_full / det Sigma_restricted`` in [0, 1] (the share of
    T's residual generalised variance the tested lags explain; unsigned, since a group link has
    no single sign). ``score_matrix[S, T] = -log10(min over lags of the adjusted p-value)``,
    capped at 300; ``adjacency``: some lag significant. ``extra``: ``clusters``, ``correction``,
    ``n_rows``, ``lr_statistic``/``p_value_raw`` (k, k, max_lag) ``[source][target][lag - 1]``
    and ``joint``: the all-lags test per pair (``lr_statistic``, ``df`` (k, k),
    ``p_value_raw``, ``p_value`` adjusted over the ``k * (k - 1)`` pairs, ``significant``).

    Raises DataError for data Granger cannot test (see ``granger.granger``) and for a cluster
    member not in ``data.variables``.
    """
    lags = settings.max_lag
    names = list(clusters)
    column = {name: j for j, name in enumerate(data.variables)}
    for members in clusters.values():
        for member in members:
            if member not in column:
                raise DataError(f"--clusters: unknown variable {member!r}")
    members_of = [np.array([column[m] for m in clusters[name]]) for name in names]

    # The variable-level fit rejects, with its messages, every data set the VAR cannot test
    # (missing values, too few samples, constant, exactly predicted or collinear columns). It
    # only warns of columns redundant at one time step; the group tests below need every
    # column, so they refuse those here, in one line instead of a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        variable_level = granger(
            data, max_lag=lags, alpha=settings.alpha, correction=settings.correction
        )
    for line in variable_level.extra["warnings"]:
        raise DataError(f"{line.split('; ')[0]}; group tests need every column, drop it")
    z, y = _centred_design(data, lags)
    n_rows, d = y.shape
    # Every regression below needs only the cross products of [z y], which the triangular
    # factor of one QR holds exactly: regressions on its (k + d) rows replace those on n rows.
    r = np.linalg.qr(np.hstack([z, y]), mode="r")
    rz, ry = r[:, : z.shape[1]], r[:, z.shape[1] :]
    full = _residuals(rz, ry)
    effective_n = n_rows - (1 + d * lags)  # Sims: n minus coefficients per equation

    k = len(names)
    lr = np.zeros((k, k, lags))
    p_raw = np.ones((k, k, lags))
    gain = np.zeros((k, k, lags))
    lr_joint = np.zeros((k, k))
    p_joint = np.ones((k, k))
    df_joint = np.zeros((k, k), dtype=int)
    # Restrictions: S's lag-l columns for each l (stored at l - 1), then all of S's lags (None).
    restrictions = [([lag], lag - 1) for lag in range(1, lags + 1)]
    restrictions.append((list(range(1, lags + 1)), None))
    for s, sources in enumerate(members_of):
        for lag_set, store in restrictions:
            dropped = [(lag - 1) * d + j for lag in lag_set for j in sources]
            restricted = _residuals(np.delete(rz, dropped, axis=1), ry)
            for t, targets in enumerate(members_of):
                if t == s:
                    continue
                log_ratio = _log_det(restricted[:, targets]) - _log_det(full[:, targets])
                statistic = max(effective_n * log_ratio, 0.0)
                df = len(lag_set) * sources.size * targets.size
                p = float(stats.chi2.sf(statistic, df))
                if store is None:
                    lr_joint[s, t], p_joint[s, t], df_joint[s, t] = statistic, p, df
                else:
                    lr[s, t, store], p_raw[s, t, store] = statistic, p
                    gain[s, t, store] = -np.expm1(-max(log_ratio, 0.0))

    cross = ~np.eye(k, dtype=bool)
    p_adj = np.full((k, k, lags), np.nan)
    p_adj[cross] = adjust_pvalues(p_raw[cross], settings.correction)  # type: ignore[arg-type]
    significant = cross[:, :, None] & (np.nan_to_num(p_adj, nan=1.0) <= settings.alpha)
    p_joint_adj = np.full((k, k), np.nan)
    p_joint_adj[cross] = adjust_pvalues(
        p_joint[cross], settings.correction  # type: ignore[arg-type]
    )

    edges = lagged_edges(names, gain, p_adj, significant, range(1, lags + 1))
    score = pair_scores(p_adj)
    return CausalGraph(
        variables=tuple(names),
        method="granger",
        max_lag=lags,
        alpha=settings.alpha,
        edges=edges,
        score_matrix=score,
        adjacency=significant.any(axis=2).astype(np.int8),
        extra={
            "clusters": {name: list(clusters[name]) for name in names},
            "correction": settings.correction,
            "strength_kind": "generalized_partial_r2",
            "n_rows": int(n_rows),
            "lr_statistic": lr,
            "p_value_raw": np.where(cross[:, :, None], p_raw, np.nan),
            "joint": {
                "lr_statistic": lr_joint,
                "df": df_joint,
                "p_value_raw": np.where(cross, p_joint, np.nan),
                "p_value": p_joint_adj,
                "significant": cross & (np.nan_to_num(p_joint_adj, nan=1.0) <= settings.alpha),
            },
        },
    )


def _centred_design(data: Dataset, lags: int) -> tuple[np.ndarray, np.ndarray]:
    """Lagged regressors (N, d*lags), standardised, and centred targets (N, d).

    Centring stands in for the intercept (all columns then orthogonal to it) and scaling keeps
    the QR well conditioned; neither changes any residual.
    """
    lagged = lagged_design([trial.x for trial in data.trials], lags, trend=False)
    design = lagged.regressors
    z = (design - design.mean(axis=0)) / design.std(axis=0)
    return z, lagged.targets - lagged.targets.mean(axis=0)


def _residuals(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares residuals of every column of ``y`` on ``z`` (full column rank)."""
    q, _ = np.linalg.qr(z)
    return y - q @ (q.T @ y)


def _log_det(residuals: np.ndarray) -> float:
    """log det of the residual cross-product matrix ``E'E`` (n, the rows, cancels in ratios)."""
    sign, value = np.linalg.slogdet(residuals.T @ residuals)
    if sign <= 0:
        raise DataError(
            "the residuals of a cluster's equations are exactly collinear; drop a variable"
        )
    return float(value)
