"""Multiple-shooting training of a continuous-time model on (irregularly sampled) trials.

Long records are cut into overlapping segments of ``length`` intervals; each segment is
integrated from its own observed first sample and compared with the samples after it. Short
segments keep the loss landscape smooth (a single long rollout is chaotic in the weights) while
every segment still tests multi-step prediction. The shooting nodes are the observed samples
(not free parameters), which suits data with little noise.

``ShootingTrainer`` is the ``Trainable`` strategy the shared loop (``dynid.training``) drives:
one epoch is one pass of Adam over the segments in minibatches shuffled by the session's torch
generator, with the learning rate on a cosine schedule from ``lr`` to zero at the last epoch
(a function of the epoch alone, so a resumed run takes the same steps); the validation loss is
the same rollout error on the held-out end of every trial. ``LBFGSTrainer`` is the optional
second strategy: full-batch L-BFGS on the same loss, which fits what minibatch Adam leaves
(the rare transient segments) far further at the same cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dynid.errors import DataError
from dynid.training import TrainingSession, TrainingStep, arrays_to_module, module_to_arrays

if TYPE_CHECKING:
    import torch

    from dynid.models.continuous.integrate import Dynamics


@dataclass(frozen=True)
class SolverSettings:
    """How rollouts are integrated: ``substeps`` fixed steps per interval, or ``adaptive``
    Dormand-Prince with tolerances ``rtol``, ``atol``."""

    substeps: int = 1
    adaptive: bool = False
    rtol: float = 1e-6
    atol: float = 1e-8


@dataclass(frozen=True)
class Segments:
    """S segments of K intervals: x (S, K+1, d) scaled states, deltas (S, K) interval lengths,
    u (S, K+1, m) inputs or None."""

    x: np.ndarray
    deltas: np.ndarray
    u: np.ndarray | None

    @property
    def count(self) -> int:
        return self.x.shape[0]


def segment_trials(trials: list[np.ndarray], d: int, length: int, stride: int = 1) -> Segments:
    """The windows of ``length`` + 1 consecutive samples of the trials, one starting every
    ``stride`` samples.

    trials: (n_i, 1 + d + m) arrays of [t, x, u] rows. A trial shorter than a window gives
    none; DataError when no trial is long enough.
    """
    windows = [np.lib.stride_tricks.sliding_window_view(trial, length + 1, axis=0)[::stride]
               .transpose(0, 2, 1) for trial in trials if trial.shape[0] > length]
    if not windows:
        raise DataError(f"every trial is shorter than one segment of {length + 1} samples; "
                        "lower -p segment")
    rows = np.concatenate(windows)  # (S, K+1, 1 + d + m)
    u = rows[:, :, 1 + d :] if rows.shape[2] > 1 + d else None
    return Segments(x=rows[:, :, 1 : 1 + d], deltas=np.diff(rows[:, :, 0], axis=1), u=u)


class _SegmentRollouts:
    """The loss both training strategies minimise: the rollout MSE of ``network`` (a torch
    module that is a ``Dynamics``) on the fit segments, and the same on the held-out ones."""

    def __init__(self, network: torch.nn.Module, fit: Segments, validation: Segments | None,
                 solver: SolverSettings, device: str) -> None:
        self.network = network
        self.solver = solver
        self.fit = _tensors(fit, device)
        self.validation = None if validation is None else _tensors(validation, device)

    def rollout_loss(self, x: torch.Tensor, deltas: torch.Tensor,
                     u: torch.Tensor | None) -> torch.Tensor:
        """Mean squared error of the rollouts from x[:, 0] against x[:, 1:]."""
        from dynid.models.continuous.integrate import solve

        dynamics: Dynamics = self.network  # type: ignore[assignment]
        predicted = solve(dynamics, x[:, 0], deltas, u, substeps=self.solver.substeps,
                          adaptive=self.solver.adaptive, rtol=self.solver.rtol,
                          atol=self.solver.atol)
        return (predicted[:, 1:] - x[:, 1:]).pow(2).mean()

    def validation_loss(self) -> float | None:
        import torch

        if self.validation is None:
            return None
        with torch.no_grad():
            return float(self.rollout_loss(*self.validation))


class ShootingTrainer(_SegmentRollouts):
    """Adam on the segment rollout MSE, in shuffled minibatches.

    State arrays: the network's weights, Adam's step count and moment estimates.
    """

    def __init__(self, network: torch.nn.Module, fit: Segments, validation: Segments | None,
                 solver: SolverSettings, *, lr: float, batch: int, epochs: int,
                 session: TrainingSession, device: str) -> None:
        super().__init__(network, fit, validation, solver, device)
        self.batch, self.lr, self.epochs = batch, lr, epochs
        self.generator = session.torch_generator
        self.optimizer = _Adam(list(network.parameters()))

    def train_step(self, epoch: int) -> TrainingStep:
        import torch

        x, deltas, u = self.fit
        lr = 0.5 * self.lr * (1.0 + math.cos(math.pi * (epoch - 1) / self.epochs))
        order = torch.randperm(x.shape[0], generator=self.generator).to(x.device)
        total, batches = 0.0, 0
        for start in range(0, x.shape[0], self.batch):
            rows = order[start : start + self.batch]
            loss = self.rollout_loss(x[rows], deltas[rows], None if u is None else u[rows])
            # A parameter the loss does not reach (phnn's G without inputs) gets zero.
            grads = torch.autograd.grad(loss, self.optimizer.params, allow_unused=True,
                                        materialize_grads=True)
            self.optimizer.step(grads, lr)
            total, batches = total + float(loss.detach()), batches + 1
        return TrainingStep(total / batches)

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = module_to_arrays(self.network)
        arrays.update(self.optimizer.state_arrays())
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        arrays_to_module(self.network, {k: v for k, v in arrays.items()
                                        if not k.startswith(_Adam.PREFIX)})
        self.optimizer.load_state_arrays(arrays)


class LBFGSTrainer(_SegmentRollouts):
    """Full-batch L-BFGS (Liu & Nocedal 1989, strong Wolfe line search) on the segment
    rollout MSE, after Adam.

    Why: the segments of a trial's transient are few beside those on its attractor, and
    minibatch Adam with a decaying rate stops long before it fits them (on Van der Pol after
    40 epochs, the fit segments' error was 30x the held-out ends', and forecasts from new
    starts missed by up to 0.9 NRMSE). The loss over all segments is smooth and deterministic,
    where quasi-Newton steps lower it much further at the same cost (there: 40x in 250
    iterations, 90 CPU s). Gradients over all segments are summed in chunks of ``CHUNK``
    segments, so memory stays bounded on long records.

    One epoch is ``ITERATIONS`` iterations of a fresh L-BFGS: its curvature pairs are rebuilt
    every epoch, so the state is the weights alone and a resumed run takes the same steps.
    """

    ITERATIONS = 25
    CHUNK = 4096
    HISTORY = 50

    def train_step(self, epoch: int) -> TrainingStep:
        import torch

        parameters = [p for p in self.network.parameters() if p.requires_grad]
        # No tolerances: an epoch always runs its iterations (the loop's patience stops).
        optimizer = torch.optim.LBFGS(parameters, lr=1.0, max_iter=self.ITERATIONS,
                                      history_size=self.HISTORY, tolerance_grad=0.0,
                                      tolerance_change=0.0, line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            return torch.tensor(self._fit_loss(backward=True))

        optimizer.step(closure)
        return TrainingStep(self._fit_loss(backward=False))

    def _fit_loss(self, *, backward: bool) -> float:
        """The rollout MSE over all fit segments, chunk by chunk; with ``backward``, its
        gradient is accumulated into the weights' ``.grad``."""
        import torch

        x, deltas, u = self.fit
        count = x.shape[0]
        total = 0.0
        for start in range(0, count, self.CHUNK):
            rows = slice(start, start + self.CHUNK)
            with torch.set_grad_enabled(backward):
                part = (self.rollout_loss(x[rows], deltas[rows], None if u is None else u[rows])
                        * (x[rows].shape[0] / count))
            if backward:
                part.backward()
            total += float(part.detach())
        return total

    def state_arrays(self) -> dict[str, np.ndarray]:
        return module_to_arrays(self.network)

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        arrays_to_module(self.network, arrays)


