"""The scaled forward-backward recursion in numpy and LAPACK, for fits too small to repay
numba's start-up and where numba is missing (``forward_backward_choice``; the compiled
``forward_backward_numba`` agrees to rounding, tested).

Both passes are chains u_t = u_{t-1} M_t of non-negative K x K matrices (forward
M_t = T diag(b_t), backward its transpose, reversed), and a numpy loop over the samples costs
several calls per sample. A chain is the forward substitution of the block-bidiagonal linear
system u_t - u_{t-1} M_t = 0, so ``propagate`` hands it to LAPACK's triangular banded solver
(tbtrs, compiled): one call per WINDOW samples instead of a Python step per sample. Scaling
replaces the per-step normalisation: each M_t is divided by its largest row sum rho_t, which
bounds sum(u_t) / sum(u_{t-1}), so the scaled vectors never grow and only shrink where the data
are surprising; when a vector's sum falls below SAFE_SUM the chain restarts from the last vector
above it, normalised (a single step that falls below on its own is taken alone), and log rho_t
and the restart sums are kept in log space. The substitution only adds non-negative products, so
it loses no precision to cancellation; a vector's entries keep full relative precision down to
1e-308 / SAFE_SUM = 1e-208 of its sum (a loop normalising every step: 1e-308).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from dynid.errors import ComputationError
from dynid.models.latent.rows import ZERO_PROBABILITY, row_max, row_sums

# Samples per banded solve of ``propagate``: fewer windows mean less Python per sample, longer
# ones more cache misses and, at a restart, more of the window's solve wasted; 1024 was fastest
# of 512-4096 at 20,000 samples, 3 states (about level at 2,000).
WINDOW = 1024
# The smallest sum of a scaled forward vector before the chain restarts (see the module docstring).
SAFE_SUM = 1e-100


def forward_backward(
    initial: np.ndarray, transition: np.ndarray, log_b: np.ndarray, probabilities: np.ndarray, transitions: np.ndarray
) -> float:
    """As ``forward_backward_numba.forward_backward``: the state probabilities (steps, K) and
    expected transition counts (K, K) of initial (K,), transition (K, K) and log densities
    log_b (steps, K) written into ``probabilities`` and ``transitions``; the log-likelihood.
    ComputationError where a step has probability zero.

    Backward runs on w_t = b_t * beta_t (w_t = (w_{t+1} T^T) * b_t, the forward chain's form),
    from which beta_t = T w_{t+1} and the expected transitions follow."""
    a = transition
    shift = row_max(log_b)
    if not np.all(np.isfinite(shift)):
        raise ComputationError(ZERO_PROBABILITY)
    b = np.exp(log_b - shift[:, None])
    alpha, log_total = propagate(initial * b[0], a, b[1:])
    w = propagate(b[-1], a.T, b[-2::-1])[0][::-1]
    # alpha_t(i) beta_t(i) for t < T-1; its row sums are those of alpha_t(i) T[i, j] w_{t+1}(j).
    joint = alpha[:-1] * (w[1:] @ a.T)
    norms = row_sums(joint)
    np.divide(joint, norms[:, None], out=probabilities[:-1])
    probabilities[-1] = alpha[-1]
    np.multiply(a, (alpha[:-1] / norms[:, None]).T @ w[1:], out=transitions)
    return float(log_total + shift.sum())


def propagate(start: np.ndarray, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, float]:
    """The chain u_0 = start, u_t = (u_{t-1} left) * right[t-1] of non-negative start (K,),
    left (K, K) and right (n, K): the normalised vectors u_t / sum(u_t) (n + 1, K) and
    log sum(u_n). ComputationError when some u_t is zero (the data have probability zero)."""
    n, k = right.shape
    out = np.empty((n + 1, k))
    log_total = _normalise_into(out, 0, start)
    # The largest row sum of step t's matrix: sum(u_t) <= rho_t sum(u_{t-1}).
    rho = np.max(left @ right.T, axis=0)
    if not np.all(rho > 0):
        raise ComputationError(ZERO_PROBABILITY)
    scaled = right / rho[:, None]
    log_rho = np.concatenate([[0.0], np.cumsum(np.log(rho))])  # log rho_1 ... rho_t
    pattern = _band_pattern(left)
    # One band and one right-hand side for every window, reused: fresh arrays per window cost
    # more in page faults than the solve.
    band_rows = np.empty((min(WINDOW, n), pattern.shape[1]))
    rhs_rows = np.empty((min(WINDOW, n) * k, 1))
    done = 0  # steps taken so far
    while done < n:
        end = min(done + WINDOW, n)
        rhs = rhs_rows[: (end - done) * k]
        rhs[:] = 0.0
        rhs[:k, 0] = (out[done] @ left) * scaled[done]
        band = _band(pattern, scaled[done:end], band_rows[: end - done])
        solution, info = lapack.dtbtrs(band, rhs, uplo="L", diag="U", overwrite_b=1)
        if info != 0:
            raise ComputationError(f"LAPACK tbtrs failed (info {info}) in the forward-backward pass")
        vectors = solution.reshape(end - done, k)
        sums = row_sums(vectors)
        kept = end - done if sums.min() > SAFE_SUM else int(np.argmin(sums > SAFE_SUM))
        if kept == 0:  # one step past a sharp drop, normalised as it is
            log_total += _normalise_into(out, done + 1, (out[done] @ left) * right[done])
            done += 1
            continue
        np.divide(vectors[:kept], sums[:kept, None], out=out[done + 1 : done + 1 + kept])
        log_total += float(np.log(sums[kept - 1]) + log_rho[done + kept] - log_rho[done])
        done += kept
    return out, log_total


def _band_pattern(left: np.ndarray) -> np.ndarray:
    """(K, K 2K): pattern[j, (i, K + j - i)] = -left[i, j], zero elsewhere (see ``_band``)."""
    k = left.shape[0]
    i, j = np.indices((k, k))
    pattern = np.zeros((k, k, 2 * k))
    pattern[j, i, k - i + j] = -left[i, j]
    return pattern.reshape(k, -1)


def _band(pattern: np.ndarray, right: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The lower-triangular band (LAPACK storage, band[row - column, column]) of the system
    u_t - (u_{t-1} left) * right[t-1] = 0 in the unknowns u_1 .. u_m of m = len(right) steps,
    ordered (t, state): row (t, j) meets column (t - 1, i) at offset K + j - i with
    -left[i, j] right[t-1][j]; the unit diagonal (offset 0) is implied by diag="U". Written
    into ``rows`` (m, K 2K), its transpose's layout (column, offset), so that the
    Fortran-ordered (2K, m K) array LAPACK reads is a view, by one product
    right @ ``_band_pattern(left)``, which writes that layout directly."""
    m, k = right.shape
    rows[-1] = 0.0  # nothing couples the window's last step to the next window
    np.matmul(right[1:], pattern, out=rows[:-1])
    return rows.reshape(m * k, 2 * k).T


def _normalise_into(out: np.ndarray, row: int, vector: np.ndarray) -> float:
    """out[row] = vector / sum(vector); log sum(vector). ComputationError if the sum is zero."""
    total = vector.sum()
    if not total > 0:
        raise ComputationError(ZERO_PROBABILITY)
    out[row] = vector / total
    return float(np.log(total))
