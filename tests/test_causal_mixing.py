"""``--method mixing``: parents of a node that mixes their hidden states found and oriented on a
known graph, the effective sample size that discounts slow drivers, and the options' checks."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.causal import discover
from dynid.causal.mixing import MixingParams, effective_samples, window_r2
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.systems import simulate

N = 1000


def standardized(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / x.std(axis=0)


def mixed_graph(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Observed first coordinates (N, 4) of C, A, D, B and the truth [source][target]: A (Lorenz)
    and B (Rossler) drive C, which is at each sample a linear map of their 3-D states (as in
    CausalDynamics' coupled graphs); D (Chen) is unrelated. C comes first, so no method can
    lean on the column order."""
    a = standardized(simulate("lorenz", n=N, dt=0.01, seed=seed).x)
    b = standardized(simulate("rossler", n=N, dt=0.1, seed=seed + 10).x)
    d = standardized(simulate("chen", n=N, dt=0.005, seed=seed + 20).x)
    child = a @ [1.0, 0.5, 0.0] + b @ [-0.8, 0.6, 0.3]
    truth = np.zeros((4, 4), dtype=int)
    truth[1, 0] = truth[3, 0] = 1
    return np.column_stack([child, a[:, 0], d[:, 0], b[:, 0]]), truth


@pytest.mark.parametrize("seed", [0, 1])
def test_finds_and_orients_the_parents_of_a_mixing_node(seed):
    x, truth = mixed_graph(seed)
    graph = discover(Dataset.from_arrays(x, variables=["C", "A", "D", "B"]), "mixing", seed=0)
    np.testing.assert_array_equal(graph.adjacency, truth)
    score = graph.score_matrix
    # Both parents outrank every other ordered pair, the reversed links included.
    assert score[truth == 1].min() > score[(truth == 0) & ~np.eye(4, dtype=bool)].max()
    links = {(e.source, e.target): e.link for e in graph.edges}
    assert links[("A", "C")] == "-->" and links[("C", "A")] == "<--"
    assert all(e.lag == 0 for e in graph.edges)


def test_slow_independent_drivers_are_not_dependent():
    # Two unrelated sinusoids of about one period per record: |r| is large by chance, and
    # Bartlett's effective sample size (a few samples, not 1,000) says it is not evidence.
    t = np.linspace(0.0, 1.0, N)
    x = np.column_stack([np.sin(2 * np.pi * 1.1 * t + 0.3), np.sin(2 * np.pi * 0.8 * t + 1.0)])
    assert abs(np.corrcoef(x, rowvar=False)[0, 1]) > 0.5
    graph = discover(Dataset.from_arrays(x), "mixing", seed=0)
    assert graph.adjacency.sum() == 0
    assert graph.extra["effective_samples"][0, 1] < 20


def test_effective_samples_of_white_noise_are_about_n():
    x = standardized(np.random.default_rng(0).standard_normal((N, 3)))
    n_eff = effective_samples([x])
    assert np.all((n_eff > 0.8 * N) & (n_eff <= N))


def test_window_r2_recovers_a_linear_filter_of_the_source():
    # y(t) = x(t - 4) - 0.5 x(t + 8): inside a window of +-8 taps 4 apart, so R^2 = 1; and the
    # reverse fit is worse (a filter is not inverted by a short window).
    x = np.random.default_rng(1).standard_normal(N + 16)
    y = x[4:N + 4] - 0.5 * x[16:N + 16]
    pair = standardized(np.column_stack([x[8:N + 8], y]))
    r2 = window_r2([pair], window=8, step=4)
    assert r2[0, 1] > 0.999 and r2[1, 0] < r2[0, 1]


def test_too_short_a_record_for_the_window_is_refused():
    x = np.random.default_rng(0).standard_normal((100, 2))
    with pytest.raises(DataError, match="window"):
        discover(Dataset.from_arrays(x), "mixing", seed=0)


@pytest.mark.parametrize("bad", [{"window": 0}, {"step": 0}, {"window": 4, "step": 5}])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError):
        MixingParams(**bad)


def test_max_lag_is_kept_but_links_are_at_lag_zero():
    x, _ = mixed_graph(0)
    graph = discover(Dataset.from_arrays(x), "mixing", max_lag=3)
    assert graph.max_lag == 3 and {e.lag for e in graph.edges} == {0}
