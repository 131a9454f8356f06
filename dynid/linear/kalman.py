"""Kalman filter and Rauch-Tung-Striebel smoother for the linear-Gaussian state-space model

    z_{t+1} = A_t z_t + B_t u_t + w_t,   w_t ~ N(0, Q_t)
    y_t     = C z_t + D u_t + c + v_t,   v_t ~ N(0, diag(r))

with missing observations: a NaN entry of y_t is simply not observed, so the update at t uses
only the observed rows of C, c and r (a row with nothing observed is a pure prediction).
A ``StateSpace`` has one A, B, Q for every step; a ``Course`` lays a model out over one trial,
one transition per interval, which is how a continuous-time model sampled at irregular times
(``continuous.py``) enters the same filter.

Why this update: with diagonal R the observed rows enter the update only through the (n, n)
information J_t = C_o^T R_o^-1 C_o and the (n,) h_t = C_o^T R_o^-1 (y_o - c_o), which are
computed for all t at once. The covariance update is P_post = (I + P_pred J_t)^-1 P_pred
(= (P_pred^-1 + J_t)^-1): a sum of a positive definite and a positive semidefinite matrix
inverted, with no subtraction, so the posterior stays symmetric positive definite - the
property the Joseph form is used for - at a cost per step independent of the number of
observed variables. The log-likelihood uses the matrix determinant lemma and Woodbury's
identity with the same quantities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StateSpace:
    """Parameters: a (n, n), c (p, n), offset (p,), q (n, n), r (p,) observation noise
    variances, m0 (n,) and p0 (n, n) the mean and covariance of the first state; b (n, m) and
    d (p, m) the inputs' effect on the next state and on the observation (None: no inputs,
    stored as m = 0 columns)."""

    a: np.ndarray
    c: np.ndarray
    offset: np.ndarray
    q: np.ndarray
    r: np.ndarray
    m0: np.ndarray
    p0: np.ndarray
    b: np.ndarray = None  # type: ignore[assignment]
    d: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.b is None:
            object.__setattr__(self, "b", np.zeros((self.a.shape[0], 0)))
        if self.d is None:
            object.__setattr__(self, "d", np.zeros((self.c.shape[0], self.b.shape[1])))

    @property
    def n_latent(self) -> int:
        return int(self.a.shape[0])

    def course(self, steps: int, u: np.ndarray | None = None) -> Course:
        """The model laid out over ``steps`` samples with inputs u (steps, m) (None: none)."""
        n, m = self.n_latent, self.b.shape[1]
        u = input_rows(u, steps, m)
        return Course(
            a=np.broadcast_to(self.a, (max(steps - 1, 0), n, n)),
            q=np.broadcast_to(self.q, (max(steps - 1, 0), n, n)),
            drive=u[:-1] @ self.b.T,
            c=self.c,
            offsets=self.offset + u @ self.d.T,
            r=self.r,
            m0=self.m0,
            p0=self.p0,
        )


@dataclass(frozen=True)
class Course:
    """A model over one trial of T samples: transitions a (T-1, n, n), q (T-1, n, n) and drive
    (T-1, n) = B_t u_t from sample t to t+1; offsets (T, p) = c + D u_t; c, r, m0, p0 as in
    ``StateSpace``."""

    a: np.ndarray
    q: np.ndarray
    drive: np.ndarray
    c: np.ndarray
    offsets: np.ndarray
    r: np.ndarray
    m0: np.ndarray
    p0: np.ndarray


@dataclass(frozen=True)
class Filtered:
    """means/covs (T, n)/(T, n, n): z_t given y_0..y_t; predicted_means/covs: z_t given
    y_0..y_{t-1}; loglik (T,): log p(y_t | y_0..y_{t-1}) of the observed entries (0 where
    none is observed)."""

    means: np.ndarray
    covs: np.ndarray
    predicted_means: np.ndarray
    predicted_covs: np.ndarray
    loglik: np.ndarray


@dataclass(frozen=True)
class Smoothed:
    """means/covs (T, n)/(T, n, n): z_t given all of y; cross (T-1, n, n): Cov(z_{t+1}, z_t)
    given all of y."""

    means: np.ndarray
    covs: np.ndarray
    cross: np.ndarray


def input_rows(u: np.ndarray | None, steps: int, m: int) -> np.ndarray:
    """u (steps, m) checked, or an empty (steps, 0) array for a model without inputs."""
    if u is None:
        u = np.zeros((steps, 0))
    if u.shape != (steps, m):
        raise ValueError(f"inputs have shape {u.shape}, the model takes ({steps}, {m})")
    return u


def _laid_out(model: StateSpace | Course, steps: int) -> Course:
    return model if isinstance(model, Course) else model.course(steps)


def _information(course: Course, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-step J (T, n, n), h (T, n), y^T R^-1 y (T,), log det R_o + k log 2 pi (T,) and the
    observed count k (T,) of the observed entries of y (T, p)."""
    observed = ~np.isnan(y)
    weights = observed / course.r  # (T, p): 1/r where observed, else 0
    centred = np.where(observed, y - course.offsets, 0.0)
    j = np.einsum("tp,pi,pj->tij", weights, course.c, course.c)
    h = (weights * centred) @ course.c
    quad = np.sum(weights * centred**2, axis=1)
    count = observed.sum(axis=1)
    const = observed @ np.log(course.r) + count * math.log(2 * math.pi)
    return j, h, quad, const, count


