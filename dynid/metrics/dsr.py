"""Dynamical-systems-reconstruction measures: does a long free run of a model reproduce the
geometry (``state_space_divergence``, D_stsp) and the time scales (``power_spectrum_distance``,
D_H) of the data's attractor?

Both compare a reference trajectory ``true`` (T, d) with a generated one ``generated`` (T', d)
of the same variables, in the same units; neither needs the two to start at the same point, so
they judge a chaotic model where a forecast error cannot. The definitions follow the reference
code of Hess et al. (ICML 2023, GTF-shPLRNN) and Brenner et al. (ICML 2022):

- D_stsp (d <= 5): the Kullback-Leibler divergence KL(p_true || p_gen) of 30-bin-per-axis
  histograms over the box [min - 0.1 sd, max + 0.1 sd] of ``true`` (samples outside the box are
  dropped), each Laplace-smoothed as (count + 1e-5) / (total + 1e-5 K) over its K cells.
- D_stsp (d > 5): the same KL between Gaussian mixtures with one isotropic component (variance
  1 in standardised units) at each of up to 10,000 evenly spaced samples, by Monte Carlo with
  samples drawn from the reference mixture.
- D_H: the mean over variables of the Hellinger distance sqrt(1 - sum sqrt(p q)) between
  power spectra: each variable standardised, |rfft|^2, smoothed by a Gaussian of sigma 20
  frequency bins and normalised to sum 1. Runs of different lengths are compared on the grid of
  the shorter one, the longer one's spectrum averaged over its segments of that length.

Both are 0 for identical data and grow as the runs differ; a finite-sample floor remains for
two independent runs of the same attractor, and it scatters: over the 30 ordered pairs of six
50,000-step Lorenz-63 runs at dt 0.01, D_stsp 0.05-0.65 (median 0.12) and D_H 0.036-0.087
(median 0.055). One pair of runs therefore says little; compare against several.
"""

from __future__ import annotations

import numpy as np

N_BINS = 30
BIN_MARGIN = 0.1  # of each variable's standard deviation, on both sides of its range
LAPLACE_ALPHA = 1e-5
MAX_BINNED_DIM = 5
# Fewer components bias the estimate up (1000 components put 0.04 between two samples of one
# 6-D Gaussian and read 0.44 for a KL of 0.375; 10,000 give 0.007 and 0.38).
GMM_COMPONENTS = 10_000
GMM_SAMPLES = 2000
GMM_CHUNK = 250  # draws per block of the (draws, components) distance matrix
GMM_VARIANCE = 1.0
SPECTRUM_SIGMA = 20.0
# A free run has escaped when it leaves the data's range widened on each side by this many times
# the range: far beyond where any continuation of the data goes (the binned D_stsp's box adds
# only 0.1 sd, and drops the samples outside it, so D_stsp alone cannot see an escape).
ESCAPE_MARGIN = 1.0

__all__ = [
    "ESCAPE_MARGIN",
    "N_BINS",
    "SPECTRUM_SIGMA",
    "escape_box",
    "escape_step",
    "escapes",
    "power_spectrum_distance",
    "spectrum_min_length",
    "smoothed_spectra",
    "state_space_divergence",
]


