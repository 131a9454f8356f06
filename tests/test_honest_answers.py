"""No wrong number with exit 0: step mismatches, diverged rollouts, empty fits, closed pipes,
unwritable outputs - each said plainly with its exit code (issue: real files, honest answers)."""

import io
import json

import numpy as np
import pandas as pd
import pytest

from dynid import api
from dynid.data import Dataset
from dynid.errors import DataError, Diverged
from dynid.models.sindy import SINDy, SINDyParams


def decay_csv(path, dt=0.01, n=400, jitter=0.0):
    """x(t) = exp(-t) written by pandas, optionally with jittered (irregular) times."""
    t = np.arange(n) * dt
    if jitter:
        t = t + np.random.default_rng(0).uniform(0, jitter * dt, n)
    pd.DataFrame({"t": t, "x": np.exp(-t)}).to_csv(path, index=False)
    return path


def fitted_decay(tmp_path, cli):
    data = decay_csv(tmp_path / "decay.csv")
    model = tmp_path / "decay.dynid"
    assert cli("fit", data, "--model", "sindy", "-o", model, "-q").returncode == 0
    return model


def blowing_up_model() -> SINDy:
    """dx/dt = x^2 (from x0 = 1 it leaves every bound at t = 1): a model of the decay data
    that diverges within 100 steps of 0.01 from any start with x near 1."""
    params = SINDyParams(degree=2)
    coefficients = np.array([[0.0, 0.0, 1.0]])
    arrays = {"coefficients": coefficients, "feature_names": np.array([b"1", b"x0", b"x0^2"])}
    return SINDy.restore(params, arrays, variables=("x",), inputs=(), dt=0.01)


def test_score_refuses_data_at_another_step(tmp_path, cli):
    model = fitted_decay(tmp_path, cli)
    coarse = decay_csv(tmp_path / "coarse.csv", dt=0.05)
    result = cli("score", model, coarse, "--json")
    assert result.returncode == 3
    assert b"0.05 apart" in result.stderr and b"--resample 0.01" in result.stderr
    assert result.stdout == b""


def test_score_refuses_irregular_data(tmp_path, cli):
    model = fitted_decay(tmp_path, cli)
    irregular = decay_csv(tmp_path / "irregular.csv", jitter=0.5)
    result = cli("score", model, irregular)
    assert result.returncode == 3
    assert b"irregular" in result.stderr and b"--resample" in result.stderr


def test_report_refuses_data_at_another_step_and_writes_nothing(tmp_path, cli):
    model = fitted_decay(tmp_path, cli)
    coarse = decay_csv(tmp_path / "coarse.csv", dt=0.05)
    page = tmp_path / "report.html"
    result = cli("report", model, "--data", coarse, "-o", page)
    assert result.returncode == 3
    assert not page.exists()


def test_forecast_of_a_lagged_model_refuses_another_step(tmp_path, cli):
    x = np.random.default_rng(1).standard_normal((300, 2)).cumsum(axis=0) * 0.1
    fine = tmp_path / "fine.csv"
    pd.DataFrame({"t": np.arange(300) * 0.1, "a": x[:, 0], "b": x[:, 1]}).to_csv(fine, index=False)
    coarse = tmp_path / "coarse.csv"
    pd.DataFrame({"t": np.arange(300) * 0.3, "a": x[:, 0], "b": x[:, 1]}).to_csv(coarse, index=False)
    model = tmp_path / "var.dynid"
    assert cli("fit", fine, "--model", "var", "-p", "order=3", "-o", model, "-q").returncode == 0
    result = cli("forecast", model, coarse, "--horizon", "5")
    assert result.returncode == 3
    assert b"--resample 0.1" in result.stderr


