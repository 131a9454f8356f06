"""Files larger than memory: var and dmd fit from running sums of a CSV read in chunks, with the
in-memory fit's results (to round-off) in memory far below the file's size; other backends say
plainly that they need the whole file (--max-memory)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dynid import api
from dynid.data import load
from dynid.data.stream import open_stream, parse_size
from dynid.errors import UsageError
from dynid.linear.least_squares import fit_var_least_squares, var_from_moments
from dynid.linear.moments import LaggedMoments

# The in-memory fit uses the SVD of the design, the streamed one its Gram matrix: equal to
# round-off amplified by the design's (small) condition number.
RTOL = 1e-10


def _system(n: int, seed: int, inputs: bool = True) -> pd.DataFrame:
    """A stable 3-variable VARX(2) with an input and an offset, noise of unit scale."""
    rng = np.random.default_rng(seed)
    a1 = np.array([[0.5, 0.1, 0.0], [-0.2, 0.5, 0.1], [0.0, 0.2, 0.4]])
    a2 = np.array([[0.1, 0.0, 0.0], [0.0, -0.1, 0.0], [0.05, 0.0, 0.1]])
    u = rng.normal(size=n)
    x = np.zeros((n, 3))
    for k in range(2, n):
        x[k] = a1 @ x[k - 1] + a2 @ x[k - 2] + 0.3 * u[k - 1] * inputs + rng.normal(size=3)
    frame = pd.DataFrame({"t": np.arange(n) * 0.01, "a": x[:, 0] + 3.0, "b": x[:, 1], "c": x[:, 2]})
    if inputs:
        frame["u"] = u
    return frame


@pytest.fixture(scope="module")
def gappy_csv(tmp_path_factory) -> Path:
    """2,000 samples with missing values that split them into four trials (one of 1 sample)."""
    frame = _system(2000, 0)
    for row, column in ((500, "b"), (501, "a"), (1203, "c"), (1205, "a")):
        frame.loc[row, column] = np.nan
    path = tmp_path_factory.mktemp("gappy") / "gappy.csv"
    frame.to_csv(path, index=False)
    return path


def _assert_same_fit(streamed: api.FitResult, whole: api.FitResult) -> None:
    for name, array in whole.model.arrays().items():
        mine = streamed.model.arrays()[name]
        if name == "modes":  # eigenvectors: each is defined up to a unit factor
            phases = np.sum(np.conj(mine) * array, axis=0)
            mine = mine * phases / np.abs(phases)
        np.testing.assert_allclose(mine, array, rtol=RTOL, atol=RTOL, err_msg=name)
    for key in ("variables", "inputs", "n_trials", "n_samples", "hyperparameters", "data_fingerprint"):
        assert streamed.metadata[key] == whole.metadata[key], key
    assert streamed.metadata["dt"] == pytest.approx(whole.metadata["dt"], rel=1e-12)
    _assert_close(streamed.metadata["metrics"], whole.metadata["metrics"])


def _assert_close(a: object, b: object) -> None:
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys()
        for key in b:
            _assert_close(a[key], b[key])
    elif isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_close(x, y)
    elif isinstance(b, float):
        assert a == pytest.approx(b, rel=RTOL, abs=RTOL)
    else:
        assert a == b


@pytest.mark.parametrize(("model", "params", "options"), [
    ("var", None, {"inputs": ["u"]}),  # order chosen by BIC over 1..10
    ("var", ["order=3", "ridge=0.01"], {"inputs": ["u"]}),
    ("var", ["order=2", "trend=false"], {"columns": ["a", "b"]}),
    ("dmd", None, {"inputs": ["u"]}),
    ("dmd", None, {"columns": ["a", "b", "c"]}),
    ("dmd", ["rank=2"], {"columns": ["a", "b", "c"]}),
])
@pytest.mark.parametrize("rows", [23, 1000])  # chunks that cut trials' first 10 samples, and longer
def test_a_streamed_fit_equals_the_in_memory_fit(gappy_csv, model, params, options, rows):
    whole = api.fit(load(str(gappy_csv), **options), model, params, seed=0, device="cpu")
    streamed = api.fit_stream(open_stream(str(gappy_csv), rows=rows, **options), model, params, seed=0, device="cpu")
    assert streamed.metadata["n_trials"] == 3  # the 1-sample piece between the gaps is dropped
    _assert_same_fit(streamed, whole)


def test_moments_give_every_order_and_start_of_the_in_memory_design():
    rng = np.random.default_rng(3)
    trials = [rng.normal(size=(n, 2)) for n in (40, 5, 60)]  # one trial shorter than the lags
    inputs = [rng.normal(size=(len(x), 1)) for x in trials]
    moments = LaggedMoments(6, 2, 1, trend=True)
    for x, u in zip(trials, inputs):
        for start in range(0, len(x), 4):  # pieces shorter than the lags
            moments.add(x[start : start + 4], u[start : start + 4], starts_trial=start == 0)
    for p, start in ((1, 1), (2, 6), (6, 6), (3, 4)):
        whole = fit_var_least_squares(trials, p, trials_u=inputs, start=start)
        sums = moments.design(p, start)
        assert sums.n == whole.n_obs
        estimate = var_from_moments(sums.layout, sums.ztz, sums.zty, sums.yty, sums.n)
        np.testing.assert_allclose(estimate.coefs, whole.coefs, rtol=RTOL, atol=RTOL)
        np.testing.assert_allclose(estimate.sigma, whole.sigma, rtol=RTOL, atol=RTOL)
        np.testing.assert_allclose(estimate.stderr, whole.stderr, rtol=RTOL, atol=RTOL)
        assert estimate.loglik == pytest.approx(whole.loglik, rel=RTOL)


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory) -> Path:
    """About 50 MB: a block of 20,000 rows of a VAR(2) written again and again (instant to
    make; the repeats are new trials' worth of data to the fit, not a problem for it)."""
    frame = _system(20000, 1, inputs=False).drop(columns="t")
    block = frame.to_csv(index=False, header=False).encode()
    path = tmp_path_factory.mktemp("big") / "big.csv"
    with open(path, "wb") as handle:
        handle.write(b"a,b,c\n")
        while handle.tell() < 50_000_000:
            handle.write(block)
    return path


@pytest.mark.parametrize("model", ["var", "dmd"])
def test_a_50_mb_file_is_fitted_in_a_few_mb(big_csv, model):
    size = big_csv.stat().st_size
    tracemalloc.start()
    try:
        result = api.fit_stream(open_stream(str(big_csv)), model, None, seed=0, device="cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < min(size / 5, 10e6), f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.0f} MB file"
    assert result.metadata["n_trials"] == 1 and result.metadata["n_samples"] > 800_000


def test_the_cli_reads_a_large_file_in_chunks_or_says_why_it_cannot(cli, gappy_csv, tmp_path):
    def fit(*args: str):
        return cli("fit", str(gappy_csv), "--inputs", "u", "--json", "-o", str(tmp_path / "m.dynid"), *args)

    whole, streamed = fit("--model", "var"), fit("--model", "var", "--max-memory", "10K")
    assert whole.returncode == streamed.returncode == 0
    a, b = json.loads(whole.stdout), json.loads(streamed.stdout)
    assert a["n_samples"] == b["n_samples"] and a["metrics"]["order"] == b["metrics"]["order"]
    _assert_close(b["metrics"]["one_step_rmse"], a["metrics"]["one_step_rmse"])
    (tmp_path / "m.dynid").unlink()
    refused = fit("--model", "sindy", "--max-memory", "10K")
    assert refused.returncode == 4 and refused.stdout == b""
    message = refused.stderr.decode().splitlines()
    assert len(message) == 1 and "sindy" in message[0] and "--max-memory" in message[0] and "var and dmd" in message[0]
    trials = fit("--model", "var", "--max-memory", "10K", "--trial-column", "t")
    assert trials.returncode == 2 and b"--trial-column" in trials.stderr
    assert not (tmp_path / "m.dynid").exists()


def test_sizes_parse_in_binary_units():
    assert parse_size("10K") == 10 * 1024 and parse_size("1.5G") == 3 * 2**29 and parse_size("2gib") == 2**31
    assert parse_size("4096") == 4096
    for bad in ("lots", "-1G", "0"):
        with pytest.raises(UsageError):
            parse_size(bad)


def test_what_streaming_does_not_cover_is_a_usage_error(gappy_csv):
    with pytest.raises(UsageError):
        open_stream(str(gappy_csv), nan="interpolate")
    with pytest.raises(UsageError):
        open_stream("-")
