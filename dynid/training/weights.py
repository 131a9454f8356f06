"""Network weights to and from named numpy arrays (what a model file or a checkpoint stores).

No ``torch.save``: arrays keyed by ``state_dict`` names, copied bit for bit, and checked for
name, shape and dtype on the way back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from dynid.errors import DataError

if TYPE_CHECKING:
    import torch


def tensors_to_arrays(tensors: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Named tensors (any device) -> CPU numpy copies with the same dtype and bits."""
    return {name: tensor.detach().cpu().numpy().copy() for name, tensor in tensors.items()}


def module_to_arrays(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """Every parameter and buffer of ``module``, keyed by its ``state_dict`` name."""
    return tensors_to_arrays(module.state_dict())


def arrays_to_module(module: torch.nn.Module, arrays: Mapping[str, np.ndarray]) -> None:
    """Load ``arrays`` (as from ``module_to_arrays``) into ``module`` in place, on the device
    it is on; DataError if a name is missing or extra, or a shape or dtype differs."""
    import torch

    check_arrays(arrays, module_to_arrays(module))
    module.load_state_dict({name: torch.from_numpy(np.array(arrays[name])) for name in arrays},
                           strict=True)


def check_arrays(arrays: Mapping[str, np.ndarray], like: Mapping[str, np.ndarray]) -> None:
    """DataError unless ``arrays`` has exactly the names of ``like``, each with its shape and
    dtype (the message names the first array at fault)."""
    missing = sorted(set(like) - set(arrays))
    extra = sorted(set(arrays) - set(like))
    if missing or extra:
        raise DataError(f"stored weights do not match the network: missing {missing or 'none'}, "
                        f"unexpected {extra or 'none'}")
    for name, template in like.items():
        array = np.asarray(arrays[name])
        if array.shape != template.shape or array.dtype != template.dtype:
            raise DataError(f"stored weight {name!r} is {array.dtype}{list(array.shape)}, the "
                            f"network's {template.dtype}{list(template.shape)}")
