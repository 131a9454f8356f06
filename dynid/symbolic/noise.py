"""Measurement-noise level of a time series, estimated from the data alone.

The estimator is the classic "finest-scale detail" one (Donoho's wavelet MAD rule, or the
difference-based variance estimators of Rice 1984 / Hall, Kay & Titterington 1990): a
linear combination of ``k + 1`` consecutive samples that annihilates every polynomial of
degree ``< k`` removes a smooth signal almost entirely, while it maps white noise of std ``s``
to a sequence of std ``s`` once its weights have unit 2-norm. The median absolute value of
that sequence, divided by 0.6745 (the MAD of a standard normal), estimates ``s``; the median
ignores the few places where the signal is rough (a spike, a fast transient); one step of
clipped variance (details beyond 3 MAD-stds dropped) then restores the efficiency the MAD lacks.

For irregular times the weights are the divided-difference weights on the actual times,
``w_j = 1 / prod_{l != j} (t_j - t_l)``, which annihilate the same polynomials on any grid; on a
uniform grid they reduce to the binomial weights of the ``k``-th finite difference.

Bias. The detail of a smooth signal is about ``h**k * |x^(k)| / sqrt(binom(2k, k))``, so for
dense sampling (many samples per radian of the signal's fastest frequency) it is far below any
realistic noise level and the estimate is unbiased. For coarse sampling (fewer than ~3 samples
per radian: ``omega * h`` near 1) signal energy leaks into the detail and the estimate is
biased upwards; it is then an upper bound on the noise. Taking the smallest estimate over the
orders ``k = 2..8`` adapts the order to the signal (high orders for dense sampling, low orders
when the signal is close to the Nyquist frequency), at the price of a small downward bias of a
few percent on pure noise (the estimates of different orders are strongly correlated).
Measured bias and precision: benchmarks/README.md, "Symbolic design experiments".
"""

from __future__ import annotations

import numpy as np

# MAD of a standard normal: median(|N(0, 1)|).
_MAD_NORMAL = 0.6744897501960817
# Details beyond this many (MAD-estimated) stds are treated as signal, not noise.
_CLIP = 3.0
# E[Z^2 | |Z| < 3] for a standard normal (P(|Z| < 3) = 0.9973): undoes the clipping's truncation.
_CLIPPED_VARIANCE = 1.0 - 2 * _CLIP * np.exp(-(_CLIP**2) / 2) / np.sqrt(2 * np.pi) / 0.99730020
# Difference orders tried; the estimate is the smallest over them (see the module docstring).
_ORDERS = (2, 3, 4, 5, 6, 7, 8)


def _as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


def annihilating_weights(t: np.ndarray, order: int) -> np.ndarray:
    """Unit-norm weights (n - order, order + 1) of the ``order``-th divided difference.

    Row ``i`` applies to samples ``i .. i + order`` and is orthogonal to every polynomial of
    degree ``< order`` evaluated at those times, so it removes smooth signal and keeps white
    noise at unit gain. t: (n,) strictly increasing times.
    """
    m = order + 1
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(t, dtype=float), m)
    # Local coordinates in [0, 1] keep the products of differences away from under/overflow.
    span = windows[:, -1:] - windows[:, :1]
    local = (windows - windows[:, :1]) / span
    gaps = local[:, :, None] - local[:, None, :]
    gaps[:, np.arange(m), np.arange(m)] = 1.0
    weights = 1.0 / np.prod(gaps, axis=2)
    return weights / np.linalg.norm(weights, axis=1, keepdims=True)


def estimate_noise(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Standard deviation of additive white measurement noise in each column of ``x``.

    x: (n,) or (n, d) samples (any units); t: (n,) strictly increasing times, uniform or not.
    Returns (d,) noise std in the units of ``x``. Needs n >= 3; with fewer samples per order the
    high orders are skipped. See the module docstring for the bias under coarse sampling.
    """
    x = _as_2d(x)
    t = np.asarray(t, dtype=float)
    n, d = x.shape
    if n < 3:
        raise ValueError(f"estimate_noise needs at least 3 samples, got {n}")
    best = np.full(d, np.inf)
    for order in _ORDERS:
        # Keep at least ~2 * (order + 1) detail values so the median means something.
        if n < 3 * (order + 1) and order > 2:
            break
        weights = annihilating_weights(t, order)
        windows = np.lib.stride_tricks.sliding_window_view(x, order + 1, axis=0)  # (n-k, d, k+1)
        detail = np.einsum("idk,ik->id", windows, weights)
        best = np.minimum(best, _robust_std(detail))
    return best


def _robust_std(detail: np.ndarray) -> np.ndarray:
    """Std (d,) of Gaussian noise from (m, d) details that a few signal outliers may spoil.

    The MAD alone is robust but wastes data (37% efficiency: +-10% at 150 samples); one
    clipped-variance step on top of it keeps the robustness and recovers ~95% efficiency.
    """
    mad = np.median(np.abs(detail), axis=0) / _MAD_NORMAL
    inside = np.abs(detail) <= _CLIP * mad
    clipped = np.sum(np.where(inside, detail**2, 0.0), axis=0) / np.maximum(inside.sum(axis=0), 1)
    return np.sqrt(clipped / _CLIPPED_VARIANCE)


def noise_to_signal(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Estimated noise std over the std of the data, per column: (d,), dimensionless.

    A constant column (zero spread) reports 0 when it is noise free and inf otherwise.
    """
    x = _as_2d(x)
    noise = estimate_noise(x, t)
    spread = np.std(x, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = noise / spread
    return np.where(spread > 0, ratio, np.where(noise > 0, np.inf, 0.0))
