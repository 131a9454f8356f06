"""Typed hyperparameter dataclasses: defaults and one-line docs, ``-p key=value`` parsing,
and JSON round trips. Shared by model backends and causal-discovery methods."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

import numpy as np

from dynid.errors import DataError, UsageError


def param(default: Any, doc: str) -> Any:
    """A hyperparameter field: its default and the one-line doc ``dynid models`` shows."""
    return dataclasses.field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Hyperparameters:
    """Base of every backend's hyperparameter dataclass (frozen, JSON-serialisable fields).

    Subclasses declare fields with ``param(default, doc)`` and may check values in
    ``__post_init__`` by raising ValueError with a sentence naming the field.
    """

    @classmethod
    def describe(cls) -> list[dict[str, Any]]:
        """One entry per field: name, type, default, doc - for ``dynid models``."""
        hints = typing.get_type_hints(cls)
        return [
            {
                "name": f.name,
                "type": _type_label(hints[f.name]),
                "default": f.default,
                "doc": f.metadata.get("doc", ""),
            }
            for f in dataclasses.fields(cls)
        ]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Hyperparameters:
        """Rebuild from ``to_dict`` output (as stored in a model file); unknown keys are errors."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise DataError(f"unknown hyperparameter(s) {', '.join(unknown)} for this backend")
        hints = typing.get_type_hints(cls)
        coerced = {k: _coerce_json(v, hints[k]) for k, v in values.items()}
        try:
            return cls(**coerced)
        except (TypeError, ValueError) as exc:
            raise DataError(f"invalid stored hyperparameters: {exc}") from exc

    @classmethod
    def parse(cls, assignments: list[str] | tuple[str, ...]) -> Hyperparameters:
        """Parse ``-p key=value`` strings, validating keys and values (UsageError on failure)."""
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        values: dict[str, Any] = {}
        for item in assignments:
            key, sep, text = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep:
                raise UsageError(f"-p {item!r}: expected KEY=VALUE")
            if key not in names:
                valid = ", ".join(names) or "(none)"
                raise UsageError(f"-p {key}: unknown hyperparameter; valid keys: {valid}")
            try:
                values[key] = _parse_text(text.strip(), hints[key])
            except ValueError as exc:
                raise UsageError(f"-p {key}={text}: {exc}") from exc
        try:
            return cls(**values)
        except ValueError as exc:
            raise UsageError(f"-p: {exc}") from exc


def _is_optional(tp: Any) -> tuple[bool, Any]:
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return True, args[0]
    return False, tp


def _type_label(tp: Any) -> str:
    optional, inner = _is_optional(tp)
    if get_origin(inner) is Literal:
        label = "|".join(str(a) for a in get_args(inner))
    else:
        label = getattr(inner, "__name__", str(inner))
    return f"{label} or none" if optional else label


def _parse_text(text: str, tp: Any) -> Any:
    optional, inner = _is_optional(tp)
    if optional and text.lower() in ("none", "null", ""):
        return None
    if get_origin(inner) is Literal:
        choices = get_args(inner)
        for choice in choices:
            if text == str(choice):
                return choice
        raise ValueError(f"expected one of {', '.join(map(str, choices))}")
    if inner is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if inner is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected an integer") from None
    if inner is float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        if not np.isfinite(value):
            raise ValueError("expected a finite number")
        return value
    if inner is str:
        return text
    raise ValueError(f"unsupported hyperparameter type {inner!r}")


def _coerce_json(value: Any, tp: Any) -> Any:
    optional, inner = _is_optional(tp)
    if value is None:
        if optional:
            return None
        raise DataError("stored hyperparameter is null but the field is not optional")
    if inner is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
