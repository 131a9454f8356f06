"""Steps shared by the commands that apply a fitted model to data (forecast, score, report)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from dynid.cli.options import DataOptions, join_names
from dynid.cli.output import Output
from dynid.data.dataset import Dataset
from dynid.data.times import same_time_unit, times_after
from dynid.errors import DataError, MissingColumn, UsageError
from dynid.modelfile import ModelFile, load_model
from dynid.models.base import Backend


def load_model_argument(model_path: str, *other_inputs: Optional[str]) -> ModelFile:
    """The model file MODEL (``-``: its bytes on stdin); UsageError when one of the command's
    other inputs (DATA, --future-inputs) is stdin too, since stdin can be read only once."""
    if model_path == "-" and "-" in other_inputs:
        raise UsageError("stdin ('-') can be read only once: give MODEL or DATA as a file")
    return load_model(model_path)


def check_time_unit(model_path: str, loaded: ModelFile, data: Dataset) -> None:
    """DataError when DATA's time unit and that of the data ``loaded`` was fitted on are both
    stated and are different units (``same_time_unit``: "s" and "sec" are one): dt = 20 in ms
    is not dt = 20 in s, and a step check on the numbers alone would take one for the other (or
    ask to resample onto the wrong grid)."""
    fitted = loaded.metadata.get("time_unit")
    if fitted is None or data.time_unit is None or same_time_unit(fitted, data.time_unit):
        return
    name = "<stdin>" if model_path == "-" else model_path
    raise DataError(
        f"{data.source}: time is in {data.time_unit}, but {name} was fitted on time in {fitted}; "
        f"convert DATA's time column to {fitted}"
    )


def model_data_options(options: DataOptions, model: Backend) -> DataOptions:
    """Default --columns/--inputs to the model's own variables, so DATA needs no flags."""
    return dataclasses.replace(
        options,
        columns=options.columns or join_names(model.variables_),
        inputs=options.inputs if options.inputs is not None else (join_names(model.inputs_) or None),
    )


def load_for_model(
    model_path: str, model: Backend, options: DataOptions, specs: list[str], *,
    nan_default: str = "split", labels: Optional[str] = None, out: Optional[Output] = None,
) -> Dataset:
    """DATA (``specs``) read with ``options`` whose --columns/--inputs default to the model's
    (``model_data_options``; ``labels``: also that column, as ``DataOptions.with_labels``).
    A defaulted variable or input that DATA lacks is a DataError saying the model needs it:
    the user gave no --columns, so "--columns 'z' is not a column" would blame a flag never given."""
    try:
        return model_data_options(options, model).with_labels(labels).load(specs, nan_default=nan_default, out=out)
    except MissingColumn as exc:
        defaulted = {"--columns": (options.columns, model.variables_, "variable"),
                     "--inputs": (options.inputs, model.inputs_, "input")}
        given, names, what = defaulted.get(exc.option, ("given", (), ""))
        if given is not None or exc.name not in names:
            raise
        who = "the model" if model_path == "-" else model_path
        raise DataError(f"{exc.source}: {who} needs {what} {exc.name!r}, which DATA lacks; "
                        f"its columns are: {exc.available}") from None


def future_input_rows(
    model: Backend, spec: Optional[str], horizon: int, options: DataOptions, history: Optional[Dataset] = None,
    out: Optional[Output] = None,
) -> Optional[np.ndarray]:
    """(horizon, m) future inputs read from ``spec`` for a model with inputs, else None (also
    without ``spec`` for a model whose inputs are per-trial conditions: ``api.forecast`` keeps
    the history's). A file with a time column gives the rows at the forecast's times (the end
    of ``history`` + k dt) when it holds them (``_rows_at_forecast_times``; notes go to ``out``);
    otherwise its first ``horizon`` rows."""
    if not model.inputs_ or (spec is None and model.capabilities.conditions):
        return None
    if spec is None:
        raise DataError(
            f"the model takes inputs ({', '.join(model.inputs_)}): give --future-inputs FILE "
            f"with {horizon} rows"
        )
    from dynid.data import load

    try:
        table = load(spec, columns=list(model.inputs_), time_column=options.time_column, nan="error",
                     sep=options.sep, decimal=options.decimal)
    except MissingColumn as exc:
        if exc.option != "--columns":
            raise
        raise DataError(f"{exc.source}: the model's input {exc.name!r} is not a column of --future-inputs; "
                        f"its columns are: {exc.available}") from None
    rows = np.concatenate([trial.x for trial in table.trials])
    if table.time_column is not None and history is not None and out is not None:
        return _rows_at_forecast_times(model, spec, horizon, table, history, rows, out)
    if rows.shape[0] < horizon:
        raise DataError(f"{spec}: {rows.shape[0]} rows of future inputs, --horizon needs {horizon}")
    return rows[:horizon]


def _rows_at_forecast_times(
    model: Backend, spec: str, horizon: int, table: Dataset, history: Dataset, rows: np.ndarray, out: Output
) -> np.ndarray:
    """The ``horizon`` rows of ``rows`` (the future-input file ``table``'s) at the forecast's
    times when the file holds them; else, when its rows are the model's step apart (times of
    its own, e.g. from 0), its first ``horizon`` rows, said in a note; else DataError naming
    the times (its inputs would drive steps of another length)."""
    times = np.concatenate([trial.t for trial in table.trials])
    if table.time_origin is not None and history.time_origin is not None:
        shift = np.datetime64(table.time_origin.removesuffix("Z")) - np.datetime64(history.time_origin.removesuffix("Z"))
        times = times + shift / np.timedelta64(1, "ns") * 1e-9
    wanted = times_after(history.trials[-1].t[-1], model.dt_, horizon)
    tolerance = 1e-3 * model.dt_  # times written with fewer digits still match
    start = int(np.searchsorted(times, wanted[0] - tolerance))
    chosen = times[start : start + horizon]
    if chosen.shape[0] == horizon and np.max(np.abs(chosen - wanted)) <= tolerance:
        return rows[start : start + horizon]
    own = times[:horizon]
    if own.shape[0] == horizon and np.max(np.abs(np.diff(own) - model.dt_), initial=0.0) <= tolerance:
        out.info(f"{spec}: its times ({own[0]:.6g}, ...) are not the forecast's ({wanted[0]:.6g}, ...); "
                 f"its first {horizon} rows drive the forecast steps in order")
        return rows[:horizon]
    raise DataError(
        f"{spec}: its {table.time_column!r} column holds neither the forecast's {horizon} times "
        f"{wanted[0]:.6g}, {wanted[0] + model.dt_:.6g}, ... (DATA's last time + k * {model.dt_:g}) "
        f"nor {horizon} rows {model.dt_:g} apart"
    )


def iso_origin(time_format: Optional[str], data_origin: Optional[str], output: Optional[str]) -> Optional[str]:
    """The date-time the output's times count from when they are written as ISO-8601, else None
    (seconds); UsageError for --time-format iso without date-times or into HDF5."""
    from dynid.cli.options import TIME_FORMATS
    from dynid.data.writers import is_hdf5_target

    if time_format not in (None, *TIME_FORMATS):
        raise UsageError(f"--time-format {time_format}: expected one of {', '.join(TIME_FORMATS)}")
    hdf5 = output is not None and is_hdf5_target(output)
    if time_format == "iso":
        if data_origin is None:
            raise UsageError("--time-format iso: DATA's time is not date-times (it has no origin to count from)")
        if hdf5:
            raise UsageError(f"--time-format iso: {output} is HDF5, whose time is seconds; write CSV or drop the option")
    if time_format == "seconds" or hdf5:
        return None
    return data_origin
