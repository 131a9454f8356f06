"""``--method crosspred``: parents of a node that mixes their hidden states found and oriented on a
known graph, no direction where predictability ties, its building blocks against exact answers, and
the options' checks."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.causal import discover
from dynid.causal.crosspred import CrossPredictionParams, blocked_cv_r2, delay_taps, partial_r2
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.systems import simulate

N = 1000


def standardized(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / x.std(axis=0)


def mixed_graph() -> tuple[np.ndarray, np.ndarray]:
    """Observed first coordinates (N, 4) of C, A, D, B and the truth [source][target]: A (Lorenz)
    and B (Rossler) drive C, which is at each sample a linear map of their 3-D states (as in
    CausalDynamics' coupled graphs); D (Chen) is unrelated. C comes first, so no method can
    lean on the column order."""
    a = standardized(simulate("lorenz", n=N, dt=0.01, seed=0).x)
    b = standardized(simulate("rossler", n=N, dt=0.1, seed=10).x)
    d = standardized(simulate("chen", n=N, dt=0.005, seed=20).x)
    child = a @ [1.0, 0.5, 0.0] + b @ [-0.8, 0.6, 0.3]
    truth = np.zeros((4, 4), dtype=int)
    truth[1, 0] = truth[3, 0] = 1
    return np.column_stack([child, a[:, 0], d[:, 0], b[:, 0]]), truth


def test_finds_and_orients_the_parents_of_a_mixing_node():
    x, truth = mixed_graph()
    graph = discover(Dataset.from_arrays(x, variables=["C", "A", "D", "B"]), "crosspred", seed=0)
    np.testing.assert_array_equal(graph.adjacency, truth)
    score = graph.score_matrix
    # Both parents outrank every other ordered pair, the reversed links included.
    assert score[truth == 1].min() > score[(truth == 0) & ~np.eye(4, dtype=bool)].max()
    links = {(e.source, e.target): e.link for e in graph.edges}
    assert links[("A", "C")] == "-->" and links[("C", "A")] == "<--"
    # The mixture is the least predictable column: each root more than the child.
    own = graph.extra["own_r2"]
    assert own[0] < min(own[1], own[3])
    assert all(e.lag == 0 and np.isnan(e.p_value) for e in graph.edges)


def test_trials_are_embedded_separately_and_pooled():
    # The same record cut in two trials, each embedded on its own and their rows pooled: the
    # same parents, nearly the same scores (the halves lose the delay vectors' first rows).
    x, truth = mixed_graph()
    whole = discover(Dataset.from_arrays(x), "crosspred", seed=0)
    halves = discover(Dataset.from_arrays([x[: N // 2], x[N // 2:]]), "crosspred", seed=0)
    np.testing.assert_array_equal(halves.adjacency, truth)
    np.testing.assert_allclose(halves.score_matrix, whole.score_matrix, atol=0.1)


def test_two_sinusoids_get_no_direction():
    # Both are predicted exactly from their own past, so predictability cannot order them: no
    # direction, no significant link, and the same score both ways.
    t = np.linspace(0.0, 1.0, N)
    x = np.column_stack([np.sin(2 * np.pi * 6.0 * t), np.sin(2 * np.pi * 6.0 * t + 1.0)])
    graph = discover(Dataset.from_arrays(x), "crosspred", seed=0)
    assert {e.link for e in graph.edges} == {"o-o"}
    assert graph.adjacency.sum() == 0
    assert graph.score_matrix[0, 1] == graph.score_matrix[1, 0]


def test_delay_taps_are_a_quarter_of_the_efolding_time():
    # A sinusoid of period 100 samples: its autocorrelation cos(2 pi k / 100) first drops below
    # 1/e at k = 20 (100 acos(1/e) / 2 pi = 19.1), so taps 5 samples apart; white noise: 1.
    k = np.arange(4000)
    noise = np.random.default_rng(0).standard_normal(4000)
    x = np.column_stack([np.sin(2 * np.pi * k / 100), noise])
    np.testing.assert_array_equal(delay_taps([standardized(x)]), [5, 1])


def test_blocked_cv_r2_of_an_exact_and_of_an_unrelated_target():
    rng = np.random.default_rng(1)
    design = rng.standard_normal((600, 3))
    y = np.column_stack([design @ [1.0, -2.0, 0.5] + 3.0, rng.standard_normal(600)])
    r2 = blocked_cv_r2(design, y, folds=5)
    assert r2[0] > 0.999  # the small ridge costs < 1e-3
    assert -0.1 < r2[1] < 0.02  # noise: out of sample no better than its mean
    # Without the ridge an exact linear target is predicted exactly out of sample; the default
    # ridge's shrinkage is what costs the rest.
    exact = blocked_cv_r2(design, y[:, [0]], folds=5, ridge=0.0)[0]
    assert exact > 1.0 - 1e-12 and exact > r2[0]


def test_too_short_a_record_is_refused():
    x = np.random.default_rng(0).standard_normal((100, 2))
    with pytest.raises(DataError, match="crosspred needs at least"):
        discover(Dataset.from_arrays(x), "crosspred", seed=0)


@pytest.mark.parametrize("bad", [{"dim": 0}, {"horizon": 0}, {"folds": 1}, {"min_r2": 1.0},
                                 {"dim": True}])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError):
        CrossPredictionParams(**bad)


def dominated_graph() -> tuple[np.ndarray, np.ndarray]:
    """Observed first coordinates (N, 4) of C, A, D, B and the truth: C sums a large map of A's
    (Lorenz) state and a small one of B's (Rossler), so B's share of C is a few per cent; D
    (Chen) is unrelated."""
    a = standardized(simulate("lorenz", n=N, dt=0.01, seed=0).x)
    b = standardized(simulate("rossler", n=N, dt=0.1, seed=10).x)
    d = standardized(simulate("chen", n=N, dt=0.005, seed=20).x)
    child = 5.0 * a @ [1.0, 0.5, 0.0] + b @ [-0.8, 0.6, 0.3]
    truth = np.zeros((4, 4), dtype=int)
    truth[1, 0] = truth[3, 0] = 1
    return np.column_stack([child, a[:, 0], d[:, 0], b[:, 0]]), truth


def test_a_small_parent_shows_once_the_dominant_one_is_conditioned_on():
    # Alone, B's delay vector predicts too little of C for a link; given A's (C's strongest
    # upstream candidate) it predicts most of what A leaves, so B -> C becomes significant and
    # both parents outrank every other pair. Pairwise (-p conditional=false) B is missed.
    x, truth = dominated_graph()
    data = Dataset.from_arrays(x, variables=["C", "A", "D", "B"])
    pairwise = discover(data, "crosspred", ["conditional=false"], seed=0)
    assert pairwise.adjacency[3, 0] == 0 and pairwise.extra["dependence"][3, 0] < 0.1
    graph = discover(data, "crosspred", seed=0)
    np.testing.assert_array_equal(graph.adjacency, truth)
    off = ~np.eye(4, dtype=bool)
    assert graph.score_matrix[truth == 1].min() > graph.score_matrix[(truth == 0) & off].max()
    assert graph.extra["conditioned_on"][3, 0] == 1  # B -> C is tested given A
    assert graph.extra["partial_r2"][3, 0] > 0.5 > graph.extra["cross_r2"][3, 0]
    # The unrelated D explains nothing of what A leaves of C.
    assert graph.extra["partial_r2"][2, 0] < 0.1
    np.testing.assert_array_equal(graph.extra["marginal_dependence"], pairwise.extra["dependence"])


def test_partial_r2_against_an_exact_answer():
    # y = 3 u + 0.5 v with u, v, w independent: u alone explains 9 / 9.25 of y, v given u all of
    # the rest, w given u nothing; u itself is conditioned on v (the other upstream candidate).
    rng = np.random.default_rng(2)
    u, v, w = rng.standard_normal((3, 2000))
    y_col = 3.0 * u + 0.5 * v
    now = np.stack([u, v, w, y_col], axis=1)[:, :, None]  # (rows, d, dim 1)
    y = np.column_stack([u, v, w, y_col])
    cross = np.array([blocked_cv_r2(now[:, i, :], y, folds=5) for i in range(4)])
    np.fill_diagonal(cross, 0.0)
    forward = np.zeros((4, 4), dtype=bool)
    forward[:3, 3] = True  # u, v, w are upstream of y
    partial, given = partial_r2(now, y, cross, (cross + cross.T) / 2, forward, folds=5)
    assert given[1, 3] == 0 and given[2, 3] == 0 and given[0, 3] == 1
    assert partial[1, 3] > 0.99  # v explains all that u leaves
    assert abs(partial[2, 3]) < 0.01  # w nothing
    assert partial[0, 3] > 0.99  # u explains all that v leaves (9 / 9.25 of y)
    # Targets without an upstream candidate keep the marginal R^2.
    np.testing.assert_array_equal(given[:, 0], -1)
    np.testing.assert_array_equal(partial[1:, 0], cross[1:, 0])
