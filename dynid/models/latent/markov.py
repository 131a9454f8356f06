"""Hidden Markov chains with any emission model: forward-backward, Viterbi and Baum-Welch EM.

The chain over K discrete states has initial distribution pi (K,) and transition matrix
T (K, K) with T[i, j] = p(z_{t+1} = j | z_t = i). An emission model gives, per trial, the log
density log p(x_t | z_t = k, past) as a (steps, K) array and refits itself, in closed form,
from the posterior state probabilities (``Emission``).

Forward-backward is the scaled recursion (Rabiner 1989) with each step's log densities shifted
by their maximum before exponentiating, so nothing underflows however small the densities; the
log-likelihood is the log of the forward normalisers plus the shifts. It is compiled with numba
(``forward_backward_numba``) or runs as LAPACK-banded numpy passes (``forward_backward_lapack``):
numba's start-up costs more than small fits gain, so a fit's ``Passes`` choose
(``forward_backward_choice``). Viterbi works in log space.
Each EM iteration (E-step: forward-backward; M-step: pi, T and the emissions in closed form)
does not decrease the log-likelihood.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from dynid.errors import ComputationError, DataError
from dynid.models.latent.forward_backward_choice import Passes
from dynid.models.latent.iterations import EMResult, iterate_em
from dynid.models.latent.rows import ZERO_PROBABILITY


def contiguous(instance: object) -> None:
    """Replace every array field of a frozen dataclass with a C-ordered float copy: BLAS sums in
    another order for other layouts, and a model read back from its file must forecast
    bit-identically."""
    for name, value in vars(instance).items():
        if isinstance(value, np.ndarray):
            object.__setattr__(instance, name, np.ascontiguousarray(value, dtype=float))


class Emission(ABC):
    """Per-state observation densities of a hidden Markov model (frozen dataclasses whose array
    fields are made C-ordered on construction)."""

    def __post_init__(self) -> None:
        contiguous(self)

    @property
    @abstractmethod
    def n_states(self) -> int: ...

    @abstractmethod
    def log_density(self, x: np.ndarray) -> np.ndarray:
        """log p(x_t | z_t = k) of one trial x (steps, d): (steps, K)."""

    @abstractmethod
    def refit(self, trials: list[np.ndarray], posteriors: list[np.ndarray]) -> Emission:
        """The M-step: the maximiser of the expected complete-data log-likelihood given the
        posterior state probabilities (steps, K) of every trial."""

    @abstractmethod
    def n_parameters(self) -> int:
        """Free parameters (for BIC)."""


@dataclass(frozen=True)
class Chain:
    """A Markov chain over K states: initial (K,), transition (K, K) rows summing to one."""

    initial: np.ndarray
    transition: np.ndarray

    def __post_init__(self) -> None:
        contiguous(self)

    @property
    def n_states(self) -> int:
        return self.initial.shape[0]

    def forecast(self, current: np.ndarray, steps: int) -> np.ndarray:
        """p(z_{T+h}) for h = 1..steps from p(z_T) = current (K,): (steps, K)."""
        out = np.empty((steps, self.n_states))
        for h in range(steps):
            current = current @ self.transition
            out[h] = current
        return out


@dataclass(frozen=True)
class HiddenMarkov(Chain):
    """The chain and the emission model."""

    emission: Emission

    def n_parameters(self) -> int:
        k = self.n_states
        return (k - 1) + k * (k - 1) + self.emission.n_parameters()


@dataclass(frozen=True)
class Posterior:
    """Forward-backward of one trial: state probabilities (steps, K) given the whole trial,
    expected transition counts (K, K), the filtered probabilities of the last step (K,) and
    the log-likelihood."""

    probabilities: np.ndarray
    transitions: np.ndarray
    last_filtered: np.ndarray
    loglik: float


def forward_backward(model: Chain, log_b: np.ndarray, passes: Passes | None = None) -> Posterior:
    """Scaled forward-backward for log densities log_b (steps, K), by the implementation that
    the fit's ``passes`` choose (None: by this pass alone)."""
    probabilities = np.empty(log_b.shape)
    transitions = np.empty((model.n_states, model.n_states))
    implementation = (passes or Passes()).next(*log_b.shape)
    loglik = implementation(
        model.initial, model.transition, np.ascontiguousarray(log_b, dtype=float), probabilities, transitions
    )
    if not np.isfinite(loglik):
        raise ComputationError(ZERO_PROBABILITY)
    return Posterior(probabilities, transitions, probabilities[-1].copy(), float(loglik))


