"""Writers for tabular results (forecasts): CSV to a file or stdout, or HDF5; always atomic."""

from __future__ import annotations

from typing import Optional

import numpy as np

from dynid.atomic import atomic_path, write_text
from dynid.data.readers import HDF5_FAMILY_SUFFIXES, HDF5_SUFFIXES


def is_hdf5_target(target: str) -> bool:
    """Whether ``write_table`` writes HDF5 (not CSV) to ``target``: by its suffix alone (not
    the HDF5 family's: a ``.mat`` or ``.nc`` written so would not be what its name says)."""
    return target.lower().endswith(HDF5_SUFFIXES)


def check_table_target(target: str) -> None:
    """UsageError for a ``target`` named like a file of the HDF5 family that ``write_table``
    does not write (``.nc``, ``.mat``, ...): CSV under such a name is a file no reader, dynid's
    included, reads as what its name says; the same for ``.json`` (``report`` reads such a
    file as a JSON result), which ``--json`` and a redirection give."""
    from dynid.errors import UsageError

    lower = target.lower()
    if lower.endswith(".json"):
        raise UsageError(f"{target}: -o writes a table as CSV or HDF5 (.h5), not JSON; for JSON "
                         f"give --json and redirect stdout (--json > {target})")
    if lower.endswith(HDF5_FAMILY_SUFFIXES) and not is_hdf5_target(target):
        suffix = next(s for s in HDF5_FAMILY_SUFFIXES if lower.endswith(s))
        raise UsageError(f"{target}: dynid writes tables as CSV or as HDF5 named .h5/.hdf5, not as "
                         f"{suffix}; name the output .h5 or .csv")


def write_table(
    target: str,
    time_name: str,
    t: np.ndarray,
    names: tuple[str, ...],
    values: np.ndarray,
    *,
    time_origin: Optional[str] = None,
) -> None:
    """Write times (n,) and values (n, k) with a header to ``target``.

    ``.h5``/``.hdf5`` targets get a 2-D dataset ``/data`` (attribute ``columns``) with a 1-D
    ``/t`` beside it - the layout ``dynid.load`` reads back. Anything else (``-`` = stdout) is
    CSV; numbers are written as the shortest text that reads back bit-identically.
    ``time_origin`` (CSV only): ``t`` are seconds since this ISO-8601 date-time and the time
    column is written as date-times (``iso_times``).
    """
    check_table_target(target)
    if is_hdf5_target(target):
        if time_origin is not None:
            raise ValueError("date-time columns are written to CSV only")
        import h5py

        with atomic_path(target) as temp, h5py.File(temp, "w") as handle:
            data = handle.create_dataset("data", data=np.asarray(values, dtype=float))
            data.attrs["columns"] = np.array(names, dtype=object)
            handle.create_dataset(time_name if time_name in ("t", "time") else "t", data=t)
        return
    # Python's float repr: the shortest text that reads back bit-identically (4.01, where
    # 17 significant digits show 4.0099999999999998).
    numbers = [",".join(map(repr, row)) for row in np.asarray(values, dtype=float).reshape(len(t), -1).tolist()]
    times = iso_times(t, time_origin) if time_origin is not None else [repr(value) for value in np.asarray(t, dtype=float).tolist()]
    header = ",".join(_csv_field(name) for name in (time_name, *names)) + "\n"
    rows = zip(times, numbers, strict=True)
    write_text(target, header + "".join(f"{when},{row}\n" for when, row in rows))


def iso_times(t: np.ndarray, origin: str) -> list[str]:
    """Seconds (n,) since ``origin`` (ISO-8601 as ``Dataset.time_origin``: ``Z`` = UTC) as
    ISO-8601 date-times in the same zone, to the microsecond at most: the unit is the coarsest
    (s, ms, us) that shows every time exactly."""
    utc = origin.endswith("Z")
    start = np.datetime64(origin.removesuffix("Z"), "us")
    # Microseconds are below the float error of times up to centuries, and above dt's rounding.
    offsets = np.round(np.asarray(t, dtype=float) * 1e6).astype(np.int64)
    unit = next(u for u, size in (("s", 10**6), ("ms", 10**3), ("us", 1)) if np.all(offsets % size == 0))
    texts = np.datetime_as_string(start + offsets.astype("timedelta64[us]"), unit=unit)
    return [text + "Z" if utc else text for text in texts.tolist()]


def _csv_field(name: str) -> str:
    if any(ch in name for ch in ',"\n'):
        return '"' + name.replace('"', '""') + '"'
    return name
