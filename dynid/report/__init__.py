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
    """
    started = time.perf_counter()
    if horizon is not None and horizon < 1:
        raise UsageError(f"--horizon {horizon}: must be at least 1")
    sections: list[Section] = []
    if data is not None:
        sections.append(data_section(data, anchor=f"s{len(sections) + 1}"))
    held_out = test if test is not None else data
    # Per model, what the table and its section both draw on (score's free run), computed once.
    shared: list[dict[Any, Any]] = [{} for _ in models]
    if len(models) > 1 and held_out is not None:
        sections.append(comparison_section(models, held_out, horizon=horizon,
                                           anchor=f"s{len(sections) + 1}", shared=shared))
    for (path, model_file), cache in zip(models, shared):
        sections.append(
            model_section(path, model_file, data, horizon=horizon, test=test,
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
