"""Shape and time checks and per-column options shared by the differentiation methods, and
the second-difference coefficients on uneven steps (TV's penalty, the spline's Q matrix)."""

from __future__ import annotations

import numpy as np


def as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"states must be (n,) or (n, d), got shape {x.shape}")
    return x


def check_times(t: np.ndarray, n: int) -> np.ndarray:
    t = np.asarray(t, dtype=float)
    if t.shape != (n,):
        raise ValueError(f"times must have shape ({n},), got {t.shape}")
    if n < 3:
        raise ValueError(f"need at least 3 samples to differentiate, got {n}")
    if not np.all(np.diff(t) > 0):
        raise ValueError("times must be strictly increasing")
    return t


def per_column(value: object, d: int, name: str) -> list:
    """A per-column option given once (scalar) or per column (sequence of length d)."""
    if value is None or np.ndim(value) == 0:
        return [value] * d
    values = list(value)  # type: ignore[arg-type]
    if len(values) != d:
        raise ValueError(f"option {name} has {len(values)} values for {d} columns")
    return values


def second_difference(steps: np.ndarray) -> np.ndarray:
    """(n-2, 3) coefficients of the slope jumps u_{i+3/2} - u_{i+1/2} on g_i, g_{i+1}, g_{i+2}."""
    left, right = 1 / steps[:-1], 1 / steps[1:]
    return np.stack([left, -left - right, right], axis=1)
