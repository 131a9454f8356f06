"""The start of a gpsde fit (INFERRED: dynid's choices, in the spirit of SING's PCA start).

Read-out by PCA: offset = the data's mean, C's directions = the top ``latent`` right singular
vectors. The latent scale is not free, since the diffusion is fixed at I: along each direction
the projection p_t = v^T (y_t - offset) moves as c z_t plus noise, so its squared increments
over one and two samples differ by c^2 dt (the noise adds the same 2 var to both; the drift's
share is of order dt^2), which gives c. The inducing points span the projected latents' range
with a margin; the lengthscale starts at 1.5 grid spacings, the kernel variance at 1, the trend
at zero; q(z) is the exact posterior of drift-free (Brownian) latents, and q(u) its closed-form
optimum.
"""

from __future__ import annotations

import numpy as np

from dynid.data.dataset import Trial
from dynid.models.latent.em import Observation
from dynid.models.sde import sing
from dynid.models.sde.kernels import inducing_grid

# Margin of the inducing grid beyond the latents' range, as a fraction of the range.
MARGIN = 0.2
# The first noise variance of each variable, as a fraction of its variance (EM refines it).
NOISE_FRACTION = 0.1


def initial_fit(trials: list[Trial], grid: sing.Grid, dt: float, latent: int,
                per_dim: int) -> tuple[sing.SDEModel, sing.Posterior]:
    """The starting model and q(z) (module docstring)."""
    y = np.concatenate([trial.x for trial in trials])
    offset = np.nanmean(y, axis=0)
    centred = np.nan_to_num(y - offset)
    directions = np.linalg.svd(centred, full_matrices=False)[2][:latent]  # (latent, p)
    projected = [np.nan_to_num(trial.x - offset) @ directions.T for trial in trials]
    scale = _scale(projected, dt)
    c = directions.T * scale  # (p, latent)
    latents = np.concatenate(projected) / scale
    spread = np.nanvar(y, axis=0)
    fitted = latents @ c.T + offset
    r = np.maximum(np.nanmean((y - fitted) ** 2, axis=0), NOISE_FRACTION * spread)
    low, high = latents.min(axis=0), latents.max(axis=0)
    pad = MARGIN * (high - low)
    inducing = inducing_grid(low - pad, high + pad, per_dim)
    spacing = float(np.mean((high - low + 2 * pad) / max(per_dim - 1, 1)))
    kernel = sing.Kernel(variance=1.0, lengthscale=1.5 * spacing, inducing=inducing)
    readout = Observation(c=c, d=np.zeros((c.shape[0], 0)), offset=offset, r=r,
                          m0=latents[0] * 0.0, p0=np.diag(latents.var(axis=0)) + np.eye(latent))
    placeholder = sing.InducingPosterior(np.zeros((inducing.shape[0], latent)), np.eye(inducing.shape[0]))
    model = sing.SDEModel(kernel, placeholder, readout, trend=np.zeros((latent + 1, latent)))
    posterior = sing.start(grid, model)
    model = sing.update_drift(posterior, grid, model)
    return model, sing.evaluate(posterior.natural, posterior.moments, grid, model, rho=posterior.rho)


def _scale(projected: list[np.ndarray], dt: float) -> np.ndarray:
    """c per direction (module docstring); from the one-sample increments alone when the
    two-sample ones do not exceed them (noise-free data, too short trials)."""
    one = np.concatenate([p[1:] - p[:-1] for p in projected])
    two = [p[2:] - p[:-2] for p in projected if p.shape[0] > 2]
    v1 = np.mean(one**2, axis=0)
    v2 = np.mean(np.concatenate(two) ** 2, axis=0) if two else np.zeros_like(v1)
    rate = np.where(v2 > v1, v2 - v1, v1) / dt
    return np.sqrt(np.maximum(rate, np.finfo(float).tiny))
