"""Vector autoregression VAR(p), with exogenous inputs VARX, by least squares or ridge.

    x_t = c + A_1 x_{t-1} + ... + A_p x_{t-p} + B u_{t-1} + e_t,   e_t ~ N(0, Sigma)

The input enters one step late, as in DMDc: x_t depends on u_{t-1}. Lags are built within each
trial only. The order p is given or chosen by AIC/BIC on a common effective sample (the first
``max_order`` samples of every trial are dropped for every candidate, so the criteria compare
fits to the same data; Lütkepohl 2005, Sec. 4.3), after which the chosen order is refitted on
all samples it can use. The estimator itself, ``fit_var_least_squares``, lives in
``dynid.linear`` so that the causal methods share it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import ComputationError, DataError
from dynid.jsonable import jsonable
from dynid.linear.design import lagged_design, trial_arrays
from dynid.linear.dynamics import companion_matrix, rollout, sort_by_modulus
from dynid.linear.least_squares import VarEstimate, fit_var_least_squares, min_rows_message, var_from_moments
from dynid.linear.moments import DesignMoments, LaggedMoments
from dynid.metrics.forecast import one_step_metrics, one_step_metrics_from_sums
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param

__all__ = ["VAR", "VARParams", "select_order"]


@dataclass(frozen=True)
class VARParams(Hyperparameters):
    order: int | None = param(None, "number of lags p; none = choose 1..max_order by criterion")
    max_order: int = param(10, "largest order tried when order is none")
    criterion: Literal["bic", "aic"] = param("bic", "order selection criterion")
    trend: bool = param(True, "fit an intercept c")
    ridge: float = param(
        0.0,
        "ridge penalty: minimise mean squared one-step error + ridge * sum of squared "
        "coefficients (intercept unpenalised); 0 = ordinary least squares",
    )

    def __post_init__(self) -> None:
        if self.order is not None and self.order < 1:
            raise ValueError(f"order must be a positive integer or none, not {self.order}")
        if self.max_order < 1:
            raise ValueError(f"max_order must be a positive integer, not {self.max_order}")
        if self.criterion not in ("bic", "aic"):
            raise ValueError(f"criterion must be bic or aic, not {self.criterion!r}")
        if not self.ridge >= 0:
            raise ValueError(f"ridge must be zero or positive, not {self.ridge}")


def select_order(
    trials_x: list[np.ndarray],
    max_order: int,
    *,
    criterion: str = "bic",
    trials_u: list[np.ndarray] | None = None,
    trend: bool = True,
    ridge: float = 0.0,
) -> tuple[int, dict[int, float]]:
    """The order in 1..max_order minimising ``criterion``, and every candidate's value.

    All candidates are fitted to the same targets (samples max_order.. of each trial); ties go
    to the smaller order. Criteria are Lütkepohl's normalised ones, see
    ``VarEstimate.information_criterion``.
    """
    probe = lagged_design(trials_x, max_order, trials_u=trials_u, trend=trend)
    _check_probe(max_order, probe.n_regressors, probe.n_rows)
    return _best_order(max_order, criterion, lambda p: fit_var_least_squares(
        trials_x, p, trials_u=trials_u, trend=trend, ridge=ridge, start=max_order))


def _check_probe(max_order: int, k: int, rows: int) -> None:
    if rows <= k:
        raise DataError(min_rows_message(max_order, k, rows) + "; lower -p max_order or set -p order")


def _best_order(max_order: int, criterion: str, estimate: Callable[[int], VarEstimate]) -> tuple[int, dict[int, float]]:
    """The order minimising ``criterion`` and the criterion of each order tried. The search stops
    at the first order whose design is singular: on smooth, noise-free samples (an ODE sampled
    finely) lags become linearly dependent, and every higher order nests that one. A singular
    order 1 is an error."""
    values: dict[int, float] = {}
    for p in range(1, max_order + 1):
        try:
            values[p] = estimate(p).information_criterion(criterion)
        except ComputationError:
            if p == 1:
                raise
            break
    return min(values, key=lambda p: (values[p], p)), values


def _estimate_from(design: DesignMoments, ridge: float) -> VarEstimate:
    return var_from_moments(design.layout, design.ztz, design.zty, design.yty, design.n, ridge)


class VAR(Backend):
    """VAR(p) / VARX by least squares.

    Fitted arrays (p lags, d variables, m inputs): ``coefs`` (p, d, d), coefs[k][target, source]
    multiplies x_{t-k-1}[source]; ``intercept`` (d,) (zeros without trend); ``input_coefs``
    (d, m) multiplies u_{t-1}; ``noise_cov`` (d, d) dof-corrected residual covariance;
    ``coef_stderr`` (p, d, d) OLS standard errors of coefs (with ridge: the ridge estimator's
    sampling spread at a fixed design, ignoring its bias).
    """

    name = "var"
    summary = "vector autoregression VAR(p)/VARX by least squares, order by BIC or AIC"
    Params = VARParams
    capabilities = Capabilities(uniform_steps=True, inputs=True)

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: VARParams = self.params  # type: ignore[assignment]
        trials_x, trials_u = trial_arrays(data)
        options: dict[str, Any] = {
            "trials_u": trials_u,
            "trend": params.trend,
            "ridge": params.ridge,
        }
        values: dict[int, float] = {}
        if params.order is None:
            order, values = select_order(
                trials_x, params.max_order, criterion=params.criterion, **options
            )
        else:
            order = params.order
        result = fit_var_least_squares(trials_x, order, **options)
        self._set(result, order, values, one_step_metrics(result.design.targets, result.fitted))

    # -- streamed: a file read in chunks ------------------------------------------------------
    def moments(self, n_variables: int, n_inputs: int) -> LaggedMoments:
        """Running sums with the lags of every order the fit may try."""
        params: VARParams = self.params  # type: ignore[assignment]
        return LaggedMoments(params.order or params.max_order, n_variables, n_inputs, params.trend)

    def _fit_moments(self, moments: LaggedMoments) -> None:
        """The fit ``_fit`` makes, from the sums of ``moments`` (equal to round-off)."""
        params: VARParams = self.params  # type: ignore[assignment]
        values: dict[int, float] = {}
        if params.order is None:
            probe = moments.design(params.max_order)
            _check_probe(params.max_order, probe.layout.n_regressors, probe.n)
            order, values = _best_order(params.max_order, params.criterion, lambda p: _estimate_from(
                moments.design(p, start=params.max_order), params.ridge))
        else:
            order = params.order
        design = moments.design(order)
        result = _estimate_from(design, params.ridge)
        sse = np.diag(result.sigma_ml) * result.n_obs
        self._set(result, order, values, one_step_metrics_from_sums(sse, design.target_sst, design.n))

    def _set(self, result: VarEstimate, order: int, values: dict[int, float],
             one_step: dict[str, Any]) -> None:
        """Fitted arrays and metrics from ``result`` of ``order`` (``values``: the criterion of
        each candidate order, when chosen; ``one_step``: its in-sample one-step metrics)."""
        params: VARParams = self.params  # type: ignore[assignment]
        self.coefs_ = result.coefs
        self.intercept_ = result.intercept
        self.input_coefs_ = result.input_coefs
        self.noise_cov_ = result.sigma
        self.coef_stderr_ = result.stderr
        self.metrics_ = {
            "order": order,
            "order_selected_by": params.criterion if params.order is None else "fixed",
            **one_step,
            "loglik": jsonable(result.loglik),
            "aic": jsonable(result.information_criterion("aic")),
            "bic": jsonable(result.information_criterion("bic")),
            "n_obs": result.n_obs,
        }
        if values:
            self.metrics_["criterion_values"] = {str(p): jsonable(v) for p, v in values.items()}

    @property
    def history_length(self) -> int:
        if hasattr(self, "coefs_"):
            return int(self.coefs_.shape[0])
        return self.params.order or 1  # type: ignore[attr-defined]

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """The noise-free (conditional mean) forecast from the last p history samples.

        Step 1 uses the history's last input row; step j > 1 uses future_inputs[j-2], so the
        last row of future_inputs is not used.
        """
        u_last = history.u[-1] if self.inputs_ and history.u is not None else None
        p = self.history_length
        return rollout(
            self.coefs_, self.intercept_, self.input_coefs_, history.x[-p:], u_last,
            future_inputs, steps,
        )

    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        return {
            "coefs": self.coefs_,
            "intercept": self.intercept_,
            "input_coefs": self.input_coefs_,
            "noise_cov": self.noise_cov_,
            "coef_stderr": self.coef_stderr_,
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d, m = self.n_variables, self.n_inputs
        coefs = expect_array(arrays, "coefs", (None, d, d)).astype(float)
        p = coefs.shape[0]
        if p < 1:
            raise DataError("model array 'coefs' has no lags")
        self.coefs_ = coefs
        self.intercept_ = expect_array(arrays, "intercept", (d,)).astype(float)
        self.input_coefs_ = expect_array(arrays, "input_coefs", (d, m)).astype(float)
        self.noise_cov_ = expect_array(arrays, "noise_cov", (d, d)).astype(float)
        self.coef_stderr_ = expect_array(arrays, "coef_stderr", (p, d, d)).astype(float)

    def eigenvalues(self) -> np.ndarray | None:
        """Eigenvalues of the (p d, p d) companion matrix, by decreasing modulus (per step)."""
        self._check_fitted()
        values = np.linalg.eigvals(companion_matrix(self.coefs_))
        return values[sort_by_modulus(values)]