def test_forecast_from_too_short_a_history_names_the_file_and_its_length(tmp_path, cli):
    """A VAR(3) forecasts from 3 samples; a history whose last stretch without missing values
    has 2 (a gap two rows before its end) is refused naming the file and what it has."""
    x = np.random.default_rng(1).standard_normal((100, 2)).cumsum(axis=0) * 0.1
    data = tmp_path / "d.csv"
    pd.DataFrame({"t": np.arange(100) * 0.1, "a": x[:, 0], "b": x[:, 1]}).to_csv(data, index=False)
    model = tmp_path / "var.dynid"
    assert cli("fit", data, "--model", "var", "-p", "order=3", "-o", model, "-q").returncode == 0
    x[-3, 0] = np.nan
    gappy = tmp_path / "gappy.csv"
    pd.DataFrame({"t": np.arange(100) * 0.1, "a": x[:, 0], "b": x[:, 1]}).to_csv(gappy, index=False)
    result = cli("forecast", model, gappy, "--horizon", "5")
    assert result.returncode == 3 and result.stdout == b""
    assert (b"gappy.csv: the var model forecasts from the last 3 samples; the last trial (or stretch "
            b"without missing values) has 2") in result.stderr


def test_score_reports_diverged_rollouts_instead_of_a_number():
    t = np.arange(400) * 0.01
    data = Dataset.from_arrays(np.exp(-t)[:, None] + 1.0, t=t, variables=["x"])
    result = api.score(blowing_up_model(), data, horizon=150, starts=5)
    assert result["diverged_rollouts"] == 5
    # x = 1/(1/x0 - t): from x0 in [1.02, 2] the blow-up time lies between 0.5 and 0.98.
    assert 50 <= result["first_divergence_step"] <= 99
    assert result["rmse"] is None and result["nrmse"] is None
    assert result["rmse_per_step"][0] is not None and result["rmse_per_step"][-1] is None
    json.dumps(result, allow_nan=False)  # the document stays valid JSON


def test_forecast_that_diverges_fails_with_the_step():
    t = np.arange(50) * 0.01
    data = Dataset.from_arrays(np.ones((50, 1)), t=t, variables=["x"])
    with pytest.raises(Diverged) as caught:
        api.forecast(blowing_up_model(), data, horizon=200)
    # From x0 = 1 the solution 1/(1 - t) leaves the bound just before t = 1, i.e. step 100.
    assert 95 <= caught.value.step <= 100
    assert "diverged" in str(caught.value)


def growing_lds():
    """A one-state linear-Gaussian model z' = 1.5 z + noise, x = z: its mean overflows after
    about 1750 steps (1.5**1750 > 1.8e308), its variance (1.5**2 per step) after about 875."""
    from dynid.models.latent.lds import LDS, LDSParams

    one = np.ones((1, 1))
    arrays = {
        "A": 1.5 * one, "B": np.zeros((1, 0)), "Q": 0.01 * one, "C": one, "D": np.zeros((1, 0)),
        "offset": np.zeros(1), "R": np.full(1, 0.01), "initial_mean": np.zeros(1), "initial_cov": one,
        "eigenvalues": np.array([1.5 + 0j]), "continuous_eigenvalues": np.array([np.log(1.5) / 0.01 + 0j]),
        "log_likelihood": np.zeros(1),
    }
    return LDS.restore(LDSParams(latent="1"), arrays, variables=("x",), inputs=(), dt=0.01)


@pytest.mark.parametrize("options", [{"interval": 0.9}, {"sample": True, "seed": 1}])
def test_forecast_interval_or_sample_that_diverges_fails_with_the_step(options):
    t = np.arange(50) * 0.01
    data = Dataset.from_arrays(np.ones((50, 1)), t=t, variables=["x"])
    with np.errstate(over="ignore", invalid="ignore"):
        with pytest.raises(Diverged) as caught:
            api.forecast(growing_lds(), data, horizon=3000, **options)
        assert 800 <= caught.value.step <= 1800
        assert "diverged" in str(caught.value)
        finite = api.forecast(growing_lds(), data, horizon=100, **options)
    assert np.isfinite(finite.x).all()


