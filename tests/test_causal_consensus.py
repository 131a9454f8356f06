"""``--method consensus``: the parents of a node that mixes its parents' hidden states and the
links of a VAR found on known graphs, the combination's order against hand-computed ranks (the
members' own when they agree), the majority rule, and the options' checks."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.causal import CausalSettings, discover
from dynid.causal.consensus import ConsensusParams, combine, consensus_graph, member_ranks
from dynid.causal.graph import CausalGraph, Edge
from dynid.data.dataset import Dataset
from dynid.errors import UsageError
from dynid.metrics.causal import auroc

from conftest import var_process
from test_causal_crosspred import mixed_graph


def test_finds_the_parents_of_a_mixing_node():
    # C mixes the 3-D states of A (Lorenz) and B (Rossler) at each sample; D (Chen) is unrelated.
    # pcmci alone ranks these at 0.85 (lagged tests see little of a same-sample mixture); the
    # consensus ranks both parents first and calls exactly them significant.
    x, truth = mixed_graph()
    graph = discover(Dataset.from_arrays(x, variables=["C", "A", "D", "B"]), "consensus", seed=0)
    np.testing.assert_array_equal(graph.adjacency, truth)
    off = ~np.eye(4, dtype=bool)
    assert graph.score_matrix[truth == 1].min() > graph.score_matrix[(truth == 0) & off].max()
    assert set(graph.extra["members"]) == {"crosspred", "pcmci"}
    assert all(np.isnan(e.p_value) for e in graph.edges)
    assert {(e.source, e.target) for e in graph.edges if e.significant} == {("A", "C"), ("B", "C")}


def test_finds_the_links_of_a_var():
    # A VAR(1), self-lags 0.5, a chain 0 -> 1 -> 2 and 3 -> 4 at lag 1, unit noise: both members
    # find the three links, so the consensus ranks them first and marks them, at pcmci's lag 1
    # and crosspred's lag 0 (its delay vectors hold the source's past).
    a = 0.5 * np.eye(5)
    a[1, 0], a[2, 1], a[4, 3] = 0.6, 0.6, -0.6  # [target, source]
    x = var_process([a], np.random.default_rng(0).standard_normal((1000, 5)))
    truth = (a.T != 0).astype(int)
    np.fill_diagonal(truth, 0)
    graph = discover(Dataset.from_arrays(x), "consensus", max_lag=3, seed=0)
    assert auroc(graph.score_matrix, truth) == 1.0
    np.testing.assert_array_equal(graph.adjacency, truth)
    assert {e.lag for e in graph.edges if e.significant} == {0, 1}
    assert {e.lag for e in graph.edges} == {0, 1, 2, 3}


def test_agreeing_members_keep_their_order_and_a_reversed_one_meets_them_halfway():
    rng = np.random.default_rng(1)
    d = 5
    off = ~np.eye(d, dtype=bool)
    first = np.where(off, rng.random((d, d)), 0.0)
    # A monotone transform ranks the pairs as ``first`` does; each member's significance is a
    # threshold on its own score, so the votes follow the ranks too.
    second = np.where(off, np.exp(5 * first) - 3.0, 0.0)
    adjacency = [first > 0.7, second > np.exp(5 * 0.4) - 3.0]
    score, votes, mean_rank = combine([first, second], adjacency)
    np.testing.assert_array_equal(np.argsort(score[off]), np.argsort(first[off]))
    np.testing.assert_allclose(mean_rank, member_ranks(first))
    # Ranks: 1 for the largest of the 20 off-diagonal scores, 1/20 for the smallest.
    assert member_ranks(first)[off].max() == 1.0 and member_ranks(first)[off].min() == 1 / 20
    # A member with the reversed order: every pair's mean rank is (r + (21/20 - r)) / 2 = 21/40.
    reversed_score = np.where(off, -first, 0.0)
    _, no_votes, halfway = combine([first, reversed_score], [off & False, off & False])
    np.testing.assert_allclose(halfway[off], 21 / 40)
    assert no_votes.sum() == 0


def test_ties_share_their_rank_and_nan_ranks_lowest():
    score = np.array([[0.0, 2.0, 2.0], [np.nan, 0.0, 5.0], [1.0, 1.0, 0.0]])
    # Off-diagonal in row order: 2, 2, nan, 5, 1, 1 -> ranks 4.5, 4.5, 1, 6, 2.5, 2.5 of 6.
    expected = np.array([[0.0, 4.5, 4.5], [1.0, 0.0, 6.0], [2.5, 2.5, 0.0]]) / 6
    np.testing.assert_allclose(member_ranks(score), expected)


def _graph(names: tuple[str, ...], method: str, score: np.ndarray, adjacency: np.ndarray,
           lags: dict[tuple[int, int], int]) -> CausalGraph:
    edges = [Edge(names[s], names[t], lags.get((s, t), 1), 0.0, 0.5, bool(adjacency[s, t]))
             for s in range(len(names)) for t in range(len(names)) if s != t]
    return CausalGraph(names, method, 3, 0.05, edges, score, adjacency)


def test_a_strict_majority_decides_and_more_votes_always_rank_higher():
    names = ("a", "b", "c")
    data = Dataset.from_arrays(np.random.default_rng(0).standard_normal((50, 3)), variables=list(names))
    scores = [np.array([[0, 9, 1], [2, 0, 3], [4, 5, 0]], float),
              np.array([[0, 1, 9], [2, 0, 3], [4, 5, 0]], float),
              np.array([[0, 9, 1], [2, 0, 3], [4, 5, 0]], float)]
    # a -> b: two of three votes (significant); a -> c: one vote (not); the rest none.
    adjacency = [np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]]),
                 np.array([[0, 0, 1], [0, 0, 0], [0, 0, 0]]),
                 np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]])]
    graphs = [_graph(names, f"m{k}", s, a, {(0, 1): 2 + k}) for k, (s, a) in enumerate(zip(scores, adjacency))]
    graph = consensus_graph(data, graphs, CausalSettings(max_lag=3))
    np.testing.assert_array_equal(graph.adjacency, [[0, 1, 0], [0, 0, 0], [0, 0, 0]])
    assert graph.extra["majority"] == 2
    np.testing.assert_array_equal(graph.extra["votes"], [[0, 2, 1], [0, 0, 0], [0, 0, 0]])
    # c -> b has the best mean rank of the pairs without a vote, yet ranks below a -> c (1 vote).
    assert graph.score_matrix[0, 2] > graph.score_matrix[2, 1] > graph.score_matrix[2, 0]
    # a -> b is significant at the lags its voters found it at (m0's 2, m2's 4), not m1's 3.
    assert {e.lag for e in graph.edges} == {1, 2, 3, 4}
    assert {(e.source, e.target, e.lag) for e in graph.edges if e.significant} == {
        ("a", "b", 2), ("a", "b", 4)}


@pytest.mark.parametrize("members, message", [
    ("granger", "two or more"),
    ("granger,granger", "two or more"),
    ("granger,consensus", "consensus cannot be a member"),
    ("granger,dynamic", "dynamic cannot be a member"),
    ("auto,granger", "auto cannot be a member"),
    ("granger,nosuch", "unknown method 'nosuch'"),
])
def test_members_are_checked(members, message):
    with pytest.raises(UsageError, match=message):
        ConsensusParams.parse([f"members={members}"])


def test_members_are_configurable():
    x, truth = mixed_graph()
    graph = discover(Dataset.from_arrays(x), "consensus", params=["members=granger,pcmci"],
                     max_lag=3, seed=0)
    assert set(graph.extra["members"]) == {"granger", "pcmci"}
    votes = graph.extra["votes"]
    np.testing.assert_array_equal(graph.adjacency, votes == 2)
    assert min(e.lag for e in graph.edges) >= 1  # neither member tests lag 0
