"""Structured variational EM for the switching linear dynamical system of ``slds.py``.

    s_t ~ Markov(pi, T)                                   (K regimes)
    z_t = A_{s_t} z_{t-1} + b_{s_t} + w_t,  w_t ~ N(0, Q_{s_t})   (n latent, t >= 1)
    z_0 ~ N(m0, P0),  y_t = C z_t + d + v_t,  v_t ~ N(0, diag(r))  (p observed, shared)

The exact posterior p(s, z | y) is a mixture of K^T Gaussians. The approximation is
q(s) q(z) (Ghahramani & Hinton 2000, structured mean field): each factor keeps the chain
structure of its part, and each update is exact and in closed form:
- q(z) is the Gaussian Markov chain whose energy is the expected (under q(s)) dynamics plus the
  observations: a block-tridiagonal precision, solved by one forward elimination and back
  substitution (``latent_chain``; means, covariances, lag-one cross-covariances, log det).
- q(s) is a hidden Markov chain whose log "emission" at t is E_q(z)[log N(z_t; A_k z_{t-1} + b_k,
  Q_k)], so the HMM forward-backward of ``markov`` gives it with its normaliser log Z_s.
- The M-step maximises the expected complete-data log-likelihood, in closed form per regime
  (weighted least squares on expected second moments) and for C, d, r (per variable, over the
  observed cells: NaN cells are missing observations) and m0, P0.
With q(s) fresh for the current q(z), the evidence lower bound is
ELBO = log Z_s + E_q(z)[log p(y | z) + log p(z_0)] + H[q(z)], and every update raises it, so the
history never decreases (tested). Both quadratic forms, in q(z)'s energy and in q(s)'s
emissions, come from one matrix per regime, G_k = W_k^T Q_k^-1 W_k with W_k = [I, -A_k, -b_k]
acting on x_t = [z_t; z_{t-1}; 1].

q(z) is not the Kalman smoother of ``dynid.linear.kalman``: its dynamics are a q(s)-weighted
mixture of regimes that changes every step (an information-form chain, not one (A, Q)).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dynid.errors import ComputationError
from dynid.models.latent import markov
from dynid.models.latent.forward_backward_choice import Passes
from dynid.models.latent.markov import Chain, Posterior, contiguous
from dynid.models.latent.rows import row_sums

LOG_2PI = float(np.log(2 * np.pi))


@dataclass(frozen=True)
class Switching:
    """The parameters: ``chain`` (pi, T); dynamics (K, n, n) the A_k, offsets (K, n) the b_k,
    noise (K, n, n) the Q_k; emission (p, n) C, emission_offset (p,) d, emission_noise (p,) r;
    initial_mean (n,) m0, initial_cov (n, n) P0; floor: the covariance floor added to every Q_k
    and the variance floor of r."""

    chain: Chain
    dynamics: np.ndarray
    offsets: np.ndarray
    noise: np.ndarray
    emission: np.ndarray
    emission_offset: np.ndarray
    emission_noise: np.ndarray
    initial_mean: np.ndarray
    initial_cov: np.ndarray
    floor: float

    def __post_init__(self) -> None:
        contiguous(self)

    @property
    def n_latent(self) -> int:
        return self.dynamics.shape[1]

    @cached_property
    def energy(self) -> tuple[np.ndarray, np.ndarray]:
        """G_k (K, 2n+1, 2n+1) of the module docstring and log det Q_k (K,); computed once per
        parameter set (every sweep of every trial uses them twice)."""
        k, n = self.offsets.shape
        w = np.concatenate([np.broadcast_to(np.eye(n), (k, n, n)), -self.dynamics, -self.offsets[:, :, None]], axis=2)
        factors = np.linalg.cholesky(self.noise)
        whitened = np.linalg.solve(factors, w)  # L_k^-1 W_k, so G_k = whitened^T whitened
        log_dets = 2.0 * np.log(np.diagonal(factors, axis1=1, axis2=2)).sum(axis=1)
        return np.transpose(whitened, (0, 2, 1)) @ whitened, log_dets


@dataclass(frozen=True)
class LatentChain:
    """q(z) of one trial: means (T, n), covs (T, n, n), cross (T-1, n, n) = Cov(z_{t+1}, z_t),
    log_det the log determinant of the joint precision."""

    means: np.ndarray
    covs: np.ndarray
    cross: np.ndarray
    log_det: float

    def second_moments(self) -> np.ndarray:
        """E[x_t x_t^T] of x_t = [z_t; z_{t-1}; 1] for t >= 1: (T-1, 2n+1, 2n+1)."""
        steps, n = self.means.shape
        now, before = self.means[1:], self.means[:-1]
        out = np.empty((steps - 1, 2 * n + 1, 2 * n + 1))
        out[:, :n, :n] = self.covs[1:] + now[:, :, None] * now[:, None, :]
        out[:, n : 2 * n, n : 2 * n] = self.covs[:-1] + before[:, :, None] * before[:, None, :]
        out[:, :n, n : 2 * n] = self.cross + now[:, :, None] * before[:, None, :]
        out[:, n : 2 * n, :n] = np.transpose(out[:, :n, n : 2 * n], (0, 2, 1))
        out[:, :n, 2 * n] = out[:, 2 * n, :n] = now
        out[:, n : 2 * n, 2 * n] = out[:, 2 * n, n : 2 * n] = before
        out[:, 2 * n, 2 * n] = 1.0
        return out


@dataclass(frozen=True)
class TrialPosterior:
    """q(z) and q(s) of one trial, and q(s)'s log emissions (T, K) (clamped to known regimes)."""

    latent: LatentChain
    regimes: Posterior
    log_b: np.ndarray


