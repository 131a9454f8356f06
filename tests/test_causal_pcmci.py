"""PCMCI: recovery on a known sparse VAR (one seed, then power and FDR over seeds), agreement with
tigramite's ParCorr-PCMCI, a common driver, a nonlinear link only cmiknn sees, sample alignment
and trials, and the errors bad input gets."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dynid.causal import CausalGraph, CausalSettings, adjust_pvalues, discover
from dynid.causal.citests import ParCorr
from dynid.causal.pcmci import PCMCI, PCMCIParams, node_matrix
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError

from conftest import var_process

D = 5
MAX_LAG = 3
# Sparse VAR(2): x(t) = A1 x(t-1) + A2 x(t-2) + e, e ~ N(0, I); A[target, source].
A1 = np.diag([0.5, 0.4, 0.3, 0.5, 0.4])
A2 = np.zeros((D, D))
A1[1, 0] = 0.4  # x0 -> x1 at lag 1
A1[3, 0] = -0.4  # x0 -> x3 at lag 1 (negative)
A1[2, 4] = 0.3  # x4 -> x2 at lag 1
A2[2, 1] = 0.4  # x1 -> x2 at lag 2
A2[4, 3] = 0.5  # x3 -> x4 at lag 2
TRUE_EDGES = {("x0", "x1", 1), ("x0", "x3", 1), ("x4", "x2", 1), ("x1", "x2", 2), ("x3", "x4", 2)}


def simulate(seeds: list[int] | range, n: int = 1000, burn: int = 200) -> np.ndarray:
    """(len(seeds), n, D) independent realisations of the VAR, one generator per seed."""
    noise = np.stack([np.random.default_rng(s).standard_normal((n + burn, D)) for s in seeds])
    return var_process([A1, A2], noise)[:, burn:]


def run(x: np.ndarray | list[np.ndarray], max_lag: int = MAX_LAG, **params) -> CausalGraph:
    settings = CausalSettings(max_lag=max_lag, alpha=0.05, correction="bh", seed=0)
    return PCMCI(PCMCIParams(**params)).discover(Dataset.from_arrays(x), settings)


def found(graph: CausalGraph) -> set[tuple[str, str, int]]:
    return {(e.source, e.target, e.lag) for e in graph.significant_edges}


@pytest.fixture(scope="module")
def graph() -> CausalGraph:
    return run(simulate([0])[0])


def test_finds_exactly_the_true_links_at_their_lags(graph: CausalGraph):
    # One fixed seed. BH controls the false discovery rate, not the family-wise rate: of seeds
    # 0-39, 11 let one or more null links through (all true links are found in every one), so
    # exact recovery is a property of this seed; rates are checked over seeds below.
    assert found(graph) == TRUE_EDGES
    expected = np.zeros((D, D), dtype=int)
    for source, target, _ in TRUE_EDGES:
        expected[int(source[1]), int(target[1])] = 1
    np.testing.assert_array_equal(graph.adjacency, expected)


def test_power_and_false_discovery_rate_over_seeds():
    fdp, power = [], []
    for x in simulate(range(20)):
        links = found(run(x))
        power.append(len(links & TRUE_EDGES) / len(TRUE_EDGES))
        fdp.append(len(links - TRUE_EDGES) / max(len(links), 1))
    assert np.mean(power) == 1.0
    # BH at 0.05 bounds the FDR by 0.05 * 55/60; 20 seeds estimate it roughly (0.04 here).
    assert np.mean(fdp) <= 0.1


def test_edges_strengths_scores_and_extra(graph: CausalGraph):
    assert len(graph.edges) == D * (D - 1) * MAX_LAG
    assert all(e.source != e.target for e in graph.edges)
    by_key = {(e.source, e.target, e.lag): e for e in graph.edges}
    for source, target, lag in TRUE_EDGES:
        coefficient = (A1 if lag == 1 else A2)[int(target[1]), int(source[1])]
        assert np.sign(by_key[source, target, lag].strength) == np.sign(coefficient)
    # Edge p-values are the raw MCI p-values, BH-adjusted over the cross-links only.
    p_raw = graph.extra["p_matrix"]
    cross = ~np.eye(D, dtype=bool)
    adjusted = adjust_pvalues(p_raw[:, :, 1:][cross])
    edge_p = np.array([by_key[f"x{s}", f"x{t}", k].p_value
                       for s in range(D) for t in range(D) if s != t for k in (1, 2, 3)])
    np.testing.assert_allclose(np.sort(edge_p), np.sort(adjusted.ravel()))
    # Self-links are conditioned on and reported in extra, never as edges.
    assert np.all(graph.extra["val_matrix"][range(D), range(D), 1] > 0.2)
    assert np.all(np.isnan(graph.extra["val_matrix"][:, :, 0]))
    assert np.all(np.diag(graph.score_matrix) == 0)
    assert graph.score_matrix[0, 1] > 10 and graph.score_matrix[1, 0] < 2
    parents_x2 = {(p["source"], p["lag"]) for p in graph.extra["parents"]["x2"]}
    assert {("x4", 1), ("x1", 2), ("x2", 1)} <= parents_x2
    doc = json.loads(json.dumps(graph.to_json_dict()))
    assert doc["method"] == "pcmci" and doc["ci_test"] == "parcorr"
    assert doc["val_matrix"][0][0][0] is None  # untested lag 0 -> null


def _tigramite(x, max_lag: int, **options):
    """tigramite's ParCorr-PCMCI (pc_alpha 0.2), raw p-values: (the PCMCI object, results)."""
    options.setdefault("tau_min", 1)
    pytest.importorskip("tigramite")
    from tigramite import data_processing as pp
    from tigramite.independence_tests.parcorr import ParCorr
    from tigramite.pcmci import PCMCI as TigramitePCMCI

    frame = (pp.DataFrame(dict(enumerate(x)), analysis_mode="multiple") if isinstance(x, list)
             else pp.DataFrame(x))
    method = TigramitePCMCI(frame, ParCorr(significance="analytic"), verbosity=0)
    results = method.run_pcmci(tau_max=max_lag, pc_alpha=0.2, alpha_level=0.05,
                               fdr_method="none", **options)
    return method, results


