"""``Table``: one trial's raw columns as a reader found them, before roles are assigned."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dynid.errors import DataError

ColumnKind = Literal["number", "datetime", "other"]


def column_kind(values: np.ndarray) -> ColumnKind:
    """``number`` for float/int arrays, ``datetime`` for datetime64, ``other`` for text, bool, objects."""
    if values.dtype.kind in "fiu":
        return "number"
    if values.dtype.kind == "M":
        return "datetime"
    return "other"


def check_unique_names(names: Iterable[str], where: str) -> None:
    """DataError naming the first column name given twice: readers would rename one of them
    (pandas: ``x.1``) or keep only the last, and a model would silently use the wrong column.
    Empty names are left to the readers (they number them)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DataError(f"{where}: duplicate column name {name!r}")
        if name:
            seen.add(name)


@dataclass
class Table:
    """One trial's raw columns.

    columns: name -> (n,) array in file order; numbers as float64, date-times as datetime64[ns]
    (UTC when the file gave time zones, then named in ``utc``), anything else as an object array.
    label: names the trial in messages. index: the column that is a pandas index, if any.
    unreadable: columns the reader saw but could not read (e.g. pickled objects), by name.
    unread: columns the reader saw but left out as not wanted (HDF5 reads only the columns
    asked for), by name: still named when a column asked for is missing.
    named_by_dynid: the file gave no column names; dynid made them (HDF5: x0, x1, ...).
    dt, t0: sampling interval and first time from file metadata (HDF5 attributes), if any;
    time_unit: the unit those are in. notes: interpretations a user should hear about.
    """

    columns: dict[str, np.ndarray]
    label: str
    index: str | None = None
    unreadable: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()
    named_by_dynid: bool = False
    utc: frozenset[str] = frozenset()
    dt: float | None = None
    t0: float | None = None
    time_unit: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def kind(self, name: str) -> ColumnKind:
        return column_kind(self.columns[name])
