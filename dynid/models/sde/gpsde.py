"""``gpsde``: a latent SDE with a Gaussian-process drift, fitted by SING (``sing.py``).

    dz = f(z) dt + dW,   f ~ GP(h, RBF) through M inducing points,   y_t = C z_t + c + v_t,
    v_t ~ N(0, diag(r)); the diffusion is fixed at the identity (it sets the latent scale); the
    prior mean h(z) = A z + b is fitted (it restores free runs that leave the data's range).

Variational EM, one outer iteration per epoch of dynid's training loop (progress,
``--max-time``, ``--checkpoint``/``--resume``): ``e_steps`` SING natural-gradient steps on
q(z), the trend h and q(u) in closed form with the kernel's variance and lengthscale by L-BFGS
on the ELBO, then
C, c, r and the first states' prior in closed form. Forecasts condition q(z) on the history
(its last ``HISTORY_WINDOW`` samples) and run ``particles`` Euler-Maruyama paths, each from a
draw of q(z) at the last sample with its own drift function drawn from q(u): the forecast is
their mean, ``--interval`` their quantiles with the observation noise, ``--sample`` one path.
A sample path is one draw of the posterior predictive: one drift function drawn from q(u), then
the SDE's noise, so a long one's histogram carries that function's deviation from the posterior
mean, and differs from seed to seed as much as the drift's posterior allows.
The latent coordinates are defined up to sign and order (and by the data's scale through the
fixed diffusion); the drift's zeros map to the data through C and c.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import ComputationError, DataError, UsageError
from dynid.models.base import Backend, Capabilities, LatentStates, PredictiveInterval, expect_array, param
from dynid.models.latent.em import Observation
from dynid.models.sde import sing
from dynid.models.sde.field import DriftField
from dynid.models.sde.kernels import inducing_grid
from dynid.params import Hyperparameters
from dynid.training import TRAINING_CURVE, TrainingStep

# Inducing points per latent dimension when -p inducing=0, by latent dimension.
AUTO_INDUCING = {1: 12, 2: 7, 3: 5}
LARGEST_LATENT = 3
# Points per dimension of the drift grid in the model file and report, by latent dimension.
GRID_POINTS = {1: 101, 2: 21, 3: 9}
# Samples of history a forecast conditions on (the state's posterior at the end hardly
# depends on samples much further back, and inference is linear in their number).
HISTORY_WINDOW = 500
# Steps and tolerance (nats per grid point) of the inference on new data (states, forecasts).
INFER_STEPS = 100
INFER_TOL = 1e-5
# The seed of the particles behind forecast means and intervals (--sample takes --seed).
FORECAST_SEED = 0
# One-step predictions of many samples (the report's residuals) run their particles in blocks
# of about this many states, which bounds the memory of the kernel features (states x M x D).
PARTICLE_STATES = 50_000


@dataclass(frozen=True)
class GPSDEParams(Hyperparameters):
    latent: int = param(1, "latent dimension (1 to 3)")
    inducing: int = param(0, "inducing points per latent dimension on a regular grid (0: 12, 7, 5 for 1, 2, 3 latents)")
    substeps: int = param(1, "grid steps per sample interval (finer Euler-Maruyama discretisation of the SDE)")
    max_iter: int = param(100, "variational EM iterations (epochs) at most")
    e_steps: int = param(2, "SING natural-gradient steps on q(z) per iteration")
    tol: float = param(1e-5, "stop when an iteration gains less ELBO than this per observed value")
    particles: int = param(500, "sample paths behind a forecast's mean and interval")

    def __post_init__(self) -> None:
        if not 1 <= self.latent <= LARGEST_LATENT:
            raise ValueError(f"latent must be 1 to {LARGEST_LATENT} (inducing grids grow as points^latent), not {self.latent}")
        if self.inducing != 0 and self.inducing < 2:
            raise ValueError(f"inducing must be 0 (auto) or at least 2, not {self.inducing}")
        for name in ("substeps", "max_iter", "e_steps", "particles"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not self.tol >= 0:
            raise ValueError(f"tol must be non-negative, not {self.tol}")


class SINGTraining:
    """Variational EM as the training loop's strategy: one outer iteration per epoch."""

    def __init__(self, trials: list[Trial], grid: sing.Grid, model: sing.SDEModel,
                 posterior: sing.Posterior, params: GPSDEParams) -> None:
        self.trials, self.grid, self.model, self.posterior, self.params = trials, grid, model, posterior, params
        self.n_values = sum(int(np.sum(~np.isnan(trial.x))) for trial in trials)
        self.start_elbo = self.elbo = sing.elbo(posterior, model)

    def train_step(self, epoch: int) -> TrainingStep:
        grid, model = self.grid, self.model
        try:
            posterior = sing.sing_steps(self.posterior, grid, model, self.params.e_steps)
            model = sing.update_trend(posterior, grid, model)
            model = sing.update_kernel(posterior, grid, model)
            model = sing.update_readout(posterior, grid, self.trials, model)
        except (RuntimeError, np.linalg.LinAlgError) as exc:  # a Cholesky factor that does not exist
            raise ComputationError(f"gpsde: iteration {epoch} failed ({exc}); try fewer -p inducing "
                                   "or more data") from exc
        self.model = model
        self.posterior = sing.evaluate(posterior.natural, posterior.moments, grid, model, posterior.rho)
        before, self.elbo = self.elbo, sing.elbo(self.posterior, model)
        return TrainingStep(loss=-self.elbo / self.n_values,
                            converged=self.elbo - before < self.params.tol * self.n_values)

    def validation_loss(self) -> float | None:
        return None

    def state_arrays(self) -> dict[str, np.ndarray]:
        natural, model = self.posterior.natural, self.model
        return {
            "h": natural.h, "J": natural.J, "L": natural.L, "rho": np.array([self.posterior.rho]),
            **_model_arrays(model), "elbo": np.array([self.elbo]),
        }

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.model = _model_from(arrays, self.model.n_latent, self.model.readout.c.shape[0])
        natural = sing.Natural(arrays["h"], arrays["J"], arrays["L"])
        found = sing.moments(natural)
        if found is None:
            raise DataError("the checkpoint's q(z) is not a valid Gaussian")
        self.posterior = sing.evaluate(natural, found, self.grid, self.model, float(arrays["rho"][0]))
        self.elbo = float(arrays["elbo"][0])


