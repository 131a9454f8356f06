"""Finite differences: Lagrange interpolation on the actual times, 5 points (``order=4``, exact
for polynomials of degree <= 4: the classical (1, -8, 0, 8, -1) / 12h stencil on a uniform grid)
or 3 points (``order=2``); off-centre stencils at the two ends. Also the noise gain that decides
whether finite differences suffice, and the Richardson estimate of their truncation error."""

from __future__ import annotations

import numpy as np

from dynid.symbolic.derivatives.stencils import local_polynomial


def finite_difference(
    x: np.ndarray, t: np.ndarray, order: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """Lagrange-interpolation derivative on the actual times; order 4 (5 points) or 2 (3 points).

    Exact for polynomials of degree <= order; the error is O(h^order) for smooth data. Records
    shorter than order + 1 samples fall back to the largest stencil that fits.
    """
    if order not in (2, 4):
        raise ValueError(f"finite_difference order must be 2 or 4, got {order}")
    points = min(order + 1, x.shape[0])
    _, slope = local_polynomial(t, points, points - 1)
    return x.copy(), slope.apply(x)


def fd_noise_error(x: np.ndarray, t: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Relative error (d,) that white noise of std ``noise`` puts on the 5-point derivative."""
    _, slope = local_polynomial(t, 5, 4)
    derivative = slope.apply(x)
    noise_rms = noise * np.sqrt(slope.frobenius2() / x.shape[0])
    signal_rms = np.sqrt(np.maximum(np.mean(derivative**2, axis=0) - noise_rms**2, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(signal_rms > 0, noise_rms / signal_rms, np.where(noise_rms > 0, np.inf, 0))


def truncation_error(x: np.ndarray, t: np.ndarray, derivative: np.ndarray) -> np.ndarray:
    """(n, d) estimate of a 4th-order finite difference's truncation error: its difference from
    the 6th-order (7-point) derivative on the same times (Richardson's idea)."""
    if x.shape[0] < 7:
        return np.zeros_like(derivative)
    _, slope = local_polynomial(t, 7, 6)
    return derivative - slope.apply(x)
