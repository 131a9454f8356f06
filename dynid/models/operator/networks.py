"""What the learned Koopman bases (``singular_functions``, ``autoencoder``) share: small tanh
MLPs, seeded construction and the windows they train on (by ``dynid.training.minibatch``'s
``MinibatchAdam`` through the shared training loop).

Imported only when a learned basis is fitted or loaded (it imports torch at module level), so
listing backends stays cheap. Everything is float64: the post-hoc moment estimators need the
precision, and the networks are small.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn


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


def windows(trials: list[np.ndarray], horizon: int) -> np.ndarray:
    """Every window (N, horizon + 1, d) of consecutive samples (stride 1) of trials (n_i, d)
    longer than ``horizon``; (0, horizon + 1, d) when none is."""
    parts = [np.lib.stride_tricks.sliding_window_view(x, horizon + 1, axis=0).transpose(0, 2, 1)
             for x in trials if x.shape[0] > horizon]
    if not parts:
        return np.empty((0, horizon + 1, trials[0].shape[1]))
    return np.ascontiguousarray(np.concatenate(parts))
