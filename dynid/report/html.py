"""The report's HTML building blocks: tables, headings, notes, figures; every value goes through
``fmt`` and ``esc`` (from ``svg``) on its way into the page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dynid.models.base import Backend
from dynid.report.svg import esc, fmt

# Longer listings are cut, saying how many rows were left out.
MAX_ROWS = 500


# -- tables and text -----------------------------------------------------------------------------
class Markup(str):
    """HTML that is already escaped; ``table`` puts it into a cell as it is."""


def _cell(value: Any, tag: str, scope: str = "") -> str:
    if isinstance(value, Markup):
        return f"<{tag}{scope}>{value}</{tag}>"
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )
    css = ' class="num"' if numeric else ""
    return f"<{tag}{scope}{css}>{esc(fmt(value))}</{tag}>"


def table(
    rows: Iterable[Sequence[Any]], *, header: Sequence[str] | None = None, row_headers: bool = False
) -> Markup:
    """An HTML table. rows: sequences of values (formatted with ``fmt``) or ``Markup`` cells;
    ``row_headers`` makes each row's first cell a header (key/value tables)."""
    head = ""
    if header:
        head = "<thead><tr>" + "".join(_cell(h, "th", ' scope="col"') for h in header) + "</tr></thead>"
    lines = []
    for row in rows:
        cells = list(row)
        first = _cell(cells[0], "th", ' scope="row"') if row_headers and cells else ""
        rest = cells[1:] if row_headers else cells
        lines.append("<tr>" + first + "".join(_cell(c, "td") for c in rest) + "</tr>")
    return Markup(f"<table>{head}<tbody>{''.join(lines)}</tbody></table>")


def h3(text: str) -> str:
    return f"<h3>{esc(text)}</h3>"


def pre(text: str) -> Markup:
    return Markup(f"<pre>{esc(text)}</pre>")


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def error(text: str) -> str:
    return f'<p class="error">{esc(text)}</p>'


def figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg}{cap}</figure>"


def cut(rows: list[Any], what: str) -> tuple[list[Any], str]:
    """The first ``MAX_ROWS`` rows and a note saying how many were left out (or "")."""
    if len(rows) <= MAX_ROWS:
        return rows, ""
    return rows[:MAX_ROWS], note(f"Showing the first {MAX_ROWS} of {len(rows)} {what}.")


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as (dotted key, leaf) pairs: ``{"a": {"b": 1}}`` -> ``[("a.b", 1)]``.

    Lists stay leaves (``fmt`` shows them compactly); so do ``{real, imag}`` complex numbers.
    """
    if isinstance(value, dict) and value and set(value) != {"real", "imag"}:
        pairs: list[tuple[str, Any]] = []
        for key, item in value.items():
            pairs.extend(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return pairs
    if not prefix:
        return [] if value in (None, {}) else [("value", value)]
    return [(prefix, value)]


def names(items: Iterable[Any]) -> str:
    """Comma-separated, or "none"."""
    return ", ".join(str(n) for n in items) or "none"


def fingerprint_cell(digest: Any) -> Any:
    """A sha256 shown by its first 12 hex digits, the whole in its tooltip (other values as
    they are)."""
    if not isinstance(digest, str):
        return digest
    return Markup(f'<code title="{esc(digest)}">{esc(digest[:12])}\u2026</code>')


def hyperparameter_cell(model: Backend, meta: dict[str, Any]) -> Markup | str:
    """The hyperparameters a model file records (else the model's own), one ``name = value``
    a line."""
    hyper = meta.get("hyperparameters", model.params.to_dict())
    if not hyper:
        return "none"
    return Markup("<br>".join(f"{esc(k)} = {esc(fmt(v))}" for k, v in hyper.items()))
