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
conditions. With ``-p condition_readout=true`` the read-out is C(u), with the same kind of prior
(``clds_readout.py``). Off by default: a fixed C is the brief's default and the cheaper model;
with it on, the metrics' ``readout_log_evidence`` compares each prior sd with a fixed C, so
the data say whether C(u) was worth it.

The pieces: ``clds_system.py`` the model's arrays (and why Q = I), ``clds_mstep.py`` the
closed-form M-step and the prior's evidence, ``clds_readout.py`` those of C(u), ``clds_fit.py``
the hyperparameters, MAP-EM, its start and the choice of the prior; this module the backend.

Forecasts and states at any condition in the covered range (the training conditions' range and
a quarter of it either side), seen in training or not. Arrays over a grid of that range: the
eigenvalues of A(u) and the fixed points z*(u) = (I - A(u))^-1 b(u) (latent, whitened) with
their observed values C(u) z*(u) + c.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.linear.dynamics import sort_by_modulus
from dynid.linear.kalman import StateSpace, forecast, kalman_filter
from dynid.models.base import (
    CONDITION_RTOL,
    Backend,
    Capabilities,
    LatentStates,
    PredictiveInterval,
    expect_array,
    trial_condition,
)
from dynid.models.latent.clds_fit import CLDSParams, choose_prior, fit_system
from dynid.models.latent.clds_system import ConditionalSystem, ConditionDynamics, course
from dynid.models.latent.fourier import FourierBasis
from dynid.models.latent.lds import (
    check_level,
    gaussian_interval,
    require_every_variable,
    smoothed_states,
)

__all__ = ["CLDS", "CLDSParams", "ConditionDynamics", "choose_prior"]

class CLDS(Backend):
    """Fitted arrays (n latent, p observed, M condition columns, L features, G grid points):
    ``weights`` (L, n + 1, n), ``C`` (p, n), ``offset`` (p,), ``R`` (p,), ``initial_mean`` (n,),
    ``initial_cov`` (n, n); ``basis_lo``, ``basis_span`` (M,) and ``basis_settings``
    (lengthscale, prior sd, frequencies); ``drive_scale`` (1,) b's prior sd over A's;
    ``conditions`` (K, M) the training conditions;
    ``objective`` (iterations,) the MAP objective per EM iteration; over the grid
    ``condition_grid`` (G, M): ``condition_eigenvalues`` (G, n) of A(u), per step dt, sorted by
    decreasing modulus, ``condition_fixed_points`` (G, n) z*(u) (NaN where I - A(u) is
    singular) and ``condition_fixed_point_observations`` (G, p) C(u) z*(u) + c. With
    condition_readout: ``readout`` (L, p, n) and ``readout_sd`` (p,), C(u) as in
    ``ConditionalSystem``."""

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
        fitted = fit_system(trials, conditions, params)
        if fitted.prior_log_evidence is not None:
            self.metrics_["prior_log_evidence"] = fitted.prior_log_evidence
        if fitted.readout_log_evidence is not None:
            self.metrics_["readout_log_evidence"] = fitted.readout_log_evidence
        result = fitted.result
        self.conditions_ = conditions
        self.objective_ = np.asarray(result.history)
        self._set_system(result.model)
        self.metrics_.update(
            latent=params.latent,
            conditions=int(len(np.unique(conditions, axis=0))),
            lengthscale=result.model.basis.lengthscale,
            drive_sd=result.model.drive_scale * params.prior_sd,
            condition_readout=params.condition_readout,
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
            for name in ("weights", "c", "offset", "r", "m0", "p0", "readout", "readout_sd")
            if getattr(system, name) is not None
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
        self.grid_fixed_observations_ = np.einsum("gpn,gn->gp", system.observation(self.grid_), fixed) + system.offset

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
        return trial_condition(trial, self.inputs_, self.name, source)

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
            **({} if s.readout is None else {"readout": s.readout, "readout_sd": s.readout_sd}),
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
            readout=get("readout", (basis.size, p, n)) if "readout" in arrays else None,
            readout_sd=get("readout_sd", (p,)) if "readout" in arrays else None,
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
