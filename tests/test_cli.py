"""End-to-end CLI runs: streams, exit codes, no partial files - in process (``cli``), plus a few
in real subprocesses (``cli_subprocess``): a pipe, start-up, a broken pipe, an exit code."""

import json

import h5py
import numpy as np
import pandas as pd
import pytest


def _lines(stream: bytes) -> list[str]:
    return [line for line in stream.decode().splitlines() if line.strip()]


def test_version_and_help(cli):
    result = cli("--version")
    assert result.returncode == 0 and result.stdout.decode().startswith("dynid ")
    result = cli("--help")
    assert result.returncode == 0
    for command in ("fit", "forecast", "score", "symbolic", "discover-causal", "report", "simulate", "models", "info"):
        assert command in result.stdout.decode()


def test_unknown_command_is_a_usage_error(cli_subprocess):
    result = cli_subprocess("no-such-command")
    assert result.returncode == 2
    assert len(_lines(result.stderr)) == 1


def test_help_does_not_import_heavy_libraries():
    import subprocess
    import sys

    probe = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dynid", "--help"], capture_output=True, text=True
    )
    assert probe.returncode == 0
    imported = {line.split("|")[-1].strip() for line in probe.stderr.splitlines()}
    for heavy in ("torch", "pysindy", "pandas", "h5py", "scipy", "numpy"):
        assert heavy not in imported, heavy


def test_pipe_simulate_into_fit(cli, cli_subprocess, tmp_path):
    simulated = cli_subprocess("simulate", "lorenz", "--n", "5000")
    assert simulated.returncode == 0, simulated.stderr
    header = simulated.stdout.decode().splitlines()[0]
    assert header == "t,x,y,z"
    model = tmp_path / "m.dynid"
    fitted = cli_subprocess("fit", "-", "--model", "sindy", "-o", model, "--json", input=simulated.stdout)
    assert fitted.returncode == 0, fitted.stderr
    document = json.loads(fitted.stdout)
    for key in ("model_path", "model", "hyperparameters", "variables", "inputs", "dt", "n_trials", "n_samples", "metrics", "fit_seconds"):
        assert key in document
    assert document["variables"] == ["x", "y", "z"]
    assert document["n_samples"] == 5000
    assert model.exists()
    info = cli("info", model, "--json")
    assert info.returncode == 0
    meta = json.loads(info.stdout)
    assert meta["backend"] == "sindy" and len(meta["data_fingerprint"]) == 64


