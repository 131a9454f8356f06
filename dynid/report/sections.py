"""The report's sections, each registered in one place by what it applies to.

A model file's section is made of *model parts*: each registered with ``@model_part(heading,
applies=...)``, where ``applies`` is a capability predicate on the ``ModelContext`` (e.g. the
model has eigenvalues, data were given), so a backend adds its own part by one registration.
JSON results of other commands are rendered by the function registered for their ``"kind"``
with ``@result_renderer(kind, label)``; any other kind gets a generic table. A document without
``"kind"`` (written by an older dynid) is recognised by its keys, with a note saying so.
Every table goes through ``html.table`` and every value through ``fmt`` and ``esc``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dynid import documents
from dynid.data.dataset import Dataset
from dynid.errors import DynidError
from dynid.modelfile import ModelFile
from dynid.models.base import Backend
from dynid.report.html import (
    cut, error, figure, fingerprint_cell, flatten, h3, hyperparameter_cell, names, note, pre,
    table,
)
from dynid.report.svg import Series, eigenvalue_plot, esc, fmt, line_plot
from dynid.report.symbolic import equation_document, symbolic_body, without_equations
from dynid.report.template import Section
from dynid.training.loop import TRAINING_CURVE

# -- the registries ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelContext:
    """What a model part may draw on: the model, its file's metadata, the ``--data`` and the
    ``--test`` data (each or None), the requested forecast horizon in samples (None: the
    default) and ``shared`` results that parts compute once for the others."""

    model: Backend
    meta: dict[str, Any]
    data: Dataset | None
    horizon: int | None
    test: Dataset | None = None
    # What several parts (and the comparison table) draw on and is costly to compute (the long
    # free run score scores), by name.
    shared: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def held_out(self) -> Dataset | None:
        """The data forecasts are judged on: ``--test`` when given, else ``--data``."""
        return self.test if self.test is not None else self.data


@dataclass(frozen=True)
class ModelPart:
    """One part of a model's section: ``heading(ctx)``, shown when ``applies(ctx)``;
    ``render(ctx)`` returns HTML, or None when it turns out to have nothing to show."""

    heading: Callable[[ModelContext], str]
    render: Callable[[ModelContext], str | None]
    applies: Callable[[ModelContext], bool]


MODEL_PARTS: list[ModelPart] = []
ModelRender = Callable[[ModelContext], "str | None"]


def _always(ctx: ModelContext) -> bool:
    return True


def model_part(
    heading: str | Callable[[ModelContext], str],
    *,
    applies: Callable[[ModelContext], bool] = _always,
) -> Callable[[ModelRender], ModelRender]:
    """Register the decorated ``render(ctx)`` as a part of every model section where
    ``applies(ctx)``, after the parts registered before it. ``heading``: text or a function of
    the context."""
    heading_of = heading if callable(heading) else (lambda ctx, text=heading: text)

    def register(render: ModelRender) -> ModelRender:
        MODEL_PARTS.append(ModelPart(heading_of, render, applies))
        return render

    return register


ResultRender = Callable[[Any], str]
# kind -> (section label, render); "generic" renders any kind without one of its own.
RESULT_RENDERERS: dict[str, tuple[str, ResultRender]] = {}


def result_renderer(kind: str, label: str) -> Callable[[ResultRender], ResultRender]:
    """Register the decorated ``render(doc)`` for JSON documents of ``kind``."""

    def register(render: ResultRender) -> ResultRender:
        if kind in RESULT_RENDERERS:
            raise ValueError(f"a renderer for kind {kind!r} is already registered")
        RESULT_RENDERERS[kind] = (label, render)
        return render

    return register


# -- model files ---------------------------------------------------------------------------------
def model_section(
    path: str,
    model_file: ModelFile,
    data: Dataset | None,
    *,
    horizon: int | None,
    anchor: str,
    test: Dataset | None = None,
    shared: dict[Any, Any] | None = None,
) -> Section:
    """Every registered model part that applies (metadata, fit metrics, equations, eigenvalues,
    with ``data`` a held-out forecast, ...), in registration order. ``shared``: the model's
    results computed once for the whole report (``ModelContext.shared``), e.g. by the
    comparison table."""
    model, meta = model_file.model, model_file.metadata
    ctx = ModelContext(model, meta, data, horizon, test, {} if shared is None else shared)
    parts = [_block(part.heading(ctx), lambda p=part: p.render(ctx)) for part in MODEL_PARTS
             if part.applies(ctx)]
    backend = meta.get("backend", model.name)
    return Section(anchor, f"Model: {path} ({backend})", "\n".join(p for p in parts if p))


def _block(heading: str, render: Callable[[], str | None]) -> str:
    """``render()`` under a heading; "" when it has nothing to show; a dynid error's message in
    place of the content, so one failing part does not sink the report."""
    try:
        body = render()
    except DynidError as exc:
        body = error(f"{heading}: {exc}")
    return "" if body is None else h3(heading) + "\n" + body


@model_part("Metadata")
def _metadata(ctx: ModelContext) -> str:
    return table(_metadata_rows(ctx.model, ctx.meta), row_headers=True)


@model_part("Fit metrics")
def _fit_metrics(ctx: ModelContext) -> str:
    # The training curve has its own figure (``fitting``), an equation model's per-equation
    # metrics theirs (``_equations``), not rows of elided structures.
    recorded = ctx.meta.get("metrics", ctx.model.metrics_) or {}
    if equation_document(ctx.model) is not None:
        recorded = without_equations(recorded)
    metrics = flatten({k: v for k, v in recorded.items() if k != TRAINING_CURVE})
    return table(metrics, row_headers=True) if metrics else note("No fit metrics recorded.")


def _metadata_rows(model: Backend, meta: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("backend", meta.get("backend", model.name)),
        ("dynid version", meta.get("dynid_version")),
        ("created (UTC)", meta.get("created_utc")),
        ("hyperparameters", hyperparameter_cell(model, meta)),
        ("variables", names(model.variables_)),
        ("inputs", names(model.inputs_)),
        ("dt", model.dt_),
        ("samples", meta.get("n_samples")),
        ("trials", meta.get("n_trials")),
        ("data source", meta.get("data_source")),
        ("data sha256", fingerprint_cell(meta.get("data_fingerprint"))),
        ("seed", meta.get("seed")),
        ("device", meta.get("device")),
        ("fit seconds", meta.get("fit_seconds")),
    ]


@model_part("Equations", applies=lambda ctx: bool(ctx.model.equation_lines()))
def _equations(ctx: ModelContext) -> str | None:
    doc = equation_document(ctx.model)
    if doc is not None:  # typeset, with intervals and the Pareto front
        return symbolic_body(doc, with_metrics=False)
    lines = ctx.model.equation_lines()
    return None if not lines else pre("\n".join(lines))


@model_part("Eigenvalues", applies=lambda ctx: ctx.model.eigenvalues() is not None)
def _eigenvalues(ctx: ModelContext) -> str | None:
    model = ctx.model
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
    rows, cut_note = cut(rows, "eigenvalues")
    header = ["eigenvalue", "modulus", "growth rate ln|\u03bb|/dt", "frequency arg \u03bb/(2\u03c0 dt)"]
    return figure(eigenvalue_plot(values), caption) + table(rows, header=header) + cut_note


# -- JSON results --------------------------------------------------------------------------------
def result_kind(doc: Any) -> str:
    """How to show ``doc``: its ``"kind"`` when it names one this report knows, ``generic``
    for any other kind; without ``"kind"``, ``legacy_kind``."""
    if has_kind(doc):
        return doc["kind"] if doc["kind"] in RESULT_RENDERERS else "generic"
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
    label, render = RESULT_RENDERERS[kind]
    if kind == "generic" and has_kind(doc):
        label = f"Result ({doc['kind']})"
    notice = kind_notice(doc)
    notice = note(notice[0].upper() + notice[1:] + ".") if notice else ""
    try:
        body = render(doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        body = error(
            f"{path} looks like a {label.lower()} result but could not be read "
            f"({type(exc).__name__}: {exc}); shown as it is."
        ) + _generic(doc)
    return Section(anchor, f"{label}: {path}", notice + body)


def _others(doc: dict[str, Any], shown: Iterable[str]) -> str:
    """The fields a kind-specific section did not show, as a generic table."""
    rest = {k: v for k, v in doc.items() if k not in set(shown)}
    return h3("Other fields") + _generic(rest) if rest else ""




@result_renderer(documents.SYMBOLIC, "Symbolic regression")
def _symbolic(doc: dict[str, Any]) -> str:
    info = [("variables", names(doc.get("variables", []))), ("inputs", names(doc.get("inputs", [])))]
    if doc.get("discrete"):
        info.append(("time", "discrete (a map x[k+1] = f(x[k]))"))
    known = ("kind", "variables", "inputs", "symbols", "discrete", "equations", "metrics")
    return table(info, row_headers=True) + h3("Equations") + symbolic_body(doc) + _others(doc, known)


@result_renderer(documents.SCORE, "Forecast score")
def _score(doc: dict[str, Any]) -> str:
    per_step = doc.get("rmse_per_step")
    body = table(flatten({k: v for k, v in doc.items() if k not in ("kind", "rmse_per_step")}), row_headers=True)
    if isinstance(per_step, list) and per_step:
        y = np.array(per_step, dtype=float)
        dt = doc.get("dt")
        steps = np.arange(1, y.size + 1, dtype=float)
        x, xlabel = (steps * dt, "lead time") if isinstance(dt, (int, float)) else (steps, "steps ahead")
        body += figure(
            line_plot([Series("RMSE", x, y)], title="RMSE by forecast lead", xlabel=xlabel,
                      ylabel="RMSE"),
            f"Mean over {fmt(doc.get('starts'))} rollouts.",
        )
    return body


@result_renderer(documents.FIT, "Fit summary")
@result_renderer(documents.INFO, "Model information")
def _summary(doc: dict[str, Any]) -> str:
    return table(flatten({k: v for k, v in doc.items() if k != "kind"}), row_headers=True)


@result_renderer("generic", "Result")
def _generic(doc: Any) -> str:
    """Any document as a table of its leaves (dotted keys; lists shown compactly), never as a
    raw dump."""
    rows = flatten(doc) if isinstance(doc, dict) else [("value", doc)]
    return table(rows, row_headers=True) if rows else note("Empty.")
