"""The JSON documents dynid prints and writes: their ``"kind"`` and their text.

Every document carries a top-level ``"kind"`` naming what it is, so that a reader (``dynid
report``, a user's script) dispatches on it instead of guessing from keys. The kinds are listed
here and nowhere else; a list result is wrapped in an object holding it under the kind's name
(``{"kind": "models", "models": [...]}``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from dynid.jsonable import jsonable

FIT: Final = "fit"  # dynid fit --json
FORECAST: Final = "forecast"  # dynid forecast --json
SCORE: Final = "score"  # dynid score --json
SYMBOLIC: Final = "symbolic"  # dynid symbolic --format json
CAUSAL: Final = "causal"  # dynid discover-causal --format json
DYNAMIC_STRENGTH: Final = "dynamic-strength"  # --dynamic-output FILE.json
INFO: Final = "info"  # dynid info --json
SIMULATE: Final = "simulate"  # dynid simulate --json
MODELS: Final = "models"  # dynid models --json
METHODS: Final = "methods"  # dynid discover-causal --list --json
SYSTEMS: Final = "systems"  # dynid simulate --list --json

KINDS: Final = (
    FIT, FORECAST, SCORE, SYMBOLIC, CAUSAL, DYNAMIC_STRENGTH, INFO, SIMULATE, MODELS, METHODS,
    SYSTEMS,
)


def tagged(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with ``"kind": kind`` as its first key. ValueError for an unknown kind or a body
    that already names another kind (a programming error, not a user's)."""
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}")
    if body.get("kind", kind) != kind:
        raise ValueError(f"document of kind {body['kind']!r} tagged as {kind!r}")
    return {"kind": kind, **{key: value for key, value in body.items() if key != "kind"}}


def listing(kind: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A list result as a document: ``{"kind": kind, kind: entries}``."""
    return tagged(kind, {kind: entries})


def to_text(document: Mapping[str, Any]) -> str:
    """Strict JSON text (NaN and infinities as null) ending in a newline. ValueError when the
    document has no ``"kind"``."""
    if document.get("kind") not in KINDS:
        raise ValueError(f"a dynid JSON document needs a known 'kind', got {document.get('kind')!r}")
    return json.dumps(jsonable(document), indent=2, allow_nan=False) + "\n"
