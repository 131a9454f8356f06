"""``dynid man [COMMAND]``: the manual page of dynid or one command; ``--path``: where the pages
are installed (add it to MANPATH to make ``man dynid-fit`` work)."""

from typing import Annotated, Optional

import typer

from dynid.cli import completion
from dynid.cli.options import with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("man")(man)


@with_options(no_json="man prints a manual page (roff, or through man(1) on a terminal)")
def man(
    command: Annotated[Optional[str], typer.Argument(metavar="COMMAND", help="A command (fit, forecast, ...); none: the page of dynid itself.", autocompletion=completion.commands)] = None,
    path: Annotated[bool, typer.Option("--path", help="Print the directory holding the pages (for MANPATH) and exit.")] = False,
    *,
    out: Output,
) -> Optional[int]:
    """Show a manual page: through 'man -l -' on a terminal, else its roff source on stdout."""
    import shutil
    import subprocess
    import sys

    from dynid.cli.manpages import manpath_directory, page_commands, pages_directory
    from dynid.errors import UsageError

    if path:
        out.emit_text(str(manpath_directory()))
        return None
    page = pages_directory() / ("dynid.1" if command is None else f"dynid-{command}.1")
    if not page.is_file():
        raise UsageError(f"no manual page for {command!r}; pages: {', '.join(page_commands())}")
    roff = page.read_text(encoding="utf-8")
    if sys.stdout.isatty() and shutil.which("man"):
        return subprocess.run(["man", "-l", "-"], input=roff, text=True, check=False).returncode
    out.emit_text(roff)
    return None