def latent_chain(model: Switching, y: np.ndarray, regime_probabilities: np.ndarray) -> LatentChain:
    """q(z) for observations y (T, p) (NaN = missing) given q(s) probabilities (T, K)."""
    steps, n = y.shape[0], model.n_latent
    g, _ = model.energy
    # The expected dynamics energy of step t >= 1: 1/2 x_t^T H_t x_t, H_t = sum_k q(s_t = k) G_k.
    h_dyn = (regime_probabilities[1:] @ g.reshape(g.shape[0], -1)).reshape(steps - 1, 2 * n + 1, 2 * n + 1)
    diagonal = np.zeros((steps, n, n))
    linear = np.zeros((steps, n))
    diagonal[1:] += h_dyn[:, :n, :n]
    diagonal[:-1] += h_dyn[:, n : 2 * n, n : 2 * n]
    lower = h_dyn[:, :n, n : 2 * n]  # precision block (t, t-1)
    linear[1:] -= h_dyn[:, :n, 2 * n]
    linear[:-1] -= h_dyn[:, n : 2 * n, 2 * n]
    observed = ~np.isnan(y)
    c, r = model.emission, model.emission_noise
    outer = (c[:, :, None] * c[:, None, :] / r[:, None, None]).reshape(c.shape[0], -1)
    diagonal += (observed.astype(float) @ outer).reshape(steps, n, n)
    linear += (np.where(observed, y - model.emission_offset, 0.0) / r) @ c
    prior = np.linalg.inv(model.initial_cov)
    diagonal[0] += prior
    linear[0] += prior @ model.initial_mean
    return _solve_block_tridiagonal(diagonal, lower, linear)


