"""Forecasts judged on held-out data: the window (``held_out_forecast``), its figures with one
or several models overlaid (``forecast_figures``), the model part that shows one model's, and
the honest note on whether the window was seen in fitting (``training_overlap``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.models.base import Backend
from dynid.report.html import error, figure, names, note, table
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, line_plot

# Default held-out window: a quarter of the last trial, at most this many samples.
MAX_DEFAULT_HORIZON = 200
# Samples of data drawn before the held-out window, at least (more when the window is long).
MIN_CONTEXT = 20


class ForecastShapeError(ValueError):
    """A backend returned a forecast of the wrong shape (shown in its place in the report)."""


@dataclass(frozen=True)
class HeldOutForecast:
    """The last ``steps`` samples of ``trial`` forecast from the ``split`` before them:
    ``predicted`` (steps, d) against ``trial.x[split:]``; ``driven``: with the data's inputs."""

    trial: Trial
    split: int
    predicted: np.ndarray
    driven: bool

    @property
    def steps(self) -> int:
        return self.predicted.shape[0]

    @property
    def actual(self) -> np.ndarray:
        return self.trial.x[self.split :]


def data_mismatch(model: Backend, data: Dataset) -> str:
    """Why ``model`` cannot be run on ``data`` (other variables or inputs), or ""."""
    if tuple(data.variables) != tuple(model.variables_):
        return (
            f"the data's variables ({names(data.variables)}) differ from the model's "
            f"({names(model.variables_)})"
        )
    if model.inputs_ and tuple(data.inputs) != tuple(model.inputs_):
        return f"the model takes inputs {names(model.inputs_)}, the data have {names(data.inputs)}"
    return ""


def default_steps(data: Dataset, horizon: int | None) -> int:
    """Samples held out of the last trial: ``horizon``, else a quarter of it, at most 200."""
    n = data.trials[-1].n_samples
    return horizon if horizon is not None else max(1, min(MAX_DEFAULT_HORIZON, n // 4))


def held_out_forecast(model: Backend, data: Dataset, steps: int) -> HeldOutForecast | str:
    """``model``'s forecast of the last ``steps`` samples of the last trial of ``data`` (fewer
    when the trial is short), or the reason there is none. DataError from the model or
    ``check_step`` propagates; ForecastShapeError when the model's output has the wrong shape."""
    mismatch = data_mismatch(model, data)
    if mismatch:
        return f"No forecast: {mismatch}."
    trial = data.trials[-1]
    n, need = trial.n_samples, model.history_length
    steps = min(steps, n - need)
    if steps < 1:
        return (
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
        raise ForecastShapeError(f"The model returned a forecast of shape {predicted.shape}, not {expected}.")
    return HeldOutForecast(trial, split, predicted, driven=future is not None)


def forecast_figures(
    forecasts: list[tuple[str, HeldOutForecast]], variables: tuple[str, ...] | list[str],
    time_label: str,
) -> str:
    """One plot per variable: the data around the window and each (label, forecast) dashed.
    All forecasts share one window (the same trial and split)."""
    trial, split, steps = forecasts[0][1].trial, forecasts[0][1].split, forecasts[0][1].steps
    start = split - min(split, max(steps, MIN_CONTEXT))
    # Forecast lines start at the last history sample so that they join the data.
    t_pred = trial.t[split - 1 :]
    figures = []
    for j, name in enumerate(variables):
        series = [Series("data", trial.t[start:], trial.x[start:, j])]
        series += [
            Series(label, t_pred, np.r_[trial.x[split - 1, j], f.predicted[:, j]], dashed=True)
            for label, f in forecasts
        ]
        figures.append(
            figure(line_plot(series, title=name, xlabel=time_label, width=420, height=230,
                             vlines=[float(trial.t[split - 1])]))
        )
    return "<div>" + "".join(figures) + "</div>"


def seen_in_fitting(meta: dict[str, Any], data: Dataset) -> bool | None:
    """Whether ``data`` are the data the model was fitted on, by the fingerprint its file
    records (None: it records none)."""
    recorded = meta.get("data_fingerprint")
    return recorded == data.fingerprint() if isinstance(recorded, str) else None


def training_overlap(meta: dict[str, Any], data: Dataset, *, from_test: bool) -> str:
    """A sentence on ``seen_in_fitting``: a forecast inside the training data measures fit, not
    generalisation."""
    seen = seen_in_fitting(meta, data)
    if seen is None:
        return (
            "The model file records no data fingerprint: whether these samples were used in "
            "fitting is unknown."
        )
    option = "--test" if from_test else "--data"
    if seen:
        return (
            f"Not held out: the {option} data are the data this model was fitted on (same "
            "fingerprint), so the window above lies inside the training data and measures fit, "
            "not forecasting; pass --test with data the fit did not see."
        )
    return (
        f"The {option} data differ from the data this model was fitted on (another "
        "fingerprint)" + ("." if from_test else "; if they contain those data, the window may "
                          "still overlap them: --test says so exactly.")
    )


def rmse(predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """(d,) root-mean-square error per column, skipping NaN (missing data); inf stays inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        squared = (predicted - actual) ** 2
    present = ~np.isnan(squared)
    counts = present.sum(axis=0)
    sums = np.where(present, squared, 0.0).sum(axis=0)
    return np.where(counts > 0, np.sqrt(sums / np.maximum(counts, 1)), np.nan)


def _heading(ctx: ModelContext) -> str:
    held_out = ctx.held_out
    source = held_out.source if held_out is not None else ""
    return f"Forecast on {source}" + (" (--test)" if ctx.test is not None else "")


@model_part(_heading, applies=lambda ctx: ctx.held_out is not None)
def _forecast(ctx: ModelContext) -> str | None:
    """Hold out the end of the last trial, forecast it from the samples before, compare."""
    data = ctx.held_out
    if data is None:  # not reached: ``applies`` asks for data; narrows the type
        return None
    try:
        result = held_out_forecast(ctx.model, data, default_steps(data, ctx.horizon))
    except ForecastShapeError as exc:
        return error(str(exc))
    if isinstance(result, str):
        return note(result)
    notes = [
        f"Last trial: {result.split} samples of history, the following {result.steps} held out "
        "and forecast" + (" with the data's inputs." if result.driven else "."),
        training_overlap(ctx.meta, data, from_test=ctx.test is not None),
    ]
    rows = list(zip(ctx.model.variables_, rmse(result.predicted, result.actual).tolist()))
    return (
        "\n".join(note(text) for text in notes)
        + "\n" + forecast_figures([("forecast", result)], ctx.model.variables_,
                                  data.time_column or "t") + "\n"
        + table(rows, header=["variable", f"forecast RMSE over {result.steps} steps"])
    )
