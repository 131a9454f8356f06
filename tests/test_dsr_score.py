"""``dynid score``'s DSR measures: D_stsp and D_H of a long free run, and --estimate-lyapunov."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid import api
from dynid.data.dataset import Dataset
from dynid.modelfile import load_model
from dynid.models.sindy import SINDy, SINDyParams
from dynid.systems import simulate

from conftest import write_csv

N = 3000


@pytest.fixture(scope="module")
def lorenz_models(tmp_path_factory):
    """A Lorenz CSV (dt 0.01, 3000 samples) and ngrc and dmd models fitted to it."""
    from conftest import run_cli_in_process

    folder = tmp_path_factory.mktemp("dsr")
    sim = simulate("lorenz", n=N, dt=0.01)
    data = write_csv(folder / "lorenz.csv", sim.x, sim.variables, dt=0.01)
    models = {}
    for name in ("ngrc", "dmd"):
        models[name] = folder / f"{name}.dynid"
        fitted = run_cli_in_process("fit", data, "--model", name, "--seed", "0", "-o", models[name])
        assert fitted.returncode == 0, fitted.stderr
    return data, models


def test_free_run_measures_tell_a_chaotic_model_from_a_linear_one(cli, lorenz_models):
    data, models = lorenz_models
    result = cli("score", models["ngrc"], models["dmd"], data, "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["backend"]: row for row in json.loads(result.stdout)["scores"]}
    ngrc, dmd = rows["ngrc"], rows["dmd"]
    assert ngrc["free_run_steps"] == dmd["free_run_steps"] == 10_000  # max(3000, 10000)
    assert ngrc["free_run_diverged_step"] is None
    # The linear model's free run spirals into a point: nothing like the attractor.
    assert dmd["d_stsp"] > 5 * ngrc["d_stsp"]
    assert dmd["d_h"] > 2 * ngrc["d_h"]
    # 10,000 free-run samples against 3,000 of data: far from the 50k floor, but on the attractor.
    assert ngrc["d_stsp"] < 2.0 and ngrc["d_h"] < 0.15
    table = cli("score", models["ngrc"], models["dmd"], data, "--free-run", "3000").stdout.decode()
    header = table.splitlines()[1].split()
    assert header[-3:] == ["d_stsp", "d_h", "diverged"]


def test_free_run_length_is_an_option(cli, lorenz_models):
    data, models = lorenz_models
    longer = json.loads(cli("score", models["ngrc"], data, "--free-run", "12000", "--json").stdout)
    assert longer["free_run_steps"] == 12_000 and longer["d_stsp"] is not None
    none = json.loads(cli("score", models["ngrc"], data, "--free-run", "0", "--json").stdout)
    assert "d_stsp" not in none and "free_run_steps" not in none


def test_estimate_lyapunov_reports_the_spectrum_and_vpt_in_lyapunov_times(cli, lorenz_models):
    data, models = lorenz_models
    args = ("score", models["ngrc"], data, "--estimate-lyapunov", "--lyapunov-steps", "2000",
            "--free-run", "0")
    document = json.loads(cli(*args, "--json").stdout)
    exponents = document["lyapunov_exponents"]
    assert len(exponents) == 3 and len(document["lyapunov_standard_error"]) == 3
    assert exponents == sorted(exponents, reverse=True)
    assert exponents[0] == pytest.approx(0.9056, rel=0.25)  # a short orbit: a rough estimate
    # ngrc's state is every variable over the delay span its fit chose ((k - 1) s + 1 samples)
    assert document["lyapunov_state_dimension"] == 3 * load_model(str(models["ngrc"])).model.history_length
    assert document["lyapunov_orbit_time"] == pytest.approx(20.0)
    assert document["valid_prediction_time_lyapunov"] == pytest.approx(
        document["valid_prediction_time"] * exponents[0])
    # A given exponent wins over the estimate for VPT in Lyapunov times.
    text = cli(*args, "--lyapunov", "1.0").stdout.decode().splitlines()
    assert any(line.startswith("Lyapunov exponents (1/time):") and "Kaplan-Yorke" in line
               for line in text)
    def value(prefix: str) -> tuple[str, float]:
        """The '>=' mark (censored) and the number of the text line starting with prefix."""
        mark, _, number = next(line for line in text if line.startswith(prefix)).removeprefix(
            prefix).strip().rpartition(" ")
        return mark, float(number)

    time_units = value("valid prediction time:")
    lyapunov_times = value("valid prediction time (Lyapunov times):")
    assert lyapunov_times[0] == time_units[0]
    assert lyapunov_times[1] == pytest.approx(time_units[1], rel=1e-3)


def test_a_diverging_free_run_has_no_measures():
    # dx/dt = x^2 leaves every bound within 100 steps of 0.01 from x = 1.
    model = SINDy.restore(
        SINDyParams(degree=2),
        {"coefficients": np.array([[0.0, 0.0, 1.0]]),
         "feature_names": np.array([b"1", b"x0", b"x0^2"])},
        variables=("x",), inputs=(), dt=0.01,
    )
    t = 0.01 * np.arange(500)
    data = Dataset.from_arrays((1.0 / (1.0 + t))[:, None], t=t, variables=["x"])
    scores = api.score(model, data, horizon=20, starts=3, free_run=1000)
    assert scores["d_stsp"] is None and scores["d_h"] is None
    assert 1 <= scores["free_run_diverged_step"] <= 100


def test_estimate_lyapunov_refuses_a_model_with_inputs(cli, tmp_path):
    sim = simulate("forced-oscillator", n=400)
    path = write_csv(tmp_path / "forced.csv", np.hstack([sim.x, sim.u]), ["x", "v", "u"], dt=0.01)
    model = tmp_path / "m.dynid"
    assert cli("fit", path, "--inputs", "u", "--model", "dmd", "-o", model).returncode == 0
    result = cli("score", model, path, "--inputs", "u", "--estimate-lyapunov", "--free-run", "0")
    assert result.returncode == 2
    assert b"autonomous" in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_free_run_of_a_driven_model_goes_as_far_as_the_data_inputs():
    """dmd with inputs is near exact on the forced oscillator (x' = v, v' = -4x - 0.2v + u);
    its free run past the data's inputs would hold the last input, another system than the
    data's: by default it stops where the first trial's inputs end (n - 1 steps), and its
    D_stsp is then that of a near-exact run, not of 10,000 mostly undriven steps."""
    sim = simulate("forced-oscillator", n=1500)
    data = Dataset.from_arrays(sim.x, t=sim.t, variables=list(sim.variables), u=sim.u,
                               inputs=list(sim.inputs))
    model = api.fit(data, "dmd", seed=0).model
    found = api.score(model, data, horizon=20, starts=3)
    assert found["free_run_steps"] == 1499 and found["free_run_diverged_step"] is None
    assert found["d_stsp"] < 0.3
    held = api.score(model, data, horizon=20, starts=3, free_run=10_000)
    assert held["d_stsp"] > 3 * found["d_stsp"]


@pytest.mark.parametrize("exponent", ["-0.9", "0", "nan", "inf"])
def test_lyapunov_must_be_a_positive_exponent(cli, tmp_path, exponent):
    """VPT in Lyapunov times is VPT x the largest exponent: a zero, negative or non-finite one
    gives 0, a negative time or nan, never a measure; refused as bad usage."""
    sim = simulate("linear", n=300)
    path = write_csv(tmp_path / "lin.csv", sim.x, list(sim.variables), dt=0.02)
    model = tmp_path / "m.dynid"
    assert cli("fit", path, "--model", "dmd", "-o", model).returncode == 0
    result = cli("score", model, path, "--free-run", "0", "--lyapunov", exponent)
    assert result.returncode == 2 and result.stdout == b""
    assert b"--lyapunov" in result.stderr and b"positive" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert cli("score", model, path, "--free-run", "0", "--lyapunov", "0.5").returncode == 0


def test_d_h_is_undefined_on_data_too_short_for_resolved_spectra(cli, tmp_path):
    """D_H smooths spectra by 20 frequency bins (a kernel of 161): on fewer than 320 samples it
    spans the whole grid and any model reads near 0. Score gives null there, said as
    "undefined" (not "diverged": the run did not diverge), and a number from 320 on."""
    sim = simulate("linear", n=400)
    model = tmp_path / "m.dynid"
    long = write_csv(tmp_path / "long.csv", sim.x, list(sim.variables), dt=sim.t[1])
    assert cli("fit", long, "--model", "dmd", "-o", model).returncode == 0
    short = write_csv(tmp_path / "short.csv", sim.x[:319], list(sim.variables), dt=sim.t[1])
    found = json.loads(cli("score", model, short, "--free-run", "2000", "--json").stdout)
    assert found["d_h"] is None and found["d_stsp"] is not None and found["free_run_diverged_step"] is None
    text = cli("score", model, short, "--free-run", "2000").stdout.decode()
    assert "d_h undefined" in text and "diverged" not in text
    assert json.loads(cli("score", model, long, "--free-run", "2000", "--json").stdout)["d_h"] is not None
