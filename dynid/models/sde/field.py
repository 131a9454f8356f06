"""The learned drift as a function of the latent state (numpy): its posterior mean and sd
anywhere, sampled drift functions, and Euler-Maruyama paths of the latent SDE.

With q(u_d) = N(mean_d, S), the RBF kernel and the prior mean h(x) = trend^T [x; 1], at a state
x (k = k_Z(x), K = k_Z(Z)):
    E f_d(x) = h_d(x) + k^T K^-1 mean_d,   Var f_d(x) = k(x, x) - k^T K^-1 k + k^T K^-1 S K^-1 k.
A sampled drift function is h(x) + k_Z(x)^T K^-1 u with u ~ q(u): a draw from q(f) less the
sparse GP's remainder given u, a GP of variance k(x, x) - k^T K^-1 k (the second term of Var f)
correlated along x, so not drawn point by point along a path. Between inducing points a
lengthscale or less apart it is small: its largest share of the posterior variance inside the
inducing points' box was 0.04 % to 10 % (the sd up to 5 % less) on the nine double-well fits of
benchmarks/gpsde_draws.py. Beyond the box, where k_Z fades, it is all of it: draws there are the
trend alone, while ``sd_at`` returns to the prior's sd. The trend is a point estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.models.sde.kernels import gram
from dynid.models.sde.sing import JITTER, SDEModel


@dataclass(frozen=True)
class DriftField:
    """inducing (M, D), variance and lengthscale of the kernel, weights (M, D) = K^-1 mean,
    k_inv (M, M), spread (M, M) = K^-1 S K^-1, mean (M, D) and cov (M, M) of q(u), trend
    (D + 1, D) of the prior mean."""

    inducing: np.ndarray
    variance: float
    lengthscale: float
    weights: np.ndarray
    k_inv: np.ndarray
    spread: np.ndarray
    mean: np.ndarray
    cov: np.ndarray
    trend: np.ndarray

    @classmethod
    def of(cls, model: SDEModel) -> DriftField:
        kernel, drift = model.kernel, model.drift
        m = kernel.inducing.shape[0]
        k = gram(kernel.inducing, kernel.inducing, kernel.variance, kernel.lengthscale)
        k_inv = np.linalg.inv(k + JITTER * kernel.variance * np.eye(m))
        k_inv = 0.5 * (k_inv + k_inv.T)
        return cls(kernel.inducing, kernel.variance, kernel.lengthscale, k_inv @ drift.mean, k_inv,
                   k_inv @ drift.cov @ k_inv, drift.mean, drift.cov, model.trend)

    def _features(self, x: np.ndarray) -> np.ndarray:
        return gram(np.asarray(x, dtype=float), self.inducing, self.variance, self.lengthscale)

    def _prior_mean(self, x: np.ndarray) -> np.ndarray:
        """h(x) (..., D) at states x (..., D)."""
        return x @ self.trend[:-1] + self.trend[-1]

    def mean_at(self, x: np.ndarray) -> np.ndarray:
        """E f(x) (n, D) at states x (n, D)."""
        return self._prior_mean(np.asarray(x, dtype=float)) + self._features(x) @ self.weights

    def sd_at(self, x: np.ndarray) -> np.ndarray:
        """The posterior sd of each drift component (all share it) at states x (n, D): (n,)."""
        k = self._features(x)
        variance = self.variance - np.einsum("ni,ij,nj->n", k, self.k_inv - self.spread, k)
        return np.sqrt(np.maximum(variance, 0.0))

    def sample_weights(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """K^-1 u for n draws u ~ q(u): (n, M, D)."""
        factor = np.linalg.cholesky(self.cov)
        u = self.mean[None] + np.einsum("ij,njd->nid", factor, rng.standard_normal((n, *self.mean.shape)))
        return np.einsum("ij,njd->nid", self.k_inv, u)

    def paths(self, start: np.ndarray, weights: np.ndarray, steps: int, substeps: int, step: float,
              rng: np.random.Generator) -> np.ndarray:
        """Euler-Maruyama paths of dz = f(z) dt + dW: start (..., n, D) the particles' states,
        weights (n, M, D) the n particles' drift functions (shared over the leading axes, e.g.
        one start per history), ``steps`` samples of ``substeps`` grid steps of ``step``.
        Returns (steps, ..., n, D), the states after each sample interval."""
        z = np.array(start, dtype=float)
        out = np.empty((steps, *z.shape))
        root = np.sqrt(step)
        for k in range(steps):
            for _ in range(substeps):
                z = z + step * self.drawn_at(z, weights) + root * rng.standard_normal(z.shape)
            out[k] = z
        return out

    def drawn_at(self, z: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The drift (..., n, D) of n drawn functions, weights (n, M, D) from ``sample_weights``,
        at states z (..., n, D), particle j's state under function j."""
        features = self._features(z.reshape(-1, z.shape[-1])).reshape(*z.shape[:-1], -1)
        return self._prior_mean(z) + np.einsum("...nm,nmd->...nd", features, weights)
