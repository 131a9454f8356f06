"""The energy along a long free run, for models that have an energy (``phnn``, ``hnn``: a
``energy(x)`` method). A stable port-Hamiltonian model's energy must never increase; a
Hamiltonian model's must stay level. With data, the run is the one ``dynid score`` and the
comparison table score (``dynamics.score_run``, computed once per model), drawn against the
energy of the held-out data it starts from; without, a run of the model's own from one standard
deviation off the training data's mean. Registered with ``sections.model_part``; importing this
module (``dynid.report`` does) is enough."""

from __future__ import annotations

import numpy as np

from dynid.data.dataset import Trial
from dynid.report.dynamics import (
    divergence_sentence, free_runnable, held_out_option, held_out_run, run_description,
)
from dynid.report.html import figure, note
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, fmt, line_plot

# Without data (nothing for score's run to start from): the length of the run drawn, in
# samples of the model's dt; long next to a typical record, short enough to draw in seconds.
FREE_RUN_STEPS = 2000


def _has_energy(ctx: ModelContext) -> bool:
    return callable(getattr(ctx.model, "energy", None)) and not ctx.model.inputs_


@model_part("Energy over a long free run", applies=_has_energy)
def _energy(ctx: ModelContext) -> str:
    model = ctx.model
    energy_of = model.energy  # type: ignore[attr-defined]
    if free_runnable(ctx):
        data, run = held_out_run(ctx)
        trial, need = data.trials[0], run.history
        # From the last sample of history, so that the run joins the data; up to divergence.
        finite = run.states if run.diverged_at is None else run.states[: run.diverged_at - 1]
        path = np.vstack([trial.x[need - 1 : need], finite])
        t = trial.t[need - 1] + np.arange(path.shape[0]) * model.dt_
        series = [Series("data", trial.t, energy_of(trial.x))]
        origin = run_description(data, run, model)
        xlabel = data.time_column or "t"
        tail = (f" Solid: H of that trial's samples ({held_out_option(ctx)}), the level and "
                "trend a good model's run keeps." + divergence_sentence(run))
    else:
        # One standard deviation from the data's centre in every variable.
        start = (model.center_ + model.scale_)[None]  # type: ignore[attr-defined]
        path = np.vstack([start, model.simulate(Trial(t=np.zeros(1), x=start), FREE_RUN_STEPS, None)])
        t = np.arange(path.shape[0]) * model.dt_
        series = []
        origin = (f"a free run of {FREE_RUN_STEPS:,} steps of the model's own from one standard "
                  "deviation off the training data's mean in every variable (no --data or "
                  "--test to start score's run from)")
        xlabel = "time"
        tail = "" if np.isfinite(path).all() else " The free run diverged."
    energy = energy_of(path)
    rise = float(np.max(np.diff(energy))) if energy.size > 1 else float("nan")
    caption = (f"Dashed: the model's learned energy H along {origin}: over "
               f"{fmt(t[-1] - t[0])} time units from {fmt(energy[0])} to {fmt(energy[-1])}, "
               f"largest one-step increase {fmt(rise)}." + tail)
    series.append(Series("model", t, energy, dashed=True))
    plot = line_plot(series, title="energy of a free run", xlabel=xlabel, ylabel="H")
    return figure(plot) + note(caption)
