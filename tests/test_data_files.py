"""Real files as users write them: pandas to_csv/to_hdf, Excel CSV, ISO-8601 times, HDF5 columns.

Every file is built the way users build it (pandas, h5py, Excel's bytes), and read back against
the frame it came from: names, values, times and the notes that say what was interpreted.
"""

import io
import json
import re
import warnings

import h5py
import numpy as np
import pandas as pd
import pytest

from dynid.cli.options import join_names, split_names
from dynid.data import combine, load
from dynid.errors import DataError, UsageError

N = 40
DT = 0.25


def _frame():
    """Names with a comma, a unit, non-ASCII; values with many digits."""
    t = np.arange(N) * DT
    return pd.DataFrame(
        {
            "flow, l/s": np.sin(t) + 0.123456789,
            "pressure (bar)": 1000.5 * np.cos(t),
            "température": t**2 / 7,
        }
    )


def _values(frame):
    return frame[["flow, l/s", "pressure (bar)", "température"]].to_numpy()


def _notes(data):
    return " | ".join(data.notes)


# --- delimiters, decimals, encodings -------------------------------------------------------


def test_pandas_default_index_is_dropped_with_a_note(tmp_path):
    path = tmp_path / "d.csv"
    _frame().to_csv(path)  # writes the RangeIndex as an unnamed first column
    data = load(str(path), dt=DT)
    assert data.variables == ("flow, l/s", "pressure (bar)", "température")
    np.testing.assert_array_equal(data.trials[0].x, _values(_frame()))
    assert "pandas index column" in _notes(data)


@pytest.mark.parametrize("writer", ["csv", "hdf"])
def test_an_unnamed_float_index_is_the_time(tmp_path, writer):
    """``df.index = t; df.to_csv()`` (or ``to_hdf``): the unnamed index holds the times, which
    are not row numbers, so it is the time axis (it was dropped, leaving dt 1); whole numbers
    (row labels) are dropped as before, and --dt keeps the index out."""
    frame = _frame().set_index(pd.Index(np.arange(N) * DT + 3.0))
    path = tmp_path / ("d.csv" if writer == "csv" else "d.h5")
    if writer == "csv":
        frame.to_csv(path)
    else:
        _to_hdf(frame, path, key="frame")
    data = load(str(path))
    assert data.variables == ("flow, l/s", "pressure (bar)", "température")
    assert data.time_column == "index" and data.dt == pytest.approx(DT, rel=1e-12)
    np.testing.assert_allclose(data.trials[0].t, np.arange(N) * DT + 3.0, rtol=0, atol=1e-12)
    assert "pandas index column 'index' taken as the time" in _notes(data)
    stepped = load(str(path), dt=0.5)
    assert stepped.time_column is None and stepped.dt == 0.5
    assert "pandas index column 'index' dropped" in _notes(stepped)
    rows = frame.set_index(pd.Index(np.arange(N) * 2 + 100))  # a selection of rows: labels
    rows.to_csv(tmp_path / "rows.csv")
    labelled = load(str(tmp_path / "rows.csv"))
    assert labelled.time_column is None and labelled.dt == 1.0
    assert "pandas index column 'index' dropped" in _notes(labelled)


def test_semicolon_and_decimal_comma_are_sniffed(tmp_path):
    frame = _frame()
    frame.insert(0, "t", np.arange(N) * DT)
    path = tmp_path / "d.csv"
    frame.to_csv(path, sep=";", decimal=",", index=False)
    data = load(str(path))
    assert data.variables == ("flow, l/s", "pressure (bar)", "température")
    assert data.dt == pytest.approx(DT, rel=1e-12)
    np.testing.assert_array_equal(data.trials[0].x, _values(frame))
    assert "semicolon" in _notes(data) and "decimal comma" in _notes(data)
    gzipped = tmp_path / "d.csv.gz"
    frame.to_csv(gzipped, sep=";", decimal=",", index=False)
    piped = load("-", stdin=io.BytesIO(path.read_bytes()))
    assert load(str(gzipped)).fingerprint() == piped.fingerprint() == data.fingerprint()


def test_day_first_dotted_dates_of_a_european_spreadsheet_are_the_time(tmp_path):
    """pandas with a German date format (as Excel or LibreOffice in de-DE save a CSV:
    semicolons, decimal commas, "31.12.2024 23:00"): the dates are the time, day first (they
    were ignored as text, leaving dt 1). A day and month that could swap (01.02.) read as 1
    February; slashed dates, month- or day-first by country, stay text."""
    frame = _frame()
    stamps = pd.date_range("2024-12-31 23:00", periods=N, freq="15min")
    frame.insert(0, "Datum", stamps.strftime("%d.%m.%Y %H:%M"))
    path = tmp_path / "d.csv"
    frame.to_csv(path, sep=";", decimal=",", index=False)
    data = load(str(path))
    assert data.time_column == "Datum" and data.dt == 900.0
    assert str(data.time_origin).startswith("2024-12-31T23:00")
    np.testing.assert_array_equal(data.trials[0].x, _values(frame))
    short = tmp_path / "short.csv"
    short.write_text("Datum;x\n1.2.2024 9:30;1,5\n01.02.2024 10:30:00,5;2\n")
    times = load(str(short)).trials[0].t
    assert times.tolist() == [0.0, 3600.5]
    slashed = tmp_path / "slashed.csv"
    slashed.write_text("Datum;x;y\n01/02/2024;1,5;2\n02/02/2024;2;3\n03/02/2024;2;3\n")
    assert load(str(slashed)).time_column is None