def kalman_filter(model: StateSpace | Course, y: np.ndarray) -> Filtered:
    """Filter one trial y (T, p), NaN = not observed; a StateSpace is taken without inputs."""
    course = _laid_out(model, y.shape[0])
    j, h, quad, const, count = _information(course, y)
    steps, n = y.shape[0], course.m0.shape[0]
    eye = np.eye(n)
    means, covs = np.empty((steps, n)), np.empty((steps, n, n))
    pmeans, pcovs = np.empty((steps, n)), np.empty((steps, n, n))
    loglik = np.zeros(steps)
    m, p = course.m0, course.p0
    for t in range(steps):
        if t > 0:
            a = course.a[t - 1]
            m = a @ m + course.drive[t - 1]
            p = a @ p @ a.T + course.q[t - 1]
        pmeans[t], pcovs[t] = m, p
        if count[t]:
            jt, ht = j[t], h[t]
            gain = eye + p @ jt  # I + P J: its determinant is |S| / |R_o|
            post = np.linalg.solve(gain, p)
            post = 0.5 * (post + post.T)
            g = ht - jt @ m  # C_o^T R_o^-1 (innovation)
            correction = post @ g
            # e^T S^-1 e = e^T R^-1 e - g^T P_post g (Woodbury), with
            # e^T R^-1 e = quad - 2 h.m + m.J m = quad - m.(g + h).
            maha = quad[t] - m @ (g + ht) - g @ correction
            loglik[t] = -0.5 * (const[t] + np.linalg.slogdet(gain)[1] + maha)
            m, p = m + correction, post
        means[t], covs[t] = m, p
    return Filtered(means, covs, pmeans, pcovs, loglik)


def rts_smoother(model: StateSpace | Course, filtered: Filtered) -> Smoothed:
    """Rauch-Tung-Striebel smoothing of one filtered trial (the model it was filtered with)."""
    means, covs = filtered.means.copy(), filtered.covs.copy()
    steps, n = means.shape
    cross = np.empty((max(steps - 1, 0), n, n))
    if steps < 2:
        return Smoothed(means, covs, cross)
    course = _laid_out(model, steps)
    # Every gain G_t = P_t A_t^T P_pred_{t+1}^-1 at once, from solves with the symmetric
    # predicted covariances.
    gains = np.linalg.solve(filtered.predicted_covs[1:], course.a @ filtered.covs[:-1]).transpose(0, 2, 1)
    for t in range(steps - 2, -1, -1):
        gain = gains[t]
        means[t] = filtered.means[t] + gain @ (means[t + 1] - filtered.predicted_means[t + 1])
        cov = filtered.covs[t] + gain @ (covs[t + 1] - filtered.predicted_covs[t + 1]) @ gain.T
        covs[t] = 0.5 * (cov + cov.T)
    cross[:] = covs[1:] @ gains.transpose(0, 2, 1)
    return Smoothed(means, covs, cross)


def forecast(
    model: StateSpace, mean: np.ndarray, cov: np.ndarray, steps: int, u: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Predicted observations after the filtered state (mean (n,), cov (n, n)) at the last
    sample T: means (steps, p) and variances (steps, p) of y_{T+1..T+steps}. u (steps + 1, m):
    the inputs at T..T+steps (None without inputs): u_T drives the first step."""
    return forecast_course(model.course(steps + 1, u), mean, cov)


def forecast_course(course: Course, mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predicted observations at samples 1..T-1 of ``course`` (T samples) from the state at
    sample 0 (mean (n,), cov (n, n)) with no observation after it: means (T-1, p) and
    variances (T-1, p)."""
    steps, p = course.a.shape[0], course.c.shape[0]
    out_mean, out_var = np.empty((steps, p)), np.empty((steps, p))
    m, s = mean, cov
    for k in range(steps):
        a = course.a[k]
        m = a @ m + course.drive[k]
        s = a @ s @ a.T + course.q[k]
        out_mean[k] = course.c @ m + course.offsets[k + 1]
        out_var[k] = np.einsum("pi,ij,pj->p", course.c, s, course.c) + course.r
    return out_mean, out_var


def sample_path(
    model: StateSpace, mean: np.ndarray, cov: np.ndarray, steps: int, u: np.ndarray | None,
    rng: np.random.Generator,
) -> np.ndarray:
    """One draw (steps, p) of y_{T+1..T+steps} from the joint predictive distribution whose
    mean and variances ``forecast`` gives: the state at T drawn from the filtered N(mean, cov),
    then state and observation noise drawn at every step. u as in ``forecast``."""
    n, p = model.n_latent, model.c.shape[0]
    u = input_rows(u, steps + 1, model.b.shape[1])
    state_noise = _gaussian_root(model.q)
    z = mean + _gaussian_root(cov) @ rng.standard_normal(n)
    out = np.empty((steps, p))
    for k in range(steps):
        z = model.a @ z + model.b @ u[k] + state_noise @ rng.standard_normal(n)
        out[k] = model.c @ z + model.d @ u[k + 1] + model.offset + np.sqrt(model.r) * rng.standard_normal(p)
    return out


def _gaussian_root(cov: np.ndarray) -> np.ndarray:
    """L with L L^T = cov for a symmetric positive semi-definite cov (eigen-decomposition: a
    singular cov, e.g. a state known exactly, has no Cholesky factor)."""
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    return vectors * np.sqrt(np.clip(values, 0.0, None))
