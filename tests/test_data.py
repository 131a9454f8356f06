"""The data layer: every reader, every column option, NaN policies and bad input."""

import gzip
import io

import h5py
import numpy as np
import pandas as pd
import pytest

from dynid.data import Dataset, combine, load
from dynid.errors import DataError, UsageError


def _frame(n=50, dt=0.1):
    t = np.arange(n) * dt
    return pd.DataFrame({"t": t, "x": np.sin(t), "y": np.cos(t), "u": t**2, "label": ["a"] * n})


def test_csv_autodetects_time_and_numeric_columns(tmp_path):
    path = tmp_path / "d.csv"
    _frame().to_csv(path, index=False)
    data = load(str(path))
    assert data.variables == ("x", "y", "u")
    assert data.time_column == "t"
    assert data.dt == pytest.approx(0.1, rel=1e-12)
    np.testing.assert_array_equal(data.trials[0].x[:, 0], np.sin(np.arange(50) * 0.1))


def test_tsv_gzip_and_stdin_give_the_same_dataset(tmp_path):
    frame = _frame()
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    tsv = tmp_path / "d.tsv.gz"
    with gzip.open(tsv, "wt") as handle:
        frame.to_csv(handle, sep="\t", index=False)
    stdin = io.BytesIO(csv.read_bytes())
    a = load(str(csv), columns=["x", "y"], inputs=["u"])
    b = load(str(tsv), columns=["x", "y"], inputs=["u"])
    c = load("-", columns=["x", "y"], inputs=["u"], stdin=stdin)
    assert a.fingerprint() == b.fingerprint() == c.fingerprint()
    assert a.inputs == ("u",)
    assert a.trials[0].u.shape == (50, 1)


def test_dt_used_without_time_column(tmp_path):
    path = tmp_path / "d.csv"
    _frame().drop(columns="t").to_csv(path, index=False)
    data = load(str(path), columns=["x"], dt=0.5)
    assert data.dt == 0.5
    assert data.trials[0].t[-1] == pytest.approx(49 * 0.5)


def test_trial_column_gives_ragged_trials(tmp_path):
    frames = []
    for k, n in enumerate([30, 45, 12]):
        frame = _frame(n)
        frame["trial"] = k
        frames.append(frame)
    path = tmp_path / "d.csv"
    pd.concat(frames).to_csv(path, index=False)
    data = load(str(path), columns=["x", "y"], trial_column="trial")
    assert [trial.n_samples for trial in data.trials] == [30, 45, 12]
    assert data.dt == pytest.approx(0.1)


def _write_h5(path, trials, layout):
    with h5py.File(path, "w") as handle:
        if layout == "dataset":
            ds = handle.create_dataset("data", data=trials[0][1])
            ds.attrs["columns"] = ["x", "y"]
            handle.create_dataset("t", data=trials[0][0])
        else:
            group = handle.create_group("trials")
            for k, (t, x) in enumerate(trials):
                sub = group.create_group(f"trial{k}")
                ds = sub.create_dataset("data", data=x)
                ds.attrs["columns"] = ["x", "y"]
                sub.create_dataset("time", data=t)


def test_hdf5_single_dataset_and_inner_path(tmp_path):
    t = np.arange(40) * 0.25
    x = np.column_stack([np.sin(t), np.cos(t)])
    path = tmp_path / "d.h5"
    _write_h5(path, [(t, x)], "dataset")
    for spec in (str(path), f"{path}:/data"):
        data = load(spec)
        assert data.variables == ("x", "y")
        assert data.dt == 0.25
        np.testing.assert_array_equal(data.trials[0].x, x)


def test_hdf5_group_of_groups_is_several_trials(tmp_path):
    trials = []
    for n in (20, 35, 11):
        t = np.arange(n) * 0.1
        trials.append((t, np.column_stack([t, -t])))
    path = tmp_path / "d.hdf5"
    _write_h5(path, trials, "groups")
    data = load(f"{path}:/trials")
    assert data.n_trials == 3
    assert [trial.n_samples for trial in data.trials] == [20, 35, 11]
    only_x = load(f"{path}:/trials", columns=["x"])
    assert only_x.variables == ("x",)
    np.testing.assert_array_equal(only_x.trials[1].x[:, 0], trials[1][1][:, 0])


@pytest.mark.parametrize(
    ("policy", "n_trials", "n_samples"),
    [("split", 2, 48), ("drop", 1, 48), ("interpolate", 1, 50)],
)
def test_nan_policies(tmp_path, policy, n_trials, n_samples):
    frame = _frame()
    frame.loc[20, "x"] = np.nan
    frame.loc[21, "y"] = np.nan
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    data = load(str(path), columns=["x", "y"], nan=policy)
    assert data.n_trials == n_trials
    assert data.n_samples == n_samples
    assert not any(np.isnan(trial.x).any() for trial in data.trials)
    if policy == "interpolate":
        t = data.trials[0].t
        expected = np.interp(t[20], [t[19], t[21]], [np.sin(t[19]), np.sin(t[21])])
        assert data.trials[0].x[20, 0] == pytest.approx(expected)
    if policy == "drop":
        assert data.dt is None  # a gap in time: irregular now
    assert data.notes


