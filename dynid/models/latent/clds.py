"""``clds``: a conditionally linear dynamical system (Geadah et al., NeurIPS 2025; the brief in
``METHODS.md`` §1). Each trial is recorded under one condition u (the input columns, constant
within the trial); given u the model is an ordinary linear-Gaussian state-space model,

    z_{t+1} = A(u) z_t + b(u) + w_t,  w_t ~ N(0, I)        (n latent states, one step = dt)
    y_t     = C z_t + c + v_t,         v_t ~ N(0, diag(r))

and every entry of A(.) and b(.) has an independent Gaussian-process prior over u, in weight
space: [A(u) b(u) / beta]^T = sum_l phi_l(u) W_l with W_l ~ N(0, I) entry-wise and phi the
regular Fourier features of ``fourier.py`` (squared-exponential kernel of lengthscale kappa,
prior sd ``prior_sd``); beta = drive_sd / prior_sd gives b its own prior sd. C, c, r and the
first state's N(m0, P0) are shared by all conditions, which puts every condition's latent
states in one coordinate system: that is what lets A(u) be compared, and interpolated, across
conditions.

Fitting is MAP-EM. E-step: per trial, the Kalman filter and RTS smoother of the LDS at its
condition (``dynid.linear.kalman``, shared with ``lds``). M-step, in closed form: the weights W
maximise sum_t E||z_{t+1} - [A(u) b(u)] [z_t; 1]||^2 / -2 - ||W||^2 / 2, a ridge regression of
z_{t+1} on phi(u) (x) [z_t; 1] whose normal equations are (S + I) W = Y with S = sum phi phi^T
(x) E[z z^T]-type sums (the brief's Sylvester equation S W + W Q = Y with Q = I); C, c, r, m0, P0
as in ``lds`` (``em.maximise_observation``). Each step maximises the expected complete-data log
posterior, so the MAP objective log p(y | theta) + log p(W) never decreases.

Why Q = I rather than a fitted Q (an INFERRED departure from the brief's code): the likelihood
is unchanged by a linear change of latent coordinates, so Q = I only fixes the coordinates (it
whitens them, as the brief whitens by Q before comparing fixed points); with Q free, the prior
on b would keep shrinking the latent scale (z -> s z, b -> s b, C -> C / s, Q -> s^2 Q leaves the
likelihood alone and lowers ||W_b||), an objective with no maximum.

The lengthscale and b's prior sd (``lengthscale=none``, ``drive_sd=none``): after
PRELIMINARY_ITERATIONS of EM at PRELIMINARY_LENGTHSCALE and PRELIMINARY_DRIVE_SD, the pair in
LENGTHSCALES x DRIVE_SDS with the largest marginal likelihood of the transition regression given
the smoothed states (the Bayesian linear-regression evidence of the M-step, W integrated out:
tr(Y^T (I + S)^-1 Y) / 2 - n log|I + S| / 2 + const); then EM runs to convergence at that
pair. Type-II maximum likelihood on expected statistics (an approximation: the states'
uncertainty enters only through their second moments). b needs its own scale because in the
whitened coordinates it is measured in latent noise sds per step: tens for a fixed point far
from the origin in a quiet system, where a prior sd of 1 would shrink it.

Why the start is not the pooled lds as it is: see ``pooled_start``.

Forecasts and states at any condition in the covered range (the training conditions' range and
a quarter of it either side), seen in training or not. Arrays over a grid of that range: the
eigenvalues of A(u) and the fixed points z*(u) = (I - A(u))^-1 b(u) (latent, whitened) with
their observed values C z*(u) + c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.linear.dynamics import sort_by_modulus
from dynid.linear.kalman import Course, StateSpace, forecast, kalman_filter
from dynid.linear.subspace import VARIANCE_FLOOR
from dynid.models.base import (
    Backend,
    Capabilities,
    Hyperparameters,
    LatentStates,
    PredictiveInterval,
    expect_array,
    param,
)
from dynid.models.latent.em import Moments, expectations, maximise_observation
from dynid.models.latent.fourier import FourierBasis
from dynid.models.latent.iterations import EMResult, iterate_em
from dynid.models.latent.lds import (
    check_level,
    fit_discrete,
    gaussian_interval,
    require_every_variable,
    smoothed_states,
)

# Candidate lengthscales (units of the training conditions' range) for lengthscale=none, and the
# preliminary fit whose smoothed states choose among them.
LENGTHSCALES = (0.125, 0.25, 0.5, 1.0, 2.0)
PRELIMINARY_LENGTHSCALE = 0.5
# Candidate prior sds of b(u) for drive_sd=none (whitened units: latent noise sds per step),
# and the one of the preliminary fit.
DRIVE_SDS = (1.0, 3.0, 10.0, 30.0, 100.0)
PRELIMINARY_DRIVE_SD = 10.0
PRELIMINARY_ITERATIONS = 30
# EM iterations of the pooled lds that starts the fit (one A for every condition), and rounds
# of EM with a free Q after it (``pooled_start``).
START_ITERATIONS = 10
START_ROUNDS = 5
# Relative spread of an input within a trial still taken as one condition.
CONDITION_RTOL = 1e-9


@dataclass(frozen=True)
class CLDSParams(Hyperparameters):
    latent: int = param(2, "number of latent states n")
    lengthscale: float | None = param(
        None,
        "lengthscale of the GP prior over the condition, in units of the training conditions' "
        "range; none: the candidate 0.125..2 with the largest marginal likelihood of the "
        "transition regression after a preliminary fit (with one condition it does not matter)",
    )
    prior_sd: float = param(1.0, "prior standard deviation of every entry of A(u)")
    drive_sd: float | None = param(
        None,
        "prior standard deviation of every entry of b(u), in latent noise sds per step; none: "
        "the candidate 1..100 with the largest marginal likelihood, chosen with the lengthscale",
    )
    max_frequencies: int = param(24, "Fourier frequencies per condition column at most")
    max_iter: int = param(200, "EM iterations at most")
    tol: float = param(
        1e-6, "EM stops when an iteration gains less MAP objective than this per observed value"
    )

    def __post_init__(self) -> None:
        if self.latent < 1:
            raise ValueError(f"latent must be at least 1, not {self.latent}")
        if self.lengthscale is not None and not self.lengthscale > 0:
            raise ValueError(f"lengthscale must be positive, not {self.lengthscale}")
        if not self.prior_sd > 0:
            raise ValueError(f"prior_sd must be positive, not {self.prior_sd}")
        if self.drive_sd is not None and not self.drive_sd > 0:
            raise ValueError(f"drive_sd must be positive, not {self.drive_sd}")
        if self.max_frequencies < 1:
            raise ValueError(f"max_frequencies must be at least 1, not {self.max_frequencies}")
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be at least 1, not {self.max_iter}")
        if not self.tol >= 0:
            raise ValueError(f"tol must be non-negative, not {self.tol}")


@dataclass(frozen=True)
class ConditionalSystem:
    """weights (L, n + 1, n): [A(u) beta^-1 b(u)]^T = sum_l phi_l(u) weights[l], beta =
    ``drive_scale`` (b's prior sd over A's); c (p, n), offset (p,), r (p,) the observation;
    m0 (n,), p0 (n, n) the first state; basis the features phi."""

    weights: np.ndarray
    c: np.ndarray
    offset: np.ndarray
    r: np.ndarray
    m0: np.ndarray
    p0: np.ndarray
    basis: FourierBasis
    drive_scale: float

    @property
    def n_latent(self) -> int:
        return int(self.weights.shape[2])

    def dynamics(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A(u) (G, n, n) and b(u) (G, n) at conditions u (G, M)."""
        n = self.n_latent
        stacked = np.einsum("gl,lij->gji", self.basis.features(u), self.weights)  # (G, n, n + 1)
        return stacked[:, :, :n], self.drive_scale * stacked[:, :, n]

    def at(self, u: np.ndarray) -> StateSpace:
        """The LDS at condition u (M,); its one input is the constant 1, which b(u) multiplies."""
        a, b = self.dynamics(u[None, :])
        n, p = self.n_latent, self.c.shape[0]
        return StateSpace(a=a[0], b=b[0][:, None], c=self.c, d=np.zeros((p, 1)), offset=self.offset,
                          q=np.eye(n), r=self.r, m0=self.m0, p0=self.p0)

    def log_prior(self) -> float:
        """log p(W) up to its constant."""
        return -0.5 * float(np.sum(self.weights**2))


