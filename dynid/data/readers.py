"""Readers: turn a delimited text file (optionally gzipped), HDF5 file or stdin into raw tables.

A raw table (``dynid.data.table.Table``) is one trial's columns by name, in file order, before
any selection; ``dynid.data.load`` turns tables into a Dataset. Readers only read and recognise
types (numbers, date-times, text) and pandas' own index; they never choose roles.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
from pathlib import Path
from typing import BinaryIO

from dynid.data.delimited import GZIP_MAGIC, read_delimited
from dynid.data.hdf5 import read_hdf5
from dynid.data.table import Table
from dynid.errors import DataError

HDF5_SUFFIXES = (".h5", ".hdf5")
TAB_SUFFIXES = (".tsv", ".tab")


def split_hdf5_path(spec: str) -> tuple[str, str | None]:
    """``file.h5:/group/ds`` -> ("file.h5", "/group/ds"); other paths -> (spec, None)."""
    match = re.match(r"^(.*?\.(?:h5|hdf5))(?::(.*))?$", spec, flags=re.IGNORECASE)
    if match:
        return match.group(1), match.group(2) or None
    return spec, None


def is_hdf5(spec: str) -> bool:
    return split_hdf5_path(spec)[0].lower().endswith(HDF5_SUFFIXES)


def read_tables(
    spec: str,
    *,
    stdin: BinaryIO | None = None,
    wanted: set[str] | None = None,
    sep: str | None = None,
    decimal: str | None = None,
) -> list[Table]:
    """Read ``spec`` (a path, ``file.h5:/inner``, or ``-`` for delimited text on stdin) into raw tables.

    ``wanted``: column names the caller needs, when known; HDF5 then reads only those columns
    (a slice of a wide dataset, not the whole file). Other formats read every column.
    ``sep``, ``decimal``: force the delimiter and decimal mark of text files (default: sniffed).
    """
    if spec == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        raw = stream.read()
        if raw.startswith(GZIP_MAGIC):  # `cat data.csv.gz | dynid ...`
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError) as exc:
                raise DataError(f"<stdin>: damaged gzip data ({exc})") from None
        return [read_delimited(io.BytesIO(raw), "<stdin>", default_sep=",", sep=sep, decimal=decimal)]
    path, inner = split_hdf5_path(spec)
    if not Path(path).exists():
        raise DataError(f"{path}: no such file")
    if Path(path).is_dir():
        raise DataError(f"{path}: is a directory, not a data file")
    if is_hdf5(spec):
        return read_hdf5(path, inner, wanted)
    default_sep = "\t" if path.lower().removesuffix(".gz").endswith(TAB_SUFFIXES) else ","
    return [read_delimited(path, path, default_sep=default_sep, sep=sep, decimal=decimal)]