def test_nan_split_counts_the_lone_rows_it_drops(tmp_path):
    """Missing values at rows 20 and 22 leave row 21 a segment of one sample, no trial: the
    note counts it among the dropped rows (3 of 50 gone, not 2)."""
    frame = _frame()
    frame.loc[[20, 22], "x"] = np.nan
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    data = load(str(path), columns=["x", "y"], nan="split")
    assert data.n_trials == 2 and data.n_samples == 47
    assert any("dropped 3 rows: 2 with missing values, 1 alone between them" in note for note in data.notes)
    assert not any("data end at" in note for note in data.notes)
    # Missing values in the last rows: the data (and a forecast from them) end before the file.
    frame.loc[[48, 49], "y"] = np.nan
    frame.to_csv(path, index=False)
    data = load(str(path), columns=["x", "y"], nan="split")
    t = frame["t"].to_numpy()
    assert data.trials[-1].t[-1] == t[47]
    assert any(f"its data end at t = {t[47]:g}, before its last row (t = {t[49]:g})" in note
               for note in data.notes)


def test_nan_error_names_column_and_row(tmp_path):
    frame = _frame()
    frame.loc[7, "y"] = np.nan
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"'y'.*row 8"):
        load(str(path), nan="error")


def test_irregular_sampling_detected_and_resampled(tmp_path):
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.05, 0.15, 200))
    path = tmp_path / "d.csv"
    pd.DataFrame({"time": t, "x": np.sin(t)}).to_csv(path, index=False)
    data = load(str(path))
    assert data.dt is None
    regular = load(str(path), resample=0.1)
    assert regular.dt == pytest.approx(0.1)
    np.testing.assert_allclose(regular.trials[0].x[:, 0], np.sin(regular.trials[0].t), atol=5e-3)


@pytest.mark.parametrize(
    ("content", "kwargs", "match"),
    [
        ("t,x\n0,1\n1,2\n", {"columns": ["z"]}, r"--columns 'z' is not a column"),
        ("t,x,s\n0,1,a\n1,2,b\n", {"columns": ["s"]}, r"column 's' is not numeric"),
        ("t,x\n0,1\n0,2\n1,3\n", {}, r"duplicate value at row 2"),
        ("t,x\n0,1\n2,2\n1,3\n", {}, r"decreasing value at row 3"),
        ("t,x\n0,1\n", {}, r"too few samples"),
        ("", {}, r"empty"),
        ("t,x\n", {}, r"no data rows|too few"),
        ("t,x\n0,1\n1,2\n", {"time_column": "time"}, r"--time-column 'time'"),
        ("t,x\n0,1\n1,2\n", {"inputs": ["q"]}, r"--inputs 'q'"),
    ],
)
def test_bad_data_is_a_data_error(tmp_path, content, kwargs, match):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=match):
        load(str(path), **kwargs)


def test_missing_file_and_bad_options():
    with pytest.raises(DataError, match="no such file"):
        load("/nonexistent/data.csv")
    with pytest.raises(UsageError):
        load("-", nan="sometimes", stdin=io.BytesIO(b"x\n1\n"))
    with pytest.raises(UsageError):
        load("-", dt=-1.0, stdin=io.BytesIO(b"x\n1\n"))


def test_foreign_hdf5_path_is_a_data_error(tmp_path):
    path = tmp_path / "d.h5"
    _write_h5(path, [(np.arange(5.0), np.ones((5, 2)))], "dataset")
    with pytest.raises(DataError, match="no dataset or group"):
        load(f"{path}:/nothing")
    (tmp_path / "fake.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(DataError, match="not a readable HDF5"):
        load(str(tmp_path / "fake.h5"))


def test_fingerprint_tracks_values_and_names():
    x = np.random.default_rng(1).normal(size=(100, 2))
    a = Dataset.from_arrays(x, dt=0.1)
    b = Dataset.from_arrays(x.copy(), dt=0.1)
    c = Dataset.from_arrays(x + 1e-12, dt=0.1)
    d = Dataset.from_arrays(x, dt=0.1, variables=["p", "q"])
    assert a.fingerprint() == b.fingerprint()
    assert len({a.fingerprint(), c.fingerprint(), d.fingerprint()}) == 3


def test_combine_requires_equal_names():
    a = Dataset.from_arrays(np.ones((5, 2)), variables=["a", "b"])
    b = Dataset.from_arrays(np.ones((7, 2)), variables=["a", "b"])
    assert combine([a, b]).n_trials == 2
    with pytest.raises(DataError):
        combine([a, Dataset.from_arrays(np.ones((5, 2)), variables=["a", "c"])])


def test_forecast_times_are_the_grid_not_its_binary_sums():
    from dynid.data.times import times_after

    # 29.99 + 0.01 is 30.000000000000004 in binary: the written forecast showed it.
    np.testing.assert_array_equal(times_after(29.99, 0.01, 3), [30.0, 30.01, 30.02])
    assert repr(float(times_after(399.0, 0.01, 1)[0])) == "399.01"
    # Moved by at most 5e-10 dt, and untouched where the rounding is finer than float precision.
    third = times_after(0.0, 1 / 3, 300)
    np.testing.assert_allclose(third, np.arange(1, 301) / 3, rtol=0, atol=5e-10 / 3)
    epoch = 1.7e9 + 0.001 * np.arange(1, 4)
    np.testing.assert_array_equal(times_after(1.7e9, 0.001, 3), epoch)
