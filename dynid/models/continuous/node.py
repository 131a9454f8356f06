"""``node``: a neural ordinary differential equation dx/dt = f(x, u) (Chen et al. 2018).

f is an MLP on the standardised states and inputs (SiLU hidden layers by default: on Van der
Pol from irregular samples, its forecasts from new starts inside the limit cycle, where few
training samples lie, were several times closer than a tanh MLP's; benchmarks/README.md, round
7), optionally plus a linear map (``-p affine=true``); it is trained by multiple shooting on
segments of the trials (``dynid.models.continuous.shooting``), integrated between the actual
sample times, so irregular sampling and trials with different sampling need no resampling.
The solver is fixed-step RK4 or adaptive Dormand-Prince, both small torch code here: the
well-kept library (torchdiffeq) would add a runtime dependency for two solvers of some 60
lines, and batching segments with different time grids needs the per-interval rescaling done
here anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dynid.models.base import param
from dynid.models.continuous.base import ContinuousBackend, SolvedParams, redefault

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class NODEParams(SolvedParams):
    """Defaults for a good model in a few CPU minutes on some 3000 samples: 40 Adam epochs on
    10-interval segments at a high rate, then the automatic full-batch L-BFGS stage, which is
    what fits the rare transient segments (benchmarks/README.md, Van der Pol: 10 trials x 300
    samples, 3.7 CPU min). The shared defaults (300 Adam epochs on 20-interval segments with
    two substeps, no L-BFGS) could run 30 CPU min when patience never stopped them, and
    fitted the transients worse."""

    segment: int = redefault("segment", 10)
    substeps: int = redefault("substeps", 1)
    epochs: int = redefault("epochs", 40)
    lr: float = redefault("lr", 0.01)
    lbfgs: int | None = redefault("lbfgs", None)
    affine: bool = param(
        False, "add a linear map of the (standardised) states and inputs to the MLP's field")
    activation: Literal["silu", "tanh"] = param(
        "silu", "the MLP's hidden activation: silu (x sigmoid(x)) or tanh")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> NODEParams:
        # Model files written before `activation` existed hold tanh networks.
        return super().from_dict({"activation": "tanh", **values})  # type: ignore[return-value]


class NODE(ContinuousBackend):
    __doc__ = ContinuousBackend.__doc__

    name = "node"
    summary = ("neural ODE dx/dt = f(x, u) on irregular samples and several trials, trained by "
               "multiple shooting; RK4 or adaptive Dormand-Prince")
    Params = NODEParams

    def _network(self, d: int, m: int) -> torch.nn.Module:
        from dynid.models.continuous.networks import NeuralField

        params: NODEParams = self.params  # type: ignore[assignment]
        return NeuralField(d, m, params.width, params.depth, params.affine,
                           params.activation).double()

    def _initialise(self, network: torch.nn.Module, rows: list[np.ndarray]) -> None:
        import torch

        params: NODEParams = self.params  # type: ignore[assignment]
        if params.affine:
            a, b = finite_difference_fit(rows, self.n_variables)
            network.start_affine(torch.as_tensor(a), torch.as_tensor(b))  # type: ignore[operator]


def finite_difference_fit(rows: list[np.ndarray], d: int) -> tuple[np.ndarray, np.ndarray]:
    """The least-squares affine field dz/dt ~ A [z, u] + b of the trials' [t, z, u] rows
    (n_i, 1 + d + m): A (d, d + m), b (d,). The slopes are the differences between
    consecutive samples over their time steps, fitted at the midpoints (second order in the
    step, where the slope is exact for a linear trajectory segment)."""
    slopes = [np.diff(r[:, 1 : 1 + d], axis=0) / np.diff(r[:, 0])[:, None] for r in rows]
    points = [0.5 * (r[1:, 1:] + r[:-1, 1:]) for r in rows]
    design = np.vstack(points)
    design = np.hstack([design, np.ones((design.shape[0], 1))])
    coefficients = np.linalg.lstsq(design, np.vstack(slopes), rcond=None)[0]  # (d + m + 1, d)
    return coefficients[:-1].T, coefficients[-1]
