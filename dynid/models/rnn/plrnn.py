"""``plrnn``: the clipped shallow PLRNN (Hess, Monfared, Brenner & Durstewitz, "Generalized
Teacher Forcing for Learning Chaotic Dynamics", ICML 2023),

    z_{t+1} = A * z_t + W1 (relu(W2 z_t + h2) - relu(W2 z_t)) + h1 + C u_t,

with M latents (identity read-out onto the first N) and H hidden units, trained by GTF
(``dynid.models.rnn.gtf``): alpha adapted from the Jacobian-product bound unless fixed.

Partial observation: with ``latent`` M > N the unobserved latents are free; training windows
and forecasts infer them by a teacher-forced warm-up over ``warmup`` samples, so a forecast
starts from the history's last ``warmup + 1`` samples, not only its last row. Observation
noise: see ``dynid.models.rnn.backend`` (GTF mixes model and data; ``smoothing`` forces with
smoothed data; ``noise`` trains on perturbed batches). Defaults follow the paper's (RAdam,
H = 100, adaptive alpha) with 6000 batches instead of 250 000, so a higher learning rate
(5e-3 decaying to 1e-4) and batches of 64 windows of 50 steps (``dynid.models.rnn.gtf``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dynid.models.base import param
from dynid.models.rnn.backend import GTFBackend, GTFParams

if TYPE_CHECKING:
    import torch

    from dynid.models.rnn.cells import LatentCell

__all__ = ["PLRNN", "PLRNNParams"]


@dataclass(frozen=True)
class PLRNNParams(GTFParams):
    latent: int | None = param(
        None, "latent dimension M >= N (none = N, the observed variables; raise it when only "
              "some coordinates are observed)")
    hidden: int = param(100, "hidden units H of the shallow network")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden < 1:
            raise ValueError(f"hidden must be a positive integer, not {self.hidden}")


class PLRNN(GTFBackend):
    """Clipped shallow PLRNN. Fitted arrays (M latents, H hidden, N variables, m inputs):
    ``A`` (M,), ``W1`` (M, H), ``W2`` (H, M), ``h1`` (M,), ``h2`` (H,), ``C`` (M, m) in
    standardised units; ``mean``, ``scale`` (N,), ``input_mean``, ``input_scale`` (m,);
    ``dominant_region`` (H,) the slopes in {-1, 0, 1} of the subregion the data visit most."""

    name = "plrnn"
    summary = ("clipped shallow PLRNN trained by generalized teacher forcing (adaptive alpha); "
               "partial observation via free latents; noise: -p smoothing / -p noise")
    Params = PLRNNParams

    def _default_latent(self) -> int:
        return self.n_variables

    def _cell(self, latent: int, inputs: int, generator: torch.Generator) -> LatentCell:
        from dynid.models.rnn.cells import ShallowPLRNN

        return ShallowPLRNN(latent, self.params.hidden, inputs, generator)  # type: ignore[attr-defined]
