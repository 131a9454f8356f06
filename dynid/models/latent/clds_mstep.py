"""The closed-form M-step of ``clds`` (``clds.py``) and the evidence that chooses its prior.

The weights W of A(u) and b(u) maximise sum_t E||z_{t+1} - [A(u) b(u)] [z_t; 1]||^2 / -2 -
||W||^2 / 2, a ridge regression of z_{t+1} on phi(u) (x) [z_t; 1] whose normal equations are
(S + I) W = Y with S = sum phi phi^T (x) E[z z^T]-type sums (the brief's Sylvester equation
S W + W Q = Y with Q = I); C, c, r, m0, P0 as in ``lds`` (``em.maximise_observation``). Each
step maximises the expected complete-data log posterior, so the MAP objective log p(y | theta) +
log p(W) never decreases. With ``condition_readout`` the observation's M-step is
``clds_readout.py``'s.

The evidence of a prior (lengthscale, b's prior sd) given the smoothed states is the Bayesian
linear-regression evidence of the same regression, W integrated out: tr(Y^T (I + S)^-1 Y) / 2 -
n log|I + S| / 2 + const.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dynid.data.dataset import Trial
from dynid.linear.subspace import VARIANCE_FLOOR
from dynid.models.latent.clds_readout import maximise_readout
from dynid.models.latent.clds_system import ConditionalSystem
from dynid.models.latent.em import Moments, maximise_observation


def transition_sums(found: list[Moments], beta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per trial, with zbar = [z; beta]: sum_t E[zbar_t zbar_t^T] (K, n + 1, n + 1) and
    sum_t E[zbar_t z_{t+1}^T] (K, n + 1, n) over the trial's transitions."""
    n = found[0].x.shape[1]
    gram = np.zeros((len(found), n + 1, n + 1))
    cross = np.zeros((len(found), n + 1, n))
    for k, moment in enumerate(found):
        gram[k, :n, :n] = moment.xx[:-1].sum(axis=0)
        gram[k, :n, n] = gram[k, n, :n] = beta * moment.x[:-1].sum(axis=0)
        gram[k, n, n] = beta**2 * (moment.x.shape[0] - 1)
        cross[k, :n] = moment.zx.sum(axis=0).T
        cross[k, n] = beta * moment.x[1:].sum(axis=0)
    return gram, cross


def regression(features: np.ndarray, gram: np.ndarray, cross: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S (L (n+1), L (n+1)) and Y (L (n+1), n) of the weights' normal equations (S + I) W = Y,
    from each trial's features (K, L) and ``transition_sums``."""
    s = np.einsum("ka,kb,kij->aibj", features, features, gram)
    y = np.einsum("ka,kij->aij", features, cross)
    size = s.shape[0] * s.shape[1]
    return s.reshape(size, size), y.reshape(size, -1)


def weights_of(s: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """The MAP weights (L, n + 1, n): the solution of (S + I) W = Y."""
    solved = np.linalg.solve(s + np.eye(s.shape[0]), y)
    return solved.reshape(-1, n + 1, n)


def log_evidence(s: np.ndarray, y: np.ndarray) -> float:
    """The prior-dependent part of log p(z_{1:} | z, kappa) with W integrated out (module
    docstring): tr(Y^T (I + S)^-1 Y) / 2 - n log|I + S| / 2."""
    factor = np.linalg.cholesky(s + np.eye(s.shape[0]))
    whitened = np.linalg.solve(factor, y)
    return 0.5 * float(np.sum(whitened**2)) - y.shape[1] * float(np.sum(np.log(np.diag(factor))))


def maximise(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray,
             found: list[Moments]) -> ConditionalSystem:
    """The M-step (module docstring); ``trials`` without inputs, ``conditions`` (K, M). A
    read-out that depends on the condition has its own (``clds_readout.maximise_readout``)."""
    n = system.n_latent
    s, y = regression(system.basis.features(conditions), *transition_sums(found, system.drive_scale))
    if system.readout is not None:
        return maximise_readout(replace(system, weights=weights_of(s, y, n)), trials, conditions, found)
    seen = maximise_observation(trials, found, n)
    return replace(system, weights=weights_of(s, y, n), c=seen.c, offset=seen.offset, r=seen.r,
                   m0=seen.m0, p0=seen.p0)


def residual_covariance(system: ConditionalSystem, conditions: np.ndarray, found: list[Moments]) -> np.ndarray:
    """The Q M-step: the mean expected residual covariance (n, n) of z_{t+1} - A(u) z_t - b(u)."""
    gram, cross = transition_sums(found)
    a, b = system.dynamics(conditions)
    total = np.zeros((system.n_latent, system.n_latent))
    for k, moment in enumerate(found):
        step = np.hstack([a[k], b[k][:, None]])  # (n, n + 1)
        fitted = step @ cross[k]
        total += moment.xx[1:].sum(axis=0) - fitted - fitted.T + step @ gram[k] @ step.T
    count = sum(moment.x.shape[0] - 1 for moment in found)
    q = 0.5 * (total + total.T) / count
    # A floor keeps the Cholesky factor of ``whitened`` defined for a noiseless direction.
    n = system.n_latent
    return q + VARIANCE_FLOOR * max(float(np.trace(q)) / n, np.finfo(float).tiny) * np.eye(n)
