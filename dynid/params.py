"""Typed hyperparameter dataclasses: defaults and one-line docs, ``-p key=value`` parsing,
typed values from the Python API, and JSON round trips. Shared by model backends and causal-discovery methods."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
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
    def from_values(cls, values: Mapping[str, object], *, option: str = "") -> Hyperparameters:
        """Build from typed values (``{"threshold": 0.1, "rank": None}``), as the Python API takes.

        Strings are parsed as ``-p`` values are (``{"threshold": "0.1"}`` works); other values
        must already have the field's type (an int is accepted for a float field). UsageError on
        an unknown key (naming the valid keys), a value of the wrong type, or a value the
        dataclass rejects. ``option`` prefixes the messages (``"-p "`` on the command line).
        """
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        typed: dict[str, Any] = {}
        for raw_key, value in values.items():
            key = str(raw_key).strip().replace("-", "_")
            if key not in names:
                valid = ", ".join(names) or "(none)"
                raise UsageError(f"{option}{key}: unknown hyperparameter; valid keys: {valid}")
            try:
                if isinstance(value, str):
                    typed[key] = _parse_text(value.strip(), hints[key])
                else:
                    typed[key] = _check_value(value, hints[key])
            except ValueError as exc:
                shown = f"={value}" if option else f" = {value!r}"
                raise UsageError(f"{option}{key}{shown}: {exc}") from exc
        try:
            return cls(**typed)
        except ValueError as exc:
            raise UsageError(f"{option.strip() or 'hyperparameters'}: {exc}") from exc

    @classmethod
    def parse(cls, assignments: Sequence[str]) -> Hyperparameters:
        """Parse ``-p key=value`` strings, validating keys and values (UsageError on failure)."""
        return cls.from_values(split_assignments(assignments), option="-p ")

    @classmethod
    def build(cls, given: Hyperparameters | Mapping[str, object] | Sequence[str] | None) -> Hyperparameters:
        """The dataclass from what a caller gave: itself, typed values, ``-p`` strings or None
        (the defaults). UsageError for a dataclass of another backend or method."""
        if given is None:
            return cls()
        if isinstance(given, Hyperparameters):
            if not isinstance(given, cls):
                raise UsageError(f"hyperparameters of type {type(given).__name__}; expected {cls.__name__}")
            return given
        if isinstance(given, Mapping):
            return cls.from_values(given)
        if isinstance(given, str):
            raise UsageError(f"hyperparameters {given!r}: give a dict or a list of 'key=value' strings")
        return cls.parse(given)


def split_assignments(assignments: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v", ...}`` (a later key wins); UsageError without ``=``."""
    values: dict[str, str] = {}
    for item in assignments:
        key, sep, text = item.partition("=")
        if not sep:
            raise UsageError(f"-p {item!r}: expected KEY=VALUE")
        values[key.strip().replace("-", "_")] = text
    return values


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


def _check_value(value: object, tp: Any) -> Any:
    """A typed (non-string) value for a field of type ``tp``; ValueError when it does not fit.

    ints pass for floats (made float, as ``-p`` parsing gives); bools never pass for numbers.
    """
    optional, inner = _is_optional(tp)
    if value is None:
        if optional:
            return None
        raise ValueError("must not be None")
    if get_origin(inner) is Literal:
        choices = get_args(inner)
        if not isinstance(value, (bool, np.bool_)) and value in choices:
            return value
        raise ValueError(f"expected one of {', '.join(map(str, choices))}")
    if inner is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise ValueError("expected true or false")
    is_bool = isinstance(value, (bool, np.bool_))
    if inner is int:
        if isinstance(value, (int, np.integer)) and not is_bool:
            return int(value)
        raise ValueError("expected an integer")
    if inner is float:
        if isinstance(value, (int, float, np.integer, np.floating)) and not is_bool:
            number = float(value)
            if not np.isfinite(number):
                raise ValueError("expected a finite number")
            return number
        raise ValueError("expected a number")
    raise ValueError(f"expected {_type_label(tp)}, got {type(value).__name__}")


def _coerce_json(value: Any, tp: Any) -> Any:
    optional, inner = _is_optional(tp)
    if value is None:
        if optional:
            return None
        raise DataError("stored hyperparameter is null but the field is not optional")
    if inner is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
