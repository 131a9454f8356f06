"""``hmm`` and ``arhmm``: hidden Markov models fitted by Baum-Welch EM (``markov.py``).

    hmm:    z_t ~ Markov(pi, T),  x_t | z_t = k ~ N(mu_k, Sigma_k)
    arhmm:  z_t ~ Markov(pi, T),  x_t | z_t = k ~ N(A_k x_{t-1} + b_k, Sigma_k)

Starts: one from k-means++ clusters (of x_t for hmm, of [x_t, x_t - x_{t-1}] for arhmm), and
``restarts`` more from random segmentations of each trial into blocks with random states; every
start runs SCREENING_ITERATIONS EM iterations, and the one with the best log-likelihood then runs
on to convergence (the short-runs strategy of Biernacki, Celeux & Govaert 2003), so one unlucky
initialisation does not decide and the restarts cost a fraction of full runs. ``states=auto`` picks the number of states by BIC over the full
data: a redundant state that splits one cluster raises a held-out likelihood only marginally and
noisily, while BIC's penalty (log N per parameter) rejects it reliably; the fits use every sample.

Forecasts (``simulate``) are the predictive mean given the history's filtered state
distribution p_0 = p(z_T | x_1..T), propagated as p_h = p_{h-1} T:
- hmm: exactly E[x_{T+h} | history] = sum_k p_h(k) mu_k.
- arhmm: m_h = sum_k p_h(k) (A_k m_{h-1} + b_k) from m_0 = x_T, an approximation of the
  predictive mean: it ignores that x_{T+h-1} and z_{T+h} are correlated (through z_{T+h-1}); it is
  exact when the regime is known (p_0 one-hot and T the identity) and for a single regime.
``predictive`` (hmm only): per variable, the quantiles of the exact predictive mixture
sum_k p_h(k) N(mu_k, Sigma_k) found by bisection on its CDF (no sampling); arhmm refuses.
NaN cells are refused.

Partially known states (``--labels``, a partially hidden chain): a labelled row's emission
density is zero in every other state (``markov.clamp``), in EM and in ``states``, so its
posterior is its label and the fitted state numbers are the labels' (state k is label k; nothing
is relabelled). Starts keep the labelled rows' labels, and a k-means start's clusters are first
renumbered to agree best with them; with labels up to L the model has at least L + 1 states.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.cluster.vq import kmeans2
from scipy.optimize import linear_sum_assignment
from scipy.special import ndtr

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, UsageError
from dynid.models.base import (
    Capabilities,
    LatentStates,
    PredictiveInterval,
    expect_array,
    param,
)
from dynid.models.latent import markov
from dynid.models.latent.emissions import Autoregressive, Gaussian, covariance_floor
from dynid.models.latent.forward_backward_choice import Passes
from dynid.models.latent.markov import HiddenMarkov
from dynid.models.latent.iterations import EMResult
from dynid.models.latent.labelled import KnownStatesBackend
from dynid.models.latent.params import SizedEMParams

# EM iterations every start runs before only the best one continues.
SCREENING_ITERATIONS = 25
# Mean block length, in samples per state, of the random segmentations that start restarts.
BLOCKS_PER_STATE = 4
# Bisection steps for the mixture quantiles: 2^-60 of the bracketing width.
BISECTION_STEPS = 60


@dataclass(frozen=True)
class MarkovParams(SizedEMParams):
    size_field = "states"

    states: str = param(
        "auto",
        "number of hidden states, or auto: the K in 1..max_states with the lowest BIC",
    )
    max_states: int = param(6, "largest number of states states=auto tries")
    restarts: int = param(4, "random starts besides the k-means++ one; the best log-likelihood is kept")
    max_iter: int = param(200, "EM iterations at most, per start")
    tol: float = param(
        1e-6, "EM stops when an iteration gains less log-likelihood than this per observed value"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.restarts < 0:
            raise ValueError(f"restarts must be non-negative, not {self.restarts}")


class _HiddenMarkovBackend(KnownStatesBackend):
    """What ``hmm`` and ``arhmm`` share: fitting with several starts, states, arrays of the chain.

    Fitted arrays (K states, d variables): ``initial`` (K,), ``transition`` (K, K) with
    transition[i, j] = p(z_{t+1} = j | z_t = i), the emission arrays of the subclass, and
    ``log_likelihood`` (iterations,) the EM history of the kept start.
    """

    Params = MarkovParams
    capabilities = Capabilities(uniform_steps=True, inputs=False, nan=False, stochastic=True, labels=True)
    emission_type: ClassVar[type[Gaussian] | type[Autoregressive]]

    # -- fitting -----------------------------------------------------------------------------
    def _fit_known(self, data: Dataset, known: list[np.ndarray] | None, seed: int | None) -> None:
        params: MarkovParams = self.params  # type: ignore[assignment]
        trials = [trial.x for trial in data.trials]
        if any(x.shape[0] < 2 for x in trials):
            raise DataError(f"{data.source}: every trial needs at least two samples")
        rng = np.random.default_rng(seed)
        fewest = 1 if known is None else max(int(max(np.max(labels) for labels in known)) + 1, 1)
        if params.states == "auto":
            candidates = range(fewest, max(params.max_states, fewest) + 1)
        elif int(params.states) < fewest:
            raise DataError(f"{data.source}: --labels has states up to {fewest - 1}, more than states={params.states} allows")
        else:
            candidates = range(int(params.states), int(params.states) + 1)
        n_rows = sum(x.shape[0] for x in trials)
        passes = Passes()  # one for every EM run of the fit: numba pays for them together
        fits: dict[int, EMResult] = {}
        for k in candidates:
            if k > n_rows // 2:
                break  # fewer than two samples per state: nothing to fit
            fits[k] = self._best_of_starts(trials, known, k, params, rng, passes)
        if not fits:
            raise DataError(f"{data.source}: too few samples for {params.states} states")
        bic = {k: -2 * r.history[-1] + r.model.n_parameters() * np.log(n_rows) for k, r in fits.items()}
        k = min(bic, key=bic.__getitem__)
        if params.states == "auto":
            self.metrics_["bic"] = {str(n): float(v) for n, v in bic.items()}
        result = fits[k]
        self.model_ = result.model
        self.log_likelihood_ = np.asarray(result.history)
        self.metrics_.update(
            states=k,
            log_likelihood=result.history[-1],
            log_likelihood_per_value=result.history[-1] / sum(x.size for x in trials),
            em_iterations=len(result.history) - 1,
            converged=result.converged,
        )

    def _best_of_starts(
        self,
        trials: list[np.ndarray],
        known: list[np.ndarray] | None,
        k: int,
        params: MarkovParams,
        rng: np.random.Generator,
        passes: Passes,
    ) -> EMResult:
        """EM from the k-means++ start and ``restarts`` random segmentations, screened by their
        log-likelihood after a few iterations; the best, run to convergence."""
        floor = covariance_floor(trials)
        labelings = [_kmeans_labels(trials, self._features, k, rng)]
        labelings += [_random_segments(trials, k, rng) for _ in range(params.restarts if k > 1 else 0)]
        if known is not None:
            labelings = [_keep_known(labels, known, k) for labels in labelings]
        screened = [
            markov.fit_em(
                _start_from_labels(trials, labels, k, self.emission_type, floor),
                trials,
                max_iter=min(SCREENING_ITERATIONS, params.max_iter),
                tol=params.tol,
                known=known,
                passes=passes,
            )
            for labels in labelings
        ]
        best = max(screened, key=lambda result: result.history[-1])
        remaining = params.max_iter - (len(best.history) - 1)
        if best.converged or remaining < 1:
            return best
        rest = markov.fit_em(best.model, trials, max_iter=remaining, tol=params.tol, known=known, passes=passes)
        return EMResult(rest.model, best.history[:-1] + rest.history, rest.converged)

    @staticmethod
    @abstractmethod
    def _features(x: np.ndarray) -> np.ndarray:
        """What k-means clusters for the first start, of one trial x (steps, d): (steps, f)."""

    # -- inference ---------------------------------------------------------------------------
    def states(self, data: Dataset, labels: list[np.ndarray] | None = None) -> LatentStates:
        """Per sample: the Viterbi state and the smoothed state probabilities; with labels,
        the known states are kept (see the module docstring)."""
        self._check_fitted()
        paths, probabilities, passes = [], [], Passes()
        for log_b in markov.trial_densities(self.model_, [trial.x for trial in data.trials], labels):
            paths.append(markov.viterbi(self.model_, log_b))
            probabilities.append(markov.forward_backward(self.model_, log_b, passes).probabilities)
        n = sum(trial.n_samples for trial in data.trials)
        return LatentStates(
            names=(),
            t=np.concatenate([trial.t for trial in data.trials]),
            trial=np.concatenate([np.full(trial.n_samples, k) for k, trial in enumerate(data.trials)]),
            means=np.zeros((n, 0)),
            sds=np.zeros((n, 0)),
            state=np.concatenate(paths),
            probabilities=np.concatenate(probabilities),
        )

    def _state_forecast(self, history: Trial, steps: int) -> np.ndarray:
        """p(z_{T+h} | history) for h = 1..steps: (steps, K)."""
        return self.model_.forecast(markov.filtered_last(self.model_, history.x), steps)

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        return {
            "initial": self.model_.initial,
            "transition": self.model_.transition,
            **self._emission_arrays(),
            "log_likelihood": self.log_likelihood_,
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        k = expect_array(arrays, "initial", (None,)).shape[0]
        emission = self._emission_from(arrays, k, self.n_variables)
        self.model_ = HiddenMarkov(
            initial=expect_array(arrays, "initial", (k,)).astype(float),
            transition=expect_array(arrays, "transition", (k, k)).astype(float),
            emission=emission,
        )
        self.log_likelihood_ = expect_array(arrays, "log_likelihood", (None,)).astype(float)

    @abstractmethod
    def _emission_arrays(self) -> dict[str, np.ndarray]:
        """The emission model's named arrays (what the model file stores beside the chain's)."""

    @abstractmethod
    def _emission_from(self, arrays: dict[str, np.ndarray], k: int, d: int) -> Gaussian | Autoregressive:
        """The emission model from stored arrays, for k states and d variables."""


class HMM(_HiddenMarkovBackend):
    """Gaussian hidden Markov model (full covariances). Emission arrays: ``means`` (K, d),
    ``covariances`` (K, d, d)."""

    name = "hmm"
    summary = "hidden Markov model with Gaussian emissions (Baum-Welch EM, Viterbi states)"
    emission_type = Gaussian

    @staticmethod
    def _features(x: np.ndarray) -> np.ndarray:
        return x

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> np.ndarray:
        """The exact predictive mean sum_k p(z_{T+h} = k | history) mu_k."""
        return self._state_forecast(history, steps) @ self.model_.emission.means

    def predictive(self, history: Trial, steps: int, future_inputs: np.ndarray | None, level: float) -> PredictiveInterval:
        """Per variable, the (1 -+ level)/2 quantiles of the predictive Gaussian mixture."""
        if not 0 < level < 1:
            raise UsageError(f"--interval {level}: the level must lie strictly between 0 and 1")
        self._check_history(history, steps, future_inputs)
        weights = self._state_forecast(history, steps)  # (steps, K)
        emission: Gaussian = self.model_.emission  # type: ignore[assignment]
        sds = np.sqrt(np.einsum("kii->ki", emission.covs))  # (K, d)
        lower = _mixture_quantile(weights, emission.means, sds, 0.5 - level / 2)
        upper = _mixture_quantile(weights, emission.means, sds, 0.5 + level / 2)
        return PredictiveInterval(mean=weights @ emission.means, lower=lower, upper=upper, level=level)

    def _emission_arrays(self) -> dict[str, np.ndarray]:
        emission: Gaussian = self.model_.emission  # type: ignore[assignment]
        return {"means": emission.means, "covariances": emission.covs, "covariance_floor": np.array(emission.floor)}

    def _emission_from(self, arrays: dict[str, np.ndarray], k: int, d: int) -> Gaussian:
        return Gaussian(
            means=expect_array(arrays, "means", (k, d)).astype(float),
            covs=expect_array(arrays, "covariances", (k, d, d)).astype(float),
            floor=float(expect_array(arrays, "covariance_floor", ())),
        )


class ARHMM(_HiddenMarkovBackend):
    """Autoregressive hidden Markov model: x_t = A_k x_{t-1} + b_k + noise_k in regime k.
    Emission arrays: ``dynamics`` (K, d, d) the A_k, ``offsets`` (K, d) the b_k,
    ``covariances`` (K, d, d) the noise covariances."""

    name = "arhmm"
    summary = "autoregressive hidden Markov model: a linear map per regime (Baum-Welch EM, Viterbi regimes)"
    emission_type = Autoregressive

    @staticmethod
    def _features(x: np.ndarray) -> np.ndarray:
        return np.hstack([x, np.diff(x, axis=0, prepend=x[:1])])

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> np.ndarray:
        """m_h = sum_k p_h(k) (A_k m_{h-1} + b_k) from the last sample (see the module docstring)."""
        emission: Autoregressive = self.model_.emission  # type: ignore[assignment]
        return mixture_rollout(emission, self._state_forecast(history, steps), history.x[-1])

    def _emission_arrays(self) -> dict[str, np.ndarray]:
        emission: Autoregressive = self.model_.emission  # type: ignore[assignment]
        return {
            "dynamics": emission.dynamics,
            "offsets": emission.offsets,
            "covariances": emission.covs,
            "covariance_floor": np.array(emission.floor),
        }

    def _emission_from(self, arrays: dict[str, np.ndarray], k: int, d: int) -> Autoregressive:
        return Autoregressive(
            dynamics=expect_array(arrays, "dynamics", (k, d, d)).astype(float),
            offsets=expect_array(arrays, "offsets", (k, d)).astype(float),
            covs=expect_array(arrays, "covariances", (k, d, d)).astype(float),
            floor=float(expect_array(arrays, "covariance_floor", ())),
        )


def mixture_rollout(emission: Autoregressive, weights: np.ndarray, start: np.ndarray) -> np.ndarray:
    """m_h = sum_k weights[h-1, k] (A_k m_{h-1} + b_k) from m_0 = start (d,), for regime
    probabilities weights (steps, K): (steps, d), the predictive-mean approximation of the
    module docstring."""
    out = np.empty((weights.shape[0], start.shape[0]))
    current = start
    for h in range(weights.shape[0]):
        current = weights[h] @ emission.step(current[None, :])[:, 0, :]
        out[h] = current
    return out


def _kmeans_labels(
    trials: list[np.ndarray], features: Callable[[np.ndarray], np.ndarray], k: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """k-means++ clusters of the standardised features of all trials, split back per trial."""
    pooled = np.concatenate([features(x) for x in trials])
    spread = pooled.std(axis=0)
    scaled = (pooled - pooled.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    _, labels = kmeans2(scaled, k, minit="++", seed=rng)
    return np.split(labels, np.cumsum([x.shape[0] for x in trials])[:-1])


def _keep_known(labels: list[np.ndarray], known: list[np.ndarray], k: int) -> list[np.ndarray]:
    """A start's labels renumbered to agree best with the known states (Hungarian matching on
    the labelled rows), then the known states put in."""
    found, given = np.concatenate(labels), np.concatenate(known)
    rows = given >= 0
    agreement = np.zeros((k, k))
    np.add.at(agreement, (found[rows], given[rows]), 1.0)
    ours, theirs = linear_sum_assignment(-agreement)
    renumber = np.empty(k, dtype=np.intp)
    renumber[ours] = theirs
    return [np.where(mine >= 0, mine, renumber[lab]) for lab, mine in zip(labels, known)]


def _random_segments(trials: list[np.ndarray], k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Each trial cut into blocks of about steps / (BLOCKS_PER_STATE k) samples, each block a
    random state: regimes persist, so blocks are purer starts than independent random labels."""
    out = []
    for x in trials:
        steps = x.shape[0]
        length = max(steps // (BLOCKS_PER_STATE * k), 1)
        blocks = rng.integers(k, size=-(-steps // length))
        out.append(np.repeat(blocks, length)[:steps])
    return out


def _start_from_labels(
    trials: list[np.ndarray], labels: list[np.ndarray], k: int, emission_type: type[Gaussian] | type[Autoregressive], floor: float
) -> HiddenMarkov:
    """The M-step from hard labels, with transitions counted from the labels (plus one per
    pair, so that no transition starts impossible) and a uniform initial distribution."""
    one_hot = [np.eye(k)[lab] for lab in labels]
    counts = np.ones((k, k))
    for lab in labels:
        np.add.at(counts, (lab[:-1], lab[1:]), 1.0)
    emission = emission_type.from_posteriors(trials, one_hot, floor)
    return HiddenMarkov(np.full(k, 1.0 / k), counts / counts.sum(axis=1, keepdims=True), emission)


def _mixture_quantile(weights: np.ndarray, means: np.ndarray, sds: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of sum_k w_k N(means_k, sds_k^2) per step and variable, by bisection:
    weights (steps, K), means and sds (K, d) -> (steps, d)."""
    steps, d = weights.shape[0], means.shape[1]
    low = np.broadcast_to((means - 10 * sds).min(axis=0), (steps, d)).copy()
    high = np.broadcast_to((means + 10 * sds).max(axis=0), (steps, d)).copy()
    for _ in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        cdf = np.einsum("sk,skd->sd", weights, ndtr((middle[:, None, :] - means) / sds))
        below = cdf < q
        low = np.where(below, middle, low)
        high = np.where(below, high, middle)
    return 0.5 * (low + high)
