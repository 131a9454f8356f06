"""Granger causality between groups of variables: parsing --clusters, recovery of a known
cluster-level graph (including a group link made of individually insignificant links), and
agreement with the variable-level F-test for singleton clusters."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.causal import CausalSettings, granger
from dynid.causal.clusters import cluster_granger, parse_clusters
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError

from conftest import var_process

A = [f"a{i}" for i in range(5)]
B = [f"b{i}" for i in range(5)]
C = ["c0", "c1"]
NAMES = A + B + C + ["w"]  # w belongs to no cluster: conditioned on, not shown
CLUSTERS = {"A": A, "B": B, "C": C}
TRUTH = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])  # A -> B -> C; A -> C only through B
WEAK = 0.02  # each a_j -> b_i coefficient: alone, a t-statistic of about 1.2 at n = 3000


def simulate(seed: int, n: int = 3000) -> Dataset:
    """VAR(1): every a_j drives every b_i weakly, b0 drives c0, c0 drives c1, w drives a0."""
    d = len(NAMES)
    a = np.diag(np.full(d, 0.4))
    index = {name: i for i, name in enumerate(NAMES)}
    a[np.ix_([index[b] for b in B], [index[s] for s in A])] = WEAK
    a[index["c0"], index["b0"]] = 0.4
    a[index["c1"], index["c0"]] = 0.3
    a[index["a0"], index["w"]] = 0.3
    noise = np.random.default_rng(seed).standard_normal((n + 100, d))
    return Dataset.from_arrays(var_process([a], noise)[100:], variables=NAMES)


@pytest.fixture(scope="module")
def data() -> Dataset:
    return simulate(8)


def test_recovers_the_cluster_graph(data):
    graph = cluster_granger(data, CLUSTERS, CausalSettings(max_lag=1))
    assert graph.variables == ("A", "B", "C")
    np.testing.assert_array_equal(graph.adjacency, TRUTH)
    assert graph.extra["clusters"] == CLUSTERS
    assert len(graph.edges) == 3 * 2 * 1
    np.testing.assert_array_equal(graph.extra["joint"]["significant"], TRUTH.astype(bool))


def test_group_link_from_individually_weak_links(data):
    graph = cluster_granger(data, CLUSTERS, CausalSettings(max_lag=1))
    variables = granger(data, max_lag=1)
    weak = [e for e in variables.edges if e.source in A and e.target in B]
    assert len(weak) == 25 and not any(e.significant for e in weak)
    group = next(e for e in graph.edges if (e.source, e.target) == ("A", "B"))
    assert group.significant and group.p_value < 1e-4
    # The group effect: about 25 WEAK^2 var(a) / var(e) of B's generalised variance per equation.
    assert 0.0 < group.strength < 0.1


def test_per_lag_edges_and_joint_test(data):
    graph = cluster_granger(data, CLUSTERS, CausalSettings(max_lag=3))
    links = {(e.source, e.target, e.lag): e for e in graph.edges}
    assert links["B", "C", 1].significant
    assert not links["B", "C", 2].significant and not links["B", "C", 3].significant
    joint = graph.extra["joint"]
    assert joint["df"][1, 2] == 3 * 5 * 2 and joint["df"][0, 1] == 3 * 5 * 5
    assert graph.score_matrix[1, 2] > graph.score_matrix[0, 1] > graph.score_matrix[2, 0]
    assert np.all(np.diag(graph.score_matrix) == 0)


def test_singletons_match_the_variable_level_f_test(data):
    """One variable per cluster: LR = dof * log(1 + L F / dof) exactly (same RSS ratio)."""
    names = ["a0", "b0", "c0", "w"]
    graph = cluster_granger(data, {n: [n] for n in names}, CausalSettings(max_lag=2))
    variables = granger(data, max_lag=2)
    dof = variables.extra["joint"]["df_den"]
    index = [NAMES.index(n) for n in names]
    f = variables.extra["joint"]["f_statistic"][np.ix_(index, index)]
    expected = dof * np.log1p(2 * f / dof)
    off = ~np.eye(len(names), dtype=bool)
    np.testing.assert_allclose(graph.extra["joint"]["lr_statistic"][off], expected[off], rtol=1e-8)


def test_null_p_values_are_calibrated():
    """No link between the clusters: about alpha of the raw joint tests reject."""
    rejections = 0
    for seed in range(40):
        x = np.random.default_rng(seed).standard_normal((300, 4))
        data = Dataset.from_arrays(x, variables=["p", "q", "r", "s"])
        graph = cluster_granger(data, {"P": ["p", "q"], "R": ["r", "s"]}, CausalSettings(max_lag=2))
        rejections += int(np.sum(graph.extra["joint"]["p_value_raw"][[0, 1], [1, 0]] < 0.1))
    assert rejections <= 16  # 80 tests at 0.1: about 8 expected


def test_parse_clusters():
    variables = ("x1", "x2", "x3", "x4", "x5")
    assert parse_clusters(" A = x1, x2 ;B=x3;", variables) == {"A": ["x1", "x2"], "B": ["x3"]}
    with pytest.raises(DataError, match="'nope'"):
        parse_clusters("A=x1,nope;B=x3", variables)
    for text in ["A x1;B=x3", "A=;B=x3", "=x1;B=x3", "A=x1,,x2;B=x3", "A=x1", ""]:
        with pytest.raises(UsageError):
            parse_clusters(text, variables)
    with pytest.raises(UsageError, match="'x1'"):
        parse_clusters("A=x1,x2;B=x1", variables)
    with pytest.raises(UsageError, match="twice"):
        parse_clusters("A=x1;A=x2", variables)


def test_bad_data_is_rejected_by_the_variable_level_checks():
    x = np.random.default_rng(0).standard_normal((200, 3))
    x[:, 2] = 1.0
    data = Dataset.from_arrays(x, variables=["p", "q", "r"])
    with pytest.raises(DataError, match="'r' is constant"):
        cluster_granger(data, {"P": ["p"], "Q": ["q", "r"]}, CausalSettings(max_lag=1))
