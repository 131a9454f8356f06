"""One roff man page per command, from the Typer app (``python man/generate.py``).

Typer vendors its own Click, so click-man does not apply; ``command_docs`` walks the Click
command tree that ``typer.main.get_command`` builds, so the pages (and the Markdown reference,
``reference.py``) always say what ``--help`` says.
"""

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path

import typer

from dynid import __version__

EXIT_STATUS = [
    ("0", "success"),
    ("1", "the computation failed (diverged, did not converge, out of memory)"),
    ("2", "bad usage (unknown option, bad -p value)"),
    ("3", "bad input data or model file (unreadable, unknown column, non-monotonic time, truncated or foreign model file)"),
    ("4", "a requested resource is missing (--device cuda without a GPU, an optional extra not installed)"),
    ("130", "interrupted (SIGINT, Ctrl-C, or SIGTERM, as SLURM and cron cancel jobs); no partial output file is left"),
]

# Real commands for each page's EXAMPLES section, in an order that works as one shell session
# (later ones read the files earlier ones write); tests/test_unix.py runs them all.
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "simulate": (
        ("Simulate the Lorenz system into a CSV file.", "dynid simulate lorenz --n 2000 > lorenz.csv"),
        ("The catalogue of systems and their parameters.", "dynid simulate --list"),
    ),
    "fit": (
        ("Fit sparse equations (SINDy) and save the model.", "dynid fit lorenz.csv --model sindy -o lorenz.dynid"),
        ("Fit a linear model and print the fit summary as JSON.", "dynid fit lorenz.csv --model dmd -o dmd.dynid --json"),
        ("A linear-Gaussian state-space model with 3 hidden states.", "dynid fit lorenz.csv --model lds -p latent=3 -p max_iter=30 -o lds.dynid"),
    ),
    "forecast": (
        ("Forecast 100 steps on from the end of the data.", "dynid forecast lorenz.dynid lorenz.csv -n 100 > forecast.csv"),
        ("The model file may come on stdin.", "cat lorenz.dynid | dynid forecast - lorenz.csv -n 10"),
        ("The predictive mean with a 90% interval (x_lower, x_upper, ... columns).", "dynid forecast lds.dynid lorenz.csv -n 20 --interval 0.9"),
    ),
    "states": (
        ("Smoothed hidden states (z_K) and their sds (z_K_sd), one row per data row.", "dynid states lds.dynid lorenz.csv > states.csv"),
    ),
    "score": (
        ("Multi-step rollout errors and valid prediction time.", "dynid score lorenz.dynid lorenz.csv --horizon 50 --starts 10"),
    ),
    "symbolic": (
        ("Identify the governing equations, as LaTeX.", "dynid symbolic lorenz.csv --format latex"),
        ("The equations as JSON, for other programs.", "dynid symbolic lorenz.csv --json > equations.json"),
    ),
    "discover-causal": (
        ("Granger causality between the variables, as a Graphviz graph.", "dynid discover-causal lorenz.csv --method granger --max-lag 2 --format dot"),
    ),
    "report": (
        ("An HTML report of a model and the equations.", "dynid report lorenz.dynid equations.json --data lorenz.csv -o report.html"),
    ),
    "models": (
        ("The backends and their -p hyperparameters.", "dynid models"),
    ),
    "info": (
        ("What a model file holds, as JSON.", "dynid info lorenz.dynid --json"),
    ),
    "man": (
        ("Read the page of one command.", "dynid man forecast"),
        ("Make 'man dynid-fit' work.", 'export MANPATH="$(dynid man --path):$MANPATH"'),
    ),
}


def manpath_directory() -> Path:
    """``man/`` inside the dynid package (package data): the directory to add to MANPATH."""
    import dynid

    return Path(dynid.__file__).resolve().parent / "man"


def pages_directory() -> Path:
    """The installed pages (section 1, where man(1) looks under a MANPATH entry);
    ``python man/generate.py`` writes them there."""
    return manpath_directory() / "man1"


def page_commands() -> list[str]:
    """The commands with an installed page (``fit``, ``forecast``, ...; not ``dynid`` itself)."""
    return sorted(p.name.removeprefix("dynid-").removesuffix(".1") for p in pages_directory().glob("dynid-*.1"))


