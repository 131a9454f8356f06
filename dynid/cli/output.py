"""The one place that decides where output goes: data and JSON to stdout, messages to stderr.

Colour and progress bars only on a terminal and never with NO_COLOR.
"""

import json as _json
import os
import sys
from contextlib import nullcontext
from typing import Any, ContextManager


def stderr_is_tty() -> bool:
    return sys.stderr.isatty() and "NO_COLOR" not in os.environ


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

    def emit_json(self, document: Any) -> None:
        """Write ``document`` as the one JSON document on stdout."""
        from dynid.atomic import write_stdout
        from dynid.jsonable import jsonable

        write_stdout(_json.dumps(jsonable(document), indent=2, allow_nan=False) + "\n")

    def emit_text(self, text: str) -> None:
        """Write ``text`` (data or a human-readable result) to stdout."""
        from dynid.atomic import write_stdout

        write_stdout(text if text.endswith("\n") else text + "\n")

    def emit_catalogue(self, entries: list[dict[str, Any]]) -> None:
        """A list of methods (``name``, ``summary``, ``hyperparameters`` as from
        ``Hyperparameters.describe``): the JSON list, or one block of text per method."""
        if self.json_mode:
            self.emit_json(entries)
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
