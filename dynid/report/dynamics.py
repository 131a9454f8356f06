"""Model parts that show the dynamics against the data: phase portraits of the data and of the
model's free run, one-step residuals with their autocorrelation, and the equations' free run.
The free run drawn is the one ``dynid score`` and the comparison table score (D_stsp, D_H):
``api.score_free_run`` on the held-out data, computed once per model (``score_run``). Each part
registers itself with ``sections.model_part``; importing this module (``dynid.report`` does) is
enough."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.models.base import Backend
from dynid.report.html import figure, note
from dynid.report.forecast import data_mismatch
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, fmt, line_plot, stride

if TYPE_CHECKING:
    from dynid.api import FreeRun

# At most this many variables (the most variable ones) are paired in phase portraits.
MAX_PORTRAIT_VARIABLES = 3
# One-step residuals over at most this many consecutive samples.
MAX_RESIDUALS = 400
MAX_LAG = 40


def free_runnable(ctx: ModelContext) -> bool:
    """Held-out data (``--test``, else ``--data``) were given and the model can run on them."""
    return ctx.held_out is not None and not data_mismatch(ctx.model, ctx.held_out)


def held_out_option(ctx: ModelContext) -> str:
    """The captions' words on which option gave the held-out data."""
    return "the --test data" if ctx.test is not None else "the --data; no --test given"


def score_run(model: Backend, data: Dataset, shared: dict[Any, Any]) -> FreeRun:
    """``api.score_free_run(model, data)``, the run behind score's and the comparison table's
    D_stsp and D_H, kept in ``shared`` (one model's cache, shared by the table and the model's
    section) so that every figure and number of the report is of this one run."""
    from dynid.api import score_free_run

    key = ("score run", id(data))  # the data outlive the report's build: ids stay unique
    if key not in shared:
        shared[key] = score_free_run(model, data)
    return shared[key]


def score_run_measures(model: Backend, data: Dataset, shared: dict[Any, Any]) -> dict[str, Any]:
    """``api.free_run_measures`` of ``score_run``, computed once like the run."""
    from dynid.api import free_run_measures

    key = ("score run measures", id(data))
    if key not in shared:
        shared[key] = free_run_measures(score_run(model, data, shared), data)
    return shared[key]


def held_out_run(ctx: ModelContext) -> tuple[Dataset, FreeRun]:
    """The held-out data and ``score_run`` on them (DataError when their first trial is too
    short to start the model, shown in the part's place)."""
    data = ctx.held_out
    if data is None:  # not reached: ``free_runnable`` asks for data; narrows the type
        raise ValueError("no data")
    return data, score_run(ctx.model, data, ctx.shared)


def run_description(data: Dataset, run: FreeRun, model: Backend) -> str:
    """The captions' words on which free run is drawn."""
    return (
        f"the free run dynid score scores: {run.steps:,} steps from the first {run.history} "
        f"sample(s) of the first trial of {data.source}"
        + (", driven by that trial's inputs" if model.inputs_ else "")
    )


def measure_sentence(ctx: ModelContext, label: str, field: str) -> str:
    """A caption's sentence giving the drawn run's ``label`` measure (score's ``field``): the
    figure beside the picture."""
    data, run = held_out_run(ctx)
    value = score_run_measures(ctx.model, data, ctx.shared)[field]
    reason = "the run diverged" if run.diverged_at is not None else "undefined on these data"
    shown = fmt(value) if value is not None else f"none ({reason})"
    return (f" Its {label} is {shown}, as dynid score (with its default --free-run) and the model "
            "comparison, where there is one, give it.")


def divergence_sentence(run: FreeRun) -> str:
    """The captions' sentence on where ``run`` diverges, or ""."""
    if run.diverged_at is None:
        return ""
    how = ("leaves the training data's range widened by that range on each side, as forecast "
           "and score check" if run.escaped else "leaves the finite numbers")
    return f" The free run diverges at step {run.diverged_at} (it {how}); it is drawn up to there."


