"""A column its own past predicts exactly (a clean sinusoid sampled on a grid is
``x_t = 2 cos(w) x_{t-1} - x_{t-2}``) makes a lagged design rank-deficient. Every lag-based
method warns and names it, reports the links it cannot test as p = 1 / strength 0, and still
finds the sinusoid's true link, at its true lag (issue 16)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid.causal import granger
from dynid.causal.common import self_predicted_columns
from dynid.data.dataset import Dataset

from conftest import write_csv

NAMES = ["u", "y", "z"]
TRUE_EDGE = ("u", "y", 1)


@pytest.fixture(scope="module")
def driven() -> np.ndarray:
    """(1000, 3): u a clean sinusoid (period 25 samples), y_t = 0.8 y_{t-1} + 0.5 u_{t-1} +
    0.3 e_t, z an independent AR(1)."""
    n = 1000
    u = np.sin(2.0 * np.pi * np.arange(n) / 25.0)
    e = np.random.default_rng(4).standard_normal((n, 2))
    y, z = np.zeros(n), np.zeros(n)
    for t in range(1, n):
        y[t] = 0.8 * y[t - 1] + 0.5 * u[t - 1] + 0.3 * e[t, 0]
        z[t] = 0.6 * z[t - 1] + e[t, 1]
    return np.column_stack([u, y, z])


def test_self_predicted_columns_finds_each_recurrence_order(driven: np.ndarray):
    t = np.arange(400.0)
    two_tones = np.sin(0.3 * t) + 0.5 * np.cos(0.71 * t)  # order 4
    decay = 3.0 * 0.9**t[:200]  # order 1
    x = np.column_stack([driven[:400, 1], 2.0 + np.sin(0.3 * t), two_tones])

    def found(data: np.ndarray, max_lag: int) -> list[tuple[int, int]]:
        return [(item.column, item.order)
                for item in self_predicted_columns(Dataset.from_arrays(data), max_lag)]

    assert found(x, 5) == [(1, 2), (2, 4)]  # the offset is the intercept's
    assert found(x, 3) == [(1, 2)]  # four lags are needed for two tones
    assert found(x, 1) == []
    assert found(np.column_stack([decay, driven[:200, 2]]), 2) == [(0, 1)]
    # Measurement noise of 1e-6 leaves a residual: a series to test, not a recurrence.
    noisy = x[:, 1] + 1e-6 * np.random.default_rng(0).standard_normal(400)
    assert found(np.column_stack([x[:, 0], noisy]), 5) == []


def test_granger_finds_the_driver_and_marks_what_it_cannot_test(driven: np.ndarray):
    with pytest.warns(UserWarning, match="'u' is exactly predicted by its own last 2 values"):
        graph = granger(Dataset.from_arrays(driven, variables=NAMES), max_lag=5)
    found = {(e.source, e.target, e.lag) for e in graph.edges if e.significant}
    assert found == {TRUE_EDGE}
    extra = graph.extra
    assert extra["self_predicted"] == [{"column": "u", "order": 2}]
    assert len(extra["warnings"]) == 1 and "'u'" in extra["warnings"][0]
    # The driver's coefficient at its true lag, within 4 standard errors (se = coef / t).
    coef, t = extra["coefficient"][0, 1, 0], extra["t_statistic"][0, 1, 0]
    assert abs(coef - 0.5) < 4.0 * abs(coef / t)
    assert extra["summary"]["order"][0, 1] == 1
    untested = [e for e in graph.edges if e.target == "u" or (e.source == "u" and e.lag > 2)]
    assert len(untested) == 2 * 5 + 2 * 3
    assert all(e.p_value == 1.0 and e.strength == 0.0 for e in untested)
    assert np.isnan(extra["t_statistic"][1:, 0]).all()
    assert np.isnan(extra["t_statistic"][0, 1:, 2:]).all()
    assert (extra["joint"]["p_value"][1:, 0] == 1.0).all()


@pytest.mark.parametrize("method", ["granger", "pcmci", "pcmciplus", "dynamic", "te"])
def test_every_lagged_method_warns_once_and_finds_the_driver(
    cli, tmp_path, driven: np.ndarray, method: str
):
    path = write_csv(tmp_path / "driven.csv", driven, NAMES, dt=0.1)
    result = cli("discover-causal", path, "--method", method, "--max-lag", "3", "--seed", "1",
                 "--json")
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynid: warning:"), lines
    assert "'u' is exactly predicted by its own last 2 values" in lines[0]
    document = json.loads(result.stdout)
    assert len(document["warnings"]) == 1 and "'u'" in document["warnings"][0]
    edges = document["edges"]
    significant = {(e["source"], e["target"], e["lag"]) for e in edges if e["significant"]}
    assert TRUE_EDGE in significant
    # Only the true lag (and, for transfer entropy, which does not condition on the source's
    # past, the next one, as for any autocorrelated source).
    allowed = {TRUE_EDGE, ("u", "y", 2)} if method == "te" else {TRUE_EDGE}
    assert significant <= allowed, significant
    untested = [e for e in edges if e["target"] == "u" or (e["source"] == "u" and e["lag"] > 2)]
    assert untested and all(e["p_value"] == 1.0 and e["strength"] == 0.0 for e in untested)


def test_crosspred_orients_the_sinusoid_as_the_driver(cli, tmp_path, driven: np.ndarray):
    # No lagged design: cross-prediction by ridge regression needs no warning here.
    path = write_csv(tmp_path / "driven.csv", driven, NAMES, dt=0.1)
    result = cli("discover-causal", path, "--method", "crosspred", "--json")
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr.decode()
    significant = {(e["source"], e["target"]) for e in json.loads(result.stdout)["edges"]
                   if e["significant"]}
    assert significant == {("u", "y")}


def test_neural_zeroes_the_links_it_cannot_test(driven: np.ndarray):
    pytest.importorskip("torch")
    from dynid.causal import discover

    data = Dataset.from_arrays(driven, variables=NAMES)
    with pytest.warns(UserWarning, match="'u' is exactly predicted by its own last 2 values"):
        graph = discover(data, "neural", ["lam=0.02", "max_iter=100"], max_lag=3, seed=0)
    strongest = max(graph.edges, key=lambda e: e.strength)
    assert (strongest.source, strongest.target, strongest.lag) == TRUE_EDGE
    untested = [e for e in graph.edges if e.target == "u" or (e.source == "u" and e.lag > 2)]
    assert untested and all(e.strength == 0.0 and not e.significant for e in untested)
    assert (graph.score_matrix[:, 0] == 0.0).all()
    assert len(graph.extra["warnings"]) == 1


@pytest.mark.parametrize("method", ["pcmci", "pcmciplus"])
def test_parcorr_methods_use_their_tests_bound_for_a_rounded_sinusoid(
    cli, tmp_path, driven: np.ndarray, method: str
):
    # Written with 6 significant digits, u's own past leaves a residual of ~9e-13 of its
    # variance: ParCorr takes that for an exact fit (bound 1e-12), and so must the detection,
    # or PC1 drops u's lags one after another and y -> u shows at every lag.
    rounded = np.vectorize(lambda v: float(f"{v:.6g}"))(driven)
    path = write_csv(tmp_path / "rounded.csv", rounded, NAMES, dt=0.1)
    result = cli("discover-causal", path, "--method", method, "--max-lag", "3", "--json")
    assert result.returncode == 0, result.stderr.decode()
    assert "'u' is exactly predicted by its own last 2 values" in result.stderr.decode()
    significant = {(e["source"], e["target"], e["lag"])
                   for e in json.loads(result.stdout)["edges"] if e["significant"]}
    assert significant == {TRUE_EDGE}
