"""``load``: from a file spec and column options to a validated Dataset.

The same options exist on every command that reads data (see ``../shared/CONTRACT.md``).
"""

from __future__ import annotations

import dataclasses
from typing import BinaryIO, Literal

import numpy as np

from dynid.data.dataset import Dataset, Trial, common_step
from dynid.data.delimited import parse_decimal, parse_sep
from dynid.data.readers import read_tables
from dynid.data.table import Table
from dynid.data.times import AUTO_TIME_NAMES, DATETIME_TIME_NAMES, TimeAxis, is_clock_name, is_time_name, split_unit
from dynid.errors import DataError, MissingColumn, UsageError

NanPolicy = Literal["split", "error", "drop", "interpolate", "keep"]
NAN_POLICIES = ("split", "error", "drop", "interpolate", "keep")
# Largest magnitude of a value: beyond it squares overflow float64 (max 1.8e308), so that least
# squares, variances and errors turn into inf or NaN. Such numbers need rescaling, not fitting.
LARGEST_MAGNITUDE = 1e150


def load(
    spec: str,
    *,
    columns: list[str] | None = None,
    time_column: str | None = None,
    dt: float | None = None,
    inputs: list[str] | None = None,
    trial_column: str | None = None,
    nan: NanPolicy = "split",
    resample: float | None = None,
    sep: str | None = None,
    decimal: str | None = None,
    stdin: BinaryIO | None = None,
) -> Dataset:
    """Read a data file into a Dataset.

    spec: a path to delimited text (.csv/.tsv/.txt, optionally .gz), HDF5 (by its signature;
    also netCDF-4 and MATLAB v7.3; ``file.h5:/inner/path``), or ``-``.
    columns: state variables (default: every numeric column that is not time, trial or input).
    time_column: time column name, with or without its unit (``time`` finds ``time (s)``);
    default a column named ``t`` or ``time`` (any unit), else the one date-time column, else
    the file's ``dt``/``t0`` attributes, else index * dt. Date-times become seconds since the
    first sample.
    dt: sampling interval when there is no time column (default 1.0).
    inputs: exogenous input columns. trial_column: rows grouped into independent trials.
    nan: missing values - ``split`` into NaN-free segments, ``error``, ``drop`` rows,
    ``interpolate`` linearly in time, or ``keep`` (for backends that handle NaN).
    resample: interpolate every trial linearly onto a uniform grid of this step.
    sep, decimal: force the delimiter (``,`` ``;`` ``tab`` ``|`` ``space``) and decimal mark
    of text files (default: sniffed, and said in a note when not comma and point).
    """
    if nan not in NAN_POLICIES:
        raise UsageError(f"--nan {nan}: expected one of {', '.join(NAN_POLICIES[:4])}")
    if dt is not None and not (np.isfinite(dt) and dt > 0):
        raise UsageError(f"--dt {dt}: must be a positive number")
    if resample is not None and not (np.isfinite(resample) and resample > 0):
        raise UsageError(f"--resample {resample}: must be a positive number")
    wanted = None
    if columns is not None:
        wanted = {*columns, *(inputs or []), *AUTO_TIME_NAMES}
        wanted |= {name for name in (time_column, trial_column) if name}
    tables = read_tables(spec, stdin=stdin, wanted=wanted, sep=parse_sep(sep), decimal=parse_decimal(decimal))
    source = "<stdin>" if spec == "-" else spec
    notes = [note for table in tables for note in table.notes]
    roles = resolve_roles(tables[0], source, columns, time_column, inputs, trial_column, notes, dt=dt)
    for table in tables:
        _check_same_columns(table, tables[0], source)
    time = TimeAxis.of(tables, roles.time, dt, source, notes)
    if trial_column is not None:
        tables = [part for table in tables for part in _split_by_trial(table, trial_column, source)]
    trials: list[Trial] = []
    for index, table in enumerate(tables):
        trials.extend(_table_trials(table, roles, time, nan, source, index, notes))
    if not trials:
        raise DataError(f"{source}: no usable samples (after handling missing values)")
    if resample is not None:
        trials = [resample_trial(trial, resample) for trial in trials]
    return Dataset(
        trials=tuple(trials),
        variables=tuple(roles.states),
        inputs=tuple(roles.inputs),
        dt=common_step(trials),
        time_column=roles.time,
        time_unit=time.unit,
        time_origin=time.origin,
        source=source,
        notes=tuple(notes),
    )


