"""PCMCI (Runge et al., Science Advances 2019): PC1 condition selection, then MCI tests.

Nodes are variables at lags: ``(i, lag)`` is ``x_i(t - lag)``, and the candidate parents of every
target ``x_j(t)`` are all ``(i, lag)`` with ``tau_min <= lag <= max_lag`` (self-lags included).

1. PC1 (per target, all targets in one batch per round): start from every candidate; in round
   ``k = 0, 1, ...`` test each remaining candidate ``c`` against the target given the first
   ``max_combinations`` size-``k`` subsets (in lexicographic order) of the other remaining
   candidates, which are kept sorted strongest first, so with the default of one subset the
   condition is "the k strongest other candidates". A candidate with ``p > pc_alpha`` for any
   tested subset is dropped after the round; survivors are re-sorted by their smallest absolute
   statistic so far (ties in candidate order). A target is done when fewer than ``k + 1``
   candidates remain or ``k`` passes ``max_conds_dim``.
2. MCI: every candidate link ``(i, lag) -> (j, 0)`` is tested given the PC1 parents of ``j``
   (without the tested node) and the PC1 parents of ``i`` shifted back by ``lag``. Conditions
   reach back ``2 * max_lag``.

This is tigramite 5.2's ``PCMCI.run_pcmci`` step for step (same candidate order, tie-breaking,
subsets and sample alignment), so with ParCorr the p-values agree with tigramite's to rounding.
Contemporaneous (lag-0) links, i.e. PCMCI+, are not tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, islice
from typing import Any, Literal

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.common import check_columns_after_lags, check_values, usable_rows
from dynid.causal.citests import CITest, CMIKnn, ParCorr
from dynid.causal.fdr import adjust_pvalues
from dynid.causal.graph import CausalGraph, lagged_edges, pair_scores
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.params import Hyperparameters, param
from dynid.runtime import Steps

CI_TESTS = ("parcorr", "cmiknn")


@dataclass(frozen=True)
class PCMCIParams(Hyperparameters):
    """PCMCI's options (``-p key=value``); lags are in samples."""

    ci_test: Literal["parcorr", "cmiknn"] = param(
        "parcorr",
        "conditional-independence test: parcorr (linear partial correlation, t-test) or "
        "cmiknn (kNN conditional mutual information, permutation test; nonlinear, slow)",
    )
    pc_alpha: float = param(
        0.2,
        "PC1 keeps a candidate parent while its p-value is <= pc_alpha (tigramite's default "
        "when not optimised); loose on purpose: PC1 only picks conditions for the MCI tests",
    )
    max_conds_dim: int | None = param(
        None, "largest PC1 conditioning set (none: up to every candidate)"
    )
    max_combinations: int = param(
        1, "PC1 condition subsets tried per size (1: only the strongest others, as tigramite)"
    )
    tau_min: int = param(1, "smallest lag tested, in samples (>= 1; at most --max-lag)")
    knn: int = param(5, "cmiknn: nearest neighbours of the CMI estimator")
    n_permutations: int = param(200, "cmiknn: permutations per test (p-value resolution)")

    def __post_init__(self) -> None:
        if self.ci_test not in CI_TESTS:
            raise ValueError(f"ci_test must be one of {', '.join(CI_TESTS)}, got {self.ci_test!r}")
        if isinstance(self.pc_alpha, bool) or not 0.0 < self.pc_alpha <= 1.0:
            raise ValueError(f"pc_alpha must lie in (0, 1], got {self.pc_alpha!r}")
        if self.max_conds_dim is not None:
            _check_whole("max_conds_dim", self.max_conds_dim, 0)
        _check_whole("max_combinations", self.max_combinations, 1)
        _check_whole("tau_min", self.tau_min, 1)
        _check_whole("knn", self.knn, 1)
        _check_whole("n_permutations", self.n_permutations, 1)


