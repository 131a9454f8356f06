"""The backend protocol: the one place a new dynamics method plugs in.

A backend is a class with a ``name``, a frozen hyperparameter dataclass ``Params``, declared
``capabilities``, and four methods: ``_fit`` (learn from a Dataset), ``_simulate`` (roll forward
from a history window), ``arrays`` (all learned state as named numpy arrays) and ``_load_arrays``
(the inverse). Everything else - validation, model files, the CLI - is shared.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args, get_origin

import numpy as np

from dynid.data.dataset import Dataset, Trial
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


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the shared fit path enforces these."""

    uniform_steps: bool = True
    inputs: bool = False
    nan: bool = False
    cuda: bool = False
    stochastic: bool = False


class Backend(ABC):
    """A dynamics model: ``fit`` on a Dataset, ``simulate`` forward, export learned arrays.

    Fitted state lives in attributes ending in ``_``: ``variables_``, ``inputs_``, ``dt_`` (set
    by ``fit``), ``metrics_`` (in-sample fit metrics) plus the backend's own arrays.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[Hyperparameters]]
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, params: Hyperparameters | None = None) -> None:
        self.params = params if params is not None else self.Params()
        if not isinstance(self.params, self.Params):
            raise TypeError(f"{self.name} expects {self.Params.__name__}")
        self.metrics_: dict[str, Any] = {}

    # -- public, shared --------------------------------------------------------------------
    def fit(
        self,
        data: Dataset,
        *,
        seed: int | None = None,
        device: str = "cpu",
        progress: Any = None,
    ) -> Backend:
        """Learn from ``data``; returns self. Raises DataError if the data do not suit."""
        caps = self.capabilities
        if caps.uniform_steps and data.dt is None:
            raise DataError(
                f"{data.source}: the {self.name} backend needs uniform time steps but the sampling "
                "is irregular (or differs between trials); resample with --resample DT"
            )
        if data.inputs and not caps.inputs:
            raise DataError(f"the {self.name} backend does not take inputs; drop --inputs")
        self.variables_ = tuple(data.variables)
        self.inputs_ = tuple(data.inputs)
        self.dt_ = data.dt if data.dt is not None else _median_step(data)
        self._fit(data, seed=seed, device=device, progress=progress)
        return self

    def simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None = None
    ) -> np.ndarray:
        """Roll the model ``steps`` samples (of ``dt_``) past the end of ``history``.

        history: a Trial whose last ``history_length`` samples are the initial condition;
        future_inputs: (steps, m) inputs for the forecast when the model has inputs.
        Returns (steps, d) states.
        """
        self._check_fitted()
        if history.x.shape[1] != len(self.variables_):
            raise DataError(
                f"history has {history.x.shape[1]} variables, the model {len(self.variables_)}"
            )
        if history.n_samples < self.history_length:
            raise DataError(
                f"the {self.name} model needs at least {self.history_length} samples of history"
            )
        if self.inputs_:
            if future_inputs is None or future_inputs.shape != (steps, len(self.inputs_)):
                raise DataError(
                    f"the model takes inputs {', '.join(self.inputs_)}: give {steps} rows of "
                    "future inputs (--future-inputs FILE)"
                )
            if history.u is None:
                raise DataError("the history lacks the model's input columns")
        return self._simulate(history, steps, future_inputs)

    @property
    def history_length(self) -> int:
        """How many trailing samples of history ``simulate`` needs."""
        return 1

    def is_fitted(self) -> bool:
        return hasattr(self, "variables_")

    @classmethod
    def restore(
        cls,
        params: Hyperparameters,
        arrays: dict[str, np.ndarray],
        *,
        variables: tuple[str, ...],
        inputs: tuple[str, ...],
        dt: float,
        metrics: dict[str, Any] | None = None,
    ) -> Backend:
        """Rebuild a fitted model from stored arrays; DataError if any array is missing or off."""
        model = cls(params)
        model.variables_ = tuple(variables)
        model.inputs_ = tuple(inputs)
        model.dt_ = float(dt)
        model.metrics_ = dict(metrics or {})
        model._load_arrays(arrays)
        return model

    # -- to implement ------------------------------------------------------------------------
    @abstractmethod
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None: ...

    @abstractmethod
    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray: ...

    @abstractmethod
    def arrays(self) -> dict[str, np.ndarray]:
        """All learned state as named arrays (what a model file stores)."""

    @abstractmethod
    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Set learned state from ``arrays``, checking names and shapes with ``expect_array``."""

    # -- optional, shown by info/report when present -------------------------------------------
    def equations(self) -> list[tuple[str, str]] | None:
        """(lhs, rhs) pairs of the identified equations, if the model has them."""
        return None

    def eigenvalues(self) -> np.ndarray | None:
        """Discrete-time eigenvalues of the linear(ised) dynamics, if the model has them."""
        return None

    # -- helpers -------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not self.is_fitted():
            raise UsageError(f"the {self.name} model is not fitted; call fit first")

    @property
    def n_variables(self) -> int:
        return len(self.variables_)

    @property
    def n_inputs(self) -> int:
        return len(self.inputs_)


def expect_array(
    arrays: dict[str, np.ndarray], name: str, shape: tuple[int | None, ...]
) -> np.ndarray:
    """``arrays[name]`` checked against ``shape`` (None = any length); DataError otherwise."""
    if name not in arrays:
        raise DataError(f"model file lacks the array {name!r}")
    array = np.asarray(arrays[name])
    if array.ndim != len(shape) or any(
        want is not None and have != want for have, want in zip(array.shape, shape)
    ):
        raise DataError(f"model array {name!r} has shape {array.shape}, expected {shape}")
    return array


def _median_step(data: Dataset) -> float:
    steps = np.concatenate([np.diff(trial.t) for trial in data.trials if trial.n_samples > 1])
    if steps.size == 0:
        raise DataError(f"{data.source}: too few samples to estimate a time step")
    return float(np.median(steps))
