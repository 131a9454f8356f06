"""Readers: turn a CSV/TSV (optionally gzipped), HDF5 file or stdin into raw tables.

A raw table is one trial's columns by name, in file order, before any selection or validation;
``dynid.data.load`` turns tables into a Dataset. Readers only read: they never guess roles.
"""

from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from dynid.errors import DataError

HDF5_SUFFIXES = (".h5", ".hdf5")
TIME_DATASET_NAMES = ("t", "time")


@dataclass
class Table:
    """One trial's raw columns. ``columns`` keeps file order; ``label`` names the trial."""

    columns: dict[str, np.ndarray]
    label: str
    numeric: dict[str, bool]

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def split_hdf5_path(spec: str) -> tuple[str, str | None]:
    """``file.h5:/group/ds`` -> ("file.h5", "/group/ds"); other paths -> (spec, None)."""
    match = re.match(r"^(.*?\.(?:h5|hdf5))(?::(.*))?$", spec, flags=re.IGNORECASE)
    if match:
        return match.group(1), match.group(2) or None
    return spec, None


def is_hdf5(spec: str) -> bool:
    return split_hdf5_path(spec)[0].lower().endswith(HDF5_SUFFIXES)


def read_tables(
    spec: str, *, stdin: BinaryIO | None = None, wanted: set[str] | None = None
) -> list[Table]:
    """Read ``spec`` (a path, ``file.h5:/inner``, or ``-`` for CSV on stdin) into raw tables.

    ``wanted``: column names the caller needs, when known; HDF5 then reads only those columns
    (a slice of a wide dataset, not the whole file). Other formats read every column.
    """
    if spec == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        return [_read_delimited(io.BytesIO(stream.read()), "<stdin>", sep=",")]
    path, inner = split_hdf5_path(spec)
    if not Path(path).exists():
        raise DataError(f"{path}: no such file")
    if Path(path).is_dir():
        raise DataError(f"{path}: is a directory, not a data file")
    if is_hdf5(spec):
        return _read_hdf5(path, inner, wanted)
    lowered = path.lower().removesuffix(".gz")
    sep = "\t" if lowered.endswith((".tsv", ".tab")) else ","
    return [_read_delimited(path, path, sep=sep)]


def _read_delimited(source: str | io.BytesIO, name: str, *, sep: str) -> Table:
    import pandas as pd

    if isinstance(source, io.BytesIO) and not source.getbuffer().nbytes:
        raise DataError(f"{name}: empty input")
    frame = None
    try:
        import pyarrow  # noqa: F401  (the fast multi-threaded engine for large files)

        frame = pd.read_csv(source, sep=sep, engine="pyarrow")
    except ImportError:
        pass
    except pd.errors.EmptyDataError:
        raise DataError(f"{name}: empty file") from None
    except Exception:  # pyarrow is stricter on odd files; the C engine gives better messages
        if isinstance(source, io.BytesIO):
            source.seek(0)
    if frame is None:
        try:
            frame = pd.read_csv(source, sep=sep, engine="c")
        except pd.errors.EmptyDataError:
            raise DataError(f"{name}: empty file") from None
        except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(f"{name}: cannot parse as {'TSV' if sep == chr(9) else 'CSV'}: {first}") from None
    if frame.shape[1] == 0:
        raise DataError(f"{name}: no columns")
    columns: dict[str, np.ndarray] = {}
    numeric: dict[str, bool] = {}
    for raw_name in frame.columns:
        column_name = str(raw_name).strip()
        if column_name in columns:
            raise DataError(f"{name}: duplicate column name {column_name!r}")
        series = frame[raw_name]
        is_numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        numeric[column_name] = bool(is_numeric)
        columns[column_name] = (
            series.to_numpy(dtype=float, na_value=np.nan) if is_numeric else series.to_numpy()
        )
    return Table(columns=columns, label=name, numeric=numeric)


def _read_hdf5(path: str, inner: str | None, wanted: set[str] | None) -> list[Table]:
    import h5py

    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc})") from None
    with handle:
        node_path = inner or "/"
        if node_path not in handle:
            raise DataError(f"{path}: no dataset or group {node_path!r} inside")
        return _collect_trials(path, handle[node_path], wanted)


def _collect_trials(path: str, node, wanted: set[str] | None) -> list[Table]:  # type: ignore[no-untyped-def]
    """The trials under an HDF5 node: a 2-D dataset is one trial; a group holding exactly one
    2-D dataset is one trial (with its time vector); a group of such members is one trial each;
    a group wrapping a single subgroup is looked through."""
    import h5py

    if isinstance(node, h5py.Dataset):
        return [_hdf5_trial(path, node, node.parent, wanted)]
    datasets = [m for m in node.values() if isinstance(m, h5py.Dataset) and m.ndim == 2]
    groups = [m for m in node.values() if isinstance(m, h5py.Group)]
    if len(datasets) == 1 and not groups:
        return [_hdf5_trial(path, datasets[0], node, wanted)]
    if not datasets and len(groups) == 1:
        return _collect_trials(path, groups[0], wanted)
    tables = []
    for member in sorted(datasets + groups, key=lambda m: _natural_key(m.name)):
        if isinstance(member, h5py.Group):
            inner_sets = [m for m in member.values() if isinstance(m, h5py.Dataset) and m.ndim == 2]
            if len(inner_sets) != 1:
                raise DataError(
                    f"{path}:{member.name}: a trial group must hold exactly one 2-D dataset"
                )
            tables.append(_hdf5_trial(path, inner_sets[0], member, wanted))
        else:
            # Several 2-D datasets side by side: each is a trial; a shared time vector would
            # be ambiguous, so their time comes from a 't' column or --dt.
            tables.append(_hdf5_trial(path, member, None, wanted))
    if not tables:
        raise DataError(f"{path}:{node.name}: no 2-D dataset inside")
    return tables


def _hdf5_trial(path: str, dataset, parent, wanted: set[str] | None) -> Table:  # type: ignore[no-untyped-def]
    where = f"{path}:{dataset.name}"
    if dataset.ndim != 2:
        raise DataError(f"{where}: expected a 2-D dataset (samples x variables), got {dataset.ndim}-D")
    if dataset.dtype.kind not in "fiu":
        raise DataError(f"{where}: dataset is not numeric")
    names = dataset.attrs.get("columns")
    if names is None:
        names = [f"x{i}" for i in range(dataset.shape[1])]
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in np.atleast_1d(names)]
    if len(names) != dataset.shape[1]:
        raise DataError(f"{where}: attribute 'columns' names {len(names)} columns, data has {dataset.shape[1]}")
    keep = [i for i, name in enumerate(names) if wanted is None or name in wanted]
    try:
        # h5py reads a column selection (increasing indices) without loading the rest.
        values = np.asarray(dataset[:, keep] if len(keep) < len(names) else dataset[()], dtype=float)
    except OSError as exc:
        raise DataError(f"{where}: cannot read ({exc})") from None
    columns = {names[i]: values[:, k] for k, i in enumerate(keep)}
    if parent is not None:
        for time_name in TIME_DATASET_NAMES:
            member = parent.get(time_name)
            if member is not None and member.ndim == 1 and time_name not in columns:
                if member.shape[0] != dataset.shape[0]:
                    raise DataError(
                        f"{path}:{member.name}: time has {member.shape[0]} samples, data {dataset.shape[0]}"
                    )
                columns = {time_name: np.asarray(member[()], dtype=float), **columns}
                break
    return Table(columns=columns, label=where, numeric={name: True for name in columns})


def _natural_key(text: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
