"""Redundant columns (exact or near linear copies of others at the same time step): Granger
warns, names them, reports the tests it cannot separate as p = 1 / strength 0, and still finds
the other variables' true links (issue 16)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid.causal import granger
from dynid.causal.common import redundant_columns
from dynid.data.dataset import Dataset

from conftest import var_process, write_csv

D = 5
# The sparse VAR(2) of test_causal_granger: x0 -> x1, x0 -> x3, x4 -> x2 at lag 1; x1 -> x2,
# x3 -> x4 at lag 2. x0 has no parents.
A1 = np.diag([0.5, 0.4, 0.3, 0.5, 0.4])
A2 = np.diag([-0.2, 0.0, 0.0, -0.1, 0.0])
A1[1, 0], A1[3, 0], A1[2, 4], A2[2, 1], A2[4, 3] = 0.4, -0.35, 0.3, 0.4, 0.4
TRUE_EDGES = {("x0", "x1", 1), ("x0", "x3", 1), ("x4", "x2", 1), ("x1", "x2", 2), ("x3", "x4", 2)}
NAMES = ("x0", "x1", "x2", "x3", "x4", "copy")


@pytest.fixture(scope="module")
def series() -> np.ndarray:
    noise = np.random.default_rng(1).standard_normal((2200, D))
    return var_process([A1, A2], noise)[200:]


def near_copy(x: np.ndarray, correlation: float, seed: int) -> np.ndarray:
    """A column with the given correlation to ``x``: x standardised, mixed with fresh noise."""
    z = (x - x.mean()) / x.std()
    e = np.random.default_rng(seed).standard_normal(x.size)
    e -= z * (e @ z) / (z @ z)  # orthogonal to z, so the correlation is exact up to rounding
    e /= e.std()
    return correlation * z + np.sqrt(1.0 - correlation**2) * e


def test_redundant_columns_finds_copies_and_combinations():
    a = np.random.default_rng(0).standard_normal((1000, 4))
    x = np.column_stack([a, 3.0 * a[:, 1] + 1.0, a[:, 1] - 2.0 * a[:, 2]])
    found = redundant_columns(x)
    assert [(r.column, r.copies) for r in found] == [(4, (1,)), (5, (1, 2))]
    assert all(r.r_squared == pytest.approx(1.0, abs=1e-12) for r in found)
    near = redundant_columns(np.column_stack([a, near_copy(a[:, 0], 0.9999, 1)]))
    assert [(r.column, r.copies) for r in near] == [(4, (0,))]
    assert near[0].r_squared == pytest.approx(0.9999**2, abs=1e-5)
    # Correlated but not redundant (R^2 = 0.98 < 0.999): nothing found.
    assert redundant_columns(np.column_stack([a, near_copy(a[:, 0], 0.99, 2)])) == []
    assert redundant_columns(a) == []


def check_duplicated(graph, r_squared: float) -> None:
    """What every run with 'copy' a (near) copy of 'x0' must give."""
    assert graph.extra["redundant"] == [
        {"column": "copy", "copies": ["x0"], "r_squared": pytest.approx(r_squared, abs=1e-5)}
    ]
    (line,) = graph.extra["warnings"]
    assert "'copy'" in line and "'x0'" in line and "p = 1, strength 0" in line
    found = {(e.source, e.target, e.lag) for e in graph.significant_edges}
    assert found == TRUE_EDGES
    for e in graph.edges:
        if e.source == "copy" or (e.source, e.target) == ("x0", "copy"):
            assert (e.p_value, e.strength, e.significant) == (1.0, 0.0, False)
    assert np.all(graph.score_matrix[5] == 0) and graph.score_matrix[0, 5] == 0
    assert np.all(np.isnan(graph.extra["t_statistic"][5]))
    assert np.all(graph.extra["coefficient"][5] == 0)
    joint = graph.extra["joint"]
    assert joint["p_value"][5, :5].tolist() == [1.0] * 5 and not joint["significant"][5].any()


def test_exact_duplicate_gives_the_fit_without_it(series: np.ndarray):
    x = np.column_stack([series, series[:, 0]])
    with pytest.warns(UserWarning, match="'copy' is an exact linear copy of 'x0'"):
        graph = granger(Dataset.from_arrays(x, variables=list(NAMES)), max_lag=3)
    check_duplicated(graph, 1.0)
    # The regressors are those of the five-variable fit, so its tests are the same ones.
    alone = granger(Dataset.from_arrays(series), max_lag=3)
    np.testing.assert_allclose(graph.extra["t_statistic"][:5, :5], alone.extra["t_statistic"],
                               rtol=1e-9)
    np.testing.assert_allclose(graph.extra["joint"]["f_statistic"][:5, :5],
                               alone.extra["joint"]["f_statistic"], rtol=1e-9, equal_nan=True)
    # The copy as a target is x0 as a target: no parents found, the same statistics.
    np.testing.assert_allclose(graph.extra["t_statistic"][1:5, 5],
                               alone.extra["t_statistic"][1:5, 0], rtol=1e-9)


def test_near_duplicate_is_named_and_the_rest_still_found(series: np.ndarray):
    x = np.column_stack([series, near_copy(series[:, 0], 0.9999, 7)])
    with pytest.warns(UserWarning, match="'copy' is a near linear copy of 'x0'"):
        graph = granger(Dataset.from_arrays(x, variables=list(NAMES)), max_lag=3)
    check_duplicated(graph, 0.9999**2)


@pytest.mark.parametrize("kind", ["exact", "near"])
def test_cli_warns_in_one_line_and_exits_0(cli, tmp_path, series: np.ndarray, kind: str):
    copy = series[:, 0] if kind == "exact" else near_copy(series[:, 0], 0.9999, 7)
    path = write_csv(tmp_path / "dup.csv", np.column_stack([series, copy]), list(NAMES), dt=0.1)
    result = cli("discover-causal", path, "--method", "granger", "--max-lag", "3", "--json")
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stderr.decode().strip().splitlines()
    warned = [line for line in lines if line.startswith("dynid: warning:")]
    assert len(warned) == 1 and "'copy'" in warned[0] and "'x0'" in warned[0], lines
    document = json.loads(result.stdout)
    assert len(document["warnings"]) == 1 and "'copy'" in document["warnings"][0]
    found = {(e["source"], e["target"], e["lag"]) for e in document["edges"] if e["significant"]}
    assert found == TRUE_EDGES


def test_cluster_tests_refuse_a_redundant_column_in_one_line(cli, tmp_path, series: np.ndarray):
    path = write_csv(tmp_path / "dup.csv", np.column_stack([series, series[:, 0]]), list(NAMES),
                     dt=0.1)
    result = cli("discover-causal", path, "--max-lag", "2", "--clusters", "A=x0,x1;B=x2,x3,x4,copy")
    assert result.returncode == 3, result.stderr.decode()
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynid: error:"), lines
    assert "'copy' is an exact linear copy of 'x0'" in lines[0] and "drop it" in lines[0]


def test_dynamic_warns_once_not_once_per_window(cli, tmp_path, series: np.ndarray):
    x = np.column_stack([series[:1000], series[:1000, 0]])
    path = write_csv(tmp_path / "dup.csv", x, list(NAMES), dt=0.1)
    result = cli("discover-causal", path, "--method", "dynamic", "--max-lag", "2", "--json")
    assert result.returncode == 0, result.stderr.decode()
    warned = [line for line in result.stderr.decode().splitlines() if "warning" in line]
    assert len(warned) == 1 and "'copy'" in warned[0], warned
