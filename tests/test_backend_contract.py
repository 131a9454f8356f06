"""The contract every model backend in ``dynid.models.registry`` keeps, whoever wrote it.

Each test is parametrised over ``registry.names()``, so a new backend is checked by adding its
registry line; its id (``[dmd]``, ``[var]`` ...) says whose failure it is. What a backend's
``capabilities`` declare decides which way the input, NaN, irregular-sampling and CUDA checks go.
Ground truth (does the backend find the right model?) lives in each backend's own test file.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, UsageError
from dynid.jsonable import jsonable
from dynid.modelfile import describe_fit, load_model, save_model
from dynid.models import registry
from dynid.models.base import Backend
from dynid.runtime import cuda_available
from dynid.systems import simulate

from conftest import (
    TYPO,
    assert_registered_and_documented,
    assert_typo_named_with_valid_keys,
    write_csv,
)

# -p settings that keep a backend with slow defaults fast here; a backend not listed runs with
# its defaults, so a new backend needs no entry unless its defaults take seconds.
CONTRACT_PARAMS: dict[str, list[str]] = {
    "symbolic": ["library=poly1", "ensemble=2", "shooting=false"],
    "lds": ["latent=4", "max_iter=20"],
    "ctlds": ["latent=4", "max_iter=20"],
    "hmm": ["states=2", "restarts=1"],
    "arhmm": ["states=2", "restarts=1"],
    "edm": ["max_E=2"],
    "slds": ["regimes=2", "restarts=1", "max_iter=10"],
    "clds": ["latent=2", "max_iter=10", "lengthscale=1", "drive_sd=10"],
    "ltc": ["hidden=8", "backbone=16", "window=8", "epochs=3"],
    "plrnn": ["epochs=2", "batches=3", "sequence=20", "hidden=8"],
    "alrnn": ["epochs=2", "batches=3", "sequence=20", "latent=6"],
    "node": ["width=8", "depth=1", "segment=4", "epochs=2", "batch=256", "lbfgs=25"],
    "phnn": ["width=8", "depth=1", "segment=4", "epochs=2", "batch=256"],
    "hnn": ["width=8", "depth=1", "segment=4", "epochs=2", "batch=256"],
    "gpsde": ["max_iter=5", "particles=50"],
}
N_SAMPLES = 300
HORIZON = 25

pytestmark = pytest.mark.parametrize("name", registry.names())


def catalogued(system: str, n: int = N_SAMPLES) -> Dataset:
    """``n`` samples of a catalogued system (with its inputs, if it has any) with 1 % noise, so
    that lagged designs are not exactly collinear."""
    sim = simulate(system, n=n, noise=0.01, seed=1)
    return Dataset.from_arrays(
        sim.x, t=sim.t, u=sim.u, variables=list(sim.variables), inputs=list(sim.inputs) or None
    )


# The stable 4-D linear ODE every backend can model, and the same kind of system with an input.
AUTONOMOUS = catalogued("linear")
FORCED = catalogued("forced-oscillator")
# For backends whose inputs are per-trial conditions: AUTONOMOUS cut into three trials, each
# with its own constant input.
CONDITIONED = AUTONOMOUS.with_trials([
    Trial(trial.t, trial.x, np.full((trial.n_samples, 1), float(k)))
    for k, trial in enumerate(AUTONOMOUS.trials[0].slice(start, start + N_SAMPLES // 3)
                              for start in range(0, N_SAMPLES, N_SAMPLES // 3))
], inputs=("u",))


def fit(name: str, data: Dataset, seed: int = 0) -> Backend:
    return api.fit(data, name, CONTRACT_PARAMS.get(name, []), seed=seed, device="cpu").model


def with_inputs(name: str) -> Dataset:
    """The data with inputs the backend takes: FORCED, or CONDITIONED for per-trial conditions."""
    return CONDITIONED if registry.get(name).capabilities.conditions else FORCED


def future_inputs(model: Backend, steps: int) -> np.ndarray | None:
    """Inputs for a forecast past the end of ``with_inputs``' data (FORCED's own inputs,
    continued; CONDITIONED's last condition, repeated), or None."""
    if not model.inputs_:
        return None
    if model.capabilities.conditions:
        return np.repeat(CONDITIONED.trials[-1].u[-1:], steps, axis=0)
    return catalogued("forced-oscillator", N_SAMPLES + steps).trials[0].u[N_SAMPLES:]


