"""Expectation-maximisation for the linear-Gaussian state-space model of ``kalman.py``
(Shumway & Stoffer 1982; Ghahramani & Hinton 1996), with missing observations and inputs.

E-step: Kalman filter + RTS smoother per trial. M-step, in closed form, with x_t = [z_t; u_t]:
[A B] = S10 S00^-1 and Q = (S11 - [A B] S10^T) / N over transitions (S00 = sum E[x_t x_t^T],
S10 = sum E[z_{t+1} x_t^T], S11 = sum E[z_{t+1} z_{t+1}^T]); per observed variable i, the row
[C_i, D_i, c_i] regresses y_ti on [E z_t; u_t; 1] over the samples where y_ti is observed
(diagonal R makes the complete-data likelihood separate by variable, so this is the exact
maximiser with missing entries) and r_i is its expected residual variance; m0, P0 from the
smoothed first states of the trials. The three groups of parameters enter separate terms of the
complete-data likelihood, so each is maximised on its own; each iteration therefore does not
decrease the log-likelihood. The continuous-time model (``continuous_em.py``) shares the
E-step, the observation and the first-state updates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from dynid.data.dataset import Trial
from dynid.errors import ComputationError
from dynid.linear.kalman import Course, Smoothed, StateSpace, kalman_filter, rts_smoother
from dynid.linear.subspace import VARIANCE_FLOOR
from dynid.models.latent.iterations import EMResult, iterate_em

Model = TypeVar("Model")


@dataclass(frozen=True)
class Moments:
    """The E-step's expectations of one trial, with x_t = [z_t; u_t] (m inputs, m may be 0):
    x (T, n + m) = E[x_t]; xx (T, n + m, n + m) = E[x_t x_t^T]; zx (T-1, n, n + m) =
    E[z_{t+1} x_t^T]."""

    x: np.ndarray
    xx: np.ndarray
    zx: np.ndarray


@dataclass(frozen=True)
class Observation:
    """The observation and first-state parameters of the M-step: c (p, n), d (p, m), offset
    (p,), r (p,), m0 (n,), p0 (n, n)."""

    c: np.ndarray
    d: np.ndarray
    offset: np.ndarray
    r: np.ndarray
    m0: np.ndarray
    p0: np.ndarray


def moments(smoothed: Smoothed, u: np.ndarray) -> Moments:
    """``Moments`` of one trial from its smoothed states and inputs u (T, m)."""
    n = smoothed.means.shape[1]
    x = np.hstack([smoothed.means, u])
    xx = np.einsum("ti,tj->tij", x, x)
    xx[:, :n, :n] += smoothed.covs
    zx = np.einsum("ti,tj->tij", smoothed.means[1:], x[:-1])
    zx[:, :, :n] += smoothed.cross
    return Moments(x, xx, zx)


def expectations(courses: list[Course], trials: list[Trial]) -> tuple[list[Moments], float]:
    """The E-step: the moments of every trial (each laid out as ``courses``) and the total
    log-likelihood."""
    found, total = [], 0.0
    for course, trial in zip(courses, trials):
        filtered = kalman_filter(course, trial.x)
        total += float(filtered.loglik.sum())
        found.append(moments(rts_smoother(course, filtered), inputs_of(trial)))
    return found, total


def inputs_of(trial: Trial) -> np.ndarray:
    """The trial's inputs (T, m), an empty (T, 0) array without."""
    return np.zeros((trial.n_samples, 0)) if trial.u is None else trial.u


