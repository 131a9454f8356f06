"""Convergent cross mapping: direction on coupled logistic maps, no link between independent
maps, embedding choice, Theiler windows and trials, and the errors bad input gets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid.causal import CausalSettings, discover
from dynid.causal.ccm import CCM, CCMParams, _Embedding, _Series, decorrelation_time
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.systems import simulate


def ccm_graph(x: np.ndarray | list[np.ndarray], params=(), **settings):
    data = Dataset.from_arrays(x, variables=["x", "y"])
    return discover(data, "ccm", params=list(params), **{"max_lag": 3, "seed": 0, **settings})


def significant_pairs(graph) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in graph.significant_edges}


@pytest.fixture(scope="module")
def coupled():
    # x drives y (beta_yx = 0.1), y does not act on x (beta_xy = 0).
    return ccm_graph(simulate("logistic-coupled", n=1000).x)


def test_coupled_logistic_maps_x_drives_y(coupled):
    assert significant_pairs(coupled) == {("x", "y")}
    assert coupled.adjacency.tolist() == [[0, 1], [0, 0]]
    extra = coupled.extra
    # Cross-map skill of x from M_y converges to near 1 and grows with the library...
    curve = extra["rho_curve"][0, 1]
    assert curve[-1] > 0.9 and curve[-1] - curve[0] > 0.3
    # ...while y is not recoverable from M_x.
    assert np.max(extra["cross_map_skill"][1, 0]) < 0.3
    assert extra["p_value_raw"][0, 1] == pytest.approx(1 / (extra["n_surrogates"] + 1))


def test_one_significant_lag_per_pair(coupled):
    edges = [e for e in coupled.edges if (e.source, e.target) == ("x", "y")]
    assert [e.lag for e in edges] == [1, 2, 3]
    best = coupled.extra["best_lag"][0, 1]
    assert [e.significant for e in edges] == [e.lag == best for e in edges]
    assert all(e.p_value == 1.0 for e in edges if e.lag != best)
    # strength = rho at L_max and that lag; the best lag has the largest.
    strengths = [e.strength for e in edges]
    assert strengths[best - 1] == max(strengths)
    assert strengths == pytest.approx(list(coupled.extra["cross_map_skill"][0, 1, 1:]))


def test_independent_logistic_maps_have_no_link():
    # beta_yx = 0 uncouples them; r_y = 3.7 keeps y chaotic (3.5 would be periodic).
    x = simulate("logistic-coupled", n=1000, params={"beta_yx": 0.0, "r_y": 3.7}).x
    graph = ccm_graph(x)
    assert graph.significant_edges == []
    assert np.all(np.abs(graph.extra["cross_map_skill"][[0, 1], [1, 0]]) < 0.3)


def test_embedding_choice(coupled):
    embedding = coupled.extra["embedding"]
    # x is a one-dimensional map: its present alone forecasts it; y needs its past as well.
    assert embedding["E"][0] == 1
    assert embedding["E"][1] >= 2
    assert embedding["simplex_rho"].shape == (2, 8, 3)
    assert embedding["theiler"].tolist() == [1, 1]


def test_decorrelation_time_of_ar1():
    # acf(l) = phi^l falls below 1/e first at l = ceil(-1 / ln phi) = 10 for phi = 0.9.
    rng = np.random.default_rng(0)
    x = np.zeros(20000)
    for t in range(1, x.size):
        x[t] = 0.9 * x[t - 1] + rng.standard_normal()
    series = _Series.of(Dataset.from_arrays(x))
    assert decorrelation_time(series, 0) in (9, 10, 11)


def test_neighbours_respect_theiler_window_and_trials():
    rng = np.random.default_rng(1)
    data = Dataset.from_arrays([rng.standard_normal((60, 1)), rng.standard_normal((60, 1))])
    series = _Series.of(data)
    rows = series.rows(2, 0)
    embedding = _Embedding.of(series, 0, rows, E=3, tau=1, theiler=4)
    index, weights = embedding.neighbours()
    same_trial = series.trial[index] == series.trial[rows][:, None]
    gap = np.abs(series.time[index] - series.time[rows][:, None])
    assert not np.any(same_trial & (gap <= 4))
    assert np.any(~same_trial)  # the other trial's samples are fair neighbours
    assert np.allclose(weights.sum(axis=1), 1.0)
    assert np.all(np.diff(weights, axis=1) <= 1e-12)  # nearest first, heaviest first


def test_trials_are_embedded_separately():
    x = simulate("logistic-coupled", n=1000).x
    graph = ccm_graph([x[:500], x[500:]])
    assert significant_pairs(graph) == {("x", "y")}


def test_json_round_trip(coupled):
    doc = json.loads(json.dumps(coupled.to_json_dict()))
    assert doc["method"] == "ccm"
    assert len(doc["rho_curve"][0][1]) == 8
    assert doc["embedding"]["E"][0] == 1


@pytest.mark.parametrize("bad", ["max_E=0", "max_tau=0", "n_library_sizes=1", "theiler=-1"])
def test_bad_params(bad: str):
    with pytest.raises(UsageError):
        CCMParams.parse([bad])


def test_bad_data():
    x = simulate("logistic-coupled", n=300).x
    settings = CausalSettings(max_lag=3, seed=0)
    method = CCM()
    with pytest.raises(DataError, match=r"90 usable samples for max_E=8, max_tau=3, max_lag=3"):
        method.discover(Dataset.from_arrays(x[:100]), settings)
    with pytest.raises(DataError, match="Theiler window of 100"):
        CCM(CCMParams(theiler=100)).discover(Dataset.from_arrays(x), settings)


def test_worker_processes_give_the_same_answers():
    # Each target draws its libraries and shifts from its own stream (seed, target, samples
    # drawn), so the split of the targets over processes does not change a number.
    x = simulate("logistic-coupled", n=400).x
    one, two = (ccm_graph(x, params=[f"workers={w}", "max_E=4", "n_samples=5"], max_lag=2)
                for w in (1, 2))
    assert one.extra["workers"] == 1 and two.extra["workers"] == 2
    for key in ("cross_map_skill", "rho_curve", "p_value_raw", "null_samples_done"):
        np.testing.assert_array_equal(one.extra[key], two.extra[key])
    assert significant_pairs(two) == {("x", "y")}
