"""pandas ``DataFrame.to_hdf`` groups read with h5py alone (no PyTables, never unpickling).

Fixed format (``pandas_type = "frame"``): ``axis0`` column names, ``axis1`` the index,
``block{k}_items`` / ``block{k}_values`` one (n, m) array per dtype; object blocks (text) are
pickled and so left unread. Table format (``pandas_type = "frame_table"``): a compound dataset
``table`` with an ``index`` field and ``values_block_{k}`` (n, m) fields, or one field per data
column; the names are in the attributes ``values_block_{k}_kind`` as protocol-0 pickled lists of
strings, which ``_pickled_strings`` reads as text without executing anything.
"""

from __future__ import annotations

import re

import numpy as np

from dynid.data.table import Table
from dynid.errors import DataError

_DATETIME_KIND = re.compile(r"^datetime64(?:\[(\w+)\])?")


def is_pandas_group(group) -> bool:  # type: ignore[no-untyped-def]
    return _text(group.attrs.get("pandas_type")) in ("frame", "frame_table", "series")


def read_pandas_group(path: str, group) -> Table:  # type: ignore[no-untyped-def]
    """One trial from a pandas group: its columns, and its index as column ``index``
    (or the index's own name) marked as the pandas index."""
    where = f"{path}:{group.name}"
    kind = _text(group.attrs.get("pandas_type"))
    if kind == "frame_table":
        columns, unreadable, index, utc = _table_format(where, group)
    else:
        columns, unreadable, index, utc = _fixed_format(where, group, series=kind == "series")
    index_name, (index_values, index_utc) = index
    if index_name in columns:
        raise DataError(f"{where}: the pandas index and a column are both named {index_name!r}")
    columns = {index_name: index_values, **columns}
    if index_utc:
        utc.add(index_name)
    return Table(columns=columns, label=where, index=index_name, unreadable=tuple(unreadable), utc=frozenset(utc))


_Index = tuple[str, tuple[np.ndarray, bool]]


def _fixed_format(where: str, group, series: bool):  # type: ignore[no-untyped-def]
    """(columns, unreadable names, (index name, (values, utc)), utc column names) of a fixed-format group."""
    if series:
        name = _text(group.attrs.get("name"))
        parts = [([name if name and name != "N." else "values"], group["values"])]
        index_node = group["index"]
    else:
        if int(group.attrs.get("ndim", 2)) != 2 or "axis1" not in group:
            raise DataError(f"{where}: pandas layout not read (a MultiIndex?); save with reset_index()")
        order = [_text(n) for n in group["axis0"][()]]
        parts = [
            ([_text(n) for n in group[f"block{k}_items"][()]], group[f"block{k}_values"])
            for k in range(int(group.attrs["nblocks"]))
        ]
        index_node = group["axis1"]
    columns: dict[str, np.ndarray] = {}
    unreadable: list[str] = []
    utc: set[str] = set()
    for names, values in parts:
        if values.dtype.kind not in "fiub":  # pickled Python objects (text columns)
            unreadable.extend(names)
            continue
        block = values[()].reshape(values.shape[0], -1) if values.ndim == 1 else values[()]
        kind = _text(values.attrs.get("value_type"))
        for j, name in enumerate(names):
            columns[name], aware = _values(block[:, j], kind, "tz" in values.attrs)
            if aware:
                utc.add(name)
    if not series:
        columns = {name: columns[name] for name in order if name in columns}
        unreadable = [name for name in order if name in unreadable]
    index_values = _values(index_node[()], _text(index_node.attrs.get("kind")), "tz" in index_node.attrs)
    return columns, unreadable, (_index_name(index_node.attrs.get("name")), index_values), utc


