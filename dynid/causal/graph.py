"""``CausalGraph``: what every causal-discovery method returns, and its writers (JSON, CSV, DOT,
GraphML). Matrices are indexed ``[source][target]``; lags are in samples."""

from __future__ import annotations

import csv
import io
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Keys the JSON contract fixes; ``extra`` may add others but never replace these.
CONTRACT_KEYS = ("variables", "method", "max_lag", "alpha", "edges", "score_matrix", "adjacency")
# Lag-0 marks of an adjacency without one direction (``Edge.link``).
UNDIRECTED = ("o-o", "x-x")
CSV_HEADER = ("source", "target", "lag", "strength", "p_value", "significant")
# XML 1.0 cannot carry these characters even escaped.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True)
class Edge:
    """One tested link ``source -> target`` at ``lag`` samples.

    ``strength`` is method-specific and signed (its meaning is documented by the method);
    ``p_value`` is the multiplicity-adjusted p-value and ``significant`` is ``p_value <= alpha``.
    ``link``: for lag-0 links of methods that test them (pcmciplus), the mark seen from the
    source: ``-->`` directed source to target, ``<--`` the other way, ``o-o`` adjacent with the
    direction not identifiable, ``x-x`` adjacent with conflicting orientations; None otherwise
    (and then left out of the JSON).
    """

    source: str
    target: str
    lag: int
    strength: float
    p_value: float
    significant: bool
    link: str | None = None

    @property
    def undirected(self) -> bool:
        """A lag-0 adjacency without a direction (``o-o``) or with conflicting ones (``x-x``)."""
        return self.link in UNDIRECTED

    def to_json_dict(self) -> dict[str, Any]:
        doc = {
            "source": self.source,
            "target": self.target,
            "lag": int(self.lag),
            "strength": _json_float(self.strength),
            "p_value": _json_float(self.p_value),
            "significant": bool(self.significant),
        }
        if self.link is not None:
            doc["link"] = self.link
        return doc


