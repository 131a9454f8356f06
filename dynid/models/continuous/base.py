"""What the continuous-time backends (``node``, ``phnn``, ``hnn``) share: hyperparameters,
standardisation, multiple-shooting training through the shared loop, forecasting by
integration, and model-file arrays. A backend adds its network (``_network``) and, if it has
one, its energy.

The models live in continuous time, so samples may be irregular and trials may differ in
their sampling; forecasts integrate the learned field over steps of the model's ``dt``
(the median sampling step). Inputs are controls interpolated linearly between samples.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.models.continuous.shooting import (
    LBFGSTrainer,
    Segments,
    ShootingTrainer,
    SolverSettings,
    segment_trials,
)
from dynid.training import (
    TrainingConfig,
    TrainingSession,
    arrays_to_module,
    block_split,
    module_to_arrays,
    train,
)

if TYPE_CHECKING:
    import torch

# Absolute tolerance of the adaptive solver, in standardised units (states of order 1).
ATOL = 1e-8
# The fine-tuning stage starts at this fraction of the first stage's learning rate: its
# weights are already close, and the long windows' loss is steep (an error in the field grows
# along a window), so a full-size step would undo the first stage.
REFINE_LR = 0.1
REFINE_DOC = (
    "trajectory-level fine-tuning after multiple shooting: intervals per window of a second "
    "stage on long windows (starting every `segment` samples), which penalises the phase and "
    "amplitude errors that short segments let accumulate (0 or <= segment: none)")
# The automatic L-BFGS stage (`-p lbfgs=none`): this many iterations when one full-batch loss
# costs at most LBFGS_AUTO_STEPS solver steps (segments x intervals x substeps). 500
# iterations on Van der Pol's 10 trials x 300 samples (23,000 steps) took 180 CPU s; the cap
# keeps the stage under some 7 CPU minutes, and larger data are fitted by Adam alone. With
# fewer Adam epochs than the backend's default (a quick look, a test) the stage shrinks in
# proportion, so that it does not spend minutes after a fit asked to take seconds.
LBFGS_AUTO_ITERATIONS = 500
LBFGS_AUTO_STEPS = 50_000
LBFGS_DOC = (
    "full-batch L-BFGS iterations on the segments after Adam (in epochs of "
    f"{LBFGSTrainer.ITERATIONS}), which fit the rare transient segments Adam leaves: "
    f"forecasts from new initial states (0: none; none: {LBFGS_AUTO_ITERATIONS}, times "
    "epochs / the default epochs when fewer, if the segments need at most "
    f"{LBFGS_AUTO_STEPS} solver steps in all, else none; --max-time bounds it too)")
_NETWORK = "net."


@dataclass(frozen=True)
class ContinuousParams(Hyperparameters):
    width: int = param(64, "hidden units per layer of the network(s)")
    depth: int = param(2, "hidden layers of the network(s)")
    segment: int = param(
        20, "multiple shooting: sampling intervals per training segment (each integrated from "
        "its observed first sample)")
    substeps: int = param(2, "fixed-step solver: steps per sampling interval")
    epochs: int = param(300, "most passes over the segments")
    batch: int = param(64, "segments per Adam step")
    lr: float = param(3e-3, "Adam learning rate at the start (cosine decay to 0 at `epochs`)")
    patience: int = param(30, "stop after this many epochs without a lower validation loss")
    validation: float = param(
        0.2, "fraction of every trial's end held out for early stopping (0: none, train "
        "all epochs)")
    lbfgs: int | None = param(0, LBFGS_DOC)
    refine: int = param(0, REFINE_DOC)
    refine_epochs: int = param(60, "fine-tuning: most passes over the long windows")

    def __post_init__(self) -> None:
        if self.refine < 0:
            raise ValueError(f"refine must be 0 or a positive integer, not {self.refine}")
        if self.lbfgs is not None and self.lbfgs < 0:
            raise ValueError(f"lbfgs must be none, 0 or a positive integer, not {self.lbfgs}")
        for name in ("width", "depth", "segment", "substeps", "epochs", "batch", "patience",
                     "refine_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, not {self.lr}")
        if not 0 <= self.validation < 1:
            raise ValueError(f"validation must lie in [0, 1), not {self.validation}")


@dataclass(frozen=True)
class SolvedParams(ContinuousParams):
    """Hyperparameters of a backend that offers both solvers."""

    solver: Literal["rk4", "dopri5"] = param(
        "rk4", "rk4 (classical Runge-Kutta, `substeps` fixed steps per sampling interval) or "
        "dopri5 (adaptive Dormand-Prince 5(4) to relative tolerance `rtol`; slower)")
    rtol: float = param(1e-6, "dopri5: relative tolerance")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.rtol < 1:
            raise ValueError(f"rtol must lie in (0, 1), not {self.rtol}")


class ContinuousBackend(Backend):
    """A learned vector field dx/dt = f(x, u), trained by multiple shooting.

    Fitted arrays (d variables, m inputs): ``center``, ``scale`` (d,) and ``input_center``,
    ``input_scale`` (m,), the standardisation z = (x - center) / scale the network works on;
    the network's weights under ``net.`` + their torch names (float64).
    """

    capabilities = Capabilities(uniform_steps=False, inputs=True, cuda=True, training=True)

    # -- what a backend provides -----------------------------------------------------------------
    @abstractmethod
    def _network(self, d: int, m: int) -> torch.nn.Module:
        """A fresh network (a ``Dynamics``) for d variables and m inputs, float64 on the CPU."""

    def _centres(self, x: np.ndarray) -> np.ndarray:
        """The centre of the standardisation of states x (N, d); the mean by default."""
        return x.mean(axis=0)

    def _initialise(self, network: torch.nn.Module, rows: list[np.ndarray]) -> None:
        """Set a fresh network's weights from the fit rows ([t, z, u] per trial) before
        training; nothing by default (the network's own initialisation)."""

    def _after_training(self) -> dict[str, Any]:
        """Metrics a backend adds once trained (e.g. a stability check)."""
        return {}

    def _solver(self) -> SolverSettings:
        params = self.params
        adaptive = isinstance(params, SolvedParams) and params.solver == "dopri5"
        rtol = params.rtol if isinstance(params, SolvedParams) else 1e-6
        return SolverSettings(params.substeps, adaptive, rtol, ATOL)  # type: ignore[attr-defined]

    # -- fitting ---------------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        import torch

        from dynid.runtime import torch_threads
        from dynid.training.networks import seeded

        params: ContinuousParams = self.params  # type: ignore[assignment]
        options = self.training_options
        stacked = np.vstack([trial.x for trial in data.trials])
        self.center_ = self._centres(stacked)
        self.scale_ = _spread(stacked)
        if data.inputs:
            inputs = np.vstack([trial.u for trial in data.trials])
            self.input_center_, self.input_scale_ = inputs.mean(axis=0), _spread(inputs)
        else:
            self.input_center_ = self.input_scale_ = np.zeros(0)
        rows = [self._rows(trial) for trial in data.trials]
        head, tail = self._split(rows, params)
        stages = [_Stage("training", params.segment, 1, params.epochs, params.lr)]
        lbfgs = self._lbfgs_iterations(head, params)
        if lbfgs:
            stages.append(_Stage("lbfgs", params.segment, 1,
                                 -(-lbfgs // LBFGSTrainer.ITERATIONS), None))
        refine = min(params.refine, _longest(head))
        if refine > params.segment:
            stages.append(_Stage("refine", refine, params.segment, params.refine_epochs,
                                 params.lr * REFINE_LR))
        with torch_threads(options.threads):
            network = seeded(lambda: self._network(data.n_variables, data.n_inputs),
                             0 if seed is None else seed)
            self._initialise(network, head)
            network = network.to(device)
            session = TrainingSession(options, 0 if seed is None else seed)
            trainers: list[ShootingTrainer | LBFGSTrainer] = []
            stage_metrics: dict[str, Any] = {}
            for stage in stages:
                fit_part = segment_trials(head, data.n_variables, stage.length, stage.stride)
                validation = (None if tail is None
                              else _windows(tail, data.n_variables, stage.length))
                trainer: ShootingTrainer | LBFGSTrainer = (
                    LBFGSTrainer(network, fit_part, validation, self._solver(), device)
                    if stage.lr is None else
                    ShootingTrainer(network, fit_part, validation, self._solver(), lr=stage.lr,
                                    batch=params.batch, epochs=stage.epochs, session=session,
                                    device=device))
                # A later stage starts from trained weights: it keeps them unless it lowers
                # the held-out error (the loop's best is only among its own epochs).
                before = trainer.validation_loss() if trainers else None
                start = trainer.state_arrays() if before is not None else {}
                first = not trainers
                name = self.name if first else f"{self.name}-{stage.key}"
                result = train(trainer, TrainingConfig(
                    max_epochs=stage.epochs, patience=params.patience if validation else None,
                    name=name, stage=f"{self.name} {stage.key}"), session)
                best = result.best_validation_loss
                kept = before is None or (best is not None and best < before)
                if not kept:
                    trainer.load_state_arrays(start)
                prefix = "" if first else f"{stage.key}_"
                stage_metrics.update({
                    f"{prefix}epochs": result.epochs, f"{prefix}stopped": result.stopped,
                    f"{prefix}validation_mse": best, **({} if first else {f"{prefix}kept": kept})})
                trainers.append(trainer)
            with torch.no_grad():
                fit_loss = float(trainers[0].rollout_loss(*trainers[0].fit))
            self.network_ = network.cpu()
        self.metrics_ = {
            **stage_metrics, "segments": trainers[0].fit[0].shape[0], "segment_mse": fit_loss,
            **self._after_training(),
        }

    def _rows(self, trial: Trial) -> np.ndarray:
        """[t, standardised x, standardised u] rows (n, 1 + d + m) of a trial."""
        parts = [trial.t[:, None], (trial.x - self.center_) / self.scale_]
        if trial.u is not None and self.inputs_:
            parts.append((trial.u - self.input_center_) / self.input_scale_)
        return np.hstack(parts)

    @staticmethod
    def _lbfgs_iterations(head: list[np.ndarray], params: ContinuousParams) -> int:
        """L-BFGS iterations: ``lbfgs`` as given, or when it is None the automatic choice:
        none if a full-batch loss on the fit rows ``head`` costs more than LBFGS_AUTO_STEPS
        solver steps, else LBFGS_AUTO_ITERATIONS, scaled by ``epochs`` / the Params' default
        epochs when that is below 1 (rounded up)."""
        if params.lbfgs is not None:
            return params.lbfgs
        segments = sum(max(trial.shape[0] - params.segment, 0) for trial in head)
        steps = segments * params.segment * params.substeps
        if steps > LBFGS_AUTO_STEPS:
            return 0
        share = min(1.0, params.epochs / type(params)().epochs)
        return math.ceil(LBFGS_AUTO_ITERATIONS * share)

    def _split(self, rows: list[np.ndarray], params: ContinuousParams
               ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """Fit and held-out rows of every trial; no held-out rows when validation is off or
        the held-out ends are shorter than one segment."""
        if params.validation == 0:
            return rows, None
        head, tail = block_split(rows, params.validation)
        if _longest(tail) < params.segment:
            return rows, None
        return head, tail

    # -- simulation ------------------------------------------------------------------------------
    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None
                  ) -> np.ndarray:
        """Integrate from the last history sample over ``steps`` steps of dt; inputs run
        linearly from the history's last row through ``future_inputs`` (one row per step)."""
        z = self._trajectory((history.x[-1] - self.center_) / self.scale_, steps,
                            self._controls(history, future_inputs))
        return z[1:] * self.scale_ + self.center_

    def _controls(self, history: Trial, future_inputs: np.ndarray | None) -> np.ndarray | None:
        if not self.inputs_ or future_inputs is None or history.u is None:
            return None
        u = np.vstack([history.u[-1:], future_inputs])
        return (u - self.input_center_) / self.input_scale_

    def _trajectory(self, z0: np.ndarray, steps: int, controls: np.ndarray | None = None
                   ) -> np.ndarray:
        """Standardised states (steps + 1, d) every dt from z0 (d,); controls (steps + 1, m)."""
        import torch

        from dynid.models.continuous.integrate import solve
        from dynid.runtime import torch_threads

        solver = self._solver()
        # One thread, as in training: a rollout is thousands of tiny tensor operations, and
        # torch's default of one thread per core makes each wait on the others (17x slower
        # in wall time on a loaded 2-core machine, measured).
        with torch.no_grad(), torch_threads(None):
            x0 = torch.as_tensor(z0, dtype=torch.float64)[None]
            deltas = torch.full((1, steps), float(self.dt_), dtype=torch.float64)
            u = None if controls is None else torch.as_tensor(controls, dtype=torch.float64)[None]
            z = solve(self.network_, x0, deltas, u, substeps=solver.substeps,  # type: ignore[arg-type]
                      adaptive=solver.adaptive, rtol=solver.rtol, atol=solver.atol)
        return z[0].numpy()

    # -- arrays ----------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        arrays = {"center": self.center_, "scale": self.scale_,
                  "input_center": self.input_center_, "input_scale": self.input_scale_}
        arrays.update({_NETWORK + k: v for k, v in module_to_arrays(self.network_).items()})
        return arrays

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d, m = self.n_variables, self.n_inputs
        self.center_ = expect_array(arrays, "center", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        self.input_center_ = expect_array(arrays, "input_center", (m,)).astype(float)
        self.input_scale_ = expect_array(arrays, "input_scale", (m,)).astype(float)
        self.network_ = self._network(d, m)
        for name, like in module_to_arrays(self.network_).items():
            expect_array(arrays, _NETWORK + name, like.shape)
        arrays_to_module(self.network_, {k[len(_NETWORK):]: v for k, v in arrays.items()
                                         if k.startswith(_NETWORK)})


@dataclass(frozen=True)
class _Stage:
    """One training stage: windows of ``length`` intervals, one starting every ``stride``
    samples, at most ``epochs`` epochs; Adam from learning rate ``lr``, or full-batch L-BFGS
    when ``lr`` is None. ``key`` names its checkpoint and prefixes its metrics."""

    key: str
    length: int
    stride: int
    epochs: int
    lr: float | None


def redefault(name: str, default: object) -> Any:
    """ContinuousParams' field ``name`` with another default and the same doc, for a backend
    whose defaults differ."""
    return param(default, ContinuousParams.__dataclass_fields__[name].metadata["doc"])


def _longest(trials: list[np.ndarray]) -> int:
    """Intervals in the longest of the trials (n_i, ...)."""
    return max((trial.shape[0] - 1 for trial in trials), default=0)


def _windows(trials: list[np.ndarray], d: int, length: int) -> Segments:
    """Every window of ``length`` intervals, shortened to the longest trial (held-out ends
    may be shorter than a fine-tuning window)."""
    return segment_trials(trials, d, min(length, _longest(trials)))


def _spread(x: np.ndarray) -> np.ndarray:
    spread = x.std(axis=0)
    return np.where(spread > 0, spread, 1.0)



class EnergyBackend(ContinuousBackend):
    """A continuous-time backend whose network has an energy, ``hamiltonian(z)`` (B,) of
    standardised states (``phnn``, ``hnn``)."""

    def energy(self, x: np.ndarray) -> np.ndarray:
        """The learned energy H (N,) of states x (N, d) in the data's units."""
        import torch

        self._check_fitted()
        z = torch.as_tensor((np.asarray(x, dtype=float) - self.center_) / self.scale_)
        with torch.no_grad():
            return self.network_.hamiltonian(z).numpy()  # type: ignore[operator]
