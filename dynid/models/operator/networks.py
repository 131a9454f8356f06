"""What the learned Koopman bases (``singular_functions``, ``autoencoder``) share: small tanh
MLPs and the ``Trainable`` strategy that runs Adam on minibatches of a loss through the shared
training loop (``dynid.training``).

Imported only when a learned basis is fitted or loaded (it imports torch at module level), so
listing backends stays cheap. Everything is float64: the post-hoc moment estimators need the
precision, and the networks are small.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from dynid.training import (
    TrainingSession,
    TrainingStep,
    arrays_to_module,
    module_to_arrays,
    tensors_to_arrays,
)

_ADAM = "adam."


def mlp(inputs: int, width: int, depth: int, outputs: int) -> nn.Sequential:
    """A float64 tanh MLP inputs -> ``depth`` hidden layers of ``width`` -> outputs (linear)."""
    layers: list[nn.Module] = []
    size = inputs
    for _ in range(depth):
        layers += [nn.Linear(size, width), nn.Tanh()]
        size = width
    layers.append(nn.Linear(size, outputs))
    return nn.Sequential(*layers).double()


def seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    """``build()`` with torch's default initialisation drawn from ``seed`` (torch's global
    generator is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


class MinibatchAdam:
    """Adam on ``loss(rows)`` over minibatches of the first axis of ``fit`` (one epoch = one
    shuffled pass, the order drawn from the session's torch generator); the validation loss is
    ``loss(validation)``. State arrays: the module's weights and Adam's state, created zero
    before the first step so every checkpoint has the same names."""

    def __init__(self, module: nn.Module, loss: Callable[[torch.Tensor], torch.Tensor],
                 fit: torch.Tensor, validation: torch.Tensor | None, *, lr: float,
                 batch: int, session: TrainingSession) -> None:
        self.module, self.loss = module, loss
        self.fit, self.validation = fit, validation
        self.batch, self.generator = batch, session.torch_generator
        self.parameters = list(module.parameters())
        self.optimizer = torch.optim.Adam(self.parameters, lr=lr)
        for p in self.parameters:
            self.optimizer.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                       "exp_avg_sq": torch.zeros_like(p)}

    def train_step(self, epoch: int) -> TrainingStep:
        order = torch.randperm(self.fit.shape[0], generator=self.generator)
        total = 0.0
        for rows in torch.split(order, self.batch):
            self.optimizer.zero_grad()
            loss = self.loss(self.fit[rows])
            loss.backward()
            self.optimizer.step()
            total += float(loss.detach()) * len(rows)
        return TrainingStep(total / self.fit.shape[0])

    def validation_loss(self) -> float | None:
        if self.validation is None:
            return None
        with torch.no_grad():
            return float(self.loss(self.validation))

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = module_to_arrays(self.module)
        for k, p in enumerate(self.parameters):
            state = self.optimizer.state[p]
            arrays.update(tensors_to_arrays({f"{_ADAM}{k}.{key}": state[key]
                                             for key in ("step", "exp_avg", "exp_avg_sq")}))
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        arrays_to_module(self.module, {k: v for k, v in arrays.items() if not k.startswith(_ADAM)})
        for k, p in enumerate(self.parameters):
            self.optimizer.state[p] = {key: torch.from_numpy(arrays[f"{_ADAM}{k}.{key}"].copy())
                                       for key in ("step", "exp_avg", "exp_avg_sq")}


def windows(trials: list[np.ndarray], horizon: int) -> np.ndarray:
    """Every window (N, horizon + 1, d) of consecutive samples (stride 1) of trials (n_i, d)
    longer than ``horizon``; (0, horizon + 1, d) when none is."""
    parts = [np.lib.stride_tricks.sliding_window_view(x, horizon + 1, axis=0).transpose(0, 2, 1)
             for x in trials if x.shape[0] > horizon]
    if not parts:
        return np.empty((0, horizon + 1, trials[0].shape[1]))
    return np.ascontiguousarray(np.concatenate(parts))
