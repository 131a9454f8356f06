"""Unix details: --json honoured or refused by every command, a model file on stdin, installed
man pages with working EXAMPLES, completion of option values, date-times written back."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dynid.cli.app import app, main
from dynid.cli.manpages import EXAMPLES, command_docs, manpath_directory, page_commands, pages_directory

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [doc.name.removeprefix("dynid ") for doc in command_docs(app)[1:]]
REFUSING_JSON = {"report", "man"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small VAR data file with a date-time index (UTC, hourly) and a var model fitted on it."""
    folder = tmp_path_factory.mktemp("unix")
    rng = np.random.default_rng(0)
    x = np.zeros((200, 2))
    for k in range(1, 200):
        x[k] = np.array([[0.9, 0.1], [-0.2, 0.8]]) @ x[k - 1] + rng.normal(size=2)
    times = pd.date_range("2024-03-30T22:00:00", periods=200, freq="1h", tz="Europe/Berlin")
    data = folder / "data.csv"
    pd.DataFrame({"x": x[:, 0], "y": x[:, 1]}, index=pd.Index(times, name="time")).to_csv(data)
    plain = folder / "plain.csv"
    pd.DataFrame({"t": np.arange(200) * 0.5, "x": x[:, 0], "y": x[:, 1]}).to_csv(plain, index=False)
    model = folder / "model.dynid"
    assert main(["fit", str(data), "--model", "var", "-o", str(model), "-q"]) == 0
    latent = folder / "lds.dynid"
    assert main(["fit", str(plain), "--model", "lds", "-p", "latent=2", "-p", "max_iter=5", "-o", str(latent), "-q"]) == 0
    return {"data": data, "plain": plain, "model": model, "latent": latent, "folder": folder}


