"""The Python API behind ``dynid fit``, ``forecast`` and ``score``.

Each function takes a Dataset (from ``dynid.load``) and returns plain values; the CLI is a thin
layer over these.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.metrics import valid_prediction_time
from dynid.models import registry
from dynid.models.base import Backend, Hyperparameters
from dynid.runtime import resolve_device, seed_everything
from dynid.training import TrainingOptions


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
    training: TrainingOptions | None = None,
) -> FitResult:
    """Fit backend ``model`` (a registry name) on ``data``.

    params: a hyperparameter dataclass, ``["key=value", ...]`` as on the command line, or a dict.
    training: ``--max-time``, checkpoints and threads, for backends that train a network
    (UsageError for others when any is set).
    """
    from dynid.modelfile import describe_fit

    backend = registry.get(model)
    if training is not None and training.trains and not backend.capabilities.training:
        raise UsageError(f"--max-time, --checkpoint, --resume and --threads: the {model} "
                         "backend trains no network")
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
    history = data.trials[-1]
    x = model.simulate(history, horizon, future_inputs)
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
    predicted, observed = [], []
    for index in picks.astype(int):
        k, s = candidates[index]
        trial = data.trials[k]
        future = None if trial.u is None else trial.u[s : s + horizon]
        predicted.append(model.simulate(trial.slice(0, s), horizon, future))
        observed.append(trial.x[s : s + horizon])
    pred, true = np.stack(predicted), np.stack(observed)
    errors = pred - true
    per_step = np.sqrt(np.mean(errors**2, axis=(0, 2)))
    vpt = valid_prediction_time(pred, true, scale, model.dt_, threshold=vpt_threshold)
    result: dict[str, Any] = {
        "horizon": horizon,
        "starts": len(picks),
        "rmse": float(np.sqrt(np.mean(errors**2))),
        "nrmse": float(np.sqrt(np.mean((errors / scale) ** 2))),
        "valid_prediction_time": float(np.mean(vpt)),
        "rmse_per_variable": dict(zip(model.variables_, np.sqrt(np.mean(errors**2, axis=(0, 1))).tolist())),
        "rmse_per_step": per_step.tolist(),
        "vpt_threshold": vpt_threshold,
        "dt": model.dt_,
    }
    if lyapunov is not None:
        result["valid_prediction_time_lyapunov"] = float(np.mean(vpt)) * lyapunov
    return result


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

