"""Emission models of the hidden Markov backends, each with its closed-form M-step.

``Gaussian`` (``hmm``): x_t | z_t = k ~ N(mu_k, Sigma_k).
``Autoregressive`` (``arhmm``): x_t | z_t = k, x_{t-1} ~ N(A_k x_{t-1} + b_k, Sigma_k) for t >= 1;
the first sample of a trial is conditioned on (density 1 in every state), so its state is
informed only through the transition to the second.

Covariances are full: correlated noise within a regime is common (a shared driver moves every
variable) and with the few variables these models see the d(d+1)/2 parameters per state cost
nothing. A floor (``floor`` times the identity) is added to every covariance so that a state
holding a handful of samples stays non-singular; it is 1e-6 of the data's mean variance, too
small to move the likelihood.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.models.latent.markov import Emission

# Covariance floor relative to the data's mean variance (see the module docstring).
FLOOR = 1e-6


def covariance_floor(trials: list[np.ndarray]) -> float:
    """FLOOR times the mean per-variable variance of the pooled samples."""
    pooled = np.concatenate(trials)
    return FLOOR * max(float(np.mean(np.var(pooled, axis=0))), np.finfo(float).tiny)


def gaussian_log_density(design: np.ndarray, maps: np.ndarray, offsets: np.ndarray, covs: np.ndarray) -> np.ndarray:
    """log N(r_tk; 0, Sigma_k) of the residuals r_tk = design_t maps_k - offsets_k, for design
    (steps, q), maps (K, q, d), offsets (K, d) and covariances (K, d, d): (steps, K).

    Each residual is whitened by the inverse L_k^-1 of its covariance's Cholesky factor, and
    that map is folded into maps and offsets, so that every state's whitened residuals come
    from one product design @ W (steps, K d) and their squared norms from one more, by a block
    matrix of ones: no (K, steps, d) array of residuals, no loop over the states.
    """
    k, q, d = maps.shape
    factors = np.linalg.cholesky(covs)
    inverses = np.linalg.inv(factors)  # (K, d, d) L_k^-1
    weights = (maps @ inverses.transpose(0, 2, 1)).transpose(1, 0, 2).reshape(q, k * d)
    shifts = np.einsum("kd,ked->ke", offsets, inverses).reshape(k * d)
    whitened = design @ weights
    whitened -= shifts
    np.square(whitened, out=whitened)
    squares = whitened @ np.kron(np.eye(k), np.ones((d, 1)))  # (steps, K) squared norms
    log_dets = 2.0 * np.log(np.diagonal(factors, axis1=1, axis2=2)).sum(axis=1)
    squares += log_dets + d * np.log(2 * np.pi)
    squares *= -0.5
    return squares


def weighted_covariance(residuals: np.ndarray, weights: np.ndarray, floor: float) -> np.ndarray:
    """sum_t w_t r_t r_t^T / sum_t w_t + floor I for residuals (steps, d), weights (steps,)."""
    d = residuals.shape[1]
    total = weights.sum()
    cov = (residuals.T * weights) @ residuals / total if total > 0 else np.zeros((d, d))
    return 0.5 * (cov + cov.T) + floor * np.eye(d)


@dataclass(frozen=True)
class Gaussian(Emission):
    """means (K, d), covs (K, d, d), floor the covariance floor."""

    means: np.ndarray
    covs: np.ndarray
    floor: float

    @property
    def n_states(self) -> int:
        return self.means.shape[0]

    def log_density(self, x: np.ndarray) -> np.ndarray:
        k, d = self.means.shape
        return gaussian_log_density(x, np.broadcast_to(np.eye(d), (k, d, d)), self.means, self.covs)

    @classmethod
    def from_posteriors(cls, trials: list[np.ndarray], posteriors: list[np.ndarray], floor: float) -> Gaussian:
        """Weighted means and covariances."""
        x, gamma = np.concatenate(trials), np.concatenate(posteriors)
        weights = np.ones(gamma.shape[0]) @ gamma
        means = gamma.T @ x / np.maximum(weights, np.finfo(float).tiny)[:, None]
        if not np.all(weights > 0):
            # A state with no weight at all sits at the pooled mean (it explains nothing either way).
            means[weights <= 0] = x.mean(axis=0)
        covs = np.stack([weighted_covariance(x - means[k], gamma[:, k], floor) for k in range(gamma.shape[1])])
        return cls(means, covs, floor)

    def refit(self, trials: list[np.ndarray], posteriors: list[np.ndarray]) -> Gaussian:
        return self.from_posteriors(trials, posteriors, self.floor)

    def n_parameters(self) -> int:
        k, d = self.means.shape
        return k * (d + d * (d + 1) // 2)


@dataclass(frozen=True)
class Autoregressive(Emission):
    """dynamics (K, d, d) the A_k, offsets (K, d) the b_k, covs (K, d, d), floor."""

    dynamics: np.ndarray
    offsets: np.ndarray
    covs: np.ndarray
    floor: float

    @property
    def n_states(self) -> int:
        return self.offsets.shape[0]

    def step(self, x: np.ndarray) -> np.ndarray:
        """A_k x + b_k of states x (steps, d) in every regime: (K, steps, d)."""
        return np.einsum("kij,tj->kti", self.dynamics, x) + self.offsets[:, None, :]

    def log_density(self, x: np.ndarray) -> np.ndarray:
        # r_tk = x_t - A_k x_{t-1} - b_k = [x_t, x_{t-1}] [I; -A_k^T] - b_k
        k, d = self.offsets.shape
        maps = np.concatenate([np.broadcast_to(np.eye(d), (k, d, d)), -self.dynamics.transpose(0, 2, 1)], axis=1)
        out = np.zeros((x.shape[0], k))
        out[1:] = gaussian_log_density(np.hstack([x[1:], x[:-1]]), maps, self.offsets, self.covs)
        return out

    @classmethod
    def from_posteriors(cls, trials: list[np.ndarray], posteriors: list[np.ndarray], floor: float) -> Autoregressive:
        """Per regime, weighted least squares of x_t on [x_{t-1}, 1] and its weighted residual
        covariance (a tiny ridge keeps an empty regime's normal equations solvable)."""
        design = np.concatenate([np.hstack([x[:-1], np.ones((x.shape[0] - 1, 1))]) for x in trials])
        target = np.concatenate([x[1:] for x in trials])
        gamma = np.concatenate([p[1:] for p in posteriors])
        d = target.shape[1]
        ridge = floor * np.eye(d + 1)
        dynamics, offsets, covs = [], [], []
        for k in range(gamma.shape[1]):
            w = gamma[:, k]
            weighted = design * w[:, None]
            coef = np.linalg.solve(weighted.T @ design + ridge, weighted.T @ target)  # (d + 1, d)
            dynamics.append(coef[:d].T)
            offsets.append(coef[d])
            covs.append(weighted_covariance(target - design @ coef, w, floor))
        return cls(np.stack(dynamics), np.stack(offsets), np.stack(covs), floor)

    def refit(self, trials: list[np.ndarray], posteriors: list[np.ndarray]) -> Autoregressive:
        return self.from_posteriors(trials, posteriors, self.floor)

    def n_parameters(self) -> int:
        k, d = self.offsets.shape
        return k * (d * d + d + d * (d + 1) // 2)