def _check_whole(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")


class PCMCI(CausalMethod):
    """``--method pcmci``: PC1 condition selection then MCI tests, ParCorr or CMIknn."""

    name = "pcmci"
    reports_progress = True
    summary = "PCMCI: PC1 condition selection, then momentary conditional independence tests"
    Params = PCMCIParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        assert isinstance(self.params, PCMCIParams)
        return pcmci(data, self.params, settings)


def pcmci(data: Dataset, params: PCMCIParams, settings: CausalSettings) -> CausalGraph:
    """PCMCI over ``data``'s variables, lags ``params.tau_min .. settings.max_lag``.

    Samples: each trial of n samples gives rows ``t = 2 * max_lag .. n - 1`` (tigramite's
    ``cut_off='2xtau_max'``: every test, whatever its conditions, uses the same rows), and the
    trials' rows are pooled; no lag reaches across a trial boundary.

    Result: one ``Edge`` per (source, target, lag), ``source != target``, lag in
    ``tau_min..max_lag``. ``p_value`` is the MCI p-value adjusted by ``settings.correction`` over
    those ``d * (d - 1) * n_lags`` cross-links. tigramite's ``fdr_method='fdr_bh'`` adjusts over
    the ``d * n_lags`` self-links too; autodependence usually makes those highly significant,
    which lifts the cross-links' BH ranks, so its q-values tend to be smaller and it can report a
    few more cross-links. The raw p-values are the same. ``strength``: the MCI partial correlation in [-1, 1] (parcorr) or the MCI
    conditional mutual information in nats (cmiknn; unsigned, near 0 or slightly below for
    independent nodes). ``score_matrix[s, t]`` is
    ``-log10`` of the smallest adjusted p-value over lags, capped at 300, diagonal 0.
    ``extra``: ``ci_test``, ``pc_alpha``, ``tau_min``, ``correction``, ``strength_kind``,
    ``n_rows``, ``n_tests`` (distinct CI tests run), ``dt``, ``parents`` (per target, the PC1
    parents strongest first, as ``{"source", "lag"}``), and ``val_matrix`` / ``p_matrix``
    (d, d, max_lag + 1), ``[source][target][lag]``, the MCI statistics and raw p-values of every
    tested link, self-links (the diagonal) included; untested lags (< tau_min) are NaN.

    Raises UsageError if ``tau_min > max_lag``, DataError for data that cannot be tested (missing
    values, constant columns, too few samples, irregular sampling).
    """
    max_lag, d = settings.max_lag, data.n_variables
    if params.tau_min > max_lag:
        raise UsageError(f"-p tau_min={params.tau_min} exceeds --max-lag {max_lag}")
    lags = range(params.tau_min, max_lag + 1)
    _check_data(data, max_lag, len(lags))
    columns = node_matrix([trial.x for trial in data.trials], 2 * max_lag)
    check_columns_after_lags(data, columns, 2 * max_lag)
    test = _make_test(columns, params, settings)

    candidates = [lag * d + i for i in range(d) for lag in lags]  # tigramite's order
    max_conds = d * len(lags) if params.max_conds_dim is None else params.max_conds_dim
    steps = Steps(settings.training.progress, 2)
    steps.start("pcmci: PC1 condition selection")
    parents = pc1(test, d, candidates, params.pc_alpha, max_conds, params.max_combinations)
    steps.finish("pcmci: PC1 condition selection")
    steps.start("pcmci: MCI tests")
    val, p_raw = mci(test, d, candidates, parents, max_lag)
    steps.finish("pcmci: MCI tests")

    off_diagonal = ~np.eye(d, dtype=bool)
    cross = off_diagonal[:, :, None] & (np.arange(max_lag + 1) >= params.tau_min)
    p_adj = np.full_like(p_raw, np.nan)
    p_adj[cross] = adjust_pvalues(p_raw[cross], settings.correction)  # type: ignore[arg-type]
    significant = cross & (np.nan_to_num(p_adj, nan=1.0) <= settings.alpha)

    names = data.variables
    edges = lagged_edges(names, val[:, :, lags], p_adj[:, :, lags], significant[:, :, lags], lags)
    score = pair_scores(p_adj[:, :, lags])
    return CausalGraph(
        variables=names,
        method="pcmci",
        max_lag=max_lag,
        alpha=float(settings.alpha),
        edges=edges,
        score_matrix=score,
        adjacency=significant.any(axis=2).astype(np.int8),
        extra={
            "ci_test": params.ci_test,
            "pc_alpha": float(params.pc_alpha),
            "tau_min": int(params.tau_min),
            "correction": settings.correction,
            "strength_kind": "partial_correlation" if test.signed else "cmi_nats",
            "n_rows": int(columns.shape[0]),
            "n_tests": int(test.n_computed),
            "dt": data.dt,
            "parents": {
                names[j]: [{"source": names[q % d], "lag": int(q // d)} for q in parents[j]]
                for j in range(d)
            },
            "val_matrix": val,
            "p_matrix": p_raw,
        },
    )


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


def pc1(
    test: CITest,
    d: int,
    candidates: list[int],
    pc_alpha: float,
    max_conds_dim: int,
    max_combinations: int,
) -> list[list[int]]:
    """PC1 parents (node indices, strongest first) of each target node ``j = 0..d-1``.

    Each round tests every active target's candidates in one ``test.run`` call.
    """
    position = {node: k for k, node in enumerate(candidates)}
    parents = [list(candidates) for _ in range(d)]
    val_min: list[dict[int, float]] = [{} for _ in range(d)]
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
        for (j, node), value, pvalue in zip(owners, np.abs(values).tolist(), pvalues.tolist()):
            if node in dropped[j]:
                continue  # the first non-significant subset ends a candidate's round
            val_min[j][node] = min(value, val_min[j].get(node, np.inf))
            if not pvalue <= pc_alpha:
                dropped[j].add(node)
        for j in active:
            kept = [node for node in parents[j] if node not in dropped[j]]
            parents[j] = sorted(kept, key=lambda node: (-val_min[j][node], position[node]))
    return parents


def mci(
    test: CITest, d: int, candidates: list[int], parents: list[list[int]], max_lag: int
) -> tuple[np.ndarray, np.ndarray]:
    """MCI statistics and p-values (d, d, max_lag + 1) ``[source][target][lag]``, NaN untested."""
    batch, links = [], []
    for j in range(d):
        for node in candidates:
            i, lag = node % d, node // d
            conditions = [q for q in parents[j] if q != node]
            seen = set(conditions)
            # The source's parents, shifted back by the link's lag (node + lag * d is lag more).
            conditions += [q + lag * d for q in parents[i] if q + lag * d not in seen]
            batch.append((node, j, tuple(conditions)))
            links.append((i, j, lag))
    values, pvalues = test.run(batch)
    val = np.full((d, d, max_lag + 1), np.nan)
    p = np.full((d, d, max_lag + 1), np.nan)
    i, j, lag = (np.array(index) for index in zip(*links))
    val[i, j, lag], p[i, j, lag] = values, pvalues
    return val, p


def _make_test(columns: np.ndarray, params: PCMCIParams, settings: CausalSettings) -> CITest:
    if params.ci_test == "parcorr":
        return ParCorr(columns)
    return CMIKnn(
        columns,
        knn=params.knn,
        n_permutations=params.n_permutations,
        rng=np.random.default_rng(settings.seed),
    )


def _check_data(data: Dataset, max_lag: int, n_lags: int) -> None:
    check_values(data, "PCMCI")
    d, depth = data.n_variables, 2 * max_lag
    n_rows = usable_rows(data, depth)
    # The largest MCI conditioning set has 2 * d * n_lags - 1 nodes; its t-test needs dof >= 1.
    needed = 2 * d * n_lags + 2
    if n_rows < needed:
        raise DataError(
            f"{data.source}: PCMCI with max_lag={max_lag} and {d} variables needs at least "
            f"{needed} rows (a trial of n samples gives n - {depth}, as conditions reach back "
            f"2 * max_lag), got {n_rows}; use a smaller --max-lag or more samples"
        )
