"""The data overview section: what ``--data`` holds, how it was sampled, where values are
missing, and every series drawn in full (long ones reduced to min/max per pixel column by
``svg.line_plot``, never cut)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.data.dataset import Dataset
from dynid.report.html import cut, figure, h3, names, note, table
from dynid.report.svg import PALETTE, Series, histogram_plot, line_plot
from dynid.report.template import Section

# Trials beyond this many share one colour and one legend entry in the overview plots.
MAX_LEGEND_TRIALS = len(PALETTE)
OTHER_TRIALS_COLOR = "#888888"
STEP_BINS = 30


@dataclass(frozen=True)
class NanSegment:
    """A run of consecutive missing values of one column: samples ``start`` to ``stop - 1``
    of trial ``trial``."""

    trial: int
    column: str
    start: int
    stop: int


def nan_segments(data: Dataset) -> list[NanSegment]:
    """Every run of NaN in every state and input column, by trial, then column, then time."""
    segments = []
    for index, trial in enumerate(data.trials):
        columns = [(name, trial.x[:, j]) for j, name in enumerate(data.variables)]
        if trial.u is not None:
            columns += [(name, trial.u[:, j]) for j, name in enumerate(data.inputs)]
        for name, values in columns:
            missing = np.isnan(values).astype(np.int8)
            edges = np.diff(np.r_[0, missing, 0])
            for start, stop in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
                segments.append(NanSegment(index, name, int(start), int(stop)))
    return segments


def data_section(data: Dataset, *, anchor: str) -> Section:
    """Names, sizes, sampling, per-variable ranges, trials, missing values and an overview
    plot of every variable and input across all trials."""
    summary = [
        ("source", data.source),
        ("variables", names(data.variables)),
        ("inputs", names(data.inputs)),
        ("trials", data.n_trials),
        ("samples", data.n_samples),
        ("dt", data.dt if data.dt is not None else "irregular"),
        ("time column", data.time_column or "none (sample index \u00d7 dt)"),
    ]
    parts = [
        table(summary, row_headers=True) + "".join(note(n) for n in data.notes),
        h3("Ranges"),
        _ranges(data),
        h3("Sampling"),
        _sampling(data),
        h3("Trials"),
        _trials(data),
        h3("Missing values"),
        _missing(data),
        h3("Overview"),
        _overview(data),
    ]
    return Section(anchor, f"Data: {data.source}", "\n".join(parts))


def _columns(data: Dataset) -> list[tuple[str, list[np.ndarray]]]:
    """(name, one (n_i,) array per trial) for every state, then every input."""
    columns = [(name, [t.x[:, j] for t in data.trials]) for j, name in enumerate(data.variables)]
    columns += [
        (name, [t.u[:, j] for t in data.trials if t.u is not None])
        for j, name in enumerate(data.inputs)
    ]
    return columns


def _ranges(data: Dataset) -> str:
    rows = []
    for name, pieces in _columns(data):
        values = np.concatenate(pieces) if pieces else np.zeros(0)
        finite = values[np.isfinite(values)]
        stats = (
            (float(finite.min()), float(finite.max()), float(finite.mean()), float(finite.std()))
            if finite.size
            else (None, None, None, None)
        )
        rows.append((name, *stats, int(values.size - finite.size)))
    return table(rows, header=["column", "min", "max", "mean", "std", "missing"])


def _sampling(data: Dataset) -> str:
    steps = np.concatenate([np.diff(t.t) for t in data.trials]) if data.trials else np.zeros(0)
    if steps.size == 0:
        return note("No trial has two samples: no sampling step to show.")
    if data.dt is not None:
        return note(f"Uniform step dt = {data.dt:.6g} in every trial ({steps.size} steps).")
    counts, edges = np.histogram(steps, bins=STEP_BINS)
    caption = (
        f"Irregular sampling: {steps.size} steps from {steps.min():.4g} to {steps.max():.4g}, "
        f"median {np.median(steps):.4g}."
    )
    return figure(histogram_plot(edges, counts, title="Sampling steps", xlabel="step"), caption)


def _trials(data: Dataset) -> str:
    rows, cut_note = cut(
        [(i, t.n_samples, float(t.t[0]), float(t.t[-1])) for i, t in enumerate(data.trials)],
        "trials",
    )
    return table(rows, header=["trial", "samples", "first time", "last time"]) + cut_note


def _missing(data: Dataset) -> str:
    segments = nan_segments(data)
    if not segments:
        return note("No missing values.")
    rows, cut_note = cut(
        [
            (s.trial, s.column, float(data.trials[s.trial].t[s.start]),
             float(data.trials[s.trial].t[s.stop - 1]), s.stop - s.start)
            for s in segments
        ],
        "missing-value runs",
    )
    header = ["trial", "column", "first time", "last time", "samples"]
    return (
        note(f"{len(segments)} runs of missing values (NaN); they show as gaps below.")
        + table(rows, header=header)
        + cut_note
    )


def _overview(data: Dataset) -> str:
    time_label = data.time_column or "t"
    figures = []
    for name, pieces in _columns(data):
        series = [
            Series(_trial_label(i, data.n_trials), trial.t, values,
                   color=None if i < MAX_LEGEND_TRIALS else OTHER_TRIALS_COLOR)
            for i, (trial, values) in enumerate(zip(data.trials, pieces))
        ]
        if data.n_trials == 1:
            series = [Series(name, series[0].x, series[0].y)]
        figures.append(figure(line_plot(series, title=name, xlabel=time_label, height=200)))
    caption = (
        "Every sample is drawn: long series are reduced to their minimum and maximum per "
        "pixel column, which covers the same pixels."
    )
    return "<div>" + "".join(figures) + "</div>" + note(caption)


def _trial_label(index: int, n_trials: int) -> str:
    """Legend text of trial ``index``: its own below ``MAX_LEGEND_TRIALS``, then one entry for
    all the rest (drawn in one colour)."""
    if index < MAX_LEGEND_TRIALS:
        return f"trial {index}"
    return f"trials {MAX_LEGEND_TRIALS}\u2013{n_trials - 1}" if index == MAX_LEGEND_TRIALS else ""
