"""Shared pieces of the linear backends (DMD, VAR) and of Granger-causality tests.

One input-timing convention holds everywhere here: the state at sample t depends on the
states at t-1, ..., t-p and on the input at t-1 (the input applied during the step from t-1
to t), i.e. ``x_t = c + A_1 x_{t-1} + ... + A_p x_{t-p} + B u_{t-1}``. Regressors are built
within each trial only, so no lag ever reaches across a trial boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset
from dynid.errors import ComputationError, DataError


# -- lagged designs ------------------------------------------------------------------------------
def trial_arrays(data: Dataset) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Per-trial states (n_i, d) and inputs (n_i, m), or None when the data have no inputs."""
    trials_x = [trial.x for trial in data.trials]
    if not data.inputs:
        return trials_x, None
    return trials_x, [trial.u for trial in data.trials if trial.u is not None]


@dataclass(frozen=True)
class LaggedDesign:
    """Stacked one-step regression ``targets ≈ regressors @ theta`` over all trials.

    regressors: (N, k) rows ``[1 (if trend), x_{t-1}, ..., x_{t-p}, u_{t-1}]``;
    targets: (N, d) rows ``x_t``; rows_per_trial: how many rows each trial gave (in order).
    """

    regressors: np.ndarray
    targets: np.ndarray
    n_lags: int
    n_variables: int
    n_inputs: int
    trend: bool
    rows_per_trial: tuple[int, ...]

    @property
    def n_rows(self) -> int:
        return int(self.targets.shape[0])

    @property
    def n_regressors(self) -> int:
        """k: coefficients per equation."""
        return int(self.regressors.shape[1])

    def lag_columns(self, lag: int) -> slice:
        """Columns of ``x_{t-lag}`` (lag = 1..p) in ``regressors``."""
        if not 1 <= lag <= self.n_lags:
            raise IndexError(f"lag {lag} outside 1..{self.n_lags}")
        start = int(self.trend) + (lag - 1) * self.n_variables
        return slice(start, start + self.n_variables)

    def lag_column(self, lag: int, source: int) -> int:
        """The column of variable ``source`` at ``x_{t-lag}``."""
        return self.lag_columns(lag).start + source

    @property
    def input_columns(self) -> slice:
        """Columns of ``u_{t-1}`` in ``regressors`` (empty without inputs)."""
        start = int(self.trend) + self.n_lags * self.n_variables
        return slice(start, start + self.n_inputs)


def lagged_design(
    trials_x: list[np.ndarray],
    p: int,
    *,
    trials_u: list[np.ndarray] | None = None,
    trend: bool = True,
    start: int | None = None,
) -> LaggedDesign:
    """Build the stacked lagged regression of order ``p`` from per-trial arrays.

    trials_x: (n_i, d) states per trial; trials_u: (n_i, m) inputs per trial or None.
    start: first target sample in each trial (default p; must be >= p). Choosing start > p
    drops the same initial samples for every candidate order, as order selection needs.
    Trials too short to give a row contribute none.
    """
    if p < 1:
        raise ValueError("the number of lags must be at least 1")
    start = p if start is None else start
    if start < p:
        raise ValueError("start must be at least the number of lags")
    d = int(trials_x[0].shape[1])
    m = 0 if trials_u is None else int(trials_u[0].shape[1])
    regressor_blocks: list[np.ndarray] = []
    target_blocks: list[np.ndarray] = []
    rows: list[int] = []
    for i, x in enumerate(trials_x):
        n = x.shape[0]
        count = max(n - start, 0)
        rows.append(count)
        if count == 0:
            continue
        parts = [np.ones((count, 1))] if trend else []
        parts += [x[start - lag : n - lag] for lag in range(1, p + 1)]
        if trials_u is not None:
            parts.append(trials_u[i][start - 1 : n - 1])
        regressor_blocks.append(np.hstack(parts))
        target_blocks.append(x[start:n])
    k = int(trend) + p * d + m
    return LaggedDesign(
        regressors=np.vstack(regressor_blocks) if regressor_blocks else np.empty((0, k)),
        targets=np.vstack(target_blocks) if target_blocks else np.empty((0, d)),
        n_lags=p,
        n_variables=d,
        n_inputs=m,
        trend=trend,
        rows_per_trial=tuple(rows),
    )


