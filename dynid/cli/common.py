"""Steps shared by the commands that apply a fitted model to data (forecast, score, report)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from dynid.cli.options import DataOptions, join_names
from dynid.errors import DataError, UsageError
from dynid.modelfile import ModelFile, load_model
from dynid.models.base import Backend


def load_model_argument(model_path: str, *other_inputs: Optional[str]) -> ModelFile:
    """The model file MODEL (``-``: its bytes on stdin); UsageError when one of the command's
    other inputs (DATA, --future-inputs) is stdin too, since stdin can be read only once."""
    if model_path == "-" and "-" in other_inputs:
        raise UsageError("stdin ('-') can be read only once: give MODEL or DATA as a file")
    return load_model(model_path)


def model_data_options(options: DataOptions, model: Backend) -> DataOptions:
    """Default --columns/--inputs to the model's own variables, so DATA needs no flags."""
    return dataclasses.replace(
        options,
        columns=options.columns or join_names(model.variables_),
        inputs=options.inputs if options.inputs is not None else (join_names(model.inputs_) or None),
    )


def future_input_rows(
    model: Backend, spec: Optional[str], horizon: int, options: DataOptions
) -> Optional[np.ndarray]:
    """(horizon, m) future inputs read from ``spec`` for a model with inputs, else None (also
    without ``spec`` for a model whose inputs are per-trial conditions: ``api.forecast`` keeps
    the history's)."""
    if not model.inputs_ or (spec is None and model.capabilities.conditions):
        return None
    if spec is None:
        raise DataError(
            f"the model takes inputs ({', '.join(model.inputs_)}): give --future-inputs FILE "
            f"with {horizon} rows"
        )
    from dynid.data import load

    table = load(
        spec,
        columns=list(model.inputs_),
        time_column=options.time_column,
        nan="error",
        sep=options.sep,
        decimal=options.decimal,
    )
    rows = np.concatenate([trial.x for trial in table.trials])
    if rows.shape[0] < horizon:
        raise DataError(f"{spec}: {rows.shape[0]} rows of future inputs, --horizon needs {horizon}")
    return rows[:horizon]