@dataclass(frozen=True)
class ConditionDynamics:
    """A fitted model's dynamics against the condition: names (M,) of the condition columns;
    over the grid (G, M): eigenvalues (G, n) of A(u) per step dt, by decreasing modulus;
    fixed_points (G, n) latent z*(u), NaN where I - A(u) is singular; fixed_observations
    (G, p) C z*(u) + c; training (K, M) the training trials' conditions."""

    names: tuple[str, ...]
    grid: np.ndarray
    eigenvalues: np.ndarray
    fixed_points: np.ndarray
    fixed_observations: np.ndarray
    training: np.ndarray


def course(model: StateSpace, steps: int) -> Course:
    """``model`` (from ``ConditionalSystem.at``) over ``steps`` samples."""
    return model.course(steps, np.ones((steps, 1)))


# -- the M-step ------------------------------------------------------------------------------------
def transition_sums(found: list[Moments], beta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per trial, with zbar = [z; beta]: sum_t E[zbar_t zbar_t^T] (K, n + 1, n + 1) and
    sum_t E[zbar_t z_{t+1}^T] (K, n + 1, n) over the trial's transitions."""
    n = found[0].x.shape[1]
    gram = np.zeros((len(found), n + 1, n + 1))
    cross = np.zeros((len(found), n + 1, n))
    for k, moment in enumerate(found):
        gram[k, :n, :n] = moment.xx[:-1].sum(axis=0)
        gram[k, :n, n] = gram[k, n, :n] = beta * moment.x[:-1].sum(axis=0)
        gram[k, n, n] = beta**2 * (moment.x.shape[0] - 1)
        cross[k, :n] = moment.zx.sum(axis=0).T
        cross[k, n] = beta * moment.x[1:].sum(axis=0)
    return gram, cross


def regression(features: np.ndarray, gram: np.ndarray, cross: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S (L (n+1), L (n+1)) and Y (L (n+1), n) of the weights' normal equations (S + I) W = Y,
    from each trial's features (K, L) and ``transition_sums``."""
    s = np.einsum("ka,kb,kij->aibj", features, features, gram)
    y = np.einsum("ka,kij->aij", features, cross)
    size = s.shape[0] * s.shape[1]
    return s.reshape(size, size), y.reshape(size, -1)


def weights_of(s: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """The MAP weights (L, n + 1, n): the solution of (S + I) W = Y."""
    solved = np.linalg.solve(s + np.eye(s.shape[0]), y)
    return solved.reshape(-1, n + 1, n)


def log_evidence(s: np.ndarray, y: np.ndarray) -> float:
    """The lengthscale-dependent part of log p(z_{1:} | z, kappa) with W integrated out (module
    docstring): tr(Y^T (I + S)^-1 Y) / 2 - n log|I + S| / 2."""
    factor = np.linalg.cholesky(s + np.eye(s.shape[0]))
    whitened = np.linalg.solve(factor, y)
    return 0.5 * float(np.sum(whitened**2)) - y.shape[1] * float(np.sum(np.log(np.diag(factor))))


def maximise(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray,
             found: list[Moments]) -> ConditionalSystem:
    """The M-step (module docstring); ``trials`` without inputs, ``conditions`` (K, M)."""
    n = system.n_latent
    s, y = regression(system.basis.features(conditions), *transition_sums(found, system.drive_scale))
    seen = maximise_observation(trials, found, n)
    return replace(system, weights=weights_of(s, y, n), c=seen.c, offset=seen.offset, r=seen.r,
                   m0=seen.m0, p0=seen.p0)


# -- the fit ---------------------------------------------------------------------------------------
def expect(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray) -> tuple[list[Moments], float]:
    """The E-step's moments and the MAP objective log p(y | theta) + log p(W)."""
    courses = [course(system.at(u), trial.n_samples) for trial, u in zip(trials, conditions)]
    found, loglik = expectations(courses, trials)
    return found, loglik + system.log_prior()


def run_em(start: ConditionalSystem, trials: list[Trial], conditions: np.ndarray, *,
           max_iter: int, tol: float) -> EMResult[ConditionalSystem]:
    """MAP-EM from ``start`` (``iterate_em``'s stopping rule on the MAP objective)."""
    return iterate_em(
        start,
        lambda system: expect(system, trials, conditions),
        lambda system, found: maximise(system, trials, conditions, found),
        lambda system: expect(system, trials, conditions)[1],
        n_values=sum(int(np.sum(~np.isnan(trial.x))) for trial in trials),
        max_iter=max_iter,
        tol=tol,
    )


def pooled_start(trials: list[Trial], conditions: np.ndarray, n: int, basis: FourierBasis,
                 drive_scale: float, tol: float) -> ConditionalSystem:
    """One lds fitted to every trial as a conditional system whose A does not depend on the
    condition (only the constant feature has weights), then START_ROUNDS of EM with a free Q,
    each followed by the change of coordinates that makes Q = I (``whitened``).

    Why the rounds: the pooled lds's Q also holds the differences between conditions, so its
    coordinates are too small for the conditional model; with Q fixed, EM would take hundreds
    of iterations to grow them (C and the latent scale change slowly), while the Q M-step finds
    the scale at once. The likelihood does not decrease in these rounds; the MAP-EM after them
    keeps Q = I."""
    pooled = fit_discrete(trials, n, START_ITERATIONS, tol).model
    weights = np.zeros((basis.size, n + 1, n))
    constant = float(basis.features(conditions[:1])[0, 0])  # the one feature constant in u
    weights[0, :n] = pooled.a.T / constant
    system = ConditionalSystem(weights=weights, c=pooled.c, offset=pooled.offset, r=pooled.r,
                               m0=pooled.m0, p0=pooled.p0, basis=basis, drive_scale=drive_scale)
    system = whitened(system, pooled.q)
    for _ in range(START_ROUNDS):
        found, _ = expect(system, trials, conditions)
        system = maximise(system, trials, conditions, found)
        system = whitened(system, residual_covariance(system, conditions, found))
    return system


def residual_covariance(system: ConditionalSystem, conditions: np.ndarray, found: list[Moments]) -> np.ndarray:
    """The Q M-step: the mean expected residual covariance (n, n) of z_{t+1} - A(u) z_t - b(u)."""
    gram, cross = transition_sums(found)
    a, b = system.dynamics(conditions)
    total = np.zeros((system.n_latent, system.n_latent))
    for k, moment in enumerate(found):
        step = np.hstack([a[k], b[k][:, None]])  # (n, n + 1)
        fitted = step @ cross[k]
        total += moment.xx[1:].sum(axis=0) - fitted - fitted.T + step @ gram[k] @ step.T
    count = sum(moment.x.shape[0] - 1 for moment in found)
    q = 0.5 * (total + total.T) / count
    # A floor keeps the Cholesky factor of ``whitened`` defined for a noiseless direction.
    n = system.n_latent
    return q + VARIANCE_FLOOR * max(float(np.trace(q)) / n, np.finfo(float).tiny) * np.eye(n)


def whitened(system: ConditionalSystem, q: np.ndarray) -> ConditionalSystem:
    """The same model in coordinates z' = L^-1 z where q = L L^T is the noise covariance of z,
    so that the noise of z' is I: A' = L^-1 A L, b' = L^-1 b, C' = C L."""
    root = np.linalg.cholesky(q)
    inverse = np.linalg.inv(root)
    n = system.n_latent
    lift = np.eye(n + 1)
    lift[:n, :n] = root.T
    return replace(
        system, weights=lift @ system.weights @ inverse.T, c=system.c @ root,
        m0=inverse @ system.m0, p0=inverse @ system.p0 @ inverse.T,
    )


def choose_prior(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray,
                 params: CLDSParams) -> tuple[ConditionalSystem, dict[str, float]]:
    """The start of the final EM at the lengthscale and drive sd of largest evidence (module
    docstring), over the candidates of those not fixed by ``params``, and each pair's evidence
    (keyed "kappa,drive_sd")."""
    found, _ = expect(system, trials, conditions)
    kappas = LENGTHSCALES if params.lengthscale is None else (params.lengthscale,)
    drives = DRIVE_SDS if params.drive_sd is None else (params.drive_sd,)
    evidence: dict[tuple[float, float], float] = {}
    for kappa in kappas:
        features = FourierBasis.over(conditions, kappa, params.prior_sd, params.max_frequencies).features(conditions)
        for drive in drives:
            sums = transition_sums(found, drive / params.prior_sd)
            evidence[kappa, drive] = log_evidence(*regression(features, *sums))
    # Ties (as in kappa with one condition, whose evidence cannot depend on it): the smoothest.
    kappa, drive = max(sorted(evidence, key=lambda pair: (-pair[0], pair[1])), key=evidence.__getitem__)
    basis = FourierBasis.over(conditions, kappa, params.prior_sd, params.max_frequencies)
    chosen = maximise(replace(system, basis=basis, drive_scale=drive / params.prior_sd), trials, conditions, found)
    return chosen, {f"{k:g},{d:g}": value for (k, d), value in evidence.items()}


# -- the backend -----------------------------------------------------------------------------------
class CLDS(Backend):
    """Fitted arrays (n latent, p observed, M condition columns, L features, G grid points):
    ``weights`` (L, n + 1, n), ``C`` (p, n), ``offset`` (p,), ``R`` (p,), ``initial_mean`` (n,),
    ``initial_cov`` (n, n); ``basis_lo``, ``basis_span`` (M,) and ``basis_settings``
    (lengthscale, prior sd, frequencies); ``drive_scale`` (1,) b's prior sd over A's;
    ``conditions`` (K, M) the training conditions;
    ``objective`` (iterations,) the MAP objective per EM iteration; over the grid
    ``condition_grid`` (G, M): ``condition_eigenvalues`` (G, n) of A(u), per step dt, sorted by
    decreasing modulus, ``condition_fixed_points`` (G, n) z*(u) (NaN where I - A(u) is
    singular) and ``condition_fixed_point_observations`` (G, p) C z*(u) + c."""

    name = "clds"
    summary = (
        "conditionally linear dynamical system: an LDS whose A and b are smooth functions (GP "
        "priors) of per-trial conditions given as --inputs; forecasts at unseen conditions"
    )
    Params = CLDSParams
    capabilities = Capabilities(inputs=True, conditions=True, nan=True, stochastic=True)

    # -- fitting -----------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: CLDSParams = self.params  # type: ignore[assignment]
        require_every_variable(data)
        conditions = np.array([self._condition(trial, data.source) for trial in data.trials]).reshape(
            data.n_trials, len(data.inputs))
        trials = [Trial(trial.t, trial.x) for trial in data.trials]
        n = params.latent
        kappa = PRELIMINARY_LENGTHSCALE if params.lengthscale is None else params.lengthscale
        drive = PRELIMINARY_DRIVE_SD if params.drive_sd is None else params.drive_sd
        basis = FourierBasis.over(conditions, kappa, params.prior_sd, params.max_frequencies)
        start = pooled_start(trials, conditions, n, basis, drive / params.prior_sd, params.tol)
        distinct = len(np.unique(conditions, axis=0))
        if params.drive_sd is None or (params.lengthscale is None and distinct > 1):
            preliminary = run_em(start, trials, conditions, max_iter=PRELIMINARY_ITERATIONS, tol=params.tol)
            start, evidence = choose_prior(preliminary.model, trials, conditions, params)
            self.metrics_["prior_log_evidence"] = evidence
        result = run_em(start, trials, conditions, max_iter=params.max_iter, tol=params.tol)
        self.conditions_ = conditions
        self.objective_ = np.asarray(result.history)
        self._set_system(result.model)
        self.metrics_.update(
            latent=n,
            conditions=int(len(np.unique(conditions, axis=0))),
            lengthscale=result.model.basis.lengthscale,
            drive_sd=result.model.drive_scale * params.prior_sd,
            features=result.model.basis.size,
            map_objective=result.history[-1],
            log_likelihood=result.history[-1] - result.model.log_prior(),
            em_iterations=len(result.history) - 1,
            converged=result.converged,
            **self._grid_summary(),
        )

    def _set_system(self, system: ConditionalSystem) -> None:
        """Set the fitted system and tabulate its dynamics over the basis's grid."""
        self.system_ = replace(system, **{
            name: np.ascontiguousarray(getattr(system, name), dtype=float)
            for name in ("weights", "c", "offset", "r", "m0", "p0")
        })
        self.grid_ = system.basis.grid()
        a, b = system.dynamics(self.grid_)
        values = np.linalg.eigvals(a).astype(complex)  # (G, n)
        self.grid_eigenvalues_ = np.stack([row[sort_by_modulus(row)] for row in values])
        eye = np.eye(system.n_latent)
        fixed = np.full(b.shape, np.nan)
        for g in range(a.shape[0]):
            if np.linalg.cond(eye - a[g]) < 1 / np.finfo(float).eps:
                fixed[g] = np.linalg.solve(eye - a[g], b[g])
        self.grid_fixed_points_ = fixed
        self.grid_fixed_observations_ = fixed @ system.c.T + system.offset

    def _grid_summary(self) -> dict[str, Any]:
        """Ranges over the grid, for ``info``: spectral radius, frequency (cycles per time
        unit) of the leading eigenvalue, and each variable's value at the fixed point (null
        where A(u) has an eigenvalue 1 everywhere)."""
        leading = self.grid_eigenvalues_[:, 0]
        frequency = np.abs(np.angle(leading)) / (2 * math.pi * self.dt_)
        low, high = self.system_.basis.covered()
        fixed = self.grid_fixed_observations_
        seen = np.isfinite(fixed).all(axis=1)
        return {
            "condition_range": [[float(a), float(b)] for a, b in zip(low, high)],
            "spectral_radius_range": [float(np.abs(leading).min()), float(np.abs(leading).max())],
            "leading_frequency_range": [float(frequency.min()), float(frequency.max())],
            "fixed_point_range": {
                name: [float(fixed[seen, k].min()), float(fixed[seen, k].max())] if seen.any() else None
                for k, name in enumerate(self.variables_)
            },
        }

    # -- conditions --------------------------------------------------------------------------
    def _condition(self, trial: Trial, source: str = "data") -> np.ndarray:
        """The trial's condition (M,): its input row, which must not vary within the trial."""
        if trial.u is None or trial.u.shape[1] == 0:
            return np.zeros(0)
        names = self.inputs_
        for k, name in enumerate(names):
            column = trial.u[:, k]
            if not np.isfinite(column).all():
                raise DataError(f"{source}: input {name!r} has missing values; the clds model needs the "
                                "condition of every trial")
            if np.ptp(column) > CONDITION_RTOL * max(1.0, abs(float(column[0]))):
                raise DataError(
                    f"{source}: input {name!r} varies within a trial; the clds model takes its inputs "
                    "as conditions, constant within each trial (one trial per condition: --trial-column)"
                )
        return np.array(trial.u[0], dtype=float)

    def _model_at(self, trial: Trial, source: str = "data") -> StateSpace:
        """The LDS at the trial's condition, which must lie in the covered range."""
        u = self._condition(trial, source)
        self.system_.basis.check_covered(u, self.inputs_)
        return self.system_.at(u)

    # -- inference ---------------------------------------------------------------------------
    def _predict(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Means and variances (steps, d) of y after filtering ``history`` at its condition."""
        model = self._model_at(history, "history")
        if future_inputs is not None and not np.allclose(future_inputs, history.u[-1], rtol=CONDITION_RTOL, atol=0):
            raise DataError("the clds model's inputs are the trial's condition: the future inputs must "
                            f"repeat the history's ({', '.join(f'{v:g}' for v in history.u[-1])})")
        filtered = kalman_filter(course(model, history.n_samples), history.x)
        return forecast(model, filtered.means[-1], filtered.covs[-1], steps, np.ones((steps + 1, 1)))

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> np.ndarray:
        """The predicted mean of y after filtering ``history`` (NaN cells allowed)."""
        return self._predict(history, steps, future_inputs)[0]

    def predictive(self, history: Trial, steps: int, future_inputs: np.ndarray | None,
                   level: float) -> PredictiveInterval:
        """Gaussian predictive at the history's condition (as ``lds``'s)."""
        check_level(level)
        self._check_history(history, steps, future_inputs)
        return gaussian_interval(*self._predict(history, steps, future_inputs), level)

    def states(self, data: Dataset, labels: list[np.ndarray] | None = None) -> LatentStates:
        """RTS-smoothed latent means and sds of every sample, each trial at its condition."""
        self._check_fitted()
        if tuple(data.variables) != self.variables_:
            raise DataError(
                f"{data.source}: variables {', '.join(data.variables)} differ from the model's "
                f"({', '.join(self.variables_)}); select them with --columns"
            )
        courses = [course(self._model_at(trial, data.source), trial.n_samples) for trial in data.trials]
        return smoothed_states(data, courses)

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        s = self.system_
        return {
            "weights": s.weights, "C": s.c, "offset": s.offset, "R": s.r,
            "initial_mean": s.m0, "initial_cov": s.p0, **s.basis.arrays(),
            "drive_scale": np.array([s.drive_scale]),
            "conditions": self.conditions_, "objective": self.objective_,
            "condition_grid": self.grid_, "condition_eigenvalues": self.grid_eigenvalues_,
            "condition_fixed_points": self.grid_fixed_points_,
            "condition_fixed_point_observations": self.grid_fixed_observations_,
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        p, m = self.n_variables, self.n_inputs
        weights = expect_array(arrays, "weights", (None, None, None)).astype(float)
        n = weights.shape[2]
        get = lambda name, shape: expect_array(arrays, name, shape).astype(float)  # noqa: E731
        basis = FourierBasis.from_arrays(get("basis_lo", (m,)), get("basis_span", (m,)),
                                         get("basis_settings", (3,)))
        if weights.shape != (basis.size, n + 1, n):
            raise DataError(f"model array 'weights' has shape {weights.shape}, expected "
                            f"{(basis.size, n + 1, n)}")
        self._set_system(ConditionalSystem(
            weights=weights, c=get("C", (p, n)), offset=get("offset", (p,)), r=get("R", (p,)),
            m0=get("initial_mean", (n,)), p0=get("initial_cov", (n, n)), basis=basis,
            drive_scale=float(get("drive_scale", (1,))[0]),
        ))
        self.conditions_ = get("conditions", (None, m))
        self.objective_ = get("objective", (None,))
        grid = len(self.grid_)
        for name, shape in (("condition_grid", (grid, m)), ("condition_eigenvalues", (grid, n)),
                            ("condition_fixed_points", (grid, n)),
                            ("condition_fixed_point_observations", (grid, p))):
            expect_array(arrays, name, shape)

    def condition_dynamics(self) -> ConditionDynamics:
        """The dynamics over the grid of conditions (``info``, the report)."""
        self._check_fitted()
        return ConditionDynamics(
            names=self.inputs_, grid=self.grid_, eigenvalues=self.grid_eigenvalues_,
            fixed_points=self.grid_fixed_points_, fixed_observations=self.grid_fixed_observations_,
            training=self.conditions_,
        )