# -- metrics ---------------------------------------------------------------------------------------
def one_step_metrics(targets: np.ndarray, predictions: np.ndarray) -> dict[str, Any]:
    """In-sample one-step-ahead errors, JSON-ready.

    targets, predictions: (N, d). Returns ``one_step_rmse`` and ``one_step_r2`` (lists, one per
    variable, in the data's units / dimensionless) and their pooled ``*_overall`` values
    (RMSE over every entry; R^2 = 1 - total SSE / total variance about each variable's mean).
    R^2 is None where a variable does not vary.
    """
    errors = targets - predictions
    sse = np.sum(errors**2, axis=0)
    sst = np.sum((targets - targets.mean(axis=0)) ** 2, axis=0)
    n = max(targets.shape[0], 1)
    r2 = [None if total == 0 else float(1.0 - e / total) for e, total in zip(sse, sst)]
    return {
        "one_step_rmse": [float(v) for v in np.sqrt(sse / n)],
        "one_step_r2": r2,
        "one_step_rmse_overall": float(np.sqrt(sse.sum() / (n * max(targets.shape[1], 1)))),
        "one_step_r2_overall": None if sst.sum() == 0 else float(1.0 - sse.sum() / sst.sum()),
    }


def finite_or_none(value: float) -> float | None:
    """``value`` as a float, or None when it is not finite (JSON has no inf/nan)."""
    return float(value) if np.isfinite(value) else None


# -- linear dynamics -------------------------------------------------------------------------------
def companion_matrix(coefs: np.ndarray) -> np.ndarray:
    """The (p d, p d) companion matrix of lag matrices ``coefs`` (p, d, d)."""
    p, d, _ = coefs.shape
    companion = np.zeros((p * d, p * d))
    companion[:d] = np.hstack(list(coefs))
    companion[d:, :-d] = np.eye((p - 1) * d)
    return companion


def sort_by_modulus(values: np.ndarray) -> np.ndarray:
    """Indices ordering eigenvalues by decreasing modulus (stable, so ties keep their order)."""
    return np.argsort(-np.abs(values), kind="stable")


def rollout(
    coefs: np.ndarray,
    intercept: np.ndarray | None,
    input_coefs: np.ndarray | None,
    history_x: np.ndarray,
    history_u_last: np.ndarray | None,
    future_inputs: np.ndarray | None,
    steps: int,
) -> np.ndarray:
    """Iterate ``x_t = c + sum_k A_k x_{t-k} + B u_{t-1}`` for ``steps`` samples.

    coefs: (p, d, d) with coefs[k] = A_{k+1}; intercept: (d,) or None; input_coefs: (d, m) or
    None; history_x: the last p states (p, d), oldest first. Inputs: forecast step j (1-based)
    uses the input at the sample before it, so step 1 uses ``history_u_last`` (m,) (the
    history's last input row) and step j > 1 uses ``future_inputs[j-2]``; the last row of
    ``future_inputs`` (steps, m) is therefore never used. Returns (steps, d).
    """
    # Contiguous copies make the arithmetic (hence the bits) independent of how the arrays were
    # laid out in memory, so a model restored from a file forecasts exactly as the original.
    coefs = np.ascontiguousarray(coefs, dtype=float)
    p, d, _ = coefs.shape
    if intercept is not None:
        intercept = np.ascontiguousarray(intercept, dtype=float)
    if input_coefs is not None:
        input_coefs = np.ascontiguousarray(input_coefs, dtype=float)
    window = [np.ascontiguousarray(row, dtype=float) for row in history_x[-p:]]
    out = np.empty((steps, d))
    for j in range(steps):
        x = np.zeros(d) if intercept is None else intercept.copy()
        for lag in range(1, p + 1):
            x = x + coefs[lag - 1] @ window[-lag]
        if input_coefs is not None and input_coefs.shape[1] > 0:
            u = history_u_last if j == 0 else future_inputs[j - 1]  # type: ignore[index]
            x = x + input_coefs @ np.ascontiguousarray(u, dtype=float)
        out[j] = x
        window = window[1:] + [x]
    return out


