"""Multiple-testing corrections: adjusted p-values for a family of tests."""

from __future__ import annotations

from typing import Literal

import numpy as np

from dynid.errors import UsageError

Correction = Literal["bh", "bonferroni", "none"]
CORRECTIONS: tuple[str, ...] = ("bh", "bonferroni", "none")


def check_correction(method: str) -> None:
    """UsageError unless ``method`` is one of ``CORRECTIONS``."""
    if method not in CORRECTIONS:
        raise UsageError(
            f"correction {method!r} is unknown; valid corrections: {', '.join(CORRECTIONS)}"
        )


def adjust_pvalues(p: np.ndarray, method: Correction = "bh") -> np.ndarray:
    """Adjusted p-values of one family of tests, same shape as ``p`` (any shape = one family).

    ``"bh"``: Benjamini-Hochberg step-up, controls the false discovery rate; the adjusted value of
    the test ranked ``k`` of ``m`` is ``min_{j >= k} p_(j) * m / j``, capped at 1, so adjusted
    values keep the order of the raw ones. ``"bonferroni"``: ``min(p * m, 1)``, controls the
    family-wise error rate. ``"none"``: a copy. Reject where the adjusted value is ``<= alpha``.
    """
    check_correction(method)
    p = np.asarray(p, dtype=float)
    flat = p.reshape(-1)
    if np.any(~np.isfinite(flat) | (flat < 0) | (flat > 1)):
        raise ValueError("p-values must be finite numbers in [0, 1]")
    m = flat.size
    if method == "none" or m == 0:
        return flat.copy().reshape(p.shape)
    if method == "bonferroni":
        return np.minimum(flat * m, 1.0).reshape(p.shape)
    order = np.argsort(flat, kind="stable")
    scaled = flat[order] * m / np.arange(1, m + 1)
    # Step-up: each adjusted value is the smallest scaled value at its rank or above.
    stepped = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted.reshape(p.shape)