def _table_format(where: str, group):  # type: ignore[no-untyped-def]
    """The same as ``_fixed_format`` for a table-format group."""
    if "table" not in group:
        raise DataError(f"{where}: pandas table format without a 'table' dataset")
    if int(group.attrs.get("levels", 1)) != 1:
        raise DataError(f"{where}: pandas layout not read (a MultiIndex); save with reset_index()")
    node = group["table"]
    rows = node[()]
    attrs = node.attrs
    zoned = _zoned_fields(group.attrs.get("info"), rows.dtype.names, where)
    columns: dict[str, np.ndarray] = {}
    utc: set[str] = set()
    index: _Index | None = None
    for field in rows.dtype.names:
        data = rows[field]
        kind = _text(attrs.get(f"{field}_dtype")) or _text(attrs.get(f"{field}_kind"))
        if field == "index":
            index = ("index", _values(data, _text(attrs.get("index_kind")), "index" in zoned))
            continue
        names = _pickled_strings(attrs[f"{field}_kind"], where) if f"{field}_kind" in attrs else [field]
        block = data.reshape(data.shape[0], -1)
        for j, name in enumerate(names):
            columns[name], aware = _values(block[:, j], kind, field in zoned)
            if aware:
                utc.add(name)
    if index is None:
        raise DataError(f"{where}: pandas table format without an index")
    order = _pickled_strings(group.attrs["non_index_axes"], where) if "non_index_axes" in group.attrs else list(columns)
    index_name = _index_name(_info_index_name(group.attrs.get("info", b""), where))
    return {name: columns[name] for name in order if name in columns}, [], (index_name, index[1]), utc


def _values(values: np.ndarray, kind: str, zoned: bool) -> tuple[np.ndarray, bool]:
    """A column as float, datetime64[ns] (int64 stored with a ``datetime64[unit]`` kind), or
    objects (bytes decoded); and whether it is UTC (pandas stores zoned times as UTC)."""
    match = _DATETIME_KIND.match(kind or "")
    if match:
        unit = match.group(1) or "ns"
        return np.asarray(values, dtype=np.int64).astype(f"datetime64[{unit}]").astype("datetime64[ns]"), zoned
    if values.dtype.kind in "fiu":
        return np.asarray(values, dtype=float), False
    if values.dtype.kind == "S":
        return np.array([v.decode("utf-8", errors="replace") for v in values], dtype=object), False
    return np.asarray(values, dtype=object), False


def _index_name(name) -> str:  # type: ignore[no-untyped-def]
    text = _text(name)
    return "index" if not text or text == "N." else text


def _info_index_name(info, where: str) -> str | None:  # type: ignore[no-untyped-def]
    """The index name in a table group's pickled ``info`` dict (``index_name`` key), if any."""
    strings = _pickled_strings(info, where) if info else []
    if "index_name" in strings:
        position = strings.index("index_name")
        return strings[position + 1] if position + 1 < len(strings) else None
    return None


def _text(value) -> str:  # type: ignore[no-untyped-def]
    if value is None:
        return ""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


# Protocol-0 opcodes whose argument runs to the end of the line (GLOBAL 'c': two lines), and
# those without an argument; any other opcode means a pickle this reader does not understand.
_LINE_OPCODES = {"V": 1, "p": 1, "I": 1, "g": 1, "S": 1, "F": 1, "L": 1, "c": 2}
_BARE_OPCODES = set("(ladstNR.")


def _pickled_strings(data, where: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The unicode strings (``V`` opcodes), in order, of a protocol-0 pickle: read as text,
    nothing is executed."""
    raw = bytes(data) if isinstance(data, (bytes, np.bytes_)) else _text(data).encode("latin-1", errors="replace")
    strings: list[str] = []
    position = 0
    while position < len(raw):
        opcode = chr(raw[position])
        position += 1
        if opcode in _LINE_OPCODES:
            start = position
            for _ in range(_LINE_OPCODES[opcode]):
                newline = raw.find(b"\n", position)
                position = len(raw) if newline < 0 else newline + 1
            if opcode == "V":
                strings.append(raw[start:position].rstrip(b"\n").decode("raw_unicode_escape"))
        elif opcode not in _BARE_OPCODES:
            raise DataError(f"{where}: unreadable pandas metadata (pickle opcode {opcode!r})")
    return strings


def _zoned_fields(info, fields: tuple[str, ...], where: str) -> set[str]:  # type: ignore[no-untyped-def]
    """The ``table`` fields whose entry in pandas' pickled ``info`` dict has a ``tz`` key:
    those hold zoned date-times, stored as UTC."""
    zoned: set[str] = set()
    current = None
    for text in _pickled_strings(info, where) if info is not None else []:
        if text in fields:
            current = text
        elif text == "tz" and current is not None:
            zoned.add(current)
    return zoned
