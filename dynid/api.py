"""The Python API behind the commands: ``fit``, ``forecast``, ``score``, ``states``, ``identify``
(``dynid symbolic``) and ``discover_causal`` (``dynid discover-causal``, clusters included).

Each function takes a Dataset (from ``dynid.load``) and returns plain values; the CLI is a thin
layer over these. Hyperparameters are given as typed values (``{"threshold": 0.1}``), strings
parsed as ``-p`` values are, or the backend's dataclass itself.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.data.load import true_runs
from dynid.data.times import times_after
from dynid.documents import CAUSAL, INFO, SCORE, SYMBOLIC, tagged
from dynid.errors import DataError, Diverged, ResourceUnavailable, UsageError
from dynid.metrics.forecast import masked_rms, valid_steps
from dynid.models import registry
from dynid.models.base import Backend, Hyperparameters, LatentStates, check_labels, trial_condition
from dynid.runtime import resolve_device, seed_everything
from dynid.training import TrainingOptions

if TYPE_CHECKING:
    from dynid.causal.graph import CausalGraph
    from dynid.data.fields import SpaceTimeFields
    from dynid.data.stream import Stream
    from dynid.modelfile import ModelFile
    from dynid.symbolic.pde import PdeParams

# Hyperparameters as the API takes them: the dataclass, typed values, or "key=value" strings.
Params = Hyperparameters | Mapping[str, object] | Sequence[str] | None
# Methods ``discover_causal(..., clusters=...)`` works with.
CLUSTER_METHODS = ("granger",)


# The shortest free run D_stsp and D_H are computed on, and the orbit length (in samples) and
# transient of --estimate-lyapunov: long enough for stable statistics of a 3-D chaotic flow.
FREE_RUN_MIN = 10_000
LYAPUNOV_STEPS = 20_000
LYAPUNOV_TRANSIENT = 2_000
LYAPUNOV_MIN_STEPS = 100

# Relative difference of two sampling steps still taken as equal: timestamps written with
# 6-7 significant digits differ by ~1e-6; a real mismatch (0.01 vs 0.011) is far larger.
STEP_RTOL = 1e-4


@dataclass
class FitResult:
    """A fitted backend plus the metadata header its model file will carry."""

    model: Backend
    metadata: dict[str, Any]


def fit(
    data: Dataset,
    model: str,
    params: Params = None,
    *,
    seed: int | None = None,
    device: str = "auto",
    progress: Any = None,
    training: TrainingOptions | None = None,
    labels: str | None = None,
) -> FitResult:
    """Fit backend ``model`` (a registry name) on ``data``.

    params: the backend's hyperparameter dataclass, a dict of typed values (``{"rank": 3}``;
    strings are parsed as ``-p`` values), or ``["key=value", ...]`` as on the command line.
    UsageError for an unknown key (naming the valid ones) or a value of the wrong type.
    training: ``--max-time``, checkpoints and threads, for backends that train a network
    (UsageError for others when any is set).
    labels: a column of ``data`` holding known discrete states (0, 1, ...; NaN = unknown) that
    fix those rows' states (``--labels``; hmm, arhmm, slds); it is not a state variable.
    """
    from dynid.modelfile import describe_fit

    backend = registry.get(model)
    hyper = backend.Params.build(params)
    if training is not None and training.trains and not backend.trains_network(hyper):
        if not backend.capabilities.time_budget:
            raise UsageError(f"--max-time, --checkpoint, --resume and --threads: the {model} "
                             "backend trains no network with these options")
        if not training.only_max_time:
            raise UsageError(f"--checkpoint, --resume and --threads: the {model} backend trains "
                             "no network (it takes --max-time alone)")
    known = None
    if labels is not None:
        data, known = split_labels(data, labels)
        if not backend.capabilities.nan and any(np.isnan(trial.x).any() for trial in data.trials):
            raise DataError(
                f"{data.source}: the state columns have missing values, which the {model} backend "
                "cannot use; with --labels the rows are read as they are (an empty label means "
                "unknown, so --nan cannot apply), so fill or drop those rows first"
            )
    chosen = resolve_device(device, f"the {model} backend", backend.capabilities.cuda)
    seed_everything(seed)
    started = time.perf_counter()
    fitted = backend(hyper).fit(data, seed=seed, device=chosen, progress=progress, labels=known,
                                training=training)
    seconds = time.perf_counter() - started
    return FitResult(fitted, describe_fit(fitted, data, seed=seed, device=chosen, fit_seconds=seconds))


def fit_stream(stream: Stream, model: str, params: Params = None, *, seed: int | None = None,
               device: str = "auto") -> FitResult:
    """Fit backend ``model`` on a file read in chunks (``dynid.data.stream.open_stream``):
    memory holds one chunk and the backend's running sums, not the file. For backends whose
    fit needs only those sums (``Backend.moments``: var, dmd); the result equals ``fit`` on the
    whole file to round-off. ResourceUnavailable for other backends."""
    from dynid.modelfile import describe_fit

    backend = registry.get(model)
    hyper = backend.Params.build(params)
    chosen = resolve_device(device, f"the {model} backend", backend.capabilities.cuda)
    seed_everything(seed)
    fitted = backend(hyper)
    moments = fitted.moments(stream.n_variables, len(stream.inputs))
    if moments is None:
        raise ResourceUnavailable(f"{stream.source}: the {model} backend needs the whole file in memory; "
                                  "var and dmd read it in chunks")
    from threadpoolctl import threadpool_limits

    from dynid.data.dataset import value_range

    started = time.perf_counter()
    seen = None
    # Sums of small matrix products: one BLAS thread is fastest, and many times faster than
    # threads that compete for busy cores.
    with threadpool_limits(1, user_api="blas"):
        for piece in stream:
            moments.add(piece.x, piece.u, piece.starts_trial)
            seen = value_range(piece.x, seen) if len(piece.x) else seen
    fitted.fit_moments(moments, variables=stream.variables, inputs=stream.inputs, dt=stream.dt,
                       source=stream.source, data_range=seen)
    seconds = time.perf_counter() - started
    return FitResult(fitted, describe_fit(fitted, stream, seed=seed, device=chosen, fit_seconds=seconds))


@dataclass
class Forecast:
    """``t`` (horizon,) times continuing the data's; ``x`` (horizon, d) predicted states (the
    predictive mean for stochastic models); with an interval, ``lower`` and ``upper`` (horizon,
    d) bound its central ``level`` probability."""

    t: np.ndarray
    x: np.ndarray
    variables: tuple[str, ...]
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    level: float | None = None
    # Interpretations a user should hear about (said on stderr), as ``Dataset.notes``.
    notes: tuple[str, ...] = ()


def forecast(
    model: Backend,
    data: Dataset,
    horizon: int,
    future_inputs: np.ndarray | None = None,
    *,
    interval: float | None = None,
    sample: bool = False,
    seed: int | None = None,
    allow_escape: bool = False,
) -> Forecast:
    """Continue from the end of ``data``'s last trial for ``horizon`` steps of the model's dt.

    A forecast that is not finite, or (unless ``allow_escape``) whose path leaves the training
    data's range widened by that range on each side (``Backend.data_range_``,
    ``dynid.metrics.dsr.escape_step``), has diverged: Diverged (exit 1) naming the step, never
    numbers no continuation of the data reaches. A predictive interval's bounds may spread
    wider; only their finiteness is checked.

    interval: a probability (0.9) for a central predictive interval, from models that have a
    predictive distribution (UsageError for others). sample: one path drawn from the
    predictive distribution instead of its mean, the same for the same ``seed`` (models with
    sample paths; UsageError for others and with ``interval``). A model whose inputs are
    per-trial conditions (``capabilities.conditions``) given no ``future_inputs`` keeps the
    history's condition (a note says so; DataError when it varies within the history).
    """
    if horizon < 1:
        raise UsageError(f"--horizon {horizon}: must be at least 1")
    _check_variables(model, data)
    if model.history_length > 1 and model.capabilities.uniform_steps:
        # The model reads several past samples, spaced by its own step (a backend for
        # irregular sampling reads the history's own times).
        check_step(model, data)
    history = data.trials[-1]
    if history.n_samples < model.history_length:
        raise DataError(
            f"{data.source}: the {model.name} model forecasts from the last {model.history_length} "
            f"samples; the last trial (or stretch without missing values) has {history.n_samples}"
        )
    t = times_after(history.t[-1], model.dt_, horizon)
    notes: tuple[str, ...] = ()
    if future_inputs is None and model.capabilities.conditions and model.inputs_:
        future_inputs, note = _kept_condition(model, history, horizon)
        notes = (note,)
    if sample:
        if interval is not None:
            raise UsageError("--sample draws one path, which has no interval; drop --interval or --sample")
        path = np.asarray(model.sample(history, horizon, future_inputs, seed), dtype=float)
        _refuse_diverged(model, t, path, allow_escape=allow_escape)
        return Forecast(t=t, x=path, variables=model.variables_, notes=notes)
    if interval is not None:
        band = model.predictive(history, horizon, future_inputs, interval)
        _refuse_diverged(model, t, band.mean, band.lower, band.upper, allow_escape=allow_escape)
        return Forecast(t=t, x=band.mean, variables=model.variables_, lower=band.lower,
                        upper=band.upper, level=band.level, notes=notes)
    x, _ = rollout(model, history, horizon, future_inputs)
    _refuse_diverged(model, t, x, allow_escape=allow_escape)
    return Forecast(t=t, x=x, variables=model.variables_, notes=notes)


def _refuse_diverged(model: Backend, t: np.ndarray, *paths: np.ndarray, allow_escape: bool) -> None:
    """Diverged at the first of the forecast times ``t`` (horizon,) where any of ``paths``
    (horizon, d) - a rollout, a sample path, a predictive mean and bounds - is not finite, or
    where the first of them (the path) escapes the training data's range (unless
    ``allow_escape``)."""
    from dynid.metrics.dsr import escape_box

    steps = [step for step in map(first_nonfinite_step, paths) if step is not None]
    if steps:
        _raise_diverged(model, t, paths[0], min(steps), "; nothing written")
    step = None if allow_escape else range_escape_step(model, paths[0])
    if step is not None:
        bounds = model.data_range_
        row = paths[0][step - 1]
        lower, upper = escape_box(bounds[0], bounds[1])
        k = int(np.argmax((row < lower) | (row > upper)))
        _raise_diverged(
            model, t, paths[0], step,
            f": {model.variables_[k]} = {row[k]:.4g} left the training data's range "
            f"[{bounds[0][k]:.4g}, {bounds[1][k]:.4g}] widened by that range on each side; "
            "nothing written (--allow-escape writes it anyway)",
        )


def _raise_diverged(model: Backend, t: np.ndarray, path: np.ndarray, step: int, detail: str) -> None:
    """Diverged for the forecast ``path`` (horizon, d) at ``step`` (1-based) of the times ``t``,
    its states kept up to the step before; ``detail`` ends the message."""
    raise Diverged(
        f"the {model.name} forecast diverged at step {step} of {len(t)} (t = {t[step - 1]:.6g}){detail}",
        step=step,
        states=np.where(np.arange(len(t))[:, None] < step - 1, path, np.nan),
    )


def _kept_condition(model: Backend, history: Trial, horizon: int) -> tuple[np.ndarray, str]:
    """The future inputs (horizon, m) of a model whose inputs are per-trial conditions when
    none are given: the history's condition, repeated (the condition is constant within a
    trial); and the note saying so. DataError when the history lacks the inputs or they vary."""
    if history.u is None:
        raise DataError("the history lacks the model's input columns")
    condition = trial_condition(history, model.inputs_, model.name, "history")
    values = ", ".join(f"{name} = {value:g}" for name, value in zip(model.inputs_, condition))
    note = f"no --future-inputs: the forecast keeps the history's condition ({values})"
    return np.repeat(condition[None, :], horizon, axis=0), note


def states(model: Backend, data: Dataset, labels: str | None = None) -> LatentStates:
    """The hidden states of every sample of ``data`` (``dynid states``): smoothed latent means
    and standard deviations for continuous latent models. UsageError for models without
    hidden states; NaN cells are fine where the model handles missing values, and for the
    others each trial's complete stretches are inferred apart (``_states_between_gaps``).
    labels: as ``fit``'s, a column of known states that the inference keeps."""
    known = None
    if labels is not None:
        data, known = split_labels(data, labels)
    _check_variables(model, data)
    if model.capabilities.uniform_steps:
        check_step(model, data)  # the filter steps by the model's dt, sample by sample
    if known is not None:
        check_labels(data, known, model)
    if not model.capabilities.nan and any(_incomplete_rows(trial).any() for trial in data.trials):
        return _states_between_gaps(model, data, known)
    return model.states(data) if known is None else model.states(data, labels=known)


