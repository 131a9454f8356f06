"""Several models on the same held-out data: one table of their errors, sizes and fit times,
and their forecasts overlaid on the data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dynid.api import FREE_RUN_MIN
from dynid.data.dataset import Dataset
from dynid.errors import DynidError
from dynid.metrics.dsr import spectrum_min_length
from dynid.metrics.forecast import VPT_THRESHOLD, normalised_error, nrmse, valid_prediction_time
from dynid.modelfile import ModelFile
from dynid.report.dynamics import MAX_RESIDUALS, one_step_residuals, score_run_measures
from dynid.report.forecast import (
    HeldOutForecast, default_steps, forecast_figures, held_out_forecast, seen_in_fitting,
)
from dynid.report.html import note, table
from dynid.report.svg import fmt
from dynid.report.template import Section

HEADER = [
    "model", "backend", "one-step NRMSE", "multi-step NRMSE", "VPT", "fit seconds", "parameters",
    "unseen in fitting",
]
# The dynamical-systems-reconstruction measures by column, and the field of ``dynid score`` that
# gives each (``api.free_run_measures``): lower is better (definitions in dynid.metrics.dsr).
DSR_MEASURES = {"D_stsp": "d_stsp", "D_H": "d_h"}
SEEN = {True: "no (training data)", False: "yes", None: "unknown"}


@dataclass(frozen=True)
class ModelScore:
    """One model's row: errors normalised by the held-out trial's per-variable standard
    deviation; ``vpt`` in the data's time units (the first step whose normalised error exceeds
    0.4, or the whole window: then ``vpt_censored``); ``held_out``: whether the data were
    unseen in fitting (``SEEN``)."""

    path: str
    backend: str
    one_step: float | None
    multi_step: float | None
    vpt: float | None
    fit_seconds: float | None
    parameters: int
    held_out: str
    forecast: HeldOutForecast | None
    dsr: dict[str, float | None] = field(default_factory=dict)
    vpt_censored: bool = False


def parameter_count(model_file: ModelFile) -> int:
    """Numbers the model file stores (the sizes of all its arrays)."""
    return int(sum(np.size(a) for a in model_file.model.arrays().values()))


def dsr_scores(model_file: ModelFile, data: Dataset, shared: dict[Any, Any]) -> dict[str, float | None]:
    """Each DSR measure of the model on ``data`` as ``dynid score`` gives it, of the same run
    (``api.score_free_run``: a free run of max(samples in ``data``, ``FREE_RUN_MIN``) steps
    from the start of its first trial, a driven model's as far as that trial's inputs go), kept
    in ``shared`` for the model's section to draw (``dynamics.score_run``); None where score
    gives none (a run that diverged, D_H on too short a stretch) or refuses the free run (a
    first trial too short to start it)."""
    try:
        fields = score_run_measures(model_file.model, data, shared)
    except DynidError:
        return dict.fromkeys(DSR_MEASURES)
    return {column: fields[key] for column, key in DSR_MEASURES.items()}


def score_model(
    path: str, model_file: ModelFile, data: Dataset, *, steps: int,
    shared: dict[Any, Any] | None = None,
) -> ModelScore | str:
    """``model_file``'s row on the last trial of ``data``, or why there is none. ``shared``:
    the model's cache of results computed once for the report (``dynamics.score_run``)."""
    model, meta = model_file.model, model_file.metadata
    result = held_out_forecast(model, data, steps)
    if isinstance(result, str):
        return result
    trial = result.trial
    scale = np.nanstd(trial.x, axis=0)
    _, residuals = one_step_residuals(model, trial, MAX_RESIDUALS)
    one_step = float(np.sqrt(np.nanmean((residuals / scale) ** 2)))
    dt = model.dt_ if model.dt_ is not None else data.dt
    vpt = (
        float(valid_prediction_time(result.predicted, result.actual, scale, dt))
        if dt is not None
        else None
    )
    return ModelScore(
        path=path,
        backend=str(meta.get("backend", model.name)),
        one_step=one_step,
        multi_step=nrmse(result.predicted, result.actual, scale),
        vpt=vpt,
        fit_seconds=meta.get("fit_seconds"),
        parameters=parameter_count(model_file),
        held_out=SEEN[seen_in_fitting(meta, data)],
        forecast=result,
        dsr=dsr_scores(model_file, data, {} if shared is None else shared),
        # Never above the threshold in the window: the VPT is at least the window.
        vpt_censored=vpt is not None and bool(np.all(
            normalised_error(result.predicted, result.actual, scale) <= VPT_THRESHOLD)),
    )


