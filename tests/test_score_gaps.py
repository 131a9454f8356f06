"""``dynid score`` on data with missing values: a missing target is skipped, not an error.

A VAR(1) fitted to a noise-free damped rotation forecasts it exactly (errors ~1e-15), so the
scores of a copy with two perturbed targets and gaps are known in closed form: the
perturbations are the only errors, the missing cells are left out of every mean, and VPT judges
only the steps with an observed target."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid import api
from dynid.data.dataset import Dataset
from dynid.metrics.forecast import masked_rms, valid_steps

from conftest import write_csv

DT, HORIZON, STARTS = 0.1, 10, 3
# 31 rows: with one sample of history, the three rollouts of 10 steps start at rows 1, 11 and
# 21 and tile rows 1-30; rows 0, 10 and 20 are their histories. Gaps stay in the last rollout
# (rows 21-30), so every start keeps a complete history and the starts are the clean file's.
ROWS = 1 + STARTS * HORIZON
# Perturbed targets (row, variable, amount): step 5 of rollout 1 far past the VPT threshold,
# step 7 of rollout 3 well within it.
PERTURBED = [(5, 0, 1.0), (27, 1, 0.1)]
# Missing targets (row, variable) in rollout 3: part of step 3, all of steps 5 and 10.
MISSING = [(23, 1), (25, 0), (25, 1), (30, 0), (30, 1)]


def rotation(n: int) -> np.ndarray:
    """A damped rotation by 0.2 rad per sample: exactly x_{t+1} = A x_t."""
    angle = 0.2 * np.arange(n)
    return np.column_stack([np.cos(angle), np.sin(angle)]) * 0.995 ** np.arange(n)[:, None]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gaps")
    write_csv(folder / "train.csv", rotation(300), ["a", "b"], dt=DT)
    clean = rotation(ROWS)
    gappy = clean.copy()
    for row, column, amount in PERTURBED:
        gappy[row, column] += amount
    for row, column in MISSING:
        gappy[row, column] = np.nan
    write_csv(folder / "clean.csv", clean, ["a", "b"], dt=DT)
    write_csv(folder / "gappy.csv", gappy, ["a", "b"], dt=DT)
    return folder, gappy


def score(cli, folder, data: str) -> dict:
    model = folder / "var.dynid"
    if not model.exists():
        fitted = cli("fit", folder / "train.csv", "--model", "var", "-p", "order=1", "-p", "trend=false", "-o", model, "-q")
        assert fitted.returncode == 0, fitted.stderr
    result = cli("score", model, folder / data, "--nan", "keep", "--horizon", HORIZON, "--starts", STARTS,
                 "--free-run", "0", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_clean_file_scores_an_exact_forecast(cli, files):
    folder, _ = files
    clean = score(cli, folder, "clean.csv")
    assert clean["rmse"] < 1e-12 and clean["missing_targets"] == 0
    assert clean["valid_prediction_time"] == pytest.approx(HORIZON * DT)
    assert clean["censored_rollouts"] == STARTS


def test_missing_targets_are_skipped_in_every_error_and_in_vpt(cli, files):
    folder, gappy = files
    found = score(cli, folder, "gappy.csv")
    assert found["missing_targets"] == len(MISSING)
    (_, _, big), (_, _, small) = PERTURBED
    cells = 2 * (ROWS - 1) - len(MISSING)
    assert found["rmse"] == pytest.approx(np.sqrt((big**2 + small**2) / cells), rel=1e-9)
    sd = np.nanstd(gappy, axis=0)
    assert found["nrmse"] == pytest.approx(np.sqrt(((big / sd[0]) ** 2 + (small / sd[1]) ** 2) / cells), rel=1e-9)
    per_variable = found["rmse_per_variable"]
    assert per_variable["a"] == pytest.approx(np.sqrt(big**2 / (ROWS - 1 - 2)), rel=1e-9)  # a misses rows 25, 30
    assert per_variable["b"] == pytest.approx(np.sqrt(small**2 / (ROWS - 1 - 3)), rel=1e-9)  # b: 23, 25, 30
    per_step = found["rmse_per_step"]
    assert per_step[4] == pytest.approx(big / 2, rel=1e-9)  # rows 5, 15, 25: 4 observed cells
    assert per_step[6] == pytest.approx(small / np.sqrt(6), rel=1e-9)  # rows 7, 17, 27
    assert per_step[9] < 1e-12  # rows 10, 20 and 30 (missing)
    # VPT per rollout: 0.5 (invalid at step 5), 1.0, and 0.9: rollout 3 is valid as far as
    # observed (its missing cells at steps 3 and 5 are not errors; step 10 is unobserved).
    assert found["valid_prediction_time"] == pytest.approx((0.5 + 1.0 + 0.9) / 3)
    assert found["censored_rollouts"] == 2 and found["valid_prediction_time_censored"]


def test_a_model_that_takes_missing_values_scores_the_gaps_as_they_are(cli, files):
    """No --nan: lds reads the gappy file whole (other models: NaN-free segments), and its free
    run is compared with the observed samples."""
    folder, _ = files
    model = folder / "lds.dynid"
    fitted = cli("fit", folder / "train.csv", "--model", "lds", "-p", "latent=2", "-p", "max_iter=3", "-o", model, "-q")
    assert fitted.returncode == 0, fitted.stderr
    result = cli("score", model, folder / "gappy.csv", "--horizon", HORIZON, "--starts", STARTS, "--free-run", "500", "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["missing_targets"] == len(MISSING) and found["rmse"] is not None
    # The free run's references: the complete rows, and the longest gap-free stretch (rows
    # 0-22), too short for a resolved spectrum (spectrum_min_length, 320): no D_H.
    assert found["d_stsp"] is not None and found["d_h"] is None
    assert found["free_run_diverged_step"] is None


def test_a_diverged_prediction_is_invalid_where_the_target_is_missing():
    true = np.zeros((4, 2))
    true[2] = np.nan
    pred = np.zeros((4, 2))
    steps, censored = valid_steps(pred, true, np.ones(2))
    assert (steps, censored) == (4, True)
    pred[2, 1] = np.nan  # diverged at an unobserved step
    assert valid_steps(pred, true, np.ones(2)) == (3, False)
    true[3] = np.nan
    pred[2, 1] = 0.0
    assert valid_steps(pred, true, np.ones(2)) == (2, True)  # valid as far as observed


def test_a_non_finite_prediction_at_an_observed_target_is_never_skipped():
    true = np.array([[1.0, np.nan], [2.0, 3.0]])
    assert masked_rms(np.array([[1.0, 5.0], [2.0, 4.0]]), true) == pytest.approx(np.sqrt(1 / 3))
    assert np.isnan(masked_rms(np.array([[np.nan, 0.0], [2.0, 3.0]]), true))
    assert masked_rms(np.array([[1.0, np.nan], [2.0, 3.0]]), true) == 0.0


def test_a_model_that_refuses_missing_values_forecasts_from_its_gap_free_past():
    """hmm filters its whole history, so a rollout after a gap reads only the rows since it."""
    rng = np.random.default_rng(0)
    x = rotation(200) + 0.05 * rng.normal(size=(200, 2))
    model = api.fit(Dataset.from_arrays(x, dt=DT, variables=["a", "b"]), "hmm",
                    {"states": "2", "restarts": 0, "max_iter": 5}, seed=0, device="cpu").model
    gappy = x.copy()
    gappy[[30, 95], 1] = np.nan
    found = api.score(model, Dataset.from_arrays(gappy, dt=DT, variables=["a", "b"]), horizon=HORIZON, starts=20,
                      free_run=0)
    assert found["rmse"] is not None and found["missing_targets"] > 0
