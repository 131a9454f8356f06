"""The in-memory dataset every command works on: a list of trials sharing variable names."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from dynid.errors import DataError

# Relative spread of time steps below which sampling counts as uniform.
UNIFORM_RTOL = 1e-6


@dataclass(frozen=True)
class Trial:
    """One independent recording.

    t: (n,) strictly increasing times; x: (n, d) states; u: (n, m) inputs or None.
    """

    t: np.ndarray
    x: np.ndarray
    u: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.x.ndim != 2 or self.t.shape != (self.x.shape[0],):
            raise ValueError(f"trial shapes disagree: t {self.t.shape}, x {self.x.shape}")
        if self.u is not None and self.u.shape[0] != self.x.shape[0]:
            raise ValueError(f"trial shapes disagree: x {self.x.shape}, u {self.u.shape}")

    @property
    def n_samples(self) -> int:
        return int(self.x.shape[0])

    def slice(self, start: int | None = None, stop: int | None = None, step: int | None = None) -> Trial:
        """The samples ``start:stop:step`` as a new trial (views, no copy)."""
        u = None if self.u is None else self.u[start:stop:step]
        return Trial(self.t[start:stop:step], self.x[start:stop:step], u)


def uniform_step(t: np.ndarray) -> float | None:
    """The sampling interval of ``t`` if its steps are equal (to ``UNIFORM_RTOL``), else None."""
    if t.shape[0] < 2:
        return None
    steps = np.diff(t)
    step = float(np.median(steps))
    if step <= 0:
        return None
    if np.max(np.abs(steps - step)) > UNIFORM_RTOL * max(step, abs(float(t[-1]))):
        return None
    # The mean over the whole span is exact for t = t0 + k*dt, where the median of diffs is not.
    return float((t[-1] - t[0]) / (t.shape[0] - 1))


@dataclass(frozen=True)
class Dataset:
    """Trials with common variable and input names.

    ``dt`` is the common sampling interval (time units) or None when sampling is irregular or
    differs between trials. ``time_unit`` names the time units when the file said (``"s"`` for
    date-times, ``"ms"`` from a header ``time (ms)``, an HDF5 ``time_unit`` attribute), else None.
    ``time_origin``: when times came from ISO-8601 date-times, the first sample's date-time
    (``Z`` = UTC); times are then seconds since it. ``source`` names where the data came from, for
    messages; ``notes`` are the interpretations a user should hear about (said on stderr).
    """

    trials: tuple[Trial, ...]
    variables: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    dt: float | None = None
    time_column: str | None = None
    time_unit: str | None = None
    time_origin: str | None = None
    source: str = "<memory>"
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.trials:
            raise DataError(f"{self.source}: no data rows")
        for trial in self.trials:
            if trial.x.shape[1] != len(self.variables):
                raise ValueError("trial width differs from the number of variables")
            n_inputs = 0 if trial.u is None else trial.u.shape[1]
            if n_inputs != len(self.inputs):
                raise ValueError("trial input width differs from the number of inputs")

    @classmethod
    def from_arrays(
        cls,
        x: np.ndarray | list[np.ndarray],
        *,
        t: np.ndarray | list[np.ndarray] | None = None,
        u: np.ndarray | list[np.ndarray] | None = None,
        dt: float = 1.0,
        variables: list[str] | None = None,
        inputs: list[str] | None = None,
    ) -> Dataset:
        """Build a dataset from arrays: one (n, d) array or a list of them (one per trial)."""
        xs = [np.asarray(a, dtype=float) for a in (x if isinstance(x, list) else [x])]
        xs = [a[:, None] if a.ndim == 1 else a for a in xs]
        ts = (
            [np.arange(a.shape[0]) * dt for a in xs]
            if t is None
            else [np.asarray(a, dtype=float) for a in (t if isinstance(t, list) else [t])]
        )
        us: list[np.ndarray | None]
        if u is None:
            us = [None] * len(xs)
        else:
            us = [np.asarray(a, dtype=float) for a in (u if isinstance(u, list) else [u])]
            us = [a[:, None] if a.ndim == 1 else a for a in us]
        d = xs[0].shape[1]
        m = 0 if us[0] is None else us[0].shape[1]
        trials = tuple(Trial(ti, xi, ui) for ti, xi, ui in zip(ts, xs, us, strict=True))
        return cls(
            trials=trials,
            variables=tuple(variables or [f"x{i}" for i in range(d)]),
            inputs=tuple(inputs or [f"u{i}" for i in range(m)]),
            dt=common_step(trials),
        )

    @property
    def time_from_datetime(self) -> bool:
        """Whether times were date-times in the file (now seconds since ``time_origin``)."""
        return self.time_origin is not None

    @property
    def n_trials(self) -> int:
        return len(self.trials)

    @property
    def n_samples(self) -> int:
        return sum(trial.n_samples for trial in self.trials)

    @property
    def n_variables(self) -> int:
        return len(self.variables)

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    def fingerprint(self) -> str:
        """sha256 over names, times and values: equal data gives an equal fingerprint."""
        digest = hashlib.sha256()
        digest.update("\x1f".join(self.variables).encode())
        digest.update(b"\x1e")
        digest.update("\x1f".join(self.inputs).encode())
        for trial in self.trials:
            digest.update(b"\x1d")
            for array in (trial.t, trial.x, trial.u):
                if array is not None:
                    digest.update(np.ascontiguousarray(array, dtype="<f8").tobytes())
        return digest.hexdigest()

    def with_trials(self, trials: list[Trial] | tuple[Trial, ...], **changes: object) -> Dataset:
        """A copy with other trials (and optionally other fields); ``dt`` is recomputed."""
        fields = {
            "variables": self.variables,
            "inputs": self.inputs,
            "time_column": self.time_column,
            "time_unit": self.time_unit,
            "time_origin": self.time_origin,
            "source": self.source,
            "notes": self.notes,
        }
        fields.update(changes)
        return Dataset(trials=tuple(trials), dt=common_step(trials), **fields)  # type: ignore[arg-type]

    def stacked(self) -> tuple[np.ndarray, np.ndarray | None]:
        """All trials' states (N, d) and inputs (N, m) concatenated, for summaries only."""
        x = np.concatenate([trial.x for trial in self.trials])
        u = None if not self.inputs else np.concatenate([trial.u for trial in self.trials])
        return x, u

    def value_range(self) -> np.ndarray:
        """(2, d): each state variable's smallest and largest value over all trials (NaN for
        a variable with no observed value)."""
        return value_range(self.stacked()[0])


