"""A subspace-identification start for EM: a stochastic realisation from the block Hankel
matrix of future versus past outputs (unweighted N4SID, i.e. W1 = W2 = I in Van Overschee &
De Moor's terms, for a system without inputs).

Per trial, past P and future F stack k consecutive observations (k p rows each, one column per
time); the orthogonal projection O = F P^T (P P^T)^+ P of the future on the past factors as
Gamma X, Gamma the extended observability matrix and X the Kalman state sequence. The SVD of O
gives Gamma = U_n S_n^1/2 and X = Gamma^+ O; C is Gamma's first block row, and A, Q, R, c
come from least squares on X. Missing entries are filled by linear interpolation in time for
this start only (EM then treats them as missing).
"""

from __future__ import annotations

import numpy as np

from dynid.errors import DataError
from dynid.linear.kalman import StateSpace

# Smallest noise variance kept, relative to the data's variance: a zero variance makes the
# filter's gain singular.
VARIANCE_FLOOR = 1e-6


def block_rows(n_latent: int, n_observed: int) -> int:
    """Block rows k of past and future: enough that k p >= n + 1, and at least n + 1 so a
    damped oscillation is seen over several steps."""
    return max(n_latent + 1, -(-(n_latent + 1) // n_observed))


def fill_gaps(y: np.ndarray) -> np.ndarray:
    """y (T, p) with NaN replaced by linear interpolation in the sample index (constant at the
    ends); a column with no value at all becomes 0."""
    filled = y.copy()
    index = np.arange(y.shape[0])
    for column in range(y.shape[1]):
        seen = ~np.isnan(y[:, column])
        if not seen.any():
            filled[:, column] = 0.0
        elif not seen.all():
            filled[:, column] = np.interp(index, index[seen], y[seen, column])
    return filled


def subspace_start(trials: list[np.ndarray], n_latent: int) -> StateSpace:
    """Initial parameters for ``n_latent`` states from trials of (T_i, p) observations."""
    filled = [fill_gaps(y) for y in trials]
    offset = np.mean(np.concatenate(filled), axis=0)
    p = offset.shape[0]
    k = block_rows(n_latent, p)
    past, future, kept = [], [], []
    for y in filled:
        cols = y.shape[0] - 2 * k + 1
        if cols < 1:
            continue
        centred = y - offset
        hankel = np.stack([centred[i : i + cols] for i in range(2 * k)])  # (2k, cols, p)
        past.append(hankel[:k].transpose(0, 2, 1).reshape(k * p, cols))
        future.append(hankel[k:].transpose(0, 2, 1).reshape(k * p, cols))
        kept.append(cols)
    if not kept or sum(kept) < 2 * k * p:
        raise DataError(
            f"too few samples for {n_latent} latent states: each trial needs more than "
            f"{2 * k} samples, {2 * k * p} Hankel columns in all"
        )
    past_m, future_m = np.hstack(past), np.hstack(future)
    # O^T = P^T (P P^T)^+ P F^T: the least-squares fit of F^T on P^T, evaluated at P^T.
    projection = (past_m.T @ np.linalg.lstsq(past_m.T, future_m.T, rcond=None)[0]).T
    u, s, _ = np.linalg.svd(projection, full_matrices=False)
    if s[0] <= 0:
        raise DataError("the data do not vary: no latent dynamics to identify")
    gamma = u[:, :n_latent] * np.sqrt(s[:n_latent])
    states = np.linalg.pinv(gamma) @ projection  # (n, sum cols)
    c = gamma[:p]
    # A from state pairs within each trial's block of columns.
    starts = np.cumsum([0, *kept])
    before = np.hstack([states[:, a : b - 1] for a, b in zip(starts[:-1], starts[1:])])
    after = np.hstack([states[:, a + 1 : b] for a, b in zip(starts[:-1], starts[1:])])
    a = np.linalg.lstsq(before.T, after.T, rcond=None)[0].T
    scale = np.var(np.concatenate(filled), axis=0).mean() or 1.0
    state_noise = after - a @ before
    q = state_noise @ state_noise.T / max(state_noise.shape[1], 1)
    q = 0.5 * (q + q.T) + VARIANCE_FLOOR * scale * np.eye(n_latent)
    outputs = np.hstack([y[k : k + cols].T - offset[:, None] for y, cols in zip(filled, kept)])
    residual = outputs - c @ states
    r = np.maximum(np.var(residual, axis=1), VARIANCE_FLOOR * scale)
    p0 = np.cov(states) if states.shape[1] > 1 else np.eye(n_latent)
    p0 = np.atleast_2d(p0) + VARIANCE_FLOOR * scale * np.eye(n_latent)
    return StateSpace(a=a, c=c, offset=offset, q=q, r=r, m0=np.zeros(n_latent), p0=p0)
