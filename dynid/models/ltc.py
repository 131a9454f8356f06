"""Closed-form continuous-time (CfC) recurrent network for irregularly sampled records (Hasani,
Lechner, Amini, Liebenwein, Ray, Tschaikowski, Teschl & Rus 2022, "Closed-form continuous-time
neural networks", Nat. Mach. Intell. 4:992), the closed-form solution of liquid time-constant
(LTC) cells.

With z the standardised state and tau = t / dt (dt: the median step, so gaps are about 1), one
step over a gap g from sample k reads z_k and the hidden state h:

    a = lecun_tanh(W [z_k, h] + b)                       (backbone)
    s = sigmoid(time_a(a) g + time_b(a))                 (the time gate: how far along the gap)
    h' = tanh(ff1(a)) (1 - s) + tanh(ff2(a)) s
    z_(k+1) = z_k + g readout(h')                        (a rate, so a zero gap changes nothing)

Training runs windows of ``window`` samples: the first half teacher-forced (the hidden state
warms up on data), the second half free-running on the network's own predictions, the loss the
mean squared error of every prediction; Adam through the shared training loop (seeded,
``--max-time``, checkpoints and bit-identical ``--resume`` on the CPU), early stopping on the last
part of each trial. A forecast warms up on the last ``window`` history samples at their own times
and then rolls forward at the model's median step dt (forecast times are spaced by dt).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.models.reservoir.readout import Standardiser
from dynid.runtime import torch_threads
from dynid.training import (
    TRAINING_CURVE,
    TrainingConfig,
    TrainingSession,
    arrays_to_module,
    block_split,
    module_to_arrays,
    train,
)
from dynid.training.minibatch import MinibatchAdam

if TYPE_CHECKING:
    import torch

__all__ = ["LTC", "LTCParams"]


@dataclass(frozen=True)
class LTCParams(Hyperparameters):
    hidden: int = param(32, "CfC hidden units")
    backbone: int = param(64, "units of the backbone layer that feeds the gates")
    window: int = param(32, "samples per training window (half warm-up, half free run); "
                            "also the history a forecast warms up on")
    epochs: int = param(300, "most training epochs")
    lr: float = param(3e-3, "Adam learning rate")
    batch: int = param(32, "windows per minibatch")
    patience: int = param(40, "epochs without a better validation loss before stopping")
    validation: float = param(0.2, "fraction at the end of each trial held out for early stopping")

    def __post_init__(self) -> None:
        for name in ("hidden", "backbone", "epochs", "batch", "patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")
        if self.window < 4:
            raise ValueError(f"window must be at least 4 samples, not {self.window}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, not {self.lr}")
        if not 0 < self.validation < 1:
            raise ValueError(f"validation must lie strictly between 0 and 1, not {self.validation}")


def _network(d: int, params: LTCParams, seed: int = 0) -> torch.nn.Module:
    """The CfC cell and its read-out (float32), with torch's default initialisation drawn
    from a generator seeded with ``seed`` (torch's global one is left as it was)."""
    import torch

    from dynid.training.networks import seeded

    class CfC(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = torch.nn.Linear(d + params.hidden, params.backbone)
            self.ff1 = torch.nn.Linear(params.backbone, params.hidden)
            self.ff2 = torch.nn.Linear(params.backbone, params.hidden)
            self.time_a = torch.nn.Linear(params.backbone, params.hidden)
            self.time_b = torch.nn.Linear(params.backbone, params.hidden)
            self.readout = torch.nn.Linear(params.hidden, d)

        def step(self, z: torch.Tensor, h: torch.Tensor, gap: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
            """z (B, d), h (B, hidden), gap (B, 1) -> next z (B, d), next h (B, hidden)."""
            a = 1.7159 * torch.tanh(0.666 * self.backbone(torch.cat([z, h], dim=-1)))
            s = torch.sigmoid(self.time_a(a) * gap + self.time_b(a))
            h = torch.tanh(self.ff1(a)) * (1.0 - s) + torch.tanh(self.ff2(a)) * s
            return z + gap * self.readout(h), h

        def run(self, z: torch.Tensor, tau: torch.Tensor, forced: int) -> torch.Tensor:
            """Predictions (B, n - 1, d) of samples 1..n-1 of z (B, n, d) at times tau (B, n):
            steps from the first ``forced`` samples read the data, later ones the predictions."""
            h = z.new_zeros(z.shape[0], params.hidden)
            current, out = z[:, 0], []
            for k in range(tau.shape[1] - 1):
                if k < forced:
                    current = z[:, k]
                current, h = self.step(current, h, (tau[:, k + 1] - tau[:, k])[:, None])
                out.append(current)
            return torch.stack(out, dim=1)

    return seeded(CfC, seed)


def _windows(trials: list[np.ndarray], length: int) -> np.ndarray:
    """Windows (N, length, 1 + d) of columns [tau, z] overlapping by half, from every trial
    (n_i, 1 + d) that is long enough."""
    stride = max(length // 2, 1)
    out = [trial[s : s + length] for trial in trials
           for s in range(0, trial.shape[0] - length + 1, stride)]
    return np.stack(out) if out else np.empty((0, length, trials[0].shape[1]))


def _window_loss(network: torch.nn.Module, forced: int, windows: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the predictions of samples 1.. of windows (B, n, 1 + d) of columns
    [tau, z], the first ``forced`` steps reading the data."""
    import torch

    predictions = network.run(windows[..., 1:], windows[..., 0], forced)
    return torch.mean((predictions - windows[:, 1:, 1:]) ** 2)


class LTC(Backend):
    """CfC (closed-form liquid time-constant) network on irregular samples.

    Fitted arrays: ``mean``, ``scale`` (d,) the standardisation in data units, and the
    network's weights under their torch names (``backbone.weight`` ...).
    """

    name = "ltc"
    summary = "closed-form continuous-time (liquid time-constant) RNN; irregular sampling"
    Params = LTCParams
    # CPU only: the cell steps through each window one sample at a time on (B, 32)-sized
    # tensors, where a GPU's launch latency outweighs its arithmetic (and no GPU was at hand
    # to test on).
    capabilities = Capabilities(uniform_steps=False, training=True)

    @property
    def history_length(self) -> int:
        return self.params.window  # type: ignore[attr-defined]

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        import torch

        params: LTCParams = self.params  # type: ignore[assignment]
        scaling = Standardiser.of([trial.x for trial in data.trials])
        paths = [np.column_stack([trial.t / self.dt_, scaling.forward(trial.x)])
                 for trial in data.trials]
        head, tail = block_split(paths, params.validation, context=params.window // 2)
        fit_windows = _windows(head, params.window) if head else np.empty((0,))
        if fit_windows.shape[0] == 0:
            raise DataError(f"the ltc model needs a trial longer than window = {params.window} "
                            "samples (after holding out the validation part); lower -p window")
        validation_windows = _windows(tail, params.window)

        def put(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float32, device=device)

        session = TrainingSession(self.training_options, seed=0 if seed is None else seed)
        with torch_threads(self.training_options.threads):
            network = _network(self.n_variables, params, session.seed).to(device)
            trainer = MinibatchAdam(network, functools.partial(_window_loss, network, params.window // 2),
                                    put(fit_windows),
                                    put(validation_windows) if len(validation_windows) else None,
                                    lr=params.lr, batch=params.batch, session=session)
            result = train(trainer, TrainingConfig(max_epochs=params.epochs,
                                                   patience=params.patience, name="ltc",
                                                   stage="ltc"), session)
        self.mean_, self.scale_ = scaling.mean, scaling.scale
        self.network_ = network.cpu()
        self.metrics_ = {
            "epochs": result.epochs, "stopped": result.stopped,
            "best_validation_loss": result.best_validation_loss,
            "resumed_from": result.resumed_from, TRAINING_CURVE: result.curve(),
        }

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> np.ndarray:
        import torch

        w = self.history_length
        scaling = Standardiser(self.mean_, self.scale_)
        # Past the data the samples come at the model's median step, as forecast times do.
        tau = np.concatenate([(history.t[-w:] - history.t[-1]) / self.dt_, np.arange(1.0, steps + 1)])
        z = np.zeros((w + steps, self.n_variables))
        z[:w] = scaling.forward(history.x[-w:])
        with torch.no_grad():
            run = self.network_.run(torch.as_tensor(z[None], dtype=torch.float32),
                                    torch.as_tensor(tau[None], dtype=torch.float32), forced=w)
        return scaling.inverse(run[0, w - 1 :].double().numpy())

    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        return {"mean": self.mean_, "scale": self.scale_, **module_to_arrays(self.network_)}

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d = self.n_variables
        self.mean_ = expect_array(arrays, "mean", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        self.network_ = _network(d, self.params)  # type: ignore[arg-type]
        arrays_to_module(self.network_, {k: v for k, v in arrays.items() if k not in ("mean", "scale")})
