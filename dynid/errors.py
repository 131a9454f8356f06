"""The one exception family of dynid.

Library code raises these with one actionable sentence; only the CLI turns them into an exit code
and a line on stderr (see ``../shared/CONTRACT.md``).
"""

from __future__ import annotations


class DynidError(Exception):
    """Base class. ``exit_code`` is the process exit status the CLI uses for it."""

    exit_code = 1


class ComputationError(DynidError):
    """The computation failed: diverged, did not converge, ran out of memory (exit 1)."""

    exit_code = 1


class UsageError(DynidError):
    """Bad usage: an unknown option or a bad ``-p`` value (exit 2)."""

    exit_code = 2


class DataError(DynidError):
    """Bad input data or model file: unreadable, unknown column, truncated file (exit 3)."""

    exit_code = 3


class ResourceUnavailable(DynidError):
    """A requested resource is missing: no GPU, an optional extra not installed (exit 4)."""

    exit_code = 4
