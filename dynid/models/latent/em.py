"""Expectation-maximisation for the linear-Gaussian state-space model of ``kalman.py``
(Shumway & Stoffer 1982; Ghahramani & Hinton 1996), with missing observations.

E-step: Kalman filter + RTS smoother per trial. M-step, in closed form:
A = S10 S00^-1 and Q = (S11 - A S10^T) / N over transitions; per observed variable i, the row
[C_i, c_i] regresses y_ti on [E z_t; 1] over the samples where y_ti is observed (diagonal R
makes the complete-data likelihood separate by variable, so this is the exact maximiser with
missing entries) and r_i is its expected residual variance; m0, P0 from the smoothed first
states of the trials. Each iteration therefore does not decrease the log-likelihood.
"""

from __future__ import annotations

import numpy as np

from dynid.errors import ComputationError
from dynid.linear.kalman import StateSpace, Smoothed, kalman_filter, rts_smoother
from dynid.linear.subspace import VARIANCE_FLOOR
from dynid.models.latent.iterations import EMResult, iterate_em


def log_likelihood(model: StateSpace, trials: list[np.ndarray]) -> float:
    """log p(y) of all trials (observed entries only)."""
    return float(sum(kalman_filter(model, y).loglik.sum() for y in trials))


def expectations(model: StateSpace, trials: list[np.ndarray]) -> tuple[list[Smoothed], float]:
    """The E-step: smoothed states of every trial and the total log-likelihood."""
    smoothed, total = [], 0.0
    for y in trials:
        filtered = kalman_filter(model, y)
        total += float(filtered.loglik.sum())
        smoothed.append(rts_smoother(model, filtered))
    return smoothed, total


def maximise(model: StateSpace, trials: list[np.ndarray], smoothed: list[Smoothed]) -> StateSpace:
    """The M-step (see the module docstring)."""
    n = model.n_latent
    s00, s11, s10 = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    transitions = 0
    p = trials[0].shape[1]
    # Observation statistics with x_t = [z_t; 1], per observed variable.
    sxx = np.zeros((p, n + 1, n + 1))
    syx = np.zeros((p, n + 1))
    syy = np.zeros(p)
    counts = np.zeros(p)
    for y, s in zip(trials, smoothed):
        second = s.covs + np.einsum("ti,tj->tij", s.means, s.means)  # E[z_t z_t^T]
        s00 += second[:-1].sum(axis=0)
        s11 += second[1:].sum(axis=0)
        s10 += s.cross.sum(axis=0) + s.means[1:].T @ s.means[:-1]
        transitions += y.shape[0] - 1
        observed = ~np.isnan(y)
        values = np.where(observed, y, 0.0)
        xx = np.empty((y.shape[0], n + 1, n + 1))
        xx[:, :n, :n] = second
        xx[:, :n, n] = xx[:, n, :n] = s.means
        xx[:, n, n] = 1.0
        sxx += np.einsum("tp,tij->pij", observed.astype(float), xx)
        syx += values.T @ np.hstack([s.means, np.ones((y.shape[0], 1))])
        syy += np.sum(values**2, axis=0)
        counts += observed.sum(axis=0)
    if transitions < 1 or np.any(counts < 1):
        raise ComputationError("EM needs at least two samples and one value of every variable")
    a = np.linalg.solve(s00, s10.T).T
    q = (s11 - a @ s10.T) / transitions
    rows = np.linalg.solve(sxx, syx[:, :, None])[:, :, 0]  # (p, n + 1) = [C_i, c_i]
    r = (syy - np.einsum("pi,pi->p", rows, syx)) / counts
    scale = max(float(np.mean(syy / counts - (syx[:, n] / counts) ** 2)), np.finfo(float).tiny)
    firsts = np.stack([s.means[0] for s in smoothed])
    m0 = firsts.mean(axis=0)
    spread = firsts - m0
    p0 = np.mean([s.covs[0] for s in smoothed], axis=0) + spread.T @ spread / len(smoothed)
    floor = VARIANCE_FLOOR * scale
    return StateSpace(
        a=a,
        c=rows[:, :n],
        offset=rows[:, n],
        q=0.5 * (q + q.T),
        r=np.maximum(r, floor),
        m0=m0,
        p0=0.5 * (p0 + p0.T),
    )


def fit_em(start: StateSpace, trials: list[np.ndarray], *, max_iter: int, tol: float) -> EMResult[StateSpace]:
    """EM from ``start`` until the log-likelihood gains less than ``tol`` per observed value
    in one iteration, or ``max_iter`` iterations."""
    return iterate_em(
        start,
        lambda model: expectations(model, trials),
        lambda model, smoothed: maximise(model, trials, smoothed),
        lambda model: log_likelihood(model, trials),
        n_values=sum(int(np.sum(~np.isnan(y))) for y in trials),
        max_iter=max_iter,
        tol=tol,
    )
