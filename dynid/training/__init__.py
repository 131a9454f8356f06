"""The one training loop for torch models, and what it owns: contiguous-block validation splits,
early stopping with the best weights restored, ``--max-time``, checkpoints and ``--resume``,
and network weights to and from named arrays.

A model plugs in as a ``Trainable`` strategy (its per-epoch step, validation loss and state as
named arrays); ``train`` runs it. Devices, torch threads and the progress display live in
``dynid.runtime``. torch is imported lazily, inside functions.
"""

from dynid.training.loop import (
    TRAINING_CURVE,
    Trainable,
    TrainingConfig,
    TrainingOptions,
    TrainingResult,
    TrainingSession,
    TrainingStep,
    train,
)
from dynid.training.split import block_split
from dynid.training.weights import (
    arrays_to_module,
    check_arrays,
    module_to_arrays,
    tensors_to_arrays,
)

__all__ = [
    "TRAINING_CURVE",
    "Trainable",
    "TrainingConfig",
    "TrainingOptions",
    "TrainingResult",
    "TrainingSession",
    "TrainingStep",
    "arrays_to_module",
    "block_split",
    "check_arrays",
    "module_to_arrays",
    "tensors_to_arrays",
    "train",
]
