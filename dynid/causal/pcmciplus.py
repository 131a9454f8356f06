"""PCMCI+ (Runge, "Discovering contemporaneous and lagged causal relations in autocorrelated
nonlinear time series datasets", UAI 2020): lagged and contemporaneous (lag-0) links.

Nodes are variables at lags, ``(i, lag)`` = ``x_i(t - lag)``, ``lag = 0..max_lag``.

1. PC1 (``pc.pc1``, as in PCMCI): a superset ``B(j)`` of each variable's lagged parents, lags
   ``1..max_lag``, tests at ``alpha``.
2. Skeleton (PC with momentary conditions): start from the links ``B(j) -> j`` and every lag-0
   pair; in round ``p = 0, 1, ...`` test each remaining link ``(i, lag) - j`` given every size-p
   subset S of ``j``'s lag-0 neighbours (other than ``i``), always also conditioning on ``B(j)``
   and on ``B(i)`` shifted back by ``lag``; the first S with ``p > alpha`` removes the link
   (and S is its separating set). After each round the lag-0 neighbours are re-sorted by their
   smallest absolute statistic. A link's p-value is its largest over the tests run; lagged links
   PC1 already removed keep PC1's.
3. Colliders and 4. rules R1-R3: ``orientation.py`` (majority collider rule and conflict
   marking by default, which make the result independent of the variables' order).

This is tigramite 5.2's ``PCMCI.run_pcmciplus`` step for step (same test order, conditions,
sorting and tie-breaking), so with ParCorr the graph and p-values agree with tigramite's given
``pc_alpha = alpha``. Tests are batched: each round of PC1, each wave of the skeleton (the next
condition subset of every link still open) and the whole collider phase is one ``test.run`` call.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.citests import CITest
from dynid.causal.common import (
    check_columns_after_lags,
    not_separable,
    report_self_predicted,
    self_predicted_columns,
)
from dynid.causal.graph import CausalGraph, Edge, P_FLOOR
from dynid.causal.orientation import (
    COLLIDER_RULES,
    Node,
    adjacencies,
    apply_rules,
    orient_colliders,
)
from dynid.causal.pc import (
    PC1Result,
    CITestParams,
    check_data,
    lagged_candidates,
    make_test,
    node_matrix,
    pc1,
)
from dynid.data.dataset import Dataset
from dynid.params import param
from dynid.runtime import Steps

# Marks of a link present in the final graph, as the JSON's ``link`` says them.
_PRESENT = ("-->", "o-o", "x-x")


@dataclass(frozen=True)
class PCMCIPlusParams(CITestParams):
    """PCMCI+'s options (``-p key=value``); its significance level is ``--alpha``."""

    contemp_collider_rule: Literal["majority", "conservative", "none"] = param(
        "majority",
        "lag-0 colliders: majority or conservative vote over separating sets (order-independent), "
        "or none (PC's original rule)",
    )
    conflict_resolution: bool = param(
        True, "mark lag-0 links that orientation rules orient both ways as conflicting (x-x)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.contemp_collider_rule not in COLLIDER_RULES:
            raise ValueError(
                f"contemp_collider_rule must be one of {', '.join(COLLIDER_RULES)}, "
                f"got {self.contemp_collider_rule!r}"
            )


class PCMCIPlus(CausalMethod):
    """``--method pcmciplus``: PCMCI+ with ParCorr or CMIknn."""

    name = "pcmciplus"
    reports_progress = True
    contemporaneous = True
    use_when = (
        "links that act within one sample (coarse sampling, instantaneous mixing) as well as lagged ones; lag-0 directions only where the data identify them"
    )
    summary = (
        "PCMCI+: lagged and contemporaneous (lag-0) links, lag-0 directions where the data "
        "allow; links decided by tests at --alpha (no --correction)"
    )
    Params = PCMCIPlusParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        assert isinstance(self.params, PCMCIPlusParams)
        return pcmciplus(data, self.params, settings)


@dataclass
class _Skeleton:
    """Step 2's result: ``graph`` marks (d, d, L + 1), ``p``/``value`` (d, d, L + 1) the largest
    p-value of each link and its statistic, ``sepsets`` the separating sets of removed links."""

    graph: np.ndarray
    p: np.ndarray
    value: np.ndarray
    sepsets: dict[tuple[Node, int], list[Node]]


class _Tests:
    """The momentary CI tests of PCMCI+: ``x_i(t - lag)`` against ``x_j(t)`` given lag-0 nodes
    S, ``B(j)`` without the tested node, and ``B(i)`` shifted back by ``lag``."""

    def __init__(self, test: CITest, d: int, parents: list[list[Node]]) -> None:
        self.test, self.d, self.parents = test, d, parents

    def run(self, batch: list[tuple[int, int, int, tuple[Node, ...]]]) -> tuple[np.ndarray, np.ndarray]:
        """Statistics and p-values (m,) of tests ``(i, lag, j, S)``."""
        return self.test.run([self._triple(*item) for item in batch])

    def _triple(self, i: int, lag: int, j: int, s: tuple[Node, ...]) -> tuple[int, int, tuple[int, ...]]:
        z: list[Node] = list(s)
        z += [n for n in self.parents[j] if n != (i, lag) and n not in z]
        z += [n for n in ((k, lag + tk) for k, tk in self.parents[i]) if n not in z]
        return lag * self.d + i, j, tuple(tk * self.d + k for k, tk in z)


def pcmciplus(data: Dataset, params: PCMCIPlusParams, settings: CausalSettings) -> CausalGraph:
    """PCMCI+ over ``data``'s variables, lags ``0..settings.max_lag``, tests at ``settings.alpha``.

    Rows as PCMCI's: each trial gives ``t = 2 * max_lag .. n - 1``, trials pooled.

    Result: one ``Edge`` per (source, target, lag) with ``source != target``, lags
    ``0..max_lag``. Lagged edges are significant when the link is in the final graph; lag-0
    edges come in pairs (s, t) and (t, s) carrying the same adjacency p-value and statistic,
    and ``link`` says the lag-0 mark seen from the source: ``-->`` (s causes t), ``<--`` (t
    causes s; this edge is not significant), ``o-o`` (adjacent, direction not identifiable:
    both edges significant), ``x-x`` (adjacent, orientation rules conflict: both significant),
    or none (not adjacent). ``p_value``: the largest p-value over the tests that decided the
    link (so significant iff ``p_value <= alpha`` for lagged links). PCMCI+ decides each link by
    tests at ``alpha`` as the PC algorithm does, so ``--correction`` is not applied
    (``extra["correction"]`` is "none"). ``strength``: partial correlation (parcorr) or CMI in
    nats (cmiknn). ``score_matrix[s, t]``: ``-log10`` of the smallest p-value over the lags of
    the links s -> t (a lag-0 link oriented t -> s does not count). ``adjacency``: 1 where a
    significant edge s -> t exists.

    ``extra``: ``ci_test``, ``correction``, ``contemp_collider_rule``, ``conflict_resolution``,
    ``strength_kind``, ``n_rows``, ``n_tests``, ``dt``, ``parents`` (PC1's, per target),
    ``graph`` (d, d, max_lag + 1) of marks (tigramite's ``graph``), ``val_matrix`` and
    ``p_matrix`` (tigramite's), ``ambiguous_triples`` (``{"source", "lag", "middle",
    "target"}``).

    Self-predicted columns (``common.self_predicted_columns``, e.g. a clean sinusoid) are handled
    as in ``pcmci``: not candidates at lags beyond their order, no parents; the links that cannot
    be tested (every link into one, every link from one at lag 0, where its value is a
    combination of its lags 1..order, or beyond its order) are absent with ``p_value`` 1,
    ``strength`` 0; one warning each (``extra["warnings"]``, ``extra["self_predicted"]``).

    Raises DataError for data that cannot be tested.
    """
    max_lag, d = settings.max_lag, data.n_variables
    # Largest condition: d - 1 lag-0 neighbours and both variables' lagged candidates.
    check_data(data, "PCMCI+", max_lag, d - 1 + 2 * d * max_lag)
    columns = node_matrix([trial.x for trial in data.trials], 2 * max_lag)
    check_columns_after_lags(data, columns, 2 * max_lag)
    test = make_test(columns, params, settings)
    alpha = float(settings.alpha)
    self_predicted = self_predicted_columns(data, max_lag, test.exact_fit)
    untestable = not_separable(self_predicted, d, max_lag)

    steps = Steps(settings.training.progress, 3)
    steps.start("pcmciplus: PC1 condition selection")
    candidates = lagged_candidates(d, range(1, max_lag + 1), self_predicted)
    max_conds = d * max_lag if params.max_conds_dim is None else params.max_conds_dim
    selected = pc1(test, d, candidates, alpha, max_conds, params.max_combinations,
                   frozenset(item.column for item in self_predicted))
    parents = [[(q % d, q // d) for q in selected.parents[j]] for j in range(d)]
    steps.finish("pcmciplus: PC1 condition selection")

    steps.start("pcmciplus: skeleton")
    tests = _Tests(test, d, parents)
    max_conds_skeleton = d if params.max_conds_dim is None else params.max_conds_dim
    skeleton = _skeleton(tests, d, max_lag, parents, alpha, max_conds_skeleton)
    steps.finish("pcmciplus: skeleton")

    steps.start("pcmciplus: orientation")

    def dependent(batch: list[tuple[int, int, int, tuple[Node, ...]]]) -> list[bool]:
        return (tests.run(batch)[1] <= alpha).tolist() if batch else []

    graph = skeleton.graph.copy()
    graph[graph == "o?o"] = "o-o"
    graph[graph == "-?>"] = "-->"
    ambiguous = orient_colliders(
        graph, skeleton.sepsets, dependent, params.contemp_collider_rule,
        params.conflict_resolution,
    )
    graph = apply_rules(graph, ambiguous, params.conflict_resolution)
    steps.finish("pcmciplus: orientation")

    p, value = _final_matrices(skeleton, selected, d, max_lag)
    graph[untestable], p[untestable], value[untestable] = "", 1.0, 0.0
    names = data.variables
    edges = _edges(names, graph, p, value, alpha)
    evidence = np.where(graph == "<--", 1.0, p)  # a lag-0 link oriented t -> s is no evidence of s -> t
    off_diagonal = ~np.eye(d, dtype=bool)
    smallest = np.min(np.where(off_diagonal[:, :, None], evidence, 1.0), axis=2)
    score = np.where(off_diagonal, -np.log10(np.maximum(smallest, P_FLOOR)), 0.0)
    adjacency = np.zeros((d, d), dtype=np.int8)
    for e in edges:
        if e.significant:
            adjacency[names.index(e.source), names.index(e.target)] = 1
    return CausalGraph(
        variables=names,
        method="pcmciplus",
        max_lag=max_lag,
        alpha=alpha,
        edges=edges,
        score_matrix=score,
        adjacency=adjacency,
        extra={
            "ci_test": params.ci_test,
            "correction": "none",
            "contemp_collider_rule": params.contemp_collider_rule,
            "conflict_resolution": bool(params.conflict_resolution),
            "strength_kind": "partial_correlation" if test.signed else "cmi_nats",
            "n_rows": int(columns.shape[0]),
            "n_tests": int(test.n_computed),
            "dt": data.dt,
            "parents": {
                names[j]: [{"source": names[i], "lag": int(lag)} for i, lag in parents[j]]
                for j in range(d)
            },
            "graph": graph.tolist(),
            "val_matrix": value,
            "p_matrix": p,
            "ambiguous_triples": [
                {"source": names[i], "lag": int(lag), "middle": names[k], "target": names[j]}
                for (i, lag), k, j in ambiguous
            ],
            **report_self_predicted(data, self_predicted),
        },
    )


def _skeleton(
    tests: _Tests, d: int, max_lag: int, parents: list[list[Node]], alpha: float,
    max_conds_dim: int,
) -> _Skeleton:
    """Step 2 (tigramite's ``_pcalg_skeleton`` with ``mode='contemp_conds'``)."""
    graph = np.full((d, d, max_lag + 1), "", dtype="<U3")
    for j in range(d):
        for i, lag in parents[j]:
            graph[i, j, lag] = "-?>"
    graph[:, :, 0] = "o?o"
    graph[range(d), range(d), 0] = ""
    # Smallest |statistic| per link so far; its key order (variable, then lag) breaks ties.
    val_min = [{(int(i), int(lag)): np.inf for i, lag in zip(*np.nonzero(graph[:, j, :] != ""))}
               for j in range(d)]
    p = np.where(graph == "", 1.0, 0.0)
    value = np.zeros((d, d, max_lag + 1))
    sepsets: dict[tuple[Node, int], list[Node]] = {}
    neighbours = adjacencies(graph, lag0=True)
    size = 0
    while size <= max_conds_dim:
        links = [(i, j, lag) for i in range(d) for j in range(d) for lag in range(max_lag + 1)
                 if graph[i, j, lag] != ""
                 and sum(n != (i, lag) for n in neighbours[j]) >= size]
        if not links:
            break
        subsets = {
            (i, j, lag): list(combinations([n for n in neighbours[j] if n != (i, lag)], size))
            for i, j, lag in links
        }
        position = {link: k for k, link in enumerate(links)}
        next_subset = dict.fromkeys(links, 0)
        done: set[tuple[int, int, int]] = set()
        while True:
            wave = []
            for link in links:
                i, j, lag = link
                if link in done:
                    continue
                if graph[i, j, lag] == "":  # removed as the mirror of an earlier lag-0 link
                    done.add(link)
                    continue
                mirror = (j, i, 0)
                if lag == 0 and position.get(mirror, len(links)) < position[link] and mirror not in done:
                    continue  # tigramite tests the mirror first; it may remove this link
                wave.append(link)
            if not wave:
                break
            values, pvalues = tests.run(
                [(i, lag, j, subsets[(i, j, lag)][next_subset[(i, j, lag)]]) for i, j, lag in wave]
            )
            for link, v, pv in zip(wave, values.tolist(), pvalues.tolist()):
                i, j, lag = link
                s = subsets[link][next_subset[link]]
                val_min[j][(i, lag)] = min(abs(v), val_min[j][(i, lag)])
                if pv >= p[i, j, lag]:
                    p[i, j, lag], value[i, j, lag] = pv, v
                if not pv <= alpha:
                    graph[i, j, lag] = ""
                    sepsets[((i, lag), j)] = list(s)
                    if lag == 0:
                        graph[j, i, 0] = ""
                        sepsets[((j, 0), i)] = list(s)
                        p[j, i, 0] = p[i, j, 0]
                    done.add(link)
                    continue
                next_subset[link] += 1
                if next_subset[link] == len(subsets[link]):
                    done.add(link)
        size += 1
        neighbours = _sorted_neighbours(graph, val_min)
    return _Skeleton(graph, p, value, sepsets)


def _sorted_neighbours(graph: np.ndarray, val_min: list[dict[Node, float]]) -> list[list[Node]]:
    """Lag-0 neighbours of each variable, largest smallest-|statistic| first (stable)."""
    present = adjacencies(graph, lag0=True)
    out = []
    for j, nodes in enumerate(present):
        keep = set(nodes)
        ordered = [n for n in val_min[j] if n in keep]
        out.append(sorted(ordered, key=lambda n: -abs(val_min[j][n])))
    return out


def _final_matrices(
    skeleton: _Skeleton, selected: PC1Result, d: int, max_lag: int
) -> tuple[np.ndarray, np.ndarray]:
    """tigramite's final ``p_matrix`` and ``val_matrix``: PC1's values for the lagged links PC1
    removed, the skeleton's for the rest; lag-0 entries symmetrised to the larger p-value."""
    p = np.ones((d, d, max_lag + 1))
    value = np.zeros((d, d, max_lag + 1))
    for j in range(d):
        for node, pv in selected.p_max[j].items():
            p[node % d, j, node // d] = pv
            value[node % d, j, node // d] = selected.value_at_p_max[j][node]
        for node in selected.parents[j]:
            p[node % d, j, node // d] = skeleton.p[node % d, j, node // d]
            value[node % d, j, node // d] = skeleton.value[node % d, j, node // d]
    lag0_p, lag0_value = skeleton.p[:, :, 0].copy(), skeleton.value[:, :, 0].copy()
    for i in range(d):  # in place and in this order, as tigramite's symmetrize_p_and_val_matrix
        for j in range(d):
            if i != j and lag0_p[i, j] >= lag0_p[j, i]:
                lag0_p[j, i], lag0_value[j, i] = lag0_p[i, j], lag0_value[i, j]
    p[:, :, 0], value[:, :, 0] = lag0_p, lag0_value
    return p, value


def _edges(
    names: tuple[str, ...], graph: np.ndarray, p: np.ndarray, value: np.ndarray, alpha: float
) -> list[Edge]:
    """Every (source, target, lag) with source != target, lags 0..max_lag (see ``pcmciplus``)."""
    d, lags = graph.shape[0], graph.shape[2]
    edges = []
    for s in range(d):
        for t in range(d):
            if s == t:
                continue
            for lag in range(lags):
                mark = str(graph[s, t, lag])
                edges.append(Edge(
                    names[s], names[t], lag, float(value[s, t, lag]), float(p[s, t, lag]),
                    mark in _PRESENT, link=(mark or None) if lag == 0 else None,
                ))
    return edges
