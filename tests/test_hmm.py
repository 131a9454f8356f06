"""The ``hmm`` and ``arhmm`` backends against ground truth: forward-backward and Viterbi against
brute-force enumeration; known 3-state chains simulated with numpy (states up to relabelling,
transition matrix, states=auto); interval coverage; the ``states`` command."""

from __future__ import annotations

import functools
import itertools
import json

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.stats import multivariate_normal

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.errors import UsageError
from dynid.models.latent import forward_backward_lapack, forward_backward_numba, markov
from dynid.models.latent.emissions import Autoregressive, Gaussian
from dynid.models.latent.forward_backward_choice import Passes, compiled

from conftest import run_script, write_csv

TRANSITION = np.array([[0.95, 0.03, 0.02], [0.02, 0.95, 0.03], [0.03, 0.02, 0.95]])
MEANS = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
SD = 0.7
N_TRAIN = 1500


def rotation(angle: float, radius: float) -> np.ndarray:
    return radius * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


# Three stable regimes with distinct dynamics and fixed points.
DYNAMICS = np.stack([rotation(0.3, 0.9), rotation(-0.5, 0.8), np.array([[0.5, 0.0], [0.0, 0.95]])])
OFFSETS = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
AR_SD = 0.1


def chain(n: int, rng: np.random.Generator) -> np.ndarray:
    z = np.empty(n, dtype=int)
    z[0] = rng.integers(3)
    for t in range(1, n):
        z[t] = rng.choice(3, p=TRANSITION[z[t - 1]])
    return z


