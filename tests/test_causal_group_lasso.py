"""Group-lasso VAR Granger (``--method granger -p penalty=group-lasso``): recovery with many
variables and few samples where least squares cannot test, the solver's optimality conditions,
unstandardised coefficients, options, and the graph it writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid.causal import discover, granger
from dynid.causal.granger import GrangerParams
from dynid.causal.group_lasso import group_lasso_var
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.metrics.causal import auroc

from conftest import var_process

D, T = 30, 150


def sparse_var1(seed: int, d: int = D, n: int = T, burn: int = 200):
    """x(t) = A x(t-1) + e(t), e ~ N(0, I): a self-loop per variable and one cross link into each
    (|coefficient| 0.3-0.5, random sign). Returns the series (n, d) and the truth [source][target].
    """
    rng = np.random.default_rng(seed)
    a = np.diag(rng.uniform(0.2, 0.5, d))
    truth = np.zeros((d, d), dtype=bool)
    for target in range(d):
        source = rng.choice([j for j in range(d) if j != target])
        a[target, source] = rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 0.5)
        truth[source, target] = True
    radius = np.max(np.abs(np.linalg.eigvals(a)))
    a *= min(1.0, 0.9 / radius)  # keep it stationary
    noise = rng.standard_normal((n + burn, d))
    return var_process([a], noise)[burn:], truth, a


@pytest.fixture(scope="module")
def few_samples():
    x, truth, _ = sparse_var1(0)
    return Dataset.from_arrays(x), truth


@pytest.fixture(scope="module")
def graph(few_samples):
    data, _ = few_samples
    return discover(data, "granger", ["penalty=group-lasso"], max_lag=2)


def test_least_squares_cannot_test_this_many_variables(few_samples):
    data, _ = few_samples
    # 30 variables x 5 lags = 151 coefficients per equation from 145 rows.
    with pytest.raises(DataError, match="needs at least"):
        granger(data, max_lag=5)


def test_recovers_most_links_with_few_samples(few_samples, graph):
    _, truth = few_samples
    selected = graph.adjacency.astype(bool)
    true_positives = np.sum(selected & truth)
    assert true_positives / selected.sum() > 0.7  # precision
    assert true_positives / truth.sum() > 0.6  # recall: "most" of the 30 links
    assert auroc(graph.score_matrix, truth) > 0.95
    # Least squares with 2 lags (61 coefficients from 148 rows) finds fewer at the same alpha.
    ols = granger(Dataset.from_arrays(few_samples[0].trials[0].x), max_lag=2)
    assert np.sum(ols.adjacency.astype(bool) & truth) < true_positives


def test_graph_contents(graph):
    doc = json.loads(json.dumps(graph.to_json_dict(), allow_nan=False))
    assert doc["method"] == "granger" and doc["penalty"] == "group-lasso"
    assert doc["p_values"].startswith("not available")
    assert all(edge["p_value"] is None for edge in doc["edges"])
    assert len(graph.edges) == D * (D - 1) * 2
    lam = np.array(doc["lambda"])
    assert lam.shape == (D,) and np.all(lam > 0)
    assert np.array(doc["path"]["cv_error"]).shape == np.array(doc["path"]["lambda"]).shape
    by_pair: dict[tuple[str, str], list] = {}
    for edge in graph.edges:
        by_pair.setdefault((edge.source, edge.target), []).append(edge)
    names = graph.variables
    for (source, target), edges in by_pair.items():
        s, t = names.index(source), names.index(target)
        # A group enters with all its lags: one significance and one strength per pair.
        assert {e.significant for e in edges} == {bool(graph.adjacency[s, t])}
        assert len({e.strength for e in edges}) == 1
        assert (edges[0].strength > 0) == bool(graph.adjacency[s, t])
    assert np.all(np.diag(graph.score_matrix) == 0) and np.all(np.diag(graph.adjacency) == 0)
    # Selected pairs rank above most others.
    assert graph.score_matrix[graph.adjacency == 1].min() > np.median(graph.score_matrix)


def test_solution_satisfies_the_optimality_conditions():
    x, _, _ = sparse_var1(1, d=8, n=200)
    lags, lam = 2, 0.05
    fit = group_lasso_var([x], lags, lam, tol=1e-10, max_iter=100_000)
    # Rebuild the standardised problem and check the KKT conditions of every cross group:
    # active: gradient = -lam sqrt(L) b/||b||; zero: ||gradient|| <= lam sqrt(L).
    z = np.hstack([x[lags - k : len(x) - k] for k in range(1, lags + 1)])
    y = x[lags:]
    z = (z - z.mean(0)) / z.std(0)
    y = (y - y.mean(0)) / y.std(0)
    b = fit.standardised.transpose(2, 0, 1).reshape(lags * 8, 8)  # rows (lag-1)*d + source
    gradient = (z.T @ (z @ b - y) / len(y)).reshape(lags, 8, 8)
    groups = b.reshape(lags, 8, 8)
    for s in range(8):
        for t in range(8):
            g, coef = gradient[:, s, t], groups[:, s, t]
            if s == t:
                np.testing.assert_allclose(g, 0, atol=1e-6)  # unpenalised self-lags
            elif np.linalg.norm(coef) > 0:
                expected = -lam * np.sqrt(lags) * coef / np.linalg.norm(coef)
                np.testing.assert_allclose(g, expected, atol=1e-6)
            else:
                assert np.linalg.norm(g) <= lam * np.sqrt(lags) + 1e-8


def test_tiny_penalty_gives_the_least_squares_coefficients():
    x, _, a = sparse_var1(2, d=5, n=2000)
    data = Dataset.from_arrays(x)
    fit = group_lasso_var([x], 1, 1e-7, tol=1e-12, max_iter=100_000)
    ols = granger(data, max_lag=1)
    np.testing.assert_allclose(fit.coefficient, ols.extra["coefficient"], rtol=1e-4, atol=1e-6)
    # Coefficients are in data units: the VAR's matrix, transposed to [source][target].
    np.testing.assert_allclose(fit.coefficient[:, :, 0], a.T, atol=0.06)
    predicted = x[:-1] @ fit.coefficient[:, :, 0] + fit.intercept
    residual = x[1:] - predicted
    assert np.all(np.abs(residual.mean(axis=0)) < 1e-8)


def test_given_lambda_and_multiple_trials():
    x, truth, _ = sparse_var1(3, d=10, n=600)
    trials = Dataset.from_arrays([x[:200], x[200:400], x[400:]])
    strict = discover(trials, "granger", ["penalty=group-lasso", "lam=0.5"], max_lag=1)
    loose = discover(trials, "granger", ["penalty=group-lasso", "lam=0.02"], max_lag=1)
    assert strict.extra["lambda_rule"] == "given" and "path" not in strict.extra
    assert strict.extra["n_rows"] == 600 - 3  # no lag reaches across a trial boundary
    assert strict.adjacency.sum() < loose.adjacency.sum()
    assert np.all(strict.adjacency <= loose.adjacency)
    assert auroc(loose.score_matrix, truth) > 0.95
    huge = discover(trials, "granger", ["penalty=group-lasso", "lam=100"], max_lag=1)
    assert huge.adjacency.sum() == 0


def test_options():
    assert GrangerParams().penalty == "none"
    assert GrangerParams.parse(["penalty=group-lasso", "lam=0.1"]).lam == 0.1
    with pytest.raises(UsageError, match="only used with penalty=group-lasso"):
        GrangerParams.parse(["lam=0.1"])
    with pytest.raises(UsageError, match="lam must be"):
        GrangerParams.parse(["penalty=group-lasso", "lam=0"])
    with pytest.raises(UsageError, match="expected one of none, group-lasso"):
        GrangerParams.parse(["penalty=lasso"])


def test_data_errors():
    short = Dataset.from_arrays(np.random.default_rng(0).standard_normal((8, 3)))
    with pytest.raises(DataError, match="group-lasso"):
        discover(short, "granger", ["penalty=group-lasso"], max_lag=1)
    x = np.random.default_rng(0).standard_normal((100, 3))
    x[:, 1] = 2.0
    with pytest.raises(DataError, match="'x1' is constant"):
        discover(Dataset.from_arrays(x), "granger", ["penalty=group-lasso"], max_lag=1)
