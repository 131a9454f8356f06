"""Neural Granger causality (``--method neural``, cMLP): recovery on Lorenz-96 and on a sparse
VAR, the hierarchical prox, seeding, options and the graph it writes; and the AUROC/AUPRC
scores of ``dynid.metrics.causal``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from dynid.causal import discover
from dynid.data.dataset import Dataset
from dynid.errors import UsageError
from dynid.metrics.causal import auprc, auroc
from dynid.systems import simulate, var_graph

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # The networks are small: one thread is as fast, and OpenMP threads competing with other
    # processes for two cores slow training down by an order of magnitude.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def lorenz96(n_sites: int, forcing: float, n: int, seed: int = 0) -> Dataset:
    """Lorenz-96 sampled at dt = 0.05 as in Tank et al., from a random start, transient dropped."""
    burn = 1000
    start = forcing + np.random.default_rng(seed).standard_normal(n_sites)
    sim = simulate("lorenz96", n=n + burn, dt=0.05, params={"N": n_sites, "F": forcing},
                   x0=list(start))
    return Dataset.from_arrays(sim.x[burn:], dt=0.05)


def lorenz96_graph(n_sites: int) -> np.ndarray:
    """[source][target]: x_{i-2}, x_{i-1} and x_{i+1} drive x_i (self excluded)."""
    truth = np.zeros((n_sites, n_sites), dtype=int)
    for i in range(n_sites):
        for shift in (-2, -1, 1):
            truth[(i + shift) % n_sites, i] = 1
    return truth


def var_data(n: int = 1000, seed: int = 1) -> tuple[Dataset, np.ndarray]:
    sim = simulate("var", n=n, seed=seed)
    truth = np.zeros((5, 5), dtype=int)
    for source, target, _ in var_graph():
        truth[source, target] = 1
    return Dataset.from_arrays(sim.x), truth


# -- recovery --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def l96_graph():
    return discover(lorenz96(10, 10.0, 1000), "neural", max_lag=5, seed=0)


def test_lorenz96_ranking_and_support(l96_graph):
    truth = lorenz96_graph(10)
    assert auroc(l96_graph.score_matrix, truth) >= 0.95
    assert auprc(l96_graph.score_matrix, truth) >= 0.9
    found = l96_graph.adjacency.astype(bool)
    assert np.sum(found & (truth == 1)) >= 27  # of 30 true links
    assert np.sum(found & (truth == 1)) / found.sum() >= 0.7


def test_sparse_var_finds_the_true_links():
    data, truth = var_data(n=2000)
    graph = discover(data, "neural", max_lag=2, seed=0)
    np.testing.assert_array_equal(graph.adjacency, truth)
    assert auroc(graph.score_matrix, truth) == 1.0
    # Links acting at lag 2 keep their lag-2 weights (the nested groups prune from lag 2 down).
    by_key = {(e.source, e.target, e.lag): e for e in graph.edges}
    assert by_key["x1", "x2", 2].significant and by_key["x0", "x3", 2].significant


def test_graph_contents(l96_graph):
    doc = json.loads(json.dumps(l96_graph.to_json_dict(), allow_nan=False))
    assert doc["method"] == "neural"
    assert doc["p_values"] == "not available: significance is the group-lasso support"
    assert all(edge["p_value"] is None for edge in doc["edges"])
    assert len(doc["edges"]) == 10 * 9 * 5
    assert doc["seed"] == 0 and doc["device"] == "cpu"
    path = doc["path"]
    assert np.array(path["validation_mse"]).shape == (len(path["lambda"]), 10)
    assert np.all(np.diff(path["lambda"]) > 0)
    assert len(doc["lambda"]) == 10 and set(doc["lambda"]) <= set(path["lambda"])
    g = l96_graph
    assert np.all(np.diag(g.score_matrix) == 0) and np.all(np.diag(g.adjacency) == 0)
    norms = np.array(doc["weight_norm"])  # [source][target][lag-1], self-lags on the diagonal
    source_norm = np.sqrt((norms**2).sum(axis=2)) * (1 - np.eye(10))
    np.testing.assert_allclose(doc["source_norm"], source_norm)
    for edge in g.edges:
        s, t = g.variables.index(edge.source), g.variables.index(edge.target)
        assert edge.strength == pytest.approx(norms[s, t, edge.lag - 1])
        assert edge.significant == (edge.strength > 0)
    assert np.array_equal(g.adjacency, (source_norm > 0).astype(int))
    # The exit penalty lies on the path's scale: 0, or between its first and twice its last lam.
    score = g.score_matrix[~np.eye(10, dtype=bool)]
    lam = np.array(path["lambda"])
    assert np.all((score == 0) | ((score >= lam[0]) & (score < 2 * lam[-1])))


# -- training --------------------------------------------------------------------------------------
def test_the_seed_sets_the_initial_weights():
    # (Same seed, same graph: the causal contract test.)
    data, _ = var_data(n=300)
    params = ["lam=0.1", "max_iter=40"]
    first = discover(data, "neural", params, max_lag=2, seed=7)
    other = discover(data, "neural", params, max_lag=2, seed=8)
    assert first.extra["lambda_rule"] == "given" and "path" not in first.extra
    assert not np.array_equal(first.extra["weight_norm"], other.extra["weight_norm"])


def test_given_penalty():
    data, truth = var_data(n=400)
    light = discover(data, "neural", ["lam=0.02", "max_iter=100"], max_lag=2, seed=0)
    heavy = discover(data, "neural", ["lam=1.0", "max_iter=100"], max_lag=2, seed=0)
    assert heavy.adjacency.sum() < light.adjacency.sum()
    assert np.count_nonzero(heavy.extra["weight_norm"]) < np.count_nonzero(
        light.extra["weight_norm"]
    )
    # With lam given, the links kept at lam are exactly those whose exit penalty reaches it.
    off = ~np.eye(5, dtype=bool)
    np.testing.assert_array_equal(heavy.adjacency[off], heavy.score_matrix[off] >= 1.0)
    assert auroc(heavy.score_matrix, truth) > 0.9


def test_hierarchical_prox():
    from dynid.causal.neural import _nested_norms, _prox

    rng = np.random.default_rng(0)
    w = torch.as_tensor(rng.standard_normal((2, 3, 4, 3)), dtype=torch.float64)  # (d, H, d, L)
    allowed = torch.ones(2, 4, dtype=torch.float64)
    threshold = torch.tensor([0.4, 0.9], dtype=torch.float64)
    p = _prox(w, threshold, allowed)

    def objective(v: torch.Tensor) -> torch.Tensor:
        penalty = (_nested_norms(v).sum(dim=(1, 2)) * threshold).sum()
        return 0.5 * (v - w).pow(2).sum() + penalty

    # The prox minimises the objective: no perturbation, nor any coordinate zeroed, does better.
    best = objective(p)
    for _ in range(200):
        assert objective(p + 1e-3 * torch.as_tensor(rng.standard_normal(w.shape))) >= best
    # Lags die from the largest inwards: a zero lag k means every lag above it is zero too.
    per_lag = p.pow(2).sum(dim=1).sqrt()  # (target, source, lag)
    for k in range(2):
        assert torch.all((per_lag[..., k] > 0) | (per_lag[..., k + 1] == 0))
    # With one lag it is the plain group soft-threshold; no threshold leaves w; masks zero.
    one = w[..., :1]
    norm = one.pow(2).sum(dim=(1, 3), keepdim=True).sqrt()
    expected = one * torch.clamp(1 - threshold[:, None, None, None] / norm, min=0)
    torch.testing.assert_close(_prox(one, threshold, allowed), expected)
    torch.testing.assert_close(_prox(w, torch.zeros(2, dtype=torch.float64), allowed), w)
    mask = torch.tensor([[1, 0, 1, 1], [1, 1, 1, 0]], dtype=torch.float64)
    masked = _prox(w, threshold, mask)
    assert torch.all(masked[0, :, 1] == 0) and torch.all(masked[1, :, 3] == 0)
    huge = _prox(w, torch.full((2,), 1e3, dtype=torch.float64), allowed)
    assert torch.all(huge == 0)


class _Notices:
    def __init__(self) -> None:
        self.notices: list[str] = []

    def update(self, report) -> None:  # type: ignore[no-untyped-def]
        pass

    def notice(self, message: str) -> None:
        self.notices.append(message)

    def close(self) -> None:
        pass


def _cut_after(monkeypatch, checks: int) -> None:
    """Make the training session run out of time at its ``checks``-th deadline check."""
    import itertools

    from dynid.training import TrainingSession

    counter = itertools.count()
    monkeypatch.setattr(TrainingSession, "out_of_time", lambda self: next(counter) >= checks)


@pytest.mark.parametrize("params", [["lam=0.1", "max_iter=40"], ["max_iter=15"]],
                         ids=["given-lam", "lam-path"])
def test_max_time_then_resume_gives_the_uninterrupted_result(tmp_path, monkeypatch, params):
    from dynid.training import TrainingOptions

    data, _ = var_data(n=300)
    whole = discover(data, "neural", params, max_lag=2, seed=7)
    notices = _Notices()
    with monkeypatch.context() as patch:
        _cut_after(patch, 37)  # in the second fit of the run
        cut = discover(data, "neural", params, max_lag=2, seed=7, training=TrainingOptions(
            max_time_s=60.0, checkpoint_dir=str(tmp_path), progress=notices))
    assert cut.extra["stopped"] == "max_time" and len(notices.notices) == 1
    assert cut.extra["iterations"] < whole.extra["iterations"]
    resumed = discover(data, "neural", params, max_lag=2, seed=7, training=TrainingOptions(
        checkpoint_dir=str(tmp_path), resume=True))
    assert "stopped" not in whole.extra and "stopped" not in resumed.extra
    for key in ("weight_norm", "lambda"):
        np.testing.assert_array_equal(resumed.extra[key], whole.extra[key])
    np.testing.assert_array_equal(resumed.score_matrix, whole.score_matrix)


def test_training_options_on_the_command_line(tmp_path, cli):
    data, _ = var_data(n=200)
    path = tmp_path / "var.csv"
    np.savetxt(path, data.trials[0].x, delimiter=",", header="a,b,c,d,e", comments="")
    quick = ["discover-causal", path, "--method", "neural", "-p", "lam=0.1", "-p", "max_iter=5",
             "--max-lag", "2", "--seed", "0", "--threads", "1", "--json"]
    result = cli(*quick, "--max-time", "1e-9")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stopped"] == "max_time"
    assert result.stderr.decode().startswith("--max-time 1e-09 s reached")
    quiet = cli(*quick, "--max-time", "1e-9", "-q", "--checkpoint", tmp_path / "ckpt")
    assert quiet.returncode == 0 and quiet.stderr == b""
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir())[0] == "fit-000.npz"
    # (Bad values of the options themselves are TrainingOptions' checks, in test_training.py.)
    for bad in (["--method", "granger", "--max-time", "5"], ["--method", "neural", "--resume"],
                ["--method", "neural", "--device", "cuda:x"]):
        refused = cli("discover-causal", path, *bad)
        assert refused.returncode == 2, (bad, refused.stderr)
    if not torch.cuda.is_available():
        gpu = cli("discover-causal", path, "--method", "neural", "--device", "cuda:0")
        assert gpu.returncode == 4
    fit = cli("fit", path, "--model", "var", "--max-time", "5", "-o", tmp_path / "m.dynid")
    assert fit.returncode == 2 and b"trains no network" in fit.stderr


def test_options_and_errors():
    data, _ = var_data(n=200)
    for bad in (["hidden=0"], ["lam=-1"], ["lr=0"], ["max_iter=0"], ["tolerance=nan"]):
        with pytest.raises(UsageError):
            discover(data, "neural", bad, max_lag=2)


def test_importing_the_method_does_not_import_torch():
    code = ("import sys, dynid.causal.neural, dynid.causal.group_lasso, dynid.metrics.causal; "
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
@pytest.mark.parametrize(("forcing", "n", "goal"), [(10.0, 1000, 0.98), (40.0, 500, 0.90)])
def test_lorenz96_twenty_sites(forcing, n, goal):
    graph = discover(lorenz96(20, forcing, n), "neural", max_lag=5, seed=0)
    assert auroc(graph.score_matrix, lorenz96_graph(20)) >= goal


# -- AUROC / AUPRC ---------------------------------------------------------------------------------
def test_auroc_and_auprc_by_hand():
    truth = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    # Off-diagonal entries: links (0,1)=0.9, (1,2)=0.5; non-links 0.5, 0.1, 0.2, 0.3.
    scores = np.array([[7.0, 0.9, 0.5], [0.1, 7.0, 0.5], [0.2, 0.3, 7.0]])
    # Pairs link > non-link: 0.9 beats all 4; 0.5 beats 3 and ties 1 (counts 1/2): 7.5 / 8.
    assert auroc(scores, truth) == pytest.approx(7.5 / 8)
    # Thresholds 0.9 (P=1, R=1/2) then 0.5 (both 0.5s: P=2/3, R=1): AP = 1/2 + 1/2 * 2/3.
    assert auprc(scores, truth) == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert auroc(scores, truth, exclude_diagonal=False) < auroc(scores, truth)  # 7s are non-links
    assert auroc(-scores, truth) == pytest.approx(1 - 7.5 / 8)


def test_auroc_and_auprc_match_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    off = ~np.eye(12, dtype=bool)
    for _ in range(20):
        truth = (rng.random((12, 12)) < 0.25).astype(int)
        scores = np.round(rng.random((12, 12)), 1)  # coarse: many ties
        assert auroc(scores, truth) == pytest.approx(metrics.roc_auc_score(truth[off], scores[off]))
        assert auprc(scores, truth) == pytest.approx(
            metrics.average_precision_score(truth[off], scores[off])
        )


def test_metric_errors():
    with pytest.raises(ValueError, match="link and one non-link"):
        auroc(np.ones((3, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="shape"):
        auprc(np.ones((3, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        auroc(np.full((3, 3), np.nan), np.eye(3)[::-1])
