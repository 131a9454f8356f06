"""Small inline-SVG figures for the HTML report, plus the report's text helpers.

Every figure is one standalone ``<svg>`` element that parses as XML, draws its axes and text in
``currentColor`` (so it follows the page's text colour on light or dark backgrounds and in print)
and uses no script, font or image from outside. ``esc`` and ``fmt`` live here because figures
need them too; the HTML sections import them from this module.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SVG_NS = "http://www.w3.org/2000/svg"
# Distinguishable on white and on near-black backgrounds (the "tab10" hues).
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
FONT_PX = 12
CHAR_PX = 0.6 * FONT_PX  # rough advance of one character, for laying out labels
# Characters XML 1.0 cannot carry even escaped, and lone surrogates UTF-8 cannot encode.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
# A series whose x is not monotonic (a phase portrait) with more points than this is thinned
# by a stride; a time series is instead reduced to its min and max per pixel column.
MAX_POINTS = 2000


# -- text ----------------------------------------------------------------------------------------
def esc(value: object) -> str:
    """``str(value)`` escaped for HTML text and attributes and for XML (SVG)."""
    return html.escape(_UNSAFE.sub("\ufffd", str(value)), quote=True)


def fmt(value: Any, digits: int = 5) -> str:
    """The one formatter of values for display (plain text, not yet escaped).

    Floats get ``digits`` significant digits, except that a value which would round to 1 or
    -1 without being it shows its gap ("1 - 3e-07"); None is an em dash; ``{"real", "imag"}`` dicts (how
    complex numbers appear in dynid's JSON) and complex numbers read ``a + bi``; lists and arrays
    are shown compactly (long ones elided in the middle, with their length).
    """
    if value is None:
        return "\u2014"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        text = f"{number:.{digits}g}"
        if text in ("1", "-1") and number != float(text):
            # R^2, correlations and probabilities near 1: "1" would claim a perfect fit.
            gap = number - float(text)
            return f"{text} {'-' if gap < 0 else '+'} {abs(gap):.2g}"
        return text
    if isinstance(value, (complex, np.complexfloating)):
        sign = "-" if value.imag < 0 else "+"
        return f"{fmt(value.real, digits)} {sign} {fmt(abs(value.imag), digits)}i"
    if isinstance(value, dict):
        if set(value) == {"real", "imag"}:
            return fmt(complex(_float(value["real"]), _float(value["imag"])), digits)
        return "{" + ", ".join(f"{k}: {fmt(v, digits)}" for k, v in value.items()) + "}"
    if isinstance(value, np.ndarray):
        return fmt(value.tolist(), digits)
    if isinstance(value, (list, tuple)):
        items = list(value)
        if len(items) <= 8:
            return "[" + ", ".join(fmt(v, digits) for v in items) + "]"
        shown = [fmt(v, digits) for v in items[:3]] + ["\u2026"] + [fmt(v, digits) for v in items[-2:]]
        return "[" + ", ".join(shown) + f"] ({len(items)} values)"
    return str(value)


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


# -- ticks ---------------------------------------------------------------------------------------
def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """About ``target`` evenly spaced ticks in steps of 1, 2 or 5 x 10^k covering [lo, hi].

    The first tick is <= lo and the last >= hi. A degenerate or non-finite range is widened to
    something drawable (e.g. ``nice_ticks(3, 3)`` covers 3 +- 10%).
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or not math.isfinite(hi - lo):
        lo, hi = 0.0, 1.0
    lo, hi = min(lo, hi), max(lo, hi)
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi)):
        pad = 0.1 * abs(lo) or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(target - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    # Round away float noise (0.30000000000000004) to one digit below the step's.
    decimals = max(0, 1 - math.floor(math.log10(step)))
    return [round(k * step, decimals) + 0.0 for k in range(first, last + 1)]


def tick_labels(ticks: list[float]) -> list[str]:
    """Labels for evenly spaced ``ticks`` with just enough digits to tell neighbours apart
    (so 1700000000 and 1700000020 do not both read 1.7e+09)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 0.0
    largest = max(abs(t) for t in ticks)
    if step == 0 or largest == 0:
        return [fmt(t) for t in ticks]
    digits = math.floor(math.log10(largest)) - math.floor(math.log10(step)) + 2
    # At least every digit before the point: 300 reads 300, not 3e+02.
    digits = max(digits, math.floor(math.log10(largest)) + 1)
    return [fmt(t, min(max(digits, 1), 15)) for t in ticks]


# -- shared drawing ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Series:
    """One line of a line plot: ``x`` (n,) and ``y`` (n,); non-finite points break the line.
    ``marker``: the radius (pixels) of a dot drawn at every finite point (0: none), for short
    series whose points matter (a Pareto front)."""

    label: str
    x: np.ndarray
    y: np.ndarray
    dashed: bool = False
    color: str | None = None
    marker: float = 0.0


def _n(value: float) -> str:
    """A coordinate: one decimal is plenty at screen resolution."""
    return f"{value:.1f}"


def _text(x: float, y: float, content: str, *, anchor: str = "middle", extra: str = "") -> str:
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}"{extra}>{esc(content)}</text>'
    )


def _line(x1: float, y1: float, x2: float, y2: float, style: str) -> str:
    return f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" {style}/>'


def _rotated(angle: int, x: float, y: float) -> str:
    """A ``transform`` attribute turning text by ``angle`` degrees about its anchor."""
    return f' transform="rotate({angle} {_n(x)} {_n(y)})"'


def _svg(width: float, height: float, label: str, body: list[str], extra: str = "") -> str:
    return (
        f'<svg xmlns="{SVG_NS}" width="{_n(width)}" height="{_n(height)}" '
        f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{esc(label)}"{extra} '
        f'font-family="sans-serif" font-size="{FONT_PX}" fill="currentColor">'
        f"<title>{esc(label)}</title>" + "".join(body) + "</svg>"
    )


def _legend_key(kind: str, color: str, x: float, y: float) -> str:
    if kind == "dot":
        return f'<circle cx="{_n(x + 9)}" cy="{_n(y)}" r="3.5" fill="{color}"/>'
    dash = ' stroke-dasharray="5 3"' if kind == "dashed" else ""
    return _line(x, y, x + 18, y, f'stroke="{color}" stroke-width="2"{dash}')


class _Frame:
    """Axes with ticks, grid, title, axis labels and a legend row; maps data to pixels.

    ``legend``: (label, colour, "line" | "dashed" | "dot") entries, laid out in rows above the
    plot. ``square`` makes the plot area square (equal scales when the tick ranges are equal).
    """

    def __init__(
        self,
        *,
        width: float,
        height: float,
        xticks: list[float],
        yticks: list[float],
        title: str,
        xlabel: str,
        ylabel: str,
        legend: Sequence[tuple[str, str, str]] = (),
        square: bool = False,
    ) -> None:
        self.width, self.height = width, height
        self.xticks, self.yticks = xticks, yticks
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.legend = list(legend)
        self.xlabels, self.ylabels = tick_labels(xticks), tick_labels(yticks)
        label_chars = max(len(label) for label in self.ylabels)
        self.left = 8 + (FONT_PX + 6 if ylabel else 0) + label_chars * CHAR_PX + 6
        self.right = 12.0
        self.legend_rows = self._layout_legend()
        self.top = 8 + (FONT_PX + 8 if title else 0) + 16 * len(self.legend_rows) + 6
        self.bottom = FONT_PX + 10 + (FONT_PX + 8 if xlabel else 0)
        plot_w = width - self.left - self.right
        plot_h = height - self.top - self.bottom
        if square:
            side = min(plot_w, plot_h)
            self.width = self.left + side + self.right
            self.height = self.top + side + self.bottom
            plot_w = plot_h = side
        self.x0, self.x1 = self.left, self.left + plot_w
        self.y0, self.y1 = self.top + plot_h, self.top  # pixel y grows downwards

    def _layout_legend(self) -> list[list[tuple[float, tuple[str, str, str]]]]:
        rows: list[list[tuple[float, tuple[str, str, str]]]] = []
        x = self.left
        for entry in self.legend:
            item_w = 24 + len(entry[0]) * CHAR_PX + 14
            if not rows or (x + item_w > self.width - self.right and rows[-1]):
                rows.append([])
                x = self.left
            rows[-1].append((x, entry))
            x += item_w
        return rows

    def x(self, value: float) -> float:
        lo, hi = self.xticks[0], self.xticks[-1]
        return self.x0 + (value - lo) / (hi - lo) * (self.x1 - self.x0)

    def y(self, value: float) -> float:
        lo, hi = self.yticks[0], self.yticks[-1]
        return self.y0 + (value - lo) / (hi - lo) * (self.y1 - self.y0)

    def render(self, body: list[str]) -> str:
        """The whole ``<svg>``: frame, then ``body`` (data marks) on top."""
        parts: list[str] = []
        if self.title:
            parts.append(_text(self.width / 2, 8 + FONT_PX, self.title, extra=' font-weight="bold"'))
        legend_top = 8 + (FONT_PX + 8 if self.title else 0) + 8
        for row_index, row in enumerate(self.legend_rows):
            y = legend_top + 16 * row_index
            for x, (label, color, kind) in row:
                parts.append(_legend_key(kind, color, x, y))
                parts.append(_text(x + 24, y + 4, label, anchor="start"))
        grid = 'stroke="currentColor" stroke-opacity="0.15"'
        for t, label in zip(self.xticks, self.xlabels):
            px = self.x(t)
            parts.append(_line(px, self.y1, px, self.y0, grid))
            parts.append(_text(px, self.y0 + FONT_PX + 4, label))
        for t, label in zip(self.yticks, self.ylabels):
            py = self.y(t)
            parts.append(_line(self.x0, py, self.x1, py, grid))
            parts.append(_text(self.x0 - 4, py + 4, label, anchor="end"))
        parts.append(
            f'<rect x="{_n(self.x0)}" y="{_n(self.y1)}" width="{_n(self.x1 - self.x0)}" '
            f'height="{_n(self.y0 - self.y1)}" fill="none" stroke="currentColor" stroke-opacity="0.6"/>'
        )
        if self.xlabel:
            parts.append(_text((self.x0 + self.x1) / 2, self.height - 6, self.xlabel))
        if self.ylabel:
            cy = (self.y0 + self.y1) / 2
            parts.append(_text(8 + FONT_PX, cy, self.ylabel, extra=_rotated(-90, 8 + FONT_PX, cy)))
        # Axis ranges come from nice ticks covering every finite value, so no clipping is needed.
        parts.extend(body)
        label = self.title or "figure"
        return _svg(self.width, self.height, label, parts, f' data-frame="{self.frame_attribute()}"')

    def frame_attribute(self) -> str:
        """The pixel-to-data mapping for the --interactive script's read-out: plot area x0 x1
        (pixels) with the x range at its ends, then y0 y1 (pixels, bottom and top) with the y
        range at its ends."""
        x = (self.x0, self.x1, self.xticks[0], self.xticks[-1])
        y = (self.y0, self.y1, self.yticks[0], self.yticks[-1])
        return " ".join(f"{v:.10g}" for v in (*x, *y))


def _finite_range(arrays: Sequence[np.ndarray]) -> tuple[float, float]:
    values = np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays] or [np.zeros(0)])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0, 1.0
    return float(values.min()), float(values.max())


# -- figures -------------------------------------------------------------------------------------
def line_plot(
    series: Sequence[Series],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    width: float = 640,
    height: float = 260,
    vlines: Sequence[float] = (),
    spans: Sequence[tuple[float, float, str, str]] = (),
) -> str:
    """Lines of ``series`` on shared axes with nice ticks and a legend; ``vlines`` are x
    positions of dotted vertical markers (e.g. where a forecast starts); ``spans`` are
    (x_from, x_to, colour, tooltip) bands shaded behind the lines over the plot's height
    (e.g. regimes). NaN/inf are gaps."""
    xs = [np.asarray(s.x, dtype=float) for s in series]
    ys = [np.asarray(s.y, dtype=float) for s in series]
    colors = [s.color or PALETTE[i % len(PALETTE)] for i, s in enumerate(series)]
    frame = _Frame(
        width=width,
        height=height,
        xticks=nice_ticks(*_finite_range(xs)),
        yticks=nice_ticks(*_finite_range(ys)),
        title=title,
        xlabel=xlabel,
        ylabel=ylabel,
        legend=[
            (s.label, c, "dashed" if s.dashed else "line")
            for s, c in zip(series, colors)
            if s.label  # an unlabelled series shares the entry of one drawn like it
        ],
    )
    body = [
        f'<rect x="{_n(frame.x(lo))}" y="{_n(frame.y1)}" width="{_n(max(frame.x(hi) - frame.x(lo), 0.5))}" '
        f'height="{_n(frame.y0 - frame.y1)}" fill="{color}" fill-opacity="0.18"><title>{esc(tip)}</title></rect>'
        for lo, hi, color, tip in spans
    ]
    body += [
        _line(frame.x(v), frame.y1, frame.x(v), frame.y0,
              'stroke="currentColor" stroke-opacity="0.6" stroke-dasharray="2 3"')
        for v in vlines
        if math.isfinite(v) and frame.xticks[0] <= v <= frame.xticks[-1]
    ]
    for s, x, y, color in zip(series, xs, ys, colors):
        body.extend(_polyline(frame, x, y, color, s.dashed))
        if s.marker > 0:
            body.extend(
                f'<circle cx="{_n(frame.x(xi))}" cy="{_n(frame.y(yi))}" r="{_n(s.marker)}" fill="{color}"/>'
                for xi, yi in zip(x.tolist(), y.tolist()) if math.isfinite(xi) and math.isfinite(yi)
            )
    return frame.render(body)


def stride(n: int) -> int:
    """Every how many points of a series of ``n`` that is not a time series are drawn: at most
    ``MAX_POINTS`` of them."""
    return max(1, math.ceil(n / MAX_POINTS))


def minmax_columns(px: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points to draw of a long series whose pixel x ``px`` (n,) does not
    decrease: in each whole-pixel column, its first and last point, the lowest and highest
    finite ``y`` and the first non-finite one (so gaps stay gaps), in their original order.
    The drawn line then covers exactly the same pixels as the full series: nothing is cut."""
    columns = np.floor(px)
    starts = np.flatnonzero(np.r_[True, columns[1:] != columns[:-1]])
    ends = np.r_[starts[1:], px.size]
    keep: list[int] = []
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        chunk = y[lo:hi]
        finite = np.isfinite(chunk)
        keep += [lo, hi - 1]
        if finite.any():
            values = np.where(finite, chunk, np.nan)
            keep += [lo + int(np.nanargmin(values)), lo + int(np.nanargmax(values))]
        if not finite.all():
            keep.append(lo + int(np.argmin(finite)))
    return np.unique(np.array(keep, dtype=int))


def _polyline(frame: _Frame, x: np.ndarray, y: np.ndarray, color: str, dashed: bool) -> list[str]:
    """One ``<path>`` with a new subpath after every gap; isolated points become dots."""
    if x.size > 2 * (frame.x1 - frame.x0) and bool(np.all(np.diff(x) >= 0)):
        keep = minmax_columns(frame.x(x), y)  # frame.x is affine: maps arrays too
    else:
        keep = np.arange(0, x.size, stride(x.size))
    x, y = x[keep], y[keep]
    ok = np.isfinite(x) & np.isfinite(y)
    runs: list[list[tuple[float, float]]] = [[]]
    for xi, yi, good in zip(x.tolist(), y.tolist(), ok.tolist()):
        if good:
            runs[-1].append((frame.x(xi), frame.y(yi)))
        elif runs[-1]:
            runs.append([])
    marks: list[str] = []
    path = []
    for run in runs:
        if len(run) == 1:
            marks.append(f'<circle cx="{_n(run[0][0])}" cy="{_n(run[0][1])}" r="2" fill="{color}"/>')
        elif run:
            path.append("M" + " L".join(f"{_n(px)} {_n(py)}" for px, py in run))
    if path:
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        marks.insert(
            0,
            f'<path d="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="1.6" '
            f'stroke-linejoin="round"{dash}/>',
        )
    return marks


def eigenvalue_plot(values: np.ndarray, *, title: str = "Eigenvalues", size: float = 340) -> str:
    """Complex (discrete-time) eigenvalues as dots in the complex plane with the unit circle.

    values: (k,) complex. Both axes share one scale, so the circle is round; each dot's tooltip
    gives its value and modulus.
    """
    values = np.asarray(values, dtype=complex).ravel()
    finite = values[np.isfinite(values)]
    radius = max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0) * 1.08
    ticks = nice_ticks(-radius, radius, 7)
    frame = _Frame(
        width=size,
        height=size,
        xticks=ticks,
        yticks=ticks,
        title=title,
        xlabel="real part",
        ylabel="imaginary part",
        legend=[("unit circle", "currentColor", "line"), ("eigenvalue", PALETTE[0], "dot")],
        square=True,
    )
    scale = (frame.x1 - frame.x0) / (ticks[-1] - ticks[0])
    axis = 'stroke="currentColor" stroke-opacity="0.35"'
    body = [
        f'<circle cx="{_n(frame.x(0))}" cy="{_n(frame.y(0))}" r="{_n(scale)}" fill="none" '
        'stroke="currentColor" stroke-opacity="0.7"/>',
        _line(frame.x0, frame.y(0), frame.x1, frame.y(0), axis),
        _line(frame.x(0), frame.y0, frame.x(0), frame.y1, axis),
    ]
    for value in finite:
        body.append(
            f'<circle cx="{_n(frame.x(value.real))}" cy="{_n(frame.y(value.imag))}" r="3.5" '
            f'fill="{PALETTE[0]}" fill-opacity="0.85"><title>{esc(fmt(complex(value)))} '
            f"(|\u03bb| = {esc(fmt(abs(value)))})</title></circle>"
        )
    return frame.render(body)


def heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str = "",
    row_title: str = "",
    col_title: str = "",
    outline: np.ndarray | None = None,
    max_side: float = 480,
) -> str:
    """A matrix as coloured cells (blue positive, red negative, opacity ~ |value| / max |value|).

    matrix: (r, c); labels: r and c names (shown when cells are large enough); outline: (r, c)
    bools drawing a frame around cells (e.g. significant links). NaN cells stay empty. Each cell
    has a tooltip "row -> column: value".
    """
    values = np.asarray(matrix, dtype=float)
    n_rows, n_cols = values.shape
    cell = min(36.0, max(4.0, max_side / max(n_rows, n_cols, 1)))
    show_labels = cell >= 10

    def short(label: str) -> str:
        # Elide the middle: long names often share a prefix and differ at the end.
        return label if len(label) <= 16 else label[:7] + "\u2026" + label[-8:]

    rows_w = max((len(short(s)) for s in row_labels), default=0) * CHAR_PX if show_labels else 0
    cols_h = max((len(short(s)) for s in col_labels), default=0) * CHAR_PX * 0.71 if show_labels else 0
    left = 8 + (FONT_PX + 8 if row_title else 0) + rows_w + 6
    top = 8 + (FONT_PX + 8 if title else 0) + (FONT_PX + 8 if col_title else 0) + cols_h + 8
    # Column labels at 45 degrees reach as far right of their cell as they rise above it.
    width = max(left + n_cols * cell + max(cols_h, 8) + 8, len(title) * CHAR_PX + 16)
    height = top + n_rows * cell + 10

    finite = np.abs(values[np.isfinite(values)])
    peak = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    parts: list[str] = []
    if title:
        parts.append(_text(width / 2, 8 + FONT_PX, title, extra=' font-weight="bold"'))
    if col_title:
        y = 8 + (FONT_PX + 8 if title else 0) + FONT_PX
        parts.append(_text(left + n_cols * cell / 2, y, col_title, extra=' font-style="italic"'))
    if row_title:
        cy = top + n_rows * cell / 2
        turn = _rotated(-90, 8 + FONT_PX, cy)
        parts.append(_text(8 + FONT_PX, cy, row_title, extra=' font-style="italic"' + turn))
    for i in range(n_rows):
        for j in range(n_cols):
            value = values[i, j]
            x, y = left + j * cell, top + i * cell
            fill = ' fill="none"'
            if math.isfinite(value):
                color = PALETTE[0] if value >= 0 else PALETTE[1]
                fill = f' fill="{color}" fill-opacity="{abs(value) / peak * 0.9:.3f}"'
            stroke = (
                ' stroke="currentColor" stroke-width="2"'
                if outline is not None and outline[i, j]
                else ' stroke="currentColor" stroke-opacity="0.2"'
            )
            tip = f"{row_labels[i]} \u2192 {col_labels[j]}: {fmt(value)}"
            parts.append(
                f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(cell)}" height="{_n(cell)}"{fill}{stroke}>'
                f"<title>{esc(tip)}</title></rect>"
            )
    if show_labels:
        for i, label in enumerate(row_labels):
            parts.append(_text(left - 6, top + (i + 0.5) * cell + 4, short(label), anchor="end"))
        for j, label in enumerate(col_labels):
            x, y = left + (j + 0.5) * cell, top - 6
            parts.append(_text(x, y, short(label), anchor="start", extra=_rotated(-45, x, y)))
    return _svg(width, height, title or "matrix", parts)


