"""Readers: turn a delimited text file (optionally gzipped), HDF5 file or stdin into raw tables.

A raw table (``dynid.data.table.Table``) is one trial's columns by name, in file order, before
any selection; ``dynid.data.load`` turns tables into a Dataset. Readers only read and recognise
types (numbers, date-times, text) and pandas' own index; they never choose roles.

The format is decided here, in ``is_hdf5``, and nowhere else: delimited-text suffixes are text;
any other file is HDF5 when it carries the HDF5 signature (netCDF-4, MATLAB v7.3 and HDF-EOS5
files are HDF5 under other names), and HDF5-family suffixes that do not are refused with a line
saying what they are (a MATLAB v5 ``.mat``, a netCDF-3 ``.nc``).
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

# Suffixes dynid writes HDF5 to; and the suffixes of formats that are HDF5 inside (netCDF-4,
# MATLAB v7.3, HDF-EOS5), which name an inner path (``file.nc:/group``) like ``.h5`` does.
HDF5_SUFFIXES = (".h5", ".hdf5")
HDF5_FAMILY_SUFFIXES = (*HDF5_SUFFIXES, ".hdf", ".he5", ".nc", ".nc4", ".cdf", ".mat")
TAB_SUFFIXES = (".tsv", ".tab")
# Delimited text, by suffix (optionally ``.gz``): never looked into for an HDF5 signature.
TEXT_SUFFIXES = (".csv", ".txt", *TAB_SUFFIXES)
# The HDF5 superblock signature; a user block before it (MATLAB v7.3 writes 512 bytes) puts
# it at 512, 1024, 2048, ... bytes (HDF5 File Format Specification, "Format Signature").
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
MATLAB_V5_HEADER = b"MATLAB 5.0 MAT-file"
NETCDF3_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05")

_FAMILY_PATTERN = "|".join(suffix.lstrip(".") for suffix in HDF5_FAMILY_SUFFIXES)


def split_hdf5_path(spec: str) -> tuple[str, str | None]:
    """``file.h5:/group/ds`` -> ("file.h5", "/group/ds") (any HDF5-family suffix); other paths
    -> (spec, None)."""
    match = re.match(rf"^(.*?\.(?:{_FAMILY_PATTERN}))(?::(.*))?$", spec, flags=re.IGNORECASE)
    if match:
        return match.group(1), match.group(2) or None
    return spec, None


def has_hdf5_signature(path: str) -> bool:
    """Whether the file at ``path`` starts with the HDF5 signature at byte 0, 512, 1024, ...
    (False for one that cannot be opened: the reader then says why)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, io.SEEK_END)
            offset = 0
            while offset + len(HDF5_SIGNATURE) <= size:
                handle.seek(offset)
                if handle.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                    return True
                offset = 512 if offset == 0 else 2 * offset
    except OSError:
        return False
    return False


def is_hdf5(spec: str) -> bool:
    """Whether ``spec`` (``-``, a path, ``file.h5:/inner``) is read (or written) as HDF5: never
    stdin, a gzipped or delimited-text suffix; always an HDF5-family suffix (one without the
    signature is refused by ``read_tables``); any other existing file by its signature."""
    if spec == "-":
        return False
    path = split_hdf5_path(spec)[0]
    lower = path.lower()
    if lower.endswith((".gz", *TEXT_SUFFIXES)):
        return False
    return lower.endswith(HDF5_FAMILY_SUFFIXES) or (Path(path).is_file() and has_hdf5_signature(path))


def refuse_foreign(path: str) -> None:
    """DataError when the file at ``path`` (taken for HDF5 by ``is_hdf5``) lacks the HDF5
    signature and is a format known by its first bytes (MATLAB v5, netCDF-3), saying so."""
    reason = None if has_hdf5_signature(path) else _foreign_reason(path)
    if reason is not None:
        raise DataError(f"{path}: {reason}")


def _foreign_reason(path: str) -> str | None:
    """Why a file with an HDF5-family suffix but no HDF5 signature cannot be read, if it is a
    format known by its first bytes; None otherwise (h5py then says what is wrong: truncated,
    damaged, not HDF5)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(MATLAB_V5_HEADER))
    except OSError:
        return None
    if head.startswith(MATLAB_V5_HEADER):
        return (
            "a MATLAB v5-v7 MAT-file, which dynid does not read; save it with "
            "save(..., '-v7.3') (HDF5) or export CSV (writematrix/writetable)"
        )
    if head.startswith(NETCDF3_MAGIC):
        return "a netCDF-3 (classic) file, which dynid does not read; convert it with nccopy -k nc4 or export CSV"
    return None


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
        refuse_foreign(path)
        return read_hdf5(path, inner, wanted)
    default_sep = "\t" if path.lower().removesuffix(".gz").endswith(TAB_SUFFIXES) else ","
    return [read_delimited(path, path, default_sep=default_sep, sep=sep, decimal=decimal)]
