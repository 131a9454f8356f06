"""The hyperparameters of PDE identification (``dynid symbolic --pde -p key=value``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dynid.params import Hyperparameters, param
from dynid.symbolic.options import CRITERIA


@dataclass(frozen=True)
class PdeParams(Hyperparameters):
    """What ``identify_pde`` does; every default needs no tuning. Bad values raise ValueError
    naming the field."""

    max_degree: int = param(3, "highest degree of the field monomials (u, u^2, u v, u^3, ...)")
    max_order: int = param(4, "highest spatial derivative order in 1-D (u_x .. u_xxxx); in 2-D first derivatives, the Laplacian from 2, the biharmonic from 4")
    criterion: Literal["aicc", "bic"] = param("aicc", "information criterion on held-out space-time boxes that picks the terms")
    max_terms: int | None = param(None, "most terms per equation (none: no cap)")
    ensemble: int = param(20, "bootstrap models for inclusion probabilities and intervals (0: none)")
    half_widths: str = param("", "test-function half-widths in samples along t,x[,y], e.g. '12,32' (default: about 8 boxes per axis)")

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {', '.join(CRITERIA)}")
        if not 0 <= self.max_degree <= 5:
            raise ValueError("max_degree must be between 0 and 5")
        if not 1 <= self.max_order <= 6:
            raise ValueError("max_order must be between 1 and 6")
        if self.ensemble < 0:
            raise ValueError("ensemble must be >= 0")
        if self.max_terms is not None and self.max_terms < 1:
            raise ValueError("max_terms must be >= 1")
        if self.half_widths.strip():
            widths = self.widths()
            if any(w < 2 for w in widths):
                raise ValueError("half_widths must be integers >= 2, comma-separated")

    def widths(self) -> tuple[int, ...] | None:
        """The half-widths given, one per axis (t first), or None for the default rule."""
        if not self.half_widths.strip():
            return None
        try:
            return tuple(int(w) for w in self.half_widths.split(","))
        except ValueError:
            raise ValueError("half_widths must be integers >= 2, comma-separated") from None