def histogram_plot(
    edges: np.ndarray, counts: np.ndarray, *, title: str = "", xlabel: str = "",
    width: float = 420, height: float = 220,
) -> str:
    """Bars of ``counts`` (k,) over the bins between ``edges`` (k + 1,), each with a tooltip."""
    edges = np.asarray(edges, dtype=float)
    counts = np.asarray(counts, dtype=float)
    frame = _Frame(
        width=width,
        height=height,
        xticks=nice_ticks(float(edges[0]), float(edges[-1])),
        yticks=nice_ticks(0.0, float(counts.max()) if counts.size else 1.0),
        title=title,
        xlabel=xlabel,
        ylabel="count",
    )
    body = []
    for lo, hi, count in zip(edges[:-1].tolist(), edges[1:].tolist(), counts.tolist()):
        if count <= 0:
            continue
        x, top = frame.x(lo), frame.y(count)
        body.append(
            f'<rect x="{_n(x)}" y="{_n(top)}" width="{_n(max(frame.x(hi) - x, 1.0))}" '
            f'height="{_n(frame.y0 - top)}" fill="{PALETTE[0]}" fill-opacity="0.8">'
            f"<title>{esc(fmt(lo))} to {esc(fmt(hi))}: {esc(fmt(int(count)))}</title></rect>"
        )
    return frame.render(body)


