"""A delimited text file read in chunks, for fits that need only running sums (VAR, DMD) on
files larger than memory.

``open_stream`` resolves the columns from the first chunk exactly as ``load`` does; iterating
the stream yields ``Piece``s of at most ``rows`` samples, in file order, and checks every chunk
as ``load`` checks a whole file (finite values, increasing time across chunk boundaries). A
row with a missing value ends the current trial (``--nan split``: the pieces after it start a
new one) or is an error (``--nan error``). After iteration the stream knows what a Dataset
knows from the start: ``n_samples``, ``n_trials``, ``dt`` and a fingerprint.

Streaming covers one CSV/TSV file (optionally gzipped) with numeric or no time column; other
cases (stdin, HDF5, --trial-column, --resample, --nan drop/interpolate, date-time times) need
the whole file, and ``open_stream`` says so with a UsageError.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from dynid.data.dataset import UNIFORM_RTOL
from dynid.data.delimited import parse_decimal, parse_sep, read_delimited_chunks, sniff_format
from dynid.data.load import NanPolicy, Roles, check_increasing, check_values, resolve_roles
from dynid.data.readers import TAB_SUFFIXES, is_hdf5
from dynid.data.table import Table
from dynid.data.times import TimeAxis
from dynid.errors import DataError, UsageError

# Rows per chunk: a few MB while pandas parses them (about 7 MB for 3 columns), and few
# enough Python-level steps.
CHUNK_ROWS = 50_000


@dataclass(frozen=True)
class Piece:
    """Consecutive samples of one trial: ``x`` (n, d) states, ``u`` (n, m) inputs or None.
    ``starts_trial``: the first sample begins a new trial (none of its lags reach back)."""

    x: np.ndarray
    u: np.ndarray | None
    starts_trial: bool


class Stream:
    """The samples of one delimited file, chunk by chunk (see the module doc)."""

    def __init__(self, path: str, roles: Roles, time: TimeAxis, nan: NanPolicy, first: Table,
                 chunks: Iterator[Table], notes: list[str]) -> None:
        self.source = path
        self.variables = tuple(roles.states)
        self.inputs = tuple(roles.inputs)
        self.time_column = roles.time
        self.time_unit = time.unit
        self.time_from_datetime = False
        self.notes = tuple(notes)
        self._roles, self._time, self._nan = roles, time, nan
        self._chunks, self._first = chunks, first
        self._fingerprint = _Fingerprint(self.variables, self.inputs)
        self._steps = _Steps()
        self.n_samples = 0
        self.n_trials = 0
        self._consumed = False

    @property
    def n_variables(self) -> int:
        return len(self.variables)

    @property
    def dt(self) -> float | None:
        """The common sampling interval of the trials read so far (None if irregular)."""
        return self._steps.common()

    def fingerprint(self) -> str:
        """The fingerprint ``load(...).fingerprint()`` gives the same file and options."""
        return self._fingerprint.digest.hexdigest()

    def __iter__(self) -> Iterator[Piece]:
        if self._consumed:
            raise RuntimeError("a Stream is read once")
        self._consumed = True
        offset = 0  # samples before this chunk, for row numbers and index times
        segment = 0  # samples of the current trial so far
        last_time: float | None = None
        for table in _chained(self._first, self._chunks):
            t, values = self._arrays(table, offset)
            if last_time is not None and t.size and t[0] <= last_time:
                check_increasing(np.array([last_time, t[0]]), self.time_column or "t", self.source, offset)
            missing = np.isnan(values).any(axis=1)
            if missing.any() and self._nan == "error":
                row = int(np.flatnonzero(missing)[0])
                raise DataError(f"{self.source}: a missing value at row {offset + row + 1} "
                                "(choose --nan split|drop|interpolate)")
            for start, stop, ends_before in _runs(missing):
                if ends_before or segment == 0:
                    self._end_trial(segment)
                    segment = 0
                piece_t = t[start:stop]
                self._steps.add(piece_t, continues=segment > 0)
                d = self.n_variables
                piece = Piece(values[start:stop, :d], values[start:stop, d:] if self.inputs else None, segment == 0)
                self._fingerprint.add([piece_t, piece.x, piece.u])
                yield piece
                segment += stop - start
            if missing.size and missing[-1]:
                self._end_trial(segment)
                segment = 0
            offset += table.n_rows
            last_time = float(t[-1]) if t.size else last_time
        self._end_trial(segment)
        if self.n_trials == 0:
            raise DataError(f"{self.source}: no usable samples (after handling missing values)")

    def _arrays(self, table: Table, offset: int) -> tuple[np.ndarray, np.ndarray]:
        """Times (n,) and states + inputs (n, d + m) of one chunk, checked."""
        columns = [*self._roles.states, *self._roles.inputs]
        missing = [name for name in columns if name not in table.columns or table.kind(name) != "number"]
        if missing:
            raise DataError(f"{self.source}: column {missing[0]!r} is not numeric after row {offset}")
        values = np.column_stack([np.asarray(table.columns[name], dtype=float) for name in columns])
        check_values(values, columns, self.source, offset + 1)
        if self.time_column is None:
            t = (offset + np.arange(table.n_rows, dtype=float)) * (self._time.step or 1.0)
        else:
            t = np.asarray(table.columns[self.time_column], dtype=float)
            check_increasing(t, self.time_column, self.source, offset + 1)
        return t, values

    def _end_trial(self, samples: int) -> None:
        """A trial of ``samples`` ends: trials of fewer than 2 samples are dropped, as by load."""
        self._steps.end()
        self._fingerprint.end_trial(keep=samples >= 2)
        if samples >= 2:
            self.n_trials += 1
            self.n_samples += samples


class _Fingerprint:
    """``Dataset.fingerprint`` of the trials streamed: names, then per trial (of at least 2
    samples) a separator and its times, states and inputs, each whole. A trial's arrays wait in
    temporary files (disk, not memory) until it ends, since its times precede its states."""

    def __init__(self, variables: tuple[str, ...], inputs: tuple[str, ...]) -> None:
        self.digest = hashlib.sha256()
        self.digest.update("\x1f".join(variables).encode() + b"\x1e" + "\x1f".join(inputs).encode())
        self._spools: list[IO[bytes]] = []

    def add(self, arrays: list[np.ndarray | None]) -> None:
        """The next rows of the current trial's times, states and inputs (None: no inputs)."""
        present = [array for array in arrays if array is not None]
        if not self._spools:
            self._spools = [tempfile.TemporaryFile() for _ in present]
        for spool, array in zip(self._spools, present):
            spool.write(np.ascontiguousarray(array, dtype="<f8").tobytes())

    def end_trial(self, keep: bool) -> None:
        """The current trial ends; ``keep``: it is one of the data's trials (2 samples or more)."""
        if keep and self._spools:
            self.digest.update(b"\x1d")
            for spool in self._spools:
                spool.seek(0)
                while block := spool.read(1 << 20):
                    self.digest.update(block)
        for spool in self._spools:
            spool.close()
        self._spools = []


