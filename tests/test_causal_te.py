"""Transfer entropy: direction of linear and nonlinear couplings, agreement with the Gaussian
closed form, conditioning on other variables, permutation sizing, trials, bad input and worker
processes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_script
from dynid.causal import CausalSettings, discover
from dynid.causal.common import default_permutations, lone_link_can_pass
from dynid.causal.te import TEParams, TransferEntropy
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError


def coupled_pair(n: int, drive, seed: int, noise_y: float = 1.0) -> np.ndarray:
    """(n, 2): x is AR(1); y(t) = 0.4 y(t-1) + drive(x(t-1)) + noise: x drives y at lag 1."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n + 100, 2))
    x = np.zeros((n + 100, 2))
    for t in range(1, n + 100):
        x[t, 0] = 0.5 * x[t - 1, 0] + e[t, 0]
        x[t, 1] = 0.4 * x[t - 1, 1] + drive(x[t - 1, 0]) + noise_y * e[t, 1]
    return x[100:]


def te_graph(x: np.ndarray, names=("x", "y"), params=(), **settings):
    return discover(Dataset.from_arrays(x, variables=list(names)), "te", params=list(params),
                    **{"max_lag": 2, "seed": 0, **settings})


def significant(graph) -> set[tuple[str, str, int]]:
    return {(e.source, e.target, e.lag) for e in graph.significant_edges}


@pytest.fixture(scope="module")
def linear():
    x = coupled_pair(500, lambda v: 0.6 * v, seed=1)
    return x, te_graph(x)


def test_linear_coupling_direction(linear):
    _, graph = linear
    found = significant(graph)
    assert ("x", "y", 1) in found
    assert not {e for e in found if e[0] == "y"}
    assert graph.adjacency.tolist() == [[0, 1], [0, 0]]


def test_linear_strength_matches_gaussian_transfer_entropy(linear):
    # For Gaussian processes TE is half the log ratio of residual variances of the restricted and
    # full regressions (Barnett, Barrett & Seth 2009), computed here from the same sample.
    x, graph = linear
    y_now, y_past, x_past = x[2:, 1], x[1:-1, 1], x[1:-1, 0]

    def rss(*columns):
        design = np.column_stack([np.ones_like(y_now), *columns])
        residual = y_now - design @ np.linalg.lstsq(design, y_now, rcond=None)[0]
        return residual @ residual

    truth = 0.5 * np.log(rss(y_past) / rss(y_past, x_past))
    estimate = graph.extra["transfer_entropy"][0, 1, 0]
    # KSG spread at n=500 in 3 dimensions is about 0.02 nats.
    assert estimate == pytest.approx(truth, abs=0.06)
    assert next(e for e in graph.edges if (e.source, e.target, e.lag) == ("x", "y", 1)).strength \
        == estimate


def test_nonlinear_coupling_direction():
    # y depends on x(t-1)^2: uncorrelated with x(t-1), invisible to linear Granger tests.
    x = coupled_pair(500, lambda v: 0.5 * v**2, seed=2, noise_y=0.7)
    assert abs(np.corrcoef(x[1:, 1], x[:-1, 0])[0, 1]) < 0.15
    found = significant(te_graph(x))
    assert ("x", "y", 1) in found
    assert not {e for e in found if e[0] == "y"}


@pytest.mark.parametrize("fit_null", [0, 39])
def test_condition_on_all_removes_an_indirect_link(fit_null: int):
    # x -> y -> z, each at lag 1. Given only z's own past, x(t-2) predicts z(t) through y(t-1);
    # conditioning on y's past as well removes that path. fit_null=0: permutation p-values, the
    # indirect link at their floor 1/50; 39: the fitted normal null resolves it far below that.
    rng = np.random.default_rng(4)
    n = 400
    e = rng.standard_normal((n + 50, 3))
    v = np.zeros((n + 50, 3))
    for t in range(1, n + 50):
        v[t, 0] = 0.5 * v[t - 1, 0] + e[t, 0]
        v[t, 1] = 0.9 * v[t - 1, 0] + 0.5 * e[t, 1]
        v[t, 2] = 0.9 * v[t - 1, 1] + 0.5 * e[t, 2]
    data = Dataset.from_arrays(v[50:], variables=["x", "y", "z"])
    settings = CausalSettings(max_lag=2, seed=0, correction="none")
    runs = {
        condition: TransferEntropy(TEParams(condition_on=condition, n_permutations=49,
                                            fit_null=fit_null))
        .discover(data, settings)
        for condition in ("target", "all")
    }
    indirect = (0, 2, 1)  # [x][z][lag 2]
    assert runs["target"].extra["transfer_entropy"][indirect] > 0.3
    if fit_null:
        assert runs["target"].extra["normal_null"][indirect]
        assert runs["target"].extra["p_value_raw"][indirect] < 1e-6
    else:
        assert runs["target"].extra["p_value_raw"][indirect] == pytest.approx(1 / 50)
    assert abs(runs["all"].extra["transfer_entropy"][indirect]) < 0.05
    assert runs["all"].extra["p_value_raw"][indirect] > 0.1
    assert {("x", "y", 1), ("y", "z", 1)} <= significant(runs["all"])


