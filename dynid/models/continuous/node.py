"""``node``: a neural ordinary differential equation dx/dt = f(x, u) (Chen et al. 2018).

f is a tanh MLP on the standardised states and inputs; it is trained by multiple shooting on
segments of the trials (``dynid.models.continuous.shooting``), integrated between the actual
sample times, so irregular sampling and trials with different sampling need no resampling.
The solver is fixed-step RK4 or adaptive Dormand-Prince, both small torch code here: the
well-kept library (torchdiffeq) would add a runtime dependency for two solvers of some 60
lines, and batching segments with different time grids needs the per-interval rescaling done
here anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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


class NODE(ContinuousBackend):
    __doc__ = ContinuousBackend.__doc__

    name = "node"
    summary = ("neural ODE dx/dt = f(x, u) on irregular samples and several trials, trained by "
               "multiple shooting; RK4 or adaptive Dormand-Prince")
    Params = NODEParams

    def _network(self, d: int, m: int) -> torch.nn.Module:
        from dynid.models.continuous.networks import NeuralField

        params: NODEParams = self.params  # type: ignore[assignment]
        return NeuralField(d, m, params.width, params.depth).double()
