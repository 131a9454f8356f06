"""Run-time choices shared by commands: compute device and seeding. torch is imported lazily."""

from __future__ import annotations

import sys

from dynid.errors import ResourceUnavailable, UsageError

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str, name: str, supports_cuda: bool) -> str:
    """``auto``/``cpu``/``cuda`` -> the device method ``name`` will run on.

    ``cuda`` needs a method that runs on CUDA (UsageError otherwise) and a visible GPU
    (ResourceUnavailable, exit 4, otherwise). ``auto`` picks CUDA only when both hold.
    """
    if requested not in DEVICES:
        raise UsageError(f"--device {requested}: expected one of {', '.join(DEVICES)}")
    if requested == "cpu" or (requested == "auto" and not supports_cuda):
        return "cpu"
    if not supports_cuda:
        raise UsageError(f"--device cuda: {name} runs on the CPU only")
    available = cuda_available()
    if requested == "cuda" and not available:
        raise ResourceUnavailable("--device cuda: no CUDA GPU is visible to torch")
    return "cuda" if available else "cpu"


def cuda_available() -> bool:
    """True when torch is installed and sees a GPU; never imports torch if nothing needs it."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def seed_everything(seed: int | None) -> None:
    """Seed numpy's legacy global state and, if it is already imported, torch."""
    if seed is None:
        return
    import numpy as np

    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
