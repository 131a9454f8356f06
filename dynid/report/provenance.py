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
        # One column per model, one row per field: reads on a laptop screen for many models.
        fields = [
            ("backend", lambda mf: mf.metadata.get("backend", mf.model.name)),
            ("dynid version", lambda mf: mf.metadata.get("dynid_version")),
            ("created (UTC)", lambda mf: mf.metadata.get("created_utc")),
            ("command line", lambda mf: mf.metadata.get("command_line", "not recorded")),
            ("data source", lambda mf: mf.metadata.get("data_source")),
            ("data sha256", lambda mf: fingerprint_cell(mf.metadata.get("data_fingerprint"))),
            ("hyperparameters", lambda mf: hyperparameter_cell(mf.model, mf.metadata)),
            ("seed", lambda mf: mf.metadata.get("seed")),
            ("device", lambda mf: mf.metadata.get("device")),
            ("fit seconds", lambda mf: mf.metadata.get("fit_seconds")),
        ]
        rows = [(label, *(value(mf) for _, mf in models)) for label, value in fields]
        parts += [h3("Models"), table(rows, header=["", *(path for path, _ in models)],
                                      row_headers=True)]
        if any("command_line" not in mf.metadata for _, mf in models):
            parts.append(note("A model file records no command line when the dynid that wrote it "
                              "did not; its other fields give the fit's settings."))
    return Section(anchor, "Provenance", "\n".join(parts))