def test_valid_prediction_time_censored_at_the_horizon(tmp_path, cli):
    model = fitted_decay(tmp_path, cli)
    data = decay_csv(tmp_path / "again.csv")
    doc = json.loads(cli("score", model, data, "--horizon", "20", "--json").stdout)
    assert doc["valid_prediction_time_censored"] is True
    assert doc["censored_rollouts"] == doc["starts"]
    assert doc["diverged_rollouts"] == 0 and doc["rmse"] < 1e-4
    text = cli("score", model, data, "--horizon", "20").stdout.decode()
    assert "valid prediction time: >= 0.2" in text


def test_fit_with_no_active_terms_exits_1_and_q_silences_library_warnings(tmp_path, cli):
    data = decay_csv(tmp_path / "decay.csv")
    out = tmp_path / "empty.dynid"
    loud = cli("fit", data, "--model", "sindy", "-p", "threshold=1000", "-o", out)
    assert loud.returncode == 1
    assert b"kept no terms" in loud.stderr and b"dynid: warning:" in loud.stderr
    assert not out.exists()
    quiet = cli("fit", data, "--model", "sindy", "-p", "threshold=1000", "-o", out, "-q")
    assert quiet.returncode == 1
    assert quiet.stderr.decode().splitlines() == [
        line for line in quiet.stderr.decode().splitlines() if line.startswith("dynid: error:")
    ]


def test_unwritable_output_is_a_clear_error(tmp_path, cli):
    data = decay_csv(tmp_path / "decay.csv")
    result = cli("fit", data, "--model", "sindy", "-o", "/proc/x.dynid")
    assert result.returncode == 3
    lines = result.stderr.decode().strip().splitlines()
    assert lines == [lines[0]] and "cannot write" in lines[0] and "internal" not in lines[0]


def test_step_check_tolerates_rounded_timestamps_only():
    model = blowing_up_model()
    t = np.round(np.arange(100) * 0.01, 6) + 1e-7
    data = Dataset.from_arrays(np.ones((100, 1)), t=t, variables=["x"])
    api.check_step(model, data)
    off = Dataset.from_arrays(np.ones((100, 1)), t=np.arange(100) * 0.0101, variables=["x"])
    with pytest.raises(DataError):
        api.check_step(model, off)


def test_maps_and_odes_get_their_own_notation_with_chosen_precision(tmp_path, cli):
    maps = tmp_path / "maps.csv"
    maps.write_bytes(cli("simulate", "logistic-coupled", "--n", "400").stdout)
    model = tmp_path / "map.dynid"
    assert cli("fit", maps, "--model", "sindy", "-p", "discrete=true", "-p", "threshold=0.05",
               "-o", model, "-q").returncode == 0
    text = cli("info", model).stdout.decode()
    assert "x[k+1] = " in text and "y[k+1] = " in text and "/dt" not in text
    # r_x = 3.8: x[k+1] = 3.8 x - 3.8 x^2, shown to the asked number of digits.
    assert "x[k+1] = 3.8 x - 3.8 x^2" in cli("info", model, "--precision", "3").stdout.decode()
    page = tmp_path / "r.html"
    assert cli("report", model, "-o", page).returncode == 0
    html = page.read_text()
    assert "x[k+1] = 3.8 x - 3.8 x^2" in html
    assert "3.79999999" not in html and "3.80000000" not in html


def test_ode_report_says_dx_dt_with_six_digits(tmp_path, cli):
    model = fitted_decay(tmp_path, cli)
    page = tmp_path / "r.html"
    assert cli("report", model, "-o", page).returncode == 0
    html = page.read_text()
    assert "dx/dt = -" in html and "x = -" not in html.replace("dx/dt = -", "")
    assert cli("info", model, "--precision", "0").returncode == 2


@pytest.fixture
def fast_backends(monkeypatch):
    """The registry without the slow `symbolic` sweep, so that auto tests take seconds."""
    from dynid.models import registry

    monkeypatch.setattr(registry, "names", lambda: ["dmd", "var", "sindy"])


