"""The Python API behind ``dynid fit``, ``forecast`` and ``score``.

Each function takes a Dataset (from ``dynid.load``) and returns plain values; the CLI is a thin
layer over these.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, Diverged, UsageError
from dynid.metrics import valid_prediction_time
from dynid.models import registry
from dynid.models.base import Backend, Hyperparameters
from dynid.runtime import resolve_device, seed_everything


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
    params: Hyperparameters | list[str] | dict[str, Any] | None = None,
    *,
    seed: int | None = None,
    device: str = "auto",
    progress: Any = None,
) -> FitResult:
    """Fit backend ``model`` (a registry name) on ``data``.

    params: a hyperparameter dataclass, ``["key=value", ...]`` as on the command line, or a dict.
    """
    from dynid.modelfile import describe_fit

    backend = registry.get(model)
    if params is None:
        hyper = backend.Params()
    elif isinstance(params, Hyperparameters):
        hyper = params
    elif isinstance(params, dict):
        hyper = backend.Params.parse([f"{k}={v}" for k, v in params.items()])
    else:
        hyper = backend.Params.parse(list(params))
    chosen = resolve_device(device, f"the {model} backend", backend.capabilities.cuda)
    seed_everything(seed)
    started = time.perf_counter()
    fitted = backend(hyper).fit(data, seed=seed, device=chosen, progress=progress)
    seconds = time.perf_counter() - started
    return FitResult(fitted, describe_fit(fitted, data, seed=seed, device=chosen, fit_seconds=seconds))


@dataclass
class Forecast:
    """``t`` (horizon,) times continuing the data's; ``x`` (horizon, d) predicted states."""

    t: np.ndarray
    x: np.ndarray
    variables: tuple[str, ...]


def forecast(
    model: Backend, data: Dataset, horizon: int, future_inputs: np.ndarray | None = None
) -> Forecast:
    """Continue from the end of ``data``'s last trial for ``horizon`` steps of the model's dt."""
    if horizon < 1:
        raise UsageError(f"--horizon {horizon}: must be at least 1")
    _check_variables(model, data)
    if model.history_length > 1:
        # The model reads several past samples, spaced by its own step.
        check_step(model, data)
    history = data.trials[-1]
    x, diverged_at = rollout(model, history, horizon, future_inputs)
    if diverged_at is not None:
        raise Diverged(
            f"the {model.name} forecast diverged at step {diverged_at} of {horizon} "
            f"(t = {history.t[-1] + model.dt_ * diverged_at:.6g}); nothing written",
            step=diverged_at,
            states=x,
        )
    t = history.t[-1] + model.dt_ * np.arange(1, horizon + 1)
    return Forecast(t=t, x=x, variables=model.variables_)


def score(
    model: Backend,
    data: Dataset,
    *,
    horizon: int = 50,
    starts: int = 20,
    vpt_threshold: float = 0.4,
    lyapunov: float | None = None,
) -> dict[str, Any]:
    """Multi-step rollouts from ``starts`` start points spread evenly over ``data``.

    Returns the contract's JSON: rmse and nrmse over all rollouts and steps (nrmse divides each
    variable by its standard deviation in ``data``), per-variable values, RMSE per horizon step,
    and the mean valid prediction time (time units; in Lyapunov times too with ``lyapunov``, the
    largest Lyapunov exponent in 1/time units).
    """
    if horizon < 1 or starts < 1:
        raise UsageError("--horizon and --starts must be at least 1")
    _check_variables(model, data)
    check_step(model, data)  # rollouts are compared with the data sample by sample
    need = model.history_length
    candidates = [
        (k, s)
        for k, trial in enumerate(data.trials)
        for s in range(need, trial.n_samples - horizon + 1)
    ]
    if not candidates:
        raise DataError(
            f"{data.source}: no trial has {need + horizon} samples for a rollout of "
            f"--horizon {horizon}"
        )
    picks = np.unique(np.linspace(0, len(candidates) - 1, min(starts, len(candidates))).round())
    scale = np.std(data.stacked()[0], axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    predicted, observed, divergences = [], [], []
    for index in picks.astype(int):
        k, s = candidates[index]
        trial = data.trials[k]
        future = None if trial.u is None else trial.u[s : s + horizon]
        states, diverged_at = rollout(model, trial.slice(0, s), horizon, future)
        predicted.append(states)
        observed.append(trial.x[s : s + horizon])
        if diverged_at is not None:
            divergences.append(diverged_at)
    pred, true = np.stack(predicted), np.stack(observed)
    errors = pred - true
    # A diverged rollout has no finite error: its summaries are null (JSON), never a number.
    per_step = np.sqrt(np.mean(errors**2, axis=(0, 2)))
    vpt = valid_prediction_time(pred, true, scale, model.dt_, threshold=vpt_threshold, per_rollout=True)
    # A rollout still valid at the horizon only says VPT >= horizon * dt: the mean is censored.
    censored = int(np.sum(vpt >= horizon * model.dt_ * (1 - 1e-12)))
    result: dict[str, Any] = {
        "horizon": horizon,
        "starts": len(picks),
        "rmse": _finite_or_none(np.sqrt(np.mean(errors**2))),
        "nrmse": _finite_or_none(np.sqrt(np.mean((errors / scale) ** 2))),
        "valid_prediction_time": float(np.mean(vpt)),
        "valid_prediction_time_censored": censored > 0,
        "censored_rollouts": censored,
        "diverged_rollouts": len(divergences),
        "first_divergence_step": min(divergences) if divergences else None,
        "rmse_per_variable": {
            name: _finite_or_none(value)
            for name, value in zip(model.variables_, np.sqrt(np.mean(errors**2, axis=(0, 1))))
        },
        "rmse_per_step": [_finite_or_none(value) for value in per_step],
        "vpt_threshold": vpt_threshold,
        "dt": model.dt_,
    }
    if lyapunov is not None:
        result["valid_prediction_time_lyapunov"] = float(np.mean(vpt)) * lyapunov
    return result


def rollout(
    model: Backend, history: Trial, steps: int, future_inputs: np.ndarray | None = None
) -> tuple[np.ndarray, int | None]:
    """``model.simulate`` that reports divergence instead of hiding it.

    Returns (steps, d) states, NaN from the first non-finite step on, and that step (1-based),
    or None when the whole rollout stayed finite.
    """
    try:
        states = np.asarray(model.simulate(history, steps, future_inputs), dtype=float)
    except Diverged as exc:
        return exc.states, exc.step
    bad = ~np.all(np.isfinite(states), axis=1)
    if not bad.any():
        return states, None
    first = int(np.argmax(bad))
    states = states.copy()
    states[first:] = np.nan
    return states, first + 1


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

