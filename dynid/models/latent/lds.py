"""``lds``: a linear-Gaussian state-space model fitted by EM from a subspace start.

Uniform steps (dt):
    z_{t+1} = A z_t + B u_t + w_t,  w_t ~ N(0, Q)        (n latent states, one step = dt)
    y_t     = C z_t + D u_t + c + v_t,  v_t ~ N(0, diag(r))  (the d observed variables)
Irregular times: the continuous-time model of ``dynid.linear.continuous``,
    dz = (F z + G u) dt + dW,  y(t_k) = C z(t_k) + D u(t_k) + c + v_k,
filtered with its exact discretisation over each interval (continuous-discrete Kalman filter)
and fitted by generalised EM (``continuous_em.py``), never interpolated onto a grid.

R is diagonal (independent observation noise per variable); the offset c carries the data's
mean; inputs are held constant from one sample to the next. NaN cells are missing observations,
used as such by the Kalman filter (the backend declares ``nan``, so dynid keeps them).
The latent coordinates are defined only up to an invertible linear map; eigenvalues, forecasts
and intervals do not depend on it. ``ctlds`` (``ctlds.py``) always fits the continuous model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
from scipy.stats import norm

from dynid.data.dataset import Dataset, Trial, uniform_step
from dynid.errors import DataError, UsageError
from dynid.linear.continuous import ContinuousStateSpace, from_discrete, principal_generator
from dynid.linear.dynamics import sort_by_modulus
from dynid.linear.kalman import (
    Course,
    StateSpace,
    forecast,
    forecast_course,
    kalman_filter,
    rts_smoother,
    sample_path,
)
from dynid.linear.subspace import subspace_start
from dynid.models.base import (
    Backend,
    Capabilities,
    LatentStates,
    PredictiveInterval,
    expect_array,
    param,
)
from dynid.models.latent.continuous_em import fit_continuous_em
from dynid.models.latent.em import fit_em
from dynid.models.latent.iterations import EMResult
from dynid.models.latent.params import SizedEMParams

# Fraction of each trial held out when choosing the latent dimension (latent=auto).
HELD_OUT = 0.2
# latent=auto stops trying larger sizes after this many in a row without a better held-out score.
PATIENCE = 2
# Discrete EM iterations of the start of the continuous model (irregular samples taken as if
# they were evenly spaced at the median step: a rough start that continuous EM corrects).
START_ITERATIONS = 10
# Relative difference of steps still taken as the model's dt (as dynid.api.STEP_RTOL).
STEP_RTOL = 1e-4


@dataclass(frozen=True)
class LDSParams(SizedEMParams):
    size_field = "latent"

    latent: str = param(
        "auto",
        "number of latent states, or auto: the n in 1..max_latent with the best held-out "
        "log-likelihood of the last 20% of each trial (fitted on the first 80%, with the "
        "discrete model, irregular samples taken as evenly spaced); n = 1, 2, ... are tried "
        "until two in a row do not improve it",
    )
    max_latent: int = param(8, "largest latent dimension latent=auto tries")
    max_iter: int = param(200, "EM iterations at most")
    tol: float = param(
        1e-6, "EM stops when an iteration gains less log-likelihood than this per observed value"
    )


class LDS(Backend):
    """Kalman-filter LDS, discrete on uniform steps, continuous-time on irregular ones.

    Fitted arrays (n latent, d observed, m inputs). Discrete model: ``A`` (n, n), ``B`` (n, m),
    ``Q`` (n, n). Continuous model: ``generator`` F (n, n), ``input_rate`` G (n, m),
    ``diffusion`` Sigma (n, n) per unit of the time column. Both: ``C`` (d, n), ``D`` (d, m),
    ``offset`` (d,), ``R`` (d,) the diagonal observation noise variances, ``initial_mean``
    (n,), ``initial_cov`` (n, n); ``continuous_eigenvalues`` (n,) per unit of the time column
    (discrete model: log(eigenvalues) / dt, numpy's principal branch, imaginary parts in
    (-pi/dt, pi/dt]; continuous model: eig(F)); ``eigenvalues`` (n,) per step dt, sorted by
    decreasing modulus (eig(A), or eig(e^{F dt}) of a continuous model fitted on uniform steps;
    empty (0,) after irregular samples, which have no step); ``log_likelihood`` (iterations,) the
    EM log-likelihood history.
    """

    name = "lds"
    summary = (
        "linear-Gaussian state-space model (Kalman filter, EM from a subspace start); NaN cells as "
        "missing, irregular times in continuous time, inputs"
    )
    Params = LDSParams
    capabilities = Capabilities(
        uniform_steps=False, inputs=True, nan=True, stochastic=True, forecasts_at_times=True
    )
    # The model is continuous-time whatever the sampling (ctlds).
    always_continuous: ClassVar[bool] = False

    # -- fitting -----------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: LDSParams = self.params  # type: ignore[assignment]
        trials = list(data.trials)
        require_every_variable(data)
        _require_finite_inputs(data)
        if params.latent == "auto":
            n, scores = _choose_latent(trials, params)
            self.metrics_["held_out_log_likelihood"] = {str(k): v for k, v in scores.items()}
        else:
            n = int(params.latent)
        result = self._fit_n(trials, n, data.dt, params)
        self.log_likelihood_ = np.asarray(result.history)
        n_values = sum(int(np.sum(~np.isnan(trial.x))) for trial in trials)
        self.metrics_.update(
            latent=n,
            time="continuous" if self.continuous else "discrete",
            log_likelihood=result.history[-1],
            log_likelihood_per_value=result.history[-1] / n_values,
            em_iterations=len(result.history) - 1,
            converged=result.converged,
            missing_fraction=1 - n_values / sum(trial.x.size for trial in trials),
        )

    def _fit_n(self, trials: list[Trial], n: int, dt: float | None, params: LDSParams) -> EMResult[Any]:
        """Fit ``n`` latent states and set the model; the EM result whose history is kept."""
        if dt is not None:
            result = fit_discrete(trials, n, params.max_iter, params.tol)
            self._set_model(result.model, dt)
            return result
        start = fit_discrete(trials, n, START_ITERATIONS, params.tol).model
        continuous = from_discrete(start, self.dt_, principal_generator(start.a, self.dt_))
        result = fit_continuous_em(continuous, trials, max_iter=params.max_iter, tol=params.tol)
        self._set_model(result.model, None)
        return result

    def _set_model(self, model: StateSpace | ContinuousStateSpace, dt: float | None) -> None:
        """Set the fitted model; ``dt`` the uniform step of the data (None: irregular)."""
        # C-ordered copies: BLAS sums in another order for other layouts, and a model read
        # back from its file must forecast bit-identically.
        self.model_ = type(model)(**{
            name: np.ascontiguousarray(value, dtype=float) for name, value in vars(model).items()
        })
        self.eigenvalues_: np.ndarray | None = None
        if isinstance(model, StateSpace):
            self.eigenvalues_ = _sorted(np.linalg.eigvals(model.a))
            with np.errstate(divide="ignore"):
                self.continuous_eigenvalues_ = np.log(self.eigenvalues_) / self.dt_
            return
        self.continuous_eigenvalues_ = _sorted(np.linalg.eigvals(model.f))
        if dt is not None:
            self.eigenvalues_ = _sorted(np.exp(self.continuous_eigenvalues_ * dt))

    @property
    def continuous(self) -> bool:
        return isinstance(self.model_, ContinuousStateSpace)

    # -- inference ---------------------------------------------------------------------------
    def _course(self, trial: Trial) -> Course:
        """The model laid out over ``trial`` (a discrete model needs its steps to be dt)."""
        return self._course_at(trial.t, trial.u)

    def _course_at(self, t: np.ndarray, u: np.ndarray | None) -> Course:
        """The model laid out over samples at times t (T,) with inputs u (T, m) (None: none)."""
        if self.continuous:
            return self.model_.course(t, u)
        step = uniform_step(t)
        if t.shape[0] > 1 and (step is None or not math.isclose(step, self.dt_, rel_tol=STEP_RTOL)):
            raise DataError(
                f"the {self.name} model was fitted on steps of dt = {self.dt_:g}, but these samples "
                f"are not evenly spaced at dt; resample them with --resample {self.dt_:g}"
            )
        return self.model_.course(t.shape[0], u)

    def _step_model(self) -> StateSpace:
        """The discrete model of one step of dt (the forecasts' step)."""
        return self.model_.at_step(self.dt_) if self.continuous else self.model_

    def _predict(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Means and variances (steps, d) of y after filtering ``history`` (NaN cells allowed)."""
        filtered = kalman_filter(self._course(history), history.x)
        inputs = None if not self.inputs_ else np.vstack([history.u[-1:], future_inputs])
        return forecast(self._step_model(), filtered.means[-1], filtered.covs[-1], steps, inputs)

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """The predicted mean of y after filtering ``history`` (NaN cells allowed)."""
        return self._predict(history, steps, future_inputs)[0]

    def _simulate_at(
        self, history: Trial, times: np.ndarray, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """The predicted mean of y at ``times`` after filtering ``history`` (NaN cells allowed)."""
        filtered = kalman_filter(self._course(history), history.x)
        inputs = None if not self.inputs_ else np.vstack([history.u[-1:], future_inputs])
        ahead = self._course_at(np.concatenate([history.t[-1:], times]), inputs)
        return forecast_course(ahead, filtered.means[-1], filtered.covs[-1])[0]

    def predictive(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None, level: float
    ) -> PredictiveInterval:
        """Gaussian predictive: mean +- z sqrt(diag(C P C^T) + r), z the (1+level)/2 quantile."""
        check_level(level)
        self._check_history(history, steps, future_inputs)
        return gaussian_interval(*self._predict(history, steps, future_inputs), level)

    def sample(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None, seed: int | None
    ) -> np.ndarray:
        """One path (steps, p) of y drawn from the model after filtering ``history``: the last
        state from its filtered distribution, then state and observation noise at each step."""
        self._check_history(history, steps, future_inputs)
        filtered = kalman_filter(self._course(history), history.x)
        inputs = None if not self.inputs_ else np.vstack([history.u[-1:], future_inputs])
        rng = np.random.default_rng(0 if seed is None else seed % 2**64)
        return sample_path(self._step_model(), filtered.means[-1], filtered.covs[-1], steps, inputs, rng)

    def states(self, data: Dataset) -> LatentStates:
        """RTS-smoothed latent means and standard deviations of every sample of ``data``."""
        self._check_fitted()
        if tuple(data.variables) != self.variables_:
            raise DataError(
                f"{data.source}: variables {', '.join(data.variables)} differ from the model's "
                f"({', '.join(self.variables_)}); select them with --columns"
            )
        _require_finite_inputs(data)
        return smoothed_states(data, [self._course(trial) for trial in data.trials])

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        m = self.model_
        if isinstance(m, ContinuousStateSpace):
            dynamics = {"generator": m.f, "input_rate": m.g, "diffusion": m.sigma}
        else:
            dynamics = {"A": m.a, "B": m.b, "Q": m.q}
        return {
            **dynamics,
            "C": m.c,
            "D": m.d,
            "offset": m.offset,
            "R": m.r,
            "initial_mean": m.m0,
            "initial_cov": m.p0,
            # Empty after irregular samples: there is no step to have eigenvalues per.
            "eigenvalues": np.zeros(0, dtype=complex) if self.eigenvalues_ is None else self.eigenvalues_,
            "continuous_eigenvalues": self.continuous_eigenvalues_,
            "log_likelihood": self.log_likelihood_,
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d, k = self.n_variables, self.n_inputs
        continuous = self.always_continuous or "generator" in arrays
        n = expect_array(arrays, "generator" if continuous else "A", (None, None)).shape[0]
        square, inputs = (n, n), (n, k)
        get = lambda name, shape: expect_array(arrays, name, shape).astype(float)  # noqa: E731
        shared = dict(
            c=get("C", (d, n)), d=get("D", (d, k)), offset=get("offset", (d,)), r=get("R", (d,)),
            m0=get("initial_mean", (n,)), p0=get("initial_cov", square),
        )
        if continuous:
            model: StateSpace | ContinuousStateSpace = ContinuousStateSpace(
                f=get("generator", square), g=get("input_rate", inputs), sigma=get("diffusion", square), **shared
            )
        else:
            model = StateSpace(a=get("A", square), b=get("B", inputs), q=get("Q", square), **shared)
        sampled = not continuous or expect_array(arrays, "eigenvalues", (None,)).size > 0
        self._set_model(model, self.dt_ if sampled else None)
        if sampled:
            expect_array(arrays, "eigenvalues", (n,))
        expect_array(arrays, "continuous_eigenvalues", (n,))
        self.log_likelihood_ = get("log_likelihood", (None,))

    def eigenvalues(self) -> np.ndarray | None:
        """Discrete-time (per step dt), (n,) complex; None for a continuous model fitted on
        irregular samples."""
        self._check_fitted()
        return self.eigenvalues_

    def continuous_eigenvalues(self) -> np.ndarray:
        """The generator's eigenvalues (n,) complex, per unit of the time column."""
        self._check_fitted()
        return self.continuous_eigenvalues_


def check_level(level: float) -> None:
    """UsageError unless the ``--interval`` level lies strictly between 0 and 1."""
    if not 0 < level < 1:
        raise UsageError(f"--interval {level}: the level must lie strictly between 0 and 1")


def gaussian_interval(mean: np.ndarray, variance: np.ndarray, level: float) -> PredictiveInterval:
    """The central ``level`` interval mean +- z sqrt(variance), z the (1+level)/2 quantile of
    N(0, 1); mean and variance (steps, d)."""
    half = float(norm.ppf(0.5 + level / 2)) * np.sqrt(variance)
    return PredictiveInterval(mean=mean, lower=mean - half, upper=mean + half, level=level)


def smoothed_states(data: Dataset, courses: list[Course]) -> LatentStates:
    """RTS-smoothed latent means and standard deviations of every sample of ``data``, each
    trial filtered with its ``courses`` entry."""
    means, sds = [], []
    for trial, course in zip(data.trials, courses):
        smoothed = rts_smoother(course, kalman_filter(course, trial.x))
        means.append(smoothed.means)
        sds.append(np.sqrt(np.einsum("tii->ti", smoothed.covs)))
    n = courses[0].m0.shape[0]
    return LatentStates(
        names=tuple(f"z_{k}" for k in range(n)),
        t=np.concatenate([trial.t for trial in data.trials]),
        trial=np.concatenate([np.full(trial.n_samples, k) for k, trial in enumerate(data.trials)]),
        means=np.concatenate(means),
        sds=np.concatenate(sds),
    )


def _sorted(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values).astype(complex)
    return values[sort_by_modulus(values)]


def require_every_variable(data: Dataset) -> None:
    """DataError naming a variable with no observed value: it has no row of C to estimate."""
    seen = np.any([~np.isnan(trial.x).all(axis=0) for trial in data.trials], axis=0)
    if not seen.all():
        column = data.variables[int(np.argmin(seen))]
        raise DataError(f"{data.source}: column {column!r} has no value at all; leave it out with --columns")


def _require_finite_inputs(data: Dataset) -> None:
    """DataError naming an input with a missing value: inputs are given, not inferred."""
    for trial in data.trials:
        if trial.u is not None and not np.isfinite(trial.u).all():
            column = data.inputs[int(np.argwhere(~np.isfinite(trial.u))[0][1])]
            raise DataError(
                f"{data.source}: input {column!r} has missing values; the lds model needs every "
                "input value (fill them, or choose --nan drop)"
            )


def fit_discrete(trials: list[Trial], n: int, max_iter: int, tol: float) -> EMResult[StateSpace]:
    """Discrete EM from the subspace start (inputs start with B = D = 0)."""
    start = subspace_start([trial.x for trial in trials], n)
    m = 0 if trials[0].u is None else trials[0].u.shape[1]
    start = replace(start, b=np.zeros((n, m)), d=np.zeros((start.c.shape[0], m)))
    return fit_em(start, trials, max_iter=max_iter, tol=tol)


def held_out_split(trials: list[Trial]) -> tuple[list[Trial], list[int]]:
    """The first 80% of every trial (the candidates' training data) and each trial's cut, the
    index of its first held-out sample."""
    cuts = [max(math.ceil((1 - HELD_OUT) * trial.n_samples), 2) for trial in trials]
    if all(cut >= trial.n_samples for trial, cut in zip(trials, cuts)):
        raise DataError("latent=auto needs longer trials to hold out their last 20%; set -p latent=N")
    return [trial.slice(0, cut) for trial, cut in zip(trials, cuts)], cuts


def held_out_score(model: StateSpace, trials: list[Trial], cuts: list[int]) -> float:
    """log p of every trial's samples from its cut on, given those before (the filter runs over
    the whole trial, only the held-out steps count)."""
    return float(sum(
        kalman_filter(model.course(trial.n_samples, trial.u), trial.x).loglik[cut:].sum()
        for trial, cut in zip(trials, cuts)
    ))


def _choose_latent(trials: list[Trial], params: LDSParams) -> tuple[int, dict[int, float]]:
    """The latent dimension with the best held-out log-likelihood, and every tried one's.

    Each candidate is fitted on the first 80% of every trial and scored on the last 20%
    (``held_out_score``). Sizes are tried upwards and the search stops once PATIENCE sizes in a
    row have not beaten the best score: the held-out log-likelihood of a linear-Gaussian model
    rises while added states capture structure and falls once they only fit noise, so in
    practice it is unimodal in n (tests/test_lds.py checks the true size is still found).
    """
    training, cuts = held_out_split(trials)
    scores: dict[int, float] = {}
    best = 0
    for n in range(1, params.max_latent + 1):
        if best and n - best > PATIENCE:
            break
        try:
            model = fit_discrete(training, n, params.max_iter, params.tol).model
        except DataError:
            break  # too few samples for this many states, and for any more
        scores[n] = held_out_score(model, trials, cuts)
        if not best or scores[n] > scores[best]:
            best = n
    if not scores:
        raise DataError("too few samples to fit even one latent state")
    return best, scores