class Roles:
    """Which columns are time (None: none), states and inputs."""

    def __init__(self, time: str | None, states: list[str], inputs: list[str]) -> None:
        self.time, self.states, self.inputs = time, states, inputs


def resolve_roles(
    table: Table,
    source: str,
    columns: list[str] | None,
    time_column: str | None,
    inputs: list[str] | None,
    trial_column: str | None,
    notes: list[str],
    *,
    dt: float | None = None,
) -> Roles:
    """Which columns are time, states and inputs (``load``'s arguments); ``dt`` (--dt) given
    keeps a numeric pandas index from being taken as the time (``_index_is_time``)."""
    available = list(table.columns)

    def find(name: str, option: str, exact: bool = False) -> str:
        return _find(table, source, name, option, exact)

    def require(name: str, option: str) -> str:
        name = find(name, option)
        _refuse_stray_text(table, source, name)
        if table.kind(name) != "number":
            what = "a date-time column (only the time column may be)" if table.kind(name) == "datetime" else "not numeric"
            raise DataError(f"{source}: column {name!r} is {what}")
        return name

    if trial_column is not None and trial_column not in table.columns:
        find(trial_column, "--trial-column", exact=True)  # the error names the columns
    time = _find_time(table, source, time_column)
    if time is None and time_column is None and dt is None and _index_is_time(table):
        time = table.index
        notes.append(f"{source}: pandas index column {table.index!r} taken as the time (its values increase "
                     "every row and are not row numbers; --dt gives a step instead)")
    if time is None and time_column is None and dt is None and table.dt is None:
        _refuse_unread_time(table, source, trial_column)
    input_names = [require(name, "--inputs") for name in (inputs or [])]
    if columns is not None:
        if not columns:
            raise UsageError("--columns: give at least one column name")
        states = [require(name, "--columns") for name in columns]
    else:
        excluded = {time, trial_column, table.index, *input_names}
        states = [c for c in available if table.kind(c) == "number" and c not in excluded]
        ignored = [c for c in available if table.kind(c) != "number" and c not in excluded]
        for name in ignored:
            _refuse_stray_text(table, source, name)
        ignored += list(table.unreadable)
        if ignored:
            notes.append(f"{source}: non-numeric column(s) ignored: {', '.join(map(repr, ignored))}")
        if table.index is not None and table.index != time:
            notes.append(f"{source}: pandas index column {table.index!r} dropped")
        time, states = _clock_columns_out_of_states(table, source, time, states, notes)
    overlap = set(states) & ({time} | set(input_names))
    if overlap:
        raise UsageError(f"column {sorted(overlap)[0]!r} is given two roles (state and time/input)")
    if len(set(states)) != len(states):
        raise UsageError("--columns names a column twice")
    if not states:
        raise DataError(f"{source}: no numeric state columns")
    return Roles(time, states, input_names)


def _refuse_unread_time(table: Table, source: str, trial_column: str | None) -> None:
    """DataError for a text column named like a date-time (``date``, ``timestamp``, ``time``)
    whose values are no date-time dynid reads (``01/02/2024``, month- or day-first by country;
    ``13:05:00`` without a date): left out as text, the samples would be timed by their index
    and the file's times lost with exit 0. --dt or --time-column (a readable column) decide."""
    for name in table.columns:
        if name != trial_column and table.kind(name) == "other" and is_time_name(name, DATETIME_TIME_NAMES):
            # Text, or objects the CSV parser made of it (pyarrow reads "13:05:00" as a time of day).
            values = [str(v).strip() for v in table.columns[name] if v is not None and str(v).strip()
                      and not (isinstance(v, float) and np.isnan(v))]
            if not values:
                continue
            _refuse_stray_text(table, source, name)  # numbers but a unit row or a "-": said so
            raise DataError(
                f"{source}: column {name!r} is named like the time but holds {values[0]!r}, neither a "
                "number nor a date-time dynid reads (ISO-8601 2024-02-01 13:05:00, or day-first "
                "01.02.2024 13:05); convert it, or give --dt to time the samples by their row"
            )


