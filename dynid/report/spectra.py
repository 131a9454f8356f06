"""The power-spectra model part: each variable's Welch spectrum of the data against that of
the model's free run that score scores (``dynamics.score_run``), on log-log axes; a model that
reproduces the dynamics (not only the next step) matches the data's peaks. Registers itself with ``sections.model_part``."""

from __future__ import annotations

import numpy as np

from dynid.report.dynamics import free_runnable, held_out_run, measure_sentence, run_description
from dynid.report.html import figure, note
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, line_plot

# Welch segments of at most this many samples (finer frequency resolution costs variance).
MAX_SEGMENT = 512
# Fewer finite samples than this give no spectrum worth drawing.
MIN_SAMPLES = 16


def welch_spectrum(x: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(frequencies (f,) in cycles per time unit, power spectral density (f, d)) of ``x``
    (n, d) sampled every ``dt``, by Welch's method on its longest NaN-free stretch, without
    the zero frequency; None when that stretch is shorter than ``MIN_SAMPLES``."""
    from scipy.signal import welch

    finite = np.all(np.isfinite(x), axis=1)
    edges = np.flatnonzero(np.diff(np.r_[0, finite.astype(np.int8), 0]))
    if edges.size == 0:
        return None
    lengths = edges[1::2] - edges[::2]
    longest = int(np.argmax(lengths))
    start, stop = int(edges[2 * longest]), int(edges[2 * longest + 1])
    if stop - start < MIN_SAMPLES:
        return None
    frequencies, power = welch(x[start:stop], fs=1.0 / dt, nperseg=min(MAX_SEGMENT, stop - start),
                               axis=0)
    return frequencies[1:], power[1:]


@model_part("Power spectra", applies=lambda ctx: free_runnable(ctx) and ctx.model.dt_ is not None)
def _power_spectra(ctx: ModelContext) -> str | None:
    from dynid.api import longest_gap_free_stretch

    data, run = held_out_run(ctx)
    model = ctx.model
    # D_H's reference: the data's longest stretch without gaps.
    stretch = longest_gap_free_stretch(data)
    observed = welch_spectrum(stretch, model.dt_)
    if observed is None:
        return None
    # A run that has diverged is NaN from there on: its spectrum is of the steps before.
    simulated = welch_spectrum(run.states, model.dt_)
    figures = []
    # Both axes logarithmic: the slow oscillations that carry most of the power sit in the
    # first few bins of a linear frequency axis.
    for j, name in enumerate(model.variables_):
        series = [Series("data", _log10(observed[0]), _log10(observed[1][:, j]))]
        if simulated is not None:
            series.append(Series("model", _log10(simulated[0]), _log10(simulated[1][:, j]),
                                 dashed=True))
        figures.append(figure(line_plot(series, title=name, xlabel="log10 frequency (1/time)",
                                        ylabel="log10 power", width=320, height=240)))
    caption = (
        f"Welch power spectral density of the longest stretch without gaps of {data.source} "
        f"({stretch.shape[0]:,} samples) and of {run_description(data, run, model)}."
        + measure_sentence(ctx, "D_H", "d_h")
    )
    if run.diverged_at is not None and simulated is not None:
        caption += (f" The free run diverges at step {run.diverged_at} (as the phase portrait "
                    f"says): its spectrum is of the {run.diverged_at - 1} steps before.")
    if simulated is None:
        caption += " The free run diverges too early for a spectrum of its own."
    return "<div>" + "".join(figures) + "</div>" + note(caption)


def _log10(values: np.ndarray) -> np.ndarray:
    """log10 of frequencies or powers, NaN (a gap) where one is zero."""
    with np.errstate(divide="ignore"):
        return np.where(values > 0, np.log10(np.where(values > 0, values, 1.0)), np.nan)
