"""``lds``: a linear-Gaussian state-space model fitted by EM from a subspace start.

    z_{t+1} = A z_t + w_t,          w_t ~ N(0, Q)        (n latent states, one step = dt)
    y_t     = C z_t + c + v_t,      v_t ~ N(0, diag(r))  (the d observed variables)

R is diagonal (independent observation noise per variable); the offset c carries the data's
mean. NaN cells are missing observations, used as such by the Kalman filter (the backend
declares ``nan``, so dynid keeps them). Uniform steps only: irregular timestamps
(continuous-discrete filtering) and ``ctlds`` are not implemented yet; inputs neither.
The latent coordinates are defined only up to an invertible linear map; eigenvalues of A,
forecasts and intervals do not depend on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, UsageError
from dynid.models.base import (
    Backend,
    Capabilities,
    LatentStates,
    PredictiveInterval,
    expect_array,
    param,
)
from dynid.linear import kalman
from dynid.linear.dynamics import sort_by_modulus
from dynid.linear.kalman import StateSpace
from dynid.linear.subspace import subspace_start
from dynid.models.latent.em import fit_em
from dynid.models.latent.iterations import EMResult
from dynid.models.latent.params import SizedEMParams

# Fraction of each trial held out when choosing the latent dimension (latent=auto).
HELD_OUT = 0.2


@dataclass(frozen=True)
class LDSParams(SizedEMParams):
    size_field = "latent"

    latent: str = param(
        "auto",
        "number of latent states, or auto: the n in 1..max_latent with the best held-out "
        "log-likelihood of the last 20% of each trial (fitted on the first 80%)",
    )
    max_latent: int = param(8, "largest latent dimension latent=auto tries")
    max_iter: int = param(200, "EM iterations at most")
    tol: float = param(
        1e-6, "EM stops when an iteration gains less log-likelihood than this per observed value"
    )


class LDS(Backend):
    """Kalman-filter LDS.

    Fitted arrays (n latent, d observed): ``A`` (n, n), ``C`` (d, n), ``offset`` (d,), ``Q``
    (n, n), ``R`` (d,) the diagonal observation noise variances, ``initial_mean`` (n,),
    ``initial_cov`` (n, n); ``eigenvalues`` (n,) eig(A) per step, sorted by decreasing modulus;
    ``continuous_eigenvalues`` (n,) = log(eigenvalues) / dt per time unit, with numpy's
    principal branch (imaginary parts in (-pi/dt, pi/dt]; a negative real eigenvalue gets
    +pi/dt); ``log_likelihood`` (iterations,) the EM log-likelihood history.
    """

    name = "lds"
    summary = "linear-Gaussian state-space model (Kalman filter, EM from a subspace start); NaN cells as missing"
    Params = LDSParams
    capabilities = Capabilities(uniform_steps=True, inputs=False, nan=True, stochastic=True)

    # -- fitting -----------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: LDSParams = self.params  # type: ignore[assignment]
        trials = [trial.x for trial in data.trials]
        _require_every_variable(data)
        if params.latent == "auto":
            n, scores = _choose_latent(trials, params)
            self.metrics_["held_out_log_likelihood"] = {str(k): v for k, v in scores.items()}
        else:
            n = int(params.latent)
        result = _fit_n(trials, n, params)
        self._set_model(result.model)
        self.log_likelihood_ = np.asarray(result.history)
        n_values = sum(int(np.sum(~np.isnan(y))) for y in trials)
        self.metrics_.update(
            latent=n,
            log_likelihood=result.history[-1],
            log_likelihood_per_value=result.history[-1] / n_values,
            em_iterations=len(result.history) - 1,
            converged=result.converged,
            missing_fraction=1 - n_values / sum(y.size for y in trials),
        )

    def _set_model(self, model: StateSpace) -> None:
        # C-ordered copies: BLAS sums in another order for other layouts, and a model read
        # back from its file must forecast bit-identically.
        self.model_ = StateSpace(**{
            name: np.ascontiguousarray(value, dtype=float) for name, value in vars(model).items()
        })
        values = np.linalg.eigvals(model.a).astype(complex)
        self.eigenvalues_ = values[sort_by_modulus(values)]
        with np.errstate(divide="ignore"):
            self.continuous_eigenvalues_ = np.log(self.eigenvalues_) / self.dt_

    # -- inference ---------------------------------------------------------------------------
    def _last_state(self, history: Trial) -> tuple[np.ndarray, np.ndarray]:
        filtered = kalman.kalman_filter(self.model_, history.x)
        return filtered.means[-1], filtered.covs[-1]

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """The predicted mean of y after filtering ``history`` (NaN cells allowed)."""
        return kalman.forecast(self.model_, *self._last_state(history), steps)[0]

    def predictive(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None, level: float
    ) -> PredictiveInterval:
        """Gaussian predictive: mean +- z sqrt(diag(C P C^T) + r), z the (1+level)/2 quantile."""
        if not 0 < level < 1:
            raise UsageError(f"--interval {level}: the level must lie strictly between 0 and 1")
        self._check_history(history, steps, future_inputs)
        mean, variance = kalman.forecast(self.model_, *self._last_state(history), steps)
        half = float(norm.ppf(0.5 + level / 2)) * np.sqrt(variance)
        return PredictiveInterval(mean=mean, lower=mean - half, upper=mean + half, level=level)

    def states(self, data: Dataset) -> LatentStates:
        """RTS-smoothed latent means and standard deviations of every sample of ``data``."""
        self._check_fitted()
        if tuple(data.variables) != self.variables_:
            raise DataError(
                f"{data.source}: variables {', '.join(data.variables)} differ from the model's "
                f"({', '.join(self.variables_)}); select them with --columns"
            )
        means, sds = [], []
        for trial in data.trials:
            smoothed = kalman.rts_smoother(self.model_, kalman.kalman_filter(self.model_, trial.x))
            means.append(smoothed.means)
            sds.append(np.sqrt(np.einsum("tii->ti", smoothed.covs)))
        n = self.model_.n_latent
        return LatentStates(
            names=tuple(f"z_{k}" for k in range(n)),
            t=np.concatenate([trial.t for trial in data.trials]),
            trial=np.concatenate([np.full(trial.n_samples, k) for k, trial in enumerate(data.trials)]),
            means=np.concatenate(means),
            sds=np.concatenate(sds),
        )

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        m = self.model_
        return {
            "A": m.a,
            "C": m.c,
            "offset": m.offset,
            "Q": m.q,
            "R": m.r,
            "initial_mean": m.m0,
            "initial_cov": m.p0,
            "eigenvalues": self.eigenvalues_,
            "continuous_eigenvalues": self.continuous_eigenvalues_,
            "log_likelihood": self.log_likelihood_,
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d = self.n_variables
        a = expect_array(arrays, "A", (None, None)).astype(float)
        n = a.shape[0]
        self._set_model(
            StateSpace(
                a=expect_array(arrays, "A", (n, n)).astype(float),
                c=expect_array(arrays, "C", (d, n)).astype(float),
                offset=expect_array(arrays, "offset", (d,)).astype(float),
                q=expect_array(arrays, "Q", (n, n)).astype(float),
                r=expect_array(arrays, "R", (d,)).astype(float),
                m0=expect_array(arrays, "initial_mean", (n,)).astype(float),
                p0=expect_array(arrays, "initial_cov", (n, n)).astype(float),
            )
        )
        expect_array(arrays, "eigenvalues", (n,))
        expect_array(arrays, "continuous_eigenvalues", (n,))
        self.log_likelihood_ = expect_array(arrays, "log_likelihood", (None,)).astype(float)

    def eigenvalues(self) -> np.ndarray | None:
        """eig(A): discrete-time (per step), (n,) complex."""
        self._check_fitted()
        return self.eigenvalues_


def _require_every_variable(data: Dataset) -> None:
    """DataError naming a variable with no observed value: it has no row of C to estimate."""
    seen = np.any([~np.isnan(trial.x).all(axis=0) for trial in data.trials], axis=0)
    if not seen.all():
        column = data.variables[int(np.argmin(seen))]
        raise DataError(f"{data.source}: column {column!r} has no value at all; leave it out with --columns")


def _fit_n(trials: list[np.ndarray], n: int, params: LDSParams) -> EMResult:
    return fit_em(subspace_start(trials, n), trials, max_iter=params.max_iter, tol=params.tol)


def _choose_latent(trials: list[np.ndarray], params: LDSParams) -> tuple[int, dict[int, float]]:
    """The latent dimension with the best held-out log-likelihood, and every tried one's.

    Each candidate is fitted on the first 80% of every trial; the score is log p of the last
    20% given what precedes it (the filter runs over the whole trial, only the held-out steps
    count).
    """
    cuts = [max(math.ceil((1 - HELD_OUT) * y.shape[0]), 2) for y in trials]
    training = [y[:cut] for y, cut in zip(trials, cuts)]
    if all(cut >= y.shape[0] for y, cut in zip(trials, cuts)):
        raise DataError("latent=auto needs longer trials to hold out their last 20%; set -p latent=N")
    scores: dict[int, float] = {}
    for n in range(1, params.max_latent + 1):
        try:
            model = _fit_n(training, n, params).model
        except DataError:
            break  # too few samples for this many states, and for any more
        scores[n] = float(
            sum(kalman.kalman_filter(model, y).loglik[cut:].sum() for y, cut in zip(trials, cuts))
        )
    if not scores:
        raise DataError("too few samples to fit even one latent state")
    return max(scores, key=scores.__getitem__), scores
