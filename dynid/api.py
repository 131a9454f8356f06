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
from dynid.documents import CAUSAL, INFO, SCORE, SYMBOLIC, tagged
from dynid.errors import DataError, Diverged, UsageError
from dynid.metrics import valid_prediction_time
from dynid.models import registry
from dynid.models.base import Backend, Hyperparameters, LatentStates
from dynid.runtime import resolve_device, seed_everything
from dynid.training import TrainingOptions

if TYPE_CHECKING:
    from dynid.causal.graph import CausalGraph
    from dynid.modelfile import ModelFile

# Hyperparameters as the API takes them: the dataclass, typed values, or "key=value" strings.
Params = Hyperparameters | Mapping[str, object] | Sequence[str] | None
# Methods ``discover_causal(..., clusters=...)`` works with.
CLUSTER_METHODS = ("granger",)


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
) -> FitResult:
    """Fit backend ``model`` (a registry name) on ``data``.

    params: the backend's hyperparameter dataclass, a dict of typed values (``{"rank": 3}``;
    strings are parsed as ``-p`` values), or ``["key=value", ...]`` as on the command line.
    UsageError for an unknown key (naming the valid ones) or a value of the wrong type.
    training: ``--max-time``, checkpoints and threads, for backends that train a network
    (UsageError for others when any is set).
    """
    from dynid.modelfile import describe_fit

    backend = registry.get(model)
    if training is not None and training.trains and not backend.capabilities.training:
        raise UsageError(f"--max-time, --checkpoint, --resume and --threads: the {model} "
                         "backend trains no network")
    hyper = backend.Params.build(params)
    chosen = resolve_device(device, f"the {model} backend", backend.capabilities.cuda)
    seed_everything(seed)
    started = time.perf_counter()
    fitted = backend(hyper).fit(data, seed=seed, device=chosen, progress=progress)
    seconds = time.perf_counter() - started
    return FitResult(fitted, describe_fit(fitted, data, seed=seed, device=chosen, fit_seconds=seconds))


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


def forecast(
    model: Backend,
    data: Dataset,
    horizon: int,
    future_inputs: np.ndarray | None = None,
    *,
    interval: float | None = None,
) -> Forecast:
    """Continue from the end of ``data``'s last trial for ``horizon`` steps of the model's dt.

    interval: a probability (0.9) for a central predictive interval, from models that have a
    predictive distribution (UsageError for others).
    """
    if horizon < 1:
        raise UsageError(f"--horizon {horizon}: must be at least 1")
    _check_variables(model, data)
    if model.history_length > 1:
        # The model reads several past samples, spaced by its own step.
        check_step(model, data)
    history = data.trials[-1]
    t = history.t[-1] + model.dt_ * np.arange(1, horizon + 1)
    if interval is not None:
        band = model.predictive(history, horizon, future_inputs, interval)
        return Forecast(t=t, x=band.mean, variables=model.variables_, lower=band.lower,
                        upper=band.upper, level=band.level)
    x, diverged_at = rollout(model, history, horizon, future_inputs)
    if diverged_at is not None:
        raise Diverged(
            f"the {model.name} forecast diverged at step {diverged_at} of {horizon} "
            f"(t = {history.t[-1] + model.dt_ * diverged_at:.6g}); nothing written",
            step=diverged_at,
            states=x,
        )
    return Forecast(t=t, x=x, variables=model.variables_)


def states(model: Backend, data: Dataset) -> LatentStates:
    """The hidden states of every sample of ``data`` (``dynid states``): smoothed latent means
    and standard deviations for continuous latent models. UsageError for models without
    hidden states; NaN cells are fine where the model handles missing values."""
    _check_variables(model, data)
    if model.capabilities.uniform_steps:
        check_step(model, data)  # the filter steps by the model's dt, sample by sample
    return model.states(data)


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

    Returns the ``dynid score --json`` document (kind ``score``): rmse and nrmse over all rollouts and steps (nrmse divides each
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
        "kind": SCORE,
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


def equations_document(model: Backend, seed: int | None = None) -> dict[str, Any]:
    """The equations of a fitted equation backend (``symbolic``, ``sindy``) as the ``symbolic``
    JSON document; ``seed``, the fit's (its bootstrap ensemble's) seed, is recorded in it."""
    from dynid.symbolic import equations_result

    return tagged(SYMBOLIC, {**equations_result(model), "seed": seed})


def discover_causal(
    data: Dataset,
    method: str = "granger",
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