def _index_is_time(table: Table) -> bool:
    """Whether the table's pandas index (``df.index = t; df.to_csv()``, unnamed) is its time
    axis: numbers that increase every row and are not all whole (whole numbers are row labels,
    0..n-1 or a selection of rows, which are dropped as before)."""
    if table.index is None or table.kind(table.index) != "number":
        return False
    values = np.asarray(table.columns[table.index], dtype=float)
    return (values.size >= 3 and bool(np.all(np.isfinite(values))) and bool(np.all(np.diff(values) > 0))
            and not bool(np.all(values == np.round(values))))


def _refuse_stray_text(table: Table, source: str, name: str) -> None:
    """DataError for a text column that is mostly numbers: a few cells such as ``-``, ``?`` or
    ``n.a.`` made the reader keep it as text, and it would be left out of the states (or refused
    as not numeric) without saying where. Names the first such cell."""
    import pandas as pd

    values = table.columns[name]
    if values.dtype != object:
        return
    text = pd.Series(values, dtype=object)
    present = text.notna() & (text.astype(str).str.strip() != "")
    # Either decimal mark: a decimal-comma file's numbers stay text in a column that is text.
    numbers = pd.to_numeric(text.astype(str).str.strip().str.replace(",", ".", regex=False), errors="coerce").notna()
    strays = present & ~numbers
    if strays.any() and numbers.sum() > strays.sum():
        row = int(np.flatnonzero(strays.to_numpy())[0])
        remedy = (
            "a row of units under the header? delete it (a unit may go in the header: 'x (m)')" if row == 0
            else "leave missing values empty or write NA or NaN (or choose the states with --columns)"
        )
        raise DataError(
            f"{source}: column {name!r} holds numbers but {str(values[row]).strip()!r} at row {row + 1}; {remedy}"
        )


def _clock_columns_out_of_states(
    table: Table, source: str, time: str | None, states: list[str], notes: list[str]
) -> tuple[str | None, list[str]]:
    """(time, states) with the default states' clock columns taken out: a column named like a
    time or sample index (``seconds``, ``time_s``, ``index`` from ``reset_index()``) that
    increases every row is no state (as one it would be a ramp the model has to learn, and the
    time axis would be lost). With no time column found, the one such column is the time; beside
    a time column, they are dropped; several with no time column are refused (which is the
    time is the user's call). Each choice is said in ``notes``."""
    clocks = []
    for name in states:
        values = np.asarray(table.columns[name], dtype=float)
        values = values[~np.isnan(values)]
        if is_clock_name(name) and values.size >= 3 and bool(np.all(np.diff(values) > 0)):
            clocks.append(name)
    if not clocks:
        return time, states
    remaining = [name for name in states if name not in clocks]
    shown = ", ".join(map(repr, clocks))
    if time is not None:
        notes.append(f"{source}: column(s) {shown} named like a time or sample index and increasing "
                     f"every row dropped (the time is {time!r}; name them in --columns to keep them)")
        return time, remaining
    if len(clocks) > 1:
        raise DataError(
            f"{source}: columns {shown} are named like a time or sample index and increase every row; "
            "give the time with --time-column (and the states with --columns)"
        )
    notes.append(f"{source}: column {clocks[0]!r} taken as the time (named like a time or sample index "
                 "and increasing every row; --time-column or --columns choose otherwise)")
    return clocks[0], remaining


