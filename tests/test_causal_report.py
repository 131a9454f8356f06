"""The report's causal section (``dynid.report.causal``): the node-link graph (one line per
link, arrowheads only on directed links, width by strength, lags as labels), the time-resolved
strengths and change points of ``--method dynamic``, cluster graphs, and no raw JSON."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np

from dynid.causal import discover
from dynid.data.dataset import Dataset
from dynid.jsonable import jsonable
from dynid.report.causal import causal_section, drawn_links
from dynid.report.sections import RESULT_RENDERERS

SVG = "{http://www.w3.org/2000/svg}"


def edge(source, target, lag, strength, p, significant=True, link=None):
    e = {"source": source, "target": target, "lag": lag, "strength": strength, "p_value": p,
         "significant": significant}
    return e | ({"link": link} if link else {})


DOC = {
    "kind": "causal",
    "variables": ["a", "b", "c", "d"],
    "method": "pcmciplus",
    "max_lag": 2,
    "alpha": 0.05,
    "edges": [
        edge("a", "b", 1, 0.6, 1e-8),
        edge("a", "b", 2, -0.3, 1e-3),
        edge("b", "a", 1, 0.2, 0.01),  # both ways: two arcs
        edge("b", "c", 0, 0.5, 1e-6, link="o-o"),
        edge("c", "b", 0, 0.5, 1e-6, link="o-o"),
        edge("c", "d", 0, 0.3, 1e-4, link="-->"),
        edge("d", "c", 0, 0.3, 1e-4, significant=False, link="<--"),
        edge("d", "a", 1, 0.01, 0.8, significant=False),
    ],
    "score_matrix": [[0, 8, 0, 0], [2, 0, 6, 0], [0, 6, 0, 4], [0.1, 0, 0, 0]],
    "adjacency": [[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 0, 0]],
    "val_matrix": np.zeros((4, 4, 3)).tolist(),
    "ci_test": "parcorr",
}


def svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", page, flags=re.S)]


def test_registered_for_causal_results():
    assert RESULT_RENDERERS["causal"][1] is causal_section


def test_node_link_graph_one_line_per_link_arrows_only_on_directed_ones():
    graph = svgs(causal_section(DOC))[0]
    assert graph.find(f"{SVG}title").text == "Significant links between variables"
    assert len(graph.findall(f"{SVG}circle")) == 4
    paths = {p.find(f"{SVG}title").text: p for p in graph.iter(f"{SVG}path")
             if p.find(f"{SVG}title") is not None}
    # a -> b (lags 1, 2), b -> a, b o-o c once, c -> d; no line for non-significant edges.
    assert sorted(paths) == sorted([
        "a -> b, lag 1,2, |strength| 0.6", "b -> a, lag 1, |strength| 0.2",
        "b o-o c, lag 0, |strength| 0.5", "c -> d, lag 0, |strength| 0.3"])
    assert "marker-end" not in paths["b o-o c, lag 0, |strength| 0.5"].attrib
    assert all("marker-end" in p.attrib for t, p in paths.items() if " -> " in t)
    widths = {t.split(",")[0]: float(p.get("stroke-width")) for t, p in paths.items()}
    assert widths["a -> b"] == 6.0 and widths["b -> a"] < widths["c -> d"] < widths["b o-o c"]
    # Both ways linked: the two arcs bend apart (different control points).
    control = {t.split(",")[0]: p.get("d").split(" Q ")[1].split(" ")[:2] for t, p in paths.items()}
    assert control["a -> b"] != control["b -> a"]
    labels = [t.text for t in graph.iter(f"{SVG}text")]
    assert "1,2" in labels and "0" in labels


def test_drawn_links_group_lags_and_keep_undirected_once():
    links = drawn_links(DOC)
    assert [(link.source, link.target, link.lags, link.directed) for link in links] == [
        (0, 1, (1, 2), True), (1, 0, (1,), True), (1, 2, (0,), False), (2, 3, (0,), True)]


def test_edge_table_says_the_link_and_no_raw_json_is_dumped():
    page = causal_section(DOC)
    assert "o-o" in page and page.count("<td>o-o</td>") == 1
    assert "val_matrix (4x4x3)" in page and "[[" not in page and "0.0, 0.0" not in page
    assert "parcorr" in page


def test_dynamic_strengths_and_change_points_are_drawn():
    rng = np.random.default_rng(0)
    n = 800
    x = np.zeros((n, 2))
    e = rng.standard_normal((n, 2))
    for t in range(1, n):
        coupling = 0.8 if t < n // 2 else 0.0  # x0 -> x1 switches off half way
        x[t, 0] = 0.5 * x[t - 1, 0] + e[t, 0]
        x[t, 1] = 0.3 * x[t - 1, 1] + coupling * x[t - 1, 0] + e[t, 1]
    graph = discover(Dataset.from_arrays(x), "dynamic", max_lag=1, seed=0)
    doc = {"kind": "causal", **jsonable(graph.to_json_dict())}
    changes = [c for c in doc["dynamic"]["change_points"] if (c["source"], c["target"]) == ("x0", "x1")]
    assert changes, "the switch-off should be a change point"
    page = causal_section(doc)
    plot = [s for s in svgs(page) if s.find(f"{SVG}title").text == "Link strength over time"]
    assert len(plot) == 1
    assert "x0 \u2192 x1" in [t.text for t in plot[0].iter(f"{SVG}text")]
    dotted = [line for line in plot[0].iter(f"{SVG}line") if line.get("stroke-dasharray") == "2 3"]
    assert len(dotted) >= len(changes)
    assert "before" in page and "after" in page  # the change-point table
    assert '"strength":' not in page and "[[" not in page


def test_dynamic_without_the_series_says_where_it_is():
    doc = {**DOC, "dynamic": {"change_points": [], "n_times": 500}}
    page = causal_section(doc)
    assert "--dynamic-output" in page and "No change points" in page


def test_cluster_graph_nodes_are_clusters_with_their_members():
    doc = {**DOC, "variables": ["A", "B", "C", "D"],
           "edges": [edge("A", "B", 1, 0.4, 1e-5)],
           "adjacency": [[0, 1, 0, 0], [0] * 4, [0] * 4, [0] * 4],
           "clusters": {"A": ["x1", "x2"], "B": ["x3"], "C": ["x4"], "D": ["x5"]}}
    page = causal_section(doc)
    graph = svgs(page)[0]
    assert graph.find(f"{SVG}title").text == "Significant links between clusters"
    assert "x1, x2" in page


def test_edge_table_without_p_values_is_ordered_and_titled_by_score():
    # crosspred-like: no p-values; the pairs' scores order b->c, c->a, a->b, whatever the
    # strengths or the edges' order; auto's result names the method it routed to.
    doc = {"kind": "causal", "variables": ["a", "b", "c"], "method": "crosspred", "max_lag": 1,
           "alpha": 0.05,
           "edges": [edge("a", "b", 0, 0.9, None), edge("c", "a", 0, 0.2, None),
                     edge("b", "c", 0, 0.5, None), edge("b", "a", 0, 0.95, None, significant=False)],
           "score_matrix": [[0, 1.1, 0], [0.7, 0, 2.5], [1.8, 0, 0]],
           "adjacency": [[0, 1, 0], [0, 0, 1], [1, 0, 0]]}
    for page, method in ((causal_section(doc), "crosspred"),
                         (causal_section(doc | {"method": "auto", "auto": {"method": "consensus"}}),
                          "consensus")):
        assert "by p-value" not in page and "Significant edges (by score)" in page
        assert f"{method} gives no p-values" in page and ">score</th>" in page
        table_part = page[page.index("Significant edges (by score)"):]
        rows = re.findall(r"<tr><td>(\w)</td><td>-&gt;</td><td>(\w)</td>", table_part)
        assert rows == [("b", "c"), ("c", "a"), ("a", "b")]


def test_edge_table_with_p_values_stays_ordered_by_them():
    page = causal_section(DOC)
    assert "Significant edges (by p-value)" in page and "by score" not in page
    table_part = page[page.index("Significant edges (by p-value)"):]
    assert table_part.index("1e-08") < table_part.index("1e-06") < table_part.index("0.001")
