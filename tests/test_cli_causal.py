"""``dynid discover-causal`` end to end (in process): the JSON contract, --clusters,
--method dynamic with --dynamic-output, and the exit codes bad input gets."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from dynid.causal.graph import CONTRACT_KEYS

from conftest import var_process, write_csv


def var_series(n: int, seed: int = 0) -> np.ndarray:
    """(n, 4) VAR(1) with links a -> b -> c; d independent."""
    coefs = np.diag([0.5, 0.4, 0.4, 0.5])
    coefs[1, 0], coefs[2, 1] = 0.5, 0.5
    return var_process([coefs], np.random.default_rng(seed).standard_normal((n, 4)))


@pytest.fixture(scope="module")
def var_csv(tmp_path_factory):
    return write_csv(tmp_path_factory.mktemp("causal") / "var.csv", var_series(800), list("abcd"), dt=0.1)


@pytest.fixture(scope="module")
def switch_csv(tmp_path_factory):
    """x drives y from the middle of the recording on (1000 samples, dt = 0.1)."""
    n = 1000
    noise = np.random.default_rng(2).standard_normal((n, 2))
    x = np.zeros((n, 2))
    for t in range(1, n):
        x[t, 0] = 0.5 * x[t - 1, 0] + noise[t, 0]
        x[t, 1] = 0.5 * x[t - 1, 1] + (0.8 if t >= n // 2 else 0.0) * x[t - 1, 0] + noise[t, 1]
    return write_csv(tmp_path_factory.mktemp("causal") / "switch.csv", x, ["x", "y"], dt=0.1)


def json_of(result) -> dict:
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def one_error_line(result, code: int) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynid: error:"), lines
    assert result.stdout == b""
    return lines[0]


def test_json_follows_the_contract(cli, var_csv):
    document = json_of(cli("discover-causal", var_csv, "--method", "granger", "--max-lag", "2", "--json"))
    assert list(document)[: 1 + len(CONTRACT_KEYS)] == ["kind", *CONTRACT_KEYS]
    assert document["kind"] == "causal"
    assert document["variables"] == list("abcd") and document["method"] == "granger"
    assert np.array(document["score_matrix"]).shape == (4, 4)
    assert len(document["edges"]) == 4 * 3 * 2
    assert set(document["edges"][0]) == {"source", "target", "lag", "strength", "p_value", "significant"}
    assert np.array(document["adjacency"]).tolist() == [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


def test_clusters_give_a_graph_over_cluster_names(cli, var_csv):
    document = json_of(
        cli("discover-causal", var_csv, "--max-lag", "2", "--json", "--clusters", "AB=a,b; C=c")
    )
    assert document["variables"] == ["AB", "C"]
    assert document["adjacency"] == [[0, 1], [0, 0]]
    assert document["clusters"] == {"AB": ["a", "b"], "C": ["c"]}
    assert {(e["source"], e["target"]) for e in document["edges"]} == {("AB", "C"), ("C", "AB")}
    text = cli("discover-causal", var_csv, "--clusters", "AB=a,b;C=c", "--format", "dot")
    assert text.returncode == 0 and 'label="AB"' in text.stdout.decode()


@pytest.mark.parametrize(
    "clusters, code, culprit",
    [
        ("A=a,nope;B=c", 3, "'nope'"),
        ("A a;B=c", 2, "'A a'"),
        ("A=a,b;B=b", 2, "'b'"),
    ],
)
def test_bad_clusters(cli, var_csv, clusters, code, culprit):
    line = one_error_line(cli("discover-causal", var_csv, "--clusters", clusters), code)
    assert culprit in line


def test_clusters_only_with_granger(cli, var_csv):
    line = one_error_line(cli("discover-causal", var_csv, "--method", "dynamic", "--clusters", "A=a;B=b"), 2)
    assert "--clusters is supported with: granger" in line


def test_dynamic_writes_hdf5(cli, switch_csv, tmp_path):
    target = tmp_path / "strength.h5"
    result = cli("discover-causal", switch_csv, "--method", "dynamic", "--max-lag", "2", "--seed", "1",
                 "-p", "estimator=perturbation", "--dynamic-output", target, "--json")
    document = json_of(result)
    assert document["method"] == "dynamic" and document["variables"] == ["x", "y"]
    with h5py.File(target, "r") as handle:
        times, strength = handle["times"][()], handle["strength"][()]
        assert list(handle["strength"].attrs["variables"]) == ["x", "y"]
        changes = json.loads(handle.attrs["change_points"])
    assert strength.shape == (times.size, 2, 2)
    assert times.min() >= 0 and times.max() <= 99.9  # data time units (dt = 0.1)
    switch = [c for c in changes if (c["source"], c["target"]) == ("x", "y")]
    assert len(switch) == 1 and abs(switch[0]["time"] - 50.0) < 10.0
    assert changes == document["dynamic"]["change_points"]
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, nothing left behind


def test_dynamic_json_output_and_small_series_inline(cli, switch_csv, tmp_path):
    target = tmp_path / "strength.json"
    result = cli("discover-causal", switch_csv, "--method", "dynamic", "--max-lag", "2",
                 "--dynamic-output", target, "--json")
    inline = json_of(result)["dynamic"]
    written = json.loads(target.read_text())
    assert written["variables"] == ["x", "y"]
    assert np.array(written["strength"]).shape == (len(written["times"]), 2, 2)
    assert np.allclose(inline["strength"], written["strength"])  # small: also in the JSON


def test_large_dynamic_series_points_to_dynamic_output(cli, var_csv):
    result = cli("discover-causal", var_csv, "--method", "dynamic", "--max-lag", "1", "--json",
                 "-p", "estimator=perturbation", "-p", "step=1")
    dynamic = json_of(result)["dynamic"]
    assert "strength" not in dynamic and dynamic["n_times"] == 799
    assert "--dynamic-output" in result.stderr.decode()


@pytest.mark.parametrize("args", [["--dynamic-output", "out.h5"], ["--method", "dynamic", "--dynamic-output", "out.txt"]])
def test_bad_dynamic_output(cli, var_csv, tmp_path, args):
    one_error_line(cli("discover-causal", var_csv, *args, cwd=tmp_path), 2)
    assert not list(tmp_path.iterdir())


def bad_data(kind: str) -> np.ndarray:
    x = var_series(300, seed=3)
    if kind == "short":
        return x[:12]
    if kind == "constant":
        x[:, 2] = 4.0
    if kind == "collinear":
        # A delayed copy: its lags are lags of 'a' (columns collinear at one time step only
        # warn since issue 16; tests/test_causal_redundant.py).
        x[1:, 3] = x[:-1, 0]
    return x


@pytest.mark.parametrize("kind, culprit", [("short", "max-lag"), ("constant", "'c'"), ("collinear", "collinear")])
@pytest.mark.parametrize("extra", [[], ["--clusters", "A=a,b;B=c,d"]])
def test_bad_data_exits_3_with_one_line(cli, tmp_path, kind, culprit, extra):
    path = write_csv(tmp_path / f"{kind}.csv", bad_data(kind), list("abcd"), dt=0.1)
    line = one_error_line(cli("discover-causal", path, "--max-lag", "3", *extra), 3)
    assert culprit in line


def test_a_missing_p_value_is_an_empty_field_as_json_writes_null(cli, tmp_path):
    """Methods without p-values (crosspred, sindy, consensus): JSON null, CSV an empty field
    (pandas reads NaN, a spreadsheet a blank cell; not the text "nan"), GraphML no p_value
    value for the edge (GraphML's missing data, not "NaN"); dot carries no p-values."""
    import io
    import xml.etree.ElementTree as ET

    import pandas as pd

    from dynid.systems import simulate

    sim = simulate("lorenz", n=600, seed=1)
    data = write_csv(tmp_path / "lorenz.csv", sim.x, list(sim.variables), t=sim.t)
    for method in ("crosspred", "sindy", "consensus"):
        document = json.loads(cli("discover-causal", data, "--method", method, "--seed", "0", "--json").stdout)
        assert {e["p_value"] for e in document["edges"]} == {None}, method
        result = cli("discover-causal", data, "--method", method, "--seed", "0", "--format", "csv")
        assert result.returncode == 0, result.stderr
        rows = result.stdout.decode().splitlines()
        assert "nan" not in result.stdout.decode().lower(), method
        assert all(row.split(",")[4] == "" for row in rows[1:]), (method, rows[1])
        frame = pd.read_csv(io.StringIO(result.stdout.decode()))
        assert frame["p_value"].isna().all() and len(frame) == len(document["edges"])
    graphml = cli("discover-causal", data, "--method", "crosspred", "--seed", "0", "--format", "graphml").stdout
    assert b"NaN" not in graphml
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    edges = ET.fromstring(graphml).findall("g:graph/g:edge", ns)
    assert edges and all({d.get("key") for d in e.findall("g:data", ns)} == {"lags", "score", "strength"}
                         for e in edges)


def _scored_graph(p_values):
    """Three significant links whose pairs' scores order b->c, c->a, a->b, while |strength|
    orders them a->b, b->c, c->a; ``p_values`` per link (None: a method without p-values)."""
    from dynid.causal.graph import CausalGraph

    links = [("a", "b", 0.9), ("c", "a", 0.2), ("b", "c", 0.5)]
    edges = [{"source": s, "target": t, "lag": 1, "strength": w, "p_value": p, "significant": True}
             for (s, t, w), p in zip(links, p_values)]
    edges.append({"source": "b", "target": "a", "lag": 1, "strength": 0.95, "p_value": None, "significant": False})
    return CausalGraph.from_json_dict({
        "variables": ["a", "b", "c"], "method": "crosspred", "max_lag": 1, "alpha": 0.05, "edges": edges,
        "score_matrix": [[0, 1.1, 0], [0.7, 0, 2.5], [1.8, 0, 0]],
        "adjacency": [[0, 1, 0], [0, 0, 1], [1, 0, 0]],
    })


@pytest.mark.parametrize(
    "p_values, order, title, column",
    [
        ([None, None, None], ["b->c", "c->a", "a->b"], "by score (no p-values)", "score"),
        # Equal p-values: the pair's score decides, as in the HTML report (not |strength|).
        ([1e-3, 1e-3, 1e-3], ["b->c", "c->a", "a->b"], "by p-value, then score", "p (adj.)"),
        ([1e-6, 1e-3, 1e-3], ["a->b", "b->c", "c->a"], "by p-value, then score", "p (adj.)"),
    ],
)
def test_text_table_is_ordered_as_the_report_and_says_by_what(p_values, order, title, column):
    import re

    from dynid import documents
    from dynid.cli.causal_cmd import _table
    from dynid.report.causal import causal_section

    graph = _scored_graph(p_values)
    lines = _table(graph).splitlines()
    assert lines[0].endswith(title) and lines[1].split()[-1] == column.split()[-1]
    assert [line.split()[0] for line in lines[2:]] == order, lines
    if p_values[0] is None:  # the score is shown where the p-value would be
        assert [float(line.split()[-1]) for line in lines[2:]] == [2.5, 1.8, 1.1]
    page = causal_section(documents.tagged(documents.CAUSAL, graph.to_json_dict()))
    table_part = page[page.index("Significant edges ("):]
    report_rows = re.findall(r"<tr><td>(\w)</td><td>-&gt;</td><td>(\w)</td>", table_part)
    assert [f"{s}->{t}" for s, t in report_rows] == order