def _incomplete_rows(trial: Trial) -> np.ndarray:
    """(n,) whether each row of ``trial`` misses a value of a variable or an input."""
    values = trial.x if trial.u is None else np.hstack([trial.x, trial.u])
    return np.isnan(values).any(axis=1)


def _states_between_gaps(model: Backend, data: Dataset, known: list[np.ndarray] | None) -> LatentStates:
    """States of a model that takes no missing values, on ``data`` with some: each run of at
    least 2 complete rows is inferred as a trial of its own, and the result keeps one row per
    row of ``data`` (its times and trial numbers), NaN where a row had nothing to infer from,
    so that each row joins the row of DATA it is of. DataError when no such run exists."""
    runs = [(k, a, b) for k, trial in enumerate(data.trials)
            for a, b in true_runs(~_incomplete_rows(trial)) if b - a >= 2]
    if not runs:
        raise DataError(f"{data.source}: no two consecutive rows without missing values to infer states from")
    pieces = [Trial(data.trials[k].t[a:b], data.trials[k].x[a:b],
                    None if data.trials[k].u is None else data.trials[k].u[a:b]) for k, a, b in runs]
    inner = model.states(data.with_trials(pieces), **({} if known is None else
                                                     {"labels": [known[k][a:b] for k, a, b in runs]}))
    starts = np.cumsum([0] + [trial.n_samples for trial in data.trials])
    rows = np.concatenate([np.arange(starts[k] + a, starts[k] + b) for k, a, b in runs])

    def spread(values: np.ndarray | None) -> np.ndarray | None:
        if values is None:
            return None
        full = np.full((int(starts[-1]), *values.shape[1:]), np.nan)
        full[rows] = values
        return full

    return LatentStates(
        names=inner.names,
        t=np.concatenate([trial.t for trial in data.trials]),
        trial=np.concatenate([np.full(trial.n_samples, k) for k, trial in enumerate(data.trials)]),
        means=spread(inner.means), sds=spread(inner.sds),  # type: ignore[arg-type]
        state=spread(inner.state), probabilities=spread(inner.probabilities),
    )


