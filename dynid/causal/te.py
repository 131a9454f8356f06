"""Lagged transfer entropy with the KSG estimator and local-permutation significance.

For target ``i``, source ``j`` and lag ``k`` in ``1..max_lag``:
``TE_{j->i}(k) = I(x_i(t); x_j(t-k) | x_i(t-1), ..., x_i(t-h))`` with ``h = history``; with
``condition_on="all"`` the condition also holds every other variable's ``t-1..t-h`` past (the
source's own past is never conditioned on, so an autocorrelated source shows at neighbouring lags
too). The conditional mutual information is the Frenzel-Pompe kNN estimate (``knn.py``, nats);
its p-value comes from Runge's local permutation test, which shuffles the source only among
samples with similar conditions, or, where its null values look normal, from a normal null
fitted to them (below). p-values are adjusted over all ``d (d - 1) max_lag`` tests.

Result: one Edge per (source, target, lag) with ``strength`` the TE estimate (nats; the KSG bias
can make a null one slightly negative) and ``p_value`` the adjusted p-value; ``score_matrix`` is
``-log10`` of each pair's smallest adjusted p-value. ``extra``: ``correction``, ``n_rows``, ``dt``,
``k``, ``history``, ``condition_on``, ``n_permutations``, ``p_value_floor`` (``1 / (n + 1)``, of
the permutation p-values), ``lone_link_can_pass`` (whether that floor survives the correction
for a single link), ``workers`` (processes used), and (d, d, max_lag) arrays
``[source][target][lag - 1]`` ``transfer_entropy``, ``p_value_raw``, ``permutations_done`` and
``normal_null`` (whether the p-value is the fitted null's).
Trials are independent: no row reaches across a trial boundary.

Resolution. A permutation p-value is at least ``1 / (n_permutations + 1)``; after Bonferroni, or
BH with a single true link, the smallest adjusted value is ``m / (n_permutations + 1)`` for ``m``
tests, so with a fixed default of 100 a two-variable run at the default ``max_lag=5`` (m = 10)
could never reach ``alpha = 0.05``. The default is therefore sized per run: the smallest count at
which a lone link can pass the correction, ``ceil(m / alpha)`` (or ``1 / alpha`` with no
correction), and at least 99. That is the most a test runs (``montecarlo.py``): a test stops as
soon as ``stop_after`` null values reach the observed one (Besag-Clifford sequential p-values),
or once its decision under the correction is settled (as in Gandy and Hahn's MMCTest).

Fitted null (``fit_null``, default 39). Even so, each strong link of a rich graph needed ~400
permutations for its Clopper-Pearson bound to pass BH (Lorenz-96, 10 variables x 1,000 samples,
max_lag 5: 172k KSG estimates, ~500 CPU s). The KSG estimate is a mean over rows, and its local
permutation null is close to normal: on that data, 40 null values of each of the 450 tests,
standardised and pooled, have skewness 0.06 and excess kurtosis -0.09, and the fractions above
1.5, 2, 2.5, 3 and 3.5 sd are 0.068, 0.023, 0.0058, 0.0008 and 0.0002 (normal: 0.067, 0.023,
0.0062, 0.0013, 0.0002). So after the first ``fit_null`` permutations a test whose null values
pass Shapiro-Wilk takes the normal-theory p-value of its estimate against them, and is settled
once that p-value's interval clears the BH threshold (``montecarlo.normal_null_pvalues``); a
borderline test samples on in rounds (79, 159, ...), refitted each time, and a test whose null
values do not look normal keeps the permutation p-value and count. The answers do not depend
on how the tests are split over ``workers`` processes: each test draws from its own stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.common import (
    SelfPrediction,
    check_series,
    check_whole,
    default_permutations,
    lone_link_can_pass,
    not_separable,
    report_self_predicted,
    self_predicted_columns,
    usable_rows,
)
from dynid.causal.fdr import adjust_pvalues
from dynid.causal.graph import CausalGraph, lagged_edges, pair_scores
from dynid.causal.knn import CMIEstimator, NullSampler
from dynid.causal.montecarlo import (
    FEWEST_TO_FIT,
    FIRST_ROUND,
    normal_null_pvalues,
    sequential_pvalues,
)
from dynid.causal.pool import Mapper, default_workers, worker_pool
from dynid.data.dataset import Dataset
from dynid.params import Hyperparameters, param
from dynid.runtime import Steps

# Fewest rows per joint-space neighbour for a usable kNN estimate (rows >= this * (k + 1)).
_ROWS_PER_NEIGHBOUR = 10
# Tests x rows from which the tests run in worker processes by default: starting a worker
# (interpreter, numpy, scipy, numba's cached kernels) takes ~2-3 s, about what the first round
# of 100,000 test-rows costs on one core (~40 estimates of ~1.7 us per row each).
_POOL_WORK = 100_000


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
    fit_null: int = param(
        39, "permutations to which a normal null is fitted (used where Shapiro-Wilk accepts "
        "it); 0 = permutation p-values only"
    )
    workers: int = param(0, "processes for the tests; 0 = one per core when the tests are many")

    def __post_init__(self) -> None:
        for name, low in (("k", 1), ("history", 1), ("k_perm", 1), ("stop_after", 0),
                          ("workers", 0)):
            check_whole(name, getattr(self, name), low)
        if self.n_permutations is not None and (
            isinstance(self.n_permutations, bool) or not isinstance(self.n_permutations, int)
            or self.n_permutations < 1
        ):
            raise ValueError(f"n_permutations must be >= 1 or none, got {self.n_permutations!r}")
        if isinstance(self.fit_null, bool) or not isinstance(self.fit_null, int) or not (
                self.fit_null == 0 or self.fit_null >= FEWEST_TO_FIT):
            raise ValueError(f"fit_null must be 0 or a whole number >= {FEWEST_TO_FIT}, got "
                             f"{self.fit_null!r}")
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
        self_predicted = self_predicted_columns(data, lags)
        untestable = not_separable(self_predicted, d, lags)
        # (source, target, lag - 1) of every test
        links = [(j, i, lag - 1) for i in range(d) for j in range(d) if j != i
                 for lag in range(1, lags + 1) if not untestable[j, i, lag]]
        n_tests = len(links)
        n_perm = params.n_permutations or default_permutations(
            n_tests, settings.alpha, settings.correction
        )
        problem = _Problem(lagged_rows(data, start, start), params,
                           int(np.random.SeedSequence(settings.seed).entropy))
        workers = params.workers or (
            min(default_workers(), d) if n_tests * rows >= _POOL_WORK else 1)
        steps = Steps(settings.training.progress, 2)
        with worker_pool(workers, _Targets, problem) as pool:
            steps.start("te: estimates")
            te = np.stack(pool.map(_observe, range(d)), axis=1)  # (d, d, lags) [source][target]
            steps.finish("te: estimates")
            steps.start("te: permutation tests")
            draws = _NullDraws(pool, links, te)
            p_tests, n_done, fitted = sequential_pvalues(
                draws, len(links), n_perm,
                alpha=settings.alpha, correction=settings.correction,  # type: ignore[arg-type]
                stop_after=params.stop_after or None,
                fit=draws.normal_fit if params.fit_null else None,
                first_round=params.fit_null or FIRST_ROUND,
            )
            steps.finish("te: permutation tests")
        p_raw = np.full((d, d, lags), np.nan)
        permutations = np.zeros((d, d, lags), dtype=np.int64)
        normal_null = np.zeros((d, d, lags), dtype=bool)
        source, target, slot = (np.array(index) for index in zip(*links))
        p_raw[source, target, slot], permutations[source, target, slot] = p_tests, n_done
        normal_null[source, target, slot] = fitted
        return lagged_graph(
            data, settings, method="te", strength=te, p_raw=p_raw, self_predicted=self_predicted,
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
                "normal_null": normal_null,
                "workers": int(workers),
            },
        )


@dataclass(frozen=True)
class _Problem:
    """What every worker needs: ``past[l]`` = x(t - l) (rows, d) for ``l = 0..max(lags,
    history)``, the options, and the seed's entropy (each test's null values draw from their own
    stream, so the answers do not depend on the number of workers)."""

    past: list[np.ndarray]
    params: TEParams
    entropy: int


class _Targets:
    """A worker's state: each test's null sampler, built on first use (estimators shared by the
    tests of one target, and with ``condition_on="all"`` of one source)."""

    def __init__(self, problem: _Problem) -> None:
        self.problem = problem
        self._estimators: dict[tuple[int, int], CMIEstimator] = {}
        self._samplers: dict[tuple[int, int, int], NullSampler] = {}

    def sampler(self, source: int, target: int, lag: int) -> NullSampler:
        """The null sampler of ``TE_{source -> target}(lag)``."""
        key = (source, target, lag)
        if key not in self._samplers:
            past, params = self.problem.past, self.problem.params
            h, d = params.history, past[0].shape[1]
            condition_key = (target, source if params.condition_on == "all" else -1)
            if condition_key not in self._estimators:
                # the target's own past, and with condition_on="all" every other variable's
                own = [past[lag_][:, target] for lag_ in range(1, h + 1)]
                others = [past[lag_][:, m] for lag_ in range(1, h + 1) for m in range(d)
                          if m not in (target, source)] if params.condition_on == "all" else []
                conditions = np.column_stack(own + others)
                self._estimators[condition_key] = CMIEstimator(past[0][:, target], conditions,
                                                               params.k)
            self._samplers[key] = self._estimators[condition_key].null_sampler(
                past[lag][:, source], k_perm=params.k_perm, rng=0)
        return self._samplers[key]


def _observe(state: _Targets, target: int) -> np.ndarray:
    """(d, lags) the TE of every source at every lag into ``target``, NaN for itself."""
    past = state.problem.past
    d, lags = past[0].shape[1], len(past) - 1
    out = np.full((d, lags), np.nan)
    for source in range(d):
        if source != target:
            out[source] = [state.sampler(source, target, lag).observed
                           for lag in range(1, lags + 1)]
    return out


# A request: (test, source, target, lag - 1, count, need, samples done before) per test.
_Request = list[tuple[int, int, int, int, int, int, int]]
# A test to draw for, sorted by target: (target, test, source, lag - 1, need).
_Item = tuple[int, int, int, int, int]


def _chunks(items: list[_Item], count: int) -> list[list[_Item]]:
    """``items`` in at most ``count`` consecutive chunks of nearly equal size, none empty."""
    count = max(1, min(count, len(items)))
    bounds = np.linspace(0, len(items), count + 1).round().astype(int)
    return [items[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _null_values(state: _Targets, request: _Request) -> list[np.ndarray]:
    """The null values of each test of ``request`` (one target's): ``count`` more, or fewer
    once ``need`` reached the estimate; each from the stream of (seed, test, samples done)."""
    entropy = state.problem.entropy
    return [
        state.sampler(source, target, slot + 1).values(
            count, need, np.random.default_rng([entropy, test, before]))
        for test, source, target, slot, count, need, before in request
    ]


class _NullDraws:
    """``montecarlo.Draw`` over the worker pool, the tests in chunks ordered by target; keeps
    each test's null values for ``normal_fit``. links: (source, target, lag - 1) per test; te:
    (d, d, lags)."""

    def __init__(self, pool: Mapper[_Targets], links: list[tuple[int, int, int]],
                 te: np.ndarray) -> None:
        self.pool, self.links = pool, links
        self.observed = np.array([te[link] for link in links])
        self.null: list[np.ndarray] = [np.empty(0) for _ in links]

    def __call__(self, tests: np.ndarray, count: int,
                 need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        items = sorted(
            (self.links[test][1], test, self.links[test][0], self.links[test][2], int(n))
            for test, n in zip(tests.tolist(), need.tolist())
        )  # by target: a task's tests share estimators
        # About four tasks per worker, so that one slow task leaves no worker idle for long.
        requests: list[_Request] = [
            [(test, source, target, slot, count, n, self.null[test].size)
             for target, test, source, slot, n in chunk]
            for chunk in _chunks(items, 4 * self.pool.workers)
        ]
        exceed = np.zeros(tests.size, dtype=np.int64)
        done = np.zeros(tests.size, dtype=np.int64)
        position = {test: k for k, test in enumerate(tests.tolist())}
        for request, values in zip(requests, self.pool.map(_null_values, requests)):
            for (test, *_), new in zip(request, values):
                self.null[test] = np.concatenate([self.null[test], new])
                exceed[position[test]] = np.sum(new >= self.observed[test])
                done[position[test]] = new.size
        return exceed, done

    def normal_fit(self, tests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``montecarlo.Fit``: normal-theory p-values of the estimates against their nulls."""
        return normal_null_pvalues(self.observed[tests], [self.null[t] for t in tests])


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
    p_raw: np.ndarray, self_predicted: list[SelfPrediction], extra: dict,
) -> CausalGraph:
    """The CausalGraph of per-(source, target, lag) tests.

    strength (d, d, L >= max_lag; lags past max_lag are not edges), p_raw (d, d, max_lag):
    ``[source][target][lag - 1]``, diagonal unused. p-values are
    adjusted over all off-diagonal entries but the links that ``self_predicted`` columns leave
    untestable (``common.not_separable``): those get p-value 1 (raw and adjusted) and strength
    0 (set in ``strength`` and ``p_raw`` in place, so the same arrays in ``extra`` agree), with
    one warning per column (``extra["warnings"]``, ``extra["self_predicted"]``).
    ``score_matrix`` is ``-log10`` of each pair's smallest adjusted p-value.
    """
    d, lags = data.n_variables, settings.max_lag
    untestable = not_separable(self_predicted, d, lags)[:, :, 1:]
    # strength may hold more lags (up to the history), which are not edges.
    strength[:, :, :lags][untestable], p_raw[untestable] = 0.0, 1.0
    tested = ~np.eye(d, dtype=bool)[:, :, None] & ~untestable
    p_adj = np.where(untestable, 1.0, np.nan)
    p_adj[tested] = adjust_pvalues(p_raw[tested], settings.correction)  # type: ignore[arg-type]
    significant = tested & (np.nan_to_num(p_adj, nan=1.0) <= settings.alpha)
    names = data.variables
    edges = lagged_edges(names, strength, p_adj, significant, range(1, lags + 1))
    score = pair_scores(p_adj)
    return CausalGraph(
        variables=names, method=method, max_lag=lags, alpha=settings.alpha, edges=edges,
        score_matrix=score, adjacency=significant.any(axis=2),
        extra={
            "correction": settings.correction,
            **extra,
            **report_self_predicted(data, self_predicted),
        },
    )
