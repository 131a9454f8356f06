"""The esn's committee (``-p members=K``): K reservoirs at one setting, each with its own ridge
read-out, whose predicted increments are averaged at every closed-loop step. Ground truth: the
committee's read-out is the mean of ridge regressions fitted member by member; a committee of
identical reservoirs forecasts as one of them; its one-step forecast is the mean of its
members' own forecasts; its model file restores it, and files without ``members`` load as one
reservoir.
"""

from __future__ import annotations

import numpy as np
import pytest

from dynid.data.dataset import Trial
from dynid.models.reservoir.esn import ESN, ESNParams, ReservoirChoice
from dynid.models.reservoir.readout import CommitteeSolver, RidgeSolver

from test_reservoir import DT, as_data, lorenz

# Settings given so that the fits are quick (the ridge is still chosen by held-out skill).
SMALL = dict(units=30, washout=20, spectral_radius=0.9, leak=0.3, input_scaling=0.5)


def test_the_committee_readout_is_the_mean_of_ridge_fits_on_each_members_columns():
    """Features [f_1, f_2, f_3, shared] (4 + 4 + 4 + 2 columns): the committee predicts the mean
    of three ridge regressions of the targets on [f_j, shared], at every ridge."""
    rng = np.random.default_rng(0)
    features = rng.standard_normal((200, 14))
    targets = features @ rng.standard_normal((14, 2)) + 0.1 * rng.standard_normal((200, 2))
    committee = CommitteeSolver(features, targets, members=3, shared=2)
    for ridge in (0.0, 1e-3, 1.0):
        weights, bias = committee.solve(ridge)
        members = [RidgeSolver(np.hstack([features[:, 4 * j:4 * j + 4], features[:, 12:]]),
                               targets).solve(ridge) for j in range(3)]
        mean = np.mean([np.hstack([features[:, 4 * j:4 * j + 4], features[:, 12:]]) @ w + b
                        for j, (w, b) in enumerate(members)], axis=0)
        np.testing.assert_allclose(features @ weights + bias, mean, rtol=1e-10, atol=1e-12)
        # ... which is not one ridge regression over all the columns.
        single, single_bias = RidgeSolver(features, targets).solve(ridge)
        assert not np.allclose(features @ single + single_bias, mean)
    with pytest.raises(ValueError, match="do not split"):
        CommitteeSolver(features, targets, members=5, shared=2)


def test_a_committee_of_identical_reservoirs_forecasts_as_one_of_them(monkeypatch):
    """With every member drawn from the same seed, the mean of K equal read-outs is that
    read-out: the same ridge is chosen and the forecast is the single reservoir's."""
    x = lorenz(700)
    history = Trial(DT * np.arange(300), lorenz(1300)[1000:])
    single = ESN(ESNParams(**SMALL)).fit(as_data(x), seed=5)
    monkeypatch.setattr(ReservoirChoice, "seeds", lambda self, base, members: [base] * members)
    committee = ESN(ESNParams(**SMALL, members=3)).fit(as_data(x), seed=5)
    assert committee.metrics_["ridge"] == single.metrics_["ridge"]
    assert committee.reservoir_.recurrent.shape == (90, 90)
    np.testing.assert_allclose(committee.simulate(history, 200), single.simulate(history, 200),
                               rtol=1e-8, atol=1e-8)


def test_a_committees_step_is_the_mean_of_its_members_steps_and_its_file_restores_it():
    """Member j is the reservoir of seed + j with its own ridge read-out at the committee's
    setting and ridge: the committee's one-step forecast from any history is the mean of the
    three single reservoirs' one-step forecasts, and its model file forecasts bit-identically;
    the members differ (so the test would see a wrong member or a wrong mean)."""
    x = lorenz(700)
    committee = ESN(ESNParams(**SMALL, members=3)).fit(as_data(x), seed=7)
    assert committee.metrics_["member_seeds"] == [7, 8, 9]
    given = {**SMALL, "ridge": committee.metrics_["ridge"]}
    members = [ESN(ESNParams(**given)).fit(as_data(x), seed=7 + j) for j in range(3)]
    for start in (400, 1000):
        history = Trial(DT * np.arange(150), lorenz(1300)[start - 150:start])
        steps = np.stack([member.simulate(history, 1) for member in members])
        np.testing.assert_allclose(committee.simulate(history, 1), steps.mean(axis=0),
                                   rtol=1e-9, atol=1e-9)
        assert np.ptp(steps, axis=0).max() > 1e-4
    arrays = committee.arrays()
    assert arrays["recurrent"].shape == (3, 30, 30)
    restored = ESN.restore(committee.params, arrays, variables=committee.variables_, inputs=(),
                           dt=committee.dt_)
    history = Trial(DT * np.arange(150), lorenz(1300)[850:1000])
    np.testing.assert_array_equal(restored.simulate(history, 300),
                                  committee.simulate(history, 300))


def test_model_files_without_members_load_as_one_reservoir():
    stored = ESNParams(**SMALL).to_dict()
    del stored["members"]
    assert ESNParams.from_dict(stored).members == 1
    with pytest.raises(ValueError, match="members must be a positive integer"):
        ESNParams(members=0)


def test_the_squared_readout_squares_each_members_even_units():
    """Members of 3 units: units 0, 2 of member 0 and 0, 2 of member 1 (3 and 5 overall)."""
    params = ESNParams(**{**SMALL, "units": 3}, members=2, squared_readout=True, ridge=1e-6)
    model = ESN(params).fit(as_data(lorenz(300)), seed=0)
    r, z = np.array([[2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]), np.array([[1.0]])
    np.testing.assert_array_equal(model.reservoir_.readout_features(r, z),
                                  [[4.0, 3.0, 16.0, 25.0, 6.0, 49.0, 1.0]])
    np.testing.assert_array_equal(model.reservoir_.readout_gain(r),
                                  [[4.0, 1.0, 8.0, 10.0, 1.0, 14.0]])


def test_a_committee_with_linearised_noise_training_is_refused():
    # The noise term belongs to one ridge read-out; a committee averages K plain ones.
    with pytest.raises(ValueError, match="cannot be combined"):
        ESNParams(members=3, lmnt=1e-3)
    with pytest.raises(ValueError, match="cannot be combined"):
        ESNParams(members=2, lmnt=None)
    assert ESNParams(members=3).lmnt == 0 and ESNParams(lmnt=1e-3).members == 1