@dataclass
class CausalGraph:
    """The result of one causal-discovery run over ``variables`` (d of them).

    ``edges``: every tested (source, target, lag), significant or not. ``score_matrix`` (d, d):
    a summary over lags, larger = more evidence of ``source -> target``, 0 on the diagonal.
    ``adjacency`` (d, d) of 0/1: 1 iff some lag of the pair is significant. ``extra``:
    method-specific results (numpy arrays allowed; they are written as nested lists).
    """

    variables: tuple[str, ...]
    method: str
    max_lag: int
    alpha: float
    edges: list[Edge]
    score_matrix: np.ndarray
    adjacency: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.variables = tuple(self.variables)
        d = len(self.variables)
        self.score_matrix = np.asarray(self.score_matrix, dtype=float)
        self.adjacency = np.asarray(self.adjacency).astype(np.int8)
        for name in ("score_matrix", "adjacency"):
            if getattr(self, name).shape != (d, d):
                raise ValueError(f"{name} must be ({d}, {d}), got {getattr(self, name).shape}")
        clash = set(self.extra) & set(CONTRACT_KEYS)
        if clash:
            raise ValueError(f"extra must not redefine contract keys: {sorted(clash)}")

    @property
    def significant_edges(self) -> list[Edge]:
        return [edge for edge in self.edges if edge.significant]

    def pair_score(self, edge: Edge) -> float:
        """The ``score_matrix`` entry of the edge's (source, target) pair (NaN for a name that
        is no variable)."""
        index = {name: i for i, name in enumerate(self.variables)}
        s, t = index.get(edge.source), index.get(edge.target)
        return math.nan if s is None or t is None else float(self.score_matrix[s, t])

    def evidence_order(self, edge: Edge) -> tuple[float, float, float]:
        """``evidence_key`` of ``edge``: strongest evidence first."""
        return evidence_key(edge.p_value, self.pair_score(edge), edge.strength)

    def to_json_dict(self) -> dict[str, Any]:
        """The ``dynid discover-causal --json`` document (contract keys first, then ``extra``).

        Strictly JSON: numpy values become Python ones, NaN and infinities become null.
        """
        doc: dict[str, Any] = {
            "variables": list(self.variables),
            "method": self.method,
            "max_lag": int(self.max_lag),
            "alpha": float(self.alpha),
            "edges": [edge.to_json_dict() for edge in self.edges],
            "score_matrix": _jsonable(self.score_matrix),
            "adjacency": [[int(a) for a in row] for row in self.adjacency],
        }
        doc.update({key: _jsonable(value) for key, value in self.extra.items()})
        return doc

    @classmethod
    def from_json_dict(cls, doc: dict[str, Any]) -> CausalGraph:
        """Rebuild from ``to_json_dict`` output (``extra`` comes back as plain lists)."""
        edges = [
            Edge(
                source=e["source"],
                target=e["target"],
                lag=int(e["lag"]),
                strength=_from_json_float(e["strength"]),
                p_value=_from_json_float(e["p_value"]),
                significant=bool(e["significant"]),
                link=e.get("link"),
            )
            for e in doc["edges"]
        ]
        score = np.array(
            [[_from_json_float(v) for v in row] for row in doc["score_matrix"]], dtype=float
        ).reshape(len(doc["variables"]), len(doc["variables"]))
        return cls(
            variables=tuple(doc["variables"]),
            method=doc["method"],
            max_lag=int(doc["max_lag"]),
            alpha=float(doc["alpha"]),
            edges=edges,
            score_matrix=score,
            adjacency=np.array(doc["adjacency"], dtype=np.int8).reshape(score.shape),
            extra={k: v for k, v in doc.items() if k not in CONTRACT_KEYS},
        )

    def to_csv(self) -> str:
        """Every edge, one per row, with header ``source,target,lag,strength,p_value,significant``.

        Floats keep full precision, a value JSON writes as null (``p_value`` of methods without
        p-values) is an empty field; ``significant`` is ``true``/``false``; names are quoted when
        they hold commas or quotes (RFC 4180).
        """
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        for e in self.edges:
            writer.writerow(
                [e.source, e.target, int(e.lag), _csv_float(e.strength), _csv_float(e.p_value),
                 "true" if e.significant else "false"]
            )
        return buffer.getvalue()

    def to_dot(self) -> str:
        """A Graphviz digraph of the significant edges, one arrow per pair labelled by its lags;
        an undirected lag-0 adjacency (``Edge.undirected``) is one line without arrowheads.

        Nodes get safe ids ``n0, n1, ...`` and carry the variable name as an escaped label, so any
        name (quotes, backslashes, spaces) renders as written; every variable is drawn, linked or
        not.
        """
        lines = ["digraph causal {"]
        for i, name in enumerate(self.variables):
            lines.append(f'  n{i} [label="{_dot_escape(name)}"];')
        index = {name: i for i, name in enumerate(self.variables)}
        for (source, target), edges in self._significant_pairs().items():
            directed = [e for e in edges if not e.undirected]
            if directed:
                lags = ",".join(str(e.lag) for e in directed)
                lines.append(f'  n{index[source]} -> n{index[target]} [label="{lags}"];')
            if len(directed) < len(edges) and index[source] < index[target]:
                lines.append(f'  n{index[source]} -> n{index[target]} [label="0", dir=none];')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_graphml(self) -> str:
        """GraphML of the significant edges, one per pair (as in ``to_dot``).

        Nodes have ids ``n0, n1, ...`` and a ``name`` attribute; edges carry ``lags`` (e.g. "1,3"),
        ``score`` (the score-matrix entry), and the ``strength``/``p_value`` of their most
        significant lag; a NaN value (``p_value`` of methods without p-values) is left out,
        GraphML's missing data. Names are XML-escaped; characters XML cannot hold become U+FFFD.
        """
        ns = "http://graphml.graphdrawing.org/xmlns"
        root = ET.Element("graphml", {"xmlns": ns})
        keys = [("name", "node", "string"), ("lags", "edge", "string"), ("score", "edge", "double"),
                ("strength", "edge", "double"), ("p_value", "edge", "double")]
        for key, domain, kind in keys:
            attributes = {"id": key, "for": domain, "attr.name": key, "attr.type": kind}
            ET.SubElement(root, "key", attributes)
        graph = ET.SubElement(root, "graph", {"id": "G", "edgedefault": "directed"})
        for i, name in enumerate(self.variables):
            node = ET.SubElement(graph, "node", {"id": f"n{i}"})
            ET.SubElement(node, "data", {"key": "name"}).text = _XML_INVALID.sub("\ufffd", name)
        index = {name: i for i, name in enumerate(self.variables)}
        for (source, target), edges in self._significant_pairs().items():
            s, t = index[source], index[target]
            best = min(edges, key=self.evidence_order)
            element = ET.SubElement(graph, "edge", {"source": f"n{s}", "target": f"n{t}"})
            values = {
                "lags": ",".join(str(e.lag) for e in edges),
                "score": _xml_double(self.score_matrix[s, t]),
                "strength": _xml_double(best.strength),
                "p_value": _xml_double(best.p_value),
            }
            for key, value in values.items():
                if value != "NaN":
                    ET.SubElement(element, "data", {"key": key}).text = value
        ET.indent(root)
        body = ET.tostring(root, encoding="unicode")
        return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'

    def _significant_pairs(self) -> dict[tuple[str, str], list[Edge]]:
        """Significant edges grouped by (source, target), lags ascending, in first-seen order."""
        pairs: dict[tuple[str, str], list[Edge]] = {}
        for edge in self.edges:
            if edge.significant:
                pairs.setdefault((edge.source, edge.target), []).append(edge)
        return {pair: sorted(edges, key=lambda e: e.lag) for pair, edges in pairs.items()}


