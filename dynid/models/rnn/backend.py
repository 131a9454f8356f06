"""What ``plrnn`` and ``alrnn`` share: the hyperparameters of GTF training, the fit through the
shared training loop, forecasts from a teacher-forced warm-up, the states of a recording (at
each sample, the state that warm-up gives a forecast from there), the model-file arrays and
the linear subregions the model visits.

Data are standardised per variable (inputs too); the first N of the M latents are the
observations (identity read-out), the other M - N are free and inferred from the history.

Observation noise: the loss compares the model's own (pre-forcing) predictions with the data,
so zero-mean noise adds a constant to it, not a bias to the map; alpha < 1 forces with a mix of
model and data, so the state carried forward is partly the model's, not the noisy sample;
``smoothing`` forces with Savitzky-Golay-smoothed data (targets stay raw), and ``noise`` adds
fresh Gaussian noise to every batch, which regularises towards maps that tolerate perturbed
states (as in the AL-RNN's training).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, UsageError
from dynid.models.base import (
    Backend,
    Capabilities,
    Hyperparameters,
    LatentStates,
    StepMap,
    expect_array,
    param,
)
from dynid.models.reservoir.readout import Standardiser

if TYPE_CHECKING:
    import torch

    from dynid.models.rnn.cells import LatentCell
    from dynid.models.rnn.gtf import Series

# Histories per batch of ``states``' warm-ups: bounds the memory of long records
# (STATES_CHUNK * warmup * M floats, twice: predictions and forced states).
STATES_CHUNK = 4096

# The arrays of a model file that are not the cell's weights.
_STANDARDISATION_AND_REGION = frozenset(
    {"mean", "scale", "input_mean", "input_scale", "dominant_region"})


@dataclass(frozen=True)
class GTFParams(Hyperparameters):
    latent: int | None = param(None, "latent dimension M >= number of variables N")
    alpha: float | None = param(
        None, "GTF forcing strength in [0, 1]; none = adapted from the Jacobian-product bound")
    forcing_interval: int = param(1, "force the observed latents every this many steps")
    epochs: int = param(60, "epochs (at most; see patience)")
    batches: int = param(100, "batches per epoch")
    batch: int = param(64, "windows per batch")
    sequence: int = param(50, "steps per training window (after the warm-up)")
    warmup: int = param(
        25, "teacher-forced steps that infer the unobserved latents (training and forecasts; "
            "not used when latent = N)")
    lr: float = param(5e-3, "initial learning rate of RAdam")
    lr_end: float = param(1e-4, "final learning rate (geometric decay over the epochs)")
    regularisation: float = param(1e-5, "L2 penalty on the coupling weights")
    noise: float = param(
        0.0, "sd of Gaussian noise added to every batch (standardised units): noise robustness")
    smoothing: int = param(
        0, "Savitzky-Golay window (odd, samples) for the forcing signals of noisy data; 0 = raw")
    validation: float = param(0.1, "fraction of each trial held out for the 20-step error")
    geometry_every: int = param(
        5, "epochs between two checks of a free run as long as the training data: the weights "
           "kept are those whose run best reproduces the data's geometry (D_stsp + D_H)")
    patience: int | None = param(
        20, "epochs without a better free-run geometry (checked every geometry_every); "
            "none = all")

    def __post_init__(self) -> None:
        if self.latent is not None and self.latent < 1:
            raise ValueError(f"latent must be a positive integer, not {self.latent}")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1] or be none, not {self.alpha}")
        for name in ("forcing_interval", "epochs", "batches", "batch", "sequence",
                     "geometry_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be zero or positive, not {self.warmup}")
        if not (self.lr > 0 and self.lr_end > 0):
            raise ValueError("lr and lr_end must be positive")
        if not (self.regularisation >= 0 and self.noise >= 0):
            raise ValueError("regularisation and noise must be zero or positive")
        if self.smoothing < 0 or (self.smoothing and (self.smoothing < 5 or self.smoothing % 2 == 0)):
            raise ValueError(f"smoothing must be 0 or an odd window of at least 5, not {self.smoothing}")
        if not 0.0 < self.validation < 1.0:
            raise ValueError(f"validation must lie strictly between 0 and 1, not {self.validation}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be a positive integer or none, not {self.patience}")


class GTFBackend(Backend):
    """A piecewise-linear RNN trained by GTF. Subclasses give the cell (``_cell``) and the
    latent dimension when ``latent`` is none (``_default_latent``).

    Fitted: ``cell_`` (the torch module, on the CPU), ``mean_``, ``scale_`` (N,) and
    ``input_mean_``, ``input_scale_`` (m,) the standardisations, ``dominant_`` (K,) the slopes
    of the subregion the training data spend most time in (``eigenvalues`` are its Jacobian's).
    """

    capabilities = Capabilities(uniform_steps=True, inputs=True, cuda=True, training=True)

    # -- what a subclass gives -----------------------------------------------------------------
    def _cell(self, latent: int, inputs: int, generator: torch.Generator) -> LatentCell:
        raise NotImplementedError

    def _default_latent(self) -> int:
        raise NotImplementedError

    def _region_metrics(self, slopes: np.ndarray) -> dict[str, Any]:
        """Extra metrics from the subregion slopes (T, K) of a free run."""
        return {}

    # -- shared --------------------------------------------------------------------------------
    @property
    def latent(self) -> int:
        params: GTFParams = self.params  # type: ignore[assignment]
        latent = self._default_latent() if params.latent is None else params.latent
        return latent

    @property
    def warmup(self) -> int:
        """Warm-up samples: none when every latent is observed (the last row is the state)."""
        return self.params.warmup if self.latent > self.n_variables else 0  # type: ignore[attr-defined]

    @property
    def history_length(self) -> int:
        """Samples a forecast reads: the warm-up and the last row, and with ``smoothing`` at
        least one window, so that the forcing signal a forecast starts from is smoothed as the
        training's were (a shorter history would be forced with raw, noisy samples)."""
        return max(self.warmup + 1, self.params.smoothing)  # type: ignore[attr-defined]

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        import torch

        from dynid.models.rnn.gtf import GTFSettings, GTFTraining, Series
        from dynid.runtime import torch_threads
        from dynid.training import TrainingConfig, TrainingSession, block_split, train

        params: GTFParams = self.params  # type: ignore[assignment]
        if self.latent < self.n_variables:
            raise UsageError(f"-p latent={self.latent}: the {self.name} model needs at least as "
                            f"many latents as variables ({self.n_variables})")
        self.mean_, self.scale_ = self._standardiser(data, "x")
        self.input_mean_, self.input_scale_ = self._standardiser(data, "u")
        trials = [self._standardised(trial.x, trial.u) for trial in data.trials]
        unsmoothed = self._note_unsmoothed(data)
        longest = max(len(x) for x, _, _ in trials)
        warmup = self.warmup
        fit_part, held_out = block_split([np.hstack(t) for t in trials], params.validation,
                                         context=warmup)
        sequence = min(params.sequence, max((len(t) for t in fit_part), default=0) - warmup - 1)
        if sequence < 2:
            raise DataError(f"the {self.name} model needs trials of more than {warmup + 3} "
                            f"samples after holding out {params.validation:g} of each (the "
                            f"longest has {longest}); lower -p warmup or -p validation")
        settings = GTFSettings(
            alpha=params.alpha, interval=params.forcing_interval, batch=params.batch,
            batches=params.batches, sequence=sequence, warmup=warmup, epochs=params.epochs,
            lr=params.lr, lr_end=params.lr_end, regularisation=params.regularisation,
            noise=params.noise, geometry_every=params.geometry_every)
        target = torch.device(device)
        n, m = self.n_variables, self.n_inputs

        def series(parts: list[np.ndarray], on: torch.device = target) -> Series:
            return Series.of([(p[:, :n], p[:, n:2 * n], p[:, 2 * n:]) for p in parts], on)

        with torch_threads(self.training_options.threads):
            session = TrainingSession(self.training_options, 0 if seed is None else seed)
            cell = self._cell(self.latent, m, session.torch_generator).to(target)
            strategy = GTFTraining(cell, series(fit_part), series(held_out) if held_out else None,
                                   settings, session)
            result = train(strategy, TrainingConfig(
                max_epochs=params.epochs, patience=params.patience, name=self.name,
                stage=f"{self.name} (GTF)"), session)
            kept = strategy.check()
            self.cell_ = cell.cpu()
            self.metrics_ = {
                "epochs": result.epochs, "stopped": result.stopped,
                "best_epoch": result.best_epoch,
                "free_run_diverged": kept.diverged,
                "free_run_d_stsp": None if kept.diverged else kept.d_stsp,
                "free_run_d_h": None if kept.diverged else kept.d_h,
                "validation_error_20_steps": kept.error_20_steps,
                "alpha": strategy.alpha, "latent": self.latent,
                **({"unsmoothed_trials": unsmoothed} if unsmoothed else {}),
                **self._region_summary(series([np.hstack(t) for t in trials],
                                              torch.device("cpu"))),
            }

    def _note_unsmoothed(self, data: Dataset) -> int:
        """How many trials of ``data`` are shorter than the ``smoothing`` window, and so force
        with raw data (``_standardised``: a Savitzky-Golay window cannot span them), said in a
        notice when there are any. (Forecasts from histories shorter than the window do the
        same, by design; in a fit it is a choice the user made and should hear about.)"""
        window = self.params.smoothing  # type: ignore[attr-defined]
        short = [trial.n_samples for trial in data.trials if window and trial.n_samples < window]
        if short:
            self.training_options.progress.notice(
                f"-p smoothing={window}: {len(short)} of {len(data.trials)} trial(s) are shorter "
                f"than the window (the shortest has {min(short)} samples); they force with raw "
                "data, not smoothed")
        return len(short)

    def _standardiser(self, data: Dataset, part: str) -> tuple[np.ndarray, np.ndarray]:
        values = [getattr(t, part) for t in data.trials if getattr(t, part) is not None]
        if not values:
            return np.zeros(0), np.ones(0)
        scaling = Standardiser.of(values)
        return scaling.mean, scaling.scale

    def _standardised(self, x: np.ndarray, u: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, forcing signals, u) in standardised units of samples x (..., T, N) and inputs
        u (..., T, m) or None (no inputs: u (..., T, 0)); the smoothing runs along T."""
        x = (x - self.mean_) / self.scale_
        u = (np.zeros((*x.shape[:-1], 0)) if u is None
             else (u - self.input_mean_) / self.input_scale_)
        window = self.params.smoothing  # type: ignore[attr-defined]
        if not window or x.shape[-2] < window:
            return x, x, u
        from scipy.signal import savgol_filter  # seconds to import: only when asked for

        return x, savgol_filter(x, window, 2, axis=-2), u

    def _start_states(self, x: np.ndarray, u: np.ndarray | None) -> torch.Tensor:
        """The latent states (B, M), in standardised units, at the ends of B histories x
        (B, W, N) and inputs u (B, W, m) or None, both in data units: the teacher-forced
        warm-up over their forcing signals (``infer_state``). What a forecast starts from
        (W = history_length), and what ``states`` reports at each sample."""
        import torch

        from dynid.models.rnn.gtf import infer_state

        _, d, u = self._standardised(x, u)
        with torch.no_grad():
            return infer_state(self.cell_, torch.as_tensor(d, dtype=torch.float32),
                               torch.as_tensor(u, dtype=torch.float32))

    @staticmethod
    def _batch_of_one(trial: Trial) -> tuple[np.ndarray, np.ndarray | None]:
        """``trial``'s samples (1, T, N) and inputs (1, T, m) or None, for ``_start_states``."""
        return trial.x[None], None if trial.u is None else trial.u[None]

    def states(self, data: Dataset, labels: list[np.ndarray] | None = None) -> LatentStates:
        """The latent trajectory behind ``data`` (``dynid states``): at each sample, the state
        (M,) a forecast from the samples up to it starts from (``_start_states`` over the
        ``history_length`` samples ending there). So the observed latents z_k, k < N, are the
        forcing signals (x_k - mean_k) / scale_k (smoothed with ``smoothing``) and the others
        are carried by the model's map under that forcing. Standardised units; NaN at each
        trial's first ``history_length - 1`` samples (too few for a forecast); no sds, the map being
        deterministic. ``state``: each sample's subregion, where the subclass numbers them
        (``_region_codes``). labels: refused by ``api.states`` (no ``capabilities.labels``)."""
        self._check_fitted()
        latents = [self._trial_states(trial) for trial in data.trials]
        codes = [self._region_codes(z) for z in latents]
        return LatentStates(
            names=tuple(f"z_{k}" for k in range(self.latent)),
            t=np.concatenate([trial.t for trial in data.trials]),
            trial=np.concatenate([np.full(trial.n_samples, k)
                                  for k, trial in enumerate(data.trials)]),
            means=np.concatenate([z.numpy() for z in latents]).astype(float),
            sds=None,
            state=None if codes[0] is None else np.concatenate(codes),  # type: ignore[arg-type]
        )

    def _trial_states(self, trial: Trial) -> torch.Tensor:
        """``states``' latents (T, M) of one trial, NaN where fewer than ``history_length``
        samples lead up to a row; the histories in chunks of ``STATES_CHUNK``."""
        import torch
        from numpy.lib.stride_tricks import sliding_window_view

        width = self.history_length
        found = torch.full((trial.n_samples, self.latent), math.nan)

        def histories(a: np.ndarray) -> np.ndarray:  # (T - width + 1, width, .), no copy
            return sliding_window_view(a, width, axis=0).swapaxes(1, 2)

        if trial.n_samples < width:
            return found
        x = histories(trial.x)
        u = histories(trial.u) if self.inputs_ and trial.u is not None else None
        for first in range(0, len(x), STATES_CHUNK):
            part = slice(first, first + STATES_CHUNK)
            z = self._start_states(x[part], None if u is None else u[part])
            found[width - 1 + first: width - 1 + first + len(z)] = z
        return found

    def _region_codes(self, z: torch.Tensor) -> np.ndarray | None:
        """The subregion (T,) of each latent state z (T, M) as a number, NaN where z is NaN;
        None for cells whose subregions ``states`` does not number."""
        return None

    def _region_summary(self, data: Series) -> dict[str, Any]:
        """The subregions the teacher-forced training data visit (the dominant one kept for
        ``eigenvalues``) and those of a free run over the longest trial."""
        import torch

        from dynid.models.rnn.gtf import infer_state, rollout, teacher_forced

        slopes, run = [], None
        longest = int(np.argmax(data.lengths))
        with torch.no_grad():
            for i, (start, length) in enumerate(zip(data.starts, data.lengths)):
                _, d, u = data.windows(np.array([start]), int(length))
                slopes.append(self.cell_.slopes(teacher_forced(self.cell_, d, u)[0]))
                if i == longest and length > self.warmup + 1:
                    z = infer_state(self.cell_, d[:, : self.warmup + 1], u)
                    steps = int(length) - self.warmup - 1
                    run = self.cell_.slopes(rollout(self.cell_, z, steps, u[:, self.warmup:])[0][0])
        patterns, counts = np.unique(torch.cat(slopes).numpy(), axis=0, return_counts=True)
        self.dominant_ = patterns[np.argmax(counts)].astype(np.float32)
        summary: dict[str, Any] = {"subregions_visited_by_data": int(len(patterns))}
        if run is not None:
            summary["subregions_visited_by_free_run"] = int(len(np.unique(run.numpy(), axis=0)))
            summary.update(self._region_metrics(run.numpy()))
        return summary

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None
                  ) -> np.ndarray:
        run = self._latent_run(history, steps, future_inputs)[:, : self.n_variables]
        return run.numpy().astype(float) * self.scale_ + self.mean_

    def _latent_run(self, history: Trial, steps: int, future_inputs: np.ndarray | None
                    ) -> torch.Tensor:
        """The latent states (steps, M; standardised units) of ``simulate``'s run: its first N
        columns, in data units, are the run."""
        import torch

        from dynid.models.rnn.gtf import rollout

        window = history.slice(history.n_samples - self.history_length)
        z = self._start_states(*self._batch_of_one(window))
        if self.inputs_:
            future = (np.asarray(future_inputs) - self.input_mean_) / self.input_scale_
            last = (window.u[-1:] - self.input_mean_) / self.input_scale_  # type: ignore[index]
            u_run = np.vstack([last, future[:-1]])
        else:
            u_run = np.zeros((steps, 0))
        with torch.no_grad():
            return rollout(self.cell_, z, steps, torch.as_tensor(u_run[None], dtype=torch.float32)
                           )[0][0]

    def step_map(self, history: Trial) -> StepMap:
        """The latent map z -> z' (M; standardised units, which leave the exponents unchanged)
        started from the state inferred over the history, with its analytic Jacobian
        diag(A) + (coupling in z's subregion)."""
        import torch

        self._check_fitted()
        if self.inputs_:
            raise UsageError(f"the {self.name} model takes inputs; Lyapunov exponents are "
                             "defined for autonomous models only")
        step_once = self.cell_.stepper()

        def step(z: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return step_once(torch.as_tensor(z, dtype=torch.float32)).numpy().astype(float)

        def jacobian(z: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return self.cell_.jacobian(torch.as_tensor(z, dtype=torch.float32)).numpy(
                ).astype(float)

        start = self._start_states(*self._batch_of_one(
            history.slice(history.n_samples - self.history_length)))[0]
        return StepMap(state=start.numpy().astype(float), step=step, jacobian=jacobian)

    def eigenvalues(self) -> np.ndarray | None:
        """Eigenvalues (M,) of the Jacobian in the subregion the training data visit most."""
        import torch

        self._check_fitted()
        with torch.no_grad():
            jacobian = self.cell_.region_jacobian(torch.as_tensor(self.dominant_))
        return np.linalg.eigvals(jacobian.numpy().astype(float))

    def arrays(self) -> dict[str, np.ndarray]:
        from dynid.training import module_to_arrays

        self._check_fitted()
        # Names as in _STANDARDISATION_AND_REGION, beside the cell's own.
        return {**module_to_arrays(self.cell_), "mean": self.mean_, "scale": self.scale_,
                "input_mean": self.input_mean_, "input_scale": self.input_scale_,
                "dominant_region": self.dominant_}

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        from dynid.training import arrays_to_module

        n, m = self.n_variables, self.n_inputs
        self.mean_ = expect_array(arrays, "mean", (n,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (n,)).astype(float)
        self.input_mean_ = expect_array(arrays, "input_mean", (m,)).astype(float)
        self.input_scale_ = expect_array(arrays, "input_scale", (m,)).astype(float)
        self.cell_ = self._cell(self.latent, m, torch.Generator().manual_seed(0))
        arrays_to_module(self.cell_, {name: value for name, value in arrays.items()
                                      if name not in _STANDARDISATION_AND_REGION})
        k = int(self.cell_.slopes(torch.zeros(self.latent)).shape[-1])
        self.dominant_ = expect_array(arrays, "dominant_region", (k,)).astype(np.float32)
