"""A model fitted on time in one unit is applied only to data whose time is in that unit.

The model's step check compares numbers: a model fitted on ``time (ms)`` at dt = 20 took a file
with ``time (s)`` 20 apart (a step 1000 times longer) and scored, forecast and reported it with
exit 0; and refused the same physical step written as 0.02 s with advice to resample onto 20 s.
Both units stated and different is now bad input (exit 3, one line naming both)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import damped_rotation, run_cli_in_process

DT_MS = 20.0


def write(path, time_header: str, step: float, n: int = 200):
    frame = pd.DataFrame(damped_rotation(n), columns=["a", "b"])
    frame.insert(0, time_header, np.arange(n) * step)
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("units")
    write(folder / "train_ms.csv", "time (ms)", DT_MS)
    model = folder / "var.dynid"
    fitted = run_cli_in_process("fit", folder / "train_ms.csv", "--model", "var", "-p", "order=1", "-o", model, "-q")
    assert fitted.returncode == 0, fitted.stderr
    return folder, model


@pytest.mark.parametrize("header, step", [("time (s)", DT_MS), ("time [s]", DT_MS / 1000)])
@pytest.mark.parametrize("command", [["score", "--free-run", "0", "--horizon", "5"], ["forecast", "--horizon", "3"]])
def test_data_in_another_time_unit_is_refused(cli, files, header, step, command):
    folder, model = files
    data = write(folder / "other.csv", header, step)
    result = cli(command[0], model, data, *command[1:])
    assert result.returncode == 3, result.stdout
    assert result.stdout == b""
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "time is in s" in lines[0] and "fitted on time in ms" in lines[0]


@pytest.mark.parametrize("header", ["time (ms)", "t", "time [msec]", "Time (milliseconds)"])
def test_data_in_the_same_or_an_unstated_unit_are_scored(cli, files, header):
    folder, model = files
    data = write(folder / "same.csv", header, DT_MS)
    result = cli("score", model, data, "--free-run", "0", "--horizon", "5", "--json")
    assert result.returncode == 0, result.stderr


def test_spellings_of_one_unit_are_one_unit():
    from dynid.data.times import same_time_unit

    assert same_time_unit("s", "sec") and same_time_unit("Seconds", " s ")
    assert same_time_unit("ms", "msec") and same_time_unit("\u00b5s", "us")
    assert same_time_unit("h", "hours") and same_time_unit("frames", "Frames")
    assert not same_time_unit("s", "ms") and not same_time_unit("min", "s")
    assert not same_time_unit("frames", "s") and not same_time_unit("d", "h")