def lorenz_dataset(n=2000):
    from dynid.systems import simulate

    run = simulate("lorenz", n=n)
    return Dataset.from_arrays(run.x, t=run.t, variables=list(run.variables))


def test_auto_chooses_the_equations_of_lorenz_on_held_out_data(fast_backends):
    from dynid.selection import fit_auto

    auto = fit_auto(lorenz_dataset(), seed=0)
    names = [c.model for c in auto.ranking]
    assert sorted(names) == ["dmd", "sindy", "var"]
    assert names[0] == "sindy" and auto.result.model.name == "sindy"
    by_name = {c.model: c for c in auto.ranking}
    # Exact equations forecast the held-out block; linear models cannot follow the attractor.
    assert by_name["sindy"].nrmse < 1e-3
    assert by_name["dmd"].nrmse > 100 * by_name["sindy"].nrmse
    assert by_name["var"].nrmse > 100 * by_name["sindy"].nrmse
    assert auto.result.metadata["auto_ranking"][0]["model"] == "sindy"
    # Refitted on all of the data, not only the training block.
    assert auto.result.metadata["n_samples"] == 2000


def test_auto_needs_uniform_steps_and_says_which_backends_apply(fast_backends):
    from dynid.models import registry
    from dynid.selection import applicable, fit_auto

    data = lorenz_dataset()
    t = data.trials[0].t.copy()
    keep = np.ones(t.size, dtype=bool)
    keep[7::13] = False  # irregular: every 13th sample missing
    irregular = Dataset.from_arrays(data.trials[0].x[keep], t=t[keep], variables=list(data.variables))
    with pytest.raises(DataError, match="--resample"):
        fit_auto(irregular, seed=0)
    assert applicable(registry.get("dmd"), irregular) == "needs uniform time steps"
    assert applicable(registry.get("sindy"), irregular) is None
    assert applicable(registry.get("dmd"), data) is None


def test_auto_leaves_network_backends_to_be_asked_for_by_name():
    from dynid.models import registry
    from dynid.selection import applicable

    data = lorenz_dataset(400)
    trained = [n for n in registry.names() if registry.get(n).capabilities.training]
    assert {"plrnn", "alrnn", "ltc"} <= set(trained)
    for name in trained:
        assert "ask for it with --model" in applicable(registry.get(name), data)
    assert applicable(registry.get("esn"), data) is None  # a ridge read-out: fitted in closed form


def test_auto_budget_keeps_one_scored_backend(fast_backends):
    from dynid.selection import fit_auto

    auto = fit_auto(lorenz_dataset(600), max_time=0.0, seed=0)
    assert [c.status for c in auto.ranking] == ["scored", "skipped", "skipped"]
    assert auto.ranking[0].model == "dmd"  # the first registered applicable backend


