"""Model parts that show the dynamics against ``--data``: phase portraits of the data and of a
long free run of the model, and one-step residuals with their autocorrelation. Each registers
itself with ``sections.model_part``; importing this module (``dynid.report`` does) is enough."""

from __future__ import annotations

import itertools

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.models.base import Backend
from dynid.report.html import figure, note
from dynid.report.forecast import data_mismatch
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, line_plot

# A free run at least this long, so the model's attractor (or its drift away) shows.
MIN_FREE_RUN = 2000
# At most this many variables (the most variable ones) are paired in phase portraits.
MAX_PORTRAIT_VARIABLES = 3
# One-step residuals over at most this many consecutive samples.
MAX_RESIDUALS = 400
MAX_LAG = 40


def runnable(ctx: ModelContext) -> bool:
    """Data were given and the model can run on them."""
    return ctx.data is not None and not data_mismatch(ctx.model, ctx.data)


def last_trial(ctx: ModelContext) -> tuple[Dataset, Trial]:
    data = ctx.data
    if data is None:  # not reached: ``runnable`` asks for data; narrows the type
        raise ValueError("no data")
    return data, data.trials[-1]


def free_run(model: Backend, trial: Trial) -> np.ndarray:
    """(steps, d) free run of ``model`` from the first ``history_length`` samples of ``trial``
    (which must be longer): at least ``MIN_FREE_RUN`` steps, so that its attractor (or its drift
    away) shows; a driven model runs only as far as the trial's inputs go."""
    need = model.history_length
    if model.inputs_:
        steps = trial.n_samples - need
        run = model.simulate(trial.slice(0, need), steps, trial.u[need:] if trial.u is not None else None)
    else:
        run = model.simulate(trial.slice(0, need), max(MIN_FREE_RUN, trial.n_samples - need), None)
    return np.asarray(run, dtype=float)


def shared_free_run(ctx: ModelContext) -> np.ndarray:
    """``free_run`` of the model from the data's last trial, computed once per model section
    (the phase portrait, the equations' free run and the spectra share it)."""
    if "free_run" not in ctx.shared:
        ctx.shared["free_run"] = free_run(ctx.model, last_trial(ctx)[1])
    return ctx.shared["free_run"]


def free_run_divergence(model: Backend, run: np.ndarray) -> int | None:
    """The step (1-based) at which ``run`` (steps, d) of ``model`` diverges by forecast's and
    score's rule (``api.range_escape_step``), or, for a model file that records no training
    range, leaves the finite numbers; None when it does neither."""
    from dynid.api import first_nonfinite_step, range_escape_step

    if model.data_range_ is None:
        return first_nonfinite_step(run)
    return range_escape_step(model, run)


def portrait_pairs(x: np.ndarray) -> list[tuple[int, int]]:
    """Column pairs to draw of ``x`` (n, d): all of them for d <= 3, else every pair of the
    three columns of largest variance (NaN ignored), in column order."""
    d = x.shape[1]
    if d <= MAX_PORTRAIT_VARIABLES:
        columns = list(range(d))
    else:
        variance = np.nan_to_num(np.nanvar(x, axis=0), nan=-1.0)
        columns = sorted(np.argsort(-variance, kind="stable")[:MAX_PORTRAIT_VARIABLES].tolist())
    return list(itertools.combinations(columns, 2))


@model_part(
    "Phase portrait",
    applies=lambda ctx: runnable(ctx) and ctx.model.n_variables >= 2,
)
def _phase_portrait(ctx: ModelContext) -> str | None:
    data, trial = last_trial(ctx)
    model = ctx.model
    need = model.history_length
    if trial.n_samples <= need:
        return None
    run = shared_free_run(ctx)
    steps = run.shape[0]
    diverged_at = free_run_divergence(model, run)
    shown = run.copy()
    if diverged_at is not None:
        shown[diverged_at - 1:] = np.nan
    figures = []
    for i, j in portrait_pairs(trial.x):
        names = model.variables_
        figures.append(
            figure(
                line_plot(
                    [Series("data", trial.x[:, i], trial.x[:, j]),
                     Series("model", shown[:, i], shown[:, j], dashed=True)],
                    title=f"{names[j]} against {names[i]}",
                    xlabel=names[i],
                    ylabel=names[j],
                    width=320,
                    height=300,
                )
            )
        )
    caption = (
        f"Data: the last trial of {data.source} ({trial.n_samples} samples). Model: a free run "
        f"of {steps} steps from the trial's first {need} sample(s)"
        + (", driven by the data's inputs." if model.inputs_ else ".")
    )
    if model.n_variables > MAX_PORTRAIT_VARIABLES:
        caption += f" Pairs of the {MAX_PORTRAIT_VARIABLES} variables of largest variance."
    if diverged_at is not None:
        caption += (f" The free run diverges at step {diverged_at} (it leaves the training "
                    "data's range widened by that range on each side, as forecast and score "
                    "check); it is drawn up to there.")
    return "<div>" + "".join(figures) + "</div>" + note(caption)