def roff_escape(text: str) -> str:
    """Text safe for roff: backslashes, hyphens, and control characters at line start."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"(?m)^([.'])", r"\\&\1", text)


@dataclass(frozen=True)
class OptionDoc:
    """One option as ``--help`` shows it: ``-m, --model <str>``, its help, and its group
    (``Data options``, ...; "" for the command's own)."""

    names: str
    help: str
    group: str


@dataclass(frozen=True)
class CommandDoc:
    """What the references say about one command: read from the Click tree Typer builds."""

    name: str  # "dynid" or "dynid fit"
    help: str
    usage: str  # "[OPTIONS] {DATA}..."
    arguments: tuple[tuple[str, str], ...]  # (metavar, help)
    options: tuple[OptionDoc, ...]
    subcommands: tuple[tuple[str, str], ...] = ()  # (name, first line of its help)

    @property
    def summary(self) -> str:
        return self.help.splitlines()[0] if self.help else self.name


def command_docs(app: typer.Typer) -> list[CommandDoc]:
    """``dynid`` itself, then each subcommand in the order ``dynid --help`` lists them."""
    from typer._click import Context

    root = typer.main.get_command(app)
    with Context(root, info_name="dynid") as ctx:
        names = root.list_commands(ctx)
        subcommands = tuple(
            (name, (root.get_command(ctx, name).help or "").strip().splitlines()[0]) for name in names
        )
        docs = [_describe(root, ctx, "dynid", subcommands)]
        for name in names:
            command = root.get_command(ctx, name)
            with Context(command, info_name=name, parent=ctx) as sub:
                docs.append(_describe(command, sub, f"dynid {name}", ()))
    return docs


def _describe(command, ctx, full_name: str, subcommands: tuple[tuple[str, str], ...]) -> CommandDoc:  # type: ignore[no-untyped-def]
    arguments = tuple(
        (param.metavar or param.name.upper(), getattr(param, "help", "") or "")
        for param in command.params
        if param.param_type_name == "argument"
    )
    options = []
    for param in command.params:
        if param.param_type_name != "option" or param.hidden:
            continue
        record = param.get_help_record(ctx)
        if record is not None:
            options.append(OptionDoc(record[0], record[1] or "", getattr(param, "rich_help_panel", None) or ""))
    return CommandDoc(
        name=full_name,
        help=(command.help or "").strip(),
        usage=" ".join(command.collect_usage_pieces(ctx)),
        arguments=arguments,
        options=tuple(options),
        subcommands=subcommands,
    )


def _examples(full_name: str) -> list[str]:
    """The EXAMPLES section: the command's own examples, or for ``dynid`` one of each command."""
    command = full_name.removeprefix("dynid").strip()
    examples = EXAMPLES.get(command, ()) if command else tuple(e[0] for e in EXAMPLES.values())
    if not examples:
        return []
    lines = [".SH EXAMPLES"]
    for text, example in examples:
        lines += [".PP", roff_escape(text), ".PP", ".RS 4", ".EX", roff_escape(example), ".EE", ".RE"]
    return lines


def pages(app: typer.Typer, date: str | None = None) -> dict[str, str]:
    """File name -> roff text for ``dynid`` and each subcommand."""
    stamp = date or _dt.date(2026, 1, 1).isoformat()
    return {f"{doc.name.replace(' ', '-')}.1": _page(doc, stamp) for doc in command_docs(app)}


def _page(doc: CommandDoc, date: str) -> str:
    title = doc.name.replace(" ", "-").upper()
    lines = [
        f'.TH {title} 1 "{date}" "dynid {__version__}" "dynid manual"',
        ".SH NAME",
        f"{roff_escape(doc.name.replace(' ', '-'))} \\- {roff_escape(doc.summary.rstrip('.'))}",
        ".SH SYNOPSIS",
        f".B {roff_escape(doc.name)}",
        roff_escape(doc.usage),
        ".SH DESCRIPTION",
        roff_escape(doc.help) or roff_escape(doc.summary),
    ]
    if doc.arguments:
        lines.append(".SH ARGUMENTS")
        for metavar, text in doc.arguments:
            lines += [".TP", f".B {roff_escape(metavar)}", roff_escape(text)]
    if doc.options:
        lines.append(".SH OPTIONS")
        for option in doc.options:
            lines += [".TP", f".B {roff_escape(option.names)}", roff_escape(option.help)]
    if doc.subcommands:
        lines.append(".SH COMMANDS")
        for name, summary in doc.subcommands:
            lines += [".TP", f".B {roff_escape(name)}", roff_escape(summary)]
    lines += _examples(doc.name)
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_STATUS:
        lines += [".TP", f".B {code}", roff_escape(meaning)]
    lines += [
        ".SH ENVIRONMENT",
        ".TP",
        ".B NO_COLOR",
        "When set, no colour is used; colour and progress are shown only on a terminal anyway.",
        ".SH SEE ALSO",
        ", ".join(f"\\fBdynid\\-{name}\\fR(1)" for name, _ in doc.subcommands)
        if doc.subcommands
        else "\\fBdynid\\fR(1)",
    ]
    return "\n".join(line for line in lines if line != "") + "\n"
