"""Options shared by several commands, declared once and injected into each command's signature.

``@with_options("data", "run")`` appends the group's parameters to the decorated command and
hands the command one bundle per group (``data: DataOptions``, ``run: RunOptions``) plus the
``out: Output`` every command gets; Typer sees ordinary parameters. Keep this module light: it
is imported for ``dynid --help``.
"""

import functools
import inspect
from dataclasses import dataclass, fields
from typing import Annotated, Any, Callable, Optional

import typer

from dynid.cli.output import Output

DATA_PANEL = "Data options"
RUN_PANEL = "Run options"
OUTPUT_PANEL = "Output options"


@dataclass(frozen=True)
class DataOptions:
    """How to read DATA (contract: common to every command that reads data)."""

    columns: Optional[str] = None
    time_column: Optional[str] = None
    dt: Optional[float] = None
    inputs: Optional[str] = None
    trial_column: Optional[str] = None
    nan: Optional[str] = None
    resample: Optional[float] = None

    def load(self, specs: list[str], *, nan_default: str = "split", out: Optional[Output] = None):  # type: ignore[no-untyped-def]
        """Read every spec with these options into one Dataset (trials of all files)."""
        from dynid.data import combine, load
        from dynid.errors import UsageError

        if specs.count("-") > 1:
            raise UsageError("stdin ('-') can be read only once")
        datasets = [
            load(
                spec,
                columns=_split(self.columns),
                time_column=self.time_column,
                dt=self.dt,
                inputs=_split(self.inputs),
                trial_column=self.trial_column,
                nan=self.nan or nan_default,  # type: ignore[arg-type]
                resample=self.resample,
            )
            for spec in specs
        ]
        data = combine(datasets)
        if out is not None:
            for note in data.notes:
                out.info(note)
        return data


@dataclass(frozen=True)
class RunOptions:
    seed: int = 0
    device: str = "auto"


def _split(text: Optional[str]) -> Optional[list[str]]:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def _option(annotation: Any, default: Any, *decls: str, help: str, panel: str) -> inspect.Parameter:
    name = decls[0].lstrip("-").replace("-", "_")
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, typer.Option(*decls, help=help, rich_help_panel=panel)],
    )


_GROUPS: dict[str, tuple[type, list[inspect.Parameter]]] = {
    "data": (
        DataOptions,
        [
            _option(Optional[str], None, "--columns", help="State variables, comma-separated (default: every numeric column that is not time, trial or input).", panel=DATA_PANEL),
            _option(Optional[str], None, "--time-column", help="Time column (default: 't' or 'time' if present, else sample index x --dt).", panel=DATA_PANEL),
            _option(Optional[float], None, "--dt", help="Sampling interval when there is no time column [default: 1].", panel=DATA_PANEL),
            _option(Optional[str], None, "--inputs", help="Exogenous input / control columns, comma-separated.", panel=DATA_PANEL),
            _option(Optional[str], None, "--trial-column", help="Column whose values group rows into independent trials.", panel=DATA_PANEL),
            _option(Optional[str], None, "--nan", help="Missing values: split (cut into NaN-free segments), error, drop, interpolate [default: split].", panel=DATA_PANEL),
            _option(Optional[float], None, "--resample", help="Interpolate onto a uniform grid with this step (for irregular sampling).", panel=DATA_PANEL),
        ],
    ),
    "run": (
        RunOptions,
        [
            _option(int, 0, "--seed", help="Random seed: the same seed gives the same CPU results (recorded in model files).", panel=RUN_PANEL),
            _option(str, "auto", "--device", help="auto, cpu or cuda.", panel=RUN_PANEL),
        ],
    ),
}

_OUTPUT_PARAMS = [
    _option(bool, False, "--json", help="Print the result as one JSON document on stdout.", panel=OUTPUT_PANEL),
    _option(bool, False, "--quiet", "-q", help="No messages on stderr except errors.", panel=OUTPUT_PANEL),
    _option(bool, False, "--verbose", "-v", help="More messages; tracebacks on errors.", panel=OUTPUT_PANEL),
]


def with_options(*groups: str, json_flag: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command: add the named option groups and the output options."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name not in (*groups, "out")]
        output_params = [p for p in _OUTPUT_PARAMS if json_flag or p.name != "json"]
        added = [p for group in groups for p in _GROUPS[group][1]] + output_params

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            for group in groups:
                bundle, _ = _GROUPS[group]
                kwargs[group] = bundle(**{f.name: kwargs.pop(f.name) for f in fields(bundle)})
            out = Output(
                json=kwargs.pop("json", False),
                quiet=kwargs.pop("quiet"),
                verbose=kwargs.pop("verbose"),
            )
            return command(out=out, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        del wrapper.__wrapped__  # Typer must read the new signature, not the original's
        return wrapper

    return decorate


ParamsOption = Annotated[
    Optional[list[str]],
    typer.Option("--param", "-p", help="Hyperparameter KEY=VALUE (repeatable); see 'dynid models'."),
]
OutputPath = Annotated[Optional[str], typer.Option("--output", "-o", help="Where to write the result ('-' = stdout).")]
