"""dynid: identify the dynamics behind time-series files.

The Python API mirrors the command line: ``load`` reads data into a ``Dataset``; ``fit``,
``forecast``, ``score``, ``identify`` (equations) and ``discover_causal`` work on it;
``write_strength_series`` writes ``discover_causal(..., "dynamic")``'s strength series;
``save_model``/``load_model`` handle ``.dynid`` files and ``model_info`` describes one;
``causal_document`` gives a graph's JSON as ``dynid discover-causal --json`` prints it.
Names are imported on first use so that ``dynid --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load": "dynid.data",
    "Dataset": "dynid.data",
    "Trial": "dynid.data",
    "fit": "dynid.api",
    "forecast": "dynid.api",
    "score": "dynid.api",
    "identify": "dynid.api",
    "discover_causal": "dynid.api",
    "causal_document": "dynid.api",
    "model_info": "dynid.api",
    "write_strength_series": "dynid.causal.dynamic",
    "save_model": "dynid.modelfile",
    "load_model": "dynid.modelfile",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'dynid' has no attribute {name!r}")
