"""``phnn``: a stable port-Hamiltonian neural network (sPHNN; Roth et al., NeurIPS 2025).

    dx/dt = (J - R) grad H(x) + G u,   J = A - A^T,   R = L L^T,

with H convex and normalised (an input-convex network's Bregman divergence at a learnable
minimum x*, plus a small quadratic: H(x*) = 0 is its only minimum and H grows without bound).
Without inputs dH/dt = -grad H^T R grad H <= 0, so the energy never increases and every
trajectory stays in the sublevel set it starts in: free runs cannot blow up, whatever the
weights. After training the stability condition is checked and stored in the metrics (shown
by ``dynid info``): x* is globally asymptotically stable when the Hessian of H at x* and R are
positive definite (Roth et al.'s ``is_zero_gas_guarantee_valid``); with R only semidefinite the
energy still never increases. One equilibrium only: a convex H cannot model multistability.
Trained like ``node`` (multiple shooting, RK4 or Dormand-Prince).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.models.continuous.base import EnergyBackend, SolvedParams

if TYPE_CHECKING:
    import torch

# Smallest eigenvalue (relative to the largest) that counts as positive definite.
DEFINITE = 1e-8


@dataclass(frozen=True)
class PHNNParams(SolvedParams):
    pass


class PHNN(EnergyBackend):
    __doc__ = EnergyBackend.__doc__

    name = "phnn"
    summary = ("stable port-Hamiltonian network dx/dt = (J - R) grad H + G u with convex "
               "normalised H: energy never increases, free runs stay bounded")
    Params = PHNNParams

    def _network(self, d: int, m: int) -> torch.nn.Module:
        from dynid.models.continuous.networks import PortHamiltonianField

        params: PHNNParams = self.params  # type: ignore[assignment]
        return PortHamiltonianField(d, m, params.width, params.depth).double()

    def _after_training(self) -> dict[str, Any]:
        return self.stability()

    def stability(self) -> dict[str, Any]:
        """The stability check: smallest eigenvalues of H's Hessian at its minimum and of R
        (standardised units), the minimum (the equilibrium, data units) and a verdict."""
        import torch

        network = self.network_
        minimum = network.energy.minimum.detach()  # type: ignore[union-attr]
        hessian = torch.autograd.functional.hessian(
            lambda v: network.energy(v[None])[0], minimum)  # type: ignore[operator]
        curvature = np.linalg.eigvalsh(hessian.numpy())
        damping = np.linalg.eigvalsh(network.dissipation().detach().numpy())  # type: ignore[operator]
        definite = (curvature.min() > DEFINITE * max(curvature.max(), 1.0)
                    and damping.min() > DEFINITE * max(damping.max(), 1.0))
        verdict = ("globally asymptotically stable: H and R positive definite at the minimum"
                   if definite else
                   "stable: the energy never increases (R is only semidefinite, so trajectories "
                   "need not settle at the minimum)")
        return {
            "stability": verdict,
            "hessian_min_eigenvalue": float(curvature.min()),
            "dissipation_min_eigenvalue": float(damping.min()),
            "equilibrium": (minimum.numpy() * self.scale_ + self.center_).tolist(),
        }
