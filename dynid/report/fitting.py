"""Model parts on how well a model was fitted and how far ahead it holds: the training curve
(per-epoch losses that the training loop stores in the fit metrics) and the multi-step error
against the horizon on the held-out data. Each registers itself with ``sections.model_part``."""

from __future__ import annotations

from typing import Any

import numpy as np

from dynid.metrics.forecast import VPT_THRESHOLD
from dynid.report.forecast import data_mismatch, default_steps
from dynid.report.html import figure, note
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, fmt, line_plot
from dynid.training.loop import TRAINING_CURVE

# Rollouts from this many start points, spread evenly over the held-out trials, at most.
HORIZON_STARTS = 10


def training_curve(meta: dict[str, Any], metrics: dict[str, Any]) -> dict[str, list] | None:
    """The ``TRAINING_CURVE`` entry of a model's fit metrics (the file's, else the model's), or
    None when it has none or it is malformed (lists of unequal length)."""
    curve = (meta.get("metrics") or metrics or {}).get(TRAINING_CURVE)
    if not isinstance(curve, dict) or not isinstance(curve.get("epoch"), list):
        return None
    n = len(curve["epoch"])
    lists = [curve.get(k) for k in ("loss", "validation_loss") if k in curve]
    return curve if n and all(isinstance(v, list) and len(v) == n for v in lists) else None


def _has_curve(ctx: ModelContext) -> bool:
    return training_curve(ctx.meta, ctx.model.metrics_) is not None


@model_part("Training curve", applies=_has_curve)
def _training_curve(ctx: ModelContext) -> str | None:
    curve = training_curve(ctx.meta, ctx.model.metrics_)
    if curve is None:  # not reached: ``applies`` asks for a curve; narrows the type
        return None
    epochs = np.array(curve["epoch"], dtype=float)
    series = [Series("training loss", epochs, _floats(curve["loss"]))]
    if "validation_loss" in curve:
        series.append(Series("validation loss", epochs, _floats(curve["validation_loss"]),
                             dashed=True))
    losses = np.concatenate([s.y for s in series])
    positive = losses[np.isfinite(losses)] > 0
    log = bool(positive.size and positive.all())
    if log:  # losses span decades: a log axis shows the late epochs too
        series = [Series(s.label, s.x, np.log10(s.y), s.dashed) for s in series]
    caption = f"Loss per epoch ({len(epochs)} of {int(epochs[-1])} epochs shown)."
    marks: list[float] = []
    if "validation_loss" in curve:
        valid = _floats(curve["validation_loss"])
        if np.isfinite(valid).any():
            best = int(np.nanargmin(valid))
            marks.append(float(epochs[best]))
            caption += (f" Lowest validation loss {fmt(valid[best])} at epoch {int(epochs[best])}"
                        " (dotted; the weights kept).")
    return figure(line_plot(series, title="Training curve", xlabel="epoch",
                            ylabel="log10 loss" if log else "loss", width=520, height=260,
                            vlines=marks), caption)


def _floats(values: list[Any]) -> np.ndarray:
    """A JSON list of numbers or nulls as floats, null as NaN (a gap in the plot)."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def error_by_horizon(ctx: ModelContext, steps: int) -> tuple[np.ndarray, np.ndarray, int] | str:
    """(per-step NRMSE (steps,), per-variable per-step NRMSE (steps, d), rollouts) of free
    rollouts of ``steps`` steps from up to ``HORIZON_STARTS`` start points spread evenly over
    the held-out data, errors normalised by each variable's standard deviation there; or why
    there are none. A diverged rollout's steps count as infinite error from where it diverged."""
    from dynid.api import check_step, rollout

    data = ctx.held_out
    model = ctx.model
    if data is None:
        return "No held-out data."
    mismatch = data_mismatch(model, data)
    if mismatch:
        return f"No error curve: {mismatch}."
    check_step(model, data)
    need = model.history_length
    starts = [(k, s) for k, trial in enumerate(data.trials)
              for s in range(need, trial.n_samples - steps + 1)]
    if not starts:
        return f"No error curve: no trial has {need + steps} samples."
    picks = np.unique(np.linspace(0, len(starts) - 1, min(HORIZON_STARTS, len(starts))).round())
    scale = np.nanstd(data.stacked()[0], axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    squared = []
    for index in picks.astype(int):
        k, s = starts[index]
        trial = data.trials[k]
        future = trial.u[s : s + steps] if model.inputs_ and trial.u is not None else None
        predicted, _ = rollout(model, trial.slice(0, s), steps, future)
        squared.append(np.nan_to_num(((predicted - trial.x[s : s + steps]) / scale) ** 2,
                                     nan=np.inf))
    per_variable = np.sqrt(np.nanmean(np.stack(squared), axis=0))
    return np.sqrt(np.mean(per_variable**2, axis=1)), per_variable, len(picks)


@model_part("Error against horizon", applies=lambda ctx: ctx.held_out is not None)
def _error_by_horizon(ctx: ModelContext) -> str | None:
    data = ctx.held_out
    if data is None:  # not reached: ``applies`` asks for data; narrows the type
        return None
    outcome = error_by_horizon(ctx, default_steps(data, ctx.horizon))
    if isinstance(outcome, str):
        return note(outcome)
    total, per_variable, rollouts = outcome
    lead = np.arange(1, total.size + 1, dtype=float) * ctx.model.dt_
    # An infinite error (a diverged rollout) is left out of the plot, which says so.
    shown = [Series("all variables", lead, np.where(np.isfinite(total), total, np.nan))]
    shown += [Series(name, lead, np.where(np.isfinite(col), col, np.nan), dashed=True)
              for name, col in zip(ctx.model.variables_, per_variable.T)]
    shown.append(Series(f"VPT threshold {VPT_THRESHOLD}", lead,
                        np.full(lead.size, VPT_THRESHOLD), dashed=True, color="#888888"))
    source = "--test" if ctx.test is not None else "--data"
    caption = (
        f"Normalised RMSE (by each variable's standard deviation in the {source} data) of "
        f"{rollouts} free rollouts from start points spread over {data.source}, against the "
        "time ahead; 1 is the error of forecasting the mean."
    )
    if not np.isfinite(total).all():
        first = int(np.argmin(np.isfinite(total)))
        caption += f" A rollout diverges after {first} steps; the curves stop there."
    return figure(line_plot(shown, title="Error against horizon",
                            xlabel=f"time ahead ({data.time_column or 't'})", ylabel="NRMSE",
                            width=520, height=260), caption)
