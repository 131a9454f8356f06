"""Time columns: ISO-8601 date-times, headers that carry a unit (``time (s)``), seconds since start."""

from __future__ import annotations

import re

import numpy as np

from dynid.errors import DataError

AUTO_TIME_NAMES = ("t", "time")
# Date-time columns taken as time without --time-column when there are several date-time columns.
DATETIME_TIME_NAMES = ("t", "time", "timestamp", "datetime", "date")

_ISO = re.compile(
    r"^\d{4}-\d{2}-\d{2}"
    r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
    r"\s*(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?$"
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


def is_time_name(header: str, names: tuple[str, ...] = AUTO_TIME_NAMES) -> bool:
    """Whether ``header``, without its unit, is one of ``names`` (case-insensitive)."""
    return split_unit(header)[0].lower() in names


def parse_iso_datetimes(values: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """Strings (n,) as datetime64[ns] if every non-missing one is ISO-8601, else None.

    Returns the times and whether they carried time zones (then they are converted to UTC, so a
    change of offset - daylight saving - keeps the true elapsed time). Missing values become NaT.
    A column mixing zoned and zone-less times is refused: their elapsed times are unknowable.
    """
    import pandas as pd

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
