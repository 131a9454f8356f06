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
    where quasi-Newton steps lower it much further at the same cost (there: 80x in 250
    iterations, 100 CPU s). Gradients over all segments are summed in chunks of ``CHUNK``
    segments, so memory stays bounded on long records.

    One epoch is ``ITERATIONS`` iterations. The curvature memory carries over from epoch to
    epoch (rebuilding it every epoch left the error 6x higher after twice the iterations),
    so it is part of the state arrays, padded to ``HISTORY`` pairs, and a resumed run takes
    the same steps.
    """

    ITERATIONS = 25
    CHUNK = 4096
    HISTORY = 50
    PREFIX = "lbfgs."

    def __init__(self, network: torch.nn.Module, fit: Segments, validation: Segments | None,
                 solver: SolverSettings, device: str) -> None:
        import torch

        super().__init__(network, fit, validation, solver, device)
        self.parameters = [p for p in network.parameters() if p.requires_grad]
        # No tolerances: an epoch always runs its iterations (the loop's patience stops).
        self.optimizer = torch.optim.LBFGS(
            self.parameters, lr=1.0, max_iter=self.ITERATIONS, history_size=self.HISTORY,
            tolerance_grad=0.0, tolerance_change=0.0, line_search_fn="strong_wolfe")
        self.size = sum(p.numel() for p in self.parameters)

    def train_step(self, epoch: int) -> TrainingStep:
        import torch

        def closure() -> torch.Tensor:
            self.optimizer.zero_grad()
            return torch.tensor(self._fit_loss(backward=True))

        self.optimizer.step(closure)
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
        """The weights, and L-BFGS's memory: ``count`` stored pairs of directions and steps
        (padded to HISTORY rows of the flattened weights), their 1 / (y . s), the last
        direction and gradient, and the scalars t, H_diag, previous loss, iteration and
        evaluation counts (all zero before the first step)."""
        arrays = module_to_arrays(self.network)
        state = self.optimizer.state.get(self.parameters[0], {})
        dirs, steps = np.zeros((2, self.HISTORY, self.size))
        ro = np.zeros(self.HISTORY)
        count = len(state.get("old_dirs", []))
        for k in range(count):
            dirs[k] = state["old_dirs"][k].detach().cpu().numpy()
            steps[k] = state["old_stps"][k].detach().cpu().numpy()
            ro[k] = float(state["ro"][k])
        vectors = {name: (state[name].detach().cpu().numpy().copy() if name in state
                          else np.zeros(self.size)) for name in ("d", "prev_flat_grad")}
        scalars = np.array([float(state.get(name, 0.0)) for name in _LBFGS_SCALARS])
        arrays.update({f"{self.PREFIX}count": np.array(count), f"{self.PREFIX}dirs": dirs,
                       f"{self.PREFIX}steps": steps, f"{self.PREFIX}ro": ro,
                       f"{self.PREFIX}d": vectors["d"],
                       f"{self.PREFIX}prev_flat_grad": vectors["prev_flat_grad"],
                       f"{self.PREFIX}scalars": scalars})
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        arrays_to_module(self.network, {k: v for k, v in arrays.items()
                                        if not k.startswith(self.PREFIX)})
        self.optimizer.state.clear()
        scalars = dict(zip(_LBFGS_SCALARS, arrays[f"{self.PREFIX}scalars"].tolist()))
        if scalars["n_iter"] == 0:
            return  # not started: L-BFGS initialises itself
        device = self.parameters[0].device

        def put(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a.copy(), dtype=torch.float64, device=device)

        count = int(arrays[f"{self.PREFIX}count"])
        self.optimizer.state[self.parameters[0]] = {
            "func_evals": int(scalars["func_evals"]), "n_iter": int(scalars["n_iter"]),
            "t": scalars["t"], "H_diag": put(np.array(scalars["H_diag"])),
            "prev_loss": scalars["prev_loss"],
            "d": put(arrays[f"{self.PREFIX}d"]),
            "prev_flat_grad": put(arrays[f"{self.PREFIX}prev_flat_grad"]),
            "old_dirs": [put(row) for row in arrays[f"{self.PREFIX}dirs"][:count]],
            "old_stps": [put(row) for row in arrays[f"{self.PREFIX}steps"][:count]],
            "ro": [put(np.array(value)) for value in arrays[f"{self.PREFIX}ro"][:count]],
        }


# torch's L-BFGS state entries that are single numbers.
_LBFGS_SCALARS = ("t", "H_diag", "prev_loss", "n_iter", "func_evals")


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
