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


class MissingColumn(DataError):
    """DATA lacks the column ``name`` that ``option`` (``--columns``, ``--inputs``, ...) asks
    for; ``source``: DATA's name, ``available``: its columns as the message lists them. The
    CLI rephrases it when the name came from a model rather than from the user."""

    def __init__(self, message: str, *, source: str, name: str, option: str, available: str) -> None:
        super().__init__(message)
        self.source, self.name, self.option, self.available = source, name, option, available


class ResourceUnavailable(DynidError):
    """A requested resource is missing: no GPU, an optional extra not installed (exit 4)."""

    exit_code = 4


class StdoutClosed(Exception):
    """The reader of stdout went away (``dynid ... | head``): not a failure, exit 0.

    Deliberately not an OSError, so that the CLI framework's own EPIPE handling (exit 1) does not
    claim it; ``dynid.cli.app.main`` turns it into a quiet exit 0.
    """


class Diverged(ComputationError):
    """A rollout left the finite numbers (or the model's escape bound) at ``step`` (1-based).

    ``states``: (steps, d) the rollout so far, NaN from ``step`` on, for callers that report
    a diverged rollout rather than fail (``score``).
    """

    def __init__(self, message: str, step: int, states: "np.ndarray") -> None:  # noqa: F821
        super().__init__(message)
        self.step = step
        self.states = states