def _json_invocation(command, files):
    """Arguments that make ``command`` succeed (its --json is added by the test)."""
    data, model, folder = str(files["data"]), str(files["model"]), files["folder"]
    return {
        "fit": ["fit", data, "--model", "var", "-o", str(folder / "json.dynid")],
        "forecast": ["forecast", model, data, "-n", "3"],
        "score": ["score", model, data, "--horizon", "5", "--starts", "3"],
        "states": ["states", str(files["latent"]), str(files["plain"])],
        "symbolic": ["symbolic", str(files["plain"]), "--library", "poly1", "--ensemble", "0"],
        "discover-causal": ["discover-causal", data, "--method", "granger", "--max-lag", "1"],
        "report": ["report", model, "-o", str(folder / "r.html")],
        "simulate": ["simulate", "lorenz", "--n", "10"],
        "models": ["models"],
        "info": ["info", model],
        "man": ["man", "fit"],
    }[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_json_is_honoured_or_refused(command, files, capsys):
    args = _json_invocation(command, files) + ["--json", "-q"]
    code = main(args)
    captured = capsys.readouterr()
    if command in REFUSING_JSON:
        assert code == 2
        assert captured.out == ""
        assert captured.err.startswith("dynid: error: --json is not available here: ")
        assert main([a for a in args if a != "--json"]) == 0  # the rest of the line is valid
    else:
        assert code == 0, captured.err
        assert isinstance(json.loads(captured.out)["kind"], str)


def test_forecast_score_info_read_the_model_on_stdin(cli, files):
    model_bytes = files["model"].read_bytes()
    data = files["data"]
    from_file = cli("forecast", files["model"], data, "-n", "4")
    from_stdin = cli("forecast", "-", data, "-n", "4", input=model_bytes)
    assert from_file.returncode == from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout and len(from_file.stdout.splitlines()) == 5
    score = cli("score", "-", data, "--json", input=model_bytes)
    assert score.returncode == 0 and json.loads(score.stdout)["kind"] == "score"
    info = cli("info", "-", "--json", input=model_bytes)
    assert info.returncode == 0 and json.loads(info.stdout)["backend"] == "var"


def test_model_and_data_cannot_both_be_stdin(cli, files):
    both = cli("forecast", "-", "-", "-n", "2", input=files["model"].read_bytes())
    assert both.returncode == 2 and both.stdout == b""
    assert b"stdin ('-') can be read only once" in both.stderr
    garbage = cli("forecast", "-", files["data"], "-n", "2", input=b"t,x\n0,1\n")
    assert garbage.returncode == 3 and b"<stdin>: not a dynid model file" in garbage.stderr


def test_man_pages_are_package_data_with_examples(capsys):
    directory = pages_directory()
    assert main(["man", "--path"]) == 0
    assert capsys.readouterr().out.strip() == str(manpath_directory()) == str(directory.parent)
    assert directory.name == "man1"  # where man(1) looks for section 1 under a MANPATH entry
    assert set(page_commands()) == set(COMMANDS)
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dynid"]
    shipped = {p for pattern in package_data for p in (ROOT / "dynid").glob(pattern)}
    assert shipped == set(directory.glob("*.1")) and len(shipped) == len(COMMANDS) + 1
    for page in shipped:
        assert ".SH EXAMPLES" in page.read_text(), page.name
    assert set(EXAMPLES) == set(COMMANDS)
    assert main(["man", "forecast"]) == 0  # not a terminal: the roff source on stdout
    roff = capsys.readouterr().out
    assert roff.startswith(".TH DYNID-FORECAST 1") and roff == (directory / "dynid-forecast.1").read_text()
    assert main(["man", "no-such-command"]) == 2
    assert "no manual page for 'no-such-command'" in capsys.readouterr().err


@pytest.mark.slow
def test_man_page_examples_run(tmp_path):
    """Every EXAMPLES command, in the table's order as one session, exits 0."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for command, examples in EXAMPLES.items():
        for _, line in examples:
            if command == "man" and "MANPATH" in line:
                line = line.replace("export MANPATH=", "echo ")
            result = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path, env=env, timeout=600,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            assert result.returncode == 0, (line, result.stderr[-2000:])


def _models():
    from dynid.models import registry

    return [*registry.names(), "auto"]


def _methods():
    from dynid.causal import registry

    return registry.names()


def _systems():
    from dynid.systems.catalogue import SYSTEMS

    return [name for name in SYSTEMS if name.startswith("lo")]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("dynid fit data.csv --model ", _models),
        ("dynid discover-causal data.csv --method ", _methods),
        ("dynid simulate lo", _systems),
        ("dynid symbolic data.csv --format ", lambda: ["text", "latex", "json"]),
        ("dynid discover-causal data.csv --format ", lambda: ["json", "csv", "dot", "graphml", "text"]),
        ("dynid forecast m d --time-format ", lambda: ["iso", "seconds"]),
        ("dynid man f", lambda: ["fit", "forecast"]),
    ],
)
def test_option_values_complete(cli_subprocess, words, expected):
    # The shell calls the real program with these variables set; completion ends the process.
    env = {"_DYNID_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
    result = cli_subprocess(env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split() == expected()


def test_forecast_continues_date_times(files, capsys):
    model, data = str(files["model"]), str(files["data"])
    assert main(["forecast", model, data, "-n", "3", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The data run hourly from 2024-03-30 22:00+01:00 to 2024-04-08 06:00+02:00 (= 04:00Z; the
    # change to summer time inside is no gap), so the forecast goes on at 05:00Z.
    assert lines[0] == "time,x,y"
    assert [line.split(",")[0] for line in lines[1:]] == ["2024-04-08T05:00:00Z", "2024-04-08T06:00:00Z", "2024-04-08T07:00:00Z"]
    assert main(["forecast", model, data, "-n", "3", "-q", "--time-format", "seconds"]) == 0
    seconds = [float(line.split(",")[0]) for line in capsys.readouterr().out.splitlines()[1:]]
    assert seconds == [200 * 3600.0, 201 * 3600.0, 202 * 3600.0]
    assert main(["forecast", model, data, "-n", "2", "-q", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["t"] == ["2024-04-08T05:00:00Z", "2024-04-08T06:00:00Z"]
    assert document["time_origin"] == "2024-03-30T21:00:00Z"


def test_iso_time_column_without_zone_and_refusals(files, tmp_path, capsys):
    frame = pd.read_csv(files["plain"])
    frame["t"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(frame["t"], unit="s")
    naive = tmp_path / "naive.csv"
    frame.rename(columns={"t": "when"}).to_csv(naive, index=False, date_format="%Y-%m-%dT%H:%M:%S.%f")
    model = tmp_path / "half.dynid"
    assert main(["fit", str(naive), "--model", "var", "--time-column", "when", "-o", str(model), "-q"]) == 0
    assert main(["forecast", str(model), str(naive), "--time-column", "when", "-n", "2", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "when,x,y"
    assert [line.split(",")[0] for line in lines[1:]] == ["2024-01-01T00:01:40.000", "2024-01-01T00:01:40.500"]  # one unit per column
    assert main(["forecast", str(files["model"]), str(files["plain"]), "-n", "2", "--time-format", "iso"]) == 2
    assert "not date-times" in capsys.readouterr().err
    h5 = tmp_path / "f.h5"
    assert main(["forecast", str(model), str(naive), "--time-column", "when", "-n", "2", "-o", str(h5), "--time-format", "iso"]) == 2
    assert "HDF5" in capsys.readouterr().err and not h5.exists()


@pytest.mark.parametrize(("value", "colour"), [(None, True), ("", True), ("1", False), ("0", False)])
def test_no_color_turns_colour_off_when_set_and_not_empty(monkeypatch, value, colour):
    from dynid.cli import output

    monkeypatch.setattr(output.sys.stderr, "isatty", lambda: True, raising=False)
    if value is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", value)
    assert output.stderr_is_tty() is colour