class _Adam:
    """Adam (Kingma & Ba 2015; betas 0.9, 0.999) with its state as plain tensors from the
    start, so a checkpoint taken before the first step has the same names as any other."""

    PREFIX = "adam."

    def __init__(self, params: list[torch.Tensor]) -> None:
        import torch

        self.params = params
        self.first = [torch.zeros_like(p) for p in params]
        self.second = [torch.zeros_like(p) for p in params]
        self.steps = torch.zeros((), dtype=torch.float64)

    def step(self, grads: tuple[torch.Tensor, ...], lr: float) -> None:
        import torch

        self.steps += 1
        correct1 = 1.0 - 0.9 ** float(self.steps)
        correct2 = 1.0 - 0.999 ** float(self.steps)
        with torch.no_grad():
            for p, g, m, v in zip(self.params, grads, self.first, self.second):
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                p.sub_(lr * (m / correct1) / ((v / correct2).sqrt() + 1e-8))

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"{self.PREFIX}steps": self.steps.numpy().copy()}
        for k, (m, v) in enumerate(zip(self.first, self.second)):
            arrays[f"{self.PREFIX}first.{k}"] = m.detach().cpu().numpy().copy()
            arrays[f"{self.PREFIX}second.{k}"] = v.detach().cpu().numpy().copy()
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        self.steps = torch.from_numpy(arrays[f"{self.PREFIX}steps"].copy())
        with torch.no_grad():
            for k, (m, v) in enumerate(zip(self.first, self.second)):
                m.copy_(torch.from_numpy(arrays[f"{self.PREFIX}first.{k}"]))
                v.copy_(torch.from_numpy(arrays[f"{self.PREFIX}second.{k}"]))


def _tensors(segments: Segments, device: str
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    import torch

    def put(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.float64, device=device).contiguous()

    return (put(segments.x), put(segments.deltas),
            None if segments.u is None else put(segments.u))
