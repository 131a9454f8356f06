"""``train``: the epoch loop every torch model in dynid trains through.

The model supplies its per-epoch step as a ``Trainable`` strategy (Adam on minibatches,
teacher forcing, or the proximal-gradient steps of the causal cMLP alike); the loop owns what
is common: early stopping on the validation loss with the best state restored, the
``--max-time`` deadline, periodic checkpoints and ``--resume``, and progress reports.

Resuming is exact on the CPU: a checkpoint holds the strategy's whole state (weights and
optimiser state, as named arrays), the session's random generators and the loop's counters, so
the resumed run takes the same steps as one never interrupted. Randomness a strategy uses must
come from ``TrainingSession.torch_generator`` / ``numpy_rng`` for this to hold.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from dynid.errors import ComputationError, UsageError
from dynid.runtime import EpochReport, Progress, SilentProgress
from dynid.training import checkpoint
from dynid.training.weights import check_arrays

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TrainingStep:
    """What one epoch reports: its training ``loss`` and whether the strategy has
    ``converged`` (the loop then stops)."""

    loss: float
    converged: bool = False


class Trainable(Protocol):
    """A model's training strategy, as ``train`` drives it."""

    def train_step(self, epoch: int) -> TrainingStep:
        """Run epoch ``epoch`` (from 1)."""
        ...

    def validation_loss(self) -> float | None:
        """The loss on held-out data now; None when there is none (no early stopping)."""
        ...

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything the next step depends on (weights, optimiser state) as named CPU arrays,
        copies bit-identical to the tensors."""
        ...

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Set the state from arrays as ``state_arrays`` gives them (names, shapes and dtypes
        already checked)."""
        ...


@dataclass(frozen=True)
class TrainingOptions:
    """The user's training knobs (``--max-time``, ``--checkpoint``, ``--resume``,
    ``--threads``) and where progress goes.

    max_time_s: wall-clock budget of the whole run; checkpoint_dir: where checkpoints go (None:
    none); resume: continue from the checkpoints there; checkpoint_every_s: least seconds
    between two checkpoints of one training call (0: every epoch); threads: torch intra-op
    threads (None: ``dynid.runtime.DEFAULT_TORCH_THREADS``).
    """

    max_time_s: float | None = None
    checkpoint_dir: str | None = None
    resume: bool = False
    checkpoint_every_s: float = 60.0
    threads: int | None = None
    progress: Progress = field(default_factory=SilentProgress)

    def __post_init__(self) -> None:
        if self.max_time_s is not None and not (math.isfinite(self.max_time_s)
                                                and self.max_time_s > 0):
            raise UsageError(f"--max-time {self.max_time_s}: must be a positive number of seconds")
        if self.resume and self.checkpoint_dir is None:
            raise UsageError("--resume needs --checkpoint DIR (where the checkpoints are)")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads {self.threads}: must be at least 1")

    @property
    def only_max_time(self) -> bool:
        """Whether --max-time is the only training option set (what a backend with a time
        budget but no training takes)."""
        return self.checkpoint_dir is None and not self.resume and self.threads is None

    @property
    def trains(self) -> bool:
        """Whether any training option differs from the default (for methods that do not
        train, which refuse them)."""
        return (self.max_time_s is not None or self.checkpoint_dir is not None or self.resume
                or self.threads is not None)


class TrainingSession:
    """What the training calls of one run share: the options, the ``--max-time`` deadline
    (counted from the session's creation) and the random generators, seeded with ``seed``."""

    def __init__(self, options: TrainingOptions | None = None, seed: int = 0) -> None:
        import torch

        self.options = options if options is not None else TrainingOptions()
        self.seed = seed
        self.deadline = (None if self.options.max_time_s is None
                         else time.monotonic() + self.options.max_time_s)
        self.torch_generator: torch.Generator = torch.Generator().manual_seed(seed)
        self.numpy_rng = np.random.default_rng(seed % 2**64)  # numpy takes no negative seeds
        self.time_up = False
        # Epochs trained (or resumed) in this session: the deadline stops none before the
        # first, so --max-time never leaves a model untrained (its initial weights).
        self.epochs_trained = 0
        if self.options.checkpoint_dir is not None:
            Path(self.options.checkpoint_dir).mkdir(parents=True, exist_ok=True)

    def checkpoint_path(self, name: str) -> Path | None:
        directory = self.options.checkpoint_dir
        return None if directory is None else Path(directory) / f"{name}.npz"

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


