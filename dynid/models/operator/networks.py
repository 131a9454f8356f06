"""What the learned Koopman bases (``singular_functions``, ``autoencoder``) share: float64 tanh
MLPs and the windows they train on (by ``dynid.training.minibatch``'s
``MinibatchAdam`` through the shared training loop).

Imported only when a learned basis is fitted or loaded (it imports torch at module level), so
listing backends stays cheap. Everything is float64: the post-hoc moment estimators need the
precision, and the networks are small.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from dynid.training.networks import tanh_mlp


def mlp(inputs: int, width: int, depth: int, outputs: int) -> nn.Sequential:
    """A float64 tanh MLP inputs -> ``depth`` hidden layers of ``width`` -> outputs (linear)."""
    return tanh_mlp(inputs, width, depth, outputs).double()


def windows(trials: list[np.ndarray], horizon: int) -> np.ndarray:
    """Every window (N, horizon + 1, d) of consecutive samples (stride 1) of trials (n_i, d)
    longer than ``horizon``; (0, horizon + 1, d) when none is."""
    parts = [np.lib.stride_tricks.sliding_window_view(x, horizon + 1, axis=0).transpose(0, 2, 1)
             for x in trials if x.shape[0] > horizon]
    if not parts:
        return np.empty((0, horizon + 1, trials[0].shape[1]))
    return np.ascontiguousarray(np.concatenate(parts))
