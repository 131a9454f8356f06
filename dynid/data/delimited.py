"""Delimited text (CSV, TSV, semicolon/pipe/whitespace-separated, gzipped or not) into a Table.

The delimiter and decimal mark are sniffed from the first lines unless forced (``--sep``,
``--decimal``); anything but a plain comma-separated file with decimal points is said in a note.
"""

from __future__ import annotations

import codecs
import datetime
import csv
import gzip
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dynid.data.table import Table, check_unique_names
from dynid.data.times import parse_iso_datetimes
from dynid.errors import DataError, UsageError

WHITESPACE = r"\s+"
SEPARATORS = {",": ",", ";": ";", "\t": "\t", "tab": "\t", "\\t": "\t", "|": "|", "space": WHITESPACE, "whitespace": WHITESPACE}
SEPARATOR_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe", WHITESPACE: "whitespace"}
_SNIFF_BYTES = 1 << 16
GZIP_MAGIC = b"\x1f\x8b"
_SNIFF_LINES = 50
_DECIMAL_COMMA = re.compile(r"^[+-]?\d*,\d+(?:[eE][+-]?\d+)?$")
_DECIMAL_POINT = re.compile(r"^[+-]?\d*\.\d+(?:[eE][+-]?\d+)?$")
# A line of numbers and delimiters only, whatever the delimiter and decimal mark (a header-less
# "0,5;1,25" splits on commas as consistently as on semicolons); "nan" and "inf" may be names.
_NUMBERS_LINE = re.compile(r"^[\s\d.,;|+eE-]*\d[\s\d.,;|+eE-]*$")
# Numbers with thousands separators, as spreadsheets write them ("1,047.94"; with decimal
# commas "1.047,94"), by decimal mark: (grouped, plain); pandas leaves such a column as text.
_GROUPED = {
    ".": (re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$"), re.compile(r"^[+-]?\d+(?:\.\d+)?$")),
    ",": (re.compile(r"^[+-]?\d{1,3}(?:\.\d{3})+(?:,\d+)?$"), re.compile(r"^[+-]?\d+(?:,\d+)?$")),
}
# pandas' name for the empty header that ``DataFrame.to_csv()`` writes above its index.
_PANDAS_UNNAMED = re.compile(r"^Unnamed: 0$|^$")


@dataclass(frozen=True)
class Format:
    """How to split a delimited file: ``sep`` (a character or WHITESPACE), ``decimal`` mark, encoding."""

    sep: str
    decimal: str = "."
    encoding: str = "utf-8"
    # Leading lines to skip (comments starting with '#'), and the column names when the header
    # is the last of them (``np.savetxt(..., header="t,x")`` writes "# t,x"), else None.
    skip: int = 0
    names: tuple[str, ...] | None = None

    def read_options(self) -> dict[str, object]:
        """The pandas ``read_csv`` options for the header and the lines to skip."""
        if self.names is None:
            return {"skiprows": self.skip}
        return {"skiprows": self.skip, "header": None, "names": list(self.names)}


def parse_sep(text: str | None) -> str | None:
    """--sep value (``,`` ``;`` ``tab`` ``|`` ``space``...) -> the separator, None if not given."""
    if text is None:
        return None
    if text not in SEPARATORS:
        raise UsageError(f"--sep {text!r}: expected one of , ; tab | space")
    return SEPARATORS[text]


def parse_decimal(text: str | None) -> str | None:
    if text is not None and text not in (".", ","):
        raise UsageError(f"--decimal {text!r}: expected . or ,")
    return text


def read_delimited(
    source: str | io.BytesIO, name: str, *, default_sep: str, sep: str | None = None, decimal: str | None = None
) -> Table:
    """Read a delimited file (path, or bytes for stdin). ``default_sep`` comes from the suffix."""
    fmt, notes = sniff_format(source, name, default_sep=default_sep, sep=sep, decimal=decimal)
    frame = _parse(source, name, fmt)
    table = _to_table(frame, name, fmt.decimal)
    table.notes[:0] = notes
    return table


def sniff_format(
    source: str | io.BytesIO, name: str, *, default_sep: str, sep: str | None = None, decimal: str | None = None
) -> tuple[Format, list[str]]:
    """The file's Format from its first lines (``sep``/``decimal`` when forced), and notes on
    anything but UTF-8, commas and decimal points; DataError for an empty file, a header that
    disagrees with the rows, or repeated column names."""
    head = _head(source, name)
    notes: list[str] = []
    encoding = _unicode_encoding(head)
    text = _decode(head, encoding)
    if text is None:
        encoding = "cp1252"
        text = head.decode(encoding, errors="replace")
        notes.append(f"{name}: not UTF-8; read as Windows-1252 (cp1252)")
    raw = text.splitlines()
    skip = _comment_lines(raw)
    comments = [line.strip().lstrip("#").strip() for line in raw[:skip] if line.strip()]
    lines = [line for line in raw[skip : skip + _SNIFF_LINES + 1] if line.strip()]
    if len(head) == _SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    if not lines:
        raise DataError(f"{name}: empty file" if not skip else f"{name}: only comment lines")
    header_commented = bool(comments) and bool(_NUMBERS_LINE.match(lines[0]))
    if header_commented:
        lines = [comments[-1], *lines]
        notes.append(f"{name}: column names from the comment line '# {comments[-1]}' (as np.savetxt writes them)")
    elif comments:
        notes.append(f"{name}: skipped {len(comments)} comment line(s) starting with '#' above the header")
    if sep is None:
        sep = _sniff_sep(lines, default_sep, name)
        if sep != default_sep:
            notes.append(f"{name}: columns separated by {SEPARATOR_NAMES[sep]} (sniffed; force with --sep)")
    _check_widths(lines, sep, name)
    _check_header(lines[0], sep, name)  # before the names' check: a row of numbers may repeat one
    check_unique_names((field.strip() for field in _fields(lines[0], sep)), name)
    if decimal is None:
        decimal = _sniff_decimal(lines[1:], sep, name)
        if decimal == ",":
            notes.append(f"{name}: decimal comma (sniffed; force with --decimal)")
    names = tuple(field.strip() for field in _fields(lines[0], sep)) if header_commented else None
    return Format(sep, decimal, encoding, skip, names), notes


def _comment_lines(lines: list[str]) -> int:
    """How many of the first ``lines`` are comments (starting with '#') or blank, up to the
    first other line (the header, or data when the header is the last comment)."""
    count = 0
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            return count
        count += 1
    return count


def read_delimited_chunks(path: str, fmt: Format, rows: int) -> Iterator[Table]:
    """The file at ``path`` as Tables of ``rows`` rows each (the last may be shorter), read one
    at a time so that memory holds one chunk, not the file (pandas' C parser, which reads in
    chunks; pyarrow's does not)."""
    import pandas as pd

    try:
        reader = pd.read_csv(path, sep=fmt.sep, decimal=fmt.decimal, encoding=fmt.encoding, engine="c",
                             index_col=False, chunksize=rows, **fmt.read_options())
        with reader:
            for frame in reader:
                yield _to_table(frame, path, fmt.decimal)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: empty file") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: cannot parse as text columns: {first}") from None