# Scores are -log10(p); p-values below this floor (or underflowing to 0) score the cap, 300.
P_FLOOR = 1e-300


def lagged_edges(
    names: Sequence[str], strength: np.ndarray, p_value: np.ndarray, significant: np.ndarray,
    lags: Sequence[int],
) -> list[Edge]:
    """One `Edge` per ordered pair source s != target t and lag; the arrays are (d, d, L),
    indexed [s, t, k], where slot k holds lag ``lags[k]``."""
    d = len(names)
    return [
        Edge(names[s], names[t], int(lag), float(strength[s, t, k]), float(p_value[s, t, k]),
             bool(significant[s, t, k]))
        for s in range(d) for t in range(d) if s != t for k, lag in enumerate(lags)
    ]


def pair_scores(p_value: np.ndarray) -> np.ndarray:
    """(d, d) score matrix: -log10 of each ordered pair's smallest p-value over the lag slots of
    ``p_value`` (d, d, L), floored at ``P_FLOOR``; 0 on the diagonal."""
    off_diagonal = ~np.eye(p_value.shape[0], dtype=bool)
    smallest = np.min(np.where(off_diagonal[:, :, None], p_value, 1.0), axis=2)
    return np.where(off_diagonal, -np.log10(np.maximum(smallest, P_FLOOR)), 0.0)


# ``extra["p_values"]`` of a graph whose significance is a penalty's support (``support_graph``).
P_VALUES_UNAVAILABLE = "not available: significance is the group-lasso support"


def support_graph(
    variables: tuple[str, ...], method: str, max_lag: int, alpha: float, strength: np.ndarray,
    significant: np.ndarray, score: np.ndarray, extra: dict[str, Any],
) -> CausalGraph:
    """A CausalGraph for a sparsity-based method, whose significance is its support.

    strength, significant: (d, d, max_lag) ``[source][target][lag - 1]``; score: (d, d).
    Every edge's p-value is NaN (null in JSON) and ``extra["p_values"]`` says why; self-links
    are not edges.
    """
    d = len(variables)
    cross = ~np.eye(d, dtype=bool)
    significant = significant & cross[:, :, None]
    no_p_values = np.full(significant.shape, np.nan)
    return CausalGraph(
        variables=variables,
        method=method,
        max_lag=max_lag,
        alpha=float(alpha),
        edges=lagged_edges(variables, strength, no_p_values, significant, range(1, max_lag + 1)),
        score_matrix=np.where(cross, score, 0.0),
        adjacency=significant.any(axis=2).astype(np.int8),
        extra={"p_values": P_VALUES_UNAVAILABLE, **extra},
    )


def _json_float(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _from_json_float(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _csv_float(value: float) -> str:
    """Full precision; empty where JSON writes null (a method without p-values: NaN), the
    missing value every CSV reader knows."""
    number = _json_float(value)
    return "" if number is None else repr(number)


def _jsonable(value: Any) -> Any:
    """Numpy arrays and scalars as JSON-safe Python values (non-finite floats as None)."""
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value] if value.ndim else _jsonable(value.item())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _json_float(value)
    return value


def _dot_escape(name: str) -> str:
    """A DOT label string body: backslash, quote and newlines escaped (labels are escStrings)."""
    out = name.replace("\\", "\\\\").replace('"', '\\"')
    return out.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def evidence_key(p_value: float | None, pair_score: float | None, strength: float | None) -> tuple[float, float, float]:
    """Sort key of one edge, strongest evidence first: the one order of the text table
    (``discover-causal --format text``), the HTML report's edge table and GraphML's choice
    among a pair's lags. By p-value (none or NaN last: methods without p-values, e.g.
    crosspred, sindy, neural Granger, are then ordered by what follows), then the pair's
    score-matrix entry (larger first; none last), then |strength| (larger first; this orders
    the lags of one pair)."""

    def last_if_unknown(value: float | None) -> float:
        return math.inf if value is None or math.isnan(value) else value

    return (
        last_if_unknown(p_value),
        last_if_unknown(None if pair_score is None else -pair_score),
        last_if_unknown(None if strength is None else -abs(strength)),
    )


def _xml_double(value: float) -> str:
    """xs:double text: full precision, with XML Schema's NaN / INF / -INF spellings."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    return repr(value)
