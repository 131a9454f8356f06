"""What PCMCI and PCMCI+ share (Runge et al. 2019; Runge, UAI 2020), in one place.

- ``CITestParams``: the options of the conditional-independence test and of PC1 that both
  methods take (``-p key=value``).
- ``node_matrix``: every variable at lags ``0..depth`` as columns, trials' rows pooled.
- ``lagged_candidates``: the lagged nodes PC1 starts from.
- ``pc1``: the PC1 condition selection (tigramite's ``run_pc_stable``), all targets in one batch
  of CI tests per round.
- ``make_test``, ``check_data``: the CI test asked for, and the data checks.

Nodes are columns of the node matrix: ``lag * d + i`` is ``x_i(t - lag)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, islice
from typing import Any, Literal

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dynid.causal.base import CausalSettings
from dynid.causal.citests import CITest, CMIKnn, ParCorr
from dynid.causal.common import SelfPrediction, check_values, check_whole, usable_rows
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.params import Hyperparameters, param

CI_TESTS = ("parcorr", "cmiknn")


@dataclass(frozen=True)
class CITestParams(Hyperparameters):
    """The CI test and PC1 options of PCMCI and PCMCI+ (``-p key=value``)."""

    ci_test: Literal["parcorr", "cmiknn"] = param(
        "parcorr",
        "conditional-independence test: parcorr (linear partial correlation, t-test) or "
        "cmiknn (kNN conditional mutual information, permutation test; nonlinear, slow)",
    )
    max_conds_dim: int | None = param(
        None, "largest PC1 conditioning set (none: up to every candidate)"
    )
    max_combinations: int = param(
        1, "PC1 condition subsets tried per size (1: only the strongest others, as tigramite)"
    )
    knn: int = param(5, "cmiknn: nearest neighbours of the CMI estimator")
    n_permutations: int = param(200, "cmiknn: permutations per test (p-value resolution)")

    def __post_init__(self) -> None:
        if self.ci_test not in CI_TESTS:
            raise ValueError(f"ci_test must be one of {', '.join(CI_TESTS)}, got {self.ci_test!r}")
        if self.max_conds_dim is not None:
            check_whole("max_conds_dim", self.max_conds_dim, 0)
        check_whole("max_combinations", self.max_combinations, 1)
        check_whole("knn", self.knn, 1)
        check_whole("n_permutations", self.n_permutations, 1)


def check_pc_alpha(value: Any) -> None:
    if isinstance(value, bool) or not 0.0 < value <= 1.0:
        raise ValueError(f"pc_alpha must lie in (0, 1], got {value!r}")


def node_matrix(trials_x: list[np.ndarray], depth: int) -> np.ndarray:
    """Every variable at lags 0..depth, trials' rows pooled: (n_rows, (depth + 1) * d).

    Column ``lag * d + i`` holds ``x_i(t - lag)``; a trial of n samples gives rows
    ``t = depth .. n - 1`` (none if n <= depth).
    """
    d = trials_x[0].shape[1]
    blocks = [
        # windows[w, i, s] = x[w + s, i] for the row t = w + depth, so lag = depth - s.
        sliding_window_view(x, depth + 1, axis=0)[:, :, ::-1].transpose(0, 2, 1).reshape(
            -1, (depth + 1) * d
        )
        for x in trials_x
        if x.shape[0] > depth
    ]
    return np.concatenate(blocks) if blocks else np.empty((0, (depth + 1) * d))


@dataclass(frozen=True)
class PC1Result:
    """PC1's answer per target ``j``: ``parents[j]`` (nodes, strongest first); for every candidate
    tested, ``p_max[j][node]`` its largest p-value over the tests run and ``value_at_p_max[j][node]``
    the statistic of that test (the first one reaching the maximum), as tigramite's
    ``pval_max`` and ``val_dict``."""

    parents: list[list[int]]
    p_max: list[dict[int, float]]
    value_at_p_max: list[dict[int, float]]


def lagged_candidates(
    d: int, lags: range, self_predicted: list[SelfPrediction]
) -> list[int]:
    """The nodes ``lag * d + i`` of every variable at ``lags``, in tigramite's order (variable,
    then lag), but for self-predicted columns' lags beyond their order: those are combinations of
    its first lags, so as candidates they would let PC1 drop each of its lags given the others,
    one after another, until none is left."""
    beyond = {lag * d + item.column
              for item in self_predicted for lag in lags if lag > item.order}
    return [lag * d + i for i in range(d) for lag in lags if lag * d + i not in beyond]


def pc1(
    test: CITest,
    d: int,
    candidates: list[int],
    pc_alpha: float,
    max_conds_dim: int,
    max_combinations: int,
    exogenous: frozenset[int] = frozenset(),
) -> PC1Result:
    """PC1 parents of each target node ``j = 0..d-1`` among ``candidates`` (lagged nodes).

    Targets in ``exogenous`` (self-predicted columns: their past determines them, so as a
    source's conditions in MCI it would leave nothing to test) get no parents and no tests.

    In round ``k = 0, 1, ...`` each remaining candidate is tested against the target given the
    first ``max_combinations`` size-``k`` subsets (lexicographic) of the other remaining
    candidates, kept sorted strongest first; a candidate with ``p > pc_alpha`` for any tested
    subset is dropped after the round; survivors are re-sorted by their smallest absolute
    statistic so far (ties in candidate order). A target is done when fewer than ``k + 1``
    candidates remain or ``k`` passes ``max_conds_dim``. Each round tests every active target's
    candidates in one ``test.run`` call.
    """
    position = {node: k for k, node in enumerate(candidates)}
    parents = [[] if j in exogenous else list(candidates) for j in range(d)]
    val_min: list[dict[int, float]] = [{} for _ in range(d)]
    p_max: list[dict[int, float]] = [{} for _ in range(d)]
    value_at_p_max: list[dict[int, float]] = [{} for _ in range(d)]
    for size in range(max_conds_dim + 1):
        active = [j for j in range(d) if len(parents[j]) > size]
        if not active:
            break
        batch, owners = [], []
        for j in active:
            for node in parents[j]:
                others = [q for q in parents[j] if q != node]
                for conditions in islice(combinations(others, size), max_combinations):
                    batch.append((node, j, conditions))
                    owners.append((j, node))
        values, pvalues = test.run(batch)
        dropped: list[set[int]] = [set() for _ in range(d)]
        for (j, node), value, pvalue in zip(owners, values.tolist(), pvalues.tolist()):
            if node in dropped[j]:
                continue  # the first non-significant subset ends a candidate's round
            val_min[j][node] = min(abs(value), val_min[j].get(node, np.inf))
            if node not in p_max[j] or pvalue > p_max[j][node]:
                p_max[j][node], value_at_p_max[j][node] = pvalue, value
            if not pvalue <= pc_alpha:
                dropped[j].add(node)
        for j in active:
            kept = [node for node in parents[j] if node not in dropped[j]]
            parents[j] = sorted(kept, key=lambda node: (-val_min[j][node], position[node]))
    return PC1Result(parents, p_max, value_at_p_max)


def make_test(columns: np.ndarray, params: CITestParams, settings: CausalSettings) -> CITest:
    """The CI test ``params.ci_test`` over the node matrix ``columns``."""
    if params.ci_test == "parcorr":
        return ParCorr(columns)
    return CMIKnn(
        columns,
        knn=params.knn,
        n_permutations=params.n_permutations,
        rng=np.random.default_rng(settings.seed),
    )


def check_data(data: Dataset, method: str, max_lag: int, largest_condition: int) -> None:
    """DataError for data ``method`` cannot test: ``check_values``, then too few rows for a
    t-test given ``largest_condition`` conditions (rows start at ``2 * max_lag``)."""
    check_values(data, method)
    d, depth = data.n_variables, 2 * max_lag
    n_rows = usable_rows(data, depth)
    # The t-test of a partial correlation given |Z| conditions needs dof = rows - 2 - |Z| >= 1.
    needed = largest_condition + 3
    if n_rows < needed:
        raise DataError(
            f"{data.source}: {method} with max_lag={max_lag} and {d} variables needs at least "
            f"{needed} rows (a trial of n samples gives n - {depth}, as conditions reach back "
            f"2 * max_lag), got {n_rows}; use a smaller --max-lag or more samples"
        )