def test_fit_auto_on_the_command_line(tmp_path, cli):
    data = tmp_path / "lin.csv"
    data.write_bytes(cli("simulate", "linear", "--n", "400").stdout)
    model = tmp_path / "best.dynid"
    # The budget lets the cheap backends run and skips the slow symbolic sweep.
    result = cli("fit", data, "--model", "auto", "--max-time", "0", "-o", model, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["model"] == doc["ranking"][0]["model"]
    assert b"held-out ranking" in result.stderr
    assert cli("info", model).returncode == 0
    assert cli("fit", data, "--model", "auto", "-p", "rank=2", "-o", model).returncode == 2
    assert cli("fit", data, "--model", "var", "--max-time", "5", "-o", model).returncode == 2


def test_stochastic_commands_are_reproducible_by_default_and_record_the_seed(tmp_path, cli):
    data = tmp_path / "vdp.csv"
    data.write_bytes(cli("simulate", "vanderpol", "--n", "300", "--noise", "0.02").stdout)
    first = cli("symbolic", data, "--json", "--library", "poly3")
    again = cli("symbolic", data, "--json", "--library", "poly3")
    assert first.returncode == 0, first.stderr
    assert first.stdout == again.stdout  # the bootstrap ensemble is seeded by default
    doc = json.loads(first.stdout)
    assert doc["seed"] == 0 and "inclusion_probability" in doc["equations"][0]["terms"][0]
    other = json.loads(cli("symbolic", data, "--json", "--library", "poly3", "--seed", "5").stdout)
    assert other["seed"] == 5
    causal = [json.loads(cli("discover-causal", data, "--method", "te", "--max-lag", "2", "--json").stdout)
              for _ in range(2)]
    assert causal[0] == causal[1] and causal[0]["seed"] == 0


def test_future_inputs_with_a_time_column_are_taken_at_the_forecast_times(tmp_path, cli):
    """x' = -x + u sampled at dt 0.1; the forecast starts at t = 10.0 (DATA ends at 9.9)."""
    t = np.arange(100) * 0.1
    u = np.sin(t)
    x = np.zeros(100)
    for k in range(1, 100):
        x[k] = 0.9 * x[k - 1] + 0.1 * u[k - 1]
    data = tmp_path / "d.csv"
    pd.DataFrame({"t": t, "x": x, "u": u}).to_csv(data, index=False)
    model = tmp_path / "m.dynid"
    assert cli("fit", data, "--model", "dmd", "--inputs", "u", "-o", model, "-q").returncode == 0
    future = np.array([0.5, -1.0, 2.0])
    plain = tmp_path / "plain.csv"
    pd.DataFrame({"u": future}).to_csv(plain, index=False)
    expected = cli("forecast", model, data, "--horizon", "3", "--future-inputs", plain)
    assert expected.returncode == 0
    # The same inputs after the history's own rows, with times: the rows at t = 10.0.. are used.
    timed = tmp_path / "timed.csv"
    pd.DataFrame({"t": np.round(np.append(t, 10.0 + 0.1 * np.arange(3)), 6),
                  "u": np.append(u, future)}).to_csv(timed, index=False)
    result = cli("forecast", model, data, "--horizon", "3", "--future-inputs", timed)
    assert result.returncode == 0 and result.stdout == expected.stdout
    # Times of its own at the model's step (from 0): its rows in order, said on stderr.
    relative = tmp_path / "relative.csv"
    pd.DataFrame({"t": [0.0, 0.1, 0.2], "u": future}).to_csv(relative, index=False)
    result = cli("forecast", model, data, "--horizon", "3", "--future-inputs", relative)
    assert result.returncode == 0 and result.stdout == expected.stdout
    assert b"are not the forecast's (10, ...)" in result.stderr
    # Times neither the forecast's nor the model's step apart (here 1, 2, 3): refused.
    wrong = tmp_path / "wrong.csv"
    pd.DataFrame({"t": [1.0, 2.0, 3.0], "u": future}).to_csv(wrong, index=False)
    refused = cli("forecast", model, data, "--horizon", "3", "--future-inputs", wrong)
    assert refused.returncode == 3 and refused.stdout == b""
    assert b"holds neither the forecast's 3 times 10, 10.1" in refused.stderr


def growing_model(data: Dataset) -> SINDy:
    """dx/dt = x, as fitted on ``data`` (its data_range_ is ``data``'s)."""
    params = SINDyParams(degree=2)
    arrays = {"coefficients": np.array([[0.0, 1.0, 0.0]]), "feature_names": np.array([b"1", b"x0", b"x0^2"])}
    return SINDy.restore(params, arrays, variables=("x",), inputs=(), dt=0.01, data_range=data.value_range())


def test_forecast_that_leaves_the_data_range_fails_with_the_step():
    """x = e^t on [0, 0.99] spans [1, e^0.99]; the forecast e^(0.99 + 0.01 k) escapes once it
    exceeds e^0.99 + (e^0.99 - 1): at k = 100 ln(2 - e^-0.99) + 1, rounded down, i.e. step 49."""
    t = np.arange(100) * 0.01
    data = Dataset.from_arrays(np.exp(t)[:, None], t=t, variables=["x"])
    high = np.exp(0.99)
    expected = int(np.floor(100 * np.log((2 * high - 1) / high))) + 1
    assert expected == 49
    with pytest.raises(Diverged) as caught:
        api.forecast(growing_model(data), data, horizon=80)
    assert caught.value.step == expected
    assert f"at step {expected} of 80" in str(caught.value) and "--allow-escape" in str(caught.value)
    assert "[1, 2.691]" in str(caught.value)
    kept = api.forecast(growing_model(data), data, horizon=80, allow_escape=True)
    np.testing.assert_allclose(kept.x[:, 0], np.exp(0.99 + 0.01 * np.arange(1, 81)), rtol=1e-6)
    inside = api.forecast(growing_model(data), data, horizon=expected - 1)  # stays in range
    assert inside.x[-1, 0] < 2 * high - 1


def growth_beyond_training(tmp_path):
    """dx/dt = x fitted on x = e^t, t in [0, 0.99], and data x = e^t, t in [0, 1.99], which go
    beyond that range: (model, data, model file, data file)."""
    from dynid.modelfile import describe_fit, save_model

    train_t = np.arange(100) * 0.01
    model = growing_model(Dataset.from_arrays(np.exp(train_t)[:, None], t=train_t, variables=["x"]))
    t = np.arange(200) * 0.01
    data = Dataset.from_arrays(np.exp(t)[:, None], t=t, variables=["x"])
    data_file, model_file = tmp_path / "growth.csv", tmp_path / "growth.dynid"
    pd.DataFrame({"t": t, "x": np.exp(t)}).to_csv(data_file, index=False)
    save_model(model, str(model_file), describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.0))
    return model, data, model_file, data_file


