"""Hyperparameters shared by the latent-state backends: a model size that is a number or
``auto`` (chosen by the backend), a largest size for ``auto``, and EM's stopping rule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dynid.params import Hyperparameters


@dataclass(frozen=True)
class SizedEMParams(Hyperparameters):
    """Base of ``LDSParams`` and ``MarkovParams``. Subclasses declare the fields ``size_field``
    (a str: a positive integer or "auto"), ``max_`` + ``size_field`` (int), ``max_iter`` (int)
    and ``tol`` (float)."""

    size_field: ClassVar[str]

    @classmethod
    def from_values(cls, values: Mapping[str, object], *, option: str = "") -> Hyperparameters:
        """As the base class's, and the size may also be given as an int (``{"latent": 4}``)."""
        given = {
            key: str(value) if key == cls.size_field and isinstance(value, int) and not isinstance(value, bool) else value
            for key, value in values.items()
        }
        return super().from_values(given, option=option)

    def __post_init__(self) -> None:
        size = getattr(self, self.size_field)
        if size != "auto" and not (size.isdigit() and int(size) >= 1):
            raise ValueError(f"{self.size_field} must be a positive integer or auto, not {size!r}")
        largest = f"max_{self.size_field}"
        if getattr(self, largest) < 1:
            raise ValueError(f"{largest} must be at least 1, not {getattr(self, largest)}")
        if self.max_iter < 1:  # type: ignore[attr-defined]
            raise ValueError(f"max_iter must be at least 1, not {self.max_iter}")  # type: ignore[attr-defined]
        if not self.tol >= 0:  # type: ignore[attr-defined]
            raise ValueError(f"tol must be non-negative, not {self.tol}")  # type: ignore[attr-defined]
