"""The energy of a long free run, for models that have an energy (``phnn``, ``hnn``: a
``energy(x)`` method). A stable port-Hamiltonian model's energy must never increase; a
Hamiltonian model's must stay level. Registered with ``sections.model_part``; importing this
module (``dynid.report`` does) is enough."""

from __future__ import annotations

import numpy as np

from dynid.data.dataset import Trial
from dynid.report.forecast import data_mismatch
from dynid.report.html import figure, note
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, fmt, line_plot

# Length of the free run in samples of the model's dt: long next to a typical record, short
# enough to draw in seconds (each step evaluates the energy's gradient a few times).
FREE_RUN_STEPS = 2000


def _has_energy(ctx: ModelContext) -> bool:
    return callable(getattr(ctx.model, "energy", None)) and not ctx.model.inputs_


@model_part("Energy over a long free run", applies=_has_energy)
def _energy(ctx: ModelContext) -> str:
    model = ctx.model
    if ctx.data is not None and not data_mismatch(model, ctx.data):
        start = ctx.data.trials[-1].x[:1]
        origin = f"the first sample of the last trial of {ctx.data.source}"
    else:
        # One standard deviation from the data's centre in every variable.
        start = (model.center_ + model.scale_)[None]  # type: ignore[attr-defined]
        origin = "one standard deviation from the training data's mean in every variable"
    run = np.vstack([start, model.simulate(Trial(t=np.zeros(1), x=start), FREE_RUN_STEPS, None)])
    energy = model.energy(run)  # type: ignore[attr-defined]
    t = np.arange(run.shape[0]) * model.dt_
    rise = float(np.max(np.diff(energy)))
    caption = (f"The model's learned energy H along a free run of {FREE_RUN_STEPS} steps "
               f"({fmt(t[-1])} time units) from {origin}: from {fmt(energy[0])} to "
               f"{fmt(energy[-1])}; largest one-step increase {fmt(rise)}.")
    if not np.isfinite(run).all():
        caption += " The free run diverged."
    plot = line_plot([Series("H", t, energy)], title="energy of a free run", xlabel="time",
                     ylabel="H")
    return figure(plot) + note(caption)
