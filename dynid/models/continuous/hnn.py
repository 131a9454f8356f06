"""``hnn``: a Hamiltonian neural network for conservative systems (Greydanus et al. 2019),
with a separable energy H(q, p) = T(p) + V(q) integrated by leapfrog.

The states are (q, p): the first half of the variables are coordinates, the second half their
momenta (for a unit-mass pendulum, angle and angular velocity). dq/dt = dH/dp, dp/dt = -dH/dq.
Leapfrog (Stormer-Verlet) is symplectic and time reversible, so along a free run the learned
energy is not drifting: its error stays bounded (of order (dt / substeps)^2) over any horizon,
where a plain neural ODE's energy wanders. The same integrator is used in training, so the
model learns the map it will be run with. No inputs (a forced system is not conservative;
use ``phnn``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.models.base import Capabilities
from dynid.models.continuous.base import ContinuousParams, EnergyBackend

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class HNNParams(ContinuousParams):
    pass


class HNN(EnergyBackend):
    __doc__ = EnergyBackend.__doc__

    name = "hnn"
    summary = ("Hamiltonian network H = T(p) + V(q) with a symplectic leapfrog integrator: "
               "energy conserved over long free runs; states are (q..., p...)")
    Params = HNNParams
    capabilities = Capabilities(uniform_steps=False, inputs=False, cuda=True, training=True)

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        if data.n_variables % 2:
            raise DataError(
                f"{data.source}: the hnn backend needs coordinates and momenta, an even number "
                f"of variables (q..., p...), not {data.n_variables}")
        super()._fit(data, seed=seed, device=device, progress=progress)

    def _network(self, d: int, m: int) -> torch.nn.Module:
        import torch

        from dynid.models.continuous.networks import SeparableHamiltonian

        params: HNNParams = self.params  # type: ignore[assignment]
        n = d // 2
        coupling = torch.as_tensor(1.0 / (self.scale_[:n] * self.scale_[n:]))
        return SeparableHamiltonian(d, params.width, params.depth, coupling).double()