def joined_trials(data: Dataset) -> np.ndarray:
    """(n, d) every trial of ``data`` one after the other, a NaN row (a gap) between two."""
    gap = np.full((1, len(data.variables)), np.nan)
    rows: list[np.ndarray] = []
    for k, trial in enumerate(data.trials):
        rows += [gap, trial.x] if k else [trial.x]
    return np.concatenate(rows)


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
    applies=lambda ctx: free_runnable(ctx) and ctx.model.n_variables >= 2,
)
def _phase_portrait(ctx: ModelContext) -> str:
    data, run = held_out_run(ctx)
    model = ctx.model
    # D_stsp's reference: every sample of the data, each trial apart.
    observed = joined_trials(data)
    figures = []
    for i, j in portrait_pairs(observed):
        names = model.variables_
        figures.append(
            figure(
                line_plot(
                    [Series("data", observed[:, i], observed[:, j]),
                     Series("model", run.states[:, i], run.states[:, j], dashed=True)],
                    title=f"{names[j]} against {names[i]}",
                    xlabel=names[i],
                    ylabel=names[j],
                    width=320,
                    height=300,
                )
            )
        )
    caption = (
        f"Data: all {data.n_samples:,} samples of {data.source}"
        + (f" ({len(data.trials)} trials)" if len(data.trials) > 1 else "")
        + _thinned(observed.shape[0]) + f". Model: {run_description(data, run, model)}"
        + _thinned(run.steps) + "." + measure_sentence(ctx, "D_stsp", "d_stsp")
    )
    if model.n_variables > MAX_PORTRAIT_VARIABLES:
        caption += f" Pairs of the {MAX_PORTRAIT_VARIABLES} variables of largest variance."
    caption += divergence_sentence(run)
    return "<div>" + "".join(figures) + "</div>" + note(caption)


def _thinned(n: int) -> str:
    """How a phase portrait draws a series of ``n`` points (``svg.stride``), or ""."""
    k = stride(n)
    return "" if k == 1 else f" (one point in {k} drawn)"


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


@model_part("Residuals", applies=free_runnable)
def _residuals(ctx: ModelContext) -> str | None:
    # Of the held-out data, like the forecast (its last trial) and the free run.
    data, model = ctx.held_out, ctx.model
    if data is None:  # not reached: ``free_runnable`` asks for data; narrows the type
        return None
    trial = data.trials[-1]
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
        f"The last {m} samples of the last trial of {data.source} ({held_out_option(ctx)}), each "
        "predicted one step from the samples before it. Residuals of a good model look like white "
        "noise: autocorrelation inside the dashed band at every lag but 0."
    )
    return "<div>" + "".join(figures) + "</div>" + note(caption)


@model_part("Free run of the equations",
            applies=lambda ctx: free_runnable(ctx) and bool(ctx.model.equation_lines()))
def _equation_free_run(ctx: ModelContext) -> str:
    """Each variable of the first held-out trial against the start of the equations' free run
    from it (score's): what a reader would check before trusting identified equations."""
    data, run = held_out_run(ctx)
    model = ctx.model
    trial, need = data.trials[0], run.history
    shown = run.states[: trial.n_samples - need]  # a prefix: the run is at least this long
    t = trial.t[need - 1 :]
    time_label = data.time_column or "t"
    figures = [
        figure(line_plot(
            [Series("data", trial.t, trial.x[:, j]),
             # from the last sample of history, so that the run joins the data
             Series("equations", t, np.r_[trial.x[need - 1, j], shown[:, j]], dashed=True)],
            title=name, xlabel=time_label, width=420, height=220))
        for j, name in enumerate(model.variables_)
    ]
    caption = (
        f"The first trial of {data.source} and the first {shown.shape[0]:,} steps (its length) "
        f"of {run_description(data, run, model)}."
        + " Chaotic systems part ways after a few Lyapunov times even with exact equations."
        + divergence_sentence(run)
    )
    return "<div>" + "".join(figures) + "</div>" + note(caption)
