"""Local polynomial stencils on the actual times: the finite-difference and Savitzky-Golay
operators of irregular grids, and the reference fits of the Savitzky-Golay risk estimate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.data.dataset import uniform_step


@dataclass(frozen=True)
class Stencil:
    """A banded linear operator on samples: ``out[i] = sum_k weights[i, k] * x[start[i] + k]``.

    start: (n,) first sample index of each row's window; weights: (n, w).
    """

    start: np.ndarray
    weights: np.ndarray

    def apply(self, x: np.ndarray) -> np.ndarray:
        """(n, d) result for (n, d) samples."""
        index = self.start[:, None] + np.arange(self.weights.shape[1])
        return np.einsum("nk,nkd->nd", self.weights, x[index])

    def frobenius2(self) -> float:
        """Squared Frobenius norm: the output variance summed over rows, per unit white noise."""
        return float(np.sum(self.weights**2))

    def inner(self, other: Stencil) -> float:
        """Frobenius inner product with ``other`` (same rows): summed output covariance per unit
        white noise."""
        width = self.weights.shape[1]
        column = (other.start - self.start)[:, None] + np.arange(other.weights.shape[1])
        valid = (column >= 0) & (column < width)
        mine = np.take_along_axis(self.weights, np.clip(column, 0, width - 1), axis=1)
        return float(np.sum(np.where(valid, mine * other.weights, 0.0)))


def local_polynomial(
    t: np.ndarray, window: int, degree: int, rows: np.ndarray | None = None
) -> tuple[Stencil, Stencil]:
    """Stencils (value, derivative) of a least-squares polynomial fit in a sliding window.

    t: (n,) times; window: samples per fit (clipped to n), centred on each sample and shifted
    inwards at the ends; degree < window. ``window == degree + 1`` is Lagrange interpolation,
    i.e. the finite-difference stencil on the actual times. rows: the output samples (all by
    default); the stencils then have one row each. Derivative weights are per time unit.
    """
    n = t.shape[0]
    window = min(window, n)
    if degree >= window:
        raise ValueError(f"polynomial degree {degree} needs more than {window} samples")
    rows = np.arange(n) if rows is None else np.asarray(rows)
    start = np.clip(rows - window // 2, 0, n - window)
    if uniform_step(t) is None:
        value, slope = _fit_rows(t, start, rows, window, degree)
        return Stencil(start, value), Stencil(start, slope)
    # On a uniform grid a row's weights depend only on its place in its window (the interior
    # rows all share one stencil): fit one representative row per place.
    place = rows - start
    places, which = np.unique(place, return_inverse=True)
    representative = np.where(places <= window // 2, places, n - window + places)
    value, slope = _fit_rows(t, representative - places, representative, window, degree)
    return Stencil(start, value[which]), Stencil(start, slope[which])


def _fit_rows(
    t: np.ndarray, start: np.ndarray, rows: np.ndarray, window: int, degree: int
) -> tuple[np.ndarray, np.ndarray]:
    """Value and derivative weights (len(rows), window) of the local fits at ``rows``.

    start: (len(rows),) first sample of each row's window. The fit is in a Legendre basis on the
    window mapped to [-1, 1] (well conditioned); the weights are V G^-1 p(u_i) with G = V^T V,
    one small (degree+1)^2 solve per row however wide the window (V^-T p(u_i) when V is square).
    Rows go in chunks so the (rows, window, degree+1) basis stays small in memory.
    """
    value = np.empty((rows.size, window))
    slope = np.empty((rows.size, window))
    chunk = max(1, 2**17 // (window * (degree + 1)))
    for lo in range(0, rows.size, chunk):
        part = slice(lo, lo + chunk)
        times = t[start[part, None] + np.arange(window)]
        middle = 0.5 * (times[:, :1] + times[:, -1:])
        half_span = 0.5 * (times[:, -1:] - times[:, :1])
        basis, _ = _legendre((times - middle) / half_span, degree, slopes=False)  # (r, w, q)
        here, here_slope = _legendre(((t[rows[part], None] - middle) / half_span)[:, 0], degree)
        targets = np.stack([here, here_slope / half_span], axis=2)  # (r, q, 2)
        if window == degree + 1:
            weights = np.linalg.solve(np.swapaxes(basis, 1, 2), targets)
        else:
            weights = basis @ np.linalg.solve(np.swapaxes(basis, 1, 2) @ basis, targets)
        value[part], slope[part] = weights[..., 0], weights[..., 1]
    return value, slope


def _legendre(u: np.ndarray, degree: int, slopes: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Legendre polynomials P_0..P_degree at u and their derivatives, each (*u.shape, degree+1).

    With ``slopes=False`` the second array is None (the wide window bases need no slopes).
    """
    # One contiguous slab per degree (the recurrence is memory bound); moved last at the end.
    values = np.empty((degree + 1, *u.shape))
    values[0] = 1.0
    if degree >= 1:
        values[1] = u
    for k in range(1, degree):
        values[k + 1] = ((2 * k + 1) * u * values[k] - k * values[k - 1]) / (k + 1)
    derivative = None
    if slopes:
        derivative = np.zeros_like(values)
        if degree >= 1:
            derivative[1] = 1.0
        for k in range(1, degree):
            derivative[k + 1] = derivative[k - 1] + (2 * k + 1) * values[k]
        derivative = np.moveaxis(derivative, 0, -1)
    return np.moveaxis(values, 0, -1), derivative
