"""PCMCI+: the same graph, p-values and statistics as tigramite's ``run_pcmciplus`` (every
collider rule, trials), lag-0 links found and oriented on a known structure, undirected links
said as such in the JSON and DOT, and the options' checks."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.causal import CausalGraph, CausalSettings, discover
from dynid.causal.pcmciplus import PCMCIPlus, PCMCIPlusParams
from dynid.data.dataset import Dataset
from dynid.errors import UsageError


def random_process(seed: int, d: int, n: int) -> np.ndarray:
    """(n, d): a random lag-0 DAG (about a third of the pairs, coefficients 0.3-0.7, variables
    in random causal order) on top of a sparse VAR(1) with self-lags 0.4, scaled down where
    needed to keep the process stable; unit Gaussian noise."""
    rng = np.random.default_rng(seed)
    a0 = np.triu(rng.uniform(0.3, 0.7, (d, d)) * (rng.random((d, d)) < 0.35), 1)
    order = rng.permutation(d)
    a0 = a0[np.ix_(order, order)]  # a0[source, target]
    a1 = rng.uniform(-0.4, 0.4, (d, d)) * (rng.random((d, d)) < 0.2) + 0.4 * np.eye(d)
    mix = np.linalg.inv(np.eye(d) - a0.T)
    radius = np.abs(np.linalg.eigvals(mix @ a1.T)).max()
    a1 *= min(1.0, 0.9 / radius)  # stable: spectral radius at most 0.9
    noise = rng.standard_normal((n, d))
    x = np.zeros((n, d))
    for t in range(1, n):
        x[t] = mix @ (a1.T @ x[t - 1] + noise[t])
    return x


def run(x, max_lag: int, alpha: float, **params) -> CausalGraph:
    settings = CausalSettings(max_lag=max_lag, alpha=alpha, seed=0)
    return PCMCIPlus(PCMCIPlusParams(**params)).discover(Dataset.from_arrays(x), settings)


def tigramite_pcmciplus(x, max_lag: int, alpha: float, **options) -> dict:
    pytest.importorskip("tigramite")
    from tigramite import data_processing as pp
    from tigramite.independence_tests.parcorr import ParCorr
    from tigramite.pcmci import PCMCI

    frame = (pp.DataFrame(dict(enumerate(x)), analysis_mode="multiple") if isinstance(x, list)
             else pp.DataFrame(x))
    method = PCMCI(frame, ParCorr(significance="analytic"), verbosity=0)
    return method.run_pcmciplus(tau_min=0, tau_max=max_lag, pc_alpha=alpha, **options)


@pytest.mark.parametrize(
    "seed, d, n, max_lag, alpha, rule",
    [
        (0, 6, 400, 2, 0.05, "majority"),
        (1, 8, 250, 2, 0.01, "conservative"),
        (2, 5, 150, 1, 0.2, "none"),
        (4, 8, 300, 2, 0.1, "majority"),  # conflicting (x-x) links and ambiguous triples
        pytest.param(3, 10, 500, 3, 0.05, "majority", marks=pytest.mark.slow),  # tigramite: ~10 s
    ],
)
def test_same_graph_and_pvalues_as_tigramite(seed, d, n, max_lag, alpha, rule):
    x = random_process(seed, d, n)
    ours = run(x, max_lag, alpha, contemp_collider_rule=rule)
    theirs = tigramite_pcmciplus(x, max_lag, alpha, contemp_collider_rule=rule)
    np.testing.assert_array_equal(np.array(ours.extra["graph"]), theirs["graph"])
    np.testing.assert_allclose(ours.extra["p_matrix"], theirs["p_matrix"], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(ours.extra["val_matrix"], theirs["val_matrix"], atol=1e-10)


def test_same_as_tigramite_with_trials_and_without_conflict_marks():
    x = random_process(5, 6, 300)
    trials = [x[:180], x[180:]]
    ours = run(trials, 2, 0.1, conflict_resolution=False)
    theirs = tigramite_pcmciplus(trials, 2, 0.1, conflict_resolution=False)
    np.testing.assert_array_equal(np.array(ours.extra["graph"]), theirs["graph"])
    np.testing.assert_allclose(ours.extra["p_matrix"], theirs["p_matrix"], rtol=1e-6, atol=1e-12)
    assert ours.extra["n_rows"] == (180 - 4) + (120 - 4)


def chain_and_collider(n: int = 1000, seed: int = 0) -> np.ndarray:
    """x0 -> x1 at lag 1; x1 -> x2, x2 -> x3 <- x4 at lag 0; every variable has a self-lag."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n, 5))
    x = np.zeros((n, 5))
    for t in range(1, n):
        x[t] = 0.4 * x[t - 1] + e[t]
        x[t, 1] += 0.6 * x[t - 1, 0]
        x[t, 2] += 0.6 * x[t, 1]
        x[t, 3] += 0.6 * x[t, 2] + 0.6 * x[t, 4]
    return x


