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

from dynid.models.latent.markov import Emission, row_sums

# Covariance floor relative to the data's mean variance (see the module docstring).
FLOOR = 1e-6


def covariance_floor(trials: list[np.ndarray]) -> float:
    """FLOOR times the mean per-variable variance of the pooled samples."""
    pooled = np.concatenate(trials)
    return FLOOR * max(float(np.mean(np.var(pooled, axis=0))), np.finfo(float).tiny)


def gaussian_log_density(residuals: np.ndarray, covs: np.ndarray) -> np.ndarray:
    """log N(r; 0, Sigma_k) of residuals (K, steps, d) under covariances (K, d, d): (steps, K)."""
    k, steps, d = residuals.shape
    factors = np.linalg.cholesky(covs)
    # The small (d, d) inverses of the factors, then one matmul per state: scipy's triangular
    # solve on (d, steps) costs milliseconds per call in LAPACK overhead, and this runs per EM step.
    inverses = np.linalg.inv(factors)
    squares = np.empty((k, steps))
    for state in range(k):
        whitened = residuals[state] @ inverses[state].T
        squares[state] = row_sums(whitened * whitened)
    log_dets = 2.0 * np.log(np.diagonal(factors, axis1=1, axis2=2)).sum(axis=1)
    return (-0.5 * (squares + (log_dets + d * np.log(2 * np.pi))[:, None])).T


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
        return gaussian_log_density(x[None, :, :] - self.means[:, None, :], self.covs)

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
        out = np.zeros((x.shape[0], self.n_states))
        out[1:] = gaussian_log_density(x[None, 1:, :] - self.step(x[:-1]), self.covs)
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