def split_labels(data: Dataset, column: str) -> tuple[Dataset, list[np.ndarray]]:
    """``data`` without its column ``column``, and that column per trial as known states:
    (n_samples,) integers, -1 where the cell is empty (NaN). UsageError if there is no such
    column; DataError for a label that is not a state number 0, 1, 2, ..."""
    if column not in data.variables:
        raise UsageError(f"--labels {column}: not among the data's columns ({', '.join(data.variables)})")
    index = data.variables.index(column)
    rest = [i for i in range(data.n_variables) if i != index]
    if not rest:
        raise UsageError(f"--labels {column}: the data need state columns besides the labels")
    known = []
    for trial in data.trials:
        values = trial.x[:, index]
        given = ~np.isnan(values)
        if np.any(given & ((values < 0) | (values != np.round(values)))):
            raise DataError(f"{data.source}: --labels {column}: a label must be a state number 0, 1, 2, ... or empty")
        known.append(np.where(given, values, -1).astype(np.intp))
    trials = [Trial(trial.t, trial.x[:, rest], trial.u) for trial in data.trials]
    return data.with_trials(trials, variables=tuple(data.variables[i] for i in rest)), known


def score(
    model: Backend,
    data: Dataset,
    *,
    horizon: int = 50,
    starts: int = 20,
    vpt_threshold: float = 0.4,
    lyapunov: float | None = None,
    free_run: int | None = None,
    estimate_lyapunov: bool = False,
    lyapunov_steps: int = LYAPUNOV_STEPS,
    allow_escape: bool = False,
) -> dict[str, Any]:
    """Multi-step rollouts from ``starts`` start points spread evenly over ``data`` (over those
    whose history the model can use: complete, unless it takes missing values), and the
    geometry of one long free run. Models with ``capabilities.forecasts_at_times`` forecast at
    the data's own times (so irregular samples are scored too), others by steps of their dt
    (DataError unless ``data`` are sampled at it).

    Returns the ``dynid score --json`` document (kind ``score``): rmse and nrmse over all
    rollouts and steps (nrmse divides each variable by its standard deviation in ``data``);
    a rollout that leaves the finite numbers or the training data's range widened by that
    range on each side (``bounded_rollout``; ``forecast`` refuses such a path) has diverged from
    that step on: counted in ``diverged_rollouts`` (``escaped_rollouts`` of them by the range),
    and every summary it enters is null, never a number (``allow_escape``: only leaving the
    finite numbers diverges, as ``forecast``'s, for systems that leave their training range:
    growing, unstable, or scored on data beyond it);
    missing targets (NaN in ``data``) are skipped, not errors, counted in ``missing_targets``,
    and VPT judges only the steps with an observed target (``metrics.forecast.valid_steps``);
    per-variable values, RMSE per horizon step, and the mean valid prediction time (time units;
    in Lyapunov times too with ``lyapunov``, the largest Lyapunov exponent in 1/time units, or
    with the model's own estimate). free_run: the length in samples of the free run from the
    start of ``data`` whose ``d_stsp`` and ``d_h`` (``dynid.metrics.dsr``) against ``data``
    are reported; None = max(samples in ``data``, FREE_RUN_MIN) (with inputs: as far as the
    first trial's go, ``free_run_scores``), 0 = none. estimate_lyapunov:
    the model's Lyapunov spectrum by the QR method over ``lyapunov_steps`` samples of its own
    orbit (``lyapunov_scores``).
    """
    if horizon < 1 or starts < 1:
        raise UsageError("--horizon and --starts must be at least 1")
    if lyapunov is not None and not (math.isfinite(lyapunov) and lyapunov > 0):
        raise UsageError(f"--lyapunov {lyapunov:g}: the largest Lyapunov exponent must be a positive "
                         "number (1/time); Lyapunov times measure chaotic systems only")
    _check_variables(model, data)
    at_times = model.capabilities.forecasts_at_times
    if not at_times:
        check_step(model, data)  # rollouts are compared with the data sample by sample
    need = model.history_length
    candidates = [(k, first, s) for k, trial in enumerate(data.trials) for first, s in _rollout_starts(model, trial, horizon)]
    if not candidates:
        gaps = (f", of which the first {need} (the model's history) have no missing value"
                if np.isnan(data.stacked()[0]).any() else "")
        raise DataError(
            f"{data.source}: no trial has {need + horizon} samples{gaps} for a rollout of "
            f"--horizon {horizon}"
        )
    picks = np.unique(np.linspace(0, len(candidates) - 1, min(starts, len(candidates))).round())
    scale = np.nanstd(data.stacked()[0], axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    predicted, observed, leads, divergences, escapes = [], [], [], [], 0
    for index in picks.astype(int):
        k, first, s = candidates[index]
        trial = data.trials[k]
        future = None if trial.u is None else trial.u[s : s + horizon]
        # Forecast at the data's own times where the model can, else by steps of dt_.
        times = trial.t[s : s + horizon] if at_times else None
        states, diverged_at, escaped = bounded_rollout(model, trial.slice(first, s), horizon, future, times=times,
                                                       escape_range=None if allow_escape else model.data_range_)
        escapes += escaped
        predicted.append(states)
        observed.append(trial.x[s : s + horizon])
        leads.append(model.dt_ * np.arange(1, horizon + 1) if times is None else times - trial.t[s - 1])
        if diverged_at is not None:
            divergences.append(diverged_at)
    pred, true = np.stack(predicted), np.stack(observed)
    # Missing targets (NaN in ``data``) are skipped, not errors; a diverged rollout has no
    # finite error: its summaries are null (JSON), never a number (``metrics.forecast``).
    per_step = masked_rms(pred, true, axis=(0, 2))
    steps, still_valid = valid_steps(pred, true, scale, threshold=vpt_threshold)
    # VPT: the lead time of the first invalid step, or of the last judged one of a rollout
    # still valid (0 for a rollout with no target observed).
    leads_at = np.stack(leads)
    vpt = np.where(steps > 0, np.take_along_axis(leads_at, np.maximum(steps, 1)[:, None] - 1, axis=1)[:, 0], 0.0)
    # A rollout still valid where its targets end only says VPT >= its lead there: the mean is censored.
    censored = int(np.sum(still_valid))
    result: dict[str, Any] = {
        "kind": SCORE,
        "horizon": horizon,
        "starts": len(picks),
        "rmse": _finite_or_none(masked_rms(pred, true)),
        "nrmse": _finite_or_none(masked_rms(pred, true, scale=scale)),
        "valid_prediction_time": float(np.mean(vpt)),
        "valid_prediction_time_censored": censored > 0,
        "censored_rollouts": censored,
        "diverged_rollouts": len(divergences),
        "first_divergence_step": min(divergences) if divergences else None,
        "escaped_rollouts": escapes,
        "missing_targets": int(np.sum(np.isnan(true))),
        "rmse_per_variable": {
            name: _finite_or_none(value)
            for name, value in zip(model.variables_, masked_rms(pred, true, axis=(0, 1)))
        },
        "rmse_per_step": [_finite_or_none(value) for value in per_step],
        "vpt_threshold": vpt_threshold,
        "dt": model.dt_,
        "allow_escape": allow_escape,
    }
    if free_run != 0:
        result.update(free_run_scores(model, data, free_run, allow_escape=allow_escape))
    if estimate_lyapunov:
        result.update(lyapunov_scores(model, data, lyapunov_steps))
        estimated = result["lyapunov_exponents"]
        if lyapunov is None and estimated and estimated[0] > 0:
            lyapunov = estimated[0]
    if lyapunov is not None:
        result["valid_prediction_time_lyapunov"] = float(np.mean(vpt)) * lyapunov
    return result


def _rollout_starts(model: Backend, trial: Trial, horizon: int) -> list[tuple[int, int]]:
    """(first, s) for every s from which ``model`` can roll out ``horizon`` steps of ``trial``
    from the history ``trial[first:s]``: s >= history_length, no row of the history the model
    cannot take (a missing state value, unless it takes missing values; a missing input), at
    least history_length of them, and inputs complete over the rollout. ``first``: the row after
    the last such row before s (0 if none), so a model sees only its gap-free past."""
    need, n = model.history_length, trial.n_samples
    unusable = np.zeros(n, dtype=bool) if model.capabilities.nan else np.isnan(trial.x).any(axis=1)
    starts = np.arange(need, n - horizon + 1)
    usable = np.ones(starts.shape, dtype=bool)
    if trial.u is not None and model.inputs_:
        missing_input = np.isnan(trial.u).any(axis=1)
        unusable |= missing_input
        before_u = np.concatenate([[0], np.cumsum(missing_input)])
        usable &= before_u[starts + horizon] == before_u[starts]
    before = np.concatenate([[0], np.cumsum(unusable)])  # unusable rows before each index
    usable &= before[starts] == before[starts - need]
    bad_rows = np.flatnonzero(unusable)
    firsts = np.concatenate([[0], bad_rows + 1])[np.searchsorted(bad_rows, starts)]
    return [(int(first), int(s)) for first, s in zip(firsts[usable], starts[usable])]


@dataclass(frozen=True)
class FreeRun:
    """A free run as ``dynid score`` scores it (``score_free_run``): ``states`` (steps, d), NaN
    from ``diverged_at`` (1-based step) on, None when it did not diverge; ``escaped``: it left
    the escape range rather than the finite numbers; it starts after the first ``history``
    samples of the data's first trial, driven by ``inputs`` (steps, m) for a model with inputs
    (None without)."""

    states: np.ndarray
    history: int
    diverged_at: int | None
    escaped: bool
    inputs: np.ndarray | None = None

    @property
    def steps(self) -> int:
        return self.states.shape[0]


def free_run_scores(model: Backend, data: Dataset, steps: int | None = None, *,
                    allow_escape: bool = False) -> dict[str, Any]:
    """``d_stsp`` and ``d_h`` of a free run of ``steps`` samples (None: max(samples in
    ``data``, FREE_RUN_MIN); for a model with inputs, as far as the first trial's inputs go,
    beyond which they are held at their last value) started from the first ``history_length``
    samples of ``data``'s first trial: D_stsp against every complete sample of ``data`` (no
    missing value), D_H against its longest stretch of complete samples (null for irregular
    samples, and for a stretch shorter than ``dynid.metrics.dsr.spectrum_min_length``). Both
    null, with
    ``free_run_diverged_step``, when the run diverges: leaves the finite numbers or
    (``free_run_escaped``) the training data's range widened by that range on each side
    (``allow_escape``: ``data``'s range, where these measures see it). The run is
    ``score_free_run``'s, the measures ``free_run_measures``'."""
    return free_run_measures(score_free_run(model, data, steps, allow_escape=allow_escape), data)


def score_free_run(model: Backend, data: Dataset, steps: int | None = None, *,
                   allow_escape: bool = False) -> FreeRun:
    """The free run ``free_run_scores`` scores (the arguments are its): the report draws this
    run beside its figures."""
    first = data.trials[0]
    if first.n_samples < model.history_length:
        raise DataError(f"{data.source}: the first trial is shorter than the "
                        f"{model.history_length} samples the model starts from")
    # A driven run past its inputs holds the last one: another system than the data's (an exact
    # model of a forced oscillator scored D_stsp 1.8 on 10,000 steps, 0.13 within its inputs).
    driven = first.n_samples - model.history_length if model.inputs_ else None
    if steps is None and driven is not None and driven < 2:
        raise DataError(f"{data.source}: the first trial's inputs go {driven} step(s) past the "
                        f"{model.history_length} samples the model starts from, too few for a "
                        "free run (--free-run 0: none)")
    steps = (max(data.n_samples, FREE_RUN_MIN) if driven is None else driven) if steps is None else steps
    if steps < 2:
        raise UsageError(f"--free-run {steps}: needs at least 2 steps (0 = none)")
    future = _held_inputs(model, first, steps)
    # D_stsp bins on DATA's range and drops samples outside it, D_H standardises the run: a run
    # beyond DATA's range widened alike has no geometry these measure, escapes allowed or not.
    states, diverged_at, escaped = bounded_rollout(
        model, first.slice(0, model.history_length), steps, future,
        escape_range=data.value_range() if allow_escape else model.data_range_)
    return FreeRun(states, model.history_length, diverged_at, escaped, future)


def free_run_measures(run: FreeRun, data: Dataset) -> dict[str, Any]:
    """``free_run_scores``' fields of ``run`` (``score_free_run`` on ``data``)."""
    from dynid.metrics.dsr import power_spectrum_distance, spectrum_min_length, state_space_divergence

    # Gaps: the reference distribution is that of the complete samples, the reference
    # spectrum that of the longest gap-free stretch.
    observed = data.stacked()[0]
    complete = observed[~np.isnan(observed).any(axis=1)]
    longest = longest_gap_free_stretch(data)
    finite = run.diverged_at is None
    return {
        "d_stsp": (_finite_or_none(state_space_divergence(complete, run.states))
                   if finite and len(complete) > 1 else None),
        # Irregular samples have no power spectrum to compare with, short ones none resolved.
        "d_h": (power_spectrum_distance(longest, run.states)
                if finite and data.dt is not None and len(longest) >= spectrum_min_length() else None),
        "free_run_steps": run.steps,
        "free_run_diverged_step": run.diverged_at,
        "free_run_escaped": run.escaped,
    }


def longest_gap_free_stretch(data: Dataset) -> np.ndarray:
    """(n, d) the longest run of consecutive complete samples of any trial of ``data``: the
    reference of D_H (the first of equal length)."""
    return max((stretch for trial in data.trials for stretch in _gap_free_stretches(trial.x)), key=len)


def _gap_free_stretches(x: np.ndarray) -> list[np.ndarray]:
    """The runs of consecutive complete rows (no NaN) of x (T, d), in order (one empty if none)."""
    return [x[start:stop] for start, stop in true_runs(~np.isnan(x).any(axis=1))] or [x[:0]]


def _held_inputs(model: Backend, trial: Trial, steps: int) -> np.ndarray | None:
    """Inputs for a free run past ``trial``'s first samples: its own inputs, the last row held
    beyond its end."""
    if trial.u is None or not model.inputs_:
        return None
    start = model.history_length
    rows = np.minimum(np.arange(start, start + steps), trial.n_samples - 1)
    return trial.u[rows]


def lyapunov_scores(model: Backend, data: Dataset, steps: int = LYAPUNOV_STEPS) -> dict[str, Any]:
    """The model's Lyapunov exponents (1/time units, largest first) by the QR method along its
    own orbit from the start of ``data``, as score fields: ``lyapunov_exponents`` (as many as
    variables, at most its state dimension), ``lyapunov_standard_error``,
    ``kaplan_yorke_dimension``, ``lyapunov_orbit_time``, ``lyapunov_state_dimension``.
    Derivatives are the backend's analytic Jacobians where it has them, else finite differences
    (``Backend.step_map``). Null exponents, with ``lyapunov_error``, when the orbit diverges."""
    from dynid.metrics.lyapunov import BLOCKS, lyapunov_spectrum

    if steps < LYAPUNOV_MIN_STEPS:
        raise UsageError(f"--lyapunov-steps {steps}: needs at least {LYAPUNOV_MIN_STEPS}")
    first = data.trials[0]
    if first.n_samples < model.history_length:
        raise DataError(f"{data.source}: the first trial is shorter than the "
                        f"{model.history_length} samples the model starts from")
    mapping = model.step_map(first.slice(0, model.history_length))
    dimension = mapping.state.size
    fields: dict[str, Any] = {"lyapunov_state_dimension": dimension,
                              "lyapunov_orbit_time": steps * model.dt_}
    try:
        with np.errstate(all="ignore"):
            spectrum = lyapunov_spectrum(
                mapping.step, mapping.state, mapping.stride * model.dt_,
                max(steps // mapping.stride, BLOCKS), jacobian=mapping.jacobian,
                count=min(dimension, model.n_variables),
                transient=LYAPUNOV_TRANSIENT // mapping.stride,
            )
    except Diverged as exc:
        return {**fields, "lyapunov_exponents": None, "lyapunov_standard_error": None,
                "kaplan_yorke_dimension": None, "lyapunov_error": str(exc)}
    finite = bool(np.all(np.isfinite(spectrum.exponents)))
    return {
        **fields,
        "lyapunov_exponents": spectrum.exponents.tolist() if finite else None,
        "lyapunov_standard_error": spectrum.standard_error.tolist() if finite else None,
        "kaplan_yorke_dimension": spectrum.kaplan_yorke_dimension if finite else None,
        **({} if finite else {"lyapunov_error": "the orbit left the finite numbers"}),
    }


def model_info(model_file: ModelFile) -> dict[str, Any]:
    """The ``dynid info --json`` document (kind ``info``) of a loaded model file: its metadata,
    ``arrays`` (name -> shape) and, for equation backends, ``equations`` [{lhs, rhs}]."""
    document = dict(model_file.metadata)
    document["arrays"] = {name: list(np.shape(a)) for name, a in model_file.model.arrays().items()}
    equations = model_file.model.equations()
    if equations:
        document["equations"] = [{"lhs": lhs, "rhs": rhs} for lhs, rhs in equations]
    return tagged(INFO, document)


def identify(
    data: Dataset,
    params: Params = None,
    *,
    seed: int | None = None,
    device: str = "auto",
    progress: Any = None,
    **options: object,
) -> dict[str, Any]:
    """Governing equations of ``data``: the ``dynid symbolic --format json`` document (kind
    ``symbolic``: variables, inputs, symbols, equations with terms, metrics).

    options: any ``symbolic`` hyperparameter by name (``library="poly3"``, ``ensemble=0``,
    ``discrete=True``, ...), or ``params`` as for ``fit``; not both. ``identify_model`` also
    returns the fitted model (to save it).
    """
    fitted = identify_model(data, params, seed=seed, device=device, progress=progress, **options)
    return equations_document(fitted.model, seed)


def identify_model(
    data: Dataset,
    params: Params = None,
    *,
    seed: int | None = None,
    device: str = "auto",
    progress: Any = None,
    **options: object,
) -> FitResult:
    """The fitted ``symbolic`` model behind ``identify`` (arguments as there)."""
    return fit(data, "symbolic", _one_params(params, options), seed=seed, device=device,
               progress=progress)


def identify_pde(
    fields: SpaceTimeFields, params: PdeParams | Mapping[str, object] | None = None, *, seed: int | None = None,
    **options: object,
) -> dict[str, Any]:
    """Governing PDEs of space-time ``fields`` (``dynid.data.fields.read_fields``): the
    ``dynid symbolic --pde --format json`` document (kind ``symbolic``, ``"pde": true``).

    options: any ``PdeParams`` field by name (``max_order=3``, ``ensemble=0``), or ``params``;
    not both. ``seed`` makes the bootstrap intervals repeatable."""
    from dynid.symbolic.pde import PdeParams, identify_pde as identify_fields
    from dynid.symbolic.pde.document import pde_result

    given = _one_params(params, options)
    hyper = given if isinstance(given, PdeParams) else PdeParams.from_values(dict(given or {}))
    return tagged(SYMBOLIC, {**pde_result(identify_fields(fields, hyper, seed=seed)), "seed": seed})


def equations_document(model: Backend, seed: int | None = None) -> dict[str, Any]:
    """The equations of a fitted equation backend (``symbolic``, ``sindy``) as the ``symbolic``
    JSON document; ``seed``, the fit's (its bootstrap ensemble's) seed, is recorded in it."""
    from dynid.symbolic import equations_result

    return tagged(SYMBOLIC, {**equations_result(model), "seed": seed})


def discover_causal(
    data: Dataset,
    method: str = "auto",
    params: Params = None,
    *,
    clusters: str | Mapping[str, Sequence[str]] | None = None,
    max_lag: int = 5,
    alpha: float = 0.05,
    correction: str = "bh",
    seed: int | None = None,
    device: str = "auto",
    training: TrainingOptions | None = None,
    **method_params: object,
) -> CausalGraph:
    """Which variable of ``data`` drives which, at which lag: ``dynid discover-causal``.

    method: a causal registry name; its own options as ``**method_params`` (``penalty="lasso"``)
    or ``params`` as for ``fit``, not both. clusters: ``"A=x1,x2;B=x3"`` or ``{"A": ["x1",
    "x2"], "B": ["x3"]}`` tests links between those groups instead (granger only; variables in
    no cluster are conditioned on). max_lag in samples; alpha after ``correction`` (bh,
    bonferroni, none). training: ``--max-time``, checkpoints and threads, for methods that train
    a network (UsageError for others when any is set). Returns the CausalGraph (``causal_document`` gives the JSON the command
    prints; for ``dynamic``, ``dynid.write_strength_series`` writes the strength series).
    """
    from dynid.causal import CausalSettings
    from dynid.causal import registry as causal_registry

    method = causal_method(method, clusters)
    cls = causal_registry.get(method)
    hyper = cls.Params.build(_one_params(params, method_params))
    if training is not None and training.trains and not cls.trains:
        raise UsageError(f"--max-time, --checkpoint, --resume and --threads: --method {method} "
                         "trains no network")
    settings = CausalSettings(
        max_lag=max_lag,
        alpha=alpha,
        correction=correction,
        seed=seed,
        device=resolve_device(device, f"--method {method}", cls.cuda),
        **({"training": training} if training is not None else {}),
    )
    if clusters is None:
        return _with_seed(cls(hyper).discover(data, settings), seed)
    from dynid.causal.clusters import check_clusters, cluster_granger, parse_clusters

    if method not in CLUSTER_METHODS:
        raise UsageError(f"--clusters is supported with: {', '.join(CLUSTER_METHODS)}")
    if hyper != cls.Params():
        raise UsageError(f"--clusters runs the group test with no {method} options; drop -p")
    if isinstance(clusters, str):
        groups = parse_clusters(clusters, data.variables)
    else:
        groups = check_clusters(clusters, data.variables)
    return _with_seed(cluster_granger(data, groups, settings), seed)


def causal_method(method: str, clusters: object) -> str:
    """The method ``discover_causal`` runs: ``method``, except that ``auto`` with ``clusters``
    is granger (the group test is granger's; auto has nothing else to choose)."""
    return "granger" if clusters is not None and method == "auto" else method


def _with_seed(graph: CausalGraph, seed: int | None) -> CausalGraph:
    """Every result records its seed (permutation tests, surrogates and training use it)."""
    graph.extra.setdefault("seed", seed)
    return graph


def causal_document(graph: CausalGraph) -> dict[str, Any]:
    """``graph`` as the ``causal`` JSON document ``dynid discover-causal --json`` prints."""
    return tagged(CAUSAL, graph.to_json_dict())


def _one_params(params: Params, options: Mapping[str, object]) -> Params:
    """``params`` or keyword ``options``: a caller gives hyperparameters one way."""
    if options and params is not None:
        raise UsageError(
            f"give hyperparameters either as params or as keywords ({', '.join(options)}), not both"
        )
    return dict(options) if options else params


def rollout(
    model: Backend,
    history: Trial,
    steps: int,
    future_inputs: np.ndarray | None = None,
    *,
    times: np.ndarray | None = None,
) -> tuple[np.ndarray, int | None]:
    """``model.simulate`` that reports divergence instead of hiding it; ``model.simulate_at``
    the ``steps`` times ``times`` (steps,) when given.

    Returns (steps, d) states, NaN from the first non-finite step on, and that step (1-based),
    or None when the whole rollout stayed finite.
    """
    try:
        states = np.asarray(
            model.simulate(history, steps, future_inputs) if times is None
            else model.simulate_at(history, times, future_inputs),
            dtype=float,
        )
    except Diverged as exc:
        return exc.states, exc.step
    step = first_nonfinite_step(states)
    if step is None:
        return states, None
    states = states.copy()
    states[step - 1:] = np.nan
    return states, step


def bounded_rollout(
    model: Backend,
    history: Trial,
    steps: int,
    future_inputs: np.ndarray | None = None,
    *,
    times: np.ndarray | None = None,
    escape_range: np.ndarray | None,
) -> tuple[np.ndarray, int | None, bool]:
    """``rollout`` that also counts leaving ``escape_range`` (2, d) widened by that range on
    each side (``dynid.metrics.dsr.escape_step``) as diverging, as ``forecast`` refuses a path
    that leaves the training data's (``model.data_range_``); None: only leaving the finite
    numbers diverges. Returns (steps, d) states, NaN from the step it diverged at on; that
    step (1-based) or None; and whether it escaped the range (False when it left the finite
    numbers, or stayed inside)."""
    from dynid.metrics.dsr import escape_step

    states, diverged_at = rollout(model, history, steps, future_inputs, times=times)
    escaped_at = None if escape_range is None else escape_step(escape_range[0], escape_range[1], states)
    # escape_step flags a non-finite row too: an escape before the first such row is one.
    if escaped_at is None or (diverged_at is not None and escaped_at >= diverged_at):
        return states, diverged_at, False
    states = states.copy()
    states[escaped_at - 1:] = np.nan
    return states, escaped_at, True


def range_escape_step(model: Backend, path: np.ndarray) -> int | None:
    """The first row (1-based step) of ``path`` (steps, d) that is not finite or leaves the
    training data's range widened by that range on each side (``Backend.data_range_``,
    ``dynid.metrics.dsr.escape_step``): forecast's escape check; score's and the report's
    (``bounded_rollout`` with ``model.data_range_``) is the same rule. None when every row
    stays inside, or the model (from an older file) records no range."""
    from dynid.metrics.dsr import escape_step

    bounds = model.data_range_
    return None if bounds is None else escape_step(bounds[0], bounds[1], path)


def first_nonfinite_step(states: np.ndarray) -> int | None:
    """The first row (1-based step) of ``states`` (steps, d) holding NaN or inf, None if none."""
    bad = ~np.all(np.isfinite(states), axis=1)
    return int(np.argmax(bad)) + 1 if bad.any() else None


def check_step(model: Backend, data: Dataset) -> None:
    """DataError unless ``data`` are sampled uniformly at the model's step ``dt_``."""
    if data.dt is None:
        raise DataError(
            f"{data.source}: the sampling is irregular (or differs between trials) but the "
            f"{model.name} model steps by dt = {model.dt_:g}; interpolate onto its grid with "
            f"--resample {model.dt_:g}"
        )
    if not math.isclose(data.dt, model.dt_, rel_tol=STEP_RTOL):
        raise DataError(
            f"{data.source}: samples are {data.dt:g} apart but the model was fitted at "
            f"dt = {model.dt_:g}; resample the data with --resample {model.dt_:g}"
        )


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _check_variables(model: Backend, data: Dataset) -> None:
    if tuple(data.variables) != tuple(model.variables_):
        raise DataError(
            f"{data.source}: variables {', '.join(data.variables)} differ from the model's "
            f"({', '.join(model.variables_)}); select them with --columns"
        )
    if tuple(data.inputs) != tuple(model.inputs_):
        raise DataError(
            f"{data.source}: the model takes inputs ({', '.join(model.inputs_) or 'none'}); "
            "give them with --inputs"
        )

