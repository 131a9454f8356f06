"""Time: ISO-8601 date-times, headers that carry a unit (``time (s)``), seconds since the first
sample, and the time axis of a dataset (a column, --dt, or HDF5 ``dt``/``t0`` attributes)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from dynid.data.table import Table
from dynid.errors import DataError

AUTO_TIME_NAMES = ("t", "time")
# Date-time columns taken as time without --time-column when there are several date-time columns.
DATETIME_TIME_NAMES = ("t", "time", "timestamp", "datetime", "date")

_ISO = re.compile(
    r"^\d{4}-\d{2}-\d{2}"
    r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
    r"\s*(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?$"
)
# Day-first dotted dates as spreadsheets in much of Europe write them ("31.12.2024 13:05:59,5");
# never month-first, unlike slashed dates, which stay text.
_DOTTED = re.compile(
    r"^(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})"
    r"(?:[T ](?P<hour>\d{1,2})(?P<rest>:\d{2}(?::\d{2}(?:[.,]\d+)?)?))?$"
)
# Names of columns that count clock time or samples, with an optional unit suffix (``time_s``,
# ``Elapsed_ms``): an increasing one is never taken as a state unless --columns names it.
_CLOCK_NAME = re.compile(
    r"^(?:t|time|times|timestamp|datetime|date|seconds|secs?|elapsed(?:[ _-]?time)?|epoch|"
    r"unix[ _-]?time|index|idx|samples?|sample[ _-]?(?:index|number|no)|step|frame|tick)"
    r"(?:[ _-]?(?:s|ms|us|ns|sec|secs|seconds|min|mins|h|hours?|days?))?$",
    re.IGNORECASE,
)
# "time (s)", "t [ms]", "time/s": a name and its unit.
_UNIT_HEADER = re.compile(r"^(?P<base>.+?)\s*(?:\((?P<p>[^()]+)\)|\[(?P<b>[^\[\]]+)\]|/(?P<s>[^/\s]+))$")


def split_unit(header: str) -> tuple[str, str | None]:
    """``"time (s)"`` -> ("time", "s"); a header without a unit -> (header, None)."""
    match = _UNIT_HEADER.match(header.strip())
    if not match:
        return header.strip(), None
    unit = match.group("p") or match.group("b") or match.group("s")
    return match.group("base").strip(), unit.strip()


# Spellings of the common time units, each with its length in seconds: "s" and "sec" are one
# unit, so a model fitted on "time (s)" takes a file whose header says "time [sec]".
_SECONDS_PER_UNIT = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("us", "\u00b5s", "\u03bcs", "usec", "usecs", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ns", "nsec", "nanosecond", "nanoseconds"), 1e-9),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
}


def same_time_unit(a: str, b: str) -> bool:
    """Whether time units ``a`` and ``b`` (as files state them) are one unit: the same
    spelling (case and surrounding blanks aside), or two spellings of one known unit
    (``"s"``, ``"sec"``, ``"seconds"``). Unknown spellings must match."""
    a, b = a.strip().lower(), b.strip().lower()
    if a == b:
        return True
    known_a, known_b = _SECONDS_PER_UNIT.get(a), _SECONDS_PER_UNIT.get(b)
    return known_a is not None and known_a == known_b


def is_time_name(header: str, names: tuple[str, ...] = AUTO_TIME_NAMES) -> bool:
    """Whether ``header``, without its unit, is one of ``names`` (case-insensitive)."""
    return split_unit(header)[0].lower() in names


def is_clock_name(header: str) -> bool:
    """Whether ``header`` names clock time or a sample count (``seconds``, ``time_s``,
    ``index``, ``sample``, ``Elapsed [ms]``...), the names users give time columns."""
    return bool(_CLOCK_NAME.match(split_unit(header)[0]))


def times_after(last: float, dt: float, count: int) -> np.ndarray:
    """The ``count`` times (count,) one step ``dt`` apart after ``last`` (same unit), rounded to
    nine digits below ``dt``'s leading digit: 29.99 + 0.01 is 30.000000000000004 in binary, which
    the files a forecast writes would show; the rounding moves a time by at most 5e-10 dt, and
    is skipped where it would be finer than the times' own precision."""
    times = last + dt * np.arange(1, count + 1)
    scale = 10.0 ** (9 - int(np.floor(np.log10(dt))))
    if np.all(np.abs(times) * scale < 2.0**52):
        times = np.round(times * scale) / scale
    return times


