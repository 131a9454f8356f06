"""``MinibatchAdam``: the ``Trainable`` strategy of models whose whole training is Adam on a loss
over minibatches of fixed windows (koopman's learned bases, ltc). torch is imported lazily."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from dynid.training.loop import TrainingSession, TrainingStep
from dynid.training.weights import arrays_to_module, module_to_arrays, tensors_to_arrays

if TYPE_CHECKING:
    import torch

# Checkpoint names of Adam's state: "adam.{parameter index}.{step|exp_avg|exp_avg_sq}".
_ADAM = "adam."
_ADAM_KEYS = ("step", "exp_avg", "exp_avg_sq")


class MinibatchAdam:
    """Adam on ``loss(rows)`` over minibatches of the first axis of ``fit`` (one epoch = one
    shuffled pass, the order drawn from the session's torch generator); the validation loss is
    ``loss(validation)``. ``fit``, ``validation`` and ``module`` live on one device. State
    arrays: the module's weights and Adam's state, created zero before the first step so every
    checkpoint has the same names."""

    def __init__(self, module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor],
                 fit: torch.Tensor, validation: torch.Tensor | None, *, lr: float,
                 batch: int, session: TrainingSession) -> None:
        import torch

        self.module, self.loss = module, loss
        self.fit, self.validation = fit, validation
        self.batch, self.generator = batch, session.torch_generator
        self.parameters = list(module.parameters())
        self.optimizer = torch.optim.Adam(self.parameters, lr=lr)
        for p in self.parameters:
            self.optimizer.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                       "exp_avg_sq": torch.zeros_like(p)}

    def train_step(self, epoch: int) -> TrainingStep:
        import torch

        order = torch.randperm(self.fit.shape[0], generator=self.generator)
        total = 0.0
        for rows in torch.split(order, self.batch):
            self.optimizer.zero_grad()
            loss = self.loss(self.fit[rows.to(self.fit.device)])
            loss.backward()
            self.optimizer.step()
            total += float(loss.detach()) * len(rows)
        return TrainingStep(total / self.fit.shape[0])

    def validation_loss(self) -> float | None:
        import torch

        if self.validation is None:
            return None
        with torch.no_grad():
            return float(self.loss(self.validation))

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = module_to_arrays(self.module)
        for k, p in enumerate(self.parameters):
            state = self.optimizer.state[p]
            arrays.update(tensors_to_arrays({f"{_ADAM}{k}.{key}": state[key] for key in _ADAM_KEYS}))
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        arrays_to_module(self.module, {k: v for k, v in arrays.items() if not k.startswith(_ADAM)})
        for k, p in enumerate(self.parameters):
            # Adam keeps its step count on the CPU whatever the parameters' device.
            self.optimizer.state[p] = {
                key: torch.from_numpy(arrays[f"{_ADAM}{k}.{key}"].copy()).to(
                    "cpu" if key == "step" else p.device)
                for key in _ADAM_KEYS}
