"""Model part of latent SDEs (``gpsde``): the learned drift with its posterior uncertainty, a
curve with a band and the fixed points for one latent, a quiver plot for two. It registers
itself with ``sections.model_part``; importing this module (``dynid.report`` does) is enough."""

from __future__ import annotations

import numpy as np

from dynid.report.html import figure, note, table
from dynid.report.sections import ModelContext, model_part
from dynid.report.svg import Series, fmt, line_plot, quiver_plot

# The band around the mean drift: +- BAND_SDS posterior sds (~95 %).
BAND_SDS = 1.96


def fixed_points(grid: np.ndarray, mean: np.ndarray) -> list[tuple[float, float]]:
    """(z*, f'(z*)) where the 1-D drift ``mean`` (G,) over ``grid`` (G,) changes sign, by linear
    interpolation between grid points."""
    at = np.flatnonzero(np.sign(mean[:-1]) * np.sign(mean[1:]) < 0)
    slopes = (mean[at + 1] - mean[at]) / (grid[at + 1] - grid[at])
    zeros = grid[at] - mean[at] / slopes
    return list(zip(zeros.tolist(), slopes.tolist()))


@model_part("Drift", applies=lambda ctx: callable(getattr(ctx.model, "drift_on_grid", None)))
def _drift(ctx: ModelContext) -> str:
    grid, mean, sd = ctx.model.drift_on_grid()  # type: ignore[attr-defined]
    c, offset = ctx.model.readout()  # type: ignore[attr-defined]
    if grid.shape[1] == 1:
        z, f = grid[:, 0], mean[:, 0]
        plot = line_plot(
            [Series("mean drift f(z)", z, f),
             Series(f"\u00b1{BAND_SDS:g} sd", z, f + BAND_SDS * sd, dashed=True),
             Series("", z, f - BAND_SDS * sd, dashed=True),
             Series("f = 0", z[[0, -1]], np.zeros(2), color="#888888")],
            title="Drift f(z)", xlabel="z_0", ylabel="dz/dt", height=260)
        rows = [(fmt(point), fmt(slope), "stable" if slope < 0 else "unstable",
                 ", ".join(fmt(v) for v in c[:, 0] * point + offset)) for point, slope in fixed_points(z, f)]
        parts = [figure(plot, f"posterior mean of the drift with \u00b1{BAND_SDS:g} posterior sd over the "
                              "inducing points' range; the latent's sign and scale are its own (diffusion 1)")]
        if rows:
            parts.append(table(rows, header=["fixed point z*", "f'(z*)", "", "observed C z* + c"]))
        return "\n".join(parts)
    if grid.shape[1] == 2:
        plot = quiver_plot(grid, mean, sd, title="Drift f(z)", xlabel="z_0", ylabel="z_1")
        return figure(plot, "posterior mean drift over the inducing points' box, arrows fainter where "
                            "its posterior sd (in the tooltips) is larger")
    return note(f"the drift of {grid.shape[1]} latent dimensions is not drawn; it is in the model "
                "file (drift_grid, drift_mean, drift_sd)")