def parse_iso_datetimes(values: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """Strings (n,) as datetime64[ns] if every non-missing one is ISO-8601 (or every one a
    day-first dotted date, ``31.12.2024 13:05``, read as that ISO-8601 date), else None.

    Returns the times and whether they carried time zones (then they are converted to UTC, so a
    change of offset - daylight saving - keeps the true elapsed time). Missing values become NaT.
    A column mixing zoned and zone-less times is refused: their elapsed times are unknowable.
    """
    import pandas as pd

    present = [v for v in values if isinstance(v, str) and v.strip()]
    if present and _DOTTED.match(present[0].strip()):
        values = _dotted_as_iso(values)
        present = [v for v in values if isinstance(v, str) and v.strip()]
    if not present or not _ISO.match(present[0].strip()):  # most text columns stop here
        return None
    if len(present) + _count_missing(values) != len(values):
        return None
    matches = [_ISO.match(v.strip()) for v in present]
    if not all(matches):
        return None
    zoned = [m.group("zone") is not None for m in matches if m]
    if any(zoned) and not all(zoned):
        raise DataError("date-times mix values with and without a time zone")
    aware = all(zoned)
    stripped = pd.Series([v.strip() if isinstance(v, str) and v.strip() else None for v in values])
    try:
        parsed = pd.to_datetime(stripped.str.replace(",", ".", regex=False), format="ISO8601", utc=aware)
    except (ValueError, OverflowError) as exc:
        raise DataError(f"unreadable ISO-8601 date-time ({exc})") from None
    if aware:
        parsed = parsed.dt.tz_localize(None)
    return parsed.to_numpy(dtype="datetime64[ns]"), aware


def _dotted_as_iso(values: np.ndarray) -> np.ndarray:
    """Day-first dotted dates rewritten as ISO-8601 (``31.12.2024 9:05`` -> ``2024-12-31
    09:05``); values that are not such dates are left as they are (the ISO check refuses them)."""
    def iso(value: object) -> object:
        match = _DOTTED.match(value.strip()) if isinstance(value, str) else None
        if match is None:
            return value
        date = f"{match['year']}-{int(match['month']):02d}-{int(match['day']):02d}"
        return date if match["hour"] is None else f"{date} {int(match['hour']):02d}{match['rest']}"

    return np.array([iso(v) for v in values], dtype=object)


def _count_missing(values: np.ndarray) -> int:
    return sum(1 for v in values if _is_missing(v))


def _is_missing(value: object) -> bool:
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, float) and np.isnan(value))


def seconds_since_first(times: np.ndarray) -> tuple[np.ndarray, np.datetime64 | None]:
    """datetime64 (n,) -> float seconds since the first valid sample (NaN where missing), and that sample."""
    valid = ~np.isnat(times)
    if not valid.any():
        return np.full(times.shape, np.nan), None
    origin = times[valid][0]
    nanoseconds = (times - origin).astype("timedelta64[ns]").astype(np.int64)
    seconds = nanoseconds / 1e9
    seconds[~valid] = np.nan
    return seconds, origin


def iso_origin(origin: np.datetime64, utc: bool) -> str:
    """The ISO-8601 text of a first sample, to the second or finer: ``Z`` when zoned (UTC)."""
    text = np.datetime_as_string(origin, unit="ns").rstrip("0").rstrip(".")
    return text + "Z" if utc else text


@dataclass(frozen=True)
class TimeAxis:
    """How a dataset's times are made: from ``column`` (date-times become seconds since the
    first sample, ``origin``), else t0 + index * step with ``step`` (--dt), or with each table's
    ``dt``/``t0`` attributes, or 1. ``unit``: the time unit when the file says it."""

    column: str | None
    step: float | None
    unit: str | None
    origin: str | None

    @classmethod
    def of(
        cls, tables: list[Table], column: str | None, dt: float | None, source: str, notes: list[str]
    ) -> TimeAxis:
        """The time axis of ``tables`` with time column ``column`` (None: none) and --dt ``dt``;
        converts a date-time column in place to seconds and says so in ``notes``."""
        first = tables[0]
        if column is None:
            from_file = [table.dt for table in tables if table.dt is not None]
            if dt is not None and any(step != dt for step in from_file):
                notes.append(f"{source}: --dt {dt:g} overrides the file's dt attribute {from_file[0]:g}")
            unit = first.time_unit if dt is None and first.dt is not None else None
            return cls(None, dt, unit, None)
        if dt is not None:
            notes.append(f"--dt ignored: times come from column {column!r}")
        if first.kind(column) != "datetime":
            return cls(column, None, split_unit(column)[1], None)
        origin = None
        for table in tables:
            seconds, start = seconds_since_first(table.columns[column])
            table.columns[column] = seconds
            if origin is None and start is not None:
                origin = iso_origin(start, column in table.utc)
        zone = "UTC" if column in first.utc else "no time zone"
        notes.append(f"{source}: time column {column!r}: date-times ({zone}) as seconds since {origin}")
        return cls(column, None, "s", origin)

    def times(self, table: Table) -> np.ndarray:
        """(n,) times of ``table``'s rows (a date-time column already converted by ``of``)."""
        if self.column is not None:
            return np.asarray(table.columns[self.column], dtype=float)
        if self.step is None and table.dt is not None:
            return (table.t0 or 0.0) + np.arange(table.n_rows, dtype=float) * table.dt
        return np.arange(table.n_rows, dtype=float) * (self.step or 1.0)
