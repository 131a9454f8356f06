"""``fit --model auto``: fit every registered backend that applies, rank them by multi-step
error on held-out blocks of the training data, refit the best on all of it.

The held-out block is the last ``HOLDOUT_FRACTION`` of every trial: forecasting the future of a
record from its past is what a forecast is asked to do, and a contiguous block keeps the
autocorrelation of the training rows from leaking into the test (a random split would not).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset
from dynid.errors import DataError, DynidError
from dynid.models import registry
from dynid.models.base import Backend

HOLDOUT_FRACTION = 0.2
# Rollout length on the held-out block, in samples (shorter blocks use half their length).
HOLDOUT_HORIZON = 50
HOLDOUT_STARTS = 20


@dataclass
class Candidate:
    """One backend's outcome: held-out scores, or why it was skipped or failed."""

    model: str
    status: str  # "scored", "failed", "skipped"
    nrmse: float | None = None
    valid_prediction_time: float | None = None
    diverged_rollouts: int = 0
    fit_seconds: float | None = None
    reason: str | None = None

    def rank_key(self) -> tuple[int, float, float]:
        scored = self.status == "scored" and self.nrmse is not None
        return (
            0 if scored else 1,
            self.nrmse if scored else float("inf"),
            -(self.valid_prediction_time or 0.0),
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class AutoFit:
    """The best backend refitted on all data (``result``) and every candidate, best first."""

    result: Any  # api.FitResult
    ranking: list[Candidate] = field(default_factory=list)


def applicable(backend: type[Backend], data: Dataset) -> str | None:
    """Why ``backend`` cannot fit ``data`` (None when it can), or why auto does not try it."""
    caps = backend.capabilities
    if caps.training:
        # Iterative training (a network, or gpsde's variational EM) takes minutes per fit at its
        # defaults; auto compares the backends fitted in closed form or by EM, and these are
        # asked for by name.
        return "trains iteratively (minutes at its defaults); ask for it with --model"
    if data.inputs and not caps.inputs:
        return "does not take inputs"
    if caps.conditions and not data.inputs:
        return "takes per-trial conditions as --inputs (without them it is lds)"
    if caps.conditions and any(trial.u is not None and np.ptp(trial.u, axis=0).max() > 0 for trial in data.trials):
        return "needs inputs constant within each trial (conditions)"
    if data.dt is None and caps.uniform_steps:
        return "needs uniform time steps"
    if not caps.nan and not np.all(np.isfinite(data.stacked()[0])):
        return "does not handle missing values"
    return None


def split_holdout(data: Dataset) -> tuple[Dataset, Dataset]:
    """(training part, held-out part): the first and last blocks of every trial."""
    heads, tails = [], []
    for trial in data.trials:
        cut = int(round(trial.n_samples * (1 - HOLDOUT_FRACTION)))
        heads.append(trial.slice(0, cut))
        tails.append(trial.slice(cut))
    if min(t.n_samples for t in tails) < 4:
        raise DataError(
            f"{data.source}: too few samples to hold out {HOLDOUT_FRACTION:.0%} of each trial "
            "for --model auto; choose a model with --model"
        )
    return data.with_trials(heads), data.with_trials(tails)


def fit_auto(
    data: Dataset,
    *,
    max_time: float | None = None,
    seed: int | None = 0,
    device: str = "auto",
    progress: Any = None,
) -> AutoFit:
    """Fit, score and rank every applicable registered backend with its default
    hyperparameters; once ``max_time`` seconds are spent and one backend has been scored, the
    rest are skipped. ``progress``: called with a one-line status before each fit."""
    from dynid import api

    if data.dt is None:
        raise DataError(
            f"{data.source}: --model auto compares forecasts with held-out samples step by step, "
            "so it needs uniform sampling; interpolate onto a grid first with --resample DT"
        )
    train, held_out = split_holdout(data)
    horizon = max(1, min(HOLDOUT_HORIZON, min(t.n_samples for t in held_out.trials) // 2))
    started = time.perf_counter()
    ranking = []
    for name in registry.names():
        backend = registry.get(name)
        reason = applicable(backend, data)
        over_budget = max_time is not None and time.perf_counter() - started > max_time
        if reason is None and over_budget and any(c.status == "scored" for c in ranking):
            # The budget bounds the search, not the answer: one scored backend is always kept.
            reason = f"--max-time {max_time:g} s spent before it could start"
        if reason is not None:
            ranking.append(Candidate(name, "skipped", reason=reason))
            continue
        if progress is not None:
            progress(f"auto: fitting {name}")
        try:
            fitted = api.fit(train, name, seed=seed, device=device)
            # Ranked by rollout error alone: no free run for D_stsp and D_H.
            scores = api.score(fitted.model, held_out, horizon=horizon, starts=HOLDOUT_STARTS,
                               free_run=0)
        except DynidError as exc:
            ranking.append(Candidate(name, "failed", reason=str(exc)))
            continue
        ranking.append(
            Candidate(
                name,
                "scored",
                nrmse=scores["nrmse"],
                valid_prediction_time=scores["valid_prediction_time"],
                diverged_rollouts=scores["diverged_rollouts"],
                fit_seconds=fitted.metadata["fit_seconds"],
            )
        )
    ranking.sort(key=Candidate.rank_key)
    best = ranking[0] if ranking else None
    if best is None or best.status != "scored" or best.nrmse is None:
        raise DataError(
            f"{data.source}: no backend could be fitted and scored on held-out data: "
            + "; ".join(f"{c.model}: {c.reason or 'diverged'}" for c in ranking)
        )
    result = api.fit(data, best.model, seed=seed, device=device)
    result.metadata["auto_ranking"] = [c.to_dict() for c in ranking]
    return AutoFit(result, ranking)
