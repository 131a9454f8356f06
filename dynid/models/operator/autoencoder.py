"""Koopman autoencoder (Lusch, Kutz & Brunton 2018; Otto & Rowley 2019): an encoder phi to p
latent coordinates, a linear operator K on them and a decoder psi, trained together so the
latent coordinates evolve linearly.

On windows z_0..z_H of H + 1 consecutive standardised states, with l_s = K^s phi(z_0):

    reconstruction  mean_s |psi(phi(z_s)) - z_s|^2        (s = 0..H)
    linearity       mean_s |l_s - phi(z_s)|^2             (s = 1..H, latent space)
    prediction      mean_s |psi(l_s) - z_s|^2             (s = 1..H)

The loss is their sum (equal weights; all three are in units of the standardised states or
their latent images, of order one). The eigenvalues of K are the Koopman eigenvalue estimates.

A long rollout may re-encode every R steps (``reencode``): the decoded state is encoded again,
so the latent state returns to the encoder's image where the linear rollout has drifted off it
(into latent regions the decoder never saw). Each re-encoding also adds the autoencoder's
reconstruction error: on a linear oscillator (tests/test_koopman_learned.py) the 10-period
NRMSE was 0.025 never re-encoding, 0.105 every 20 steps, 0.21 every 10 and 2.0 every step, so
the default is never.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from dynid.models.operator.networks import mlp


class KoopmanAutoencoder(nn.Module):
    """encoder (B, d) -> (B, p), operator K (p, p) as a bias-free linear layer (starting at the
    identity), decoder (B, p) -> (B, d); float64."""

    def __init__(self, d: int, p: int, width: int, depth: int) -> None:
        super().__init__()
        self.encoder = mlp(d, width, depth, p)
        self.decoder = mlp(p, width, depth, d)
        self.operator = nn.Linear(p, p, bias=False).double()
        with torch.no_grad():
            self.operator.weight.copy_(torch.eye(p, dtype=torch.float64))

    def loss(self, windows: torch.Tensor) -> torch.Tensor:
        """Reconstruction + linearity + prediction losses of windows (B, H + 1, d)."""
        b, length, d = windows.shape
        encoded = self.encoder(windows.reshape(b * length, d)).reshape(b, length, -1)
        reconstruction = torch.mean((self.decoder(encoded) - windows) ** 2)
        latent, rolled = encoded[:, 0], []
        for _ in range(length - 1):
            latent = self.operator(latent)
            rolled.append(latent)
        rolled_latents = torch.stack(rolled, dim=1)  # (B, H, p)
        linearity = torch.mean((rolled_latents - encoded[:, 1:]) ** 2)
        prediction = torch.mean((self.decoder(rolled_latents) - windows[:, 1:]) ** 2)
        return reconstruction + linearity + prediction

    def rollout(self, z0: np.ndarray, steps: int, reencode: int) -> np.ndarray:
        """Standardised states (steps, d) after z0 (d,): l <- K l, z = psi(l); every
        ``reencode`` steps (0: never) l <- phi(z)."""
        out = np.empty((steps, z0.shape[0]))
        with torch.no_grad():
            latent = self.encoder(torch.as_tensor(z0, dtype=torch.float64)[None])
            for j in range(steps):
                latent = self.operator(latent)
                z = self.decoder(latent)
                out[j] = z[0].numpy()
                if reencode and (j + 1) % reencode == 0:
                    latent = self.encoder(z)
        return out

    def encode(self, z: np.ndarray) -> np.ndarray:
        """(n, d) standardised states -> (n, p) latent coordinates."""
        with torch.no_grad():
            return self.encoder(torch.as_tensor(z, dtype=torch.float64)).numpy()