def simulate_hmm(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = chain(n, rng)
    return z, MEANS[z] + SD * rng.normal(size=(n, 2))


def simulate_arhmm(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = chain(n, rng)
    x = np.zeros((n, 2))
    for t in range(1, n):
        x[t] = DYNAMICS[z[t]] @ x[t - 1] + OFFSETS[z[t]] + AR_SD * rng.normal(size=2)
    return z, x


def dataset(x: np.ndarray) -> Dataset:
    return Dataset.from_arrays(x, dt=0.1, variables=["a", "b"])


def matching(found: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, float]:
    """The relabelling found -> truth maximising agreement (Hungarian), and the accuracy."""
    confusion = np.zeros((3, 3))
    np.add.at(confusion, (found, truth), 1)
    rows, cols = linear_sum_assignment(-confusion)
    mapping = np.empty(3, dtype=int)
    mapping[rows] = cols
    return mapping, float(confusion[rows, cols].sum() / truth.size)


@functools.cache
def fitted(name: str):
    z, x = (simulate_hmm if name == "hmm" else simulate_arhmm)(N_TRAIN, seed=1)
    model = api.fit(dataset(x), name, {"states": "3", "restarts": 2}, seed=0, device="cpu").model
    return model, z, x


# -- inference against enumeration of every state sequence ---------------------------------------
@pytest.fixture(params=[forward_backward_numba, forward_backward_lapack], ids=["numba", "lapack"])
def passes(request):
    """markov.forward_backward by the compiled passes, then by the banded numpy ones."""
    return Passes(fixed=request.param.forward_backward)


def test_forward_backward_and_viterbi_match_enumeration(passes):
    rng = np.random.default_rng(0)
    k, steps = 3, 6
    x = rng.normal(size=(steps, 2))
    emission = Gaussian(rng.normal(size=(k, 2)), np.stack([np.eye(2) * s for s in (0.5, 1.0, 2.0)]), 0.0)
    model = markov.HiddenMarkov(np.array([0.5, 0.3, 0.2]), TRANSITION, emission)
    densities = np.stack([multivariate_normal(emission.means[j], emission.covs[j]).pdf(x) for j in range(k)], axis=1)
    joint = {}
    for path in itertools.product(range(k), repeat=steps):
        p = model.initial[path[0]] * densities[0, path[0]]
        for t in range(1, steps):
            p *= TRANSITION[path[t - 1], path[t]] * densities[t, path[t]]
        joint[path] = p
    total = sum(joint.values())
    marginals = np.zeros((steps, k))
    pairs = np.zeros((k, k))
    for path, p in joint.items():
        marginals[np.arange(steps), path] += p / total
        for t in range(1, steps):
            pairs[path[t - 1], path[t]] += p / total
    posterior = markov.forward_backward(model, emission.log_density(x), passes)
    assert posterior.loglik == pytest.approx(np.log(total), rel=1e-12)
    np.testing.assert_allclose(posterior.probabilities, marginals, atol=1e-12)
    np.testing.assert_allclose(posterior.transitions, pairs, atol=1e-12)
    assert tuple(markov.viterbi(model, emission.log_density(x))) == max(joint, key=joint.__getitem__)


def test_forward_backward_does_not_underflow_far_from_every_state(passes):
    emission = Gaussian(np.zeros((2, 1)), np.stack([np.eye(1)] * 2), 0.0)
    model = markov.HiddenMarkov(np.array([0.5, 0.5]), np.array([[0.9, 0.1], [0.1, 0.9]]), emission)
    x = np.full((50, 1), 60.0)  # density ~ exp(-1800) per sample
    posterior = markov.forward_backward(model, emission.log_density(x), passes)
    expected = 50 * multivariate_normal(0.0, 1.0).logpdf(60.0)
    assert posterior.loglik == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(posterior.probabilities, 0.5)


def reference_forward_backward(model, log_b):
    """The textbook scaled recursion, one sample at a time (Rabiner 1989): loglik, state
    probabilities, expected transition counts."""
    steps, k = log_b.shape
    shift = log_b.max(axis=1, keepdims=True)
    b = np.exp(log_b - shift)
    a = model.transition
    alpha, beta, scale = np.empty((steps, k)), np.ones((steps, k)), np.empty(steps)
    current = model.initial * b[0]
    for t in range(steps):
        if t:
            current = (current @ a) * b[t]
        scale[t] = current.sum()
        current = current / scale[t]
        alpha[t] = current
    for t in range(steps - 1, 0, -1):
        beta[t - 1] = a @ (b[t] * beta[t]) / scale[t]
    gamma = alpha * beta
    xi = a * (alpha[:-1].T @ (b[1:] * beta[1:] / scale[1:, None]))
    return np.log(scale).sum() + shift.sum(), gamma / gamma.sum(axis=1, keepdims=True), xi


@pytest.mark.parametrize("switch, separation", [(0.03, 1.0), (1e-30, 1.0), (1e-150, 10.0)])
def test_forward_backward_matches_the_stepwise_recursion(passes, switch, separation):
    """Long chains (several banded solves of the fallback); rare switches make the scaled
    vectors shrink fast (the fallback's restarts), and with states too far apart to stay in the
    wrong one, by 1e-150 in one step (that step taken on its own)."""
    rng = np.random.default_rng(1)
    k, steps = 3, 2500
    transition = np.full((k, k), switch) + np.eye(k) * (1 - k * switch)
    truth = np.repeat(rng.integers(k, size=steps // 50), 50)
    means = separation * MEANS
    emission = Gaussian(means, np.stack([np.eye(2) * SD**2] * k), 0.0)
    x = means[truth] + SD * rng.normal(size=(steps, 2))
    model = markov.HiddenMarkov(np.full(k, 1 / k), transition, emission)
    log_b = emission.log_density(x)
    loglik, gamma, xi = reference_forward_backward(model, log_b)
    posterior = markov.forward_backward(model, log_b, passes)
    assert posterior.loglik == pytest.approx(loglik, rel=1e-12)
    np.testing.assert_allclose(posterior.probabilities, gamma, atol=1e-10)
    np.testing.assert_allclose(posterior.transitions, xi, rtol=1e-8, atol=1e-8)


def known_model(x: np.ndarray) -> markov.HiddenMarkov:
    """The true 3-state model of ``simulate_hmm`` with a uniform start."""
    emission = Gaussian(MEANS, np.stack([np.eye(2) * SD**2] * 3), 0.0)
    return markov.HiddenMarkov(np.full(3, 1 / 3), TRANSITION, emission)


def test_compiled_and_banded_passes_agree_on_a_long_chain():
    _, x = simulate_hmm(20000, seed=3)
    model = known_model(x)
    log_b = model.emission.log_density(x)
    found = []
    for passes in (forward_backward_numba, forward_backward_lapack):
        probabilities, transitions = np.empty(log_b.shape), np.empty((3, 3))
        found.append((passes.forward_backward(model.initial, model.transition, log_b, probabilities, transitions), probabilities, transitions))
    (compiled, p_compiled, t_compiled), (banded, p_banded, t_banded) = found
    assert compiled == pytest.approx(banded, rel=1e-10)
    np.testing.assert_allclose(p_compiled, p_banded, atol=1e-12)
    np.testing.assert_allclose(t_compiled, t_banded, rtol=1e-10)


def test_a_fit_runs_the_numpy_passes_until_numba_would_have_paid_for_its_start():
    # A states=3 fit of 500 samples runs about 50 passes: numba's start-up (0.7 CPU s) would
    # cost ten times the whole fit (forward_backward_choice's docstring).
    small = Passes()
    assert all(small.next(500, 3) is forward_backward_lapack.forward_backward for _ in range(200))
    # 20,000 samples x 6 states: each pass would save about 60 ms, so numba from the 12th on.
    large = Passes()
    chosen = [large.next(20000, 6) for _ in range(30)]
    switch = chosen.index(compiled())
    assert 5 < switch < 20
    assert all(c is forward_backward_lapack.forward_backward for c in chosen[:switch])
    assert all(c is compiled() for c in chosen[switch:])


def test_a_small_fit_does_not_load_numba(tmp_path):
    """Loading numba costs more CPU time than a small fit takes (before: 0.7-1.2 s for a
    0.1 s fit); checked in a fresh process, as the first fit of a ``dynid fit`` run."""
    result = run_script(
        "import sys\n"
        "import numpy as np\n"
        "from dynid import api\n"
        "from dynid.data.dataset import Dataset\n"
        "x = np.random.default_rng(0).normal(size=(500, 2)) + np.repeat([[0, 0], [3, 0]], 250, axis=0)\n"
        "fit = api.fit(Dataset.from_arrays(x), 'hmm', {'states': '2'}, seed=0)\n"
        "print(fit.model.metrics_['states'], 'numba' in sys.modules)\n",
        cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "False"]


def test_log_likelihood_and_em_match_hmmlearn_from_the_same_start():
    """hmmlearn's GaussianHMM with its priors off is plain maximum likelihood, as ``hmm`` with
    its covariance floor off."""
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    _, x = simulate_hmm(2000, seed=4)
    model = markov.HiddenMarkov(
        np.array([0.5, 0.3, 0.2]),
        np.full((3, 3), 0.1) + 0.7 * np.eye(3),
        Gaussian(MEANS + 0.5, np.stack([np.eye(2)] * 3), 0.0),
    )
    theirs = hmmlearn.GaussianHMM(
        n_components=3, covariance_type="full", n_iter=1, tol=0.0, init_params="", params="stmc",
        covars_prior=0.0, covars_weight=1.0, means_weight=0.0, implementation="scaling",
    )
    theirs.startprob_, theirs.transmat_ = model.initial, model.transition
    theirs.means_, theirs.covars_ = model.emission.means, model.emission.covs
    assert markov.log_likelihood(model, [x]) == pytest.approx(theirs.score(x), rel=1e-12)
    ours = markov.fit_em(model, [x], max_iter=10, tol=0.0)
    for _ in range(10):
        theirs.fit(x)
    assert ours.history[-1] == pytest.approx(theirs.score(x), rel=1e-10)
    np.testing.assert_allclose(ours.model.transition, theirs.transmat_, rtol=1e-8)
    np.testing.assert_allclose(ours.model.emission.covs, theirs.covars_, rtol=1e-8)


# -- identification -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, accuracy", [("hmm", 0.95), ("arhmm", 0.90)])
def test_states_up_to_relabelling(name, accuracy):
    model, z, x = fitted(name)
    states = api.states(model, dataset(x))
    assert states.state.shape == (N_TRAIN,) and states.probabilities.shape == (N_TRAIN, 3)
    np.testing.assert_allclose(states.probabilities.sum(axis=1), 1.0)
    _, found = matching(states.state, z)
    assert found >= accuracy
    _, marginal = matching(np.argmax(states.probabilities, axis=1), z)
    assert marginal >= accuracy


@pytest.mark.parametrize("name", ["hmm", "arhmm"])
def test_transition_matrix_within_0_05_of_the_truth(name):
    model, z, x = fitted(name)
    mapping, _ = matching(api.states(model, dataset(x)).state, z)
    transition = model.arrays()["transition"]
    relabelled = np.empty_like(transition)
    relabelled[np.ix_(mapping, mapping)] = transition
    assert np.abs(relabelled - TRANSITION).max() < 0.05, relabelled


def test_emission_parameters_match_the_truth():
    model, z, x = fitted("arhmm")
    mapping, _ = matching(api.states(model, dataset(x)).state, z)
    arrays = model.arrays()
    order = np.argsort(mapping)  # order[true state] = fitted state
    np.testing.assert_allclose(arrays["dynamics"][order], DYNAMICS, atol=0.05)
    np.testing.assert_allclose(arrays["offsets"][order], OFFSETS, atol=0.1)
    hmm, z, x = fitted("hmm")
    mapping, _ = matching(api.states(hmm, dataset(x)).state, z)
    np.testing.assert_allclose(hmm.arrays()["means"][np.argsort(mapping)], MEANS, atol=0.1)


@pytest.mark.parametrize("name", ["hmm", "arhmm"])
def test_em_log_likelihood_never_decreases(name):
    model, _, _ = fitted(name)
    history = model.arrays()["log_likelihood"]
    assert len(history) > 2
    assert np.all(np.diff(history) >= -1e-9 * np.abs(history[1:])), np.diff(history).min()
    assert model.metrics_["log_likelihood"] == history[-1]


@pytest.mark.parametrize("name", ["hmm", "arhmm"])
def test_states_auto_picks_three(name):
    _, x = (simulate_hmm if name == "hmm" else simulate_arhmm)(800, seed=2)
    model = api.fit(dataset(x), name, {"max_states": 4, "restarts": 2}, seed=0, device="cpu").model
    bic = model.metrics_["bic"]
    assert model.metrics_["states"] == 3, bic
    assert set(bic) == {"1", "2", "3", "4"}


def test_seeded_fits_are_reproducible():
    _, x = simulate_hmm(300, seed=3)
    first, second = (api.fit(dataset(x), "hmm", {"states": "3", "restarts": 2}, seed=5, device="cpu").model for _ in range(2))
    for key, value in first.arrays().items():
        np.testing.assert_array_equal(second.arrays()[key], value, err_msg=key)


# -- forecasts ------------------------------------------------------------------------------------
def test_hmm_forecast_is_the_predictive_mean_and_the_interval_covers():
    model, _, _ = fitted("hmm")
    history_length, horizon, rollouts = 30, 5, 200
    _, x = simulate_hmm(rollouts * (history_length + horizon), seed=7)
    covered = []
    for k in range(rollouts):
        window = x[k * (history_length + horizon):(k + 1) * (history_length + horizon)]
        history = Trial(np.arange(history_length) * 0.1, window[:history_length])
        band = model.predictive(history, horizon, None, 0.9)
        covered.append((band.lower <= window[history_length:]) & (window[history_length:] <= band.upper))
        np.testing.assert_allclose(band.mean, model.simulate(history, horizon))
    coverage = np.mean(covered)
    assert 0.85 <= coverage <= 0.95, coverage


def test_arhmm_forecast_with_one_regime_iterates_its_map():
    _, x = simulate_arhmm(400, seed=4)
    model = api.fit(dataset(x), "arhmm", {"states": "1"}, seed=0, device="cpu").model
    arrays = model.arrays()
    a, b = arrays["dynamics"][0], arrays["offsets"][0]
    expected, current = [], x[-1]
    for _ in range(4):
        current = a @ current + b
        expected.append(current)
    np.testing.assert_allclose(model.simulate(Trial(np.arange(400) * 0.1, x), 4), expected, rtol=1e-10)
    with pytest.raises(UsageError, match="--interval"):
        model.predictive(Trial(np.arange(400) * 0.1, x), 4, None, 0.9)


def test_autoregressive_first_sample_is_conditioned_on():
    emission = Autoregressive(np.stack([np.eye(2)] * 2), np.zeros((2, 2)), np.stack([np.eye(2)] * 2), 0.0)
    log_b = emission.log_density(np.random.default_rng(0).normal(size=(5, 2)))
    np.testing.assert_array_equal(log_b[0], 0.0)


# -- the command ----------------------------------------------------------------------------------
def test_states_command_writes_state_and_probabilities(cli, tmp_path):
    from dynid.modelfile import describe_fit, save_model

    _, x = simulate_hmm(300, seed=5)
    data_path = write_csv(tmp_path / "hmm.csv", x, ["a", "b"], dt=0.1)
    data = dataset(x)
    model = api.fit(data, "hmm", {"states": "3", "restarts": 1}, seed=0, device="cpu").model
    model_path = str(tmp_path / "m.hmm.dynid")
    save_model(model, model_path, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.0))
    result = cli("states", model_path, data_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "t,state,p_state_0,p_state_1,p_state_2"
    assert len(lines) == 1 + 300
    table = np.loadtxt(lines[1:], delimiter=",")
    expected = api.states(model, data)
    np.testing.assert_array_equal(table[:, 1], expected.state)
    np.testing.assert_allclose(table[:, 2:], expected.probabilities, rtol=1e-12)
    document = json.loads(cli("states", model_path, data_path, "--json").stdout)
    assert document["kind"] == "states" and document["states"] == []
    assert document["state"] == expected.state.tolist()
    assert np.array(document["p_state"]).shape == (300, 3)
