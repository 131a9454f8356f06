"""Options shared by several commands, declared once and injected into each command's signature.

``@with_options("data", "run", "training")`` appends the group's parameters to the decorated command and
hands the command one bundle per group (``data: DataOptions``, ``run: RunOptions``,
``training: TrainingFlags``) plus the
``out: Output`` every command gets; Typer sees ordinary parameters. Keep this module light: it
is imported for ``dynid --help``.
"""

import csv
import dataclasses
import functools
import inspect
from dataclasses import dataclass, fields
from typing import Annotated, Any, Callable, Optional

import typer

from dynid.cli import completion
from dynid.cli.each import BODIES, BatchOptions, EachSpec
from dynid.cli.output import Output
from dynid.errors import UsageError

DATA_PANEL = "Data options"
RUN_PANEL = "Run options"
OUTPUT_PANEL = "Output options"
BATCH_PANEL = "Batch options"


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
    sep: Optional[str] = None
    decimal: Optional[str] = None

    def load(self, specs: list[str], *, nan_default: str = "split", out: Optional[Output] = None):  # type: ignore[no-untyped-def]
        """Read every spec with these options into one Dataset (trials of all files)."""
        from dynid.data import combine, load

        if specs.count("-") > 1:
            raise UsageError("stdin ('-') can be read only once")
        datasets = [
            load(
                spec,
                columns=split_names(self.columns),
                time_column=self.time_column,
                dt=self.dt,
                inputs=split_names(self.inputs),
                trial_column=self.trial_column,
                nan=self.nan or nan_default,  # type: ignore[arg-type]
                resample=self.resample,
                sep=self.sep,
                decimal=self.decimal,
            )
            for spec in specs
        ]
        data = combine(datasets)
        if out is not None:
            for note in data.notes:
                out.info(note)
        return data

    def with_labels(self, column: Optional[str]) -> "DataOptions":
        """These options, reading also the --labels ``column`` (if any), with the rows as they
        are: an empty label means unknown, not missing, and --nan would cut or fill the label
        column too."""
        if column is None:
            return self
        if self.nan is not None:
            raise UsageError("--labels reads the rows as they are (an empty label means unknown); "
                             "drop --nan and give state columns without gaps")
        columns = split_names(self.columns)
        if columns is not None and column not in columns:
            columns.append(column)
        return dataclasses.replace(self, columns=None if columns is None else join_names(columns), nan="keep")

    def stream(self, spec: str, *, out: Optional[Output] = None):  # type: ignore[no-untyped-def]
        """``spec`` with these options as a Stream read in chunks (``dynid.data.stream``)."""
        from dynid.data.stream import open_stream

        given = [flag for flag, value in (("--trial-column", self.trial_column), ("--resample", self.resample)) if value]
        if given:
            raise UsageError(f"{spec}: {', '.join(given)} need(s) the whole file in memory, and it is too large; "
                             "raise --max-memory if the machine has it")
        stream = open_stream(spec, columns=split_names(self.columns), time_column=self.time_column, dt=self.dt,
                             inputs=split_names(self.inputs), nan=self.nan or "split",  # type: ignore[arg-type]
                             sep=self.sep, decimal=self.decimal)
        if out is not None:
            for note in stream.notes:
                out.info(note)
        return stream


@dataclass(frozen=True)
class RunOptions:
    seed: int = 0
    device: str = "auto"


@dataclass(frozen=True)
class TrainingFlags:
    """Options of commands that may train networks (contract: training backends). A group of
    its own so that commands which never train (symbolic) do not offer them."""

    max_time: Optional[float] = None
    checkpoint: Optional[str] = None
    resume: bool = False
    threads: Optional[int] = None

    def options(self, out: Output):  # type: ignore[no-untyped-def]
        """The library's TrainingOptions, with the progress display ``out`` calls for."""
        from dynid.cli.output import stderr_is_tty
        from dynid.runtime import make_progress
        from dynid.training import TrainingOptions

        progress = make_progress(quiet=out.quiet, verbose=out.verbose, terminal=stderr_is_tty())
        return TrainingOptions(max_time_s=self.max_time, checkpoint_dir=self.checkpoint,
                               resume=self.resume, threads=self.threads, progress=progress)


def split_names(text: Optional[str]) -> Optional[list[str]]:
    """A --columns/--inputs list: comma-separated, CSV-quoted where a name holds a comma
    (``'"flow, l/s",pressure'``); None stays None."""
    if text is None:
        return None
    try:
        fields = next(csv.reader([text], skipinitialspace=True, strict=True), [])
    except csv.Error:
        raise UsageError(f"cannot split {text!r} into names (unbalanced quotes?)") from None
    return [field.strip() for field in fields if field.strip()]


