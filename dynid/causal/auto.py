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
(b) **Dependence at the same sample -> consensus.** Per target j, ``instantaneous``: two linear
    models of ``x_j(t)`` scored on held-out rows (blocked cross-validation), one on every
    variable's past (lags 1..max_lag), one on that past and the other variables' present. A
    lagged system leaves each variable an innovation its past cannot predict, and where those
    innovations are independent the others' present adds nothing out of sample: the second
    model, larger, forecasts worse or no better. Whether it forecasts better is the
    Diebold-Mariano test (J Bus Econ Stat 13:253, 1995) on the held-out squared-error
    differences, their variance by Newey and West's HAC estimator (Econometrica 55:703, 1987;
    bandwidth floor(4 (n/100)^(2/9)), their 1994 rule), one-sided; the route is consensus when
    some variable's test rejects at ``_ROUTE_ALPHA`` after Bonferroni over the variables
    (Geweke's instantaneous feedback, JASA 77:304, 1982, tested out of sample). On smooth
    deterministic data a misspecified linear past leaves model error that the present shares
    too; the test's large-sample power makes it fire on that as records grow long, which is
    why stage (a) comes first and why the statistic is reported (``share``: the fraction of the
    past model's held-out error the present removes).
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
from dynid.causal.common import check_values
from dynid.causal.graph import CausalGraph
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.runtime import SilentProgress

# (a): held-out R^2 every selected equation needs for the equations to count as closed.
_CLOSED_R2 = 0.9
# (b): family-wise level of the Diebold-Mariano tests (Bonferroni over the variables).
_ROUTE_ALPHA = 0.05
# (b): blocks of the cross-validation, rows left out on each side of a test block (the training
# rows next to it share its lag windows and, on smooth signals, its neighbourhood), and the
# ridge on standardized columns times the training rows (lagged columns of smooth signals are
# nearly collinear); the values crosspred uses for its held-out R^2.
_FOLDS = 5
_GAP = 20
_RIDGE = 1e-3


@dataclass(frozen=True)
class Instantaneous:
    """Per target (d,): ``share`` = 1 - MSE(past and the others' present) / MSE(past), both
    held-out; ``z`` the Diebold-Mariano statistic of the squared-error differences (positive:
    the present helps); ``p_value`` its one-sided p-value, Bonferroni-adjusted over the d
    targets (capped at 1)."""

    share: np.ndarray
    z: np.ndarray
    p_value: np.ndarray


def instantaneous(data: Dataset, max_lag: int) -> Instantaneous | None:
    """``Instantaneous`` of ``data`` (module docstring, stage b): linear models on standardized
    columns. None when a training fold would hold no more rows than the larger model has
    coefficients."""
    from scipy.stats import norm

    from dynid.linear.design import lagged_design

    trials = [trial.x for trial in data.trials]
    stacked = np.vstack(trials)
    sd = stacked.std(axis=0)
    scaled = [(x - stacked.mean(axis=0)) / np.where(sd > 0, sd, 1.0) for x in trials]
    design = lagged_design(scaled, max_lag, trend=False)
    past, now = design.regressors, design.targets
    rows, d = now.shape
    if rows - rows // _FOLDS - 2 * _GAP <= past.shape[1] + d:
        return None
    without = held_out_residuals(past, now)
    bandwidth = int(4 * (rows / 100) ** (2 / 9))
    share, z = np.empty(d), np.empty(d)
    for j in range(d):
        with_present = held_out_residuals(np.column_stack([past, np.delete(now, j, axis=1)]), now[:, [j]])[:, 0]
        gain = without[:, j] ** 2 - with_present**2
        share[j] = gain.sum() / max(float(without[:, j] @ without[:, j]), np.finfo(float).tiny)
        z[j] = gain.mean() / np.sqrt(max(newey_west_variance(gain, bandwidth) / rows, np.finfo(float).tiny))
    return Instantaneous(share=share, z=z, p_value=np.minimum(d * norm.sf(z), 1.0))


def held_out_residuals(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(rows, q) residuals of ``y`` (rows, q) on ``design`` (rows, p) and an intercept, each row
    predicted by the fit to the rows outside its block: ``_FOLDS`` contiguous blocks, training
    rows more than ``_GAP`` from the block, ridge ``_RIDGE`` times the training rows on
    standardized columns (the intercept not shrunk)."""
    rows = len(y)
    spread = design.std(axis=0)
    a = np.column_stack([np.ones(rows), (design - design.mean(axis=0)) / np.where(spread > 0, spread, 1.0)])
    penalty = np.eye(a.shape[1])
    penalty[0, 0] = 0.0
    out = np.empty_like(y, dtype=float)
    edges = np.linspace(0, rows, _FOLDS + 1).astype(int)
    for lo, hi in zip(edges[:-1], edges[1:]):
        train = np.r_[0:max(lo - _GAP, 0), min(hi + _GAP, rows):rows]
        at = a[train]
        coef = np.linalg.solve(at.T @ at + _RIDGE * len(train) * penalty, at.T @ y[train])
        out[lo:hi] = y[lo:hi] - a[lo:hi] @ coef
    return out


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
        statistics["instantaneous_share"] = dict(zip(data.variables, found.share.tolist()))
        statistics["instantaneous_z"] = dict(zip(data.variables, found.z.tolist()))
        statistics["instantaneous_p"] = dict(zip(data.variables, found.p_value.tolist()))
        top = int(np.argmin(found.p_value))
        name, p = data.variables[top], float(found.p_value[top])
        if p < _ROUTE_ALPHA:
            reason = (f"{closed}; the other variables' present improves the held-out forecast "
                      f"of {name} from every variable's past (removes {found.share[top]:.0%} of "
                      f"its error; Diebold-Mariano p = {p:.2g} after Bonferroni, < "
                      f"{_ROUTE_ALPHA:g}): dependence at the same sample")
            chosen = "consensus"
        else:
            reason = (f"{closed}; no variable's held-out forecast from every variable's past is "
                      f"improved by the others' present (smallest Diebold-Mariano p = {p:.2g} "
                      f"after Bonferroni, {name}): lagged dependence")
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
