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
from dataclasses import dataclass, field

import numpy as np

from dynid.data.table import Table
from dynid.errors import DataError

_DATETIME_KIND = re.compile(r"^datetime64(?:\[(\w+)\])?")


def is_pandas_group(group) -> bool:  # type: ignore[no-untyped-def]
    return _text(group.attrs.get("pandas_type")) in ("frame", "frame_table", "series")


@dataclass
class _Frame:
    """What a pandas group holds: columns by name (``utc``: the zoned date-time ones), the
    columns left unread (pickled objects), and the index with its name."""

    index_name: str
    index: tuple[np.ndarray, bool]
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    utc: set[str] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)

    def add(self, name: str, values: np.ndarray, kind: str, zoned: bool) -> None:
        self.columns[name], aware = _values(values, kind, zoned)
        if aware:
            self.utc.add(name)

    def ordered(self, order: list[str]) -> None:
        """Put columns (and unread ones) in the frame's own column order."""
        self.columns = {name: self.columns[name] for name in order if name in self.columns}
        self.unreadable = [name for name in order if name in self.unreadable]


def read_pandas_group(path: str, group) -> Table:  # type: ignore[no-untyped-def]
    """One trial from a pandas group: its columns, and its index as column ``index``
    (or the index's own name) marked as the pandas index."""
    where = f"{path}:{group.name}"
    kind = _text(group.attrs.get("pandas_type"))
    frame = _table_format(where, group) if kind == "frame_table" else _fixed_format(where, group, kind == "series")
    if frame.index_name in frame.columns:
        raise DataError(f"{where}: the pandas index and a column are both named {frame.index_name!r}")
    index_values, index_utc = frame.index
    utc = frame.utc | ({frame.index_name} if index_utc else set())
    return Table(
        columns={frame.index_name: index_values, **frame.columns},
        label=where,
        index=frame.index_name,
        unreadable=tuple(frame.unreadable),
        utc=frozenset(utc),
    )


def _fixed_format(where: str, group, series: bool) -> _Frame:  # type: ignore[no-untyped-def]
    if series:
        name = _text(group.attrs.get("name"))
        parts = [([name if name and name != "N." else "values"], group["values"])]
        index_node = group["index"]
    else:
        if int(group.attrs.get("ndim", 2)) != 2 or "axis1" not in group:
            raise DataError(f"{where}: pandas layout not read (a MultiIndex?); save with reset_index()")
        parts = [
            ([_text(n) for n in group[f"block{k}_items"][()]], group[f"block{k}_values"])
            for k in range(int(group.attrs["nblocks"]))
        ]
        index_node = group["axis1"]
    frame = _Frame(
        index_name=_index_name(index_node.attrs.get("name")),
        index=_values(index_node[()], _text(index_node.attrs.get("kind")), "tz" in index_node.attrs),
    )
    for names, values in parts:
        if values.dtype.kind not in "fiub":  # pickled Python objects (text columns)
            frame.unreadable.extend(names)
            continue
        block = values[()].reshape(values.shape[0], -1)
        kind = _text(values.attrs.get("value_type"))
        for j, name in enumerate(names):
            frame.add(name, block[:, j], kind, "tz" in values.attrs)
    if not series:
        frame.ordered([_text(n) for n in group["axis0"][()]])
    return frame


def _table_format(where: str, group) -> _Frame:  # type: ignore[no-untyped-def]
    if "table" not in group:
        raise DataError(f"{where}: pandas table format without a 'table' dataset")
    if int(group.attrs.get("levels", 1)) != 1:
        raise DataError(f"{where}: pandas layout not read (a MultiIndex); save with reset_index()")
    rows = group["table"][()]
    attrs = group["table"].attrs
    if "index" not in rows.dtype.names:
        raise DataError(f"{where}: pandas table format without an index")
    zoned = _zoned_fields(group.attrs.get("info"), rows.dtype.names, where)
    frame = _Frame(
        index_name=_index_name(_info_index_name(group.attrs.get("info"), where)),
        index=_values(rows["index"], _text(attrs.get("index_kind")), "index" in zoned),
    )
    for name in rows.dtype.names:
        if name == "index":
            continue
        block = rows[name].reshape(rows.shape[0], -1)
        # values_block_K fields hold several columns, named in a pickled list; data columns one.
        names = _pickled_strings(attrs[f"{name}_kind"], where) if f"{name}_kind" in attrs else [name]
        for j, column in enumerate(names):
            frame.add(column, block[:, j], _text(attrs.get(f"{name}_dtype")), name in zoned)
    if "non_index_axes" in group.attrs:
        frame.ordered(_pickled_strings(group.attrs["non_index_axes"], where))
    return frame


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
    tokens = _pickle_tokens(info, where) if info is not None else []
    if "index_name" in tokens:
        position = tokens.index("index_name")
        return tokens[position + 1] if position + 1 < len(tokens) else None
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


def _pickle_tokens(data, where: str) -> list[str | None]:  # type: ignore[no-untyped-def]
    """The unicode strings (``V``) and Nones (``N``), in order, of a protocol-0 pickle: read
    as text, nothing is executed."""
    raw = bytes(data) if isinstance(data, (bytes, np.bytes_)) else _text(data).encode("latin-1", errors="replace")
    tokens: list[str | None] = []
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
                tokens.append(raw[start:position].rstrip(b"\n").decode("raw_unicode_escape"))
        elif opcode == "N":
            tokens.append(None)
        elif opcode not in _BARE_OPCODES:
            raise DataError(f"{where}: unreadable pandas metadata (pickle opcode {opcode!r})")
    return tokens


def _pickled_strings(data, where: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The unicode strings of a protocol-0 pickle (a list of column names), in order."""
    return [token for token in _pickle_tokens(data, where) if token is not None]


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
