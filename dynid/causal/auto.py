"""``--method auto``: the method whose premise the data meet, chosen in stages from statistics
of the data themselves.

Each method answers its own question well and others' badly (benchmarks/README.md, issue 16
sections): ``sindy`` is exact where the variables obey sparse polynomial equations among
themselves and near chance on partially observed mixtures; ``consensus`` (crosspred + pcmci)
ranks links that act at the same sample, where lagged tests see little; ``granger`` is the best
lagged test on stochastic or high-dimensional data. So:

(a) **Closed equations -> sindy.** Sparse equations are selected for every variable
    (``SparseEquations.equations``: held-out AICc over the polynomial libraries). When each
    selected equation predicts its held-out derivatives with R^2 >= ``_CLOSED_R2`` the recorded
    variables form a closed deterministic system, and the graph is the equations' Jacobian (the
    premise of Brunton et al., PNAS 113:3932, 2016). A hidden coordinate, a stochastic drive or
    a non-polynomial term leaves a variable whose equation explains little of its change out of
    sample (held-out R^2 near 0 on VARs and on one coordinate of a 3-D node, benchmarks).
(b) **Dependence at the same sample -> consensus.** Per ordered pair (i, j), ``instantaneous``:
    two linear models of ``x_j(t)`` scored on held-out rows (blocked cross-validation), one on
    every variable's past (lags 1..max_lag), one on that past and ``x_i(t)``. A lagged system
    leaves each variable an innovation its past cannot predict, and where those innovations are
    independent another variable's present adds nothing out of sample: the second model,
    larger, forecasts no better. Whether it forecasts better is the Diebold-Mariano test (J Bus
    Econ Stat 13:253, 1995) on the held-out squared-error differences, their variance by Newey
    and West's HAC estimator (Econometrica 55:703, 1987; bandwidth floor(4 (n/100)^(2/9)), their
    1994 rule), one-sided; the route is consensus when some pair's test rejects at
    ``_ROUTE_ALPHA`` after Bonferroni over the d (d - 1) pairs (Geweke's instantaneous feedback,
    JASA 77:304, 1982, tested pair by pair out of sample). On smooth deterministic data a
    misspecified linear past leaves model error that another variable's present shares; the
    test's large-sample power makes it fire on that as records grow long, which is why stage
    (a) comes first and why the statistic is reported (per target, its strongest source and
    ``share``: the fraction of the past model's held-out error that source's present removes).
(c) **Otherwise granger.**

The result is the chosen method's graph, exactly as ``--method <chosen>`` gives it (same
settings, each method's own defaults), under the method name ``auto``, with ``extra["auto"]``:
``method`` (the chosen one), ``reason`` (a sentence) and ``statistics`` (the numbers each
stage looked at).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dynid.causal import registry
from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.blocked_cv import (
    FOLDS, GAP, RIDGE, blocked_folds, ridge_design, ridge_gram, standardized, standardized_trials)
from dynid.causal.common import check_values
from dynid.causal.graph import CausalGraph
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.runtime import SilentProgress

# (a): held-out R^2 every selected equation needs for the equations to count as closed.
_CLOSED_R2 = 0.9
# (b): family-wise level of the Diebold-Mariano tests (Bonferroni over the variables).
_ROUTE_ALPHA = 0.05


@dataclass(frozen=True)
class Instantaneous:
    """Per pair (d, d) ``[source][target]``: ``share`` = 1 - MSE(past and the source's present)
    / MSE(past) of the target, both held-out; ``z`` the Diebold-Mariano statistic of the
    squared-error differences (positive: the present helps); ``p_value`` its one-sided p-value,
    Bonferroni-adjusted over the d (d - 1) pairs (capped at 1). The diagonal: share 0, z -inf,
    p 1."""

    share: np.ndarray
    z: np.ndarray
    p_value: np.ndarray


def instantaneous(data: Dataset, max_lag: int) -> Instantaneous | None:
    """``Instantaneous`` of ``data`` (module docstring, stage b): linear models on standardized
    columns. One source at a time, not all others at once: a tree of same-sample links gives
    each target one or two parents, and d - 1 extra columns, most of them irrelevant, cost more
    held-out error than one parent removes (on a held-out CausalDynamics graph every target's
    forecast got worse with all of them, while single parents helped at z 3.6-10.9 on the seen
    graphs). None when a training fold would hold no more rows than the larger model has
    coefficients."""
    from scipy.stats import norm

    from dynid.linear.design import lagged_design

    scaled = standardized_trials([trial.x for trial in data.trials])
    design = lagged_design(scaled, max_lag, trend=False)
    past, now = design.regressors, design.targets
    rows, d = now.shape
    if rows - rows // FOLDS - 2 * GAP <= past.shape[1] + 1:
        return None
    without, with_source = pairwise_held_out_residuals(past, now)
    bandwidth = int(4 * (rows / 100) ** (2 / 9))
    share, z = np.zeros((d, d)), np.full((d, d), -np.inf)
    for i in range(d):
        for j in range(d):
            if i == j:
                continue
            gain = without[:, j] ** 2 - with_source[i, :, j] ** 2
            share[i, j] = gain.sum() / max(float(without[:, j] @ without[:, j]), np.finfo(float).tiny)
            z[i, j] = gain.mean() / np.sqrt(max(newey_west_variance(gain, bandwidth) / rows, np.finfo(float).tiny))
    p_value = np.minimum(d * (d - 1) * norm.sf(z), 1.0)
    return Instantaneous(share=share, z=z, p_value=p_value)


def pairwise_held_out_residuals(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, q) residuals of ``y`` (rows, q) on ``design`` (rows, p) and an intercept, each row
    predicted by the fit to the rows outside its block (``blocked_cv``: ``FOLDS`` contiguous
    blocks, training rows more than ``GAP`` from the block, ridge ``RIDGE`` times the training
    rows on standardized columns, the intercept not shrunk); and (q, rows, q): entry [i, :, j] the
    held-out residuals of ``y[:, j]`` when ``y[:, i]`` (the source's present) is a
    further column of the design, for every pair at the cost of one fit per fold: the bordered
    normal equations solved by their Schur complement, [[M, g], [g', c'c + r]] with M the
    design's ridge Gram matrix, so adding the column c changes the coefficient of the design by
    -M^-1 g gamma and predicts gamma (c - A M^-1 g) more."""
    rows, q = y.shape
    a = ridge_design(design)
    c = standardized(y)
    out = np.empty_like(y, dtype=float)
    paired = np.empty((q, rows, q))
    for test, train in blocked_folds(rows):
        at, ct, yt = a[train], c[train], y[train]
        m = ridge_gram(at)
        ridge = RIDGE * len(train)  # the bordered column's share, as ridge_gram's
        coef = np.linalg.solve(m, at.T @ yt)  # (p, q)
        out[test] = y[test] - a[test] @ coef
        g = at.T @ ct  # (p, q): each source column against the design
        h = np.linalg.solve(m, g)  # (p, q): M^-1 g per source
        schur = np.einsum("ni,ni->i", ct, ct) + ridge - np.einsum("pi,pi->i", g, h)  # (q,)
        gamma = (ct.T @ yt - g.T @ coef) / schur[:, None]  # (source, target)
        source_left = c[test] - a[test] @ h  # (test rows, source)
        paired[:, test, :] = out[test][None, :, :] - source_left.T[:, :, None] * gamma[:, None, :]
    return out, paired


def newey_west_variance(series: np.ndarray, bandwidth: int) -> float:
    """The long-run variance of ``series`` (n,): autocovariances to ``bandwidth`` lags with
    Bartlett weights 1 - k / (bandwidth + 1) (Newey and West 1987), never negative."""
    centred = series - series.mean()
    n = len(centred)
    variance = float(centred @ centred) / n
    for k in range(1, min(bandwidth, n - 1) + 1):
        variance += 2.0 * (1.0 - k / (bandwidth + 1)) * float(centred[k:] @ centred[:-k]) / n
    return max(variance, 0.0)


class Auto(CausalMethod):
    """``--method auto``: sindy, consensus or granger, chosen from the data (module docstring).

    Edges, ``score_matrix`` and ``adjacency``: the chosen method's, unchanged; ``extra`` its
    own plus ``auto`` (``method``, ``reason``, ``statistics``); ``method`` "auto"."""

    name = "auto"
    contemporaneous = True
    use_when = (
        "data of unknown kind (the default): closed polynomial equations -> sindy, "
        "dependence at the same sample that the past does not explain -> consensus, else "
        "granger; the choice and its statistics are printed"
    )
    summary = "chooses sindy, consensus or granger from held-out statistics of the data"

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        # The chosen method reports as a whole: its own stages would fight the spinner.
        quiet = replace(settings, training=replace(settings.training, progress=SilentProgress()))
        statistics: dict[str, Any] = {}
        check_values(data, "auto")  # what no stage can use is refused, not routed around
        # By name, as every route: methods do not import each other. sindy's two steps
        # (equations, then the bootstrap graph) let (a) look before paying for the bags.
        sindy: Any = registry.get("sindy")()
        try:
            selected = sindy.equations(data)
        except DataError as error:  # e.g. too few samples to differentiate: (a) does not apply
            closed = f"no sparse equations ({error})"
        else:
            r2 = selected.validation_r2
            statistics["sindy_validation_r2"] = dict(zip(data.variables, r2.tolist()))
            statistics["sindy_n_terms"] = dict(zip(data.variables, selected.n_terms.tolist()))
            worst = int(np.argmin(r2))
            closed = (f"the sparse equations are not closed ({data.variables[worst]}: held-out "
                      f"R^2 {r2[worst]:.3f} < {_CLOSED_R2:g})")
            if r2[worst] >= _CLOSED_R2:
                reason = (f"sparse equations predict every variable's held-out derivative "
                          f"(smallest R^2 {r2[worst]:.4f}, {data.variables[worst]}; closed at >= {_CLOSED_R2:g})")
                try:
                    return _routed(sindy.graph(data, settings, selected), "sindy", reason, statistics)
                except DataError as error:  # too short for the bootstrap bags
                    closed = f"closed sparse equations, but {error}"
        found = instantaneous(data, settings.max_lag)
        if found is None:
            reason = f"{closed}; too few rows to test dependence at the same sample: lagged tests"
            return _routed(_run("granger", data, quiet), "granger", reason, statistics)
        names = data.variables
        # Per target, its strongest same-sample source.
        best = np.argmax(found.z, axis=0)
        picks = (best, np.arange(len(names)))
        statistics["instantaneous_source"] = dict(zip(names, (names[i] for i in best)))
        statistics["instantaneous_share"] = dict(zip(names, found.share[picks].tolist()))
        statistics["instantaneous_z"] = dict(zip(names, found.z[picks].tolist()))
        statistics["instantaneous_p"] = dict(zip(names, found.p_value[picks].tolist()))
        source, target = np.unravel_index(int(np.argmin(found.p_value)), found.p_value.shape)
        p = float(found.p_value[source, target])
        pair = f"{names[source]} -> {names[target]}"
        if p < _ROUTE_ALPHA:
            reason = (f"{closed}; {names[source]}'s present improves the held-out forecast of "
                      f"{names[target]} from every variable's past (removes "
                      f"{found.share[source, target]:.0%} of its error; Diebold-Mariano p = "
                      f"{p:.2g} after Bonferroni over the pairs, < {_ROUTE_ALPHA:g}): dependence "
                      "at the same sample")
            chosen = "consensus"
        else:
            reason = (f"{closed}; no variable's present improves another's held-out forecast "
                      f"from every variable's past (smallest Diebold-Mariano p = {p:.2g} after "
                      f"Bonferroni over the pairs, {pair}): lagged dependence")
            chosen = "granger"
        return _routed(_run(chosen, data, quiet), chosen, reason, statistics)


def _run(method: str, data: Dataset, settings: CausalSettings) -> CausalGraph:
    """``--method method`` with its own defaults."""
    cls = registry.get(method)
    return cls(cls.Params()).discover(data, settings)


def _routed(graph: CausalGraph, method: str, reason: str, statistics: dict[str, Any]) -> CausalGraph:
    """``graph``, the result of ``method``, as auto's: ``method`` "auto", and ``extra["auto"]``
    saying which method was chosen and why."""
    return replace(graph, method=Auto.name, extra={
        **graph.extra, "auto": {"method": method, "reason": reason, "statistics": statistics}})