@pytest.mark.parametrize("header, cell", [("date", "01/02/2024"), ("timestamp", "1/2/2024 13:05"),
                                          ("time", "13:05:00")])
def test_a_time_column_that_cannot_be_read_is_refused_unless_dt_is_given(tmp_path, header, cell):
    """A column named like the time whose text is no date-time dynid reads (slashed dates are
    month- or day-first by country; a time of day has no date): it was ignored as text, the
    samples timed by their row with exit 0. Refused, naming it; --dt times the rows."""
    path = tmp_path / "d.csv"
    pd.DataFrame({header: [cell] * N, "x": np.arange(N) * 0.5}).to_csv(path, index=False)
    with pytest.raises(DataError, match=f"column '{header}' is named like the time but holds '{cell}'"):
        load(str(path))
    data = load(str(path), dt=2.0)
    assert data.variables == ("x",) and data.dt == 2.0 and f"ignored: '{header}'" in _notes(data)


@pytest.mark.parametrize("sep, decimal, grouping", [(",", ".", ","), (";", ",", ".")])
def test_numbers_with_thousands_separators_are_read(tmp_path, sep, decimal, grouping):
    """A spreadsheet's "Number" format with a 1000 separator ("1,047.94"; in much of Europe
    "1.047,94"): pandas leaves the column as text, which was left out of the states with only
    a note. Read as numbers, said on stderr; a column where some value is no number stays text."""
    pressure = 1000.0 + 100.0 * np.sin(np.arange(N))
    path = tmp_path / "d.csv"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(sep.join(["t", "pressure", "flow"]) + "\n")
        for k, p in enumerate(pressure):
            text = f"{p:,.2f}".replace(",", "_").replace(".", decimal).replace("_", grouping)
            cell = f'"{text}"' if grouping == sep else text
            handle.write(sep.join([str(k), cell, f"{k / 8}".replace(".", decimal)]) + "\n")
    data = load(str(path))
    assert data.variables == ("pressure", "flow")
    np.testing.assert_allclose(data.trials[0].x[:, 0], np.round(pressure, 2), rtol=0, atol=1e-9)
    assert f"column 'pressure': numbers with thousands separators ('{grouping}') read as numbers" in _notes(data)


@pytest.mark.parametrize("sep", ["\t", ","])
def test_a_lone_separator_before_three_digits_is_not_read_as_thousands(tmp_path, sep):
    """"1,250" is 1250 in a US spreadsheet and 1.25 in a European one: with no value that has
    both marks or two separators, nothing says which, so the column is not read as a number
    (before thousands were read, and still: no state column, exit 3), never as 1250 with exit 0."""
    path = tmp_path / "d.txt"
    cells = ["1,250", "2,125", "3,500", "4,750"] * 3
    path.write_text("x\n" + "".join(f'"{c}"\n' if sep == "," else f"{c}\n" for c in cells))
    with pytest.raises(DataError, match="no numeric state columns"):
        load(str(path), sep=sep)


def test_gzip_on_stdin_is_read_and_a_gzip_file_without_gz_is_named(tmp_path):
    frame = _frame()
    frame.insert(0, "t", np.arange(N) * DT)
    frame.to_csv(tmp_path / "d.csv.gz", index=False)
    data = load(str(tmp_path / "d.csv.gz"))
    piped = load("-", stdin=io.BytesIO((tmp_path / "d.csv.gz").read_bytes()))  # cat d.csv.gz | dynid ...
    assert piped.fingerprint() == data.fingerprint()
    (tmp_path / "renamed.csv").write_bytes((tmp_path / "d.csv.gz").read_bytes())
    with pytest.raises(DataError, match="gzip-compressed, but its name does not end in .gz"):
        load(str(tmp_path / "renamed.csv"))


def test_excel_csv_with_bom_crlf_and_cp1252(tmp_path):
    frame = _frame()
    frame.insert(0, "time", np.arange(N) * DT)
    text = frame.to_csv(sep=";", decimal=",", index=False, lineterminator="\r\n")
    utf8 = tmp_path / "utf8.csv"
    utf8.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))  # Excel "CSV UTF-8"
    legacy = tmp_path / "legacy.csv"
    legacy.write_bytes(text.encode("cp1252"))  # Excel "CSV" in a western-European locale
    for path in (utf8, legacy):
        data = load(str(path))
        assert data.time_column == "time"
        assert data.variables == ("flow, l/s", "pressure (bar)", "température")
        np.testing.assert_array_equal(data.trials[0].x, _values(frame))
    assert "cp1252" in _notes(load(str(legacy)))
    assert "cp1252" not in _notes(load(str(utf8)))