def filtered_last(model: HiddenMarkov, x: np.ndarray) -> np.ndarray:
    """p(z_last | x) (K,): the state distribution a forecast starts from."""
    return forward_backward(model, model.emission.log_density(x)).last_filtered


def clamp(log_b: np.ndarray, known: np.ndarray | None) -> np.ndarray:
    """log_b (steps, K) with every state but the known one impossible where known (steps,)
    is a state number (>= 0; -1 = unknown): a partially hidden chain. ``known`` None: log_b."""
    if known is None or not np.any(known >= 0):
        return log_b
    if known.max() >= log_b.shape[1]:
        raise DataError(f"--labels: state {int(known.max())} is not one of the model's states 0..{log_b.shape[1] - 1}")
    rows = np.flatnonzero(known >= 0)
    out = np.array(log_b)
    kept = out[rows, known[rows]]
    out[rows] = -np.inf
    out[rows, known[rows]] = kept
    return out


def trial_densities(model: HiddenMarkov, trials: list[np.ndarray], known: list[np.ndarray] | None) -> list[np.ndarray]:
    """The log densities (steps, K) of every trial, clamped to the known states if any."""
    return [clamp(model.emission.log_density(x), None if known is None else known[n]) for n, x in enumerate(trials)]


def viterbi(model: Chain, log_b: np.ndarray) -> np.ndarray:
    """The most likely state sequence (steps,) for log densities log_b (steps, K)."""
    steps, k = log_b.shape
    with np.errstate(divide="ignore"):
        log_a, log_pi = np.log(model.transition), np.log(model.initial)
    best = log_pi + log_b[0]
    back = np.zeros((steps, k), dtype=np.intp)
    for t in range(1, steps):
        candidates = best[:, None] + log_a
        back[t] = np.argmax(candidates, axis=0)
        best = candidates[back[t], np.arange(k)] + log_b[t]
    path = np.empty(steps, dtype=np.intp)
    path[-1] = int(np.argmax(best))
    for t in range(steps - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path


def log_likelihood(
    model: HiddenMarkov, trials: list[np.ndarray], known: list[np.ndarray] | None = None, passes: Passes | None = None
) -> float:
    """log p of all trials (and of the known states, if any); passes: those of the fit."""
    passes = passes or Passes()
    return float(sum(forward_backward(model, log_b, passes).loglik for log_b in trial_densities(model, trials, known)))


def maximise(model: HiddenMarkov, trials: list[np.ndarray], posteriors: list[Posterior]) -> HiddenMarkov:
    """The Baum-Welch M-step: the chain by ``maximise_chain``, the emissions by their own ``refit``."""
    chain = maximise_chain(model, posteriors)
    emission = model.emission.refit(trials, [p.probabilities for p in posteriors])
    return HiddenMarkov(chain.initial, chain.transition, emission)


def maximise_chain(chain: Chain, posteriors: list[Posterior]) -> Chain:
    """pi the mean first-state posterior, T the normalised expected transition counts."""
    initial = np.mean([p.probabilities[0] for p in posteriors], axis=0)
    counts = np.sum([p.transitions for p in posteriors], axis=0)
    totals = counts.sum(axis=1, keepdims=True)
    # A state never visited keeps its row (no evidence either way); the likelihood is unaffected.
    transition = np.where(totals > 0, counts / np.where(totals > 0, totals, 1.0), chain.transition)
    return Chain(initial / initial.sum(), transition)


def fit_em(
    start: HiddenMarkov,
    trials: list[np.ndarray],
    *,
    max_iter: int,
    tol: float,
    known: list[np.ndarray] | None = None,
    passes: Passes | None = None,
) -> EMResult[HiddenMarkov]:
    """Baum-Welch from ``start`` until an iteration gains less than ``tol`` log-likelihood per
    observed value, or ``max_iter`` iterations. known: per trial the known states (``clamp``);
    passes: those of the whole fit, when it runs EM more than once (None: this EM's own)."""
    passes = passes or Passes()

    def expect(model: HiddenMarkov) -> tuple[list[Posterior], float]:
        posteriors = [forward_backward(model, log_b, passes) for log_b in trial_densities(model, trials, known)]
        return posteriors, float(sum(p.loglik for p in posteriors))

    return iterate_em(
        start,
        expect,
        lambda model, posteriors: maximise(model, trials, posteriors),
        lambda model: log_likelihood(model, trials, known, passes),
        n_values=sum(x.size for x in trials),
        max_iter=max_iter,
        tol=tol,
    )
