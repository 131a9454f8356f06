"""The scaled forward-backward recursion compiled with numba: one pass forward, one backward,
no per-sample Python and no (steps, K) temporaries beyond the emission densities.

``markov.forward_backward`` calls this, or the LAPACK-banded numpy passes
(``forward_backward_lapack``) where this cannot repay its start-up cost or numba is missing
(``forward_backward_choice``); both return the same numbers (to rounding, tested).

Each step's log densities are shifted by their maximum before exponentiating, so no density
underflows however far the sample lies from every state; the log-likelihood is the sum of the
logs of the forward normalisers plus the shifts (Rabiner 1989). Both passes normalise every
vector by its own sum, so an entry keeps full relative precision down to 1e-308 of its vector's
sum, and the posterior of a step is alpha_t(i) beta_t(i) divided by its own sum (the backward
vectors are not the forward pass's scaled betas, so nothing overflows where the two passes
disagree sharply).

The price is paid once per process, in CPU time measured on the 2-core development machine
(load 24, so wall times were 3-4x these): importing numba about 0.5-0.7 s, then the first call
either compiles (about 2.4 s, the first time ever: ``cache=True`` writes the machine code to
``__pycache__`` beside this module) or loads that cached code (about 0.8 s).
``forward_backward_choice`` weighs that price against what the passes save.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def forward_backward(
    initial: np.ndarray, transition: np.ndarray, log_b: np.ndarray, probabilities: np.ndarray, transitions: np.ndarray
) -> float:
    """For initial (K,), transition (K, K) and log densities log_b (steps, K), C-ordered float64:
    the state probabilities (steps, K) and the expected transition counts (K, K) written into
    ``probabilities`` and ``transitions``; returns the log-likelihood, or NaN when some step has
    probability zero (every state impossible, or the chain cannot reach a possible one)."""
    steps, k = log_b.shape
    b = np.empty((steps, k))
    shift_total = 0.0
    for t in range(steps):
        shift = log_b[t, 0]
        for j in range(1, k):
            shift = max(shift, log_b[t, j])
        if not (-np.inf < shift < np.inf):
            return np.nan
        shift_total += shift
        for j in range(k):
            b[t, j] = np.exp(log_b[t, j] - shift)
    # Forward: alpha_t = (alpha_{t-1} T) * b_t, normalised, stored in ``probabilities``.
    alpha = probabilities
    loglik = shift_total
    for t in range(steps):
        total = 0.0
        for j in range(k):
            if t == 0:
                value = initial[j]
            else:
                value = 0.0
                for i in range(k):
                    value += alpha[t - 1, i] * transition[i, j]
            value *= b[t, j]
            alpha[t, j] = value
            total += value
        if not total > 0.0:
            return np.nan
        loglik += np.log(total)
        for j in range(k):
            alpha[t, j] /= total
    # Backward on w_t = b_t * beta_t, normalised: beta_t = T w_{t+1}; alpha_t is overwritten by
    # the posterior alpha_t * beta_t once it has served, and counts[i, j] sums
    # alpha_t(i) w_{t+1}(j) over the steps' normalisers (times T[i, j] at the end).
    counts = np.zeros((k, k))
    w = np.empty(k)
    beta = np.empty(k)
    total = 0.0
    for j in range(k):
        w[j] = b[steps - 1, j]
        total += w[j]
    for j in range(k):
        w[j] /= total
    for t in range(steps - 2, -1, -1):
        norm = 0.0
        for i in range(k):
            value = 0.0
            for j in range(k):
                value += transition[i, j] * w[j]
            beta[i] = value
            norm += alpha[t, i] * value
        if not norm > 0.0:
            return np.nan
        for i in range(k):
            scaled = alpha[t, i] / norm
            for j in range(k):
                counts[i, j] += scaled * w[j]
            # The same product as in ``norm``: a step with one possible state gets exactly 1.
            alpha[t, i] = alpha[t, i] * beta[i] / norm
        if t == 0:
            break
        total = 0.0
        for i in range(k):
            w[i] = beta[i] * b[t, i]
            total += w[i]
        if not total > 0.0:
            return np.nan
        for i in range(k):
            w[i] /= total
    for i in range(k):
        for j in range(k):
            transitions[i, j] = transition[i, j] * counts[i, j]
    return loglik
