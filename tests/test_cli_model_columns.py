"""How the commands that apply models read DATA with the models' own variables: a missing
variable is named as the model's, HDF5 lists the columns it has, report gives each model its
variables, and score ranks only models of the same variables together."""

import json

import h5py
import numpy as np
import pytest

from tests.conftest import damped_rotation, write_csv


@pytest.fixture
def xyz_csv(tmp_path):
    """t, x, y, z: a damped rotation in (x, y) and z = x + y, 300 samples, dt 0.1."""
    xy = damped_rotation()
    path = tmp_path / "xyz.csv"
    write_csv(path, np.column_stack([xy, xy.sum(axis=1)]), ["x", "y", "z"], dt=0.1)
    return path


def _fit(cli, data, tmp_path, name, *args):
    model = tmp_path / f"{name}.dynid"
    result = cli("fit", data, "--model", "dmd", "-o", model, *args)
    assert result.returncode == 0, result.stderr
    return model


def _error_line(result) -> str:
    lines = [line for line in result.stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("command", [("forecast", "-n", "3"), ("score",), ("states",)])
def test_a_variable_the_model_needs_is_named_as_the_models(cli, xyz_csv, tmp_path, command):
    model = _fit(cli, xyz_csv, tmp_path, "m")
    lacking = tmp_path / "xy.csv"
    lacking.write_text("\n".join(",".join(line.split(",")[:3]) for line in xyz_csv.read_text().splitlines()))
    result = cli(command[0], model, lacking, *command[1:])
    assert result.returncode == 3
    line = _error_line(result)
    assert f"{model} needs variable 'z', which DATA lacks; its columns are: t, x, y" in line
    assert "--columns" not in line  # the user gave none


def test_a_given_columns_option_is_still_blamed(cli, xyz_csv, tmp_path):
    model = _fit(cli, xyz_csv, tmp_path, "m", "--columns", "x,y")
    result = cli("forecast", model, xyz_csv, "-n", "3", "--columns", "x,q")
    assert result.returncode == 3
    assert "--columns 'q' is not a column; columns are: t, x, y, z" in _error_line(result)


def test_hdf5_lists_the_columns_it_did_not_read(cli, xyz_csv, tmp_path):
    """HDF5 reads only the columns asked for; the error still names the others, and says
    when dynid named them itself (no 'columns' attribute)."""
    model = _fit(cli, xyz_csv, tmp_path, "m")
    values = np.loadtxt(xyz_csv, delimiter=",", skiprows=1)[:, 1:3]
    named, unnamed = tmp_path / "named.h5", tmp_path / "unnamed.h5"
    with h5py.File(named, "w") as handle:
        handle["data"] = values
        handle["data"].attrs["columns"] = ["x", "q"]
    with h5py.File(unnamed, "w") as handle:
        handle["data"] = values
    result = cli("forecast", model, named, "-n", "3", "--dt", "0.1")
    assert result.returncode == 3
    assert _error_line(result).endswith("needs variable 'y', which DATA lacks; its columns are: x, q")
    result = cli("fit", unnamed, "--model", "dmd", "--columns", "y", "--dt", "0.1")
    assert result.returncode == 3
    assert _error_line(result).endswith(
        "--columns 'y' is not a column; columns are: x0, x1 (named by dynid: "
        f"{unnamed}:/data has no 'columns' attribute)"
    )


def test_report_reads_data_with_each_models_variables(cli, xyz_csv, tmp_path):
    """A model of x, y and one of x, y, z in one report on one file: each is forecast on its
    own columns; each set of variables is compared apart (the tables' titles name them)."""
    xy = _fit(cli, xyz_csv, tmp_path, "xy", "--columns", "x,y")
    xyz = _fit(cli, xyz_csv, tmp_path, "xyz")
    xyz_again = _fit(cli, xyz_csv, tmp_path, "xyz_again")
    page_path = tmp_path / "r.html"
    result = cli("report", xy, xyz, xyz_again, "--data", xyz_csv, "-o", page_path)
    assert result.returncode == 0, result.stderr
    page = page_path.read_text()
    assert "No forecast" not in page
    sections = page.split("<h2>Model: ")[1:]
    assert [s.split("</h2>")[0] for s in sections] == [f"{m} (dmd)" for m in (xy, xyz, xyz_again)]
    assert all("forecast RMSE" in s for s in sections)
    assert page.count("<h2>Model comparison on ") == 1  # xy alone has nothing to be compared with
    assert f"<h2>Model comparison on {xyz_csv} (x, y, z)</h2>" in page
    table = page.split("<h2>Model comparison on ")[1].split("</section>")[0]
    assert f"{xyz}</td>" in table and f"{xy}</td>" not in table


def test_score_ranks_models_of_different_variables_apart(cli, xyz_csv, tmp_path):
    """NRMSE averages over the variables: a model of x alone is not ranked against models of
    x, y, z. One table (JSON: "rank") per set of variables, in the order the models were given;
    each group's figures are those of its models scored alone."""
    x_only = _fit(cli, xyz_csv, tmp_path, "x", "--columns", "x")
    xyz = _fit(cli, xyz_csv, tmp_path, "xyz")
    low_rank = tmp_path / "low_rank.dynid"
    assert cli("fit", xyz_csv, "--model", "dmd", "-p", "rank=1", "-o", low_rank).returncode == 0
    args = ("--horizon", "10", "--starts", "5", "--free-run", "0")
    result = cli("score", x_only, xyz, low_rank, xyz_csv, *args, "--json")
    assert result.returncode == 0, result.stderr
    assert "different variables: ranked apart" in result.stderr.decode()
    rows = json.loads(result.stdout)["scores"]
    assert [(r["variables"], r["rank"]) for r in rows] == [(["x"], 1), (["x", "y", "z"], 1), (["x", "y", "z"], 2)]
    assert rows[1]["nrmse"] <= rows[2]["nrmse"]
    alone = json.loads(cli("score", x_only, xyz_csv, *args, "--json").stdout)
    assert rows[0]["model"] == str(x_only) and rows[0]["nrmse"] == alone["nrmse"]
    text = cli("score", x_only, xyz, low_rank, xyz_csv, *args).stdout.decode()
    tables = text.split("\n\n")
    assert [t.splitlines()[0] for t in tables] == ["models of x:", "models of x, y, z:"]
    assert str(x_only) in tables[0] and str(xyz) in tables[1] and str(low_rank) in tables[1]
    same = cli("score", xyz, low_rank, xyz_csv, *args).stdout.decode()
    assert same.startswith("rollouts: ") and "\n\n" not in same  # one set: one table, as before


def test_a_future_inputs_file_without_the_models_input_is_named_as_such(cli, tmp_path):
    data = tmp_path / "xu.csv"
    data.write_text("t,x,u\n" + "".join(f"{k},{0.9 ** k},{k % 2}\n" for k in range(40)))
    model = _fit(cli, data, tmp_path, "m", "--inputs", "u")
    future = tmp_path / "future.csv"
    future.write_text("t,v\n40,0\n41,1\n")
    result = cli("forecast", model, data, "-n", "2", "--future-inputs", future)
    assert result.returncode == 3
    assert _error_line(result).endswith(
        f"{future}: the model's input 'u' is not a column of --future-inputs; its columns are: t, v")
