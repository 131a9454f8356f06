"""How many singular values to keep: numerical rank and the Gavish-Donoho optimal hard
threshold."""

from __future__ import annotations

import numpy as np


def _marchenko_pastur_median(beta: float) -> float:
    """Median of the Marchenko-Pastur law with aspect ratio beta in (0, 1] and unit variance."""
    from scipy.integrate import quad
    from scipy.optimize import brentq

    lo, hi = (1 - np.sqrt(beta)) ** 2, (1 + np.sqrt(beta)) ** 2

    def density(t: float) -> float:
        return np.sqrt(max((hi - t) * (t - lo), 0.0)) / (2 * np.pi * beta * t)

    def cdf_minus_half(mu: float) -> float:
        return quad(density, lo, mu, limit=200)[0] - 0.5

    return float(brentq(cdf_minus_half, lo, hi, xtol=1e-12))


def numerical_rank(singular_values: np.ndarray, shape: tuple[int, int]) -> int:
    """How many singular values (descending) are above round-off, as numpy's matrix_rank."""
    s = np.asarray(singular_values, dtype=float)
    if s.size == 0 or s[0] <= 0:
        return 0
    return int(np.sum(s > s[0] * max(shape) * np.finfo(float).eps))


# Below this many singular values their median is too coarse a noise estimate to cut on.
MIN_VALUES_FOR_NOISE_ESTIMATE = 8


def optimal_hard_threshold_rank(singular_values: np.ndarray, shape: tuple[int, int]) -> int:
    """Rank kept by Gavish & Donoho's (2014) optimal hard threshold for unknown noise.

    singular_values: all min(shape) singular values of a matrix of ``shape``, descending.
    The threshold is omega(beta) * median(s), omega(beta) = lambda*(beta) / sqrt(mu_beta)
    (GD eq. 4 and Sec. III.D; mu_beta the Marchenko-Pastur median). Singular values below
    numerical precision never count.

    GD estimate the noise from the median singular value, which is only valid when most
    singular values are noise (many more variables than modes). With few variables - the usual
    case for dynid - every singular value can be signal and the median says nothing about
    noise. So the threshold is used only when the values it discards sit in the
    Marchenko-Pastur noise bulk that median implies (none more than 10% below its lower edge)
    and when more than half of at least ``MIN_VALUES_FOR_NOISE_ESTIMATE`` values are discarded
    (so the median is a noise value); otherwise every numerically nonzero singular value is kept. On noise-free data this keeps
    all nonzero singular values either way.
    """
    s = np.asarray(singular_values, dtype=float)
    numerical = numerical_rank(s, shape)
    if numerical == 0:
        return 0
    if s.size < MIN_VALUES_FOR_NOISE_ESTIMATE:
        return numerical
    beta = min(shape) / max(shape)
    mu = _marchenko_pastur_median(beta)
    lam = np.sqrt(2 * (beta + 1) + 8 * beta / ((beta + 1) + np.sqrt(beta**2 + 14 * beta + 1)))
    median = float(np.median(s))
    threshold = lam / np.sqrt(mu) * median
    rank = min(int(np.sum(s > threshold)), numerical)
    if rank == 0 or rank > (s.size - 1) // 2:
        # The median singular value would itself be kept as signal, so it cannot stand for the
        # noise level the threshold is built from (e.g. 2 variables, 2 modes).
        return numerical
    discarded = s[rank:numerical]
    bulk_lower_edge = median / np.sqrt(mu) * (1 - np.sqrt(beta))
    if discarded.size and discarded.min() < 0.9 * bulk_lower_edge:
        return numerical
    return max(rank, 1)