def test_a_reader_that_leaves_early_is_not_an_error(tmp_path):
    # `dynid simulate ... | head -1`: the closed pipe ends the command quietly with exit 0.
    import subprocess
    import sys

    producer = subprocess.Popen(
        [sys.executable, "-m", "dynid", "simulate", "var", "--n", "50000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert producer.stdout.readline().decode().startswith("t,x0,")
    producer.stdout.close()
    stderr = producer.stderr.read()
    assert producer.wait(timeout=300) == 0, stderr
    assert b"Traceback" not in stderr and b"Error" not in stderr


def test_fit_forecast_save_load_bit_identical(cli, linear_csv, tmp_path):
    model = tmp_path / "m.dynid"
    assert cli("fit", linear_csv, "--model", "dmd", "-o", model, "-q").returncode == 0
    first = cli("forecast", model, linear_csv, "--horizon", "25")
    second = cli("forecast", model, linear_csv, "--horizon", "25")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    table = pd.read_csv(pd.io.common.BytesIO(first.stdout))
    assert list(table.columns) == ["t", "p", "q"]
    assert len(table) == 25
    assert table["t"].iloc[0] == pytest.approx(30.0)

    # The same model in memory (never saved) forecasts the same bits.
    import dynid

    data = dynid.load(str(linear_csv))
    fitted = dynid.fit(data, "dmd")
    direct = dynid.forecast(fitted.model, data, 25)
    np.testing.assert_array_equal(direct.x, table[["p", "q"]].to_numpy())


def test_forecast_to_hdf5_reads_back(cli, linear_csv, tmp_path):
    model = tmp_path / "m.dynid"
    cli("fit", linear_csv, "--model", "dmd", "-o", model)
    out = tmp_path / "f.h5"
    result = cli("forecast", model, linear_csv, "--horizon", "10", "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    import dynid

    back = dynid.load(str(out))
    assert back.variables == ("p", "q") and back.n_samples == 10


def test_score_json(cli, linear_csv, tmp_path):
    model = tmp_path / "m.dynid"
    cli("fit", linear_csv, "--model", "dmd", "-o", model)
    result = cli("score", model, linear_csv, "--horizon", "20", "--starts", "5", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["horizon"] == 20 and document["starts"] == 5
    assert document["rmse"] < 1e-8  # noise-free linear data: DMD is exact
    assert document["valid_prediction_time"] == pytest.approx(20 * 0.1)


def test_models_lists_every_backend(cli):
    result = cli("models", "--json")
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert document["kind"] == "models"
    entries = {entry["name"]: entry for entry in document["models"]}
    assert {"dmd", "var", "sindy"} <= set(entries)
    for entry in entries.values():
        assert entry["hyperparameters"], entry["name"]
        assert all(field["doc"] for field in entry["hyperparameters"])


def test_simulate_is_deterministic_and_lists(cli):
    a = cli("simulate", "rossler", "--n", "100", "--noise", "0.01", "--seed", "3")
    b = cli("simulate", "rossler", "--n", "100", "--noise", "0.01", "--seed", "3")
    assert a.returncode == 0 and a.stdout == b.stdout
    listing = cli("simulate", "--list")
    for name in ("lorenz", "rossler", "vanderpol", "lotka-volterra", "duffing", "lorenz96", "linear"):
        assert name in listing.stdout.decode()


def test_symbolic_json_is_sympy_parseable(cli, tmp_path):
    data = cli("simulate", "lorenz", "--n", "5000", "--dt", "0.002").stdout
    result = cli("symbolic", "-", "--json", input=data)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    import sympy

    assert [eq["lhs"] for eq in document["equations"]] == ["x", "y", "z"]
    rhs = sympy.sympify(document["equations"][0]["rhs"])
    assert rhs.free_symbols == {sympy.Symbol("x"), sympy.Symbol("y")}


def test_discover_causal_formats(cli, tmp_path):
    data = cli("simulate", "var", "--n", "2000", "--seed", "1").stdout
    result = cli("discover-causal", "-", "--max-lag", "2", "--json", input=data)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    for key in ("variables", "method", "max_lag", "alpha", "edges", "score_matrix", "adjacency"):
        assert key in document
    dot = cli("discover-causal", "-", "--max-lag", "2", "--format", "dot", input=data)
    assert dot.stdout.decode().lstrip().startswith("digraph")


def test_report_is_written(cli, linear_csv, tmp_path):
    model = tmp_path / "m.dynid"
    cli("fit", linear_csv, "--model", "dmd", "-o", model)
    report = tmp_path / "r.html"
    result = cli("report", model, "--data", linear_csv, "-o", report)
    assert result.returncode == 0, result.stderr
    text = report.read_text()
    assert "<svg" in text and "<script" not in text


# ---- bad input: the contract's exit code, one line naming the culprit, no output file -------

BAD_MODEL_FILES = {
    "truncated": lambda good: good.read_bytes()[: len(good.read_bytes()) // 2],
    "foreign": lambda good: b"\x89HDF\r\n\x1a\n" + b"\0" * 100,
    "text": lambda good: b"hello, I am not a model\n",
}


@pytest.mark.parametrize("kind", sorted(BAD_MODEL_FILES))
def test_bad_model_files_exit_3(cli, linear_csv, tmp_path, kind):
    good = tmp_path / "good.dynid"
    cli("fit", linear_csv, "--model", "dmd", "-o", good)
    bad = tmp_path / f"{kind}.dynid"
    bad.write_bytes(BAD_MODEL_FILES[kind](good))
    out = tmp_path / "f.csv"
    result = cli("forecast", bad, linear_csv, "--horizon", "5", "-o", out)
    assert result.returncode == 3, result.stderr
    lines = _lines(result.stderr)
    assert len(lines) == 1 and str(bad) in lines[0]
    assert not out.exists()


def test_tampered_model_file_exit_3(cli, linear_csv, tmp_path):
    model = tmp_path / "m.dynid"
    cli("fit", linear_csv, "--model", "dmd", "-o", model)
    with h5py.File(model, "r+") as handle:
        name = next(iter(handle["arrays"]))
        data = handle["arrays"][name]
        values = data[()]
        values.flat[0] = values.flat[0] + 1
        data[...] = values
    result = cli("info", model)
    assert result.returncode == 3
    assert "checksum" in result.stderr.decode()


def _bad_cases(tmp_path, good):
    (tmp_path / "text.csv").write_text("t,x,label\n0,1,a\n1,2,b\n2,3,c\n")
    (tmp_path / "nan.csv").write_text("t,x\n0,1\n1,\n2,3\n3,4\n")
    (tmp_path / "dup.csv").write_text("t,x\n0,1\n1,2\n1,3\n2,4\n")
    (tmp_path / "dec.csv").write_text("t,x\n0,1\n2,2\n1,3\n3,4\n")
    (tmp_path / "short.csv").write_text("t,x\n0,1\n")
    (tmp_path / "empty.csv").write_text("")
    return [
        (["fit", tmp_path / "missing.csv", "--model", "dmd"], 3, "missing.csv"),
        (["fit", good, "--model", "dmd", "--columns", "nope"], 3, "nope"),
        (["fit", tmp_path / "text.csv", "--model", "dmd", "--columns", "label"], 3, "label"),
        (["fit", tmp_path / "nan.csv", "--model", "dmd", "--nan", "error"], 3, "'x'"),
        (["fit", tmp_path / "dup.csv", "--model", "dmd"], 3, "duplicate"),
        (["fit", tmp_path / "dec.csv", "--model", "dmd"], 3, "decreasing"),
        (["fit", tmp_path / "short.csv", "--model", "var"], 3, "short.csv"),
        (["fit", tmp_path / "empty.csv", "--model", "dmd"], 3, "empty.csv"),
        (["fit", good, "--model", "dmd", "-p", "rank=zero"], 2, "rank"),
        (["fit", good, "--model", "nosuchmodel"], 2, "nosuchmodel"),
        (["fit", good, "--model", "dmd", "--no-such-option"], 2, "--no-such-option"),
        (["fit", good, "--model", "dmd", "--nan", "sometimes"], 2, "--nan"),
        (["fit", good, "--model", "dmd", "--device", "tpu"], 2, "--device"),
    ]


def test_bad_input_exit_codes_and_no_output(cli, linear_csv, tmp_path):
    for args, code, culprit in _bad_cases(tmp_path, linear_csv):
        out = tmp_path / "out.dynid"
        result = cli(*args, "-o", out)
        lines = _lines(result.stderr)
        assert result.returncode == code, (args, result.stderr)
        assert len(lines) == 1, (args, lines)
        assert culprit in lines[0], (args, lines)
        assert "Traceback" not in lines[0]
        assert not out.exists(), args
        assert not list(tmp_path.glob(".out.dynid.*")), args


def test_verbose_shows_traceback(cli, tmp_path):
    result = cli("fit", tmp_path / "missing.csv", "--model", "dmd", "-v")
    assert result.returncode == 3
    assert "Traceback" in result.stderr.decode()




def test_inputs_to_a_backend_without_inputs_is_a_usage_error(cli, tmp_path):
    """--inputs with such a --model is a wrong combination of options (exit 2, as the
    contract's "bad usage"), refused before DATA is read: a missing file is not the error."""
    data = tmp_path / "xu.csv"
    data.write_text("t,x,u\n" + "".join(f"{k},{np.sin(k)},{k % 2}\n" for k in range(40)))
    for path in (data, tmp_path / "absent.csv"):
        result = cli("fit", path, "--model", "edm", "--inputs", "u", "-o", tmp_path / "m.dynid")
        assert result.returncode == 2
        assert _lines(result.stderr) == ["dynid: error: the edm backend does not take inputs; drop --inputs"]
    assert not (tmp_path / "m.dynid").exists()
