"""Hidden Markov chains with any emission model: forward-backward, Viterbi and Baum-Welch EM.

The chain over K discrete states has initial distribution pi (K,) and transition matrix
T (K, K) with T[i, j] = p(z_{t+1} = j | z_t = i). An emission model gives, per trial, the log
density log p(x_t | z_t = k, past) as a (steps, K) array and refits itself, in closed form,
from the posterior state probabilities (``Emission``).

Forward-backward is the scaled recursion (Rabiner 1989) with each step's log densities shifted
by their maximum before exponentiating, so nothing underflows however small the densities; the
log-likelihood is the sum of the log scale factors plus the shifts. Viterbi works in log space.
Each EM iteration (E-step: forward-backward; M-step: pi, T and the emissions in closed form)
does not decrease the log-likelihood.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from dynid.errors import ComputationError
from dynid.models.latent.iterations import EMResult, iterate_em


def contiguous(instance: object) -> None:
    """Replace every array field of a frozen dataclass with a C-ordered float copy: BLAS sums in
    another order for other layouts, and a model read back from its file must forecast
    bit-identically."""
    for name, value in vars(instance).items():
        if isinstance(value, np.ndarray):
            object.__setattr__(instance, name, np.ascontiguousarray(value, dtype=float))


class Emission(ABC):
    """Per-state observation densities of a hidden Markov model."""

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
class HiddenMarkov:
    """initial (K,), transition (K, K) rows summing to one, and the emission model."""

    initial: np.ndarray
    transition: np.ndarray
    emission: Emission

    def __post_init__(self) -> None:
        contiguous(self)

    @property
    def n_states(self) -> int:
        return self.initial.shape[0]

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


def forward_backward(model: HiddenMarkov, log_b: np.ndarray) -> Posterior:
    """Scaled forward-backward for log densities log_b (steps, K)."""
    steps, k = log_b.shape
    shift = log_b.max(axis=1, keepdims=True)
    b = np.exp(log_b - shift)
    alpha = np.empty((steps, k))
    scale = np.empty(steps)
    a = model.transition
    current = model.initial * b[0]
    for t in range(steps):
        if t:
            current = (current @ a) * b[t]
        scale[t] = current.sum()
        if not scale[t] > 0:
            raise ComputationError("the hidden Markov model gives a sample zero probability")
        current = current / scale[t]
        alpha[t] = current
    beta = np.empty((steps, k))
    beta[-1] = 1.0
    weighted = b * 0.0
    for t in range(steps - 1, 0, -1):
        weighted[t] = b[t] * beta[t] / scale[t]
        beta[t - 1] = a @ weighted[t]
    probabilities = alpha * beta
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    transitions = a * (alpha[:-1].T @ weighted[1:])
    loglik = float(np.log(scale).sum() + shift.sum())
    return Posterior(probabilities, transitions, alpha[-1], loglik)


def filtered_last(model: HiddenMarkov, x: np.ndarray) -> np.ndarray:
    """p(z_last | x) (K,): the state distribution a forecast starts from."""
    return forward_backward(model, model.emission.log_density(x)).last_filtered


def viterbi(model: HiddenMarkov, log_b: np.ndarray) -> np.ndarray:
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


def log_likelihood(model: HiddenMarkov, trials: list[np.ndarray]) -> float:
    """log p of all trials."""
    return float(sum(forward_backward(model, model.emission.log_density(x)).loglik for x in trials))


def maximise(model: HiddenMarkov, trials: list[np.ndarray], posteriors: list[Posterior]) -> HiddenMarkov:
    """The Baum-Welch M-step: pi the mean first-state posterior, T the normalised expected
    transition counts, the emissions by their own ``refit``."""
    initial = np.mean([p.probabilities[0] for p in posteriors], axis=0)
    counts = np.sum([p.transitions for p in posteriors], axis=0)
    totals = counts.sum(axis=1, keepdims=True)
    # A state never visited keeps its row (no evidence either way); the likelihood is unaffected.
    transition = np.where(totals > 0, counts / np.where(totals > 0, totals, 1.0), model.transition)
    emission = model.emission.refit(trials, [p.probabilities for p in posteriors])
    return HiddenMarkov(initial / initial.sum(), transition, emission)


def fit_em(start: HiddenMarkov, trials: list[np.ndarray], *, max_iter: int, tol: float) -> EMResult[HiddenMarkov]:
    """Baum-Welch from ``start`` until an iteration gains less than ``tol`` log-likelihood per
    observed value, or ``max_iter`` iterations."""

    def expect(model: HiddenMarkov) -> tuple[list[Posterior], float]:
        posteriors = [forward_backward(model, model.emission.log_density(x)) for x in trials]
        return posteriors, float(sum(p.loglik for p in posteriors))

    return iterate_em(
        start,
        expect,
        lambda model, posteriors: maximise(model, trials, posteriors),
        lambda model: log_likelihood(model, trials),
        n_values=sum(x.size for x in trials),
        max_iter=max_iter,
        tol=tol,
    )
