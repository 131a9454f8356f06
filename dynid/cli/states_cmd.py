"""``dynid states MODEL DATA [-o FILE]``: the hidden states of DATA under a fitted model."""

from typing import Annotated

import typer

from dynid.cli.options import DataOptions, LabelsOption, OutputPath, TimeFormatOption, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("states")(states)


@with_options("data")
def states(
    model_path: Annotated[str, typer.Argument(metavar="MODEL", help="A .dynid model file of a latent-state model ('-' = stdin; then DATA must be a file).")],
    data_file: Annotated[str, typer.Argument(metavar="DATA", help="Data to infer the states of ('-' = stdin); NaN cells are missing observations (models that take none, hmm, arhmm, plrnn, alrnn, infer each stretch of complete rows apart and leave the rows with a missing value empty).")],
    output: OutputPath = None,
    labels: LabelsOption = None,
    time_format: TimeFormatOption = None,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Hidden states of DATA, one row per row: t, (trial,) then state and p_state_K (discrete-state models: Viterbi state, smoothed probabilities) and/or z_K and z_K_sd (smoothed latent means and sds); CSV on stdout or -o (HDF5 by suffix; --json: one JSON document).

    plrnn, alrnn: z_K alone (a deterministic map: no sds), at each row the latent state a forecast from the data up to that row would start from, in the model's standardised units: the observed latents are the data standardised (z_K = (x_K - mean) / sd; smoothed with -p smoothing), the unobserved ones carried by the model's map under that forcing over the -p warmup samples before; empty for each trial's first warmup rows, too few for a forecast. alrnn adds state: the linear subregion of each row's latent, the binary number the signs of its P piecewise-linear units spell, the code info's symbolic_coding writes ('10' = 2: unit M-P+1 on, M-P+2 off); no p_state_K (the subregion follows from the latent).
    """
    import numpy as np

    from dynid import api
    from dynid.cli.common import check_time_unit, iso_origin, load_for_model, load_model_argument
    from dynid.data.writers import check_table_target, iso_times, write_table
    from dynid.documents import STATES, tagged

    out.check_json_target(output)
    if output is not None:
        check_table_target(output)
    loaded = load_model_argument(model_path, data_file)
    model = loaded.model
    # Missing values kept: a model that takes none infers each complete stretch apart, and
    # still writes a row (empty) for every row of DATA.
    dataset = load_for_model(model_path, model, data, [data_file], nan_default="keep", labels=labels, out=out)
    check_time_unit(model_path, loaded, dataset)
    # DATA's own times, date-times included, so that each row joins the row of DATA it is of.
    origin = iso_origin(time_format, dataset.time_origin, output)
    result = api.states(model, dataset, labels=labels)
    time_column = dataset.time_column or "t"
    if out.json_mode:
        body = {"time_column": time_column, "time_origin": dataset.time_origin, "states": list(result.names),
                "t": result.t if origin is None else iso_times(result.t, origin), "trial": result.trial, "z": result.means, "z_sd": result.sds}
        if result.state is not None:
            body.update(state=result.state, p_state=result.probabilities)
        out.emit_json(tagged(STATES, body))
        return
    names, values = result.names, result.means
    if result.sds is not None:
        names, values = (*names, *(f"{name}_sd" for name in names)), np.hstack([values, result.sds])
    if result.state is not None:
        discrete, columns = ("state",), [result.state[:, None]]
        if result.probabilities is not None:
            discrete += tuple(f"p_state_{k}" for k in range(result.probabilities.shape[1]))
            columns.append(result.probabilities)
        names, values = (*discrete, *names), np.hstack([*columns, values])
    if dataset.n_trials > 1:
        names, values = ("trial", *names), np.hstack([result.trial[:, None], values])
    write_table(output or "-", time_column, result.t, names, values, time_origin=origin)
    if output and output != "-":
        out.info(f"wrote the states of {result.t.shape[0]} samples to {output}")
