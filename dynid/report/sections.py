"""One function per kind of report input, each turning it into escaped HTML.

``model_section`` (a loaded model file, with a held-out forecast when data are given),
``data_section``, and ``result_section`` for the JSON of other commands, chosen by the
document's ``"kind"`` (``result_kind``): causal, symbolic and score documents get their own
sections, other kinds a table. A document without ``"kind"`` (written by an older dynid) is
recognised by its keys, with a note saying so.
Every table goes through ``table`` and every value through ``fmt`` and ``esc``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from dynid import documents
from dynid.data.dataset import Dataset
from dynid.errors import DynidError
from dynid.modelfile import ModelFile
from dynid.models.base import Backend
from dynid.report.svg import Series, eigenvalue_plot, esc, fmt, heatmap, line_plot
from dynid.report.template import Section

# Default held-out window: a quarter of the last trial, at most this many samples.
MAX_DEFAULT_HORIZON = 200
# Samples of data drawn before the held-out window, at least (more when the window is long).
MIN_CONTEXT = 20
# Longer listings are cut, saying how many rows were left out.
MAX_ROWS = 500
MAX_JSON_CHARS = 20_000


# -- HTML building blocks ------------------------------------------------------------------------
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


def _h3(text: str) -> str:
    return f"<h3>{esc(text)}</h3>"


def _pre(text: str) -> Markup:
    return Markup(f"<pre>{esc(text)}</pre>")


def _note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def _error(text: str) -> str:
    return f'<p class="error">{esc(text)}</p>'


def _figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg}{cap}</figure>"


def _cut(rows: list[Any], what: str) -> tuple[list[Any], str]:
    """The first ``MAX_ROWS`` rows and a note saying how many were left out (or "")."""
    if len(rows) <= MAX_ROWS:
        return rows, ""
    return rows[:MAX_ROWS], _note(f"Showing the first {MAX_ROWS} of {len(rows)} {what}.")


def _json(value: Any) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n\u2026 ({len(text) - MAX_JSON_CHARS} more characters)"
    return text


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


def _names(names: Iterable[Any]) -> str:
    return ", ".join(str(n) for n in names) or "none"


# -- model files ---------------------------------------------------------------------------------
def model_section(
    path: str, model_file: ModelFile, data: Dataset | None, *, horizon: int | None, anchor: str
) -> Section:
    """Metadata, fit metrics, equations, eigenvalues and (with ``data``) a held-out forecast."""
    model, meta = model_file.model, model_file.metadata
    metrics = flatten(meta.get("metrics", model.metrics_))
    parts = [
        _h3("Metadata"),
        table(_metadata_rows(model, meta), row_headers=True),
        _h3("Fit metrics"),
        table(metrics, row_headers=True) if metrics else _note("No fit metrics recorded."),
        _block("Equations", lambda: _equations(model)),
        _block("Eigenvalues", lambda: _eigenvalues(model)),
    ]
    if data is not None:
        parts.append(_block(f"Forecast on {data.source}", lambda: _forecast(model, data, horizon)))
    backend = meta.get("backend", model.name)
    return Section(anchor, f"Model: {path} ({backend})", "\n".join(p for p in parts if p))


def _block(heading: str, render: Callable[[], str | None]) -> str:
    """``render()`` under a heading; "" when it has nothing to show; a dynid error's message in
    place of the content, so one failing part does not sink the report."""
    try:
        body = render()
    except DynidError as exc:
        body = _error(f"{heading}: {exc}")
    return "" if body is None else _h3(heading) + "\n" + body


def _metadata_rows(model: Backend, meta: dict[str, Any]) -> list[tuple[str, Any]]:
    hyper = meta.get("hyperparameters", model.params.to_dict())
    hyper_cell = (
        Markup("<br>".join(f"{esc(k)} = {esc(fmt(v))}" for k, v in hyper.items()))
        if hyper
        else "none"
    )
    digest = meta.get("data_fingerprint")
    digest_cell = (
        Markup(f'<code title="{esc(digest)}">{esc(digest[:12])}\u2026</code>')
        if isinstance(digest, str)
        else digest
    )
    return [
        ("backend", meta.get("backend", model.name)),
        ("dynid version", meta.get("dynid_version")),
        ("created (UTC)", meta.get("created_utc")),
        ("hyperparameters", hyper_cell),
        ("variables", _names(model.variables_)),
        ("inputs", _names(model.inputs_)),
        ("dt", model.dt_),
        ("samples", meta.get("n_samples")),
        ("trials", meta.get("n_trials")),
        ("data source", meta.get("data_source")),
        ("data sha256", digest_cell),
        ("seed", meta.get("seed")),
        ("device", meta.get("device")),
        ("fit seconds", meta.get("fit_seconds")),
    ]


def _equations(model: Backend) -> str | None:
    lines = model.equation_lines()
    return None if not lines else _pre("\n".join(lines))


def _eigenvalues(model: Backend) -> str | None:
    values = model.eigenvalues()
    if values is None or np.size(values) == 0:
        return None
    values = np.asarray(values, dtype=complex).ravel()
    moduli = np.abs(values)
    radius = float(np.nanmax(moduli))
    outside = int(np.sum(moduli > 1))
    caption = f"{values.size} eigenvalues; spectral radius {fmt(radius)}" + (
        f"; {outside} outside the unit circle (growing modes)" if outside else " (all decay)"
    )
    # Continuous-time reading of each discrete eigenvalue: lambda = exp((sigma + i*omega) * dt).
    order = np.argsort(-moduli)
    rows = [
        (complex(v), abs(v), math.log(abs(v)) / model.dt_ if abs(v) > 0 else -math.inf,
         np.angle(v) / (2 * math.pi * model.dt_))
        for v in values[order]
    ]
    rows, cut = _cut(rows, "eigenvalues")
    header = ["eigenvalue", "modulus", "growth rate ln|\u03bb|/dt", "frequency arg \u03bb/(2\u03c0 dt)"]
    return _figure(eigenvalue_plot(values), caption) + table(rows, header=header) + cut


def _forecast(model: Backend, data: Dataset, horizon: int | None) -> str:
    """Hold out the end of the last trial, forecast it from the samples before, compare."""
    if tuple(data.variables) != tuple(model.variables_):
        return _note(
            f"No forecast: the data's variables ({_names(data.variables)}) differ from the "
            f"model's ({_names(model.variables_)})."
        )
    if model.inputs_ and tuple(data.inputs) != tuple(model.inputs_):
        return _note(
            f"No forecast: the model takes inputs {_names(model.inputs_)}, the data have "
            f"{_names(data.inputs)}."
        )
    trial = data.trials[-1]
    n, need = trial.n_samples, model.history_length
    wanted = horizon if horizon is not None else max(1, min(MAX_DEFAULT_HORIZON, n // 4))
    steps = min(wanted, n - need)
    if steps < 1:
        return _note(
            f"No forecast: the last trial has {n} samples, the model needs {need} of history "
            "and at least one more to compare with."
        )
    from dynid.api import check_step

    check_step(model, data)  # forecast and data are compared sample by sample
    split = n - steps
    future = trial.u[split:] if model.inputs_ and trial.u is not None else None
    predicted = np.asarray(model.simulate(trial.slice(0, split), steps, future), dtype=float)
    if predicted.shape != (steps, model.n_variables):
        expected = (steps, model.n_variables)
        return _error(f"The model returned a forecast of shape {predicted.shape}, not {expected}.")
    actual = trial.x[split:]
    notes = [
        f"Last trial: {split} samples of history, the following {steps} held out and forecast"
        + (" with the data's inputs." if future is not None else ".")
    ]
    start = split - min(split, max(steps, MIN_CONTEXT))
    # The forecast line starts at the last history sample so that it joins the data.
    t_pred = trial.t[split - 1 :]
    x_pred = np.vstack([trial.x[split - 1], predicted])
    time_label = data.time_column or "t"
    figures = [
        _figure(
            line_plot(
                [
                    Series("data", trial.t[start:], trial.x[start:, j]),
                    Series("forecast", t_pred, x_pred[:, j], dashed=True),
                ],
                title=name,
                xlabel=time_label,
                width=420,
                height=230,
                vlines=[float(trial.t[split - 1])],
            )
        )
        for j, name in enumerate(model.variables_)
    ]
    rmse = _rmse(predicted, actual)
    rows = list(zip(model.variables_, rmse.tolist()))
    return (
        "\n".join(_note(text) for text in notes)
        + "\n<div>" + "".join(figures) + "</div>\n"
        + table(rows, header=["variable", f"forecast RMSE over {steps} steps"])
    )


def _rmse(predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """(d,) root-mean-square error per column, skipping NaN (missing data); inf stays inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        squared = (predicted - actual) ** 2
    present = ~np.isnan(squared)
    counts = present.sum(axis=0)
    sums = np.where(present, squared, 0.0).sum(axis=0)
    return np.where(counts > 0, np.sqrt(sums / np.maximum(counts, 1)), np.nan)