class _Steps:
    """The sampling interval of each trial, from its first and last time and its extreme steps,
    judged uniform as ``dataset.uniform_step`` judges a whole trial (there by the median step;
    here by the extreme ones, which is the same for uniform and for clearly irregular times)."""

    def __init__(self) -> None:
        self.trial_steps: list[float | None] = []
        self._reset()

    def _reset(self) -> None:
        self._first: float | None = None
        self._last = 0.0
        self._count = 0
        self._low, self._high = np.inf, -np.inf

    def add(self, t: np.ndarray, continues: bool) -> None:
        """Times of the current trial; ``continues``: after earlier times of the same trial."""
        if not t.size:
            return
        if self._first is None:
            self._first = float(t[0])
        steps = np.diff(np.concatenate([[self._last], t]) if continues else t)
        if steps.size:
            self._low, self._high = min(self._low, float(steps.min())), max(self._high, float(steps.max()))
        self._last = float(t[-1])
        self._count += t.size

    def end(self) -> None:
        """The current trial ends (one of fewer than 2 samples has no step)."""
        if self._first is not None and self._count >= 2:
            step = (self._last - self._first) / (self._count - 1)
            spread = max(self._high - step, step - self._low)
            self.trial_steps.append(step if spread <= UNIFORM_RTOL * max(step, abs(self._last)) else None)
        self._reset()

    def common(self) -> float | None:
        """As ``dataset.common_step``: the step every trial shares, else None."""
        steps = self.trial_steps
        if not steps or any(step is None for step in steps):
            return None
        first = steps[0]
        assert first is not None
        return first if all(abs(step - first) <= UNIFORM_RTOL * first for step in steps if step is not None) else None


