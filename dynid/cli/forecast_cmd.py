"""``dynid forecast MODEL DATA --horizon N [-o out.csv|out.h5]``."""

from typing import Annotated, Optional

import typer

from dynid.cli.each import EachSpec
from dynid.cli.options import DataOptions, OutputPath, TimeFormatOption, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("forecast")(forecast)


@with_options("data", "batch", each=EachSpec("forecast", data="paths", leading=1,
                                             model_file=True, json_only_stdout=True))
def forecast(
    paths: Annotated[list[str], typer.Argument(metavar="MODEL DATA", help="A .dynid model file ('-' = stdin; then DATA must be a file), then the data whose last samples are the initial condition ('-' = stdin; with --each, several DATA).")],
    horizon: Annotated[int, typer.Option("--horizon", "-n", min=1, help="Number of steps (of the model's dt) to forecast.")],
    future_inputs: Annotated[Optional[str], typer.Option("--future-inputs", help="File with the model's input columns for the forecast steps: its first --horizon rows, or the rows at the forecast's times when its time column holds them (models whose inputs are per-trial conditions, clds: default the history's condition, repeated).")] = None,
    interval: Annotated[Optional[float], typer.Option("--interval", help="Add {variable}_lower and {variable}_upper columns bounding this central probability (0.9) of the predictive distribution (models with one: lds, gpsde).")] = None,
    sample: Annotated[bool, typer.Option("--sample", help="One path drawn from the predictive distribution instead of its mean, the same for the same --seed (models with sample paths: lds, ctlds, gpsde).")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of --sample.")] = 0,
    allow_escape: Annotated[bool, typer.Option("--allow-escape", help="Write the forecast even where it leaves the training data's range widened by that range on each side (by default such a forecast has diverged: exit 1, nothing written). Non-finite values are refused still.")] = False,
    time_format: TimeFormatOption = None,
    output: OutputPath = None,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Roll a fitted model forward from the end of DATA; CSV (time + variables) on stdout or -o (--json: one JSON document)."""
    from dynid import api
    from dynid.cli.common import check_time_unit, future_input_rows, iso_origin, load_for_model, load_model_argument
    from dynid.data.writers import check_table_target, iso_times, write_table
    import numpy as np

    from dynid.documents import FORECAST, tagged
    from dynid.errors import UsageError

    if len(paths) != 2:
        raise UsageError("give MODEL DATA (several DATA need --each)")
    model_path, data_file = paths
    out.check_json_target(output)
    if output is not None:
        check_table_target(output)
    loaded = load_model_argument(model_path, data_file, future_inputs)
    model = loaded.model
    # A model that handles missing values filters through NaN cells of the history as they are.
    nan_default = "keep" if model.capabilities.nan else "split"
    dataset = load_for_model(model_path, model, data, [data_file], nan_default=nan_default, out=out)
    check_time_unit(model_path, loaded, dataset)
    origin = iso_origin(time_format, dataset.time_origin, output)
    future = future_input_rows(model, future_inputs, horizon, data, dataset, out)
    result = api.forecast(model, dataset, horizon, future, interval=interval, sample=sample, seed=seed,
                          allow_escape=allow_escape)
    for note in result.notes:
        out.info(note)
    time_column = dataset.time_column or "t"
    if out.json_mode:
        times = result.t if origin is None else iso_times(result.t, origin)
        body = {"time_column": time_column, "time_origin": dataset.time_origin, "variables": list(result.variables), "t": times, "x": result.x}
        if result.level is not None:
            body.update(level=result.level, lower=result.lower, upper=result.upper)
        out.emit_json(tagged(FORECAST, body))
        return
    names, values = result.variables, result.x
    if result.lower is not None and result.upper is not None:
        names = (*names, *(f"{v}_lower" for v in result.variables), *(f"{v}_upper" for v in result.variables))
        values = np.hstack([result.x, result.lower, result.upper])
    write_table(output or "-", time_column, result.t, names, values, time_origin=origin)
    if output and output != "-":
        out.info(f"wrote {horizon} forecast steps to {output}")

