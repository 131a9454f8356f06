"""``alrnn``: the almost-linear RNN (Brenner, Hemmer, Monfared & Durstewitz, "Almost-Linear RNNs
Yield Highly Interpretable Symbolic Codes in Dynamical Systems Reconstruction", NeurIPS 2024),

    z_{t+1} = A * z_t + W phi(z_t) + h + C u_t,   phi(z) = [z_1..z_{M-P}, relu(z_{M-P+1..M})],

with only P of the M units piecewise linear, so the model is linear inside each of at most 2^P
subregions. Trained by GTF like ``plrnn``. The reference code (DurstewitzLab/ALRNN-DSR) trains
Lorenz-63 by sparse teacher forcing instead, ``-p alpha=1 -p forcing_interval=16 -p sequence=200
-p batch=16 -p lr=1e-3 -p lr_end=1e-5 -p noise=0.05 -p regularisation=0``, for 100,000 batches
(``-p epochs=2000 -p batches=50``); that model reaches D_stsp ~3, D_H ~0.15 on Lorenz-63. A
5-minute fit affords 40,000 of those batches (``-p epochs=800 -p geometry_every=20``), which
reached that quality on one of two Lorenz-63 records and not on the other; the defaults with
as many batches did not improve (benchmarks/README.md, "alrnn against its reference code" and
"training throughput (round 9)").

The fit reports, in the model file's metrics (``dynid info``), the subregions the data and a
free run visit and the free run's symbolic coding: the sequence of subregions, each named by
the signs of the P units ("10": unit M-P+1 on, unit M-P+2 off), compressed to
``code*dwell`` runs. Partial observation and noise as for ``plrnn``
(``dynid.models.rnn.backend``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.data.dataset import Trial
from dynid.errors import UsageError
from dynid.models.base import param
from dynid.models.rnn.backend import GTFBackend, GTFParams

if TYPE_CHECKING:
    import torch

    from dynid.models.rnn.cells import LatentCell

__all__ = ["ALRNN", "ALRNNParams", "region_codes", "symbolic_coding"]


@dataclass(frozen=True)
class ALRNNParams(GTFParams):
    latent: int | None = param(None, "latent dimension M >= N (none = max(20, N), the paper's)")
    pwl: int = param(2, "piecewise-linear units P (at most 2^P linear subregions)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pwl < 1:
            raise ValueError(f"pwl must be a positive integer, not {self.pwl}")
        if self.latent is not None and self.pwl > self.latent:
            raise ValueError(f"pwl ({self.pwl}) cannot exceed latent ({self.latent})")


class ALRNN(GTFBackend):
    """AL-RNN. Fitted arrays (M latents, P piecewise-linear units, N variables, m inputs):
    ``A`` (M,), ``W`` (M, M; full, as in the reference code), ``h`` (M,), ``C`` (M, m) in
    standardised units; ``mean``, ``scale`` (N,), ``input_mean``, ``input_scale`` (m,);
    ``dominant_region`` (P,) the 0/1 slopes of the subregion the data visit most."""

    name = "alrnn"
    summary = ("almost-linear RNN (P of M units ReLU) trained by generalized teacher forcing; "
               "reports linear subregions and the symbolic coding of a free run; partial "
               "observation via free latents; noise: -p smoothing / -p noise")
    Params = ALRNNParams

    def _default_latent(self) -> int:
        return max(20, self.n_variables)

    def _cell(self, latent: int, inputs: int, generator: torch.Generator) -> LatentCell:
        from dynid.models.rnn.cells import ALRNN as Cell

        pwl = self.params.pwl  # type: ignore[attr-defined]
        if pwl > latent:
            raise UsageError(f"-p pwl={pwl}: more piecewise-linear units than latents ({latent})")
        return Cell(latent, pwl, inputs, generator)

    def _region_metrics(self, slopes: np.ndarray) -> dict[str, Any]:
        return {"symbolic_coding": symbolic_coding(slopes)}

    def _region_codes(self, z: torch.Tensor) -> np.ndarray:
        """The subregion (T,) of each latent state z (T, M): the binary number its code in
        ``symbolic_coding`` spells ("10" = 2: unit M-P+1 on, M-P+2 off); NaN where z is."""
        numbers = [int(code, 2) for code in region_codes(self.cell_.slopes(z).numpy())]
        return np.where(np.isnan(z.numpy()).any(axis=1), np.nan, np.array(numbers, dtype=float))

    def run_regions(self, history: Trial, steps: int, future_inputs: np.ndarray | None = None
                    ) -> np.ndarray:
        """The subregion (steps,) of each latent state of the run ``simulate`` makes with these
        arguments, numbered as ``states`` numbers them (NaN where the state is not finite):
        the symbolic coding of that very run."""
        self._check_history(history, steps, future_inputs)
        z = self._latent_run(history, steps, future_inputs)
        numbers = self._region_codes(z)
        return np.where(np.isfinite(z.numpy()).all(axis=1), numbers, np.nan)

    def region_code(self, number: int) -> str:
        """The code ``symbolic_coding`` (``dynid info``) writes for the subregion ``states``
        numbers ``number``: its P binary digits (2 -> "10" for P = 2: unit M-P+1 on, M-P+2 off)."""
        return format(number, f"0{self.params.pwl}b")  # type: ignore[attr-defined]


def region_codes(slopes: np.ndarray) -> list[str]:
    """The code of each subregion of slopes (T, P) in {0, 1}: the P units' signs, "10" for
    unit M-P+1 on and M-P+2 off."""
    return ["".join("1" if s > 0 else "0" for s in row) for row in slopes]


def symbolic_coding(slopes: np.ndarray) -> str:
    """The subregion sequence of slopes (T, P) in {0, 1}, run-length compressed: "10*35 11*12"
    is 35 steps with only the first ReLU unit on, then 12 with both on."""
    runs: list[list[Any]] = []
    for code in region_codes(slopes):
        if runs and runs[-1][0] == code:
            runs[-1][1] += 1
        else:
            runs.append([code, 1])
    return " ".join(f"{code}*{dwell}" for code, dwell in runs)
