"""Property-based checks (hypothesis) of the delimited-text reader and the model loader: whatever
the bytes, the answer is a Dataset / model or a DataError (exit 3), never another exception; and
numbers written by pandas read back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dynid.data import load  # noqa: E402
from dynid.errors import DataError  # noqa: E402
from dynid.modelfile import load_model  # noqa: E402
from tests.test_bad_inputs import _rewritten, model_bytes  # noqa: E402,F401 - model_bytes is a fixture

# Bounded so that each property takes seconds, and derandomized so that CI runs are repeatable (a
# search with random seeds and 25x the examples found the defects fixed with these tests); the
# corpus in test_bad_inputs covers the named cases.
FEW = settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Pieces of delimited text: numbers of every form, the special values, separators, quotes, line
# ends, BOMs, date-times and noise, so that generated files reach the parser's odd corners.
TOKENS = st.sampled_from([
    "0", "1", "-2.5", "1e308", "-1.7e308", "1e-320", "nan", "NaN", "inf", "-inf", "", " ", "t", "x", "y",
    "time", ",", ";", "\t", "|", '"', '""', "\n", "\r\n", "\r", "\ufeff", "2024-01-01T00:00:00Z",
    "1,5", "é", "\x00", "#", "'", "\\", "Unnamed: 0",
])


def _read(path: Path) -> None:
    """load(path): a Dataset whose values are finite where present, or a DataError."""
    try:
        data = load(str(path))
    except DataError:
        return
    for trial in data.trials:
        assert trial.x.ndim == 2 and trial.x.shape[0] == trial.t.shape[0] >= 2
        assert np.all(np.diff(trial.t) > 0)
        assert not np.isinf(trial.x).any()


@FEW
@given(content=st.lists(TOKENS, max_size=200).map("".join))
def test_any_text_reads_or_is_a_data_error(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("text") / "f.csv"
    path.write_text(content, encoding="utf-8")
    _read(path)


@FEW
@given(content=st.binary(max_size=3000))
def test_any_bytes_read_or_are_a_data_error(tmp_path_factory, content):
    for name in ("f.csv", "f.csv.gz", "f.h5"):
        path = tmp_path_factory.mktemp("bytes") / name
        path.write_bytes(content)
        _read(path)


@FEW
@given(values=st.integers(2, 40).flatmap(lambda n: st.lists(
    st.tuples(*[st.floats(-1e100, 1e100, allow_nan=False)] * 2), min_size=n, max_size=n)))
def test_numbers_written_by_pandas_read_back_exactly(tmp_path_factory, values):
    x = np.array(values, dtype=float)
    path = tmp_path_factory.mktemp("numbers") / "f.csv"
    pd.DataFrame({"t": np.arange(len(x)) * 0.5, "a": x[:, 0], "b": x[:, 1]}).to_csv(path, index=False)
    data = load(str(path))
    assert data.variables == ("a", "b")
    np.testing.assert_array_equal(data.trials[0].x, x)


@FEW
@given(changes=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8))
def test_a_model_file_with_changed_bytes_loads_or_is_a_data_error(tmp_path_factory, model_bytes, changes):
    damaged = bytearray(model_bytes)
    for where, value in changes:
        damaged[int(where * len(damaged))] = value
    path = tmp_path_factory.mktemp("model") / "m.dynid"
    path.write_bytes(bytes(damaged))
    try:
        model = load_model(str(path)).model
    except DataError as exc:
        assert str(exc).startswith(str(path))
        return
    assert model.name == "var"  # a change the checksum does not cover (e.g. in unused space)


@FEW
@given(changes=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8))
def test_an_hdf5_data_file_with_changed_bytes_reads_or_is_a_data_error(tmp_path_factory, changes):
    folder = tmp_path_factory.mktemp("h5")
    x = np.random.default_rng(0).normal(size=(50, 2))
    with h5py.File(folder / "d.h5", "w") as handle:
        handle["data"] = x
        handle["data"].attrs["columns"] = ["a", "b"]
        handle["t"] = np.arange(50.0)
    damaged = bytearray((folder / "d.h5").read_bytes())
    for where, value in changes:
        damaged[int(where * len(damaged))] = value
    (folder / "d.h5").write_bytes(bytes(damaged))
    _read(folder / "d.h5")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
HEADER_KEYS = ("backend", "hyperparameters", "variables", "inputs", "dt", "metrics", "format_version")


@settings(FEW, max_examples=25)
@given(replaced=st.dictionaries(st.sampled_from(HEADER_KEYS), JSON, min_size=1, max_size=4))
def test_a_forged_header_loads_or_is_a_data_error(tmp_path_factory, model_bytes, replaced):
    path = tmp_path_factory.mktemp("header") / "m.dynid"
    _rewritten(model_bytes, path, metadata=lambda header: json.dumps({**header, **replaced}))
    try:
        load_model(str(path))
    except DataError as exc:
        assert str(exc).startswith(str(path))
