"""The report's section for ``discover-causal`` results (kind ``causal``).

What it draws: a node-link graph of the significant links (variables on a circle, edge width by
strength, label the lags, lag-0 links without a direction drawn without arrowheads; for
``--clusters`` results the nodes are the clusters), the score matrix as a heatmap, for
``--method dynamic`` the strength of each significant link over time with its change points,
and a table of the significant edges (ordered by p-value, or by score for methods without
p-values); for ``--method sindy`` the equations the links were read
off, typeset as the symbolic pages typeset theirs. Other method-specific fields are listed by
name and size, not dumped: the JSON file holds them. Registered with ``sections.result_renderer``; importing this
module (``dynid.report`` does) is enough.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid import documents
from dynid.causal.graph import evidence_key
from dynid.report.html import cut, figure, h3, names, note, table
from dynid.report.sections import result_renderer
from dynid.report.svg import PALETTE, Series, _n, _svg, _text, esc, fmt, heatmap, line_plot

# Marks of a lag-0 link without one direction (the JSON's ``link``).
UNDIRECTED = ("o-o", "x-x")
# At most this many links get a line in the time-resolved strength plot (the strongest).
MAX_DYNAMIC_LINKS = 8
_CONTRACT = ("kind", "variables", "method", "max_lag", "alpha", "edges", "score_matrix",
             "adjacency")


@dataclass(frozen=True)
class DrawnLink:
    """One line of the node-link graph: ``source -> target`` (indices), its ``lags`` and
    ``weight`` (largest |strength| over them); ``directed`` False for a lag-0 link without one
    direction (drawn once, without arrowheads)."""

    source: int
    target: int
    lags: tuple[int, ...]
    weight: float
    directed: bool = True


def drawn_links(doc: dict[str, Any]) -> list[DrawnLink]:
    """The significant edges of a causal document grouped per ordered pair (an undirected lag-0
    link once per unordered pair), in first-seen order."""
    index = {str(v): i for i, v in enumerate(doc["variables"])}
    groups: dict[tuple[int, int, bool], list[dict[str, Any]]] = {}
    for edge in doc["edges"]:
        if not edge.get("significant"):
            continue
        s, t = index[str(edge["source"])], index[str(edge["target"])]
        directed = edge.get("link") not in UNDIRECTED
        if not directed and s > t:
            continue  # its mirror draws it
        groups.setdefault((s, t, directed), []).append(edge)
    links = []
    for (s, t, directed), edges in groups.items():
        strengths = [abs(float(e["strength"])) for e in edges
                     if isinstance(e.get("strength"), (int, float)) and math.isfinite(e["strength"])]
        links.append(DrawnLink(s, t, tuple(sorted({int(e["lag"]) for e in edges})),
                               max(strengths, default=0.0), directed))
    return links


def node_link_graph(variables: list[str], links: list[DrawnLink], *, title: str,
                    size: float = 440) -> str:
    """Variables on a circle (clockwise from the top, in order), one line per drawn link.

    Width 1-6 px by ``weight`` relative to the largest; label: the lags. A pair linked both ways
    gets two arcs bending apart; directed links end in an arrowhead at the target's circle.
    """
    d = len(variables)
    label_room = min(16, max((len(v) for v in variables), default=1)) * 3.6 + 18
    radius = max(40.0, size / 2 - label_room - 16)
    cx, cy = size / 2, size / 2 + 10
    node_r = 6.0 if d > 12 else 9.0
    angle = [2 * math.pi * k / max(d, 1) - math.pi / 2 for k in range(d)]
    pos = [(cx + radius * math.cos(a), cy + radius * math.sin(a)) for a in angle]
    peak = max((link.weight for link in links), default=0.0) or 1.0
    pairs = {(link.source, link.target) for link in links if link.directed}
    marker = (
        '<defs><marker id="dynid-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="5" markerHeight="5" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" fill="currentColor" fill-opacity="0.75"/></marker></defs>'
    )
    body = [marker, _text(size / 2, 16, title, extra=' font-weight="bold"')]
    for link in links:
        (x1, y1), (x2, y2) = pos[link.source], pos[link.target]
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        ux, uy = (x2 - x1) / length, (y2 - y1) / length
        # Both ways linked: bend each arc to its own side, so the two stay apart.
        bend = 0.18 * length if link.directed and (link.target, link.source) in pairs else 0.0
        mx, my = (x1 + x2) / 2 - uy * bend, (y1 + y2) / 2 + ux * bend
        sx, sy = x1 + ux * node_r, y1 + uy * node_r
        ex, ey = x2 - ux * (node_r + 2), y2 - uy * (node_r + 2)
        width = 1.0 + 5.0 * link.weight / peak
        arrow = ' marker-end="url(#dynid-arrow)"' if link.directed else ""
        lags = ",".join(str(lag) for lag in link.lags)
        kind = "->" if link.directed else "o-o"
        tip = (f"{variables[link.source]} {kind} {variables[link.target]}, lag {lags}, "
               f"|strength| {fmt(link.weight)}")
        body.append(
            f'<path d="M {_n(sx)} {_n(sy)} Q {_n(mx)} {_n(my)} {_n(ex)} {_n(ey)}" fill="none" '
            f'stroke="currentColor" stroke-opacity="0.65" stroke-width="{width:.1f}"{arrow}>'
            f"<title>{esc(tip)}</title></path>"
        )
        lx, ly = (x1 + x2) / 2 - uy * bend / 2, (y1 + y2) / 2 + ux * bend / 2
        body.append(_text(lx, ly - 3, lags, extra=' font-size="10"'))
    for k, (x, y) in enumerate(pos):
        color = PALETTE[k % len(PALETTE)]
        body.append(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{node_r:.0f}" fill="{color}">'
                    f"<title>{esc(variables[k])}</title></circle>")
        lx, ly = cx + (radius + node_r + 6) * math.cos(angle[k]), cy + (radius + node_r + 6) * math.sin(angle[k])
        anchor = "start" if math.cos(angle[k]) > 0.3 else "end" if math.cos(angle[k]) < -0.3 else "middle"
        label = variables[k] if len(variables[k]) <= 16 else variables[k][:7] + "\u2026" + variables[k][-8:]
        body.append(_text(lx, ly + 4, label, anchor=anchor))
    return _svg(size, size + 20, title, body)


def dynamic_plot(doc: dict[str, Any], dynamic: dict[str, Any]) -> str:
    """The strength series of the significant links (the ``MAX_DYNAMIC_LINKS`` strongest on
    average) over time, with their change points as dotted markers; "" when the series is not
    in the document (left out of large JSON outputs)."""
    if "strength" not in dynamic or "times" not in dynamic:
        return note("The strength series is not in this file (large series are written with "
                    "--dynamic-output); only the change points are listed.")
    variables = [str(v) for v in doc["variables"]]
    strength = np.array(dynamic["strength"], dtype=float)
    times = np.array(dynamic["times"], dtype=float)
    adjacency = np.array(doc["adjacency"], dtype=bool)
    pairs = [(s, t) for s, t in zip(*np.nonzero(adjacency))]
    if not pairs:
        return note("No significant link to follow over time.")
    pairs.sort(key=lambda st: -np.nanmean(strength[:, st[0], st[1]]))
    shown = pairs[:MAX_DYNAMIC_LINKS]
    trial = np.array(dynamic.get("trial", np.zeros(times.size)), dtype=float)
    # A gap between trials: NaN where the trial changes, so lines do not join recordings.
    breaks = np.flatnonzero(np.diff(trial) != 0) + 1
    series = []
    for k, (s, t) in enumerate(shown):
        y = strength[:, s, t].copy()
        x = times.copy()
        if breaks.size:
            x, y = np.insert(x, breaks, np.nan), np.insert(y, breaks, np.nan)
        series.append(Series(f"{variables[s]} \u2192 {variables[t]}", x, y,
                             color=PALETTE[k % len(PALETTE)]))
    shown_names = {(variables[s], variables[t]) for s, t in shown}
    changes = [float(c["time"]) for c in dynamic.get("change_points", [])
               if (str(c["source"]), str(c["target"])) in shown_names]
    caption = (f"Strength ({doc.get('strength_kind', 'strength')}) of the "
               f"{len(shown)} strongest significant link(s) of {len(pairs)} over time; dotted: "
               f"{len(changes)} change point(s) of these links.")
    return figure(line_plot(series, title="Link strength over time", xlabel="time",
                            ylabel="strength", vlines=changes), caption)


def _change_point_table(dynamic: dict[str, Any]) -> str:
    rows, cut_note = cut([(c["source"], c["target"], c["time"], c["before"], c["after"])
                          for c in dynamic.get("change_points", [])], "change points")
    if not rows:
        return note("No change points in link strength.")
    return table(rows, header=["source", "target", "time", "before", "after"]) + cut_note


def _fields_left(doc: dict[str, Any], shown: tuple[str, ...]) -> str:
    """Method-specific fields: scalars as a table, larger values by name and size only."""
    scalars, larger = [], []
    for key, value in doc.items():
        if key in shown:
            continue
        if value is None or isinstance(value, (str, int, float, bool)):
            scalars.append((key, value))
        else:
            larger.append(f"{key} ({_size(value)})")
    parts = [table(scalars, row_headers=True)] if scalars else []
    if larger:
        parts.append(note("Also in the JSON file: " + ", ".join(larger) + "."))
    return (h3("Method details") + "".join(parts)) if parts else ""


def _size(value: Any) -> str:
    if isinstance(value, dict):
        return f"{len(value)} fields"
    if isinstance(value, list):
        try:
            shape = np.array(value, dtype=object).shape
        except ValueError:
            shape = (len(value),)
        return "x".join(str(n) for n in shape) if shape else "1 value"
    return type(value).__name__


@result_renderer(documents.CAUSAL, "Causal discovery")
def causal_section(doc: dict[str, Any]) -> str:
    variables = [str(v) for v in doc["variables"]]
    d = len(variables)
    adjacency = np.array(doc["adjacency"], dtype=float)
    if adjacency.shape != (d, d):
        raise ValueError(f"adjacency is {adjacency.shape}, expected ({d}, {d})")
    edges = list(doc["edges"])
    score = adjacency
    if doc.get("score_matrix") is not None:
        score = np.array(doc["score_matrix"], dtype=float)
        score = score if score.shape == (d, d) else adjacency
    significant = [e for e in edges if e.get("significant")
                   and not (e.get("link") in UNDIRECTED and str(e["source"]) > str(e["target"]))]
    index = {name: i for i, name in enumerate(variables)}

    def pair_score(edge: dict[str, Any]) -> float:
        s, t = index.get(str(edge["source"])), index.get(str(edge["target"]))
        return math.nan if s is None or t is None else float(score[s, t])

    by_p_value = any(_p_value(e) is not None for e in significant)
    def order(edge: dict[str, Any]) -> tuple[float, float, float]:
        strength = edge.get("strength")  # null in JSON for NaN
        return evidence_key(_p_value(edge), pair_score(edge), None if strength is None else float(strength))

    significant.sort(key=order)
    summary = table(
        [
            ("method", doc.get("method")),
            ("max lag", doc.get("max_lag")),
            ("alpha", doc.get("alpha")),
            ("variables", names(variables)),
            ("edges tested", len(edges)),
            ("significant edges", len(significant)),
        ],
        row_headers=True,
    )
    clusters = doc.get("clusters")
    what = "clusters" if isinstance(clusters, dict) else "variables"
    graph = figure(
        node_link_graph(variables, drawn_links(doc), title=f"Significant links between {what}"),
        "Arrows: significant links, source to target; width: |strength| (largest over the "
        "link's lags) relative to the strongest link; label: the lags in samples. A line "
        "without arrowheads is a lag-0 link whose direction the data leave open.",
    )
    parts = [summary, graph]
    if isinstance(clusters, dict):
        parts.append(table([(name, names(members)) for name, members in clusters.items()],
                           header=["cluster", "variables"]))
    parts.append(figure(
        heatmap(score, variables, variables, title="Score matrix", row_title="source",
                col_title="target", outline=adjacency > 0),
        "Colour: score matrix (darker = more evidence); outlined: significant links (adjacency "
        "1). Rows are sources, columns targets.",
    ))
    dynamic = doc.get("dynamic")
    if isinstance(dynamic, dict):
        parts += [h3("Link strength over time"), dynamic_plot(doc, dynamic),
                  _change_point_table(dynamic)]
    rows, cut_note = cut(
        [(e["source"], e.get("link") or "->", e["target"], e.get("lag"), e.get("strength"),
          e.get("p_value") if by_p_value else pair_score(e)) for e in significant],
        "significant edges",
    )
    if by_p_value:
        parts.append(h3("Significant edges (by p-value)"))
    else:
        routed = doc.get("auto")  # auto's result: the method it chose
        method = routed.get("method") if isinstance(routed, dict) else doc.get("method")
        parts.append(h3("Significant edges (by score)"))
        parts.append(note(f"{method} gives no p-values: the edges are ordered by their pair's "
                          "score (score matrix, largest first), then by |strength|."))
    parts.append(
        table(rows, header=["source", "link", "target", "lag", "strength",
                            "p-value" if by_p_value else "score"]) + cut_note
        if rows else note(f"No significant edges at alpha = {fmt(doc.get('alpha'))}.")
    )
    equations = _equations(doc)
    parts.append(equations)
    shown = _CONTRACT + ("clusters", "dynamic") + (("equations", "symbols") if equations else ())
    parts.append(_fields_left(doc, shown))
    return "".join(parts)


def _p_value(edge: dict[str, Any]) -> float | None:
    """The edge's p-value, None where the method gives none (NaN is written as null)."""
    p = edge.get("p_value")
    return None if p is None or not math.isfinite(float(p)) else float(p)


def _equations(doc: dict[str, Any]) -> str:
    """The identified equations the links were read off (``--method sindy``: ``equations``,
    variable -> right-hand side, over ``symbols``) typeset as the symbolic pages typeset
    theirs; as plain lines when they do not parse; "" for methods without equations."""
    from dynid.report.symbolic import derivative_text, equations_block, equations_of_rhs

    rhs = doc.get("equations")
    if not isinstance(rhs, dict) or not rhs:
        return ""
    symbols = {str(k): str(v) for k, v in (doc.get("symbols") or {}).items()}
    discrete = doc.get("formulation") == "map"
    heading = h3("Equations the links were read off")
    equations = equations_of_rhs({str(k): str(v) for k, v in rhs.items()}, symbols)
    if equations is None:
        return heading + table([(derivative_text(str(k), discrete), str(v)) for k, v in rhs.items()],
                               header=["equation", "right-hand side"])
    return heading + equations_block(equations, symbols, discrete)