def test_default_permutations_make_significance_reachable():
    # p >= 1 / (n + 1); one link among m tests survives Bonferroni/BH only if m / (n + 1) <= alpha.
    assert default_permutations(10, 0.05, "bh") == 200
    assert default_permutations(10, 0.05, "none") == 99
    assert default_permutations(2, 0.05, "bonferroni") == 99
    for m in (2, 10, 60, 500):
        n = default_permutations(m, 0.01, "bh")
        assert lone_link_can_pass(n, m, 0.01, "bh")
        assert not lone_link_can_pass(n // 2, m, 0.01, "bh") or n == 99


def test_extra_and_json(linear):
    _, graph = linear
    extra = graph.extra
    assert extra["n_permutations"] == 99  # m = 4 tests, 4 / 0.05 = 80 < 99
    assert extra["p_value_floor"] == pytest.approx(1 / 100)
    assert extra["lone_link_can_pass"]
    assert extra["transfer_entropy"].shape == (2, 2, 2)
    assert len(graph.edges) == 4
    doc = json.loads(json.dumps(graph.to_json_dict()))
    assert doc["method"] == "te" and doc["history"] == 1


def test_trials_do_not_mix_and_seed_reproduces():
    x = coupled_pair(400, lambda v: 0.8 * v, seed=4)
    params = ["n_permutations=49", "history=2"]
    one = te_graph(x, params=params, max_lag=1)
    data = Dataset.from_arrays([x[:200], x[200:]], variables=["x", "y"])
    two = discover(data, "te", params=params, max_lag=1, seed=0)
    # Each trial gives n - max(max_lag, history) rows.
    assert one.extra["n_rows"] == 398 and two.extra["n_rows"] == 396
    assert ("x", "y", 1) in significant(two)
    again = discover(data, "te", params=params, max_lag=1, seed=0)
    assert [e.p_value for e in two.edges] == [e.p_value for e in again.edges]


@pytest.mark.parametrize("bad", ["history=0", "k=0", "condition_on=other", "n_permutations=0",
                                 "fit_null=5", "workers=-1"])
def test_bad_params(bad: str):
    with pytest.raises(UsageError):
        TEParams.parse([bad])


def test_bad_data():
    rng = np.random.default_rng(0)
    good = rng.standard_normal((200, 2))
    settings = CausalSettings(max_lag=2, seed=0)
    with pytest.raises(DataError, match="60 rows"):
        TransferEntropy().discover(Dataset.from_arrays(good[:40]), settings)


def test_worker_processes_give_the_same_answers():
    # Every test draws its null values from its own stream (seed, test, samples done), so the
    # split of the tests over processes does not change a number.
    x = coupled_pair(300, lambda v: 0.6 * v, seed=5)
    x = np.column_stack([x, np.random.default_rng(5).standard_normal(300)])
    one, two = (te_graph(x, names=("x", "y", "w"), params=[f"workers={w}"], max_lag=1)
                for w in (1, 2))
    assert one.extra["workers"] == 1 and two.extra["workers"] == 2
    for key in ("transfer_entropy", "p_value_raw", "permutations_done", "normal_null"):
        np.testing.assert_array_equal(one.extra[key], two.extra[key])
    assert ("x", "y", 1) in significant(two)


def test_script_without_main_guard_fails_instead_of_hanging(tmp_path):
    # Spawned workers import the main script again, so an unguarded script starts te again in
    # each worker. That must end in a clear error naming the guard. Before, the call hung: the
    # problem (here 2 x 3,999 x 3 floats, 190 KiB, more than a pipe holds) was written into each
    # dying worker's start-up pipe, whose read end CPython's spawn keeps open in the parent.
    result = run_script(
        "import numpy as np\n"
        "from dynid.causal import discover\n"
        "from dynid.data.dataset import Dataset\n"
        "x = np.random.default_rng(0).standard_normal((4000, 3))\n"
        "discover(Dataset.from_arrays(x), 'te', max_lag=1, params=['workers=2'])\n",
        cwd=tmp_path)
    assert result.returncode == 1
    assert 'dynid.errors.UsageError: the worker processes re-ran the main script' in result.stderr
    assert '`if __name__ == "__main__":`' in result.stderr