def _solve_block_tridiagonal(diagonal: np.ndarray, lower: np.ndarray, linear: np.ndarray) -> LatentChain:
    """The Gaussian with block-tridiagonal precision (diagonal blocks (T, n, n), blocks (t, t-1)
    lower (T-1, n, n)) and linear term (T, n): forward elimination (Schur complements S_t),
    then back substitution (the information-form RTS smoother). log det of the precision is
    sum_t log det S_t (one stacked slogdet; numpy's per-call overhead dominates small blocks)."""
    steps, n = linear.shape
    schur_inverse = np.empty((steps, n, n))
    eliminated = np.empty((steps, n))
    schur_inverse[0], eliminated[0] = np.linalg.inv(diagonal[0]), linear[0]
    for t in range(1, steps):
        coupling = lower[t - 1] @ schur_inverse[t - 1]
        schur_inverse[t] = np.linalg.inv(diagonal[t] - coupling @ lower[t - 1].T)
        eliminated[t] = linear[t] - coupling @ eliminated[t - 1]
    signs, log_dets = np.linalg.slogdet(schur_inverse)
    if not np.all(signs > 0) or not np.all(np.isfinite(log_dets)):
        raise ComputationError("slds: the latent posterior lost positive definiteness")
    means = np.empty((steps, n))
    covs = np.empty((steps, n, n))
    cross = np.empty((steps - 1, n, n))
    means[-1] = schur_inverse[-1] @ eliminated[-1]
    covs[-1] = schur_inverse[-1]
    for t in range(steps - 2, -1, -1):
        gain = schur_inverse[t] @ lower[t].T  # z_t | z_{t+1} has mean S_t^-1 (nu_t - L_t^T z_{t+1})
        means[t] = schur_inverse[t] @ eliminated[t] - gain @ means[t + 1]
        cross[t] = -covs[t + 1] @ gain.T
        covs[t] = schur_inverse[t] - cross[t].T @ gain.T
    covs = 0.5 * (covs + np.transpose(covs, (0, 2, 1)))
    return LatentChain(means, covs, cross, -float(log_dets.sum()))


def regime_log_densities(model: Switching, latent: LatentChain) -> np.ndarray:
    """E_q(z)[log N(z_t; A_k z_{t-1} + b_k, Q_k)] (T, K), 0 at t = 0 (z_0 has its own prior)."""
    g, log_dets = model.energy
    k, n = g.shape[0], latent.means.shape[1]
    moments = latent.second_moments().reshape(-1, (2 * n + 1) ** 2)
    out = np.zeros((latent.means.shape[0], k))
    out[1:] = -0.5 * (moments @ g.reshape(k, -1).T + log_dets + n * LOG_2PI)
    return out


def infer(
    model: Switching,
    y: np.ndarray,
    regime_probabilities: np.ndarray,
    known: np.ndarray | None,
    passes: Passes | None = None,
) -> tuple[TrialPosterior, float]:
    """One coordinate-ascent sweep for one trial: q(z) given q(s), then q(s) given q(z); the
    trial's ELBO (module docstring). known: the known regimes (``markov.clamp``) or None;
    passes: the fit's forward-backward passes (``forward_backward_choice``; None: a lone sweep)."""
    latent = latent_chain(model, y, regime_probabilities)
    log_b = markov.clamp(regime_log_densities(model, latent), known)
    regimes = markov.forward_backward(model.chain, log_b, passes)
    elbo = regimes.loglik + _observation_term(model, y, latent) + _initial_term(model, latent) + _entropy(latent)
    return TrialPosterior(latent, regimes, log_b), elbo


def _observation_term(model: Switching, y: np.ndarray, latent: LatentChain) -> float:
    """E_q(z)[log p(y | z)] over the observed cells."""
    observed = ~np.isnan(y)
    c, r = model.emission, model.emission_noise
    residual = np.where(observed, y - latent.means @ c.T - model.emission_offset, 0.0)
    outer = (c[:, :, None] * c[:, None, :]).reshape(c.shape[0], -1)
    spread = latent.covs.reshape(y.shape[0], -1) @ outer.T  # c_i Sigma_t c_i^T: (T, p)
    terms = np.log(2 * np.pi * r) + (residual**2 + spread) / r
    return -0.5 * float(np.sum(np.where(observed, terms, 0.0)))


def _initial_term(model: Switching, latent: LatentChain) -> float:
    """E_q(z)[log N(z_0; m0, P0)]."""
    n = model.n_latent
    deviation = latent.means[0] - model.initial_mean
    sign, log_det = np.linalg.slogdet(model.initial_cov)
    second = latent.covs[0] + np.outer(deviation, deviation)
    return -0.5 * float(n * LOG_2PI + log_det + np.trace(np.linalg.solve(model.initial_cov, second)))


