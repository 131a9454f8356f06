"""Spectral differentiation: FFT derivative with a low-pass cut where the signal spectrum meets
the noise floor; uniform sampling only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dynid.data.dataset import uniform_step
from dynid.symbolic.derivatives.grid import per_column
from dynid.symbolic.noise import estimate_noise


def spectral(
    x: np.ndarray,
    t: np.ndarray,
    cutoff: float | Sequence[float] | None = None,
    extension: str = "odd",
) -> tuple[np.ndarray, np.ndarray]:
    """FFT derivative with a low-pass cut, for uniform sampling only.

    cutoff: frequency (cycles per time unit) above which Fourier modes are dropped, one value or
    one per column; None puts it where the smoothed periodogram falls to 3x the noise floor
    (beyond it noise dominates the signal and differentiation would amplify it by 2 pi f).
    extension: ``"odd"`` subtracts the line through the two end samples and extends the record
    anti-symmetrically, so its periodic continuation is continuous with a continuous first
    derivative (no Gibbs ringing at the ends of a non-periodic record); ``"periodic"`` uses the
    record as is and suits records covering whole periods.
    """
    step = uniform_step(t)
    if step is None:
        raise ValueError(
            "spectral differentiation needs uniform sampling; "
            "use savgol or spline for irregular times"
        )
    if extension not in ("odd", "periodic"):
        raise ValueError(f"extension must be 'odd' or 'periodic', got {extension!r}")
    n, d = x.shape
    if extension == "odd":
        slope_line = (x[-1] - x[0]) / (t[-1] - t[0])
        line = x[0] + np.outer(t - t[0], slope_line)
        rest = x - line
        extended = np.concatenate([rest, -rest[-2:0:-1]])
    else:
        slope_line, line = np.zeros(d), np.zeros_like(x)
        extended = x
    size = extended.shape[0]
    spectrum = np.fft.rfft(extended, axis=0)
    frequency = np.fft.rfftfreq(size, step)
    cutoffs = per_column(cutoff, d, "cutoff")
    noise = estimate_noise(x, t) if any(c is None for c in cutoffs) else np.zeros(d)
    keep = np.empty(spectrum.shape)
    for j in range(d):
        limit = cutoffs[j]
        if limit is None:
            dof = 1 if extension == "odd" else 2
            limit = _noise_floor_cutoff(spectrum[:, j], frequency, noise[j], size, dof)
        keep[:, j] = frequency <= limit
    filtered = spectrum * keep
    values = np.fft.irfft(filtered, size, axis=0)[:n] + line
    slopes = np.fft.irfft(2j * np.pi * frequency[:, None] * filtered, size, axis=0)[:n] + slope_line
    return values, slopes


def _noise_floor_cutoff(
    spectrum: np.ndarray, frequency: np.ndarray, noise: float, size: int, dof: int
) -> float:
    """Highest frequency whose locally averaged power exceeds 3x the white-noise level.

    White noise of std s has periodogram |X_k|^2 / N with mean s^2 and a chi-square spread of
    ``dof`` degrees of freedom per bin (2 for complex bins, 1 for the real sine coefficients of
    an odd extension). Powers are averaged over the fewest bins that make a chance excursion
    above 3 s^2 anywhere in the spectrum unlikely (< 1e-3 in all), so the last bin above marks
    where the signal still stands clearly above the noise (signal power >= 2 s^2).
    """
    if noise <= 0:
        return float(frequency[-1])
    bins = spectrum.shape[0]
    width = 3
    import scipy.stats

    while width < bins and scipy.stats.chi2.sf(3 * width * dof, width * dof) > 1e-3 / bins:
        width += 2
    power = np.abs(spectrum) ** 2 / size
    average = np.convolve(power, np.ones(width) / width, mode="same")
    above = np.flatnonzero(average > 3 * noise**2)
    return float(frequency[above[-1]]) if above.size else float(frequency[1])
