"""Lag-0 links between nodes that are, at the same sample, functions of their parents' hidden
states: out-of-sample cross-prediction from delay vectors, oriented by own-past predictability.

The data it is built for (the "coupled" graphs of CausalDynamics, Herdeanu et al., NeurIPS 2025
datasets track): each child is, at the same time step, a linear map of its parents' full
(multi-dimensional) states, and only one coordinate of each node is observed. Lagged tests find
little there: the coupling adds nothing to a smooth signal's own past. Two questions instead:

1. Are ``x_i`` and ``x_j`` dependent? By Takens' theorem the delay vector
   ``v_i(t) = (x_i(t), x_i(t - tau_i), .., x_i(t - (dim - 1) tau_i))`` stands in for node i's
   hidden state, so a child's value at t is (nearly) a function of its parents' delay vectors at
   t: the idea of cross mapping (Sugihara et al., Science 338:496, 2012), here as a regression.
   ``cross_r2[i, j]`` is the out-of-sample R^2 of ``x_j(t)`` on ``v_i(t)`` (least squares with
   a small ridge, blocked ``folds``-fold cross-validation with a gap of ``blocked_cv.GAP`` rows between
   training and test blocks, so that signals which fit each other only by chance in-sample fail
   out of sample). ``tau_i`` is a quarter of the column's e-folding time (its autocorrelation's
   first drop below 1/e), 1 to ``_MAX_DELAY`` samples. The pair's dependence is the mean of the
   two directions, each floored at -1 (a prediction worse than the mean carries no more
   information however bad it is). Two unrelated drivers with a few, close periods per record
   still predict each other out of sample: in so short a record their delay vectors span the
   same local sinusoids, and nothing observational separates them.
   A parent's share of a child that mixes several parents can be too small for its R^2 alone
   to show (a hub that sums five to seven parents, one of them dominant). So, when
   ``conditional`` is on, each direction is also tested given the target's strongest *other*
   upstream candidate k (the most dependent node more predictable than the target, question 2:
   a likely parent, not a descendant, whose delay vector would hold the target's own signal):
   ``partial_r2[i, j] = (R^2(x_j | v_i, v_k) - R^2(x_j | v_k)) / (1 - R^2(x_j | v_k))``, the
   out-of-sample partial R^2 (the share of what k leaves unexplained that v_i explains; the
   order-one conditional test of the PC algorithm, Spirtes, Glymour and Scheines 2000, with
   cross-prediction as the test), ``cross_r2`` where j has no such candidate. Conditioning on
   the dominant source explains it away and shows the small ones. The pair's dependence is the
   larger of the marginal one and the same mean of the two (floored) partial directions. The
   test removes little: a child's value holds its parents' hidden coordinates, which a
   parent's one observed coordinate does not give, so a grandparent still adds to the parent
   (benchmarks/README.md, round 9).
2. Which way? Each column's own predictability ``own_r2[j]``: the out-of-sample R^2 of
   ``x_j(t)`` on its own delay vector ``horizon`` samples earlier. A mixture of independent
   sources is less predictable than its sources (Stone, "Blind source separation using temporal
   predictability", Neural Computation 13:1559, 2001), and forecast skill falls with the
   dimension of the dynamics (Sugihara and May, Nature 344:734, 1990): a child that sums its
   parents' states has more of both, so the link points ``i -> j`` when ``own_r2[i] >
   own_r2[j] + _TIE`` (no direction for a tie, e.g. two sinusoids, both predicted exactly).

``score_matrix[i, j] = (dependence[i, j] + 1) * (0.5 + [i -> j])``: the dependence, three times
larger in the direction predictability gives, so every pair is ranked. Like every
observational method it cannot order a child that copies a single parent (the two are then two
views of one system), and it cannot tell a parent from a more distant ancestor of the same kind.
On the CausalDynamics coupled graphs see benchmarks/README.md, "CausalDynamics graphs".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.blocked_cv import (
    FOLDS, RIDGE, blocked_folds, ridge_design, ridge_gram, standardized_trials)
from dynid.causal.common import check_values, check_whole
from dynid.causal.graph import CausalGraph, Edge
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.params import Hyperparameters, param

# Longest delay between the taps of a delay vector, samples (slow drivers would otherwise take
# windows longer than a cross-validation block).
_MAX_DELAY = 25
# Fewest training rows per coefficient.
_ROWS_PER_COEFFICIENT = 5
# The floor of each direction's out-of-sample R^2 in the dependence.
_R2_FLOOR = -1.0
# Own predictabilities closer than this are equal (rounding of R^2 near 1 decides nothing).
_TIE = 1e-6


@dataclass(frozen=True)
class CrossPredictionParams(Hyperparameters):
    """``-p`` options of ``--method crosspred``."""

    dim: int = param(4, "taps of each delay vector (embedding dimension)")
    horizon: int = param(20, "samples ahead that a column's own predictability is measured")
    folds: int = param(FOLDS, "blocks of the cross-validation")
    min_r2: float = param(
        0.1, "dependence (mean out-of-sample R^2 of the two directions, marginal or partial) "
        "a significant link needs"
    )
    conditional: bool = param(
        True, "also test each pair given the target's strongest other upstream candidate "
        "(partial R^2) and keep the larger dependence"
    )

    def __post_init__(self) -> None:
        for name, least in (("dim", 1), ("horizon", 1), ("folds", 2)):
            check_whole(name, getattr(self, name), least)
        if not -1.0 < self.min_r2 < 1.0:
            raise ValueError(f"min_r2 must lie strictly between -1 and 1, got {self.min_r2!r}")


class CrossPrediction(CausalMethod):
    """``--method crosspred``: lag-0 links from cross-prediction on delay vectors, oriented by
    own-past predictability (module docstring).

    Edges: lag 0 only, one per ordered pair: ``strength`` = ``cross_r2[source, target]``,
    ``p_value`` NaN (no test: significance is ``dependence > min_r2``), ``link`` ``-->`` or
    ``<--`` the direction from predictability (``o-o`` on a tie), ``significant`` when the pair
    is dependent and the edge points that way. ``extra``: ``cross_r2`` and ``dependence`` (d, d)
    ``[source][target]``, ``own_r2`` and ``delays`` (d,); with ``conditional``, ``partial_r2``,
    ``conditioned_on`` (the node each entry is conditioned on, -1 for none) and
    ``marginal_dependence`` (d, d). ``--max-lag`` is not used.
    """

    name = "crosspred"
    contemporaneous = True
    use_when = (
        "nodes that are, at the same sample, functions of their parents' hidden states "
        "(partially observed chaotic or periodic systems with instantaneous coupling, e.g. "
        "CausalDynamics' coupled graphs), where lagged tests find little; lag-0 links only, "
        "ranked (no p-values)"
    )
    summary = (
        "lag-0 links: cross-prediction from delay vectors, also given the target's strongest "
        "upstream candidate; direction by predictability"
    )
    Params = CrossPredictionParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        params = self.params
        assert isinstance(params, CrossPredictionParams)
        check_values(data, "crosspred")
        trials = standardized_trials([trial.x for trial in data.trials])
        delays = delay_taps(trials)
        start = first_row(delays, params)
        rows = sum(max(len(x) - start, 0) for x in trials)
        needed = params.folds * _ROWS_PER_COEFFICIENT * (params.dim + 1)
        if rows < needed:
            raise DataError(
                f"{data.source}: crosspred needs at least {needed} samples beyond the first "
                f"{start} of each trial (delay vectors of {params.dim} taps up to "
                f"{int(delays.max())} samples apart, horizon {params.horizon}), got {rows}; use "
                "longer trials or smaller -p dim / horizon"
            )
        return cross_prediction(data, trials, delays, start, params, settings)


def cross_prediction(data: Dataset, trials: list[np.ndarray], delays: np.ndarray, start: int,
                     params: CrossPredictionParams, settings: CausalSettings) -> CausalGraph:
    """The graph of the module docstring; ``trials`` standardized (n_k, d), ``delays`` (d,),
    rows from ``start`` = ``first_row(delays, params)`` of each trial."""
    d = data.n_variables
    now = delay_vectors(trials, delays, params.dim, start, shift=0)  # (rows, d, dim)
    earlier = delay_vectors(trials, delays, params.dim, start, shift=params.horizon)
    y = np.concatenate([x[start:] for x in trials if len(x) > start])  # (rows, d)
    cross = np.array([blocked_cv_r2(now[:, i, :], y, params.folds) for i in range(d)])
    np.fill_diagonal(cross, 0.0)
    own = np.array([blocked_cv_r2(earlier[:, j, :], y[:, [j]], params.folds)[0]
                    for j in range(d)])
    floored = np.maximum(cross, _R2_FLOOR)
    dependence = (floored + floored.T) / 2.0
    forward = own[:, None] > own[None, :] + _TIE  # [i, j]: the source is the more predictable
    extra: dict = {}
    if params.conditional:
        partial, given = partial_r2(now, y, cross, dependence, forward, params.folds)
        floored = np.maximum(partial, _R2_FLOOR)
        marginal, dependence = dependence, np.maximum(dependence, (floored + floored.T) / 2.0)
        extra = {"partial_r2": partial, "conditioned_on": given, "marginal_dependence": marginal}
    off = ~np.eye(d, dtype=bool)
    adjacency = (dependence > params.min_r2) & forward & off
    score = (dependence + 1.0) * (0.5 + forward)
    np.fill_diagonal(score, 0.0)
    names = data.variables
    edges = [Edge(names[i], names[j], 0, float(cross[i, j]), float("nan"),
                  bool(adjacency[i, j]), link=_link(own[i], own[j]))
             for i in range(d) for j in range(d) if i != j]
    return CausalGraph(
        variables=names, method=CrossPrediction.name, max_lag=settings.max_lag,
        alpha=settings.alpha, edges=edges, score_matrix=score, adjacency=adjacency,
        extra={"cross_r2": cross, "dependence": dependence, "own_r2": own, "delays": delays,
               **extra, "hyperparameters": params.to_dict(), "dt": data.dt},
    )


def partial_r2(now: np.ndarray, y: np.ndarray, cross: np.ndarray, dependence: np.ndarray,
               forward: np.ndarray, folds: int) -> tuple[np.ndarray, np.ndarray]:
    """``(partial, given)``: ``partial[i, j]`` (d, d) the out-of-sample partial R^2 of ``x_j``
    on ``v_i`` given ``v_k``, k = ``given[i, j]`` (d, d) int, the node other than i and j most
    ``dependence``-t on j among those ``forward`` of it (more predictable), -1 where there is
    none (then ``partial[i, j] = cross[i, j]``); 0 on the diagonal. ``now`` (rows, d, dim) the
    delay vectors, ``y`` (rows, d) the standardized values, ``cross`` (d, d) the marginal
    out-of-sample R^2 of the same folds (``cross[k, j]`` is the base fit)."""
    d = y.shape[1]
    partial = cross.copy()
    given = np.full((d, d), -1)
    for j in range(d):
        upstream = [k for k in np.argsort(-dependence[:, j], kind="stable")
                    if k != j and forward[k, j]]
        for i in range(d):
            k = next((k for k in upstream if k != i), None)
            if i == j or k is None:
                continue
            design = np.concatenate([now[:, i, :], now[:, k, :]], axis=1)
            joint = blocked_cv_r2(design, y[:, [j]], folds)[0]
            # The base fit can leave (almost) nothing: its unexplained share bounds the ratio.
            partial[i, j] = (joint - cross[k, j]) / max(1.0 - cross[k, j], _TIE)
            given[i, j] = k
    np.fill_diagonal(partial, 0.0)
    return partial, given


def first_row(delays: np.ndarray, params: CrossPredictionParams) -> int:
    """The first sample of a trial with both delay vectors whole: the current one and the one
    ``horizon`` samples earlier."""
    return (params.dim - 1) * int(delays.max()) + params.horizon


def _link(own_source: float, own_target: float) -> str:
    if abs(own_source - own_target) <= _TIE:
        return "o-o"
    return "-->" if own_source > own_target else "<--"


def delay_taps(trials: list[np.ndarray]) -> np.ndarray:
    """(d,) int: each column's delay between taps, a quarter of its e-folding time (the first
    lag at which its autocorrelation, pooled over standardized ``trials``, drops below 1/e;
    searched to a fifth of the longest trial), clipped to 1.._MAX_DELAY samples."""
    d = trials[0].shape[1]
    longest = max(len(x) for x in trials)
    efold = np.full(d, float(longest // 5))
    pending = np.ones(d, dtype=bool)
    for lag in range(1, max(longest // 5, 1) + 1):
        pairs = [x[lag:] * x[:-lag] for x in trials if len(x) > lag]
        rho = np.sum([p.sum(axis=0) for p in pairs], axis=0) / sum(len(p) for p in pairs)
        dropped = pending & (rho < 1.0 / np.e)
        efold[dropped] = lag
        pending &= ~dropped
        if not pending.any():
            break
    return np.clip(np.round(efold / 4.0), 1, _MAX_DELAY).astype(int)


def delay_vectors(trials: list[np.ndarray], delays: np.ndarray, dim: int, start: int,
                  shift: int) -> np.ndarray:
    """(rows, d, dim): ``x_i(t - shift - k delays[i])`` for k = 0..dim-1, at every sample t >=
    ``start`` of every trial (rows concatenated in order); ``start >= shift + (dim - 1) *
    max(delays)``."""
    parts = []
    for x in trials:
        n = len(x)
        if n <= start:
            continue
        taps = [np.column_stack([x[start - shift - k * delays[i]: n - shift - k * delays[i], i]
                                 for k in range(dim)]) for i in range(x.shape[1])]
        parts.append(np.stack(taps, axis=1))
    return np.concatenate(parts)


def blocked_cv_r2(design: np.ndarray, y: np.ndarray, folds: int,
                  ridge: float = RIDGE) -> np.ndarray:
    """(q,) out-of-sample R^2 of each column of ``y`` (rows, q) on ``design`` (rows, p) and an
    intercept: ``folds`` contiguous test blocks, each predicted by a ridge fit (``ridge`` times
    the training rows, on standardized columns) to the rows more than ``blocked_cv.GAP`` away
    from it (``blocked_cv.blocked_folds``); 1 - (sum of squared test errors) / (sum of squares
    about the mean)."""
    a = ridge_design(design)
    press = np.zeros(y.shape[1])
    for test, train in blocked_folds(len(y), folds):
        at = a[train]
        coef = np.linalg.solve(ridge_gram(at, ridge), at.T @ y[train])
        press += np.sum((y[test] - a[test] @ coef) ** 2, axis=0)
    total = np.sum((y - y.mean(axis=0)) ** 2, axis=0)
    return 1.0 - press / np.where(total > 0, total, 1.0)
