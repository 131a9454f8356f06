"""The causal-method protocol: the one place a new ``--method`` plugs in.

A method is a class with a ``name``, a ``summary``, a frozen hyperparameter dataclass ``Params``
(method-specific options, ``-p key=value`` on the command line) and ``discover``, which returns
a ``CausalGraph``. Options every method shares (lags, significance, seed, device) travel in
``CausalSettings``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from dynid.causal.fdr import check_correction
from dynid.causal.graph import CausalGraph
from dynid.data.dataset import Dataset
from dynid.errors import UsageError
from dynid.params import Hyperparameters
from dynid.training import TrainingOptions


@dataclass(frozen=True)
class CausalSettings:
    """Options common to every method.

    max_lag: largest lag tested, in samples; alpha: significance level applied to p-values
    after ``correction`` (``bh`` Benjamini-Hochberg FDR, ``bonferroni`` or ``none``);
    seed: for permutation tests, surrogates and neural training; device: ``cpu``, ``cuda`` or
    ``cuda:N``; training: ``--max-time``, checkpoints, threads and progress of methods that
    train networks (others refuse them).
    """

    max_lag: int = 5
    alpha: float = 0.05
    correction: str = "bh"
    seed: int | None = None
    device: str = "cpu"
    training: TrainingOptions = field(default_factory=TrainingOptions)

    def __post_init__(self) -> None:
        if isinstance(self.max_lag, bool) or not isinstance(self.max_lag, int) or self.max_lag < 1:
            raise UsageError(f"--max-lag must be a whole number of samples >= 1, got {self.max_lag!r}")
        if not 0.0 < self.alpha < 1.0:
            raise UsageError(f"--alpha must lie strictly between 0 and 1, got {self.alpha!r}")
        check_correction(self.correction)


@dataclass(frozen=True)
class NoParams(Hyperparameters):
    """For methods without options of their own."""


class CausalMethod(ABC):
    """Discovers a CausalGraph from a Dataset. ``cuda``: whether it can run on a GPU;
    ``trains``: whether it trains networks through ``dynid.training`` (and so takes
    ``settings.training``); ``reports_progress``: whether ``discover`` reports its steps to
    ``settings.training.progress`` (training methods always do; the CLI shows no spinner then);
    ``contemporaneous``: whether it tests lag-0 links (its edges then start at lag 0);
    ``use_when``: the data it suits, for ``dynid discover-causal --list``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[Hyperparameters]] = NoParams
    cuda: ClassVar[bool] = False
    trains: ClassVar[bool] = False
    reports_progress: ClassVar[bool] = False
    contemporaneous: ClassVar[bool] = False
    use_when: ClassVar[str] = ""

    def __init__(self, params: Hyperparameters | None = None) -> None:
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        """The graph over ``data.variables``; raises DataError for data it cannot test."""
