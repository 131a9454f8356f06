"""``dynid report INPUT... [--data DATA] [--test DATA] -o report.html``: one self-contained HTML
file."""

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from dynid.cli.options import DataOptions, with_options
from dynid.cli.output import Output

if TYPE_CHECKING:  # heavy imports stay out of ``dynid --help``
    from dynid.data.dataset import Dataset
    from dynid.modelfile import ModelFile
    from dynid.models.base import Backend


# ``--report PATH`` of fit, symbolic and discover-causal: the report of that one run.
ReportPath = Annotated[Optional[str], typer.Option("--report", metavar="PATH", help="Also write the HTML report of this run to PATH, as 'dynid report' would make it from the result and DATA (not with --each: run 'dynid report' on the outputs).")]


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def write_run_report(
    path: str,
    *,
    models: "list[tuple[str, ModelFile]]",
    results: "list[tuple[str, Any]]",
    data: "Dataset",
    out: Output,
) -> None:
    """``--report PATH``: the report of one run's model or result on its data, written
    atomically, with this command line in its provenance."""
    from dynid.atomic import write_text
    from dynid.report import build_report

    html = build_report(models, results, data, command_line=_command_line())
    write_text(path, html)
    if path != "-":
        out.info(f"wrote {path}")


def run_model(path: Optional[str], model: "Backend", metadata: dict[str, Any]) -> "tuple[str, ModelFile]":
    """The (label, model file) of a run's model for ``write_run_report``: read back from
    ``path`` when it was written to a file (so the report is the one ``dynid report PATH``
    makes), else as it is in memory."""
    from dynid.modelfile import ModelFile, load_model

    if path is not None and path != "-":
        return path, load_model(path)
    return "model (not saved)", ModelFile(model, metadata)


def _command_line() -> str:
    """How this dynid was called, for a report's provenance."""
    import shlex

    from dynid.cli.output import ARGUMENTS

    return shlex.join(["dynid", *ARGUMENTS.get()])


@with_options("data", no_json="report writes an HTML file (-o); its inputs may be JSON results")
def report(
    input_files: Annotated[list[str], typer.Argument(metavar="INPUT", help="Model files (.dynid) and JSON results of other dynid commands.")],
    output: Annotated[str, typer.Option("--output", "-o", help="The HTML file to write ('-' = stdout).")],
    data_file: Annotated[Optional[str], typer.Option("--data", help="Data to describe and compare forecasts with.")] = None,
    test_file: Annotated[Optional[str], typer.Option("--test", help="Held-out data (not used in fitting) to judge forecasts, residuals and free runs on instead of --data.")] = None,
    horizon: Annotated[Optional[int], typer.Option("--horizon", min=1, help="Held-out steps in the forecast-vs-data plot [default: min(200, n/4)].")] = None,
    title: Annotated[str, typer.Option("--title", help="Report title.")] = "dynid report",
    interactive: Annotated[bool, typer.Option("--interactive", help="Zoom, pan and a coordinate read-out on the figures: one hand-written script inlined once (1.6 kB), still offline.")] = False,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Write an HTML report of models, equations, causal graphs and forecasts (opens offline)."""
    from dynid.atomic import write_text
    from dynid.cli.common import load_model_argument
    from dynid.report import build_report
    from dynid.report.sections import kind_notice

    models, results = [], []
    for path in input_files:
        if _is_json(path):
            doc = _read_json(path)
            notice = kind_notice(doc)
            if notice:
                out.info(f"{path}: {notice}")
            results.append((path, doc))
        else:
            models.append((path, load_model_argument(path, data_file, test_file)))
    pairs = None
    if models:
        pairs = _load_per_model(data, (data_file, test_file), models, out)
        dataset, test = pairs[0]  # the data section describes DATA as the first model reads it
    else:
        dataset, test = (None if spec is None else data.load([spec], out=out) for spec in (data_file, test_file))
    html = build_report(models, results, dataset, test=test, horizon=horizon, title=title,
                        command_line=_command_line(), interactive=interactive, model_data=pairs)
    write_text(output, html)
    if output != "-":
        out.info(f"wrote {output}")


def _load_per_model(
    options: DataOptions, paths: "tuple[Optional[str], Optional[str]]", models: "list[tuple[str, ModelFile]]",
    out: Output,
) -> "list[tuple[Optional[Dataset], Optional[Dataset]]]":
    """Each model's (--data, --test) read with its own variables and inputs (``load_for_model``;
    a model of x alone and one of x, y, z each get their columns of one file), read once per
    distinct set and checked against each model's time unit and sampling step (a forecast is
    never compared with data at another step)."""
    from dynid.api import check_step
    from dynid.cli.common import check_time_unit, load_for_model, model_data_options
    from dynid.errors import UsageError

    read: dict[Any, "tuple[Optional[Dataset], Optional[Dataset]]"] = {}
    pairs = []
    for model_path, loaded in models:
        given = model_data_options(options, loaded.model)
        key = (given.columns, given.inputs)
        if key not in read:
            if read and "-" in paths:  # stdin can be read once
                raise UsageError("models with different variables need --data/--test as files, not stdin")
            read[key] = tuple(  # type: ignore[assignment]
                None if path is None else load_for_model(model_path, loaded.model, options, [path], out=out)
                for path in paths
            )
        for dataset in read[key]:
            if dataset is not None:
                check_time_unit(model_path, loaded, dataset)
                check_step(loaded.model, dataset)
        pairs.append(read[key])
    return pairs


def _is_json(path: str) -> bool:
    """Whether ``path`` is a JSON result rather than a model file (HDF5): its name ends in
    .json or its first non-blank byte opens an object or a list (``-o eq.txt --format json``)."""
    if path.lower().endswith(".json"):
        return True
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).lstrip()
    except OSError:
        return False  # the model reader names the problem
    return head[:1] in (b"{", b"[")


def _read_json(path: str) -> Any:
    import json

    from dynid.errors import DataError

    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
