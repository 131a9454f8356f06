"""Total-variation regularised differentiation (Chartrand 2011), weight by the discrepancy
principle."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.linalg

from dynid.symbolic.derivatives.grid import per_column, second_difference
from dynid.symbolic.noise import estimate_noise


def tv(
    x: np.ndarray,
    t: np.ndarray,
    alpha: float | Sequence[float] | None = None,
    max_iter: int = 30,
    tol: float = 1e-5,
) -> tuple[np.ndarray, np.ndarray]:
    """Total-variation regularised derivative (Chartrand 2011), on any time grid.

    Chartrand minimises alpha * TV(u) + 1/2 |A u - f|^2 over the derivative u, with A the
    integration operator (dense). We solve the same problem over the antiderivative g = A u:
    ``1/2 |g - f|^2 + alpha * sum_i |u_{i+3/2} - u_{i+1/2}|`` with u_{i+1/2} the slope of g on
    [t_i, t_{i+1}], so the penalty is a banded second difference and each lagged-diffusivity
    step is one pentadiagonal Cholesky solve (O(n); 10k samples in well under a second).
    alpha (units of x times time; one value or one per column): None chooses it by the
    discrepancy principle, |g - f|^2 = n * noise^2 with the ``estimate_noise`` level.
    The derivative at a sample is the step-weighted mean of the two adjacent slopes.
    """
    n, d = x.shape
    alphas = per_column(alpha, d, "alpha")
    noise = estimate_noise(x, t) if any(a is None for a in alphas) else np.zeros(d)
    steps = np.diff(t)
    values = np.empty_like(x)
    for j in range(d):
        if alphas[j] is not None:
            values[:, j] = _tv_fit(x[:, j], steps, float(alphas[j]), x[:, j], max_iter, tol)
        else:
            values[:, j] = _tv_discrepancy(x[:, j], steps, noise[j], max_iter, tol)
    slopes_mid = np.diff(values, axis=0) / steps[:, None]
    slopes = np.empty_like(x)
    slopes[0], slopes[-1] = slopes_mid[0], slopes_mid[-1]
    left, right = steps[:-1, None], steps[1:, None]
    slopes[1:-1] = (right * slopes_mid[:-1] + left * slopes_mid[1:]) / (left + right)
    return values, slopes


def _tv_fit(
    f: np.ndarray, steps: np.ndarray, alpha: float, start: np.ndarray, max_iter: int, tol: float
) -> np.ndarray:
    """Lagged-diffusivity (IRLS) minimiser g (n,) of 1/2 |g - f|^2 + alpha * |D2 g|_1."""
    n = f.shape[0]
    if alpha <= 0 or n < 3:
        return f.copy()
    coef = second_difference(steps)
    scale = np.ptp(f) / (steps.sum() * np.median(steps)) + 1e-300
    # Smoothing of |.| near zero; tiny against any jump that matters, keeps the weights finite.
    eps = 1e-6 * scale
    g = start.copy()
    for _ in range(max_iter):
        jumps = coef[:, 0] * g[:-2] + coef[:, 1] * g[1:-1] + coef[:, 2] * g[2:]
        weight = alpha / np.sqrt(jumps**2 + eps**2)
        bands = np.zeros((3, n))  # upper banded form for solveh_banded
        bands[2] = 1.0
        for k in range(3):
            bands[2, k : n - 2 + k] += weight * coef[:, k] ** 2
        bands[1, 1 : n - 1] += weight * coef[:, 0] * coef[:, 1]
        bands[1, 2:n] += weight * coef[:, 1] * coef[:, 2]
        bands[0, 2:n] += weight * coef[:, 0] * coef[:, 2]
        try:
            new = scipy.linalg.solveh_banded(bands, f, check_finite=False)
        except np.linalg.LinAlgError:
            # Near-coincident samples make the slope jumps' weights so large that rounding
            # spoils positive definiteness; LU with pivoting still solves the system.
            new = scipy.linalg.solve_banded((2, 2), _full_bands(bands), f, check_finite=False)
        change = np.linalg.norm(new - g) / (np.linalg.norm(new) + 1e-300)
        g = new
        if change < tol:
            break
    return g


def _full_bands(upper: np.ndarray) -> np.ndarray:
    """(5, n) (2, 2)-banded storage of the symmetric matrix given by its (3, n) upper bands."""
    n = upper.shape[1]
    full = np.zeros((5, n))
    full[:3] = upper
    full[3, : n - 1] = upper[1, 1:]
    full[4, : n - 2] = upper[0, 2:]
    return full


def _tv_discrepancy(
    f: np.ndarray, steps: np.ndarray, noise: float, max_iter: int, tol: float
) -> np.ndarray:
    """TV fit whose residual matches the noise, |g - f|^2 = n noise^2 (Morozov), by bisection."""
    n = f.shape[0]
    if noise <= 0:
        return f.copy()
    target = n * noise**2

    def residual(alpha: float, start: np.ndarray) -> tuple[float, np.ndarray]:
        g = _tv_fit(f, steps, alpha, start, max_iter, tol)
        return float(np.sum((g - f) ** 2)), g

    # The residual grows with alpha; bracket the target by factors of 10 from a scale guess.
    low = high = noise * np.median(steps)
    rss, g = residual(low, f)
    while rss > target and low > 1e-12 * noise * np.median(steps):
        high, low = low, low / 10
        rss, g = residual(low, g)
    while rss < target and high < 1e12 * noise * np.median(steps):
        low, high = high, high * 10
        rss, g = residual(high, g)
    for _ in range(20):
        if abs(rss / target - 1) < 0.02:
            break
        middle = np.sqrt(low * high)
        rss, g = residual(middle, g)
        low, high = (middle, high) if rss < target else (low, middle)
    return g