def _find(table: Table, source: str, name: str, option: str, exact: bool = False) -> str:
    """The column ``name``; unless ``exact``, also the one column whose header is ``name (unit)``."""
    if name in table.columns:
        return name
    by_base = [c for c in table.columns if split_unit(c)[0] == name]
    if len(by_base) == 1 and not exact:
        return by_base[0]
    if name in table.unreadable:
        raise DataError(
            f"{source}: column {name!r} holds Python objects (pandas fixed format), which "
            "dynid does not unpickle; save with to_hdf(..., format='table')"
        )
    available = [*table.columns, *table.unread]
    shown = ", ".join(available[:20]) + (" ..." if len(available) > 20 else "")
    if table.named_by_dynid:
        shown += f" (named by dynid: {table.label} has no 'columns' attribute)"
    raise MissingColumn(f"{source}: {option} {name!r} is not a column; columns are: {shown}",
                        source=source, name=name, option=option, available=shown)


def _find_time(table: Table, source: str, time_column: str | None) -> str | None:
    """The time column: the one named, a ``t``/``time`` column (any unit), else the single
    date-time column (or the one with a time-like name among several)."""
    if time_column is not None:
        name = _find(table, source, time_column, "--time-column")
        if table.kind(name) == "other":
            raise DataError(f"{source}: time column {name!r} is neither numeric nor ISO-8601 date-times")
        return name
    usable = [c for c in table.columns if table.kind(c) != "other"]
    named = [c for c in usable if is_time_name(c)]
    if named:
        return named[0]
    datetimes = [c for c in usable if table.kind(c) == "datetime"]
    if len(datetimes) > 1:
        datetimes = [c for c in datetimes if is_time_name(c, DATETIME_TIME_NAMES)] or datetimes
        if len(datetimes) > 1:
            raise DataError(
                f"{source}: several date-time columns ({', '.join(map(repr, datetimes))}); "
                "choose one with --time-column"
            )
    return datetimes[0] if datetimes else None


def _split_by_trial(table: Table, trial_column: str, source: str) -> list[Table]:
    labels = table.columns[trial_column]
    if table.kind(trial_column) == "number" and np.isnan(labels.astype(float)).any():
        raise DataError(f"{source}: trial column {trial_column!r} has missing values")
    _, first_index = np.unique(labels, return_index=True)
    parts = []
    for value in labels[np.sort(first_index)]:
        mask = labels == value
        parts.append(
            dataclasses.replace(
                table,
                columns={name: col[mask] for name, col in table.columns.items()},
                label=f"{source} trial {value}",
                notes=[],
            )
        )
    return parts


def _check_same_columns(table: Table, first: Table, source: str) -> None:
    if set(table.columns) != set(first.columns):
        raise DataError(f"{table.label}: columns differ from the first trial's ({first.label})")


def _table_trials(
    table: Table,
    roles: Roles,
    time: TimeAxis,
    nan: NanPolicy,
    source: str,
    index: int,
    notes: list[str],
) -> list[Trial]:
    n = table.n_rows
    if n == 0:
        raise DataError(f"{table.label}: no data rows")
    where = table.label
    t = time.times(table)
    if roles.time is not None:
        check_increasing(t, roles.time, where)
    x = np.column_stack([np.asarray(table.columns[c], dtype=float) for c in roles.states])
    u = (
        np.column_stack([np.asarray(table.columns[c], dtype=float) for c in roles.inputs])
        if roles.inputs
        else None
    )
    values = x if u is None else np.hstack([x, u])
    names = roles.states + roles.inputs
    check_values(values, names, where)
    missing = np.isnan(values)
    if not missing.any() or nan == "keep":
        return _nonempty([Trial(t, x, u)], where)
    if nan == "error":
        row, col = np.argwhere(missing)[0]
        raise DataError(
            f"{where}: column {names[col]!r} has a missing value at row {row + 1} "
            "(choose --nan split|drop|interpolate)"
        )
    bad_rows = missing.any(axis=1)
    if nan == "drop":
        notes.append(f"{where}: dropped {int(bad_rows.sum())} rows with missing values")
        keep = ~bad_rows
        return _nonempty([Trial(t[keep], x[keep], None if u is None else u[keep])], where)
    if nan == "interpolate":
        notes.append(f"{where}: interpolated {int(missing.sum())} missing values")
        filled = _interpolate_missing(t, values)
        keep = ~np.isnan(filled).any(axis=1)  # leading/trailing gaps have nothing to interpolate
        filled = filled[keep]
        d = x.shape[1]
        return _nonempty(
            [Trial(t[keep], filled[:, :d], None if u is None else filled[:, d:])], where
        )
    segments = true_runs(~bad_rows)
    trials = [Trial(t[a:b], x[a:b], None if u is None else u[a:b]) for a, b in segments if b - a >= 2]
    # A complete row between two missing ones is a segment of one sample, no trial: dropped too.
    alone = sum(1 for a, b in segments if b - a == 1)
    lone_rows = f": {int(bad_rows.sum())} with missing values, {alone} alone between them" if alone else ""
    # Rows dropped at the end move the end a forecast continues from: said, with both times.
    ends_early = (f"; its data end at t = {trials[-1].t[-1]:g}, before its last row (t = {t[-1]:g})"
                  if trials and trials[-1].n_samples and trials[-1].t[-1] < t[-1] else "")
    notes.append(
        f"{where}: missing values split it into {len(trials)} segment(s)"
        f" (dropped {int(bad_rows.sum()) + alone} rows{lone_rows}){ends_early}"
    )
    return trials