def join_names(names: "tuple[str, ...] | list[str]") -> str:
    """The inverse of ``split_names``: names joined by commas, quoted where needed."""
    return ",".join('"' + name.replace('"', '""') + '"' if any(c in name for c in ',"') else name for name in names)


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
            _option(Optional[str], None, "--columns", help='State variables, comma-separated; quote names with commas: \'"flow, l/s",p\' (default: every numeric column that is not time, trial or input).', panel=DATA_PANEL),
            _option(Optional[str], None, "--time-column", help="Time column, numeric or ISO-8601 date-times (seconds since the first sample); a unit in the header may be left out (default: 't' or 'time', any unit, else the one date-time column, else sample index x --dt).", panel=DATA_PANEL),
            _option(Optional[float], None, "--dt", help="Sampling interval when there is no time column [default: the file's dt attribute, else 1].", panel=DATA_PANEL),
            _option(Optional[str], None, "--inputs", help="Exogenous input / control columns, comma-separated (quoted like --columns).", panel=DATA_PANEL),
            _option(Optional[str], None, "--trial-column", help="Column whose values group rows into independent trials.", panel=DATA_PANEL),
            _option(Optional[str], None, "--nan", help="Missing values: split (cut into NaN-free segments), error, drop, interpolate [default: split].", panel=DATA_PANEL),
            _option(Optional[float], None, "--resample", help="Interpolate onto a uniform grid with this step (for irregular sampling).", panel=DATA_PANEL),
            _option(Optional[str], None, "--sep", help="Text delimiter: , ; tab | space [default: sniffed].", panel=DATA_PANEL),
            _option(Optional[str], None, "--decimal", help="Decimal mark of text files: . or , [default: sniffed; ',' only with ';' separators].", panel=DATA_PANEL),
        ],
    ),
    "run": (
        RunOptions,
        [
            _option(int, 0, "--seed", help="Random seed: the same seed gives the same CPU results (recorded in model files).", panel=RUN_PANEL),
            _option(str, "auto", "--device", help="auto, cpu, cuda or cuda:N (GPU number N).", panel=RUN_PANEL),
        ],
    ),
    "training": (
        TrainingFlags,
        [
            _option(Optional[float], None, "--max-time", help="Stop training after this many seconds (after the first epoch at least), keeping the best weights so far (esn: stop its search over reservoir candidates, keeping the best scored so far).", panel=RUN_PANEL),
            _option(Optional[str], None, "--checkpoint", help="Directory for training checkpoints (written every minute and at the end).", panel=RUN_PANEL),
            _option(bool, False, "--resume", help="Continue training from the checkpoints in --checkpoint DIR; with --each, skip inputs whose output exists and reads back whole.", panel=RUN_PANEL),
            _option(Optional[int], None, "--threads", help="torch threads for training [default: 1, fastest for dynid's small networks].", panel=RUN_PANEL),
        ],
    ),
    "batch": (
        BatchOptions,
        [
            _option(bool, False, "--each", help="Every DATA (file, quoted glob, directory of .csv/.tsv/.h5/.nc/.mat/... files) is its own job; -o is a pattern with {stem} {name} {model} {method}; --json prints one line per input.", panel=BATCH_PANEL),
            _option(Optional[int], None, "--jobs", help="--each: worker processes (BLAS/torch threads split so that jobs x threads <= cores) [default: 1].", panel=BATCH_PANEL),
            _option(Optional[str], None, "--shard", help="--each: run shard I of N (1-based, I/N) of the sorted inputs [default: from SLURM_ARRAY_TASK_ID/_MIN/_COUNT when set].", panel=BATCH_PANEL),
            _option(bool, False, "--resume", help="--each: skip inputs whose output exists and reads back whole.", panel=BATCH_PANEL),
            _option(str, "local", "--executor", help="--each: where the jobs run: local (this machine, --jobs processes) or dask (optional extra dynid[dask]).", panel=BATCH_PANEL),
            _option(Optional[str], None, "--scheduler", help="--executor dask: address of a running Dask scheduler (tcp://host:8786) [default: a local cluster of --jobs processes, default one per core].", panel=BATCH_PANEL),
        ],
    ),
}