def _assert_same_as_tigramite(ours: CausalGraph, method, results, tau_min: int = 1) -> None:
    np.testing.assert_allclose(ours.extra["val_matrix"][:, :, tau_min:],
                               results["val_matrix"][:, :, tau_min:], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(ours.extra["p_matrix"][:, :, tau_min:],
                               results["p_matrix"][:, :, tau_min:], rtol=1e-6, atol=0)
    names = ours.variables
    theirs = {names[j]: [(names[i], -lag) for i, lag in parents]
              for j, parents in method.all_parents.items()}
    mine = {j: [(p["source"], p["lag"]) for p in v] for j, v in ours.extra["parents"].items()}
    assert mine == theirs


def test_same_pvalues_parents_and_links_as_tigramite(graph: CausalGraph):
    method, raw = _tigramite(simulate([0])[0], MAX_LAG)
    _assert_same_as_tigramite(graph, method, raw)
    # Like with like: tigramite's raw p-values adjusted over dynid's family (cross-links) give
    # dynid's links.
    cross = ~np.eye(D, dtype=bool)
    q_cross = adjust_pvalues(raw["p_matrix"][:, :, 1:][cross])
    links = {(f"x{i}", f"x{j}", k + 1) for (i, j), q in zip(np.argwhere(cross), q_cross)
             for k in np.flatnonzero(q <= 0.05)}
    assert links == found(graph)
    # tigramite's own fdr_bh family is every lagged link, self-links included: dynid's raw
    # p-values adjusted over that family are its q-values.
    q_all = method.get_corrected_pvalues(raw["p_matrix"], tau_min=1, tau_max=MAX_LAG)
    np.testing.assert_allclose(adjust_pvalues(graph.extra["p_matrix"][:, :, 1:]),
                               q_all[:, :, 1:], rtol=1e-6)


def test_same_as_tigramite_with_options_and_trials():
    x = simulate([3, 4], n=300)
    trials = [x[0], x[1][:200]]
    ours = run(trials, max_lag=2, tau_min=2, max_combinations=3, max_conds_dim=4)
    method, raw = _tigramite(trials, 2, tau_min=2, max_combinations=3, max_conds_dim=4)
    _assert_same_as_tigramite(ours, method, raw, tau_min=2)
    assert ours.extra["n_rows"] == (300 - 4) + (200 - 4)


def test_common_driver_link_is_removed():
    # z drives x at lag 1 and y at lag 2, so x(t-1) and y(t) share z(t-2): correlated, not causal.
    rng = np.random.default_rng(7)
    n = 1000
    e = rng.standard_normal((n, 3))
    z, x, y = np.zeros(n), np.zeros(n), np.zeros(n)
    for t in range(2, n):
        z[t] = 0.4 * z[t - 1] + e[t, 0]
        x[t] = 0.3 * x[t - 1] + 0.7 * z[t - 1] + e[t, 1]
        y[t] = 0.3 * y[t - 1] + 0.7 * z[t - 2] + e[t, 2]
    assert stats.pearsonr(x[1:-1], y[2:])[1] < 1e-10
    data = Dataset.from_arrays(np.column_stack([z, x, y]), variables=["z", "x", "y"])
    graph = discover(data, "pcmci", max_lag=3)
    links = found(graph)
    assert {("z", "x", 1), ("z", "y", 2)} <= links
    assert not {link for link in links if {link[0], link[1]} == {"x", "y"}}


def test_cmiknn_finds_a_nonlinear_link_parcorr_misses():
    pytest.importorskip("dynid.causal.knn")
    rng = np.random.default_rng(0)
    n = 300
    x, noise = rng.standard_normal(n), rng.standard_normal(n)
    y = np.zeros(n)
    y[1:] = x[:-1] ** 2 + 0.5 * noise[1:]  # no linear trace: corr(x, x^2) = 0
    data = Dataset.from_arrays(np.column_stack([x, y]), variables=["x", "y"])
    settings = CausalSettings(max_lag=1, seed=1)
    linear = PCMCI(PCMCIParams()).discover(data, settings)
    assert found(linear) == set()
    nonlinear_params = PCMCIParams(ci_test="cmiknn", n_permutations=100)
    nonlinear = PCMCI(nonlinear_params).discover(data, settings)
    assert found(nonlinear) == {("x", "y", 1)}
    assert nonlinear.extra["strength_kind"] == "cmi_nats"
    again = PCMCI(nonlinear_params).discover(data, settings)
    np.testing.assert_array_equal(again.extra["p_matrix"], nonlinear.extra["p_matrix"])


def test_rows_are_aligned_and_never_cross_trials():
    x = np.arange(24.0).reshape(8, 3)
    depth = 2
    nodes = node_matrix([x], depth)
    assert nodes.shape == (8 - depth, (depth + 1) * 3)
    for row in range(nodes.shape[0]):
        for lag in range(depth + 1):
            np.testing.assert_array_equal(nodes[row, lag * 3:(lag + 1) * 3], x[row + depth - lag])
    two = node_matrix([x, x[:4] + 100, x[:2]], depth)  # the last trial is too short for a row
    np.testing.assert_array_equal(two, np.vstack([nodes, node_matrix([x[:4] + 100], depth)]))


def _ols_partial_correlation(columns: np.ndarray, x: int, y: int, z: list[int]) -> float:
    design = np.column_stack([np.ones(len(columns)), columns[:, z]])
    resid = columns[:, [x, y]] - design @ np.linalg.lstsq(design, columns[:, [x, y]], rcond=None)[0]
    return float(np.corrcoef(resid.T)[0, 1])


def test_parcorr_stays_accurate_on_near_collinear_nodes():
    # Integrated random walks: a variable's lags are correlated to 1 - 1e-6, where the
    # correlation-matrix route alone is off by ~1e-10 (2e-7 relative for the third case);
    # such tests go the least-squares way.
    noise = np.random.default_rng(0).standard_normal((500, 3))
    nodes = node_matrix([np.cumsum(np.cumsum(noise, axis=0), axis=0)], 4)  # col lag * 3 + var
    test = ParCorr(nodes)
    cases = [(6, 0, (3,)), (7, 0, (3, 6, 9)), (4, 0, (3, 1, 10)), (3, 1, ())]
    values, pvalues = test.run(cases)
    expected = [_ols_partial_correlation(nodes, x, y, list(z)) for x, y, z in cases]
    np.testing.assert_allclose(values, expected, rtol=1e-9)
    # An exact linear function of its conditions has no residual left: r = 0, p = 1.
    a, b = np.random.default_rng(1).standard_normal((2, 100))
    exact = ParCorr(np.column_stack([a, b, a - 2 * b, b**3]))
    np.testing.assert_array_equal(np.column_stack(exact.run([(2, 3, (0, 1))])), [[0.0, 1.0]])


def _data(x: np.ndarray, t: np.ndarray | None = None) -> Dataset:
    return Dataset.from_arrays(x, t=t)


@pytest.mark.parametrize(
    ("x", "t", "message"),
    [(np.random.default_rng(0).standard_normal((20, 3)), None, "needs at least")],
    ids=["too-few-samples"],
)
def test_bad_data_raises_data_error(x, t, message):
    with pytest.raises(DataError, match=message):
        PCMCI().discover(_data(x, t), CausalSettings(max_lag=3))


def test_constant_after_the_lag_cut_is_a_data_error():
    x = np.random.default_rng(0).standard_normal((200, 2))
    x[6:, 1] = 1.0  # varies only in the first 2 * max_lag samples
    with pytest.raises(DataError, match="constant once"):
        PCMCI().discover(_data(x), CausalSettings(max_lag=3))


def test_trials_pool_their_rows():
    # 3 variables, lags 1..3: 2 * 3 * 3 + 2 = 20 rows; a 15-sample trial gives 15 - 6 = 9.
    x = np.random.default_rng(0).standard_normal((15, 3))
    with pytest.raises(DataError, match="needs at least 20 rows"):
        PCMCI().discover(Dataset.from_arrays([x, x[::-1]]), CausalSettings(max_lag=3))
    graph = PCMCI().discover(Dataset.from_arrays([x, x[::-1], x + 1]), CausalSettings(max_lag=3))
    assert graph.extra["n_rows"] == 27


def test_tau_min_beyond_max_lag_is_a_usage_error():
    x = np.random.default_rng(0).standard_normal((200, 2))
    with pytest.raises(UsageError, match="tau_min"):
        PCMCI(PCMCIParams(tau_min=4)).discover(_data(x), CausalSettings(max_lag=3))


@pytest.mark.parametrize(
    ("field", "value"),
    [("ci_test", "gpdc"), ("pc_alpha", 0.0), ("pc_alpha", 1.5), ("max_conds_dim", -1),
     ("max_combinations", 0), ("tau_min", 0), ("knn", 0), ("n_permutations", 0),
     ("max_combinations", True)],
)
def test_bad_params_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PCMCIParams(**{field: value})
    with pytest.raises(UsageError, match=field):
        PCMCIParams.parse([f"{field}={value}"])