def maximise_observation(trials: list[Trial], found: list[Moments], n: int) -> Observation:
    """C, D, c, r, m0 and P0 maximising the expected complete-data log-likelihood (module
    docstring); ``n`` latent states."""
    p = trials[0].x.shape[1]
    k = found[0].x.shape[1] + 1  # regressors [z; u; 1]
    sxx, syx = np.zeros((p, k, k)), np.zeros((p, k))
    syy, counts = np.zeros(p), np.zeros(p)
    for trial, moment in zip(trials, found):
        steps = trial.n_samples
        w = np.hstack([moment.x, np.ones((steps, 1))])
        ww = np.zeros((steps, k, k))
        ww[:, :-1, :-1] = moment.xx
        ww[:, :-1, -1] = ww[:, -1, :-1] = moment.x
        ww[:, -1, -1] = 1.0
        observed = ~np.isnan(trial.x)
        values = np.where(observed, trial.x, 0.0)
        sxx += np.einsum("tp,tij->pij", observed.astype(float), ww)
        syx += values.T @ w
        syy += np.sum(values**2, axis=0)
        counts += observed.sum(axis=0)
    if np.any(counts < 1):
        raise ComputationError("EM needs one value of every variable")
    rows = np.linalg.solve(sxx, syx[:, :, None])[:, :, 0]  # (p, k) = [C_i, D_i, c_i]
    r = (syy - np.einsum("pi,pi->p", rows, syx)) / counts
    scale = max(float(np.mean(syy / counts - (syx[:, -1] / counts) ** 2)), np.finfo(float).tiny)
    m0, p0 = maximise_first_state(found, n)
    return Observation(
        c=rows[:, :n], d=rows[:, n:-1], offset=rows[:, -1], r=np.maximum(r, VARIANCE_FLOOR * scale),
        m0=m0, p0=p0,
    )


def maximise_first_state(found: list[Moments], n: int) -> tuple[np.ndarray, np.ndarray]:
    """m0 (n,) and P0 (n, n) maximising the expected log-density of the trials' first states
    (one shared N(m0, P0)); ``n`` latent states."""
    firsts = np.stack([moment.x[0, :n] for moment in found])
    m0 = firsts.mean(axis=0)
    spread = firsts - m0
    p0 = np.mean([moment.xx[0, :n, :n] - np.outer(moment.x[0, :n], moment.x[0, :n]) for moment in found], axis=0)
    p0 = p0 + spread.T @ spread / len(found)
    return m0, 0.5 * (p0 + p0.T)


def maximise(model: StateSpace, trials: list[Trial], found: list[Moments]) -> StateSpace:
    """The M-step of the discrete model (see the module docstring)."""
    n = model.n_latent
    s00 = sum(moment.xx[:-1].sum(axis=0) for moment in found)
    s10 = sum(moment.zx.sum(axis=0) for moment in found)
    s11 = sum(moment.xx[1:, :n, :n].sum(axis=0) for moment in found)
    transitions = sum(trial.n_samples - 1 for trial in trials)
    if transitions < 1:
        raise ComputationError("EM needs at least two samples")
    ab = np.linalg.solve(s00, s10.T).T  # (n, n + m) = [A B]
    q = (s11 - ab @ s10.T) / transitions
    seen = maximise_observation(trials, found, n)
    return StateSpace(
        a=ab[:, :n], b=ab[:, n:], c=seen.c, d=seen.d, offset=seen.offset, q=0.5 * (q + q.T),
        r=seen.r, m0=seen.m0, p0=seen.p0,
    )


def fit_by_em(
    start: Model,
    trials: list[Trial],
    lay_out: Callable[[Model, Trial], Course],
    maximise_step: Callable[[Model, list[Trial], list[Moments]], Model],
    *,
    max_iter: int,
    tol: float,
) -> EMResult[Model]:
    """EM from ``start``, each trial laid out by ``lay_out``, until the log-likelihood gains
    less than ``tol`` per observed value in one iteration, or ``max_iter`` iterations."""

    def expect(model: Model) -> tuple[list[Moments], float]:
        return expectations([lay_out(model, trial) for trial in trials], trials)

    return iterate_em(
        start,
        expect,
        lambda model, found: maximise_step(model, trials, found),
        lambda model: expect(model)[1],
        n_values=sum(int(np.sum(~np.isnan(trial.x))) for trial in trials),
        max_iter=max_iter,
        tol=tol,
    )


def fit_em(start: StateSpace, trials: list[Trial], *, max_iter: int, tol: float) -> EMResult[StateSpace]:
    """EM for the discrete model (uniform steps; the trials' times are not used)."""
    return fit_by_em(
        start, trials, lambda model, trial: model.course(trial.n_samples, trial.u), maximise,
        max_iter=max_iter, tol=tol,
    )