def _model_arrays(model: sing.SDEModel) -> dict[str, np.ndarray]:
    kernel, readout = model.kernel, model.readout
    return {
        "inducing_points": kernel.inducing, "kernel": np.array([kernel.variance, kernel.lengthscale]),
        "inducing_mean": model.drift.mean, "inducing_cov": model.drift.cov,
        "C": readout.c, "offset": readout.offset, "R": readout.r,
        "initial_mean": readout.m0, "initial_cov": readout.p0, "trend": model.trend,
    }


def _model_from(arrays: dict[str, np.ndarray], latent: int | None, observed: int) -> sing.SDEModel:
    """The model from ``_model_arrays``'s arrays, shapes checked (latent None: from the file)."""
    get = lambda name, shape: expect_array(arrays, name, shape).astype(float)  # noqa: E731
    inducing = get("inducing_points", (None, latent))
    m, d = inducing.shape
    variance, lengthscale = get("kernel", (2,))
    readout = Observation(c=get("C", (observed, d)), d=np.zeros((observed, 0)), offset=get("offset", (observed,)),
                          r=get("R", (observed,)), m0=get("initial_mean", (d,)), p0=get("initial_cov", (d, d)))
    return sing.SDEModel(sing.Kernel(float(variance), float(lengthscale), inducing),
                         sing.InducingPosterior(get("inducing_mean", (m, d)), get("inducing_cov", (m, m))), readout,
                         # files written before the drift had a trend had a zero prior mean
                         get("trend", (d + 1, d)) if "trend" in arrays else np.zeros((d + 1, d)))


