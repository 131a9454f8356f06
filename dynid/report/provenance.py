"""The provenance section: how the report and each model in it were made, so that a reader can
redo either (dynid version, command line, data fingerprints, hyperparameters, seed, device,
timings)."""

from __future__ import annotations

import platform
from dataclasses import dataclass

import numpy as np

from dynid import __version__
from dynid.data.dataset import Dataset
from dynid.modelfile import ModelFile
from dynid.report.html import fingerprint_cell, h3, hyperparameter_cell, note, table
from dynid.report.template import Section


@dataclass(frozen=True)
class ReportRun:
    """This report's own making: ``command_line`` (None when built from Python),
    ``generated_utc`` and ``seconds`` spent building it."""

    command_line: str | None
    generated_utc: str
    seconds: float


def provenance_section(
    run: ReportRun,
    models: list[tuple[str, ModelFile]],
    datasets: list[tuple[str, Dataset]],
    *,
    anchor: str,
) -> Section:
    """The report's run, the data it read (option, source, fingerprint, size) and each model's
    fit (who, when, on what, with which settings, how long)."""
    report_rows = [
        ("command line", run.command_line or "none (built from Python)"),
        ("dynid version", __version__),
        ("generated (UTC)", run.generated_utc),
        ("build seconds", run.seconds),
        ("python", platform.python_version()),
        ("numpy", np.__version__),
        ("platform", platform.platform(terse=True)),
    ]
    parts = [h3("This report"), table(report_rows, row_headers=True)]
    if datasets:
        rows = [(option, d.source, fingerprint_cell(d.fingerprint()), d.n_trials, d.n_samples)
                for option, d in datasets]
        parts += [h3("Data read"),
                  table(rows, header=["option", "source", "sha256", "trials", "samples"])]
    if models:
        rows = [
            (
                path,
                meta.get("backend", mf.model.name),
                meta.get("dynid_version"),
                meta.get("created_utc"),
                meta.get("command_line", "not recorded"),
                meta.get("data_source"),
                fingerprint_cell(meta.get("data_fingerprint")),
                hyperparameter_cell(mf.model, meta),
                meta.get("seed"),
                meta.get("device"),
                meta.get("fit_seconds"),
            )
            for path, mf in models
            for meta in [mf.metadata]
        ]
        header = ["model", "backend", "dynid", "created (UTC)", "command line", "data source",
                  "data sha256", "hyperparameters", "seed", "device", "fit seconds"]
        parts += [h3("Models"), table(rows, header=header)]
        if any("command_line" not in mf.metadata for _, mf in models):
            parts.append(note("A model file records no command line when the dynid that wrote it "
                              "did not; its other fields give the fit's settings."))
    return Section(anchor, "Provenance", "\n".join(parts))