def value_range(x: np.ndarray, within: np.ndarray | None = None) -> np.ndarray:
    """(2, d): the smallest and largest value of each column of ``x`` (n, d), missing values
    skipped (NaN for a column with none), widened to cover the range ``within`` (2, d) when
    given (a range gathered chunk by chunk)."""
    seen = np.stack([np.fmin.reduce(x, axis=0), np.fmax.reduce(x, axis=0)])
    if within is None:
        return seen
    return np.stack([np.fmin(within[0], seen[0]), np.fmax(within[1], seen[1])])


def common_step(trials: list[Trial] | tuple[Trial, ...]) -> float | None:
    """The sampling interval shared by every trial, or None if any is irregular or they differ."""
    steps = [uniform_step(trial.t) for trial in trials if trial.n_samples >= 2]
    if not steps or any(step is None for step in steps):
        return None
    first = steps[0]
    assert first is not None
    if any(abs(step - first) > UNIFORM_RTOL * first for step in steps if step is not None):
        return None
    return first


def combine(datasets: list[Dataset]) -> Dataset:
    """One dataset holding every trial of ``datasets`` (which must share names)."""
    first = datasets[0]
    for other in datasets[1:]:
        if other.variables != first.variables or other.inputs != first.inputs:
            raise DataError(
                f"{other.source}: variables/inputs differ from {first.source}'s; "
                "select the same ones with --columns and --inputs"
            )
        if other.time_unit != first.time_unit or other.time_from_datetime != first.time_from_datetime:
            raise DataError(
                f"{other.source}: time is in {_describe_time(other)}, in {first.source} it is in "
                f"{_describe_time(first)}"
            )
    if len(datasets) == 1:
        return first
    return first.with_trials(
        [trial for data in datasets for trial in data.trials],
        source=", ".join(data.source for data in datasets),
        notes=tuple(note for data in datasets for note in data.notes),
    )


def _describe_time(data: Dataset) -> str:
    unit = data.time_unit or "unstated units"
    return f"{unit} (from date-times)" if data.time_from_datetime else unit
