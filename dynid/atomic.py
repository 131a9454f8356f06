"""Atomic file writes: write beside the target, flush to disk, then rename over it.

A crash or an error mid-write leaves the old file (or none), never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

from dynid.errors import DataError, StdoutClosed, UsageError


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary path beside ``target``; on success it is renamed to ``target``.

    ``target`` ``-`` means stdout: the temporary file's bytes are copied there at the end.
    """
    to_stdout = str(target) == "-"
    directory = Path(".") if to_stdout else Path(target).resolve().parent
    if not directory.is_dir():
        raise DataError(f"{target}: directory {directory} does not exist")
    if to_stdout:
        refuse_binary_terminal()
    stem = "stdout" if to_stdout else Path(target).name
    while True:
        # Named before it is created, inside the try that removes it: a signal handled as the
        # creation returns (a slow open on a busy disk) raises there, and the file goes too.
        # (tempfile.mkstemp names it only after, so that signal left it behind.)
        temp = str(directory / f".{stem}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            break
        except FileExistsError:
            continue  # another's file: a new name, and nothing to remove
        except OSError as exc:
            raise DataError(f"{target}: cannot write there ({exc.strerror or exc})") from exc
        except BaseException:
            _discard(temp)
            raise
    try:
        yield temp
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        if to_stdout:
            with open(temp, "rb") as handle:
                write_stdout(handle.read())
            os.unlink(temp)
        else:
            os.chmod(temp, _target_mode(target))
            try:
                os.replace(temp, target)
            except OSError as exc:
                raise DataError(f"{target}: cannot write there ({exc.strerror or exc})") from exc
    except BaseException:
        _discard(temp)
        raise


def _discard(temp: str) -> None:
    """Remove the temporary file ``temp`` if it is there."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)


def refuse_binary_terminal() -> None:
    """UsageError when stdout is a terminal: binary files (HDF5) would garble it."""
    if sys.stdout.isatty():
        raise UsageError("-o -: refusing to write a binary file to a terminal; redirect stdout or give a path")


def _target_mode(target: str | os.PathLike[str]) -> int:
    """The mode a plainly created file would get (the temporary file is made 0600)."""
    try:
        return os.stat(target).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(target: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` atomically; ``-`` writes to stdout."""
    if str(target) == "-":
        write_stdout(text)
        return
    with atomic_path(target) as temp, open(temp, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def write_stdout(data: str | bytes) -> None:
    """The one place dynid writes to stdout; a closed pipe becomes ``StdoutClosed``."""
    try:
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        sys.stdout.flush()
    except BrokenPipeError as exc:
        raise StdoutClosed() from exc