@pytest.fixture
def fitted(name) -> Backend:
    """The backend fitted on AUTONOMOUS once, shared by the tests that only read it."""
    return fitted_on_autonomous(name)


@functools.cache
def fitted_on_autonomous(name: str) -> Backend:
    return fit(name, AUTONOMOUS)


def test_registry_name_and_documented_params(name):
    assert_registered_and_documented(registry.get(name), name)


def test_fit_on_a_catalogued_system(name, fitted):
    assert fitted.is_fitted()
    assert fitted.variables_ == AUTONOMOUS.variables and fitted.inputs_ == ()
    assert fitted.dt_ == AUTONOMOUS.dt
    assert fitted.history_length >= 1
    json.dumps(jsonable(fitted.metrics_), allow_nan=False)  # goes into model files and --json
    arrays = fitted.arrays()
    assert arrays and all(isinstance(value, np.ndarray) for value in arrays.values())


def test_an_unfitted_model_says_fit_first(name):
    backend = registry.get(name)
    model = backend(backend.Params.parse(CONTRACT_PARAMS.get(name, [])))
    assert not model.is_fitted()
    with pytest.raises(UsageError, match="not fitted"):
        model.simulate(AUTONOMOUS.trials[0], 5)
    with pytest.raises(UsageError, match="not fitted"):
        model.arrays()


def test_forecast_shapes_and_times(name, fitted):
    forecast = api.forecast(fitted, AUTONOMOUS, HORIZON)
    history = AUTONOMOUS.trials[-1]
    assert forecast.x.shape == (HORIZON, AUTONOMOUS.n_variables)
    assert np.all(np.isfinite(forecast.x))
    np.testing.assert_allclose(forecast.t, history.t[-1] + AUTONOMOUS.dt * np.arange(1, HORIZON + 1))
    assert forecast.variables == AUTONOMOUS.variables
    assert fitted.simulate(history, 1).shape == (1, AUTONOMOUS.n_variables)
    with pytest.raises(DataError, match="variables"):
        fitted.simulate(Trial(history.t, history.x[:, :-1]), 5)
    if fitted.history_length > 1:
        with pytest.raises(DataError, match="history"):
            fitted.simulate(history.slice(0, fitted.history_length - 1), 5)


@pytest.mark.parametrize("system", ["autonomous", "with inputs"])
def test_model_file_round_trip_forecasts_bit_identically(name, system, fitted, tmp_path):
    if system == "with inputs":
        if not registry.get(name).capabilities.inputs:
            pytest.skip("the backend takes no inputs (test_inputs_as_declared covers it)")
        data = with_inputs(name)
        model = fit(name, data)
    else:
        data, model = AUTONOMOUS, fitted
    path = str(tmp_path / "model.dynid")
    save_model(model, path, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.0))
    restored = load_model(path).model
    assert type(restored) is type(model) and restored.params == model.params
    assert (restored.variables_, restored.inputs_, restored.dt_) == (model.variables_, model.inputs_, model.dt_)
    assert restored.history_length == model.history_length
    restored_arrays = restored.arrays()
    assert set(restored_arrays) == set(model.arrays())
    for key, value in model.arrays().items():
        np.testing.assert_array_equal(restored_arrays[key], value, err_msg=key)
    inputs = future_inputs(model, HORIZON)
    original = api.forecast(model, data, HORIZON, inputs)
    again = api.forecast(restored, data, HORIZON, inputs)
    assert np.array_equal(original.x, again.x) and np.array_equal(original.t, again.t)
    assert restored.equations() == model.equations()
    if model.eigenvalues() is not None:
        assert np.array_equal(restored.eigenvalues(), model.eigenvalues())


def test_a_missing_array_in_a_model_file_is_named(name, fitted):
    backend = registry.get(name)
    arrays = fitted.arrays()
    for missing in arrays:
        incomplete = {key: value for key, value in arrays.items() if key != missing}
        restore = functools.partial(backend.restore, fitted.params, incomplete, variables=fitted.variables_,
                                    inputs=fitted.inputs_, dt=fitted.dt_)
        if missing in backend.legacy_arrays:  # older files: loads, and forecasts
            assert np.all(np.isfinite(api.forecast(restore(), AUTONOMOUS, HORIZON).x))
            continue
        with pytest.raises(DataError, match=repr(missing)):
            restore()


