"""The one place that decides where output goes: data and JSON to stdout, messages to stderr.

Colour and progress bars only on a terminal and never with NO_COLOR.
"""

import os
import sys
from collections.abc import Mapping
from contextlib import nullcontext
from contextvars import ContextVar
from typing import Any, ContextManager, Optional

# The arguments of the running command (after "dynid"), for records of how a file was made.
ARGUMENTS: ContextVar[tuple[str, ...]] = ContextVar("dynid_arguments", default=())


def stderr_is_tty() -> bool:
    """Whether stderr is a terminal that may get colour and progress bars: a TTY, and NO_COLOR
    unset or empty (no-color.org: only a non-empty value turns colour off)."""
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")


class Output:
    """Human / JSON / quiet output for one command run."""

    def __init__(self, *, json: bool = False, quiet: bool = False, verbose: bool = False) -> None:
        self.json_mode = json
        self.quiet = quiet
        self.verbose = verbose
        self._console = None

    @property
    def console(self):  # type: ignore[no-untyped-def]
        """A rich console on stderr (colour only on a TTY without NO_COLOR)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                stderr=True, no_color=not stderr_is_tty(), highlight=False, soft_wrap=True
            )
        return self._console

    def info(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def debug(self, message: str) -> None:
        if self.verbose and not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def emit_json(self, document: Mapping[str, Any]) -> None:
        """Write ``document`` (carrying its ``"kind"``) as the one JSON document on stdout."""
        from dynid.documents import to_text

        self.emit_text(to_text(document))

    def check_json_target(self, output: Optional[str]) -> None:
        """UsageError for ``--json`` with ``-o FILE`` on a command whose JSON document is its
        data (forecast, simulate): the document goes to stdout, the table to the file."""
        if self.json_mode and output not in (None, "-"):
            from dynid.errors import UsageError

            raise UsageError(f"--json prints the result on stdout; drop it to write a table to {output}")

    def emit_text(self, text: str) -> None:
        """Write ``text`` (data or a human-readable result) to stdout."""
        from dynid.atomic import write_stdout

        write_stdout(text if text.endswith("\n") else text + "\n")

    def emit_catalogue(self, kind: str, entries: list[dict[str, Any]]) -> None:
        """A list of methods (``name``, ``summary``, ``hyperparameters`` as from
        ``Hyperparameters.describe``): ``{"kind": kind, kind: entries}`` as JSON, or one block
        of text per method."""
        if self.json_mode:
            from dynid.documents import listing

            self.emit_json(listing(kind, entries))
            return
        lines = []
        for entry in entries:
            lines.append(f"{entry['name']}: {entry['summary']}")
            for field in entry["hyperparameters"]:
                lines.append(
                    f"    {field['name']} ({field['type']}, default {field['default']}): {field['doc']}"
                )
            lines.append("")
        self.emit_text("\n".join(lines).rstrip())

    def status(self, message: str) -> ContextManager[Any]:
        """A spinner on stderr while a long step runs, only on a TTY and when not quiet."""
        if self.quiet or not stderr_is_tty():
            return nullcontext()
        return self.console.status(message)
