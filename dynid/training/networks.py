"""Small torch building blocks the trained backends share: an MLP and seeded construction.
Imports torch at module level: import it only where a network is built."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn

Module = TypeVar("Module", bound=nn.Module)


def mlp(inputs: int, width: int, depth: int, outputs: int,
        activation: type[nn.Module]) -> nn.Sequential:
    """inputs -> ``depth`` hidden layers of ``width`` with ``activation`` -> outputs (linear),
    float32, with torch's default initialisation (an activation has no weights, so a seed
    gives the same weights whichever it is)."""
    layers: list[nn.Module] = []
    size = inputs
    for _ in range(depth):
        layers += [nn.Linear(size, width), activation()]
        size = width
    layers.append(nn.Linear(size, outputs))
    return nn.Sequential(*layers)


def tanh_mlp(inputs: int, width: int, depth: int, outputs: int) -> nn.Sequential:
    """``mlp`` with tanh hidden layers."""
    return mlp(inputs, width, depth, outputs, nn.Tanh)


def seeded(build: Callable[[], Module], seed: int) -> Module:
    """``build()`` with torch's default initialisation drawn from ``seed`` (torch's global
    generator, which the first fit of a session seeds before torch is imported, is left as it
    was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()
