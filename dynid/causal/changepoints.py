"""Change points in the mean of a noisy series: binary segmentation with a BIC-type penalty.

Model: ``y[t] = mu_s + noise`` on segments ``s``. A segment ``[a, b)`` is split at the ``k``
maximising the drop in squared error, ``gain(k) = n1 * n2 / n * (mean1 - mean2)^2``, when that
gain exceeds ``penalty * tau * sigma^2 * log(n)``; the halves are then searched in turn.

``sigma`` is a robust (MAD) estimate of the noise standard deviation from differences at lag
``h = ceil(tau)``, so a few mean shifts barely move it; it is the larger of the whole series'
and the searched segment's own estimate, so a segment noisier than the rest (strength noise
often grows with the strength) does not split on its own noise; ``tau`` (``correlation``) is the
integrated autocorrelation time of the noise, supplied by whoever smoothed the series. Under no
change ``gain / (tau * sigma^2)`` is about chi-squared with one degree of freedom at each
``k``, so ``log(n)`` times a factor above 2 (BIC's) keeps false alarms rare over all ``k``.
Pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# MAD -> standard deviation for Gaussian noise.
_MAD_SCALE = 1.4826
# Default penalty factor: 3 log(n) per change point (a "modified BIC"), stricter than BIC's
# 2 log(n) because strength series are skewed and only approximately Gaussian.
DEFAULT_PENALTY = 3.0


@dataclass(frozen=True)
class ChangePoint:
    """A change in mean at sample ``index`` (the first sample of the new segment).

    ``before`` / ``after``: the means of the segments ending / starting there (series units).
    """

    index: int
    before: float
    after: float


def noise_std(y: np.ndarray, lag: int = 1) -> float:
    """Robust noise standard deviation of ``y`` (n,): MAD of lag-``lag`` differences / sqrt(2).

    Differences cancel a piecewise-constant mean except at the few lags that straddle a
    change, which the median ignores. 0.0 when fewer than two differences exist.
    """
    diffs = y[lag:] - y[:-lag]
    if diffs.size < 2:
        return 0.0
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    if mad == 0.0:
        # Mostly tied values (e.g. a series clipped at zero): fall back on the plain spread.
        return float(np.std(diffs) / math.sqrt(2.0))
    return _MAD_SCALE * mad / math.sqrt(2.0)


def change_points(
    y: np.ndarray,
    *,
    penalty: float = DEFAULT_PENALTY,
    correlation: float = 1.0,
    min_size: int | None = None,
    n_samples: int | None = None,
) -> list[ChangePoint]:
    """Changes in the mean of ``y`` (n,), in increasing index order.

    penalty: factor of ``log(n)`` in the cost of one change point, in units of the noise's
    long-run variance ``correlation * sigma^2`` (larger = fewer change points).
    correlation: integrated autocorrelation time of the noise in samples (1 for white noise;
    about ``2 * sqrt(pi) * s`` after Gaussian smoothing with sigma ``s``; ``W / S`` for
    estimates from windows of ``W`` samples taken every ``S``).
    min_size: shortest segment in samples (default ``max(2, ceil(correlation))``).
    n_samples: the length of the recording ``y`` summarises, when ``y`` is a grid of estimates
    from it (default ``n``); the ``log`` is taken of it, so the penalty does not depend on how
    densely the grid samples the recording.
    Non-finite values are not allowed; a constant series has no change points.
    """
    y = np.asarray(y, dtype=float)
    if y.ndim != 1:
        raise ValueError(f"expected a 1-D series, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("the series has missing or infinite values")
    if penalty <= 0 or correlation <= 0:
        raise ValueError("penalty and correlation must be positive")
    n = y.size
    lag = max(1, math.ceil(correlation))
    size = max(2, lag) if min_size is None else max(1, int(min_size))
    if n < 2 * size:
        return []
    overall = noise_std(y, lag)
    if overall == 0.0:
        return []
    cost = penalty * correlation * math.log(max(n, n_samples or n))  # per unit of noise variance
    cumsum = np.concatenate([[0.0], np.cumsum(y)])
    splits: list[int] = []
    pending = [(0, n)]
    while pending:
        a, b = pending.pop()
        k, gain = _best_split(cumsum, a, b, size)
        if k is None:
            continue
        # A segment noisier than the series as a whole is judged by its own noise: strength
        # noise often grows with the strength, and must not pass for changes there.
        sigma = max(overall, noise_std(y[a:b], lag))
        if gain > cost * sigma**2:
            splits.append(k)
            pending += [(a, k), (k, b)]
    splits.sort()
    bounds = [0, *splits, n]
    means = [(cumsum[e] - cumsum[s]) / (e - s) for s, e in zip(bounds[:-1], bounds[1:])]
    return [
        ChangePoint(index=k, before=float(means[i]), after=float(means[i + 1]))
        for i, k in enumerate(splits)
    ]


def _best_split(cumsum: np.ndarray, a: int, b: int, size: int) -> tuple[int | None, float]:
    """The split of ``[a, b)`` with the largest drop in squared error, and that drop."""
    n = b - a
    if n < 2 * size:
        return None, 0.0
    k = np.arange(a + size, b - size + 1)
    n1 = k - a
    n2 = b - k
    left = (cumsum[k] - cumsum[a]) / n1
    right = (cumsum[b] - cumsum[k]) / n2
    gain = n1 * n2 / n * (left - right) ** 2
    best = int(np.argmax(gain))
    return int(k[best]), float(gain[best])
