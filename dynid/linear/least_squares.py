"""VAR(p)/VARX fitted by (ridge) least squares on a lagged design, with the covariances that
Wald tests and information criteria need."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.errors import ComputationError, DataError
from dynid.linear.design import DesignLayout, LaggedDesign, lagged_design


@dataclass(frozen=True)
class VarEstimate:
    """A VAR(p)/VARX fitted by (ridge) least squares; shapes use d variables, m inputs.

    coefs: (p, d, d), coefs[k][target, source] multiplies x_{t-k-1}[source];
    intercept: (d,) (zeros without a trend); input_coefs: (d, m), multiplies u_{t-1};
    sigma: (d, d) residual covariance, dof-corrected (SSE / (N - k));
    sigma_ml: (d, d) maximum-likelihood residual covariance (SSE / N);
    coef_cov_factor: (k, k), in the column order of the design's regressors: the covariance of
    target i's k coefficients is sigma[i, i] * coef_cov_factor (Wald tests need it); it is
    (Z'Z)^-1 for OLS and the ridge sandwich (Z'Z + P)^-1 Z'Z (Z'Z + P)^-1 otherwise (the
    sampling covariance at a fixed design, ignoring the ridge bias);
    stderr / intercept_stderr / input_stderr: standard errors shaped like the estimates;
    loglik: Gaussian log-likelihood at sigma_ml (+inf when the fit is exact);
    n_obs: N rows; n_params: all estimated coefficients, d equations times k regressors.
    """

    coefs: np.ndarray
    intercept: np.ndarray
    input_coefs: np.ndarray
    sigma: np.ndarray
    sigma_ml: np.ndarray
    coef_cov_factor: np.ndarray
    stderr: np.ndarray
    intercept_stderr: np.ndarray
    input_stderr: np.ndarray
    loglik: float
    n_obs: int
    n_params: int

    def log_det_sigma_ml(self) -> float:
        sign, logdet = np.linalg.slogdet(self.sigma_ml)
        return float(logdet) if sign > 0 else -np.inf

    def information_criterion(self, kind: str) -> float:
        """Lütkepohl's normalised criteria: ln det sigma_ml + penalty * n_params / N.

        kind "aic": penalty 2; "bic" (Schwarz): penalty ln N.
        """
        penalty = {"aic": 2.0, "bic": float(np.log(self.n_obs))}[kind]
        return self.log_det_sigma_ml() + penalty * self.n_params / self.n_obs


@dataclass(frozen=True)
class VarFit(VarEstimate):
    """A VarEstimate with the regression it came from: ``design`` and ``residuals`` (N, d)."""

    residuals: np.ndarray
    design: LaggedDesign

    @property
    def fitted(self) -> np.ndarray:
        """(N, d) one-step predictions."""
        return self.design.targets - self.residuals


def min_rows_message(p: int, k: int, rows: int) -> str:
    """Why a VAR(p) with k coefficients per equation cannot be fitted to ``rows`` rows."""
    return (
        f"the VAR({p}) has {k} coefficients per equation and needs more than {k} usable "
        f"samples after the first {p} of each trial (one trial of at least {p + k + 1} "
        f"samples); the data give {rows}"
    )


def fit_var_least_squares(
    trials_x: list[np.ndarray],
    p: int,
    *,
    trials_u: list[np.ndarray] | None = None,
    trend: bool = True,
    ridge: float = 0.0,
    start: int | None = None,
) -> VarFit:
    """Fit ``x_t = c + sum_k A_k x_{t-k} + B u_{t-1} + e_t`` by least squares, per trial lags.

    trials_x: (n_i, d) per trial; trials_u: (n_i, m) per trial or None.
    ridge >= 0 minimises mean squared one-step error + ridge * (sum of squared coefficients),
    the intercept unpenalised, so its effect does not depend on the series length.
    start: first target sample per trial (default p), see ``lagged_design``.
    Raises DataError when there are too few rows, ComputationError when ridge = 0 and the design
    is singular.
    """
    design = lagged_design(trials_x, p, trials_u=trials_u, trend=trend, start=start)
    z, y = design.regressors, design.targets
    n, k = z.shape
    if n <= k:
        raise DataError(min_rows_message(p, k, n))
    weights = _penalty_weights(design, n, ridge)
    if ridge > 0:
        # Augmented rows solve the ridge problem with the same SVD-based solver as OLS.
        penalty = np.diag(weights)[weights > 0]
        z_solve = np.vstack([z, penalty])
    else:
        z_solve = z
    _, s, vt = np.linalg.svd(z_solve, full_matrices=False)
    _check_conditioning(s, s[0] * max(z_solve.shape) * np.finfo(float).eps, p)
    inverse = (vt.T / s**2) @ vt  # (Z'Z + P)^-1
    theta = inverse @ (z.T @ y)  # (k, d)
    residuals = y - z @ theta
    ztz = z.T @ z if ridge > 0 else None
    return VarFit(**_estimate(design, theta, inverse, ztz, residuals.T @ residuals, n),
                  residuals=residuals, design=design)


def var_from_moments(layout: DesignLayout, ztz: np.ndarray, zty: np.ndarray, yty: np.ndarray, n: int,
                     ridge: float = 0.0) -> VarEstimate:
    """The estimate ``fit_var_least_squares`` gives, from the sums of a design that was never
    held whole: ``ztz`` = Z'Z (k, k), ``zty`` = Z'Y (k, d), ``yty`` = Y'Y (d, d) over ``n`` rows
    laid out as ``layout``. The normal equations square the design's condition number, so a
    design with a condition number above about 1e6 is called singular here where the SVD might
    still cope."""
    k = layout.n_regressors
    if n <= k:
        raise DataError(min_rows_message(layout.n_lags, k, n))
    weights = _penalty_weights(layout, n, ridge)
    values, vectors = np.linalg.eigh(ztz + np.diag(weights**2))
    s = np.sqrt(np.clip(values[::-1], 0.0, None))  # singular values of [Z; P], descending
    # Eigenvalues of Z'Z are exact to about k * eps * their largest: below that they are zero.
    _check_conditioning(s, s[0] * np.sqrt(10 * k * np.finfo(float).eps), layout.n_lags)
    vt = vectors[:, ::-1].T
    inverse = (vt.T / s**2) @ vt
    theta = inverse @ zty
    # SSE = (Y - Z theta)'(Y - Z theta), expanded; symmetrised against round-off.
    sse = yty - theta.T @ zty - zty.T @ theta + theta.T @ ztz @ theta
    return VarEstimate(**_estimate(layout, theta, inverse, ztz if ridge > 0 else None, (sse + sse.T) / 2, n))


def _penalty_weights(layout: DesignLayout, n: int, ridge: float) -> np.ndarray:
    """(k,) square roots of the ridge penalty on each coefficient (the intercept unpenalised)."""
    weights = np.full(layout.n_regressors, np.sqrt(n * ridge))
    if layout.trend:
        weights[0] = 0.0
    return weights


def _check_conditioning(s: np.ndarray, tolerance: float, p: int) -> None:
    if s[-1] <= tolerance:
        raise ComputationError(
            f"the VAR({p}) design is singular (a constant or duplicated variable, or too many "
            "lags for the data); regularise with -p ridge=1e-6 or drop the collinear columns"
        )


def _estimate(layout: DesignLayout, theta: np.ndarray, inverse: np.ndarray, ztz: np.ndarray | None,
              sse: np.ndarray, n: int) -> dict[str, object]:
    """The VarEstimate fields from the coefficients ``theta`` (k, d), ``inverse`` = (Z'Z + P)^-1,
    ``ztz`` = Z'Z with a ridge penalty (None without) and the residual sums ``sse`` (d, d)."""
    p, d, k = layout.n_lags, layout.n_variables, layout.n_regressors
    cov_factor = inverse if ztz is None else inverse @ ztz @ inverse
    sigma = sse / (n - k)
    sigma_ml = sse / n
    # Standard errors of every coefficient: sqrt(sigma_ii * factor_jj), laid out like theta.
    theta_se = np.sqrt(np.outer(np.clip(np.diag(cov_factor), 0, None), np.clip(np.diag(sigma), 0, None)))

    def lag_blocks(values: np.ndarray) -> np.ndarray:
        blocks = [values[layout.lag_columns(lag)].T for lag in range(1, p + 1)]
        return np.ascontiguousarray(np.stack(blocks))

    sign, logdet = np.linalg.slogdet(sigma_ml)
    loglik = -0.5 * n * (d * np.log(2 * np.pi) + logdet + d) if sign > 0 else np.inf
    return {
        "coefs": lag_blocks(theta),
        "intercept": theta[0].copy() if layout.trend else np.zeros(d),
        "input_coefs": np.ascontiguousarray(theta[layout.input_columns].T),
        "sigma": sigma,
        "sigma_ml": sigma_ml,
        "coef_cov_factor": cov_factor,
        "stderr": lag_blocks(theta_se),
        "intercept_stderr": theta_se[0].copy() if layout.trend else np.zeros(d),
        "input_stderr": np.ascontiguousarray(theta_se[layout.input_columns].T),
        "loglik": float(loglik),
        "n_obs": n,
        "n_params": d * k,
    }
