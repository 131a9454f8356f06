"""``dynid forecast MODEL DATA --horizon N [-o out.csv|out.h5]``."""

from typing import Annotated, Optional

import typer

from dynid.cli.options import DataOptions, OutputPath, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("forecast")(forecast)


@with_options("data")
def forecast(
    model_path: Annotated[str, typer.Argument(metavar="MODEL", help="A .dynid model file.")],
    data_file: Annotated[str, typer.Argument(metavar="DATA", help="Data whose last samples are the initial condition ('-' = stdin).")],
    horizon: Annotated[int, typer.Option("--horizon", "-n", min=1, help="Number of steps (of the model's dt) to forecast.")],
    future_inputs: Annotated[Optional[str], typer.Option("--future-inputs", help="File with the model's input columns for the forecast steps.")] = None,
    output: OutputPath = None,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Roll a fitted model forward from the end of DATA; CSV (time + variables) on stdout or -o (--json: one JSON document)."""
    from dynid import api
    from dynid.cli.common import future_input_rows, model_data_options
    from dynid.data.writers import write_table
    from dynid.documents import FORECAST, tagged
    from dynid.modelfile import load_model

    out.check_json_target(output)
    loaded = load_model(model_path)
    model = loaded.model
    dataset = model_data_options(data, model).load([data_file], out=out)
    future = future_input_rows(model, future_inputs, horizon, data)
    result = api.forecast(model, dataset, horizon, future)
    time_column = dataset.time_column or "t"
    if out.json_mode:
        body = {"time_column": time_column, "variables": list(result.variables), "t": result.t, "x": result.x}
        out.emit_json(tagged(FORECAST, body))
        return
    write_table(output or "-", time_column, result.t, result.variables, result.x)
    if output and output != "-":
        out.info(f"wrote {horizon} forecast steps to {output}")