_OUTPUT_PARAMS = [
    _option(bool, False, "--json", help="Print the result as one JSON document on stdout.", panel=OUTPUT_PANEL),
    _option(bool, False, "--quiet", "-q", help="No messages on stderr except errors.", panel=OUTPUT_PANEL),
    _option(bool, False, "--verbose", "-v", help="More messages; tracebacks on errors.", panel=OUTPUT_PANEL),
]


# Commands without a JSON result still accept --json, hidden, to refuse it with a reason:
# click's "no such option" would read as a typo, and ignoring it would break a script silently.
_REFUSED_JSON = inspect.Parameter(
    "json",
    inspect.Parameter.KEYWORD_ONLY,
    default=False,
    annotation=Annotated[bool, typer.Option("--json", hidden=True)],
)


def with_options(
    *groups: str, no_json: Optional[str] = None, each: Optional[EachSpec] = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command: add the named option groups and the output options.

    ``no_json``: for a command with no JSON result, why (``"report writes an HTML file"``);
    ``--json`` is then a usage error (exit 2) saying so. ``each``: the command takes the batch
    options; with --each, ``dynid.cli.batch.run_each`` calls the body once per input.
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name not in (*groups, "out")]
        output_params = [_REFUSED_JSON if no_json and p.name == "json" else p for p in _OUTPUT_PARAMS]
        # A flag the command or another group already has (symbolic's --jobs, training's
        # --resume) is not declared twice; the batch bundle reads it from there.
        taken = {p.name for p in own} | {p.name for g in groups if g != "batch" for p in _GROUPS[g][1]}
        group_params = {g: [p for p in _GROUPS[g][1] if g != "batch" or p.name not in taken] for g in groups}
        added = [p for group in groups for p in group_params[group]] + output_params
        key = f"{command.__module__}:{command.__name__}"
        BODIES[key] = command

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            if no_json and kwargs["json"]:
                raise UsageError(f"--json is not available here: {no_json}")
            for group in groups:
                bundle, _ = _GROUPS[group]
                own_names = {p.name for p in group_params[group]}
                kwargs[group] = bundle(**{f.name: kwargs.pop(f.name) if f.name in own_names else _shared(kwargs, f.name)
                                          for f in fields(bundle)})
            out = Output(
                json=kwargs.pop("json"),
                quiet=kwargs.pop("quiet"),
                verbose=kwargs.pop("verbose"),
            )
            batch = kwargs.pop("batch", None)
            if each is not None and batch.each:
                from dynid.cli.batch import run_each

                if kwargs.get("report"):
                    raise UsageError("--report writes the report of one run; with --each, write the "
                                     "outputs with -o PATTERN and run 'dynid report' on them")

                return run_each(key, each, kwargs, batch, out)
            if batch is not None:
                # Only the batch's own flags: symbolic's --jobs and training's --resume mean
                # something without --each too.
                alone = [flag for flag, given in (("--shard", batch.shard),
                                                  ("--jobs", batch.jobs and "jobs" not in kwargs),
                                                  ("--resume", batch.resume and "training" not in kwargs),
                                                  ("--executor", batch.executor != "local"),
                                                  ("--scheduler", batch.scheduler)) if given]
                if alone:
                    raise UsageError(f"{', '.join(alone)}: only with --each (many inputs, one job each)")
            return command(out=out, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        del wrapper.__wrapped__  # Typer must read the new signature, not the original's
        return wrapper

    return decorate


def _shared(kwargs: dict[str, Any], name: str) -> Any:
    """A batch option declared elsewhere: the command's own parameter (symbolic's --jobs) or
    the training bundle's field (--resume; "training" is bundled before "batch")."""
    if name in kwargs:
        return kwargs[name]
    return getattr(kwargs.get("training"), name, None)


ParamsOption = Annotated[
    Optional[list[str]],
    typer.Option("--param", "-p", help="Hyperparameter KEY=VALUE (repeatable); see 'dynid models'."),
]
LabelsOption = Annotated[
    Optional[str],
    typer.Option("--labels", help="Column of known discrete states (0, 1, ...; empty = unknown) that fix those rows' states (hmm, arhmm, slds); not a state variable.", rich_help_panel=DATA_PANEL),
]
TIME_FORMATS = ("iso", "seconds")
TimeFormatOption = Annotated[
    Optional[str],
    typer.Option("--time-format", help="When DATA's time is date-times: iso (date-times, UTC 'Z' if DATA's were zoned) or seconds since DATA's first sample [default: iso, seconds into HDF5]. Other times are written in DATA's units.", autocompletion=completion.choices(TIME_FORMATS)),
]
OutputPath = Annotated[Optional[str], typer.Option("--output", "-o", help="Where to write the result ('-' = stdout).")]