def quiver_plot(
    points: np.ndarray, vectors: np.ndarray, spread: np.ndarray, *, title: str = "",
    xlabel: str = "", ylabel: str = "", size: float = 420,
) -> str:
    """Arrows of ``vectors`` (n, 2) at ``points`` (n, 2) of a regular grid on square axes,
    scaled so the longest spans 0.9 grid spacings, fainter where ``spread`` (n,) (an
    uncertainty in the vectors' units) is larger; each with a tooltip of its values."""
    points = np.asarray(points, dtype=float)
    vectors = np.asarray(vectors, dtype=float)
    spread = np.asarray(spread, dtype=float)
    frame = _Frame(width=size, height=size, xticks=nice_ticks(*_finite_range([points[:, 0]])),
                   yticks=nice_ticks(*_finite_range([points[:, 1]])), title=title, xlabel=xlabel,
                   ylabel=ylabel, square=True)
    per_side = max(math.isqrt(len(points)), 2)
    spacing = (frame.x1 - frame.x0) / per_side
    px_per_x = (frame.x1 - frame.x0) / (frame.xticks[-1] - frame.xticks[0])
    px_per_y = (frame.y0 - frame.y1) / (frame.yticks[-1] - frame.yticks[0])
    pixels = np.column_stack([vectors[:, 0] * px_per_x, -vectors[:, 1] * px_per_y])
    longest = float(np.max(np.hypot(*pixels.T))) if len(pixels) else 0.0
    pixels *= 0.9 * spacing / longest if longest > 0 else 0.0
    faint = spread / spread.max() if spread.size and spread.max() > 0 else np.zeros(len(points))
    body = []
    for (x, y), (dx, dy), (vx, vy), sd, fade in zip(points.tolist(), pixels.tolist(), vectors.tolist(),
                                                     spread.tolist(), faint.tolist()):
        x0, y0 = frame.x(x), frame.y(y)
        x1, y1 = x0 + dx, y0 + dy
        angle = math.atan2(dy, dx)
        head = [(x1 - 5 * math.cos(angle + s), y1 - 5 * math.sin(angle + s)) for s in (0.5, -0.5)]
        path = f"M{_n(x0)},{_n(y0)} L{_n(x1)},{_n(y1)} " + " ".join(
            f"M{_n(x1)},{_n(y1)} L{_n(hx)},{_n(hy)}" for hx, hy in head)
        body.append(
            f'<path d="{path}" stroke="{PALETTE[0]}" stroke-width="1.5" fill="none" '
            f'stroke-opacity="{_n(max(1.0 - 0.85 * fade, 0.15))}"><title>({esc(fmt(x))}, {esc(fmt(y))}): '
            f"({esc(fmt(vx))}, {esc(fmt(vy))}) \u00b1 {esc(fmt(sd))}</title></path>"
        )
    return frame.render(body)
