"""Natural cubic smoothing spline (Reinsch), weight by generalised cross-validation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.linalg

from dynid.symbolic.derivatives.grid import per_column, second_difference


def spline(
    x: np.ndarray, t: np.ndarray, lam: float | Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Natural cubic smoothing spline per column, penalty chosen by generalised cross-validation.

    Minimises sum_i (x_i - g(t_i))^2 + lam * integral g''(t)^2 dt (Reinsch 1967; Green &
    Silverman 1994, ch. 2), one O(n) banded solve per lam. lam (units of time^3; one value or
    one per column): None minimises GCV(lam) = n |x - g|^2 / (n - tr A)^2 (Craven & Wahba),
    which needs no noise estimate; tr A comes from a Hutchinson estimate with fixed Rademacher
    probes, so the choice is deterministic and 10k samples take well under a second (scipy's
    ``make_smoothing_spline`` GCV loops in Python and fixes lam's search range in absolute
    units, which breaks for times in ms or hours).
    """
    n, d = x.shape
    if n < 4:
        raise ValueError(f"spline differentiation needs at least 4 samples, got {n}")
    spline = SmoothingSpline(np.diff(t))
    lams = per_column(lam, d, "lam")
    if any(value is None for value in lams):
        chosen = spline.gcv_penalty(x)
        lams = [chosen[j] if lams[j] is None else lams[j] for j in range(d)]
    values, slopes = np.empty_like(x), np.empty_like(x)
    for j in range(d):
        values[:, j : j + 1], curvature = spline.fit(x[:, j : j + 1], float(lams[j]))
        slopes[:, j : j + 1] = spline.slopes(values[:, j : j + 1], curvature)
    return values, slopes


class SmoothingSpline:
    """Reinsch form of the natural cubic smoothing spline on knots with the given steps (n-1,).

    With Q (n, n-2) the second-divided-difference matrix and R (n-2, n-2) the tridiagonal
    Gram matrix of the hat functions, the fit g and its interior second derivatives c solve
    (R + lam Q^T Q) c = Q^T y and g = y - lam Q c.
    """

    # Hutchinson probes for tr A, and GCV grid points per decade of lam (12% in bandwidth).
    probes = 16
    per_decade = 5

    def __init__(self, steps: np.ndarray) -> None:
        self.steps = steps
        self.n = steps.shape[0] + 1
        self.coef = second_difference(steps)  # column i of Q: rows i, i+1, i+2
        c = self.coef
        self.gram = np.zeros((3, self.n - 2))  # R, upper banded form
        self.gram[2] = (steps[:-1] + steps[1:]) / 3
        self.gram[1, 1:] = steps[1:-1] / 6
        self.penalty = np.zeros((3, self.n - 2))  # Q^T Q, upper banded form
        self.penalty[2] = np.sum(c**2, axis=1)
        self.penalty[1, 1:] = c[:-1, 1] * c[1:, 0] + c[:-1, 2] * c[1:, 1]
        self.penalty[0, 2:] = c[:-2, 2] * c[2:, 0]

    def qt(self, y: np.ndarray) -> np.ndarray:
        """Q^T y: (n-2, k) for (n, k)."""
        c = self.coef
        return c[:, :1] * y[:-2] + c[:, 1:2] * y[1:-1] + c[:, 2:] * y[2:]

    def q(self, curvature: np.ndarray) -> np.ndarray:
        """Q c: (n, k) for (n-2, k)."""
        out = np.zeros((self.n, curvature.shape[1]))
        for k in range(3):
            out[k : self.n - 2 + k] += self.coef[:, k : k + 1] * curvature
        return out

    def solve(self, lam: float, rhs: np.ndarray) -> np.ndarray:
        """(R + lam Q^T Q)^-1 rhs for (n-2, k) right-hand sides."""
        return scipy.linalg.solveh_banded(self.gram + lam * self.penalty, rhs, check_finite=False)

    def fit(self, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """Smoothed values (n, k) and interior second derivatives (n-2, k) for data (n, k)."""
        if lam <= 0:
            return y.copy(), self.solve(0.0, self.qt(y))  # the interpolating spline
        curvature = self.solve(lam, self.qt(y))
        return y - lam * self.q(curvature), curvature

    def slopes(self, values: np.ndarray, curvature: np.ndarray) -> np.ndarray:
        """First derivative (n, k) of the cubic spline at the knots."""
        h = self.steps[:, None]
        second = np.pad(curvature, ((1, 1), (0, 0)))  # natural ends: g'' = 0
        chord = np.diff(values, axis=0) / h
        out = np.empty_like(values)
        out[:-1] = chord - h * (2 * second[:-1] + second[1:]) / 6
        out[-1] = chord[-1] + h[-1] * (second[-2] + 2 * second[-1]) / 6
        return out

    def gcv_penalty(self, y: np.ndarray) -> np.ndarray:
        """The lam (d,) minimising GCV per column of y (n, d), over a log grid then a parabola.

        The grid spans equivalent kernel bandwidths (lam / density)^(1/4) from a third of the
        median step to the whole record (Silverman 1984), so it follows the time units.
        """
        n, d = y.shape
        span = float(self.steps.sum())
        density = (n - 1) / span
        low = np.log10(density * (np.median(self.steps) / 3) ** 4)
        high = np.log10(density * span**4)
        grid = np.linspace(low, high, int(np.ceil((high - low) * self.per_decade)) + 1)
        probes = np.random.default_rng(0).choice([-1.0, 1.0], size=(n, self.probes))
        rhs = self.qt(np.hstack([y, probes]))
        scores = np.empty((grid.size, d))
        for k, log_lam in enumerate(grid):
            lam = 10.0**log_lam
            curvature = self.solve(lam, rhs)
            residual2 = lam**2 * np.sum(self.q(curvature[:, :d]) ** 2, axis=0)
            # n - tr A = lam tr(Q M^-1 Q^T), estimated as the mean of z^T Q M^-1 Q^T z.
            free = lam * np.mean(np.sum(rhs[:, d:] * curvature[:, d:], axis=0))
            scores[k] = n * residual2 / max(free, 1e-300) ** 2
        return np.array([10.0 ** _parabola_minimum(grid, np.log(scores[:, j])) for j in range(d)])


def _parabola_minimum(grid: np.ndarray, values: np.ndarray) -> float:
    """Abscissa of the minimum of ``values`` on ``grid``, refined by a parabola through 3 points."""
    k = int(np.argmin(values))
    if k == 0 or k == grid.size - 1:
        return float(grid[k])
    left, mid, right = values[k - 1 : k + 2]
    curvature = left - 2 * mid + right
    if curvature <= 0:
        return float(grid[k])
    shift = 0.5 * (left - right) / curvature
    return float(grid[k] + shift * (grid[1] - grid[0]))