def one_step_residuals(model: Backend, trial: Trial, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(times (m,), residuals (m, d)): data minus the model's one-step prediction at the last
    ``m = min(count, n - history_length)`` samples of ``trial``, each predicted from the samples
    before it (``Backend.one_step_predictions``)."""
    predicted = model.one_step_predictions(trial, count)
    m = predicted.shape[0]
    return trial.t[trial.n_samples - m :], trial.x[trial.n_samples - m :] - predicted


def autocorrelation(r: np.ndarray, max_lag: int) -> np.ndarray:
    """(max_lag + 1,) sample autocorrelation of ``r`` (n,) at lags 0..max_lag, NaN skipped
    (pairs with a NaN are left out); NaN where undefined (constant or too short)."""
    r = np.asarray(r, dtype=float) - np.nanmean(r)
    variance = np.nanmean(r**2)
    out = np.full(max_lag + 1, np.nan)
    if not np.isfinite(variance) or variance <= 0:
        return out
    for lag in range(min(max_lag, r.size - 1) + 1):
        products = r[: r.size - lag] * r[lag:]
        if np.isfinite(products).any():
            out[lag] = np.nanmean(products) / variance
    return out


@model_part("Residuals", applies=runnable)
def _residuals(ctx: ModelContext) -> str | None:
    data, trial = last_trial(ctx)
    model = ctx.model
    if trial.n_samples <= model.history_length + 2:
        return None
    t, residuals = one_step_residuals(model, trial, MAX_RESIDUALS)
    m = t.size
    time_label = data.time_column or "t"
    lags = np.arange(min(MAX_LAG, m - 1) + 1, dtype=float)
    band = 1.96 / np.sqrt(m)
    acf = [
        Series(name, lags, autocorrelation(residuals[:, j], int(lags[-1])))
        for j, name in enumerate(model.variables_)
    ]
    # The 95% band of white noise; one legend entry for both of its lines.
    bounds = [
        Series(label, lags, np.full(lags.size, sign * band), dashed=True, color="#888888")
        for label, sign in (("\u00b11.96/\u221an", 1), ("", -1))
    ]
    figures = [
        figure(line_plot([Series(name, t, residuals[:, j]) for j, name in enumerate(model.variables_)],
                         title="One-step residuals", xlabel=time_label, ylabel="data \u2212 prediction",
                         width=420, height=240)),
        figure(line_plot(acf + bounds, title="Autocorrelation of the residuals", xlabel="lag (samples)",
                         width=420, height=240)),
    ]
    caption = (
        f"The last {m} samples of the last trial of {data.source}, each predicted one step from "
        "the samples before it. Residuals of a good model look like white noise: autocorrelation "
        "inside the dashed band at every lag but 0."
    )
    return "<div>" + "".join(figures) + "</div>" + note(caption)


@model_part("Free run of the equations", applies=lambda ctx: runnable(ctx) and bool(ctx.model.equation_lines()))
def _equation_free_run(ctx: ModelContext) -> str | None:
    """Each variable of the last trial against the equations integrated from its start: what
    a reader would check before trusting identified equations."""
    data, trial = last_trial(ctx)
    model = ctx.model
    need = model.history_length
    if trial.n_samples <= need:
        return None
    run = shared_free_run(ctx)[: trial.n_samples - need]
    t = trial.t[need - 1 :]
    time_label = data.time_column or "t"
    figures = [
        figure(line_plot(
            [Series("data", trial.t, trial.x[:, j]),
             # from the last sample of history, so that the run joins the data
             Series("equations", t, np.r_[trial.x[need - 1, j], run[:, j]], dashed=True)],
            title=name, xlabel=time_label, width=420, height=220))
        for j, name in enumerate(model.variables_)
    ]
    caption = (
        f"The last trial of {data.source} and the equations run freely from its first {need} "
        f"sample(s) for its whole length ({run.shape[0]} steps)"
        + (", driven by the data's inputs." if model.inputs_ else ".")
        + " Chaotic systems part ways after a few Lyapunov times even with exact equations."
    )
    return "<div>" + "".join(figures) + "</div>" + note(caption)