@dataclass(frozen=True)
class TrainingConfig:
    """One training call: at most ``max_epochs`` epochs; with a validation loss, stop after
    ``patience`` epochs (None: never) without an improvement by more than ``min_delta``;
    ``name`` keys its checkpoint file, ``stage`` labels its progress."""

    max_epochs: int
    patience: int | None = None
    min_delta: float = 0.0
    name: str = "training"
    stage: str = "training"


# Key of the per-epoch loss history in a model's fit metrics (``TrainingResult.curve``); the
# report draws its training curve from it.
TRAINING_CURVE = "training_curve"
# A longer history is thinned to about this many epochs in the fit metrics.
MAX_CURVE_POINTS = 400


@dataclass(frozen=True)
class TrainingResult:
    """epochs: completed; best_epoch and best_validation_loss (None without validation);
    stopped: ``converged``, ``patience``, ``max_time`` or ``max_epochs``; resumed_from: the
    epoch a checkpoint was resumed at (None: started fresh); losses and validation_losses: one
    per epoch, 1 to ``epochs`` (validation None where the strategy has none)."""

    epochs: int
    best_epoch: int | None
    best_validation_loss: float | None
    stopped: str
    resumed_from: int | None = None
    losses: tuple[float, ...] = ()
    validation_losses: tuple[float | None, ...] = ()

    def curve(self, max_points: int = MAX_CURVE_POINTS) -> dict[str, list]:
        """The loss history for a model's fit metrics (under ``TRAINING_CURVE``): ``epoch``,
        ``loss`` and, with validation, ``validation_loss`` lists of equal length. Longer
        histories keep about ``max_points`` evenly spaced epochs plus the first, the last and
        the best, so the file stays small and the curve's shape is kept."""
        n = len(self.losses)
        keep = set(np.unique(np.linspace(0, n - 1, min(n, max_points)).round().astype(int)).tolist())
        if self.best_epoch is not None and 1 <= self.best_epoch <= n:
            keep.add(self.best_epoch - 1)
        index = sorted(keep) if n else []
        curve: dict[str, list] = {"epoch": [i + 1 for i in index],
                                  "loss": [self.losses[i] for i in index]}
        if any(v is not None for v in self.validation_losses):
            curve["validation_loss"] = [self.validation_losses[i] for i in index]
        return curve


@dataclass
class _Counters:
    epoch: int = 0
    best_epoch: int | None = None
    best_loss: float = math.inf
    since_best: int = 0
    best: dict[str, np.ndarray] | None = None
    stopped: str | None = None
    losses: list[float] = field(default_factory=list)
    validation_losses: list[float | None] = field(default_factory=list)

    def meta(self) -> dict[str, object]:
        return {"epoch": self.epoch, "best_epoch": self.best_epoch,
                "best_loss": None if math.isinf(self.best_loss) else self.best_loss,
                "since_best": self.since_best, "stopped": self.stopped,
                "losses": self.losses, "validation_losses": self.validation_losses}


def train(strategy: Trainable, config: TrainingConfig,
          session: TrainingSession | None = None) -> TrainingResult:
    """Run ``strategy`` for up to ``config.max_epochs`` epochs and leave it in its best state
    (lowest validation loss; the last state when it has no validation loss).

    Stops early when the strategy converges, after ``patience`` epochs without improvement, or
    at the session's ``--max-time`` deadline (said once per session through its progress) once
    the session has trained an epoch (a deadline spent before the first, as on setting up a
    large fit, would leave the initial weights).
    With ``resume``, continues from this call's checkpoint (a finished call is restored, not
    rerun).
    """
    session = session if session is not None else TrainingSession()
    options = session.options
    path = session.checkpoint_path(config.name)
    counters = _Counters()
    resumed_from = None
    start = _fingerprint(config, strategy.state_arrays()) if path is not None else ""
    if options.resume and path is not None and path.exists():
        stored = checkpoint.load(path)
        # A checkpoint of another start (other data, options, or an earlier fit that ended
        # elsewhere) would continue the wrong training: it is trained afresh instead.
        if stored.meta.get("start") == start:
            counters = _restore(stored, strategy, session)
            resumed_from = counters.epoch
            session.epochs_trained += counters.epoch
            if counters.stopped is not None:
                return _result(counters, resumed_from)
    started = last_saved = time.monotonic()
    first_epoch = counters.epoch
    while counters.stopped is None:
        if counters.epoch >= config.max_epochs:
            counters.stopped = "max_epochs"
            break
        if session.out_of_time() and session.epochs_trained > 0:
            counters.stopped = "max_time"
            break
        step = strategy.train_step(counters.epoch + 1)
        counters.epoch += 1
        session.epochs_trained += 1
        if not math.isfinite(step.loss):
            raise ComputationError(f"{config.stage}: training diverged at epoch {counters.epoch}")
        validation = strategy.validation_loss()
        counters.losses.append(float(step.loss))
        # A non-finite validation loss cannot go into a checkpoint's JSON; it is no best either.
        counters.validation_losses.append(
            float(validation) if validation is not None and math.isfinite(validation) else None)
        if validation is not None:
            if validation < counters.best_loss - config.min_delta:
                counters.best_loss, counters.best_epoch, counters.since_best = (
                    validation, counters.epoch, 0)
                counters.best = strategy.state_arrays()
            else:
                counters.since_best += 1
        now = time.monotonic()
        options.progress.update(_report(config, counters, step.loss, validation, started,
                                        first_epoch, now, session.deadline))
        if step.converged:
            counters.stopped = "converged"
        elif config.patience is not None and counters.since_best >= config.patience:
            counters.stopped = "patience"
        elif path is not None and now - last_saved >= options.checkpoint_every_s:
            _save(path, strategy, counters, session, start)
            last_saved = now
    if path is not None:
        # Before the best state is restored: a run cut short by --max-time resumes from here.
        _save(path, strategy, counters, session, start)
    if counters.best is not None:
        strategy.load_state_arrays(counters.best)
    if counters.stopped == "max_time" and not session.time_up:
        session.time_up = True
        options.progress.notice(
            f"--max-time {options.max_time_s:g} s reached in {config.stage} at epoch "
            f"{counters.epoch}: stopped, keeping the best weights so far")
    return _result(counters, resumed_from)