def _pair(true: np.ndarray, generated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both as float (T, d) arrays with the same d; ValueError otherwise (a caller bug)."""
    x = np.asarray(true, dtype=float)
    y = np.asarray(generated, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    y = y[:, None] if y.ndim == 1 else y
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"expected (T, d) and (T', d) arrays, got {x.shape} and {y.shape}")
    if len(x) < 2 or len(y) < 2:
        raise ValueError("both trajectories need at least 2 samples")
    return x, y


def escapes(true: np.ndarray, generated: np.ndarray, margin: float = ESCAPE_MARGIN) -> bool:
    """Whether ``generated`` (T', d) has a non-finite value or leaves the range of ``true``
    (T, d) widened on each side by ``margin`` times that range: a diverged run."""
    x, y = _pair(true, generated)
    return escape_step(x.min(axis=0), x.max(axis=0), y, margin) is not None


def escape_step(
    low: np.ndarray, high: np.ndarray, generated: np.ndarray, margin: float = ESCAPE_MARGIN
) -> int | None:
    """The first row (1-based step) of ``generated`` (T', d) that has a non-finite value or
    leaves ``escape_box(low, high, margin)``; None when every row stays inside."""
    lower, upper = escape_box(low, high, margin)
    y = np.asarray(generated, dtype=float)
    inside = np.all(np.isfinite(y) & (y >= lower) & (y <= upper), axis=1)
    return None if inside.all() else int(np.argmin(inside)) + 1


def leaves_box(generated: np.ndarray, box: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether any row of ``generated`` (..., T', d) is non-finite or outside ``box``, the
    bounds (d,), (d,) of ``escape_box``."""
    lower, upper = box
    return not bool(np.all(np.isfinite(generated) & (generated >= lower) & (generated <= upper)))


def escape_box(
    low: np.ndarray, high: np.ndarray, margin: float = ESCAPE_MARGIN
) -> tuple[np.ndarray, np.ndarray]:
    """The bounds (d,), (d,) a run has escaped beyond: the range [low, high] (d,) widened on
    each side by ``margin`` times its width. A variable the range gives no scale for (a NaN
    bound: never observed; width 0: constant, where round-off alone would leave it) is bounded
    by +-inf."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    spread = margin * (high - low)
    scaled = spread > 0  # False for NaN too
    return np.where(scaled, low - spread, -np.inf), np.where(scaled, high + spread, np.inf)


def state_space_divergence(
    true: np.ndarray, generated: np.ndarray, *, bins: int = N_BINS, seed: int = 0
) -> float:
    """D_stsp = KL(p_true || p_generated) in nats; true (T, d), generated (T', d).

    Binned for d <= 5, a Gaussian-mixture Monte-Carlo estimate above (``seed`` draws its
    samples). A generated run with a non-finite value (a diverged model) scores infinity.
    """
    x, y = _pair(true, generated)
    if not np.all(np.isfinite(y)):
        return float("inf")
    if x.shape[1] <= MAX_BINNED_DIM:
        return _binned_kl(x, y, bins)
    return _mixture_kl(x, y, np.random.default_rng(seed))


def _binned_kl(x: np.ndarray, y: np.ndarray, bins: int) -> float:
    spread = x.std(axis=0)
    low = x.min(axis=0) - BIN_MARGIN * spread
    high = x.max(axis=0) + BIN_MARGIN * spread
    width = np.where(high > low, high - low, 1.0)
    p = _smoothed_histogram(x, low, width, bins)
    q = _smoothed_histogram(y, low, width, bins)
    return float(np.sum(p * (np.log(p) - np.log(q))))


def _smoothed_histogram(
    x: np.ndarray, low: np.ndarray, width: np.ndarray, bins: int
) -> np.ndarray:
    """Laplace-smoothed cell probabilities (bins ** d,) of the samples inside the box."""
    cells = np.floor((x - low) / width * bins).astype(np.int64)
    inside = np.all((cells >= 0) & (cells < bins), axis=1)
    flat = np.ravel_multi_index(tuple(cells[inside].T), (bins,) * x.shape[1])
    counts = np.bincount(flat, minlength=bins ** x.shape[1]).astype(float)
    return (counts + LAPLACE_ALPHA) / (counts.sum() + LAPLACE_ALPHA * counts.size)


def _mixture_kl(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> float:
    """KL between isotropic Gaussian mixtures centred on samples of x and y, both standardised
    by x's mean and sd, estimated as the mean of log p - log q over draws from p."""
    mean, scale = x.mean(axis=0), np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    centres_p = _spread(((x - mean) / scale), GMM_COMPONENTS)
    centres_q = _spread(((y - mean) / scale), GMM_COMPONENTS)
    chosen = centres_p[rng.integers(len(centres_p), size=GMM_SAMPLES)]
    draws = chosen + np.sqrt(GMM_VARIANCE) * rng.standard_normal(chosen.shape)
    blocks = np.array_split(draws, max(1, len(draws) // GMM_CHUNK))
    return float(np.mean(np.concatenate([
        _log_mixture(block, centres_p) - _log_mixture(block, centres_q) for block in blocks
    ])))


def _spread(x: np.ndarray, count: int) -> np.ndarray:
    """Up to ``count`` rows evenly spaced through x."""
    return x[np.unique(np.linspace(0, len(x) - 1, min(count, len(x))).round().astype(int))]


def _log_mixture(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """log density (n,) at points (n, d) of the equal-weight mixture of N(c, GMM_VARIANCE I)."""
    d = points.shape[1]
    squared = (
        np.sum(points**2, axis=1)[:, None] - 2 * points @ centres.T + np.sum(centres**2, axis=1)
    )
    log_kernel = -0.5 * np.maximum(squared, 0.0) / GMM_VARIANCE
    top = log_kernel.max(axis=1, keepdims=True)
    log_sum = top[:, 0] + np.log(np.exp(log_kernel - top).sum(axis=1))
    return log_sum - np.log(len(centres)) - 0.5 * d * np.log(2 * np.pi * GMM_VARIANCE)


def smoothed_spectra(x: np.ndarray, length: int, sigma: float = SPECTRUM_SIGMA) -> np.ndarray:
    """Normalised, Gaussian-smoothed power spectra (d, length // 2 + 1) of x (T, d), T >= length.

    Each variable is standardised over the whole run, cut into its ``T // length``
    non-overlapping segments of ``length`` samples, and the segments' |rfft|^2 averaged
    (Bartlett), then smoothed by a Gaussian of ``sigma`` frequency bins (reflected at the ends)
    and divided by its sum. A constant variable has a flat spectrum.
    """
    x = np.asarray(x, dtype=float)
    spread = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    count = len(z) // length
    segments = z[: count * length].reshape(count, length, z.shape[1])
    power = np.mean(np.abs(np.fft.rfft(segments, axis=1)) ** 2, axis=0).T  # (d, F)
    power = np.where(power.sum(axis=1, keepdims=True) > 0, power, 1.0)
    smooth = _gaussian_smooth(power, sigma)
    return smooth / smooth.sum(axis=1, keepdims=True)


def _gaussian_smooth(rows: np.ndarray, sigma: float) -> np.ndarray:
    """Each row (.., F) convolved with a normalised Gaussian of ``sigma`` bins, truncated at 4
    sigma, the rows reflected at both ends (as scipy.ndimage.gaussian_filter1d does)."""
    if sigma <= 0:
        return rows
    radius = int(4 * sigma + 0.5)
    offsets = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * (offsets / sigma) ** 2)
    kernel /= kernel.sum()
    padded = np.pad(rows, ((0, 0), (radius, radius)), mode="symmetric")
    return np.stack([np.convolve(row, kernel, mode="valid") for row in padded])


def spectrum_min_length(sigma: float = SPECTRUM_SIGMA) -> int:
    """The fewest samples for which D_H means something: a frequency grid (length // 2 + 1
    bins) that holds the whole smoothing kernel (2 r + 1 bins, r = int(4 sigma + 0.5)), i.e.
    4 r (320 for sigma 20). On a shorter record the kernel spans every frequency and flattens
    any spectrum: white noise against Lorenz-63 reads 0.06 on 60 samples, 0.63 on 320 and
    0.81 on 5,000."""
    return 4 * int(4 * sigma + 0.5)


def power_spectrum_distance(
    true: np.ndarray, generated: np.ndarray, *, sigma: float = SPECTRUM_SIGMA
) -> float:
    """D_H: the mean over variables of the Hellinger distance (in [0, 1]) between the smoothed,
    normalised power spectra of true (T, d) and generated (T', d), both on the frequency grid of
    min(T, T') samples. A generated run with a non-finite value scores 1 (the maximum)."""
    x, y = _pair(true, generated)
    if not np.all(np.isfinite(y)):
        return 1.0
    length = min(len(x), len(y))
    p = smoothed_spectra(x, length, sigma)
    q = smoothed_spectra(y, length, sigma)
    overlap = np.sum(np.sqrt(p * q), axis=1)
    return float(np.mean(np.sqrt(np.clip(1.0 - overlap, 0.0, None))))
