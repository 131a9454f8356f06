"""``dynid report``: one self-contained HTML page from model files and JSON results.

The page needs no network and, unless ``interactive``, no script: figures are inline SVG drawn
by ``svg``, the stylesheet (and the optional script) is embedded by ``template``, and
``sections`` turns each input into HTML through its registries of model parts and result
renderers (``html`` holds the shared building blocks). Writing the file is the caller's business
(the CLI writes the returned string atomically).
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import Any

from dynid import __version__
from dynid.data.dataset import Dataset
from dynid.errors import UsageError
from dynid.modelfile import ModelFile
# Registering their model parts, in the order they appear in each model's section.
from dynid.report import forecast, dynamics, fitting, spectra, regimes, causal, energy, latent, sde  # noqa: F401,I001
from dynid.report.compare import comparison_section
from dynid.report.overview import data_section
from dynid.report.provenance import ReportRun, provenance_section
from dynid.report.sections import model_section, result_section
from dynid.report.template import Section, render_page

__all__ = ["build_report"]


def build_report(
    models: list[tuple[str, ModelFile]],
    results: list[tuple[str, dict[str, Any]]],
    data: Dataset | None = None,
    *,
    test: Dataset | None = None,
    horizon: int | None = None,
    title: str = "dynid report",
    command_line: str | None = None,
    interactive: bool = False,
    model_data: list[tuple[Dataset | None, Dataset | None]] | None = None,
) -> str:
    """The report as one HTML document (a string).

    models: (path, loaded model file) pairs, one section each; results: (path, parsed JSON) pairs
    from other dynid commands, one section each, by kind (causal, symbolic, score, fit, other).
    data: when given, described in its own section and used for a forecast of every model with
    the same variables: the last ``horizon`` samples of its last trial (default: a quarter of
    the trial, at most 200). test: truly held-out data; when given, forecasts are judged on its
    last trial instead. Each forecast says whether its data are the model's training data
    (by the fingerprint the model file records). Several models and data: a comparison table
    first. command_line: how the report was asked for, for its provenance section (last).
    interactive: zoom, pan and a coordinate read-out on the figures (one inline script).
    model_data: each model's own (data, test), e.g. the same file read with each model's
    variables (default: ``data`` and ``test`` for every model); models given the same data
    objects are compared in one table, one table per such group of two or more.
    """
    started = time.perf_counter()
    if horizon is not None and horizon < 1:
        raise UsageError(f"--horizon {horizon}: must be at least 1")
    sections: list[Section] = []
    if data is not None:
        sections.append(data_section(data, anchor=f"s{len(sections) + 1}"))
    pairs = [(data, test)] * len(models) if model_data is None else model_data
    if len(pairs) != len(models):
        raise ValueError(f"model_data: {len(pairs)} (data, test) pairs for {len(models)} models")
    # Per model, what the table and its section both draw on (score's free run), computed once.
    shared: list[dict[Any, Any]] = [{} for _ in models]
    groups = _held_out_groups(pairs)
    for held_out, members in groups:
        if len(members) > 1:  # titled by the variables where other models are judged on other data
            sections.append(comparison_section([models[i] for i in members], held_out, horizon=horizon,
                                               anchor=f"s{len(sections) + 1}", shared=[shared[i] for i in members],
                                               name_variables=len(groups) > 1))
    for (path, model_file), (own_data, own_test), cache in zip(models, pairs, shared):
        sections.append(
            model_section(path, model_file, own_data, horizon=horizon, test=own_test,
                          anchor=f"s{len(sections) + 1}", shared=cache)
        )
    for path, doc in results:
        sections.append(result_section(path, doc, anchor=f"s{len(sections) + 1}"))
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    if models or data is not None or test is not None:
        datasets = [(option, d) for option, d in (("--data", data), ("--test", test)) if d is not None]
        run = ReportRun(command_line, generated, time.perf_counter() - started)
        sections.append(provenance_section(run, models, datasets, anchor=f"s{len(sections) + 1}"))
    return render_page(title, sections, generated_utc=generated, version=__version__,
                       interactive=interactive)


def _held_out_groups(pairs: list[tuple[Dataset | None, Dataset | None]]) -> list[tuple[Dataset, list[int]]]:
    """(held-out data, indices of the models judged on it) for every held-out dataset (the
    test data, else the data), in the order first given: errors normalised on different data
    (other variables) are not comparable in one table."""
    groups: dict[int, tuple[Dataset, list[int]]] = {}
    for index, (data, test) in enumerate(pairs):
        held_out = test if test is not None else data
        if held_out is not None:
            groups.setdefault(id(held_out), (held_out, []))[1].append(index)
    return list(groups.values())
