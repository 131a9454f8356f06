"""The model part of models with discrete states, with ``--data``: the data of the last trial
over time with each sample's state as a coloured band behind it. For discrete-state models
(``hmm``, ``arhmm``, ``slds``) the state is the most likely one (Viterbi); for models whose
latent space falls into numbered linear subregions (``alrnn``: ``region_code(number)`` and
``run_regions`` methods), the subregion of each sample's latent state as ``dynid states`` gives
it, named by the code ``dynid info``'s symbolic coding uses, and below, with held-out data, the
subregions of the free run score scores (``dynamics.score_run``). Registers itself with
``sections.model_part``; importing this module (``dynid.report`` does) is enough."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid import api
from dynid.models.base import Backend
from dynid.report.dynamics import (
    divergence_sentence, free_runnable, held_out_run, portrait_pairs, run_description,
)
from dynid.report.forecast import data_mismatch
from dynid.report.html import figure, note
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import PALETTE, Series, line_plot

# More state runs than this in the drawn trial: the band would be noise; a note instead.
MAX_RUNS = 1000
# Band colours: the palette's end, apart from the (at most three) data lines' first colours.
BAND_COLORS = PALETTE[3:][::-1]


def has_regions(model: Backend) -> bool:
    """The model numbers linear subregions of its latent space (``states``' state column)."""
    return callable(getattr(model, "region_code", None))


def _applies(ctx: ModelContext) -> bool:
    """Data were given, the model runs on them and has discrete states or subregions."""
    return (ctx.data is not None and not data_mismatch(ctx.model, ctx.data)
            and (ctx.model.capabilities.labels or has_regions(ctx.model)))


def state_runs(t: np.ndarray, state: np.ndarray) -> list[tuple[float, float, int]]:
    """Maximal runs of one state in ``state`` (n,) at times ``t`` (n,): (from, to, state), each
    run reaching to the next run's first sample (the last to the last sample). Samples without
    a state (NaN: an RNN's first warmup samples) start no run and end the one before."""
    coded = np.where(np.isnan(state), -1, state).astype(int)
    starts = np.flatnonzero(np.r_[True, coded[1:] != coded[:-1]])
    ends = np.r_[starts[1:], t.size - 1]
    return [(float(t[a]), float(t[b]), int(coded[a])) for a, b in zip(starts.tolist(), ends.tolist())
            if coded[a] >= 0]


def _heading(ctx: ModelContext) -> str:
    return "Linear subregions over time" if has_regions(ctx.model) else "Regimes over time"


@model_part(_heading, applies=_applies)
def _regimes(ctx: ModelContext) -> str | None:
    data, model = ctx.data, ctx.model
    if data is None:  # not reached: ``_applies`` asks for data; narrows the type
        return None
    last = data.with_trials([data.trials[-1]])
    states = api.states(model, last)
    if states.state is None:
        return None
    run = None
    if has_regions(model):
        run = _free_run_regions(ctx) if free_runnable(ctx) else None
        # Only the subregions visited (there are 2^P), coloured alike in both figures.
        visited = np.concatenate([states.state] + ([] if run is None else [run.state]))
        numbers = np.unique(visited[~np.isnan(visited)]).astype(int).tolist()
        kind, labels = "subregion", {k: model.region_code(k) for k in numbers}  # type: ignore[attr-defined]
        caption = _region_caption(model, states.state, data.source)
    elif states.probabilities is not None:
        numbers = list(range(states.probabilities.shape[1]))
        kind, labels = "state", {k: str(k) for k in numbers}
        caption = f"last trial of {data.source}; band: most likely state (Viterbi) of each sample"
    else:
        return None
    bands = Bands(kind, labels, {k: BAND_COLORS[i % len(BAND_COLORS)] for i, k in enumerate(numbers)},
                  model.variables_, data.time_column or "t")
    body = bands.figure(states.t, last.trials[0].x, states.state,
                        f"{caption}; {bands.shares(states.state)}")
    if run is not None and run.t.size:
        body += bands.figure(run.t, run.x, run.state[: run.t.size],
                             f"{run.caption}: {bands.shares(run.state)}{run.tail}")
    elif run is not None:  # diverged at its first step
        body += note(run.tail.strip(". "))
    return body


@dataclass(frozen=True)
class Bands:
    """How states are drawn: by state number, ``labels`` ("2", "10": a ``kind`` "state" or
    "subregion" of that label) and band ``colors``; over ``variables`` against time labelled
    ``xlabel``."""

    kind: str
    labels: dict[int, str]
    colors: dict[int, str]
    variables: tuple[str, ...]
    xlabel: str

    def name(self, k: int) -> str:
        return f"{self.kind} {self.labels[k]}"

    def shares(self, state: np.ndarray) -> str:
        """The caption's words on ``state`` (n,; NaN: none): its runs, the time in each state."""
        known = state[~np.isnan(state)]
        if not known.size:
            return f"no sample has a {self.kind}"
        words = ", ".join(f"{label}: {np.mean(known == k):.0%}" for k, label in self.labels.items())
        runs = len(state_runs(np.arange(state.size, dtype=float), state))
        return f"{runs} runs; time in each {self.kind} {words}"

    def figure(self, t: np.ndarray, x: np.ndarray, state: np.ndarray, caption: str) -> str:
        """The columns of x (n, d) a phase portrait pairs, over t (n,), each sample's ``state``
        (n,; NaN: none) a band behind them; a note instead when it changes too often."""
        runs = state_runs(t, state)
        if len(runs) > MAX_RUNS:
            return note(f"The states change {len(runs)} times: too often to draw as a band. {caption}.")
        shown = sorted({i for pair in portrait_pairs(x) for i in pair}) or [0]
        series = [Series(self.variables[i], t, x[:, i]) for i in shown]
        # Legend keys for the states' band colours (a series with nothing to draw).
        series += [Series(self.name(k), t[:1], np.full(1, np.nan), color=self.colors[k])
                   for k in sorted({k for _, _, k in runs})]
        spans = [(lo, hi, self.colors[k], f"{self.name(k)}: t = {lo:g} to {hi:g}") for lo, hi, k in runs]
        return figure(line_plot(series, xlabel=self.xlabel, spans=spans), caption)


@dataclass(frozen=True)
class RunRegions:
    """The subregions of score's free run: ``state`` (finite steps,) of the whole run up to
    where it diverges; ``t`` (n,) and ``x`` (n, d) its first n steps, those drawn; ``caption``
    and ``tail`` the words around the run's shares."""

    t: np.ndarray
    x: np.ndarray
    state: np.ndarray
    caption: str
    tail: str


def _free_run_regions(ctx: ModelContext) -> RunRegions:
    """The subregions of score's free run on the held-out data (``dynamics.score_run``): its
    first steps drawn, as many as the first trial has after the run's start."""
    data, run = held_out_run(ctx)
    model, trial = ctx.model, data.trials[0]
    finite = run.steps if run.diverged_at is None else run.diverged_at - 1
    # The same run: the latent states of simulate's run from the same history and inputs.
    state = model.run_regions(  # type: ignore[attr-defined]
        trial.slice(0, run.history), run.steps, run.inputs)[:finite]
    shown = min(finite, trial.n_samples - run.history)
    t = trial.t[run.history - 1] + np.arange(1, shown + 1) * model.dt_
    limit = "up to where it diverges" if shown == finite < run.steps else "the trial's length after its start"
    caption = (f"The first {shown:,} steps ({limit}) of "
               f"{run_description(data, run, model)}, with the subregion of each step's latent "
               f"state; over all its {finite:,} steps"
               + (" before it diverges" if finite < run.steps else ""))
    return RunRegions(t, run.states[:shown], state, caption, "." + divergence_sentence(run))


def _region_caption(model: Backend, state: np.ndarray, source: str) -> str:
    """What the band of an ``alrnn``'s subregions shows and what their codes mean."""
    pwl = len(model.region_code(0))  # type: ignore[attr-defined]
    missing = int(np.isnan(state).sum())
    example = model.region_code(2 ** (pwl - 1))  # type: ignore[attr-defined]
    return (
        f"last trial of {source}; band: the linear subregion of each sample's latent state, the "
        "state a forecast from the data up to that sample starts from (teacher-forced, as dynid "
        f"states gives it). A subregion is named by the signs of the model's {pwl} "
        f"piecewise-linear units, the code of dynid info's symbolic_coding: \u201c{example}\u201d "
        f"= the first unit on (positive){', the others off' if pwl > 1 else ''}; dynid states' "
        f"state column gives the code as a binary number (\u201c{example}\u201d = {2 ** (pwl - 1)}). The model is linear "
        "inside each subregion"
        + (f"; the first {missing} sample(s) have none (too few before them for a forecast)"
           if missing else "")
    )
