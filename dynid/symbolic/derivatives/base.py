"""The dispatch of the differentiation methods (``differentiate``, ``smooth``), the automatic
choice among them (``choose_method``), and the correlation time of the error that noise puts
on a derivative (``derivative_correlation_time``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from dynid.symbolic.autocorrelation import autocorrelation_time
from dynid.symbolic.derivatives.finite_difference import fd_noise_error, finite_difference
from dynid.symbolic.derivatives.grid import as_2d, check_times
from dynid.symbolic.derivatives.savgol import choose_savgol, savgol
from dynid.symbolic.derivatives.spectral import spectral
from dynid.symbolic.derivatives.spline import SmoothingSpline, spline
from dynid.symbolic.derivatives.tv import tv
from dynid.symbolic.noise import estimate_noise

# Each method: (x (n, d), t (n,), **options) -> (smoothed states (n, d), derivative (n, d)).
_METHOD_FUNCTIONS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "finite_difference": finite_difference,
    "savgol": savgol,
    "spectral": spectral,
    "tv": tv,
    "spline": spline,
}
METHODS = tuple(_METHOD_FUNCTIONS)

# --- choose_method thresholds (reasons in choose_method's docstring) ---
# Relative error that noise alone puts on a 5-point finite difference below which it is used.
FD_NOISE_TOL = 0.005
# Noise-to-signal ratio (noise std / data std) above which the smoothing spline is used.
SPLINE_NOISE = 0.1


def differentiate(x: np.ndarray, t: np.ndarray, method: str = "auto", **options) -> np.ndarray:
    """Time derivative of each column of ``x``.

    x: (n,) or (n, d) states; t: (n,) strictly increasing times (uniform or not).
    method: one of ``METHODS`` or ``"auto"`` (``choose_method``); options: that method's
    parameters (below), unspecified ones chosen from the data.
    Returns (n, d) derivative in units of x per time unit. ValueError on bad shapes,
    non-increasing times, an unknown method or option, or a method the sampling does not allow.

    Options: finite_difference ``order`` (2 or 4); savgol ``window`` (samples, odd),
    ``polyorder``; spectral ``cutoff`` (cycles per time unit), ``extension``; tv ``alpha``,
    ``max_iter``, ``tol``; spline ``lam`` (time^3). window, polyorder, cutoff, alpha and lam
    take one value or one per column.
    """
    return _run(x, t, method, options)[1]


def smooth(x: np.ndarray, t: np.ndarray, method: str = "auto", **options) -> np.ndarray:
    """The denoised states (n, d) that ``differentiate`` with the same arguments implies.

    finite_difference returns the data unchanged (it assumes no noise).
    """
    return _run(x, t, method, options)[0]


def choose_method(x: np.ndarray, t: np.ndarray) -> tuple[str, dict]:
    """The method and its fully resolved options for these data, from the estimated noise.

    x: (n,) or (n, d); t: (n,). Returns (method, options); ``differentiate(x, t, method,
    **options)`` reproduces ``differentiate(x, t)``. With s = ``estimate_noise`` per column:

    1. ``finite_difference`` (order 4) if noise alone puts less than ``FD_NOISE_TOL`` (0.5%)
       relative error on the 5-point derivative in every column (noise gain s |w|_2 against
       the rms derivative). It is unbiased to O(h^4) and needs no tuning; smoothing could gain
       at most that 0.5%, far below what matters for picking terms. Covers noise-free and
       simulated data and data written with many significant digits.
    2. ``spline`` (GCV) if some column's noise-to-signal ratio s / std(x) exceeds
       ``SPLINE_NOISE`` (10%). Up to about that noise the chosen Savitzky-Golay filter is as
       good as the spline or better, above it worse: its risk estimate gets noisy and its
       windows so wide that a fixed-degree local polynomial no longer fits.
    3. ``savgol`` otherwise, with per-column windows and orders that minimise an unbiased
       estimate of the derivative's mean squared error (``choose_savgol``).

    ``tv`` and ``spectral`` are never picked: TV favours piecewise-constant derivatives
    (kinks, steps) that smooth ODE trajectories lack, and the FFT derivative needs uniform
    sampling and suits near-periodic records. (Measured errors: benchmarks/README.md,
    "Symbolic design experiments".)
    """
    x = as_2d(x)
    t = check_times(t, x.shape[0])
    noise = estimate_noise(x, t)
    if fd_noise_error(x, t, noise).max() < FD_NOISE_TOL:
        return "finite_difference", {"order": 4}
    if np.any(noise > SPLINE_NOISE * np.std(x, axis=0)) and x.shape[0] >= 4:
        lam = SmoothingSpline(np.diff(t)).gcv_penalty(x)
        return "spline", {"lam": tuple(float(value) for value in lam)}
    windows, orders = choose_savgol(x, t, noise)
    return "savgol", {"window": windows, "polyorder": orders}


def _run(x: np.ndarray, t: np.ndarray, method: str, options: dict) -> tuple[np.ndarray, np.ndarray]:
    """(smoothed states, derivative), each (n, d)."""
    x = as_2d(x)
    t = check_times(t, x.shape[0])
    if method == "auto":
        method, chosen = choose_method(x, t)
        options = {**chosen, **options}
    if method not in _METHOD_FUNCTIONS:
        raise ValueError(f"unknown differentiation method {method!r}; use one of {METHODS} or auto")
    function = _METHOD_FUNCTIONS[method]
    known = list(inspect.signature(function).parameters)[2:]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"{method} takes options {known}, not {unknown}")
    return function(x, t, **options)


def finite_difference_suffices(x: np.ndarray, t: np.ndarray) -> bool:
    """Rule 1 of ``choose_method`` alone: whether noise puts under ``FD_NOISE_TOL`` relative
    error on the 5-point finite difference in every column (no window search needed)."""
    x = as_2d(x)
    t = check_times(t, x.shape[0])
    return bool(fd_noise_error(x, t, estimate_noise(x, t)).max() < FD_NOISE_TOL)


def derivative_correlation_time(
    x: np.ndarray, t: np.ndarray, method: str, options: dict, *, seed: int = 0
) -> float:
    """Autocorrelation time (samples) of the error that white measurement noise puts on
    ``differentiate(x, t, method, **options)``.

    The derivative methods that choose their smoothing from the data (or are nonlinear, like
    TV) have no fixed operator, so the noise's effect is measured: the derivative of x plus
    white noise at x's estimated level (at least 1e-6 of its spread) minus the derivative of x,
    with a fixed seed so the answer is repeatable. x: (n, d); t: (n,). Median over columns.
    """
    x = as_2d(x)
    if x.shape[0] < 7:
        return 1.0
    level = np.maximum(estimate_noise(x, t), 1e-6 * np.std(x, axis=0))
    noise = np.random.default_rng(seed).standard_normal(x.shape) * level
    response = differentiate(x + noise, t, method, **options) - differentiate(x, t, method, **options)
    return float(np.median([autocorrelation_time(column) for column in response.T]))