def test_finds_and_orients_the_lag0_links():
    graph = run(chain_and_collider(), 2, 0.01)
    found = {(e.source, e.target, e.lag) for e in graph.significant_edges}
    assert found == {("x0", "x1", 1), ("x1", "x2", 0), ("x2", "x3", 0), ("x4", "x3", 0)}
    links = {(e.source, e.target): e.link for e in graph.edges if e.lag == 0}
    # The collider orients x2 -> x3 <- x4; rule R1 then orients x1 -> x2 (x0(t-1) -> x1 o-o x2).
    assert links[("x2", "x3")] == links[("x4", "x3")] == links[("x1", "x2")] == "-->"
    assert links[("x3", "x2")] == links[("x3", "x4")] == links[("x2", "x1")] == "<--"
    assert links[("x0", "x2")] is None
    lag0 = [e for e in graph.edges if e.lag == 0 and e.source == "x2" and e.target == "x3"][0]
    assert lag0.p_value < 1e-10 and lag0.strength > 0.3
    assert graph.adjacency[2, 3] == 1 and graph.adjacency[3, 2] == 0
    # A lag-0 link oriented against s -> t is no evidence for it.
    assert graph.score_matrix[2, 3] > 10 and graph.score_matrix[3, 2] < 2


def test_an_unorientable_lag0_link_is_undirected_in_json_and_dot():
    # Independent samples: x -> y at lag 0 and y -> x are Markov equivalent.
    rng = np.random.default_rng(1)
    x = rng.standard_normal(800)
    data = np.column_stack([x, 0.7 * x + rng.standard_normal(800)])
    graph = discover(Dataset.from_arrays(data, variables=["x", "y"]), "pcmciplus",
                     max_lag=1, alpha=0.01)
    lag0 = {(e["source"], e["target"]): e for e in graph.to_json_dict()["edges"] if e["lag"] == 0}
    assert lag0[("x", "y")]["link"] == lag0[("y", "x")]["link"] == "o-o"
    assert lag0[("x", "y")]["significant"] and lag0[("y", "x")]["significant"]
    lagged = [e for e in graph.to_json_dict()["edges"] if e["lag"] == 1]
    assert lagged and all("link" not in e and not e["significant"] for e in lagged)
    dot = graph.to_dot()
    assert 'n0 -> n1 [label="0", dir=none];' in dot and "n1 -> n0" not in dot
    assert CausalGraph.from_json_dict(graph.to_json_dict()).edges == graph.edges


def test_pcmci_and_pcmciplus_agree_on_lagged_only_data():
    # Without lag-0 dependence PCMCI+ keeps no lag-0 link and finds PCMCI's lagged links.
    rng = np.random.default_rng(4)
    n, e = 800, rng.standard_normal((800, 3))
    x = np.zeros((n, 3))
    for t in range(2, n):
        x[t] = 0.5 * x[t - 1] + e[t]
        x[t, 1] += 0.5 * x[t - 2, 0]
        x[t, 2] += -0.5 * x[t - 1, 1]
    data = Dataset.from_arrays(x)
    plus = discover(data, "pcmciplus", max_lag=2, alpha=0.01)
    assert {(e.source, e.target, e.lag) for e in plus.significant_edges} == {
        ("x0", "x1", 2), ("x1", "x2", 1)}


@pytest.mark.parametrize("field, value", [("contemp_collider_rule", "vote"),
                                          ("max_combinations", 0), ("knn", 0)])
def test_bad_params_name_the_field(field, value):
    with pytest.raises(UsageError, match=field):
        PCMCIPlusParams.from_values({field: value})