def test_score_counts_rollouts_that_leave_the_data_range_as_diverged(tmp_path, cli):
    """The model dx/dt = x is exact on x = e^t, so every rollout matches the data; but those
    that pass e^0.99 + (e^0.99 - 1) (at t = ln(2 e^0.99 - 1) = 1.4776) have left the training
    range [1, e^0.99] widened by that range on each side, as forecast refuses: diverged from
    that step on, their errors null, not the near-zero RMSE of an exact path."""
    model, data, model_file, data_file = growth_beyond_training(tmp_path)
    result = api.score(model, data, horizon=50, starts=5, free_run=1000)
    assert result["allow_escape"] is False
    # Starts (first forecast rows) s = 1, 38, 75, 113, 150 of 1..150: step k forecasts row
    # s - 1 + k, at t = (s - 1 + k) / 100, escaped from row 148 (t = 1.48 > 1.4776) on: the
    # rollouts from 113 (at step 36) and 150 (at step 1).
    assert result["diverged_rollouts"] == 2 and result["escaped_rollouts"] == 2
    assert result["first_divergence_step"] == 1  # the start at row 150 (t = 1.50) is past it
    assert result["rmse"] is None and result["nrmse"] is None
    assert result["rmse_per_step"][0] is None  # the rollout from t = 1.50 is out from step 1
    # The free run from t = 0 (finite for 1000 steps: e^10) escapes at row 148 too.
    assert result["free_run_diverged_step"] == 148 and result["free_run_escaped"] is True
    assert result["d_stsp"] is None and result["d_h"] is None
    json.dumps(result, allow_nan=False)

    text = cli("score", model_file, data_file, "--horizon", "50", "--starts", "5", "--free-run", "1000")
    assert text.returncode == 0
    assert b"diverged: 2 of 5 rollouts (first at step 1; 2 left the training data's range" in text.stdout
    assert b"rmse:     diverged" in text.stdout
    assert b"the free run diverged at step 148 (left the training data's range)" in text.stdout


