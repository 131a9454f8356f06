"""Model parts of latent-state models: the smoothed hidden states of ``--data`` over time with
their bands, the eigenvalues of a continuous-time generator, and the eigenvalues and fixed
points against the condition of a conditionally linear model (``clds``). Each registers itself with
``sections.model_part``; importing this module (``dynid.report`` does) is enough."""

from __future__ import annotations

import math

import numpy as np

from dynid.models.base import Backend
from dynid.report.forecast import data_mismatch
from dynid.report.html import figure, note, table
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, eigenvalue_plot, fmt, line_plot

# At most this many latent states are drawn (one plot each), over at most this many samples.
MAX_STATES = 4
MAX_SAMPLES = 2000
# Band of the smoothed states: mean +- BAND_SDS standard deviations (~95 %).
BAND_SDS = 1.96


def _has_states(ctx: ModelContext) -> bool:
    """The model infers hidden states and data it can run on were given."""
    return (
        type(ctx.model).states is not Backend.states
        and ctx.data is not None
        and not data_mismatch(ctx.model, ctx.data)
    )


@model_part("Latent states", applies=_has_states)
def _latent_states(ctx: ModelContext) -> str | None:
    assert ctx.data is not None
    found = ctx.model.states(ctx.data)
    if not found.names:
        return None
    first = (found.trial == 0) & (np.cumsum(found.trial == 0) <= MAX_SAMPLES)
    t = found.t[first]
    plots = []
    for k, name in enumerate(found.names[:MAX_STATES]):
        mean = found.means[first, k]
        series = [Series(name, t, mean)]
        if found.sds is not None:
            sd = found.sds[first, k]
            series += [Series(f"\u00b1{BAND_SDS:g} sd", t, mean + BAND_SDS * sd, dashed=True),
                       Series("", t, mean - BAND_SDS * sd, dashed=True)]
        plots.append(line_plot(series, title=name, xlabel="t", height=180))
    shown = (f"{min(len(found.names), MAX_STATES)} of {len(found.names)} latent states "
             f"(first trial, {int(first.sum())} samples)")
    if found.sds is None:
        # A deterministic map's states (the RNNs'): no band, which would claim a certainty.
        caption = (f"{shown} as the model infers them from the data (teacher-forced, standardised "
                   "units); deterministic, so without uncertainty bands")
    else:
        caption = (f"smoothed means of {shown} with \u00b1{BAND_SDS:g} standard deviation bands; "
                   "the latent coordinates are defined up to an invertible linear map")
    return figure("".join(plots), caption)


@model_part(
    "Continuous-time eigenvalues",
    applies=lambda ctx: callable(getattr(ctx.model, "continuous_eigenvalues", None)),
)
def _continuous_eigenvalues(ctx: ModelContext) -> str:
    values = np.asarray(ctx.model.continuous_eigenvalues(), dtype=complex)  # type: ignore[attr-defined]
    step = ctx.model.dt_
    rows = [(complex(v), v.real, v.imag / (2 * math.pi), -1 / v.real if v.real < 0 else math.inf) for v in values]
    header = ["eigenvalue (per time unit)", "growth rate", "frequency (cycles per time unit)", "time constant"]
    parts = [table(rows, header=header)]
    if ctx.model.eigenvalues() is None:
        # Irregular samples: no discrete eigenvalues of their own; show the generator's at the
        # median step, where forecasts step.
        parts.insert(0, figure(
            eigenvalue_plot(np.exp(values * step), title=f"e^(\u03bb dt), dt = {fmt(step)}"),
            f"the generator's eigenvalues mapped to one median step dt = {fmt(step)}",
        ))
    checks = ctx.model.metrics_.get("identifiability")
    if checks:
        parts.append(table([(key, value) for key, value in checks.items() if key != "warnings"]))
        parts.extend(note(sentence) for sentence in checks["warnings"])
    return "\n".join(parts)


@model_part(
    "Dynamics against the condition",
    applies=lambda ctx: callable(getattr(ctx.model, "condition_dynamics", None)),
)
def _condition_dynamics(ctx: ModelContext) -> str | None:
    found = ctx.model.condition_dynamics()  # type: ignore[attr-defined]
    if len(found.names) != 1:
        return note("the dynamics are tabulated over several condition columns; plots show one "
                    "(see the model file's condition_* arrays)") if found.names else None
    u, name = found.grid[:, 0], found.names[0]
    values, step = found.eigenvalues, ctx.model.dt_
    training = np.unique(found.training[:, 0]).tolist()

    def plot(columns: np.ndarray, labels: list[str], title: str) -> str:
        lines = [Series(label, u, columns[:, k]) for k, label in enumerate(labels)]
        return line_plot(lines, title=title, xlabel=name, height=200, vlines=training)

    n = values.shape[1]
    shown = list(ctx.model.variables_[:MAX_STATES])
    eigen = [f"\u03bb{k}" for k in range(n)]
    plots = [
        plot(np.abs(values), eigen, "eigenvalue modulus |\u03bb| (per step dt)"),
        plot(np.abs(np.angle(values)) / (2 * math.pi * step), eigen,
             "frequency |arg \u03bb| / (2\u03c0 dt), cycles per time unit"),
        plot(found.fixed_observations[:, :MAX_STATES], shown, "fixed point C z*(u) + c"),
    ]
    caption = (
        f"the {n} eigenvalues of A({name}) (by decreasing modulus) and the fixed point in the data's "
        f"variables ({', '.join(shown)}), over the training conditions' range "
        "and a quarter of it either side; dotted lines mark the training conditions"
    )
    return figure("".join(plots), caption)