def test_same_seed_same_model_on_cpu(name, fitted):
    again = fit(name, AUTONOMOUS, seed=0)
    first_arrays, again_arrays = fitted.arrays(), again.arrays()
    for key, value in first_arrays.items():
        np.testing.assert_array_equal(again_arrays[key], value, err_msg=key)
    assert np.array_equal(
        api.forecast(fitted, AUTONOMOUS, HORIZON).x, api.forecast(again, AUTONOMOUS, HORIZON).x
    )


def test_inputs_as_declared(name):
    if not registry.get(name).capabilities.inputs:
        with pytest.raises(UsageError, match="drop --inputs"):
            fit(name, FORCED)
        return
    data = with_inputs(name)
    if data is CONDITIONED:
        # Conditions are constant within a trial; FORCED's input varies.
        with pytest.raises(DataError, match="varies within a trial"):
            fit(name, FORCED)
    model = fit(name, data)
    assert model.inputs_ == data.inputs
    history = data.trials[-1]
    if model.capabilities.conditions:
        # No future inputs: the forecast keeps the history's condition.
        kept = np.repeat(history.u[-1:], HORIZON, axis=0)
        np.testing.assert_array_equal(model.simulate(history, HORIZON), model.simulate(history, HORIZON, kept))
    else:
        with pytest.raises(DataError, match="--future-inputs"):
            model.simulate(history, HORIZON)
    forecast = model.simulate(history, HORIZON, future_inputs(model, HORIZON))
    assert forecast.shape == (HORIZON, data.n_variables) and np.all(np.isfinite(forecast))


def test_missing_values_as_declared(name):
    x = AUTONOMOUS.trials[0].x.copy()
    x[N_SAMPLES // 2, 2] = np.nan
    data = Dataset.from_arrays(x, dt=AUTONOMOUS.dt, variables=list(AUTONOMOUS.variables))
    if not registry.get(name).capabilities.nan:
        with pytest.raises(DataError, match=r"'x2'.*--nan"):
            fit(name, data)
        return
    model = fit(name, data)
    assert np.all(np.isfinite(api.forecast(model, AUTONOMOUS, HORIZON).x))


def test_irregular_sampling_as_declared(name):
    # Every other sample of a run twice as long, with a random quarter of them left out.
    dense = catalogued("linear", 2 * N_SAMPLES)
    rng = np.random.default_rng(0)
    keep = np.sort(rng.choice(np.arange(0, 2 * N_SAMPLES, 2), size=3 * N_SAMPLES // 4, replace=False))
    trial = dense.trials[0]
    data = Dataset.from_arrays(trial.x[keep], t=trial.t[keep], variables=list(dense.variables))
    assert data.dt is None
    if registry.get(name).capabilities.uniform_steps:
        with pytest.raises(DataError, match="--resample"):
            fit(name, data)
        return
    model = fit(name, data)
    assert model.dt_ == pytest.approx(np.median(np.diff(trial.t[keep])))
    assert np.all(np.isfinite(api.forecast(model, data, HORIZON).x))


@pytest.fixture(scope="module")
def linear_file(tmp_path_factory):
    return write_csv(tmp_path_factory.mktemp("contract") / "linear.csv", AUTONOMOUS.trials[0].x,
                     AUTONOMOUS.variables, t=AUTONOMOUS.trials[0].t)


def test_a_param_typo_names_the_valid_keys(name, cli, linear_file, tmp_path):
    out = tmp_path / "m.dynid"
    result = cli("fit", linear_file, "--model", name, "-p", f"{TYPO}=1", "-o", out)
    assert_typo_named_with_valid_keys(result, registry.get(name).Params)
    assert not out.exists()


def test_cuda_as_declared(name, cli, linear_file, tmp_path):
    out = tmp_path / "m.dynid"
    params = [arg for assignment in CONTRACT_PARAMS.get(name, []) for arg in ("-p", assignment)]
    result = cli("fit", linear_file, "--model", name, *params, "--device", "cuda", "-o", out)
    if not registry.get(name).capabilities.cuda:
        # A CPU-only backend: asking for CUDA is a usage error whatever the machine has.
        assert result.returncode == 2 and "CPU only" in result.stderr.decode(), result.stderr
    elif not cuda_available():
        assert result.returncode == 4 and "cuda" in result.stderr.decode(), result.stderr
    else:
        assert result.returncode == 0, result.stderr
    assert out.exists() == (result.returncode == 0)