@pytest.mark.parametrize(("sep", "suffix", "name"), [("\t", ".txt", "tab"), ("|", ".csv", "pipe"), (" ", ".dat", "whitespace")])
def test_other_delimiters_are_sniffed(tmp_path, sep, suffix, name):
    frame = pd.DataFrame({"t": np.arange(N) * DT, "x": np.sin(np.arange(N)), "y": np.arange(N) * 3.0})
    path = tmp_path / f"d{suffix}"
    frame.to_csv(path, sep=sep, index=False)
    data = load(str(path))
    assert data.variables == ("x", "y")
    assert data.dt == pytest.approx(DT, rel=1e-12)
    np.testing.assert_array_equal(data.trials[0].x, frame[["x", "y"]].to_numpy())
    assert name in _notes(data)


def test_comma_csv_and_tsv_have_no_delimiter_note(tmp_path):
    frame = pd.DataFrame({"t": np.arange(N) * DT, "x": np.sin(np.arange(N))})
    frame.to_csv(tmp_path / "d.csv", index=False)
    frame.to_csv(tmp_path / "d.tsv", sep="\t", index=False)
    assert load(str(tmp_path / "d.csv")).notes == ()
    assert load(str(tmp_path / "d.tsv")).notes == ()


def test_forced_sep_and_decimal(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("t;x;y\n0,0;1,5;2\n0,5;2,5;3\n1,0;3,5;4\n")
    data = load(str(path), sep=";", decimal=",")
    assert data.notes == ()  # nothing was guessed
    np.testing.assert_array_equal(data.trials[0].x, [[1.5, 2], [2.5, 3], [3.5, 4]])
    # Forcing a decimal point leaves "1,5" as text: never read as 15 or 1. The time column so
    # lost is refused (the samples would be timed by their row); with --dt, the text columns
    # are named in a note.
    with pytest.raises(DataError, match="column 't' is named like the time but holds '0,0'"):
        load(str(path), sep=";", decimal=".")
    pointed = load(str(path), sep=";", decimal=".", dt=0.5)
    assert pointed.variables == ("y",) and pointed.time_column is None
    assert "ignored: 't', 'x'" in _notes(pointed)
    with pytest.raises(DataError, match="fields separated by comma"):
        load(str(path), sep=",")
    with pytest.raises(UsageError, match="--sep"):
        load(str(path), sep="x")
    with pytest.raises(UsageError, match="--decimal"):
        load(str(path), decimal=";")


def test_decimal_commas_and_points_together_are_not_guessed(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x;y\n1,5;2.5\n2,5;3.5\n")
    with pytest.raises(DataError, match="give --decimal"):
        load(str(path))
    assert load(str(path), decimal=",").variables == ("x",)  # forced: "2.5" is then text, named in a note


def test_header_of_one_column_above_delimited_rows_is_an_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("t x y\n0;1;2\n1;2;3\n2;3;4\n")
    with pytest.raises(DataError, match="header is one column but the rows have 3 fields separated by semicolon"):
        load(str(path))


def test_rows_wider_than_the_header_are_an_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x,y\n1,2,3\n4,5,6\n")  # pandas would silently make the first column an index
    with pytest.raises(DataError, match="rows have up to 3 fields"):
        load(str(path))


def test_file_without_a_header_is_refused_not_read_as_names(tmp_path):
    frame = pd.DataFrame({"t": np.arange(N) * DT, "x": np.sin(np.arange(N)), "y": np.cos(np.arange(N))})
    frame.to_csv(tmp_path / "d.csv", index=False, header=False)
    frame.to_csv(tmp_path / "excel.csv", index=False, header=False, sep=";", decimal=",")
    np.savetxt(tmp_path / "saved.txt", frame.to_numpy())  # numpy's default: no header, spaces
    for name in ("d.csv", "excel.csv", "saved.txt"):
        with pytest.raises(DataError, match="the file has no header"):
            load(str(tmp_path / name))
    with pytest.raises(DataError, match="no header"):
        load("-", stdin=io.BytesIO((tmp_path / "d.csv").read_bytes()))


def test_comment_lines_above_the_header_and_np_savetxt_headers(tmp_path):
    frame = pd.DataFrame({"t": np.arange(N) * DT, "x": np.sin(np.arange(N)), "y": np.cos(np.arange(N))})
    values = frame[["x", "y"]].to_numpy()
    np.savetxt(tmp_path / "saved.csv", frame.to_numpy(), delimiter=",", header="t,x,y")  # "# t,x,y"
    np.savetxt(tmp_path / "saved.txt", frame.to_numpy(), header="t x y")
    logger = "# logger 1.2\r\n\r\n# sampled at 4 Hz\r\n" + frame.to_csv(index=False, lineterminator="\r\n")
    (tmp_path / "logger.csv").write_text(logger, newline="")
    for name, note in (("saved.csv", "comment line '# t,x,y'"), ("saved.txt", "comment line '# t x y'"),
                       ("logger.csv", "skipped 2 comment line(s)")):
        data = load(str(tmp_path / name))
        assert data.variables == ("x", "y") and data.time_column == "t", name
        assert data.dt == pytest.approx(DT, rel=1e-12)
        np.testing.assert_array_equal(data.trials[0].x, values)
        assert note in _notes(data)
    piped = load("-", stdin=io.BytesIO((tmp_path / "saved.csv").read_bytes()))
    assert piped.fingerprint() == load(str(tmp_path / "saved.csv")).fingerprint()


def test_pandas_default_integer_names_are_a_header(tmp_path):
    values = np.column_stack([np.sin(np.arange(N)), np.cos(np.arange(N))])
    pd.DataFrame(values).to_csv(tmp_path / "plain.csv", index=False)  # header "0,1"
    pd.DataFrame(values).to_csv(tmp_path / "indexed.csv")  # header ",0,1"
    for name in ("plain.csv", "indexed.csv"):
        data = load(str(tmp_path / name))
        assert data.variables == ("0", "1")
        np.testing.assert_array_equal(data.trials[0].x, values)


@pytest.mark.parametrize("clock", ["seconds", "Time_s", "index", "elapsed (ms)", "sample"])
def test_an_increasing_column_named_like_time_is_not_a_state(tmp_path, clock):
    frame = pd.DataFrame({"x": np.sin(np.arange(N)), "y": np.cos(np.arange(N))})
    frame.insert(0, clock, np.arange(N) * DT)
    frame.to_csv(tmp_path / "d.csv", index=False)
    for timed in (load(str(tmp_path / "d.csv")), load(str(tmp_path / "d.csv"), time_column=clock)):
        assert timed.variables == ("x", "y") and timed.dt == pytest.approx(DT, rel=1e-12)
        assert timed.time_column == clock
    assert any("taken as the time" in note for note in load(str(tmp_path / "d.csv")).notes)
    frame.insert(0, "t", np.arange(N) * DT)  # beside a time column it is dropped, with a note
    frame.to_csv(tmp_path / "d.csv", index=False)
    beside = load(str(tmp_path / "d.csv"))
    assert beside.variables == ("x", "y") and beside.time_column == "t"
    assert any(f"'{clock}' named like a time" in note for note in beside.notes)
    chosen = load(str(tmp_path / "d.csv"), columns=[clock, "x"])  # named, it is a state
    assert chosen.variables == (clock, "x")


def test_several_increasing_columns_named_like_time_are_refused(tmp_path):
    frame = pd.DataFrame({"index": np.arange(N), "seconds": np.arange(N) * DT, "x": np.sin(np.arange(N))})
    frame.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(DataError, match="'index', 'seconds' are named like a time"):
        load(str(tmp_path / "d.csv"))
    assert load(str(tmp_path / "d.csv"), time_column="seconds").variables == ("x",)  # the other dropped


def test_a_state_named_like_time_that_does_not_increase_is_kept(tmp_path):
    frame = pd.DataFrame({"t": np.arange(N) * DT, "step": np.sin(np.arange(N)), "x": np.cos(np.arange(N))})
    frame.to_csv(tmp_path / "d.csv", index=False)
    assert load(str(tmp_path / "d.csv")).variables == ("step", "x")


@pytest.mark.parametrize("token", ["-", "?", "n.a.", "--"])
def test_a_stray_text_cell_in_a_numeric_column_is_named_not_dropped_with_the_column(tmp_path, token):
    frame = _frame().astype(object)
    frame.loc[7, "pressure (bar)"] = token  # row 8 of the data
    frame.to_csv(tmp_path / "d.csv", index=False)
    frame.to_csv(tmp_path / "excel.csv", index=False, sep=";", decimal=",")
    for name in ("d.csv", "excel.csv"):
        with pytest.raises(DataError, match=rf"column 'pressure \(bar\)' holds numbers but '{re.escape(token)}' at row 8"):
            load(str(tmp_path / name))
        with pytest.raises(DataError, match="at row 8"):
            load(str(tmp_path / name), columns=["pressure (bar)"])
    assert load(str(tmp_path / "d.csv"), columns=["température"]).variables == ("température",)


def test_a_row_of_units_under_the_header_is_named(tmp_path):
    frame = pd.DataFrame({"t": np.arange(N) * DT, "x": np.sin(np.arange(N))})
    lines = frame.to_csv(index=False).splitlines()
    (tmp_path / "d.csv").write_text("\n".join([lines[0], "s,m", *lines[1:]]) + "\n")
    with pytest.raises(DataError, match="'s' at row 1; a row of units under the header"):
        load(str(tmp_path / "d.csv"))


def test_text_columns_are_named_in_a_note(tmp_path):
    frame = pd.DataFrame({"x": np.arange(N) * 1.0, "site": ["a"] * N, "ok": [True] * N})
    frame.to_csv(tmp_path / "d.csv", index=False)
    data = load(str(tmp_path / "d.csv"))
    assert data.variables == ("x",)
    assert "'site'" in _notes(data) and "'ok'" in _notes(data)


# --- time --------------------------------------------------------------------------------


def test_iso8601_with_z_and_offsets_gives_seconds_since_the_first_sample(tmp_path):
    # The same instants written with Z and with +01:00 (as a logger switching zones would).
    path = tmp_path / "d.csv"
    path.write_text(
        "time,x\n"
        "2024-03-31T00:59:59Z,1\n"
        "2024-03-31T02:00:00.5+01:00,2\n"
        "2024-03-31T01:00:01Z,3\n"
        "2024-03-31T03:00:01.5+02:00,4\n"
    )
    data = load(str(path))
    np.testing.assert_allclose(data.trials[0].t, [0.0, 1.5, 2.0, 2.5], rtol=0, atol=1e-12)
    assert data.time_unit == "s"
    assert data.time_origin == "2024-03-31T00:59:59Z"
    assert data.time_from_datetime
    assert "seconds since 2024-03-31T00:59:59Z" in _notes(data)


def test_pandas_datetime_index_across_daylight_saving(tmp_path):
    stamps = pd.date_range("2024-03-31 01:59:50", periods=N, freq="500ms", tz="Europe/Paris")
    frame = _frame().set_index(stamps.rename("timestamp"))
    frame.to_csv(tmp_path / "named.csv")
    frame.rename_axis(None).to_csv(tmp_path / "unnamed.csv", sep=";", decimal=",")
    for name in ("named.csv", "unnamed.csv"):
        data = load(str(tmp_path / name))
        assert data.variables == ("flow, l/s", "pressure (bar)", "température")
        assert data.dt == pytest.approx(0.5, rel=1e-12)  # not 3600.5 at the clock change
        assert data.time_origin == "2024-03-31T00:59:50Z"
        np.testing.assert_array_equal(data.trials[0].x, _values(frame))


def test_naive_datetimes_and_date_only(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("timestamp,x\n2024-01-01 00:00:00,1\n2024-01-01 00:00:10,2\n2024-01-01 00:00:20,4\n")
    data = load(str(path), time_column="timestamp")
    assert data.dt == 10.0
    assert data.time_origin == "2024-01-01T00:00:00"
    assert "no time zone" in _notes(data)
    daily = tmp_path / "daily.csv"
    daily.write_text("date,x\n2024-01-01,1\n2024-01-02,2\n2024-01-03,4\n")
    assert load(str(daily)).dt == 86400.0


def test_mixed_zoned_and_naive_times_are_refused(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("time,x\n2024-01-01T00:00:00Z,1\n2024-01-01T00:00:01,2\n")
    with pytest.raises(DataError, match="with and without a time zone"):
        load(str(path))


def test_several_datetime_columns_need_a_choice(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("start,stop,x\n2024-01-01,2024-01-02,1\n2024-01-02,2024-01-03,2\n")
    with pytest.raises(DataError, match="--time-column"):
        load(str(path))
    data = load(str(path), time_column="stop")
    assert data.dt == 86400.0
    assert "'start'" in _notes(data)  # the other date-time column is not silently a variable


def test_time_header_with_a_unit(tmp_path):
    frame = pd.DataFrame({"time (s)": np.arange(N) * DT, "x": np.arange(N) ** 2 / 3})
    frame.to_csv(tmp_path / "d.csv", index=False)
    data = load(str(tmp_path / "d.csv"))
    assert data.time_column == "time (s)" and data.variables == ("x",)
    assert data.time_unit == "s" and data.dt == pytest.approx(DT, rel=1e-12)
    assert load(str(tmp_path / "d.csv"), time_column="time").time_column == "time (s)"
    frame.rename(columns={"time (s)": "t [ms]"}).to_csv(tmp_path / "ms.csv", index=False)
    assert load(str(tmp_path / "ms.csv")).time_unit == "ms"


def test_text_time_column_is_refused(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("when,x\nmonday,1\ntuesday,2\n")
    with pytest.raises(DataError, match="neither numeric nor ISO-8601"):
        load(str(path), time_column="when")


def test_datetime_and_numeric_time_do_not_combine(tmp_path):
    (tmp_path / "a.csv").write_text("time,x\n2024-01-01T00:00:00Z,1\n2024-01-01T00:00:01Z,2\n")
    (tmp_path / "b.csv").write_text("time,x\n0,1\n1,2\n")
    with pytest.raises(DataError, match="from date-times"):
        combine([load(str(tmp_path / "a.csv")), load(str(tmp_path / "b.csv"))])


# --- pandas to_hdf and h5py layouts ---------------------------------------------------------


def _to_hdf(frame, path, **kwargs):
    pytest.importorskip("tables")  # only to write the files; dynid reads them with h5py
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTables warns about names that are not identifiers
        frame.to_hdf(path, mode="a", **kwargs)


@pytest.mark.parametrize("fmt", ["fixed", "table"])
def test_pandas_to_hdf_with_datetime_index_and_text(tmp_path, fmt):
    stamps = pd.date_range("2024-06-01T12:00:00", periods=N, freq="250ms", tz="Europe/Berlin")
    frame = _frame().set_index(stamps.rename("timestamp"))
    frame["site"] = "a"
    path = tmp_path / "d.h5"
    _to_hdf(frame, path, key="data", format=fmt)
    data = load(str(path))
    assert data.variables == ("flow, l/s", "pressure (bar)", "température")
    np.testing.assert_array_equal(data.trials[0].x, _values(frame))
    assert data.time_column == "timestamp" and data.dt == pytest.approx(DT, rel=1e-12)
    assert data.time_origin == "2024-06-01T10:00:00Z"
    assert "'site'" in _notes(data)


@pytest.mark.parametrize("fmt", ["fixed", "table"])
def test_pandas_to_hdf_default_index_and_named_time_index(tmp_path, fmt):
    frame = _frame()
    _to_hdf(frame, tmp_path / "plain.h5", key="frame", format=fmt)
    data = load(str(tmp_path / "plain.h5"), dt=DT)
    assert data.variables == ("flow, l/s", "pressure (bar)", "température")
    np.testing.assert_array_equal(data.trials[0].x, _values(frame))
    assert "pandas index column 'index' dropped" in _notes(data)
    timed = frame.set_index(pd.Index(np.arange(N) * 0.1, name="t"))
    _to_hdf(timed, tmp_path / "timed.h5", key="frame", format=fmt)
    data = load(str(tmp_path / "timed.h5"))
    assert data.time_column == "t" and data.dt == pytest.approx(0.1, rel=1e-12)


def test_pandas_fixed_format_text_column_is_named_not_read(tmp_path):
    frame = _frame()
    frame["site"] = "a"
    _to_hdf(frame, tmp_path / "d.h5", key="frame", format="fixed")
    with pytest.raises(DataError, match="'site' holds Python objects"):
        load(str(tmp_path / "d.h5"), trial_column="site")


def test_pandas_table_data_columns_and_several_keys_as_trials(tmp_path):
    path = tmp_path / "d.h5"
    frames = []
    for k in range(2):
        frame = pd.DataFrame({"x": np.arange(N) + k * 100.0, "y": np.arange(N) * 0.5}).set_index(
            pd.Index(np.arange(N) * DT, name="time")
        )
        _to_hdf(frame, path, key=f"trial{k}", format="table", data_columns=True)
        frames.append(frame)
    data = load(str(path))
    assert data.n_trials == 2 and data.variables == ("x", "y")
    for trial, frame in zip(data.trials, frames):
        np.testing.assert_array_equal(trial.x, frame.to_numpy())


def test_h5py_group_of_1d_columns_with_dt_and_t0(tmp_path):
    path = tmp_path / "d.h5"
    x = np.sin(np.arange(N) * DT)
    with h5py.File(path, "w") as handle:
        for k in range(2):
            group = handle.create_group(f"run{k}")
            group.attrs.update({"dt": DT, "t0": 10.0 * k, "time_unit": "ms"})
            group["flow, l·s⁻¹"] = x + k  # HDF5 names cannot hold '/'

            group["pressure"] = -x
            group["label"] = np.array([b"a"] * N)
    data = load(str(path))
    assert data.n_trials == 2 and data.variables == ("flow, l·s⁻¹", "pressure")
    assert data.dt == DT and data.time_unit == "ms"
    np.testing.assert_allclose(data.trials[1].t, 10.0 + np.arange(N) * DT, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(data.trials[1].x[:, 0], x + 1)
    assert "'label'" in _notes(data)


def test_dt_attribute_on_1d_column_datasets(tmp_path):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as handle:
        handle["x"] = np.sin(np.arange(N) * DT)
        handle["x"].attrs.update({"dt": DT, "t0": 2.0})
        handle["y"] = np.cos(np.arange(N) * DT)
    data = load(f"{path}:/x")  # one dataset
    assert data.variables == ("x",) and data.dt == DT and data.trials[0].t[0] == 2.0
    data = load(str(path))  # the root: columns x and y
    assert data.variables == ("x", "y") and data.dt == DT and data.trials[0].t[0] == 2.0
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as handle:
        for name, step in (("x", DT), ("y", 2 * DT)):
            handle[name] = np.arange(N) ** 0.5
            handle[name].attrs["dt"] = step
    with pytest.raises(DataError, match="different 'dt'/'t0' attributes"):
        load(str(other))
    with h5py.File(other, "a") as handle:
        handle["t"] = np.arange(N) * 0.5
    beside = load(f"{other}:/x")  # a time vector beside it
    assert beside.variables == ("x",) and beside.time_column == "t" and beside.dt == 0.5


def _h5py_meta(path):
    with h5py.File(path, "a") as handle:
        meta = handle.create_group("meta")
        meta["gain"], meta["offset"] = np.arange(3.0), np.ones(3)


def _h5py_recording(path):
    with h5py.File(path, "a") as handle:
        run = handle.create_group("run2")
        run["x"], run["y"] = np.zeros(N // 2), np.ones(N // 2)


def _pandas_recording(path):
    _to_hdf(pd.DataFrame({"x": np.zeros(N // 2), "y": np.ones(N // 2)}), path, key="run2")


def _h5py_settings(path):
    with h5py.File(path, "a") as handle:
        settings = handle.create_group("settings")
        settings.attrs.update({"rate_hz": 4.0, "operator": "kb"})
        settings["channel_names"] = np.array([b"x", b"y"])


def _h5py_filtered_copy(path):
    """The same series again in /data (a filtered copy), as a script might keep both."""
    with h5py.File(path, "a") as handle:
        data = handle.create_group("data")
        data["x"], data["y"] = 0.5 * handle["x"][()], 0.5 * handle["y"][()]


def _h5py_matrix_of_other_variables(path):
    """A 2-D dataset of other variables on the same N samples in /data."""
    with h5py.File(path, "a") as handle:
        data = handle.create_group("data")
        data["values"] = np.ones((N, 2))
        data["values"].attrs["columns"] = ["u", "v"]


def _pandas_copy(fmt):
    def write(path):
        _to_hdf(pd.DataFrame({"p": np.zeros(N), "q": np.ones(N)}), path, key="data", format=fmt)
    return write


def _root_columns(path):
    x, y = np.sin(np.arange(N) * DT), np.cos(np.arange(N) * DT)
    with h5py.File(path, "w") as handle:
        handle["x"], handle["y"] = x, y
    return np.column_stack([x, y])


@pytest.mark.parametrize("beside, group, rows", [(_h5py_meta, "/meta", 3), (_h5py_settings, "/settings", None)])
def test_root_columns_beside_a_metadata_group_are_read_and_the_group_named(tmp_path, beside, group, rows):
    """Columns written at the root (f['x'] = ...) are the data beside a group of metadata (no
    series of the same length or names), which is named in a note, not read instead."""
    path = tmp_path / "d.h5"
    expected = _root_columns(path)
    beside(path)
    data = load(str(path), dt=DT)
    assert data.variables == ("x", "y") and data.n_trials == 1 and data.n_samples == N
    np.testing.assert_array_equal(data.trials[0].x, expected)
    assert f"the group(s) {group} beside them were not read" in _notes(data)
    assert f"{path}:{group}" in _notes(data)
    if rows is not None:
        assert load(f"{path}:{group}", dt=DT).n_samples == rows  # the group, when named


@pytest.mark.parametrize("beside, group, rows", [
    (_h5py_recording, "/run2", N // 2),  # another recording of x, y
    (_pandas_recording, "/run2", N // 2),
    (_h5py_filtered_copy, "/data", N),  # the same samples again
    (_h5py_matrix_of_other_variables, "/data", N),
    (_pandas_copy("fixed"), "/data", N),
    (_pandas_copy("table"), "/data", N),
])
def test_root_columns_beside_a_group_holding_series_are_refused_naming_both(tmp_path, beside, group, rows):
    """Series at the root and series in a group (as many samples, or the same variables): the
    root's columns and the group's are equally plausible as the data, so neither is read
    silently; the error names the two selectors, and each reads its own."""
    path = tmp_path / "d.h5"
    expected = _root_columns(path)
    beside(path)
    with pytest.raises(DataError) as refused:
        load(str(path), dt=DT)
    assert f"name the one to read: {path}:/ or {path}:{group}" in str(refused.value)
    root = load(f"{path}:/", dt=DT)  # the root, named: its columns, the group said in a note
    np.testing.assert_array_equal(root.trials[0].x, expected)
    assert f"the group(s) {group} beside them were not read" in _notes(root)
    assert load(f"{path}:{group}", dt=DT).n_samples == rows


def test_cli_refuses_an_ambiguous_hdf5_layout_with_one_line(tmp_path, cli):
    path = tmp_path / "d.h5"
    _root_columns(path)
    _h5py_filtered_copy(path)
    result = cli("discover-causal", path, "--method", "granger", "--dt", str(DT))
    assert result.returncode == 3 and result.stdout == b""
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and f"{path}:/ or {path}:/data" in lines[0]


def _netcdf_placeholder_by_h5py(path, columns):
    """The layout netCDF-4 writes, made with h5py's dimension scales: the dimension 'sample'
    without a variable is a dataset of its length marked so, attached to every variable."""
    with h5py.File(path, "w") as handle:
        sample = handle.create_dataset("sample", (N,), dtype="f4")
        sample.make_scale(f"This is a netCDF dimension but not a netCDF variable. {N:9d}")
        for name, values in columns.items():
            handle[name] = values
            handle[name].dims[0].attach_scale(sample)


def _netcdf_placeholder_by_h5netcdf(path, columns):
    h5netcdf = pytest.importorskip("h5netcdf")
    with h5netcdf.File(path, "w") as handle:
        handle.dimensions = {"sample": N}
        for name, values in columns.items():
            handle.create_variable(name, ("sample",), float)[:] = values


@pytest.mark.parametrize("write", [_netcdf_placeholder_by_h5py, _netcdf_placeholder_by_h5netcdf])
def test_netcdf4_dimension_without_a_variable_is_no_column(tmp_path, write):
    """netCDF-4 (as netCDF4-python, xarray and h5netcdf write it) stores a dimension that has
    no coordinate variable as a placeholder dataset of its length: no data, not a column (it
    was read as a constant state 'sample')."""
    x, y = np.sin(np.arange(N) * DT), np.cos(np.arange(N) * DT)
    path = tmp_path / "d.h5"
    write(path, {"x": x, "y": y})
    data = load(str(path), dt=DT)
    assert data.variables == ("x", "y") and data.n_samples == N
    np.testing.assert_array_equal(data.trials[0].x, np.column_stack([x, y]))


def test_dt_attribute_on_a_2d_dataset(tmp_path):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as handle:
        ds = handle.create_dataset("data", data=np.arange(2.0 * N).reshape(N, 2))
        ds.attrs["columns"] = ["a", "b"]
        ds.attrs["dt"] = 0.01
    data = load(str(path))
    assert data.dt == 0.01 and data.trials[0].t[-1] == pytest.approx((N - 1) * 0.01)
    forced = load(str(path), dt=0.02)
    assert forced.dt == 0.02 and "overrides the file's dt attribute" in _notes(forced)


def test_2d_dataset_stored_variables_by_samples_is_refused(tmp_path):
    path = tmp_path / "d.h5"
    values = np.column_stack([np.sin(np.arange(N)), np.cos(np.arange(N)), np.arange(N) ** 0.5])
    with h5py.File(path, "w") as handle:
        handle["bare"] = values.T  # numpy's (variables, samples), as MATLAB writes too
        named = handle.create_dataset("named", data=values.T)
        named.attrs["columns"] = ["a", "b", "c"]
        handle["right"] = values
    with pytest.raises(DataError, match=r"shape \(3, 40\) would be 3 samples of 40 variables"):
        load(f"{path}:/bare")
    with pytest.raises(DataError, match="rows look like the variables: store the transpose"):
        load(f"{path}:/named")
    np.testing.assert_array_equal(load(f"{path}:/right").trials[0].x, values)


def test_iso8601_time_dataset_in_hdf5(tmp_path):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as handle:
        ds = handle.create_dataset("data", data=np.arange(6.0).reshape(3, 2))
        ds.attrs["columns"] = ["a", "b"]
        handle["time"] = np.array([b"2024-01-01T00:00:00+01:00", b"2024-01-01T00:00:02+01:00", b"2024-01-01T00:00:04+01:00"])
    data = load(str(path))
    assert data.dt == 2.0 and data.time_origin == "2023-12-31T23:00:00Z"


# --- names that need quoting ---------------------------------------------------------------


def test_quote_aware_name_lists():
    names = ["flow, l/s", 'say "hi"', "température", "p"]
    assert split_names(join_names(names)) == names
    assert split_names('"flow, l/s", pressure') == ["flow, l/s", "pressure"]
    assert split_names("a,b") == ["a", "b"]
    with pytest.raises(UsageError):
        split_names('"flow, l/s')


def test_cli_fit_forecast_score_report_keep_names_and_time(tmp_path, cli):
    stamps = pd.date_range("2024-03-31T01:59:00", periods=200, freq="100ms", tz="Europe/Paris")
    t = np.arange(200) * 0.1
    frame = pd.DataFrame({"flow, l/s": np.sin(t), "pressure (bar)": np.cos(t), "site": "a"}, index=stamps)
    data = tmp_path / "d.csv"
    frame.to_csv(data, sep=";", decimal=",")
    model = tmp_path / "m.dynid"
    fit = cli("fit", data, "--model", "dmd", "-o", model, "--json")
    assert fit.returncode == 0, fit.stderr.decode()
    result = json.loads(fit.stdout)
    assert result["variables"] == ["flow, l/s", "pressure (bar)"]
    assert result["dt"] == pytest.approx(0.1, rel=1e-9)
    stderr = fit.stderr.decode()
    assert "semicolon" in stderr and "decimal comma" in stderr and "'site'" in stderr and "seconds since" in stderr
    info = json.loads(cli("info", model, "--json").stdout)
    assert info["time_unit"] == "s" and info["time_from_datetime"] is True
    forecast = cli("forecast", model, data, "--horizon", "3")
    assert forecast.returncode == 0, forecast.stderr.decode()
    out = pd.read_csv(pd.io.common.StringIO(forecast.stdout.decode()))
    assert list(out.columns[1:]) == ["flow, l/s", "pressure (bar)"]
    np.testing.assert_allclose(out["flow, l/s"], np.sin(20.0 + 0.1 * np.arange(3)), atol=1e-6)
    chosen = cli("forecast", model, data, "--horizon", "2", "--columns", '"flow, l/s",pressure (bar)')
    assert chosen.returncode == 0, chosen.stderr.decode()
    score = cli("score", model, data, "--horizon", "5", "--json")
    assert score.returncode == 0, score.stderr.decode()
    report = cli("report", model, "--data", data, "-o", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr.decode()
    bad = cli("fit", data, "--model", "dmd", "--columns", '"flow, l/s', "-o", tmp_path / "x.dynid")
    assert bad.returncode == 2


def test_written_numbers_are_the_shortest_that_read_back_exactly(tmp_path):
    from dynid.data.writers import write_table

    t = 4.0 + np.array([1.0, 2.0]) * 0.01  # 4.01, 4.0200000000000005 as floats
    values = np.array([[0.1, 1 / 3], [-2.5e-300, np.pi]])
    write_table(str(tmp_path / "f.csv"), "t", t, ("a", "b"), values)
    lines = (tmp_path / "f.csv").read_text().splitlines()
    assert lines[1] == "4.01,0.1,0.3333333333333333"  # not 4.0099999999999998,0.10000000000000001,...
    back = load(str(tmp_path / "f.csv"))
    np.testing.assert_array_equal(back.trials[0].t, t)
    np.testing.assert_array_equal(back.trials[0].x, values)
