"""Generate one roff man page per command from the Typer app (``python man/generate.py``).

Typer vendors its own Click, so click-man does not apply; this walks the Click command tree that
``typer.main.get_command`` builds, so the pages always say what ``--help`` says.
"""

import datetime as _dt
import re

import typer

from dynid import __version__

EXIT_STATUS = [
    ("0", "success"),
    ("1", "the computation failed (diverged, did not converge, out of memory)"),
    ("2", "bad usage (unknown option, bad -p value)"),
    ("3", "bad input data or model file (unreadable, unknown column, non-monotonic time, truncated or foreign model file)"),
    ("4", "a requested resource is missing (--device cuda without a GPU, an optional extra not installed)"),
    ("130", "interrupted"),
]


def roff_escape(text: str) -> str:
    """Text safe for roff: backslashes, hyphens, and control characters at line start."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"(?m)^([.'])", r"\\&\1", text)


def pages(app: typer.Typer, date: str | None = None) -> dict[str, str]:
    """File name -> roff text for ``dynid`` and each subcommand."""
    from typer._click import Context

    root = typer.main.get_command(app)
    stamp = date or _dt.date(2026, 1, 1).isoformat()
    with Context(root, info_name="dynid") as ctx:
        result = {"dynid.1": _page(root, ctx, "dynid", stamp, subcommands=root.list_commands(ctx))}
        for name in root.list_commands(ctx):
            command = root.get_command(ctx, name)
            with Context(command, info_name=name, parent=ctx) as sub:
                result[f"dynid-{name}.1"] = _page(command, sub, f"dynid {name}", stamp)
    return result


def _page(command, ctx, full_name: str, date: str, subcommands=()) -> str:  # type: ignore[no-untyped-def]
    title = full_name.replace(" ", "-").upper()
    help_text = (command.help or "").strip()
    summary = help_text.splitlines()[0] if help_text else full_name
    lines = [
        f'.TH {title} 1 "{date}" "dynid {__version__}" "dynid manual"',
        ".SH NAME",
        f"{roff_escape(full_name.replace(' ', '-'))} \\- {roff_escape(summary.rstrip('.'))}",
        ".SH SYNOPSIS",
        f".B {roff_escape(full_name)}",
        roff_escape(" ".join(command.collect_usage_pieces(ctx))),
        ".SH DESCRIPTION",
        roff_escape(help_text) or roff_escape(summary),
    ]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
    if arguments:
        lines.append(".SH ARGUMENTS")
        for param in arguments:
            lines += [".TP", f".B {roff_escape(param.metavar or param.name.upper())}", roff_escape(getattr(param, "help", "") or "")]
    if options:
        lines.append(".SH OPTIONS")
        for param in options:
            record = param.get_help_record(ctx)
            if record is None:
                continue
            names, text = record
            lines += [".TP", f".B {roff_escape(names)}", roff_escape(text or "")]
    if subcommands:
        lines.append(".SH COMMANDS")
        for name in subcommands:
            sub = command.get_command(ctx, name)
            lines += [".TP", f".B {roff_escape(name)}", roff_escape((sub.help or "").strip().splitlines()[0])]
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_STATUS:
        lines += [".TP", f".B {code}", roff_escape(meaning)]
    lines += [
        ".SH ENVIRONMENT",
        ".TP",
        ".B NO_COLOR",
        "When set, no colour is used; colour and progress are shown only on a terminal anyway.",
        ".SH SEE ALSO",
        ", ".join(
            f"\\fBdynid\\-{n}\\fR(1)" for n in (subcommands or [full_name.split(" ", 1)[-1]]) if full_name == "dynid" or n != full_name
        )
        if subcommands
        else "\\fBdynid\\fR(1)",
    ]
    return "\n".join(line for line in lines if line != "") + "\n"


def write_all(directory: str) -> list[str]:
    """Regenerate every page in ``directory``; returns the file names written."""
    from pathlib import Path

    from dynid.atomic import write_text
    from dynid.cli.app import app

    written = []
    for name, text in pages(app).items():
        write_text(Path(directory) / name, text)
        written.append(name)
    return written
