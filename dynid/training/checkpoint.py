"""Checkpoints of one training call: one ``.npz`` of named arrays, written atomically.

Arrays are stored under prefixes: ``state/`` (the strategy's arrays now: weights, optimiser
state), ``best/`` (its arrays at the best validation loss, when there is one) and ``rng/torch``
(the torch CPU generator's state). ``meta`` holds the loop's counters and the numpy bit
generator's state as UTF-8 JSON bytes. Read back with ``allow_pickle=False``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dynid.atomic import atomic_path
from dynid.errors import DataError

FORMAT = "dynid-training-checkpoint"
VERSION = 1


@dataclass
class Checkpoint:
    """``state`` and ``best`` (or None) as named arrays; ``torch_rng`` (uint8) the CPU
    generator state; ``meta`` the loop's JSON counters."""

    state: dict[str, np.ndarray]
    best: dict[str, np.ndarray] | None
    torch_rng: np.ndarray
    meta: dict[str, Any]


def save(path: Path, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` to ``path`` atomically (a crash leaves the previous one)."""
    arrays = {f"state/{name}": value for name, value in checkpoint.state.items()}
    if checkpoint.best is not None:
        arrays.update({f"best/{name}": value for name, value in checkpoint.best.items()})
    arrays["rng/torch"] = checkpoint.torch_rng
    meta = {"format": FORMAT, "version": VERSION, **checkpoint.meta}
    arrays["meta"] = np.frombuffer(json.dumps(meta, allow_nan=False).encode(), dtype=np.uint8)
    with atomic_path(path) as temp, open(temp, "wb") as handle:
        np.savez(handle, **arrays)


def load(path: Path) -> Checkpoint:
    """The checkpoint at ``path``; DataError if it is unreadable or not one of ours."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode())
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"{path}: not a readable training checkpoint ({exc})") from exc
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise DataError(f"{path}: not a version-{VERSION} dynid training checkpoint")

    def part(prefix: str) -> dict[str, np.ndarray]:
        return {name[len(prefix):]: value for name, value in arrays.items()
                if name.startswith(prefix)}

    best = part("best/")
    return Checkpoint(part("state/"), best or None, arrays["rng/torch"], meta)
