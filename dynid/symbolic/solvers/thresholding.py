"""Thresholded least squares: STLSQ (and its threshold path, the candidates of model selection)
and SR3. Thresholds are scale-free: they act on the normalised coefficients (package docstring)."""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from dynid.symbolic.solvers.problem import RegressionProblem

# Thresholds of the STLSQ path: one above each of this many largest coefficients, and a log grid.
PATH_STEPS = 40


def stlsq(
    theta: np.ndarray,
    y: np.ndarray,
    threshold: float,
    ridge: float = 0.0,
    max_iter: int = 20,
) -> np.ndarray:
    """Sequentially thresholded least squares (Brunton, Proctor & Kutz 2016), coef (p,).

    Fit all columns, drop those with normalised |w_j| < ``threshold`` (module doc), refit on the
    rest, and repeat until the support stops changing or ``max_iter`` refits were made.
    """
    problem = RegressionProblem.from_data(theta, y)
    return problem.to_coef(_stlsq(problem, threshold, ridge, max_iter))


def _stlsq(
    problem: RegressionProblem,
    threshold: float,
    ridge: float,
    max_iter: int,
) -> np.ndarray:
    """STLSQ on the normalised problem."""
    support = np.ones(problem.p, dtype=bool)
    w = problem.fit(support, ridge)
    for _ in range(max_iter):
        keep = support & (np.abs(w) >= threshold)
        if np.array_equal(keep, support):
            break
        support = keep
        w = problem.fit(support, ridge)
    return w


def sr3(
    theta: np.ndarray,
    y: np.ndarray,
    threshold: float,
    nu: float = 1.0,
    max_iter: int = 1000,
    tol: float = 1e-8,
) -> np.ndarray:
    """Sparse relaxed regularised regression with an L0 penalty (Zheng et al. 2019), coef (p,).

    On the normalised problem (module doc) it minimises over xi and the relaxed variable w::

        1/2 ||y_n - theta_n xi||^2 + lam ||w||_0 + 1/(2 nu) ||xi - w||^2,   lam = threshold^2/(2 nu)

    alternating an exact xi-update (one Cholesky factor of theta_n^T theta_n + I/nu) with the L0
    prox on w, a hard threshold at sqrt(2 lam nu) = ``threshold`` — the same scale-free threshold
    as `stlsq`. ``nu`` is dimensionless because the normalised columns have unit norm. Stops when
    xi moves less than ``tol`` (relative). As pysindy's ``unbias=True`` does, the returned
    coefficients are the least-squares refit on the support of w, removing the shrinkage the
    relaxation leaves.
    """
    problem = RegressionProblem.from_data(theta, y)
    p = problem.p
    factor = np.linalg.cholesky(problem.gram + np.eye(p) / nu)

    def solve(rhs: np.ndarray) -> np.ndarray:
        return lapack.dpotrs(factor, rhs, lower=1)[0]

    xi = problem.fit(np.ones(p, dtype=bool))
    w = np.where(np.abs(xi) >= threshold, xi, 0.0)
    for _ in range(max_iter):
        xi_new = solve(problem.b + w / nu)
        w = np.where(np.abs(xi_new) >= threshold, xi_new, 0.0)
        converged = np.linalg.norm(xi_new - xi) <= tol * max(1.0, np.linalg.norm(xi_new))
        xi = xi_new
        if converged:
            break
    return problem.to_coef(problem.fit(w != 0))


def stlsq_path(problem: RegressionProblem) -> list[np.ndarray]:
    """STLSQ supports (each (p,) bool) along a threshold path spanning the whole model range.

    Thresholds: just above each of the ``PATH_STEPS`` largest |w_j| of the full normalised
    least-squares fit (so each one removes at least that term and all smaller ones at the first
    pass) plus ``PATH_STEPS`` log-spaced values between the smallest and the largest |w_j|; the
    path runs from the full model down to a single term. For p <= PATH_STEPS that is every |w_j|;
    in larger libraries the supports of more than ~PATH_STEPS terms, which no criterion would
    pick, are only visited on the log grid (each of those first fits costs O(p^3)).
    """
    full = np.abs(problem.fit(np.ones(problem.p, dtype=bool)))
    nonzero = full[full > 0]
    if nonzero.size == 0:
        return []
    grid = np.geomspace(nonzero.min(), nonzero.max(), PATH_STEPS)
    largest = np.sort(nonzero)[-PATH_STEPS:]
    thresholds = np.unique(np.concatenate([np.nextafter(largest, np.inf), grid]))
    # Thresholds often revisit the same supports: problem.fit remembers them.
    return [full != 0] + [_stlsq(problem, t, 0.0, 20) != 0 for t in thresholds]
