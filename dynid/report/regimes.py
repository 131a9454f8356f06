"""The model part of discrete-state models (``hmm``, ``arhmm``, ``slds``) with ``--data``: the
data of the last trial over time with each sample's most likely state (Viterbi) as a coloured
band behind it. Registers itself with ``sections.model_part``; importing this module
(``dynid.report`` does) is enough."""

from __future__ import annotations

import numpy as np

from dynid import api
from dynid.report.dynamics import portrait_pairs
from dynid.report.forecast import data_mismatch
from dynid.report.html import figure, note
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import PALETTE, Series, line_plot

# More state runs than this in the drawn trial: the band would be noise; a note instead.
MAX_RUNS = 1000
# Band colours: the palette's end, apart from the (at most three) data lines' first colours.
BAND_COLORS = PALETTE[3:][::-1]


def _applies(ctx: ModelContext) -> bool:
    """Data were given, the model runs on them and has discrete states."""
    return ctx.data is not None and not data_mismatch(ctx.model, ctx.data) and ctx.model.capabilities.labels


def state_runs(t: np.ndarray, state: np.ndarray) -> list[tuple[float, float, int]]:
    """Maximal runs of one state in ``state`` (n,) at times ``t`` (n,): (from, to, state), each
    run reaching to the next run's first sample (the last to the last sample)."""
    starts = np.flatnonzero(np.r_[True, state[1:] != state[:-1]])
    ends = np.r_[starts[1:], t.size - 1]
    return [(float(t[a]), float(t[b]), int(state[a])) for a, b in zip(starts.tolist(), ends.tolist())]


@model_part("Regimes over time", applies=_applies)
def _regimes(ctx: ModelContext) -> str | None:
    data = ctx.data
    if data is None:  # not reached: ``_applies`` asks for data; narrows the type
        return None
    last = data.with_trials([data.trials[-1]])
    states = api.states(ctx.model, last)
    if states.state is None or states.probabilities is None:
        return None
    runs = state_runs(states.t, states.state)
    n_states = states.probabilities.shape[1]
    shares = ", ".join(f"{k}: {np.mean(states.state == k):.0%}" for k in range(n_states))
    caption = (f"last trial of the data; band: most likely state (Viterbi) of each sample; "
               f"{len(runs)} runs; time in each state {shares}")
    if len(runs) > MAX_RUNS:
        return note(f"The states change {len(runs)} times in the last trial: too often to draw as a band. {caption}.")
    x = last.trials[0].x
    shown = sorted({i for pair in portrait_pairs(x) for i in pair}) or [0]
    colors = [BAND_COLORS[k % len(BAND_COLORS)] for k in range(n_states)]
    series = [Series(ctx.model.variables_[i], states.t, x[:, i]) for i in shown]
    # Legend keys for the states' band colours (a series with nothing to draw).
    series += [Series(f"state {k}", states.t[:1], np.full(1, np.nan), color=colors[k]) for k in range(n_states)]
    spans = [(lo, hi, colors[k], f"state {k}: t = {lo:g} to {hi:g}") for lo, hi, k in runs]
    return figure(line_plot(series, xlabel=data.time_column or "t", spans=spans), caption)
