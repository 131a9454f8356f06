"""``dynid report INPUT... [--data DATA] -o report.html``: one self-contained HTML file."""

from typing import Annotated, Optional

import typer

from dynid.cli.options import DataOptions, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("report")(report)


@with_options("data", json_flag=False)
def report(
    input_files: Annotated[list[str], typer.Argument(metavar="INPUT", help="Model files (.dynid) and JSON results of other dynid commands.")],
    output: Annotated[str, typer.Option("--output", "-o", help="The HTML file to write ('-' = stdout).")],
    data_file: Annotated[Optional[str], typer.Option("--data", help="Data to compare forecasts with.")] = None,
    horizon: Annotated[Optional[int], typer.Option("--horizon", min=1, help="Held-out steps in the forecast-vs-data plot [default: min(200, n/4)].")] = None,
    title: Annotated[str, typer.Option("--title", help="Report title.")] = "dynid report",
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Write an HTML report of models, equations, causal graphs and forecasts (opens offline)."""
    import json

    from dynid.atomic import write_text
    from dynid.cli.common import model_data_options
    from dynid.errors import DataError
    from dynid.modelfile import load_model
    from dynid.report import build_report

    models, results = [], []
    for path in input_files:
        if path.lower().endswith(".json"):
            try:
                with open(path, encoding="utf-8") as handle:
                    results.append((path, json.load(handle)))
            except FileNotFoundError:
                raise DataError(f"{path}: no such file") from None
            except (ValueError, UnicodeDecodeError) as exc:
                raise DataError(f"{path}: not valid JSON ({exc})") from None
        else:
            models.append((path, load_model(path)))
    dataset = None
    if data_file is not None:
        options = model_data_options(data, models[0][1].model) if models else data
        dataset = options.load([data_file], out=out)
        from dynid.api import check_step

        for _, loaded in models:
            check_step(loaded.model, dataset)  # never a forecast compared at the wrong step
    html = build_report(models, results, dataset, horizon=horizon, title=title)
    write_text(output, html)
    if output != "-":
        out.info(f"wrote {output}")