def test_score_allow_escape_scores_rollouts_beyond_the_training_range(tmp_path, cli):
    """--allow-escape, as forecast's: the exact model's rollouts past the training range are
    scored as they are (near-zero error, none diverged, all valid to the horizon). The free run,
    which D_stsp and D_H compare with DATA, is bounded by DATA's range [1, e^1.99] widened alike
    instead: e^(k / 100) leaves it at step k = floor(100 ln(2 e^1.99 - 1)) + 1 = 262."""
    model, data, model_file, data_file = growth_beyond_training(tmp_path)
    result = api.score(model, data, horizon=50, starts=5, free_run=1000, allow_escape=True)
    assert result["allow_escape"] is True
    assert result["diverged_rollouts"] == 0 and result["escaped_rollouts"] == 0
    assert result["nrmse"] < 1e-4 and result["rmse_per_step"][0] < 1e-4
    assert result["valid_prediction_time"] == pytest.approx(0.5) and result["censored_rollouts"] == 5
    expected = int(np.floor(100 * np.log(2 * np.exp(1.99) - 1))) + 1
    assert expected == 262
    assert result["free_run_diverged_step"] == expected and result["free_run_escaped"] is True
    assert result["d_stsp"] is None and result["d_h"] is None

    text = cli("score", model_file, data_file, "--horizon", "50", "--starts", "5", "--free-run", "1000",
               "--allow-escape")
    assert text.returncode == 0
    assert b"diverged:" not in text.stdout and b"rmse:     diverged" not in text.stdout
    assert b"the free run diverged at step 262 (left DATA's range)" in text.stdout


def test_the_escape_check_skips_constant_and_unobserved_variables():
    from dynid.metrics.dsr import escape_step

    low, high = np.array([0.0, 5.0, np.nan]), np.array([1.0, 5.0, np.nan])
    assert escape_step(low, high, np.array([[0.5, 5.0 + 1e-12, 1e9]])) is None
    assert escape_step(low, high, np.array([[0.5, 5.0, 0.0], [2.01, 5.0, 0.0]])) == 2
    assert escape_step(low, high, np.array([[0.5, 5.0, np.inf]])) == 1


def test_cli_forecast_refuses_an_escaped_forecast_unless_allowed(tmp_path, cli):
    t = np.arange(200) * 0.01
    growth = tmp_path / "growth.csv"
    pd.DataFrame({"t": t, "x": np.exp(t)}).to_csv(growth, index=False)
    model = tmp_path / "var.dynid"
    assert cli("fit", growth, "--model", "var", "-o", model, "-q").returncode == 0
    info = json.loads(cli("info", model, "--json").stdout)
    np.testing.assert_allclose([info["data_range"]["low"], info["data_range"]["high"]], [[1.0], [np.exp(1.99)]])
    refused = cli("forecast", model, growth, "--horizon", "200")
    assert refused.returncode == 1 and refused.stdout == b""
    assert b"left the training data's range" in refused.stderr and b"--allow-escape" in refused.stderr
    kept = cli("forecast", model, growth, "--horizon", "200", "--allow-escape")
    assert kept.returncode == 0
    values = pd.read_csv(io.BytesIO(kept.stdout))["x"].to_numpy()
    assert len(values) == 200 and values[-1] > 2 * np.exp(1.99)


def test_a_model_file_without_a_recorded_range_forecasts_as_before(tmp_path):
    from dynid.modelfile import describe_fit, load_model, save_model

    t = np.arange(100) * 0.01
    data = Dataset.from_arrays(np.exp(t)[:, None], t=t, variables=["x"])
    model = growing_model(data)
    path = str(tmp_path / "old.dynid")
    metadata = describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.0)
    del metadata["data_range"]  # as files written before the range was recorded
    save_model(model, path, metadata)
    old = load_model(path).model
    assert old.data_range_ is None
    assert np.isfinite(api.forecast(old, data, horizon=80).x).all()
