"""Orienting the contemporaneous links of a PCMCI+ skeleton (Runge, UAI 2020, steps 3 and 4).

A graph is an array ``graph[i, j, lag]`` (d, d, max_lag + 1) of link marks, as tigramite writes
them: ``"-->"`` ``x_i(t - lag) -> x_j(t)``, ``"<--"`` its mirror at lag 0, ``"o-o"`` a lag-0
adjacency of unknown direction, ``"x-x"`` a lag-0 adjacency whose orientation rules conflict,
``""`` no link. Lagged links are always ``"-->"``; lag-0 marks come in mirrored pairs.

1. Colliders: every unshielded triple ``i(t - lag) *-o k(t) o-o j(t)`` (``i`` not adjacent to
   ``j``) is a collider when, among the subsets S of ``j``'s (and, at lag 0, ``i``'s) lag-0
   neighbours that make ``i`` and ``j`` independent given S and their lagged parents, fewer than
   half (``majority``) or none (``conservative``) hold ``k``; exactly half, or no separating
   subset at all, makes the triple ambiguous. ``none``: collider iff ``k`` is not in the
   skeleton's separating set (PC's original, order-dependent rule).
2. Orientation rules R1-R3 (Meek 1995) on the triples that are not ambiguous, repeated until
   none applies. With ``conflict_resolution`` a link that two rules (or two colliders) orient
   both ways becomes ``"x-x"``.

This is tigramite 5.2's ``_pcalg_colliders`` and ``_pcalg_rules_timeseries`` step for step (the
same triple order), so the graph matches ``run_pcmciplus`` given the same skeleton and tests.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np

Node = tuple[int, int]  # (variable, lag), lag >= 0
Triple = tuple[Node, int, int]  # ((i, lag), k, j): i(t - lag) *-* k(t) *-* j(t)
# Runs one CI test of x_i(t - lag) against x_j(t) given the lag-0 nodes S: True if dependent.
Dependent = Callable[[list[tuple[int, int, int, tuple[Node, ...]]]], list[bool]]

COLLIDER_RULES = ("majority", "conservative", "none")


def adjacencies(graph: np.ndarray, *, conflicts: bool = True, lag0: bool = False) -> list[list[Node]]:
    """Per target ``j`` its neighbours ``(i, lag)``, ordered by variable then lag; ``conflicts``:
    include ``"x-x"`` links; ``lag0``: only lag-0 neighbours."""
    d = graph.shape[0]
    out = []
    for j in range(d):
        marks = graph[:, j, :1] if lag0 else graph[:, j, :]
        present = marks != ""
        if not conflicts:
            present &= marks != "x-x"
        out.append([(int(i), int(lag)) for i, lag in zip(*np.nonzero(present))])
    return out


def unshielded_triples(graph: np.ndarray) -> list[Triple]:
    """``i(t - lag) o-o/--> k(t) o-o j(t)`` with ``i(t - lag)`` not adjacent to ``j(t)``."""
    adj = adjacencies(graph, conflicts=False)
    triples = []
    for j, neighbours in enumerate(adj):
        for k, lag_k in neighbours:
            if lag_k != 0 or graph[k, j, 0] != "o-o":
                continue
            for i, lag in adj[k]:
                if (i, lag) != (j, 0) and graph[i, j, lag] == "" and graph[i, k, lag] in ("o-o", "-->"):
                    triples.append(((i, lag), k, j))
    return triples


def _subsets(nodes: list[Node]) -> list[tuple[Node, ...]]:
    """Every subset of ``nodes``, the empty one included; none for an empty list (tigramite's)."""
    if not nodes:
        return []
    return [s for size in range(len(nodes) + 1) for s in combinations(nodes, size)]


def orient_colliders(
    graph: np.ndarray,
    sepsets: dict[tuple[Node, int], list[Node]],
    dependent: Dependent,
    rule: str,
    conflict_resolution: bool,
) -> list[Triple]:
    """Step 1 in place on ``graph``; returns the ambiguous triples.

    ``sepsets[((i, lag), j)]``: the skeleton's separating set of a removed link (lag-0 nodes);
    ``dependent``: runs a batch of tests ``(i, lag, j, S)`` (all triples' in one call).
    """
    triples = unshielded_triples(graph)
    adj0 = adjacencies(graph, lag0=True)
    v_structures: list[Triple] = []
    ambiguous: list[Triple] = []
    if rule == "none":
        v_structures = [t for t in triples if (t[1], 0) not in sepsets.get((t[0], t[2]), [])]
    else:
        subsets_of: list[list[tuple[Node, ...]]] = []
        batch = []
        for (i, lag), _, j in triples:
            found = _subsets([n for n in adj0[j] if not (lag == 0 and n == (i, 0))])
            if lag == 0:
                found += _subsets([n for n in adj0[i] if n != (j, 0)])
            unique = list(dict.fromkeys(tuple(sorted(s)) for s in found))
            subsets_of.append(unique)
            batch += [(i, lag, j, s) for s in unique]
        answers = iter(dependent(batch))
        for triple, subsets in zip(triples, subsets_of):
            separating = [s for s in subsets if not next(answers)]
            if not separating:
                ambiguous.append(triple)
                continue
            fraction = sum((triple[1], 0) in s for s in separating) / len(separating)
            collider = fraction == 0 if rule == "conservative" else fraction < 0.5
            undecided = (0 < fraction < 1) if rule == "conservative" else fraction == 0.5
            if undecided:
                ambiguous.append(triple)
            elif collider:
                v_structures.append(triple)
    oriented: list[tuple[int, int]] = []
    for (i, lag), k, j in v_structures:
        ends = [j, i] if lag == 0 else [j]
        for end in ends:  # end o-o k becomes end --> k
            _orient(graph, end, k, oriented, conflict_resolution)
    return ambiguous


def _orient(
    graph: np.ndarray, a: int, b: int, oriented: list[tuple[int, int]], conflict_resolution: bool
) -> None:
    """Orient ``a --> b`` at lag 0 unless the pair was oriented before; mark a conflict
    ``x-x`` when it was oriented ``b --> a``."""
    if (a, b) not in oriented and (b, a) not in oriented:
        graph[a, b, 0], graph[b, a, 0] = "-->", "<--"
        oriented.append((a, b))
    if conflict_resolution and (b, a) in oriented:
        graph[a, b, 0] = graph[b, a, 0] = "x-x"


def apply_rules(graph: np.ndarray, ambiguous: list[Triple], conflict_resolution: bool) -> np.ndarray:
    """Step 2: R1, R2, R3 in turn until none finds an unambiguous triple; a new graph."""
    graph = graph.copy()
    oriented: list[tuple[int, int]] = []
    skip = set(ambiguous)
    found = True
    while found:
        found = False
        # R1: i(t - lag) --> k o-o j, i(t - lag) not adjacent to j: k --> j.
        for (i, lag), k, j in _rule1_triples(graph):
            if ((i, lag), k, j) not in skip:
                found = True
                _orient(graph, k, j, oriented, conflict_resolution)
        # R2: i --> k --> j with i o-o j: i --> j.
        for (i, _), k, j in _rule2_triples(graph):
            if ((i, 0), k, j) not in skip:
                found = True
                _orient(graph, i, j, oriented, conflict_resolution)
        # R3: i o-o k --> j and i o-o l --> j, i o-o j, k and l not adjacent: i --> j.
        for i, k, l, j in _rule3_chains(graph):
            if ((i, 0), k, j) not in skip and ((i, 0), l, j) not in skip:
                found = True
                _orient(graph, i, j, oriented, conflict_resolution)
    return graph


def _rule1_triples(graph: np.ndarray) -> list[Triple]:
    adj = adjacencies(graph, conflicts=False)
    triples = []
    for j, neighbours in enumerate(adj):
        for k, lag_k in neighbours:
            if lag_k != 0 or graph[j, k, 0] != "o-o":
                continue
            for i, lag in adj[k]:
                if (i, lag) != (j, 0) and graph[i, j, lag] == "" and graph[i, k, lag] == "-->":
                    triples.append(((i, lag), k, j))
    return triples


def _rule2_triples(graph: np.ndarray) -> list[Triple]:
    adj = adjacencies(graph, conflicts=False, lag0=True)
    triples = []
    for j, neighbours in enumerate(adj):
        for k, _ in neighbours:
            if graph[k, j, 0] != "-->":
                continue
            for i, _ in adj[k]:
                if (graph[i, k, 0] == "-->" and i != j and graph[i, j, 0] == "o-o"
                        and graph[j, i, 0] == "o-o"):
                    triples.append(((i, 0), k, j))
    return triples


def _rule3_chains(graph: np.ndarray) -> list[tuple[int, int, int, int]]:
    adj = adjacencies(graph, conflicts=False, lag0=True)
    chains = []
    for j, neighbours in enumerate(adj):
        others = [n for n, _ in neighbours]
        for i in others:
            if graph[j, i, 0] != "o-o":
                continue
            for k in others:
                for l in others:
                    if (k != l and k != i and l != i and graph[k, j, 0] == "-->"
                            and graph[l, j, 0] == "-->" and graph[k, i, 0] == "o-o"
                            and graph[l, i, 0] == "o-o" and graph[k, l, 0] == ""):
                        chains.append((i, k, l, j))
    return chains
