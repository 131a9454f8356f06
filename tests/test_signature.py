"""Ground truth for the log-signature pieces and the ``signature`` backend.

Signatures are checked against closed forms that do not use Chen's relation (which builds
them): the exponential of a straight segment, the double sum of a polygon's level 2, the shuffle
identities, and the signed area of a regular polygon. The backend is checked on a damped linear
oscillator sampled at irregular times, against the exact solution. Round trips and the seed
contract are in tests/test_backend_contract.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg

from dynid.data.dataset import Dataset, Trial
from dynid.models.features.logsignature import (
    chen,
    log_signature,
    logsignature_words,
    lyndon_words,
    signature,
)
from dynid.models.signature import Signature, SignatureParams, signature_design

RNG = np.random.default_rng(3)


def entry(level: np.ndarray, word: tuple[int, ...], channels: int) -> float:
    """The coefficient of ``word`` in a flat level."""
    return level[np.ravel_multi_index(word, (channels,) * len(word))]


def test_a_straight_segment_has_the_exponential_of_its_increment_as_signature():
    increment = np.array([0.3, -1.2, 2.0])
    # Collinear points: the polygon is one straight segment, however it is cut.
    path = np.array([[0.0, 0.0, 0.0], *(np.array([0.1, 0.5, 1.0])[:, None] * increment)])
    s1, s2, s3 = signature(path, 3)
    np.testing.assert_allclose(s1, increment)
    np.testing.assert_allclose(s2, np.outer(increment, increment).ravel() / 2)
    np.testing.assert_allclose(s3, np.einsum("i,j,k->ijk", *[increment] * 3).ravel() / 6)
    # ... so its log-signature is the increment alone.
    logs = log_signature([s1, s2, s3])
    np.testing.assert_allclose(logs[1], 0.0, atol=1e-12)
    np.testing.assert_allclose(logs[2], 0.0, atol=1e-12)


def test_level_two_of_a_polygon_is_the_iterated_sum_of_its_increments():
    path = RNG.normal(size=(7, 3))
    steps = np.diff(path, axis=0)
    # S^ij = sum over segments k < l of D_k^i D_l^j + sum over k of D_k^i D_k^j / 2.
    expected = sum(np.outer(steps[k], steps[l]) for k in range(6) for l in range(k + 1, 6))
    expected = expected + sum(np.outer(step, step) for step in steps) / 2
    np.testing.assert_allclose(signature(path, 2)[1], expected.ravel())


def test_chen_the_signature_of_a_concatenation_is_the_tensor_product():
    path = RNG.normal(size=(9, 2))
    whole = signature(path, 3)
    joined = chen(signature(path[:4], 3), signature(path[3:], 3))
    for level, expected in zip(joined, whole):
        np.testing.assert_allclose(level, expected)


def test_shuffle_identities():
    channels = 3
    s1, s2, s3 = signature(RNG.normal(size=(6, channels)), 3)
    for i, j, k in itertools.product(range(channels), repeat=3):
        # S^i S^j = S^ij + S^ji and S^i S^jk = S^ijk + S^jik + S^jki.
        assert s1[i] * s1[j] == pytest.approx(entry(s2, (i, j), 3) + entry(s2, (j, i), 3))
        assert s1[i] * entry(s2, (j, k), 3) == pytest.approx(
            entry(s3, (i, j, k), 3) + entry(s3, (j, i, k), 3) + entry(s3, (j, k, i), 3))


@pytest.mark.parametrize("sides", [4, 12, 100])
def test_the_log_signature_area_of_a_closed_polygon_is_its_signed_area(sides):
    angle = np.linspace(0.0, 2 * np.pi, sides + 1)
    circle = np.stack([np.cos(angle), np.sin(angle)], axis=-1)  # counter-clockwise, closed
    words = lyndon_words(2, 2)
    assert words == ((0,), (1,), (0, 1))
    coordinates = logsignature_words(circle, 2)
    np.testing.assert_allclose(coordinates[:2], 0.0, atol=1e-12)  # a closed path: no increment
    # The area of a regular polygon inscribed in the unit circle; clockwise flips the sign.
    assert coordinates[2] == pytest.approx(sides / 2 * np.sin(2 * np.pi / sides))
    assert logsignature_words(circle[::-1], 2)[2] == pytest.approx(-coordinates[2])


def test_lyndon_words_count_the_free_lie_algebra():
    # Witt's formula: c, c(c-1)/2 and (c^3 - c)/3 basis elements at levels 1, 2 and 3.
    for c in (2, 3, 5):
        lengths = [len(w) for w in lyndon_words(c, 3)]
        assert [lengths.count(k) for k in (1, 2, 3)] == [c, c * (c - 1) // 2, (c**3 - c) // 3]


def test_batched_windows_give_the_signatures_of_each():
    paths = RNG.normal(size=(4, 5, 3))
    batched = logsignature_words(paths, 3)
    for path, row in zip(paths, batched):
        np.testing.assert_allclose(logsignature_words(path, 3), row)


# A damped oscillator x' = A x, period 2 pi / 2, decay time 10.
A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
X0 = np.array([2.0, 0.0])
STEP = 0.05


def exact(times: np.ndarray) -> np.ndarray:
    return np.stack([scipy.linalg.expm(A * s) @ X0 for s in times])


@pytest.mark.parametrize("depth", [2, 3])
def test_forecasts_an_irregularly_sampled_linear_system(depth):
    rng = np.random.default_rng(0)
    t = np.concatenate([[0.0], np.cumsum(STEP * (1 + rng.uniform(-0.5, 0.5, 400)))])
    x = exact(t)
    data = Dataset.from_arrays(x[:-100], t=t[:-100])
    assert data.dt is None
    model = Signature(SignatureParams(depth=depth)).fit(data)
    assert model.dt_ == pytest.approx(np.median(np.diff(t[:-100])))
    # Within the data's span: the next 100 samples, at their own irregular times.
    history = Trial(t[:-100], x[:-100])
    run = model.simulate_at(history, t[-100:])
    assert np.sqrt(np.mean((run - x[-100:]) ** 2)) / x.std() < 1e-3
    # Past the data: one period at the median step, against the exact continuation.
    horizon = int(np.pi / model.dt_)
    forecast = model.simulate(history, horizon)
    truth = exact(t[-101] + model.dt_ * np.arange(1, horizon + 1))
    assert np.sqrt(np.mean((forecast - truth) ** 2)) / x.std() < 1e-3


def test_the_basepoint_lets_the_features_see_where_a_window_is():
    z = RNG.normal(size=(4, 2))
    tau = np.arange(4.0)
    gap = np.array(1.0)
    for basepoint, moves in ((False, False), (True, True)):
        params = SignatureParams(basepoint=basepoint)
        here, shifted = (signature_design(w, tau, gap, params) for w in (z, z + 3.0))
        log_signature_part = slice(2, (here.size - 1) // 2)  # phi's columns after z_t
        assert np.allclose(here[log_signature_part], shifted[log_signature_part]) != moves
