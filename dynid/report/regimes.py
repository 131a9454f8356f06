"""The model part of models with discrete states, with ``--data``: the data of the last trial
over time with each sample's state as a coloured band behind it. For discrete-state models
(``hmm``, ``arhmm``, ``slds``) the state is the most likely one (Viterbi); for models whose
latent space falls into numbered linear subregions (``alrnn``: a ``region_code(number)``
method), the subregion of each sample's latent state as ``dynid states`` gives it, named by the
code ``dynid info``'s symbolic coding uses. Registers itself with ``sections.model_part``;
importing this module (``dynid.report`` does) is enough."""

from __future__ import annotations

import numpy as np

from dynid import api
from dynid.models.base import Backend
from dynid.report.dynamics import portrait_pairs
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
    runs = state_runs(states.t, states.state)
    if has_regions(model):
        # Only the subregions visited: there are 2^P of them.
        numbers = sorted({k for _, _, k in runs})
        names = {k: f"subregion {model.region_code(k)}" for k in numbers}  # type: ignore[attr-defined]
        caption = _region_caption(model, states.state, data.source)
    else:
        if states.probabilities is None:
            return None
        numbers = list(range(states.probabilities.shape[1]))
        names = {k: f"state {k}" for k in numbers}
        caption = f"last trial of {data.source}; band: most likely state (Viterbi) of each sample"
    known = states.state[~np.isnan(states.state)]  # the samples with a state
    shares = ", ".join(f"{names[k].split()[-1]}: {np.mean(known == k):.0%}" for k in numbers)
    caption += f"; {len(runs)} runs; time in each {names[numbers[0]].split()[0]} {shares}"
    if len(runs) > MAX_RUNS:
        return note(f"The states change {len(runs)} times in the last trial: too often to draw as a band. {caption}.")
    x = last.trials[0].x
    shown = sorted({i for pair in portrait_pairs(x) for i in pair}) or [0]
    colors = {k: BAND_COLORS[i % len(BAND_COLORS)] for i, k in enumerate(numbers)}
    series = [Series(model.variables_[i], states.t, x[:, i]) for i in shown]
    # Legend keys for the states' band colours (a series with nothing to draw).
    series += [Series(names[k], states.t[:1], np.full(1, np.nan), color=colors[k]) for k in numbers]
    spans = [(lo, hi, colors[k], f"{names[k]}: t = {lo:g} to {hi:g}") for lo, hi, k in runs]
    return figure(line_plot(series, xlabel=data.time_column or "t", spans=spans), caption)


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
        f"= the first unit on (positive){', the others off' if pwl > 1 else ''}; dynid states' state column gives the "
        f"code as a binary number (\u201c{example}\u201d = {2 ** (pwl - 1)}). The model is linear "
        "inside each subregion"
        + (f"; the first {missing} sample(s) have none (too few before them for a forecast)"
           if missing else "")
    )
