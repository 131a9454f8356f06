"""The shipped sample data give the known answers they were made with (sample_data/README.md)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dynid
from dynid.causal import granger
from dynid.systems import var_graph

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


@pytest.mark.parametrize("max_lag", [3, 5])
def test_granger_finds_exactly_the_sample_var_graph(max_lag):
    data = dynid.load(str(SAMPLES / "var5.csv"))
    graph = granger(data, max_lag=max_lag)
    found = {
        (data.variables.index(e.source), data.variables.index(e.target), e.lag)
        for e in graph.edges
        if e.significant
    }
    assert found == set(var_graph())


def test_sindy_recovers_lorenz_from_the_sample_file(cli):
    result = cli("symbolic", SAMPLES / "lorenz.csv", "--json")
    assert result.returncode == 0, result.stderr
    equations = {eq["lhs"]: {t["term"]: t["coefficient"] for t in eq["terms"]} for eq in json.loads(result.stdout)["equations"]}
    truth = {
        "x": {"x": -10.0, "y": 10.0},
        "y": {"x": 28.0, "y": -1.0, "x*z": -1.0},
        "z": {"z": -8.0 / 3.0, "x*y": 1.0},
    }
    for lhs, terms in truth.items():
        found = {" ".join(sorted(k.replace(" ", "*").split("*"))): v for k, v in equations[lhs].items()}
        wanted = {" ".join(sorted(k.split("*"))): v for k, v in terms.items()}
        assert set(found) == set(wanted), (lhs, found)
        for term, value in wanted.items():
            assert found[term] == pytest.approx(value, rel=0.01), (lhs, term)


def test_hdf5_trials_sample_reads_as_three_trials():
    data = dynid.load(str(SAMPLES / "vanderpol_trials.h5"))
    assert data.variables == ("x", "y")
    assert [t.n_samples for t in data.trials] == [1500, 1000, 800]
    assert data.dt == pytest.approx(0.01)


def test_forecast_with_future_inputs(cli, tmp_path):
    frame = pd.read_csv(SAMPLES / "forced_oscillator.csv")
    train, future = frame.iloc[:2500], frame.iloc[2500:]
    train.to_csv(tmp_path / "train.csv", index=False)
    future[["t", "u"]].to_csv(tmp_path / "future.csv", index=False)
    model = tmp_path / "m.dynid"
    fitted = cli("fit", tmp_path / "train.csv", "--model", "dmd", "--inputs", "u", "-o", model)
    assert fitted.returncode == 0, fitted.stderr
    missing = cli("forecast", model, tmp_path / "train.csv", "--horizon", "100")
    assert missing.returncode == 3 and b"--future-inputs" in missing.stderr
    result = cli("forecast", model, tmp_path / "train.csv", "--horizon", "100", "--future-inputs", tmp_path / "future.csv")
    assert result.returncode == 0, result.stderr
    predicted = pd.read_csv(pd.io.common.BytesIO(result.stdout))
    assert list(predicted.columns) == ["t", "x", "v"]
    truth = future[["x", "v"]].to_numpy()[:100]
    # DMDc of a linear system driven by a smooth input: the one-step discretisation error is tiny,
    # so 100 steps (one time unit) stay close to the true trajectory.
    error = np.abs(predicted[["x", "v"]].to_numpy() - truth).max()
    assert error < 0.02 * np.abs(truth).max()