def check_values(values: np.ndarray, names: list[str], where: str, first_row: int = 1) -> None:
    """DataError naming the column and row (``first_row``: the number of row 0) of the first
    infinite value or one beyond LARGEST_MAGNITUDE; NaN passes (the --nan policy decides)."""
    if np.isinf(values).any():
        row, col = np.argwhere(np.isinf(values))[0]
        raise DataError(f"{where}: column {names[col]!r} is infinite at row {row + first_row}")
    with np.errstate(invalid="ignore"):
        huge = np.abs(values) > LARGEST_MAGNITUDE
    if huge.any():
        row, col = np.argwhere(huge)[0]
        raise DataError(f"{where}: column {names[col]!r} is {values[row, col]:.3g} at row {row + first_row}, "
                        "too large to compute with (its square overflows); rescale the column")


def check_increasing(t: np.ndarray, name: str, where: str, first_row: int = 1) -> None:
    """DataError at the first missing, infinite, repeated or decreasing time (``first_row``:
    the number of row 0)."""
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise DataError(f"{where}: time column {name!r} is missing or infinite at row {bad[0] + first_row}")
    steps = np.diff(t)
    if (steps <= 0).any():
        row = int(np.flatnonzero(steps <= 0)[0]) + 1
        kind = "duplicate" if steps[row - 1] == 0 else "decreasing"
        raise DataError(f"{where}: time column {name!r} has a {kind} value at row {row + first_row}")


def _nonempty(trials: list[Trial], where: str) -> list[Trial]:
    for trial in trials:
        if trial.n_samples < 2:
            raise DataError(f"{where}: too few samples ({trial.n_samples}); need at least 2")
    return trials


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Half-open [start, stop) index ranges where ``mask`` is True."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _interpolate_missing(t: np.ndarray, values: np.ndarray) -> np.ndarray:
    filled = values.copy()
    for col in range(values.shape[1]):
        good = ~np.isnan(values[:, col])
        if good.sum() < 2:
            continue
        inside = (t >= t[good][0]) & (t <= t[good][-1])
        filled[inside, col] = np.interp(t[inside], t[good], values[good, col])
    return filled


def resample_trial(trial: Trial, step: float) -> Trial:
    """Linear interpolation of ``trial`` onto t0, t0 + step, ... <= t_end."""
    n = int(np.floor((trial.t[-1] - trial.t[0]) / step + 1e-9)) + 1
    if n < 2:
        raise DataError(f"--resample {step}: step longer than the recording")
    t = trial.t[0] + step * np.arange(n)

    def interp(a: np.ndarray) -> np.ndarray:
        return np.column_stack([np.interp(t, trial.t, a[:, j]) for j in range(a.shape[1])])

    return Trial(t, interp(trial.x), None if trial.u is None else interp(trial.u))