def _report(config: TrainingConfig, counters: _Counters, loss: float,
            validation: float | None, started: float, first_epoch: int, now: float,
            deadline: float | None) -> EpochReport:
    elapsed = now - started
    left = (config.max_epochs - counters.epoch) * elapsed / (counters.epoch - first_epoch)
    if deadline is not None:
        left = min(left, max(deadline - now, 0.0))
    return EpochReport(config.stage, counters.epoch, config.max_epochs, loss, validation,
                       elapsed, left)


def _fingerprint(config: TrainingConfig, arrays: dict[str, np.ndarray]) -> str:
    """A digest of a training call's start: its stage and the strategy's first state."""
    digest = hashlib.sha256(config.stage.encode())
    for name in sorted(arrays):
        digest.update(name.encode())
        digest.update(str(arrays[name].dtype).encode())
        digest.update(repr(arrays[name].shape).encode())
        digest.update(np.ascontiguousarray(arrays[name]).tobytes())
    return digest.hexdigest()


def _save(path: Path, strategy: Trainable, counters: _Counters, session: TrainingSession,
          start: str) -> None:
    meta = {**counters.meta(), "start": start,
            "numpy_rng": session.numpy_rng.bit_generator.state}
    checkpoint.save(path, checkpoint.Checkpoint(
        strategy.state_arrays(), counters.best,
        session.torch_generator.get_state().numpy().copy(), meta))


def _restore(stored: checkpoint.Checkpoint, strategy: Trainable,
             session: TrainingSession) -> _Counters:
    """Load a checkpoint into the strategy and the session; the loop's counters from it.

    A call that had finished is restored to its best state; one cut short by ``--max-time``
    (or interrupted) continues.
    """
    import torch

    meta = stored.meta
    like = strategy.state_arrays()
    check_arrays(stored.state, like)
    if stored.best is not None:
        check_arrays(stored.best, like)
    strategy.load_state_arrays(stored.state)
    session.torch_generator.set_state(torch.from_numpy(stored.torch_rng.copy()))
    session.numpy_rng.bit_generator.state = meta["numpy_rng"]
    best_loss = meta["best_loss"]
    stopped = None if meta["stopped"] == "max_time" else meta["stopped"]
    counters = _Counters(epoch=int(meta["epoch"]), best_epoch=meta["best_epoch"],
                         best_loss=math.inf if best_loss is None else float(best_loss),
                         since_best=int(meta["since_best"]), best=stored.best, stopped=stopped,
                         losses=list(meta.get("losses", [])),
                         validation_losses=list(meta.get("validation_losses", [])))
    if counters.stopped is not None and counters.best is not None:
        strategy.load_state_arrays(counters.best)
    return counters


def _result(counters: _Counters, resumed_from: int | None) -> TrainingResult:
    assert counters.stopped is not None
    return TrainingResult(counters.epoch, counters.best_epoch,
                          None if math.isinf(counters.best_loss) else counters.best_loss,
                          counters.stopped, resumed_from, tuple(counters.losses),
                          tuple(counters.validation_losses))