def _vpt_cell(score: ModelScore) -> float | str | None:
    """The VPT, or ">= VPT" when the forecast held over the whole window (censored)."""
    return f"\u2265 {fmt(score.vpt)}" if score.vpt_censored else score.vpt


def comparison_section(
    models: list[tuple[str, ModelFile]],
    data: Dataset,
    *,
    horizon: int | None,
    anchor: str,
    shared: list[dict[Any, Any]] | None = None,
    name_variables: bool = False,
) -> Section:
    """The table of every model on ``data`` (one row each; a model that cannot be scored says
    why) and their forecasts overlaid where they share a window. ``shared``: each model's cache
    of results computed once for the report (its section draws the free run the table scores).
    ``name_variables``: the title names ``data``'s variables (one table per set of them)."""
    steps = default_steps(data, horizon)
    scores: list[ModelScore] = []
    problems: list[str] = []
    caches = [{} for _ in models] if shared is None else shared
    for (path, model_file), cache in zip(models, caches):
        try:
            outcome = score_model(path, model_file, data, steps=steps, shared=cache)
        except DynidError as exc:
            outcome = f"{exc}"
        if isinstance(outcome, str):
            problems.append(f"{path}: {outcome}")
        else:
            scores.append(outcome)
    dsr_columns = [column for column in DSR_MEASURES if any(column in s.dsr for s in scores)]
    rows = [
        (s.path, s.backend, s.one_step, s.multi_step, _vpt_cell(s), *(s.dsr.get(c) for c in dsr_columns),
         s.fit_seconds, s.parameters, s.held_out)
        for s in scores
    ]
    header = [*HEADER[:5], *dsr_columns, *HEADER[5:]]
    parts = [
        note(
            f"Each model on the last trial of {data.source}: one-step NRMSE over its last "
            f"{MAX_RESIDUALS} samples (at most), multi-step NRMSE and valid prediction time (error "
            "above 0.4 of the standard deviation) of one free forecast of the held-out window. "
            "Errors are normalised by each variable's standard deviation in that trial."
            + (" D_stsp (state-space divergence) and D_H (Hellinger distance of power spectra) "
               f"are dynid score's (at its default --free-run): all of {data.source} against a "
               "free run of the model from "
               "the start of its first trial, of max(its samples, "
               f"{FREE_RUN_MIN:,}) steps (a model with inputs: as far as that trial's inputs "
               "go); lower is better; none where the run diverged (left the training data's "
               "range widened by that range, as forecast and score check) or, for D_H, where "
               f"the longest stretch without gaps has fewer than {spectrum_min_length()} samples."
               if dsr_columns else "")
        ),
        table(rows, header=header) if rows else note("No model could be scored on these data."),
        "".join(note(p) for p in problems),
    ]
    first = scores[0].forecast if scores else None
    shared = [
        (s.path, s.forecast) for s in scores
        if s.forecast is not None and first is not None and s.forecast.split == first.split
    ]
    if shared:
        parts.append(forecast_figures(shared, data.variables, data.time_column or "t"))
    of = f" ({', '.join(data.variables)})" if name_variables else ""
    return Section(anchor, f"Model comparison on {data.source}{of}", "\n".join(p for p in parts if p))
