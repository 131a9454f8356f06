"""Lagged transfer entropy with the KSG estimator and local-permutation significance.

For target ``i``, source ``j`` and lag ``k`` in ``1..max_lag``:
``TE_{j->i}(k) = I(x_i(t); x_j(t-k) | x_i(t-1), ..., x_i(t-h))`` with ``h = history``; with
``condition_on="all"`` the condition also holds every other variable's ``t-1..t-h`` past (the
source's own past is never conditioned on, so an autocorrelated source shows at neighbouring lags
too). The conditional mutual information is the Frenzel-Pompe kNN estimate (``knn.py``, nats);
its p-value comes from Runge's local permutation test, which shuffles the source only among
samples with similar conditions. p-values are adjusted over all ``d (d - 1) max_lag`` tests.

Result: one Edge per (source, target, lag) with ``strength`` the TE estimate (nats; the KSG bias
can make a null one slightly negative) and ``p_value`` the adjusted p-value; ``score_matrix`` is
``-log10`` of each pair's smallest adjusted p-value. ``extra``: ``correction``, ``n_rows``, ``dt``,
``k``, ``history``, ``condition_on``, ``n_permutations``, ``p_value_floor`` (``1 / (n + 1)``),
``lone_link_can_pass`` (whether that floor survives the correction for a single link), and
(d, d, max_lag) arrays ``[source][target][lag - 1]`` ``transfer_entropy``, ``p_value_raw`` and
``permutations_done``.
Trials are independent: no row reaches across a trial boundary.

Resolution. A permutation p-value is at least ``1 / (n_permutations + 1)``; after Bonferroni, or
BH with a single true link, the smallest adjusted value is ``m / (n_permutations + 1)`` for ``m``
tests, so with a fixed default of 100 a two-variable run at the default ``max_lag=5`` (m = 10)
could never reach ``alpha = 0.05``. The default is therefore sized per run: the smallest count at
which a lone link can pass the correction, ``ceil(m / alpha)`` (or ``1 / alpha`` with no
correction), and at least 99. That is the most a test runs (``montecarlo.py``): a test stops as
soon as ``stop_after`` null values reach the observed one (Besag-Clifford sequential p-values),
or once its decision under the correction is settled (Clopper-Pearson bounds, as in Gandy and
Hahn's MMCTest), so in a graph with many strong links each runs a few hundred permutations, and
only a lone or borderline link runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.common import (
    check_series,
    default_permutations,
    lone_link_can_pass,
    usable_rows,
)
from dynid.causal.fdr import adjust_pvalues
from dynid.causal.graph import CausalGraph, lagged_edges, pair_scores
from dynid.causal.knn import CMIEstimator, NullSampler
from dynid.causal.montecarlo import one_by_one, sequential_pvalues
from dynid.data.dataset import Dataset
from dynid.params import Hyperparameters, param
from dynid.runtime import Steps

# Fewest rows per joint-space neighbour for a usable kNN estimate (rows >= this * (k + 1)).
_ROWS_PER_NEIGHBOUR = 10


@dataclass(frozen=True)
class TEParams(Hyperparameters):
    k: int = param(5, "neighbours in the joint space of the KSG estimator")
    history: int = param(1, "target's own past samples conditioned on (embedding length)")
    condition_on: Literal["target", "all"] = param(
        "target", "condition on the target's past only, or on every other variable's too"
    )
    n_permutations: int | None = param(
        None, "null samples per test; none = enough for one link to pass the correction"
    )
    k_perm: int = param(5, "neighbours in condition space that a local permutation mixes")
    stop_after: int = param(
        10, "stop a test once this many null values reach the estimate; 0 = run them all"
    )

    def __post_init__(self) -> None:
        for name, low in (("k", 1), ("history", 1), ("k_perm", 1), ("stop_after", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")
        if self.n_permutations is not None and (
            isinstance(self.n_permutations, bool) or not isinstance(self.n_permutations, int)
            or self.n_permutations < 1
        ):
            raise ValueError(f"n_permutations must be >= 1 or none, got {self.n_permutations!r}")
        if self.condition_on not in ("target", "all"):
            raise ValueError(f"condition_on must be target or all, got {self.condition_on!r}")


class TransferEntropy(CausalMethod):
    """``--method te``: kNN transfer entropy per link and lag, local permutation tests."""

    name = "te"
    reports_progress = True
    use_when = (
        "nonlinear stochastic coupling with a few variables and enough samples; the slowest (kNN permutation tests per link and lag)"
    )
    summary = "transfer entropy (KSG kNN estimator) per link and lag, local permutation tests"
    Params = TEParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        params = self.params
        assert isinstance(params, TEParams)
        d, lags, h = data.n_variables, settings.max_lag, params.history
        start = max(lags, h)  # first usable sample of every trial: all lags exist from here
        rows = usable_rows(data, start)
        check_series(
            data, "transfer entropy",
            enough=rows >= _ROWS_PER_NEIGHBOUR * (params.k + 1),
            requirement=(
                f"{_ROWS_PER_NEIGHBOUR * (params.k + 1)} rows for k={params.k} (a trial of n "
                f"samples gives n - max(max_lag, history) = n - {start}), got {rows}; use longer "
                "or more trials, a smaller --max-lag or -p history, or a smaller -p k"
            ),
        )
        n_tests = d * (d - 1) * lags
        n_perm = params.n_permutations or default_permutations(
            n_tests, settings.alpha, settings.correction
        )
        past = lagged_rows(data, start, start)  # past[l] = x(t - l), (rows, d)
        rng = np.random.default_rng(settings.seed)

        te = np.full((d, d, lags), np.nan)
        links: list[tuple[int, int, int]] = []  # (source, target, lag)
        samplers: list[NullSampler] = []
        steps = Steps(settings.training.progress, 2)
        steps.start("te: estimates")
        for i in range(d):
            own = [past[lag][:, i] for lag in range(1, h + 1)]
            shared = CMIEstimator(past[0][:, i], np.column_stack(own), params.k)
            for j in range(d):
                if j == i:
                    continue
                estimator = shared
                if params.condition_on == "all":
                    others = [past[lag][:, m] for lag in range(1, h + 1) for m in range(d)
                              if m not in (i, j)]
                    estimator = CMIEstimator(past[0][:, i], np.column_stack(own + others),
                                             params.k)
                for lag in range(1, lags + 1):
                    sampler = estimator.null_sampler(past[lag][:, j], k_perm=params.k_perm, rng=rng)
                    te[j, i, lag - 1] = sampler.observed
                    links.append((j, i, lag - 1))
                    samplers.append(sampler)
        steps.finish("te: estimates")
        steps.start("te: permutation tests")
        p_tests, n_done = sequential_pvalues(
            one_by_one(lambda test, count, need: samplers[test].run(count, need)), len(samplers),
            n_perm,
            alpha=settings.alpha, correction=settings.correction,  # type: ignore[arg-type]
            stop_after=params.stop_after or None,
        )
        steps.finish("te: permutation tests")
        p_raw = np.full((d, d, lags), np.nan)
        permutations = np.zeros((d, d, lags), dtype=np.int64)
        source, target, slot = (np.array(index) for index in zip(*links))
        p_raw[source, target, slot], permutations[source, target, slot] = p_tests, n_done
        return lagged_graph(
            data, settings, method="te", strength=te, p_raw=p_raw,
            extra={
                "strength_kind": "transfer_entropy_nats",
                "n_rows": int(rows),
                "dt": data.dt,
                "k": params.k,
                "history": h,
                "condition_on": params.condition_on,
                "n_permutations": int(n_perm),
                "p_value_floor": 1.0 / (n_perm + 1),
                "lone_link_can_pass": lone_link_can_pass(n_perm, n_tests, settings.alpha,
                                                         settings.correction),
                "transfer_entropy": te,
                "p_value_raw": p_raw,
                "permutations_done": permutations,
            },
        )


def lagged_rows(data: Dataset, start: int, lags: int) -> list[np.ndarray]:
    """``out[l]`` = every trial's ``x(t - l)`` for ``t = start..n-1``, stacked: (rows, d) each.

    Rows never reach across a trial boundary; trials with ``n <= start`` contribute nothing.
    """
    return [
        np.concatenate([trial.x[start - lag: trial.n_samples - lag] for trial in data.trials
                        if trial.n_samples > start])
        for lag in range(lags + 1)
    ]


def lagged_graph(
    data: Dataset, settings: CausalSettings, *, method: str, strength: np.ndarray,
    p_raw: np.ndarray, extra: dict,
) -> CausalGraph:
    """The CausalGraph of per-(source, target, lag) tests.

    strength, p_raw: (d, d, max_lag) ``[source][target][lag - 1]``, diagonal unused. p-values are
    adjusted over all off-diagonal entries; ``score_matrix`` is ``-log10`` of each pair's smallest
    adjusted p-value.
    """
    d, lags = data.n_variables, settings.max_lag
    cross = ~np.eye(d, dtype=bool)
    p_adj = np.full_like(p_raw, np.nan)
    p_adj[cross] = adjust_pvalues(p_raw[cross], settings.correction)  # type: ignore[arg-type]
    significant = cross[:, :, None] & (np.nan_to_num(p_adj, nan=1.0) <= settings.alpha)
    names = data.variables
    edges = lagged_edges(names, strength, p_adj, significant, range(1, lags + 1))
    score = pair_scores(p_adj)
    return CausalGraph(
        variables=names, method=method, max_lag=lags, alpha=settings.alpha, edges=edges,
        score_matrix=score, adjacency=significant.any(axis=2),
        extra={"correction": settings.correction, **extra},
    )
