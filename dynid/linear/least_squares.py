"""VAR(p)/VARX fitted by (ridge) least squares on a lagged design, with the covariances that
Wald tests and information criteria need."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.errors import ComputationError, DataError
from dynid.linear.design import LaggedDesign, lagged_design


@dataclass(frozen=True)
class VarFit:
    """A VAR(p)/VARX fitted by (ridge) least squares; shapes use d variables, m inputs.

    coefs: (p, d, d), coefs[k][target, source] multiplies x_{t-k-1}[source];
    intercept: (d,) (zeros without a trend); input_coefs: (d, m), multiplies u_{t-1};
    residuals: (N, d); design: the regression it came from;
    sigma: (d, d) residual covariance, dof-corrected (SSE / (N - k));
    sigma_ml: (d, d) maximum-likelihood residual covariance (SSE / N);
    coef_cov_factor: (k, k), in the column order of ``design.regressors``: the covariance of
    target i's k coefficients is sigma[i, i] * coef_cov_factor (Wald tests need it); it is
    (Z'Z)^-1 for OLS and the ridge sandwich (Z'Z + P)^-1 Z'Z (Z'Z + P)^-1 otherwise (the
    sampling covariance at a fixed design, ignoring the ridge bias);
    stderr / intercept_stderr / input_stderr: standard errors shaped like the estimates;
    loglik: Gaussian log-likelihood at sigma_ml (+inf when the fit is exact).
    """

    coefs: np.ndarray
    intercept: np.ndarray
    input_coefs: np.ndarray
    residuals: np.ndarray
    design: LaggedDesign
    sigma: np.ndarray
    sigma_ml: np.ndarray
    coef_cov_factor: np.ndarray
    stderr: np.ndarray
    intercept_stderr: np.ndarray
    input_stderr: np.ndarray
    loglik: float

    @property
    def n_obs(self) -> int:
        return self.design.n_rows

    @property
    def n_params(self) -> int:
        """All estimated coefficients: d equations times k regressors."""
        return self.design.n_variables * self.design.n_regressors

    @property
    def fitted(self) -> np.ndarray:
        """(N, d) one-step predictions."""
        return self.design.targets - self.residuals

    def log_det_sigma_ml(self) -> float:
        sign, logdet = np.linalg.slogdet(self.sigma_ml)
        return float(logdet) if sign > 0 else -np.inf

    def information_criterion(self, kind: str) -> float:
        """Lütkepohl's normalised criteria: ln det sigma_ml + penalty * n_params / N.

        kind "aic": penalty 2; "bic" (Schwarz): penalty ln N.
        """
        penalty = {"aic": 2.0, "bic": float(np.log(self.n_obs))}[kind]
        return self.log_det_sigma_ml() + penalty * self.n_params / self.n_obs


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
    d = design.n_variables
    if n <= k:
        raise DataError(min_rows_message(p, k, n))
    penalty_weights = np.ones(k)
    if trend:
        penalty_weights[0] = 0.0
    if ridge > 0:
        # Augmented rows solve the ridge problem with the same SVD-based solver as OLS.
        penalty = np.diag(np.sqrt(n * ridge) * penalty_weights)[penalty_weights > 0]
        z_solve = np.vstack([z, penalty])
        y_solve = np.vstack([y, np.zeros((penalty.shape[0], d))])
    else:
        z_solve, y_solve = z, y
    _, s, vt = np.linalg.svd(z_solve, full_matrices=False)
    if s[-1] <= s[0] * max(z_solve.shape) * np.finfo(float).eps:
        raise ComputationError(
            f"the VAR({p}) design is singular (a constant or duplicated variable, or too many "
            "lags for the data); regularise with -p ridge=1e-6 or drop the collinear columns"
        )
    inverse = (vt.T / s**2) @ vt  # (Z'Z + P)^-1
    theta = inverse @ (z.T @ y)  # (k, d)
    residuals = y - z @ theta
    cov_factor = inverse if ridge == 0 else inverse @ (z.T @ z) @ inverse
    sse = residuals.T @ residuals
    sigma = sse / (n - k)
    sigma_ml = sse / n
    # Standard errors of every coefficient: sqrt(sigma_ii * factor_jj), laid out like theta.
    theta_se = np.sqrt(np.outer(np.clip(np.diag(cov_factor), 0, None), np.diag(sigma)))

    def lag_blocks(values: np.ndarray) -> np.ndarray:
        blocks = [values[design.lag_columns(lag)].T for lag in range(1, p + 1)]
        return np.ascontiguousarray(np.stack(blocks))

    sign, logdet = np.linalg.slogdet(sigma_ml)
    loglik = (
        -0.5 * n * (d * np.log(2 * np.pi) + logdet + d) if sign > 0 else np.inf
    )
    return VarFit(
        coefs=lag_blocks(theta),
        intercept=theta[0].copy() if trend else np.zeros(d),
        input_coefs=np.ascontiguousarray(theta[design.input_columns].T),
        residuals=residuals,
        design=design,
        sigma=sigma,
        sigma_ml=sigma_ml,
        coef_cov_factor=cov_factor,
        stderr=lag_blocks(theta_se),
        intercept_stderr=theta_se[0].copy() if trend else np.zeros(d),
        input_stderr=np.ascontiguousarray(theta_se[design.input_columns].T),
        loglik=float(loglik),
    )
