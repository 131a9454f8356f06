"""Conversion of results to plain JSON types, shared by model files and ``--json`` output."""

from __future__ import annotations

from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """numpy scalars/arrays and tuples -> JSON types; NaN/inf -> None; complex -> {real, imag}."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, (complex, np.complexfloating)):
        return {"real": jsonable(value.real), "imag": jsonable(value.imag)}
    return value