# -- data ----------------------------------------------------------------------------------------
def data_section(data: Dataset, *, anchor: str) -> Section:
    """What was loaded as ``--data``: names, sizes and sampling."""
    rows = [
        ("source", data.source),
        ("variables", _names(data.variables)),
        ("inputs", _names(data.inputs)),
        ("trials", data.n_trials),
        ("samples", data.n_samples),
        ("dt", data.dt if data.dt is not None else "irregular"),
        ("time column", data.time_column or "none (sample index \u00d7 dt)"),
    ]
    body = table(rows, row_headers=True) + "".join(_note(n) for n in data.notes)
    return Section(anchor, f"Data: {data.source}", body)


# -- JSON results --------------------------------------------------------------------------------
def result_kind(doc: Any) -> str:
    """How to show ``doc``: its ``"kind"`` when it names one this report knows, ``generic``
    for any other kind; without ``"kind"``, ``legacy_kind``."""
    if has_kind(doc):
        return doc["kind"] if doc["kind"] in _RESULTS else "generic"
    return legacy_kind(doc)


def has_kind(doc: Any) -> bool:
    """Whether ``doc`` carries a ``"kind"`` (every document this dynid writes does)."""
    return isinstance(doc, dict) and isinstance(doc.get("kind"), str)


def kind_notice(doc: Any) -> str:
    """For a document without ``"kind"``, a sentence saying how it is read; else ""."""
    if has_kind(doc):
        return ""
    kind = legacy_kind(doc)
    if kind == "generic":
        return 'no "kind" field and not a known dynid result; shown as it is'
    return f'no "kind" field (an older dynid wrote it); read as {kind} by its keys'


