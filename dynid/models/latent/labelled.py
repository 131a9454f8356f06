"""The fit entry points of the backends whose discrete states ``--labels`` can fix (hmm, arhmm,
slds): one ``_fit_known`` for fits with and without labels."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset
from dynid.models.base import Backend


class KnownStatesBackend(Backend):
    """A backend fitted by ``_fit_known`` with per trial the known states (-1 = unknown), or
    None; a labelled fit also reports ``labelled_samples`` in its metrics."""

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        self._fit_known(data, None, seed)

    def _fit_labelled(
        self, data: Dataset, labels: list[np.ndarray], *, seed: int | None, device: str, progress: Any
    ) -> None:
        self._fit_known(data, labels, seed)
        self.metrics_["labelled_samples"] = int(sum(np.sum(known >= 0) for known in labels))

    @abstractmethod
    def _fit_known(self, data: Dataset, known: list[np.ndarray] | None, seed: int | None) -> None:
        """The fit, with per trial (n_samples,) the known states (-1 = unknown) or None."""