def _head(source: str | io.BytesIO, name: str) -> bytes:
    if isinstance(source, io.BytesIO):
        if not source.getbuffer().nbytes:
            raise DataError(f"{name}: empty input")
        return bytes(source.getbuffer()[:_SNIFF_BYTES])
    try:
        gzipped = source.lower().endswith(".gz")
        opener = gzip.open if gzipped else open
        with opener(source, "rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except (OSError, EOFError) as exc:
        raise DataError(f"{name}: cannot read ({exc})") from None
    if not gzipped and head.startswith(GZIP_MAGIC):
        raise DataError(f"{name}: gzip-compressed, but its name does not end in .gz; rename it {name}.gz")
    return head


def _unicode_encoding(head: bytes) -> str:
    """UTF-32 or UTF-16 when ``head`` starts with their byte order mark (Windows tools write
    "Unicode" text so), else UTF-8 (its own mark skipped)."""
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return "utf-8-sig"


def _decode(head: bytes, encoding: str) -> str | None:
    """The text of ``head``, ignoring a multi-byte character cut at its end; None if not ``encoding``."""
    try:
        return codecs.getincrementaldecoder(encoding)().decode(head, final=False)
    except UnicodeDecodeError:
        return None


def _fields(line: str, sep: str) -> list[str]:
    if sep == WHITESPACE:
        return line.split()
    return next(csv.reader([line], delimiter=sep))


def _sniff_sep(lines: list[str], default_sep: str, name: str) -> str:
    """The separator that splits the header and every sampled row into the same number (> 1) of fields.

    Ties go to ``default_sep`` (the suffix's), then to the one giving more fields. Without such a
    separator, rows that split consistently under a one-field header are an error (the header
    and the rows disagree); anything else is left to the parser with ``default_sep``.
    """
    header, rows = lines[0], lines[1:] or lines[:1]
    consistent: dict[str, int] = {}
    headerless: dict[str, int] = {}
    for sep in (default_sep, ",", "\t", ";", "|", WHITESPACE):
        counts = {len(_fields(line, sep)) for line in rows}
        if len(counts) != 1 or (width := counts.pop()) < 2:
            continue
        header_width = len(_fields(header, sep))
        if header_width == width:
            consistent.setdefault(sep, width)
        elif header_width == 1 and sep != WHITESPACE:
            headerless.setdefault(sep, width)
    if consistent:
        return default_sep if default_sep in consistent else max(consistent, key=lambda sep: consistent[sep])
    if headerless:
        sep, width = next(iter(headerless.items()))
        raise DataError(
            f"{name}: the header is one column but the rows have {width} fields separated "
            f"by {SEPARATOR_NAMES[sep]}; fix the header or give --sep"
        )
    return default_sep


def _check_widths(lines: list[str], sep: str, name: str) -> None:
    """Rows wider than the header would shift columns (pandas makes the extra ones an index)."""
    header_width = len(_fields(lines[0], sep))
    widest = max((len(_fields(line, sep)) for line in lines[1:]), default=0)
    if widest > header_width:
        raise DataError(
            f"{name}: rows have up to {widest} fields separated by {SEPARATOR_NAMES[sep]}, "
            f"the header {header_width}; fix the file or give --sep"
        )


def _check_header(header: str, sep: str, name: str) -> None:
    """DataError when the first line holds only numbers: a file written without a header
    (``to_csv(header=False)``, ``np.savetxt``), whose first row would silently become the
    column names. Names 0, 1, ... (pandas' default for a frame built from an array) or 1, 2, ...
    are a header."""
    fields = [field.strip() for field in _fields(header, sep)]
    names = fields[1:] if fields and not fields[0] else fields  # to_csv's empty name above its index
    numbered = names in ([str(i) for i in range(len(names))], [str(i + 1) for i in range(len(names))])
    if _NUMBERS_LINE.match(header) and not numbered:
        shown = header.strip() if len(header.strip()) <= 40 else header.strip()[:40] + "..."
        raise DataError(
            f"{name}: the first line ({shown}) holds numbers, not column names: the file has no "
            "header; add a first line naming the columns (e.g. t,x,y)"
        )


def _sniff_decimal(rows: list[str], sep: str, name: str) -> str:
    """``,`` when ``;``-separated rows hold numbers with decimal commas (and none with points)."""
    if sep != ";":
        return "."
    fields = [field.strip() for line in rows for field in _fields(line, sep)]
    commas = any(_DECIMAL_COMMA.match(field) for field in fields)
    if commas and any(_DECIMAL_POINT.match(field) for field in fields):
        raise DataError(f"{name}: numbers with decimal commas and with decimal points; give --decimal")
    return "," if commas else "."


def _parse(source: str | io.BytesIO, name: str, fmt: Format):  # type: ignore[no-untyped-def]
    """A pandas DataFrame; pyarrow's multi-threaded engine where it handles the format."""
    import pandas as pd

    kind = "TSV" if fmt.sep == "\t" else "CSV"
    plain = fmt.skip == 0 and fmt.names is None
    if plain and fmt.sep != WHITESPACE and fmt.decimal == "." and fmt.encoding.startswith("utf-8"):
        try:
            import pyarrow  # the fast multi-threaded engine for large files

            # dynid handles SIGINT and SIGTERM itself (KeyboardInterrupt, runner.Terminated).
            # pyarrow's handlers, set for the length of a read, lost such a signal now and then
            # (42 of 300 in a loop of reads) and the command ran on to exit 0; a read takes
            # milliseconds, and Python's handler runs once it returns.
            pyarrow.enable_signal_handlers(False)
            return pd.read_csv(source, sep=fmt.sep, engine="pyarrow")
        except ImportError:
            pass
        except pd.errors.EmptyDataError:
            raise DataError(f"{name}: empty file") from None
        except Exception:  # pyarrow is stricter on odd files; the C engine gives better messages
            if isinstance(source, io.BytesIO):
                source.seek(0)
    try:
        return pd.read_csv(
            source,
            sep=fmt.sep,
            decimal=fmt.decimal,
            encoding=fmt.encoding,
            engine="c",
            index_col=False,
            **fmt.read_options(),
        )
    except pd.errors.EmptyDataError:
        raise DataError(f"{name}: empty file") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{name}: cannot parse as {kind}: {first}") from None


def _to_table(frame, name: str, decimal: str = ".") -> Table:  # type: ignore[no-untyped-def]
    """Columns by name: numbers as float (with thousands separators too, said in a note), date-
    time text as datetime64, the rest as objects; ``decimal``: the file's decimal mark."""
    import pandas as pd

    if frame.shape[1] == 0:
        raise DataError(f"{name}: no columns")
    columns: dict[str, np.ndarray] = {}
    utc: set[str] = set()
    notes: list[str] = []
    index = None
    for position, raw_name in enumerate(frame.columns):
        column_name = str(raw_name).strip()
        if position == 0 and _PANDAS_UNNAMED.match(column_name):
            column_name, index = "index", "index"
        if column_name in columns:
            raise DataError(f"{name}: duplicate column name {column_name!r}")
        series = frame[raw_name]
        if isinstance(series.dtype, pd.DatetimeTZDtype):  # pyarrow parses ISO-8601 itself
            series = series.dt.tz_convert("UTC").dt.tz_localize(None)
            utc.add(column_name)
        if pd.api.types.is_datetime64_any_dtype(series):
            columns[column_name] = series.to_numpy(dtype="datetime64[ns]")
            continue
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            columns[column_name] = series.to_numpy(dtype=float, na_value=np.nan)
            continue
        # pyarrow reads date-only ISO-8601 as datetime.date objects; parse them as text.
        values = np.array([v.isoformat() if isinstance(v, datetime.date) else v for v in series], dtype=object)
        grouped = _grouped_numbers(values, decimal)
        if grouped is not None:
            columns[column_name] = grouped
            separator = "," if decimal == "." else "."
            notes.append(f"{name}: column {column_name!r}: numbers with thousands separators "
                         f"({separator!r}) read as numbers")
            continue
        try:
            parsed = parse_iso_datetimes(values)
        except DataError as exc:
            raise DataError(f"{name}: column {column_name!r}: {exc}") from None
        if parsed is None:
            columns[column_name] = values
        else:
            columns[column_name], aware = parsed
            if aware:
                utc.add(column_name)
    return Table(columns=columns, label=name, index=index, utc=frozenset(utc), notes=notes)


def _grouped_numbers(values: np.ndarray, decimal: str) -> np.ndarray | None:
    """Text (n,) as float when every present value is a number, some of them with thousands
    separators (the mark that is not ``decimal``) that no decimal reading explains, else None.
    Missing values become NaN."""
    grouped, plain = _GROUPED[decimal]
    present = [v.strip() for v in values if isinstance(v, str) and v.strip()]
    if not present or not any(grouped.match(v) for v in present):
        return None
    if not all(grouped.match(v) or plain.match(v) for v in present):
        return None
    separator = "," if decimal == "." else "."
    # "1,250" alone is also 1.25 written with a decimal comma (a tab-separated European export
    # whose values all have three decimals): only a value with both marks ("1,047.94") or with
    # two separators ("1,234,567") shows that the separator groups thousands.
    if not any(decimal in v or v.count(separator) > 1 for v in present if grouped.match(v)):
        return None
    return np.array([float(v.strip().replace(separator, "").replace(",", ".")) if isinstance(v, str) and v.strip()
                     else np.nan for v in values])