def legacy_kind(doc: Any) -> str:
    """The kind of a document without ``"kind"`` (an older dynid's), from its keys: causal,
    symbolic, score, fit or generic."""
    if isinstance(doc, dict):
        if "edges" in doc and "adjacency" in doc:
            return documents.CAUSAL
        if "equations" in doc:
            return documents.SYMBOLIC
        if "valid_prediction_time" in doc:
            return documents.SCORE
        if "model_path" in doc and "metrics" in doc:
            return documents.FIT
    return "generic"


def result_section(path: str, doc: Any, *, anchor: str) -> Section:
    """``doc`` rendered by its kind; a document that looks like a kind but does not follow its
    shape is shown as a generic table below a note instead of failing the report."""
    kind = result_kind(doc)
    label, render = _RESULTS[kind]
    if kind == "generic" and has_kind(doc):
        label = f"Result ({doc['kind']})"
    notice = kind_notice(doc)
    notice = _note(notice[0].upper() + notice[1:] + ".") if notice else ""
    try:
        body = render(doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        body = _error(
            f"{path} looks like a {label.lower()} result but could not be read "
            f"({type(exc).__name__}: {exc}); shown as it is."
        ) + _generic(doc)
    return Section(anchor, f"{label}: {path}", notice + body)


def _others(doc: dict[str, Any], shown: Iterable[str]) -> str:
    """The fields a kind-specific section did not show, as a generic table."""
    rest = {k: v for k, v in doc.items() if k not in set(shown)}
    return _h3("Other fields") + _generic(rest) if rest else ""


def _causal(doc: dict[str, Any]) -> str:
    variables = [str(v) for v in doc["variables"]]
    d = len(variables)
    adjacency = np.array(doc["adjacency"], dtype=float)
    if adjacency.shape != (d, d):
        raise ValueError(f"adjacency is {adjacency.shape}, expected ({d}, {d})")
    edges = list(doc["edges"])
    significant = sorted(
        (e for e in edges if e.get("significant")),
        key=lambda e: (e.get("p_value") is None, e.get("p_value") or 0.0),
    )
    summary = table(
        [
            ("method", doc.get("method")),
            ("max lag", doc.get("max_lag")),
            ("alpha", doc.get("alpha")),
            ("variables", _names(variables)),
            ("edges tested", len(edges)),
            ("significant edges", len(significant)),
        ],
        row_headers=True,
    )
    score = adjacency
    if doc.get("score_matrix") is not None:
        score = np.array(doc["score_matrix"], dtype=float)
        score = score if score.shape == (d, d) else adjacency
    figure = _figure(
        heatmap(score, variables, variables, title="Causal links", row_title="source",
                col_title="target", outline=adjacency > 0),
        "Colour: score matrix (darker = more evidence); outlined: significant links (adjacency 1). "
        "Rows are sources, columns targets.",
    )
    rows, cut = _cut(
        [(e["source"], e["target"], e.get("lag"), e.get("strength"), e.get("p_value"))
         for e in significant],
        "significant edges",
    )
    listing = (
        table(rows, header=["source", "target", "lag", "strength", "p-value"]) + cut
        if rows
        else _note(f"No significant edges at alpha = {fmt(doc.get('alpha'))}.")
    )
    known = ("kind", "variables", "method", "max_lag", "alpha", "edges", "score_matrix", "adjacency")
    return (
        summary + figure + _h3("Significant edges (by p-value)") + listing + _others(doc, known)
    )


def _derivative(name: str) -> str:
    return f"d{name}/dt" if name.isidentifier() else f"d({name})/dt"


def _symbolic(doc: dict[str, Any]) -> str:
    equations = list(doc["equations"])
    symbols = {k: v for k, v in (doc.get("symbols") or {}).items() if k != v}
    info = [("variables", _names(doc.get("variables", []))), ("inputs", _names(doc.get("inputs", [])))]
    if symbols:
        info.append(("symbols", ", ".join(f"{k} = {v}" for k, v in symbols.items())))
    text = "\n".join(f"{_derivative(str(eq['lhs']))} = {eq['rhs']}" for eq in equations)
    terms = [(eq["lhs"], term) for eq in equations for term in eq.get("terms", [])]
    # Columns: term and coefficient first, then whatever else terms carry (inclusion
    # probabilities, intervals, ...) in order of first appearance.
    extra: list[str] = []
    for _, term in terms:
        extra.extend(k for k in term if k not in ("term", "coefficient", *extra))
    rows, cut = _cut(
        [(lhs, term.get("term"), term.get("coefficient"), *(term.get(k) for k in extra))
         for lhs, term in terms],
        "terms",
    )
    parts = [table(info, row_headers=True), _h3("Equations"), _pre(text)]
    if rows:
        parts += [_h3("Terms"), table(rows, header=["equation", "term", "coefficient", *extra]), cut]
    metrics = flatten(doc.get("metrics"))
    if metrics:
        parts += [_h3("Metrics"), table(metrics, row_headers=True)]
    parts.append(_others(doc, ("kind", "variables", "inputs", "symbols", "equations", "metrics")))
    return "".join(parts)


def _score(doc: dict[str, Any]) -> str:
    per_step = doc.get("rmse_per_step")
    body = table(flatten({k: v for k, v in doc.items() if k not in ("kind", "rmse_per_step")}), row_headers=True)
    if isinstance(per_step, list) and per_step:
        y = np.array(per_step, dtype=float)
        dt = doc.get("dt")
        steps = np.arange(1, y.size + 1, dtype=float)
        x, xlabel = (steps * dt, "lead time") if isinstance(dt, (int, float)) else (steps, "steps ahead")
        body += _figure(
            line_plot([Series("RMSE", x, y)], title="RMSE by forecast lead", xlabel=xlabel,
                      ylabel="RMSE"),
            f"Mean over {fmt(doc.get('starts'))} rollouts.",
        )
    return body


def _summary(doc: dict[str, Any]) -> str:
    return table(flatten({k: v for k, v in doc.items() if k != "kind"}), row_headers=True)


def _generic(doc: Any) -> str:
    if isinstance(doc, dict) and doc:
        rows = [
            (key, value if _is_scalar(value) else _pre(_json(value))) for key, value in doc.items()
        ]
        return table(rows, row_headers=True)
    return _pre(_json(doc))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


# Kinds (``dynid.documents``) with a section of their own; any other is shown by ``_generic``.
_RESULTS: dict[str, tuple[str, Callable[[Any], str]]] = {
    documents.CAUSAL: ("Causal discovery", _causal),
    documents.SYMBOLIC: ("Symbolic regression", _symbolic),
    documents.SCORE: ("Forecast score", _score),
    documents.FIT: ("Fit summary", _summary),
    documents.INFO: ("Model information", _summary),
    "generic": ("Result", _generic),
}