def _entropy(latent: LatentChain) -> float:
    """H[q(z)] = (T n (1 + log 2 pi) - log det precision) / 2."""
    return 0.5 * (latent.means.size * (1.0 + LOG_2PI) - latent.log_det)


def maximise(model: Switching, trials: list[np.ndarray], posteriors: list[TrialPosterior]) -> Switching:
    """The M-step (module docstring): the chain, the regimes' dynamics, the emission, m0 and P0."""
    k, n = model.offsets.shape
    size = 2 * n + 1
    stats = np.zeros((k, size * size))
    for post in posteriors:
        stats += post.regimes.probabilities[1:].T @ post.latent.second_moments().reshape(-1, size * size)
    stats = stats.reshape(k, size, size)
    weights = stats[:, 2 * n, 2 * n]  # sum_t q(s_t = k), t >= 1
    ridge = model.floor * np.eye(n + 1)
    coef = np.linalg.solve(stats[:, n:, n:] + ridge, np.transpose(stats[:, :n, n:], (0, 2, 1)))  # (K, n+1, n)
    coef = np.transpose(coef, (0, 2, 1))  # [A_k, b_k]: (K, n, n+1)
    noise = (stats[:, :n, :n] - coef @ np.transpose(stats[:, :n, n:], (0, 2, 1))) / np.maximum(weights, 1.0)[:, None, None]
    noise = 0.5 * (noise + np.transpose(noise, (0, 2, 1))) + model.floor * np.eye(n)
    # A regime with (almost) no weight keeps its parameters: no evidence either way.
    empty = weights < 1.0
    dynamics = np.where(empty[:, None, None], model.dynamics, coef[:, :, :n])
    offsets = np.where(empty[:, None], model.offsets, coef[:, :, n])
    noise = np.where(empty[:, None, None], model.noise, noise)
    emission, emission_offset, emission_noise = _maximise_emission(model, trials, posteriors)
    firsts = np.stack([post.latent.means[0] for post in posteriors])
    initial_mean = firsts.mean(axis=0)
    spread = firsts - initial_mean
    initial_cov = np.mean([post.latent.covs[0] for post in posteriors], axis=0) + spread.T @ spread / len(posteriors)
    return Switching(
        chain=markov.maximise_chain(model.chain, [post.regimes for post in posteriors]),
        dynamics=dynamics,
        offsets=offsets,
        noise=noise,
        emission=emission,
        emission_offset=emission_offset,
        emission_noise=emission_noise,
        initial_mean=initial_mean,
        initial_cov=0.5 * (initial_cov + initial_cov.T) + model.floor * np.eye(n),
        floor=model.floor,
    )


def _maximise_emission(model: Switching, trials: list[np.ndarray], posteriors: list[TrialPosterior]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per variable i, [c_i, d_i] regresses y_ti on [E z_t; 1] over the cells where it is
    observed, with the expected second moments; r_i the expected residual variance (floored)."""
    n, p = model.n_latent, trials[0].shape[1]
    sxx = np.zeros((p, (n + 1) * (n + 1)))
    syx, syy, counts = np.zeros((p, n + 1)), np.zeros(p), np.zeros(p)
    for y, post in zip(trials, posteriors):
        means, covs = post.latent.means, post.latent.covs
        augmented = np.hstack([means, np.ones((means.shape[0], 1))])
        second = augmented[:, :, None] * augmented[:, None, :]
        second[:, :n, :n] += covs
        observed = ~np.isnan(y)
        values = np.where(observed, y, 0.0)
        sxx += observed.T.astype(float) @ second.reshape(means.shape[0], -1)
        syx += values.T @ augmented
        syy += row_sums(values.T * values.T)
        counts += observed.sum(axis=0)
    rows = np.linalg.solve(sxx.reshape(p, n + 1, n + 1), syx[:, :, None])[:, :, 0]
    r = (syy - row_sums(rows * syx)) / np.maximum(counts, 1.0)
    return rows[:, :n], rows[:, n], np.maximum(r, model.floor)
