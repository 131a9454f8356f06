"""Wires the commands into one Typer app and turns errors into exit codes.

``main`` is the console-script entry point: known errors become one line on stderr and the
contract's exit code (traceback only with -v).
"""

import sys
from typing import Annotated, Optional

import typer

from dynid import __version__
from dynid.cli.output import ARGUMENTS
from dynid.cli import (
    causal_cmd,
    fit_cmd,
    forecast_cmd,
    info_cmd,
    man_cmd,
    models_cmd,
    report_cmd,
    score_cmd,
    simulate_cmd,
    states_cmd,
    symbolic_cmd,
)



# Exit code of an interrupted command (SIGINT, Ctrl-C; CONTRACT), as the shell reports 128 + SIGINT.
INTERRUPTED = 130

app = typer.Typer(
    name="dynid",
    help="Identify the dynamics behind time-series files: fit, forecast, equations, causality, reports.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(f"dynid {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = None,
) -> None:
    """Identify the dynamics behind time-series files."""


for module in (
    fit_cmd,
    forecast_cmd,
    score_cmd,
    states_cmd,
    symbolic_cmd,
    causal_cmd,
    report_cmd,
    simulate_cmd,
    models_cmd,
    info_cmd,
    man_cmd,
):
    module.register(app)


def main(argv: Optional[list[str]] = None) -> int:
    """Run the CLI; returns the exit code (see ../shared/CONTRACT.md)."""
    from typer import exceptions as typer_exceptions
    from typer._click import exceptions as click_exceptions

    import warnings

    from dynid.runner import Terminated, sigterm_raises

    args = sys.argv[1:] if argv is None else argv
    verbose = any(a in ("-v", "--verbose") for a in args)
    quiet = any(a in ("-q", "--quiet") for a in args)
    command = typer.main.get_command(app)
    ARGUMENTS.set(tuple(args))
    try:
        # SIGTERM (how SLURM and cron cancel a job) unwinds like Ctrl-C: atomic writes remove
        # their temporary files, one line says so, exit 130.
        with sigterm_raises(), warnings.catch_warnings():
            warnings.showwarning = _warning_printer(quiet)
            result = command.main(args=args, prog_name="dynid", standalone_mode=False)
        code = result if isinstance(result, int) else 0
        if code == INTERRUPTED:
            # Typer turns KeyboardInterrupt into Exit(130) and returns its code, silently (the
            # except clause below sees it only from older Typer); say so, as SIGTERM does. No
            # dynid command exits 130 otherwise; the traceback is gone, so none with -v.
            _fail("dynid: interrupted", None, verbose)
        return code
    except typer_exceptions.Exit as exc:
        return exc.exit_code
    except click_exceptions.NoArgsIsHelpError as exc:
        print(exc.format_message(), file=sys.stderr)
        return 2
    except click_exceptions.ClickException as exc:
        # Usage errors (unknown option, missing argument, bad value): exit 2 per the contract.
        _fail(f"dynid: error: {exc.format_message()}", exc, verbose)
        return 2 if isinstance(exc, click_exceptions.UsageError) else exc.exit_code
    except (KeyboardInterrupt, typer_exceptions.Abort) as exc:
        _fail("dynid: interrupted", exc, verbose)
        return INTERRUPTED
    except Terminated as exc:
        import contextlib
        import os

        _fail("dynid: terminated", exc, verbose)
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream
            sys.stdout.flush()
            sys.stderr.flush()
        # The unwinding has removed every temporary file; leave without the interpreter's
        # finalisation, where a library's native thread still running (torch, a pool's
        # workers) aborted the process ("terminate called without an active exception",
        # exit -6) in CI.
        os._exit(Terminated.exit_code)
    except Exception as exc:  # noqa: BLE001 - the one place that maps every failure to a code
        from dynid.errors import DynidError, StdoutClosed

        if isinstance(exc, (StdoutClosed, BrokenPipeError)):
            # The reader went away (e.g. `| head`): not an error of ours. Point stdout at
            # /dev/null so the interpreter's final flush does not fail again.
            _silence_stdout()
            return 0

        if isinstance(exc, DynidError):
            _fail(f"dynid: error: {exc}", exc, verbose)
            return exc.exit_code
        if isinstance(exc, MemoryError):
            _fail("dynid: error: out of memory", exc, verbose)
            return 1
        _fail(f"dynid: internal error: {type(exc).__name__}: {exc} (rerun with -v for details)", exc, verbose)
        return 1


def _warning_printer(quiet: bool):  # type: ignore[no-untyped-def]
    """Library warnings (numpy, scipy, pysindy) as one ``dynid: warning:`` line each; none with -q."""

    def show(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
        if not quiet:
            text = str(message).strip().splitlines()[0] if str(message).strip() else category.__name__
            print(f"dynid: warning: {text}", file=sys.stderr)

    return show


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced by something without a descriptor (tests)
        pass


def _fail(line: str, exc: Optional[BaseException], verbose: bool) -> None:
    if verbose and exc is not None:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    print(line.splitlines()[0] if line else line, file=sys.stderr)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