def _runs(missing: np.ndarray) -> Iterator[tuple[int, int, bool]]:
    """``(start, stop, after_gap)`` of the runs of complete rows; ``after_gap``: missing rows
    come just before the run (so a new trial starts)."""
    padded = np.concatenate([[True], missing, [True]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    for start, stop in zip(edges[::2].tolist(), edges[1::2].tolist()):
        yield start, stop, start > 0


def _chained(first: Table, rest: Iterator[Table]) -> Iterator[Table]:
    yield first
    yield from rest


def open_stream(
    spec: str,
    *,
    columns: list[str] | None = None,
    time_column: str | None = None,
    dt: float | None = None,
    inputs: list[str] | None = None,
    nan: NanPolicy = "split",
    sep: str | None = None,
    decimal: str | None = None,
    rows: int = CHUNK_ROWS,
) -> Stream:
    """A Stream over the delimited file ``spec``, its columns chosen from the first ``rows``
    rows as ``load`` chooses them; UsageError for what streaming does not cover (see the
    module doc), DataError for a bad file."""
    if spec == "-" or is_hdf5(spec):
        raise UsageError(f"{spec}: only a CSV/TSV file can be read in chunks")
    if nan not in ("split", "error"):
        raise UsageError(f"--nan {nan}: a file read in chunks takes --nan split or error")
    if not Path(spec).is_file():
        raise DataError(f"{spec}: no such file")
    default_sep = "\t" if spec.lower().removesuffix(".gz").endswith(TAB_SUFFIXES) else ","
    fmt, notes = sniff_format(spec, spec, default_sep=default_sep, sep=parse_sep(sep), decimal=parse_decimal(decimal))
    chunks = read_delimited_chunks(spec, fmt, rows)
    first = next(chunks, None)
    if first is None or first.n_rows == 0:
        raise DataError(f"{spec}: no data rows")
    notes.extend(first.notes)  # what reading the first chunk interpreted (thousands separators)
    roles = resolve_roles(first, spec, columns, time_column, inputs, None, notes, dt=dt)
    if roles.time is not None and first.kind(roles.time) == "datetime":
        raise UsageError(f"{spec}: date-time times are not read in chunks; give --time-column a numeric column")
    time = TimeAxis.of([first], roles.time, dt, spec, notes)
    return Stream(spec, roles, time, nan, first, chunks, notes)


# ------------------------------------------------------------------------- when to read in chunks
# Bytes of memory a fit needs per byte of (uncompressed) text, by the parse peak of pandas.
MEMORY_PER_TEXT_BYTE = 1.0
# Bytes of text per byte of a gzipped file, a typical ratio for columns of numbers.
GZIP_RATIO = 4.0
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``--max-memory`` as bytes: a number with an optional K, M, G or T (powers of 1024; a
    trailing B or iB is allowed)."""
    cleaned = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, unit = (cleaned[:-1], cleaned[-1]) if cleaned[-1:] in _UNITS else (cleaned, "")
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise UsageError(f"--max-memory {text}: expected a size such as 500M or 8G") from None
    if not value > 0:
        raise UsageError(f"--max-memory {text}: must be positive")
    return int(value)


def format_size(size: float) -> str:
    """``size`` bytes as a short text in the units of ``parse_size`` (1.5G, 300M, 12K)."""
    for unit in ("T", "G", "M", "K"):
        if size >= _UNITS[unit]:
            return f"{size / _UNITS[unit]:.3g}{unit}"
    return f"{size:.0f} bytes"


def default_memory_limit() -> int:
    """Half the machine's physical memory (the rest for the system and other programs)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def memory_needed(spec: str) -> int:
    """Estimated bytes of memory that reading ``spec`` whole takes (0 for stdin and HDF5, which
    are read as they are)."""
    if spec == "-" or is_hdf5(spec) or not os.path.isfile(spec):
        return 0
    size = os.path.getsize(spec) * (GZIP_RATIO if spec.lower().endswith(".gz") else 1.0)
    return int(size * MEMORY_PER_TEXT_BYTE)