class GPSDE(Backend):
    """Fitted arrays (D latent, p observed, M inducing points, G grid points): ``inducing_points``
    (M, D); ``kernel`` (2,) the RBF variance and lengthscale (latent units); ``inducing_mean``
    (M, D) and ``inducing_cov`` (M, M) of q(u); ``C`` (p, D), ``offset`` (p,), ``R`` (p,)
    observation noise variances; ``initial_mean`` (D,), ``initial_cov`` (D, D) of the first
    state; ``trend`` (D + 1, D) the drift's prior mean h(z) = trend^T [z; 1] (zero when a file
    written before it lacks it); ``drift_grid`` (G, D) states over the inducing points' box,
    ``drift_mean`` (G, D) the posterior mean drift there (latent units per unit of time) and ``drift_sd`` (G,) its
    posterior sd; ``elbo`` (iterations + 1,) the ELBO (nats) from the start on.
    """

    name = "gpsde"
    legacy_arrays = frozenset({"trend"})
    summary = ("latent SDE dz = f(z) dt + dW with a sparse Gaussian-process drift around a fitted "
               "linear mean, fitted by natural-gradient variational inference (SING); the diffusion is fixed at the "
               "identity, so the latent's scale is the noise's and the read-out C carries the "
               "data's; intervals, sample paths, latent states")
    Params = GPSDEParams
    capabilities = Capabilities(uniform_steps=True, nan=True, stochastic=True, training=True)

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        from dynid.models.sde.initialise import initial_fit
        from dynid.runtime import torch_threads
        from dynid.training import TrainingConfig, TrainingSession, train

        params: GPSDEParams = self.params  # type: ignore[assignment]
        trials = list(data.trials)
        if not _every_variable_seen(trials):
            raise DataError(f"{data.source}: a column has no value at all; leave it out with --columns")
        if sum(trial.n_samples for trial in trials) <= params.latent + 1:
            raise DataError(f"{data.source}: too few samples for {params.latent} latent dimensions")
        per_dim = params.inducing or AUTO_INDUCING[params.latent]
        grid = sing.lay_out(trials, self.dt_, params.substeps)
        with torch_threads(self.training_options.threads):
            try:
                model, posterior = initial_fit(trials, grid, self.dt_, params.latent, per_dim)
            except (ArithmeticError, np.linalg.LinAlgError) as exc:
                raise ComputationError(f"gpsde: the start failed ({exc}); check the data for constant columns") from exc
            strategy = SINGTraining(trials, grid, model, posterior, params)
            session = TrainingSession(self.training_options, 0 if seed is None else seed)
            result = train(strategy, TrainingConfig(max_epochs=params.max_iter, name=self.name,
                                                    stage=f"{self.name} (SING)"), session)
        self._set_model(strategy.model)
        # The loop keeps each epoch's loss (-ELBO per value), across --resume too.
        self.elbo_ = np.array([strategy.start_elbo, *(-loss * strategy.n_values for loss in result.losses)])
        self.metrics_.update(
            elbo=float(self.elbo_[-1]), elbo_per_value=float(self.elbo_[-1]) / strategy.n_values,
            iterations=result.epochs, stopped=result.stopped, resumed_from=result.resumed_from, latent=params.latent,
            inducing_points=int(model.kernel.inducing.shape[0]),
            kernel_variance=strategy.model.kernel.variance, kernel_lengthscale=strategy.model.kernel.lengthscale,
            diffusion="fixed at the identity (latent units)",
        )
        self.metrics_[TRAINING_CURVE] = result.curve()

    def _set_model(self, model: sing.SDEModel) -> None:
        self.model_ = model
        self.field_ = DriftField.of(model)
        self.drift_grid_ = inducing_grid(model.kernel.inducing.min(axis=0), model.kernel.inducing.max(axis=0),
                                         GRID_POINTS[model.n_latent])

    # -- inference on new data -----------------------------------------------------------------
    def _posterior(self, trials: list[Trial]) -> tuple[sing.Grid, sing.Posterior]:
        from dynid.runtime import torch_threads

        grid = sing.lay_out(trials, self.dt_, self.params.substeps)  # type: ignore[attr-defined]
        with torch_threads(None):
            return grid, sing.infer(grid, self.model_, max_steps=INFER_STEPS, tol=INFER_TOL)

    def states(self, data: Dataset) -> LatentStates:
        """Posterior means and sds of the latent state at every sample of ``data``."""
        self._check_fitted()
        if tuple(data.variables) != self.variables_:
            raise DataError(f"{data.source}: variables {', '.join(data.variables)} differ from the model's "
                            f"({', '.join(self.variables_)}); select them with --columns")
        grid, posterior = self._posterior(list(data.trials))
        found = posterior.moments
        return LatentStates(
            names=tuple(f"z_{k}" for k in range(self.model_.n_latent)),
            t=np.concatenate([trial.t for trial in data.trials]),
            trial=np.concatenate([np.full(trial.n_samples, k) for k, trial in enumerate(data.trials)]),
            means=found.means[grid.observed],
            sds=np.sqrt(np.einsum("nii->ni", found.covs[grid.observed])),
        )

    def _latent_paths(self, histories: list[Trial], steps: int, particles: int,
                      rng: np.random.Generator) -> np.ndarray:
        """Latent paths (steps, H, particles, D) from q(z) at the end of each of the H
        ``histories`` (one inference over all of them, laid end to end); particle j runs the
        j-th drift function drawn from q(u) after every history."""
        windows = [history.slice(-HISTORY_WINDOW) for history in histories]
        grid, posterior = self._posterior(windows)
        ends = grid.observed[np.cumsum([window.n_samples for window in windows]) - 1]
        found = posterior.moments
        factor = np.linalg.cholesky(found.covs[ends])  # (H, D, D)
        noise = rng.standard_normal((len(windows), particles, self.model_.n_latent))
        start = found.means[ends][:, None, :] + np.einsum("hij,hpj->hpi", factor, noise)
        weights = self.field_.sample_weights(rng, particles)
        substeps = self.params.substeps  # type: ignore[attr-defined]
        return self.field_.paths(start, weights, steps, substeps, self.dt_ / substeps, rng)

    def _observed(self, latent: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
        """C z + c (..., p) of latent states (..., D), plus observation noise when ``rng``."""
        readout = self.model_.readout
        y = latent @ readout.c.T + readout.offset
        if rng is not None:
            y = y + np.sqrt(readout.r) * rng.standard_normal(y.shape)
        return y

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> np.ndarray:
        """The predictive mean: the average of ``particles`` paths."""
        rng = np.random.default_rng(FORECAST_SEED)
        paths = self._latent_paths([history], steps, self.params.particles, rng)[:, 0]  # type: ignore[attr-defined]
        return self._observed(paths, None).mean(axis=1)

    def one_step_predictions(self, trial: Trial, count: int) -> np.ndarray:
        """The predictive means (m, p) of the last m = min(count, n - 1) samples of ``trial``,
        each from the sample before it (as ``simulate``), by one inference and one particle
        step for a block of samples at once instead of one of each per sample."""
        self._check_history(trial, 1, None)
        m = max(min(count, trial.n_samples - 1), 0)
        histories = [trial.slice(k - 1, k) for k in range(trial.n_samples - m, trial.n_samples)]
        particles = self.params.particles  # type: ignore[attr-defined]
        block = max(1, PARTICLE_STATES // particles)
        rng = np.random.default_rng(FORECAST_SEED)
        means = np.zeros((m, self.n_variables))
        for first in range(0, m, block):
            paths = self._latent_paths(histories[first:first + block], 1, particles, rng)[0]  # (H, particles, D)
            means[first:first + block] = self._observed(paths, None).mean(axis=1)
        return means

    def predictive(self, history: Trial, steps: int, future_inputs: np.ndarray | None,
                   level: float) -> PredictiveInterval:
        """The particles' mean, and their central ``level`` quantiles with observation noise."""
        if not 0 < level < 1:
            raise UsageError(f"--interval {level}: the level must lie strictly between 0 and 1")
        self._check_history(history, steps, future_inputs)
        rng = np.random.default_rng(FORECAST_SEED)
        paths = self._latent_paths([history], steps, self.params.particles, rng)[:, 0]  # type: ignore[attr-defined]
        noisy = self._observed(paths, rng)
        lower, upper = np.quantile(noisy, [0.5 - level / 2, 0.5 + level / 2], axis=1)
        return PredictiveInterval(mean=self._observed(paths, None).mean(axis=1), lower=lower, upper=upper, level=level)

    def sample(self, history: Trial, steps: int, future_inputs: np.ndarray | None, seed: int | None) -> np.ndarray:
        """One path of the observed variables (steps, p), observation noise included."""
        self._check_history(history, steps, future_inputs)
        rng = np.random.default_rng(0 if seed is None else seed % 2**64)
        return self._observed(self._latent_paths([history], steps, 1, rng)[:, 0, 0], rng)

    def drift_on_grid(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """States (G, D) on a regular grid over the inducing points, the posterior mean drift
        there (G, D) and its sd (G,), latent units per unit of time."""
        self._check_fitted()
        grid = self.drift_grid_
        return grid, self.field_.mean_at(grid), self.field_.sd_at(grid)

    def readout(self) -> tuple[np.ndarray, np.ndarray]:
        """C (p, D) and the offset (p,): y = C z + offset + noise."""
        self._check_fitted()
        return self.model_.readout.c, self.model_.readout.offset

    # -- arrays ---------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        grid, mean, sd = self.drift_on_grid()
        return {**_model_arrays(self.model_), "drift_grid": grid, "drift_mean": mean, "drift_sd": sd,
                "elbo": self.elbo_}

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        latent = self.params.latent  # type: ignore[attr-defined]
        self._set_model(_model_from(arrays, latent, self.n_variables))
        g = self.drift_grid_.shape[0]
        expect_array(arrays, "drift_grid", (g, latent))
        expect_array(arrays, "drift_mean", (g, latent))
        expect_array(arrays, "drift_sd", (g,))
        self.elbo_ = expect_array(arrays, "elbo", (None,)).astype(float)


def _every_variable_seen(trials: list[Trial]) -> bool:
    return bool(np.any([~np.isnan(trial.x).all(axis=0) for trial in trials], axis=0).all())