# -- least squares VAR(X) --------------------------------------------------------------------------
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


# -- singular value truncation ---------------------------------------------------------------------
def _marchenko_pastur_median(beta: float) -> float:
    """Median of the Marchenko-Pastur law with aspect ratio beta in (0, 1] and unit variance."""
    from scipy.integrate import quad
    from scipy.optimize import brentq

    lo, hi = (1 - np.sqrt(beta)) ** 2, (1 + np.sqrt(beta)) ** 2

    def density(t: float) -> float:
        return np.sqrt(max((hi - t) * (t - lo), 0.0)) / (2 * np.pi * beta * t)

    def cdf_minus_half(mu: float) -> float:
        return quad(density, lo, mu, limit=200)[0] - 0.5

    return float(brentq(cdf_minus_half, lo, hi, xtol=1e-12))


def numerical_rank(singular_values: np.ndarray, shape: tuple[int, int]) -> int:
    """How many singular values (descending) are above round-off, as numpy's matrix_rank."""
    s = np.asarray(singular_values, dtype=float)
    if s.size == 0 or s[0] <= 0:
        return 0
    return int(np.sum(s > s[0] * max(shape) * np.finfo(float).eps))


# Below this many singular values their median is too coarse a noise estimate to cut on.
MIN_VALUES_FOR_NOISE_ESTIMATE = 8


def optimal_hard_threshold_rank(singular_values: np.ndarray, shape: tuple[int, int]) -> int:
    """Rank kept by Gavish & Donoho's (2014) optimal hard threshold for unknown noise.

    singular_values: all min(shape) singular values of a matrix of ``shape``, descending.
    The threshold is omega(beta) * median(s), omega(beta) = lambda*(beta) / sqrt(mu_beta)
    (GD eq. 4 and Sec. III.D; mu_beta the Marchenko-Pastur median). Singular values below
    numerical precision never count.

    GD estimate the noise from the median singular value, which is only valid when most
    singular values are noise (many more variables than modes). With few variables - the usual
    case for dynid - every singular value can be signal and the median says nothing about
    noise. So the threshold is used only when the values it discards sit in the
    Marchenko-Pastur noise bulk that median implies (none more than 10% below its lower edge)
    and when more than half of at least ``MIN_VALUES_FOR_NOISE_ESTIMATE`` values are discarded
    (so the median is a noise value); otherwise every numerically nonzero singular value is kept. On noise-free data this keeps
    all nonzero singular values either way.
    """
    s = np.asarray(singular_values, dtype=float)
    numerical = numerical_rank(s, shape)
    if numerical == 0:
        return 0
    if s.size < MIN_VALUES_FOR_NOISE_ESTIMATE:
        return numerical
    beta = min(shape) / max(shape)
    mu = _marchenko_pastur_median(beta)
    lam = np.sqrt(2 * (beta + 1) + 8 * beta / ((beta + 1) + np.sqrt(beta**2 + 14 * beta + 1)))
    median = float(np.median(s))
    threshold = lam / np.sqrt(mu) * median
    rank = min(int(np.sum(s > threshold)), numerical)
    if rank == 0 or rank > (s.size - 1) // 2:
        # The median singular value would itself be kept as signal, so it cannot stand for the
        # noise level the threshold is built from (e.g. 2 variables, 2 modes).
        return numerical
    discarded = s[rank:numerical]
    bulk_lower_edge = median / np.sqrt(mu) * (1 - np.sqrt(beta))
    if discarded.size and discarded.min() < 0.9 * bulk_lower_edge:
        return numerical
    return max(rank, 1)
