"""Hidden Markov chains with any emission model: forward-backward, Viterbi and Baum-Welch EM.

The chain over K discrete states has initial distribution pi (K,) and transition matrix
T (K, K) with T[i, j] = p(z_{t+1} = j | z_t = i). An emission model gives, per trial, the log
density log p(x_t | z_t = k, past) as a (steps, K) array and refits itself, in closed form,
from the posterior state probabilities (``Emission``).

Forward-backward is the scaled recursion (Rabiner 1989) with each step's log densities shifted
by their maximum before exponentiating, so nothing underflows however small the densities; the
log-likelihood is the log of the last forward vector's sum plus the shifts. Both passes are
chains u_t = u_{t-1} M_t of non-negative K x K matrices (forward M_t = T diag(b_t), backward its
transpose, reversed), and a loop over the samples costs several numpy calls per sample. A chain
is the forward substitution of the block-bidiagonal linear system u_t - u_{t-1} M_t = 0, so
``propagate`` hands it to LAPACK's triangular banded solver (tbtrs, compiled): one call per
WINDOW samples instead of a Python step per sample. Scaling replaces the per-step normalisation:
each M_t is divided by its largest row sum rho_t, which bounds sum(u_t) / sum(u_{t-1}), so the
scaled vectors never grow and only shrink where the data are surprising; when a vector's sum
falls below SAFE_SUM the chain restarts from the last vector above it, normalised (a single
step that falls below on its own is taken alone), and log rho_t and the restart sums are kept
in log space. The substitution only adds non-negative products, so it loses no
precision to cancellation; a vector's entries keep full relative precision down to 1e-308 /
SAFE_SUM = 1e-208 of its sum (a loop normalising every step: 1e-308). Viterbi works in log space.
Each EM iteration (E-step: forward-backward; M-step: pi, T and the emissions in closed form)
does not decrease the log-likelihood.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from dynid.errors import ComputationError, DataError
from dynid.models.latent.iterations import EMResult, iterate_em


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


# Samples per banded solve of ``propagate``: fewer windows mean less Python per sample, longer
# ones more cache misses and, at a restart, more of the window's solve wasted; 1024 was fastest
# of 512-4096 at 20,000 samples, 3 states (about level at 2,000).
WINDOW = 1024
# The smallest sum of a scaled forward vector before the chain restarts (see the module docstring).
SAFE_SUM = 1e-100


def forward_backward(model: Chain, log_b: np.ndarray) -> Posterior:
    """Scaled forward-backward for log densities log_b (steps, K).

    Backward runs on w_t = b_t * beta_t (w_t = (w_{t+1} T^T) * b_t, the forward chain's form),
    from which beta_t = T w_{t+1} and the expected transitions follow."""
    a = model.transition
    shift = row_max(log_b)
    if not np.all(np.isfinite(shift)):
        raise ComputationError("the hidden Markov model gives a sample zero probability")
    b = np.exp(log_b - shift[:, None])
    alpha, log_total = propagate(model.initial * b[0], a, b[1:])
    w = propagate(b[-1], a.T, b[-2::-1])[0][::-1]
    # alpha_t(i) beta_t(i) for t < T-1; its row sums are those of alpha_t(i) T[i, j] w_{t+1}(j).
    joint = alpha[:-1] * (w[1:] @ a.T)
    norms = row_sums(joint)
    probabilities = np.vstack([joint / norms[:, None], alpha[-1:]])
    transitions = a * ((alpha[:-1] / norms[:, None]).T @ w[1:])
    return Posterior(probabilities, transitions, alpha[-1], float(log_total + shift.sum()))


def propagate(start: np.ndarray, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, float]:
    """The chain u_0 = start, u_t = (u_{t-1} left) * right[t-1] of non-negative start (K,),
    left (K, K) and right (n, K): the normalised vectors u_t / sum(u_t) (n + 1, K) and
    log sum(u_n). ComputationError when some u_t is zero (the data have probability zero)."""
    n, k = right.shape
    out = np.empty((n + 1, k))
    log_total = _normalise_into(out, 0, start)
    # The largest row sum of step t's matrix: sum(u_t) <= rho_t sum(u_{t-1}).
    rho = np.max(left @ right.T, axis=0)
    if not np.all(rho > 0):
        raise ComputationError("the hidden Markov model gives a sample zero probability")
    scaled = right / rho[:, None]
    log_rho = np.concatenate([[0.0], np.cumsum(np.log(rho))])  # log rho_1 ... rho_t
    pattern = _band_pattern(left)
    # One band and one right-hand side for every window, reused: fresh arrays per window cost
    # more in page faults than the solve.
    band_rows = np.empty((min(WINDOW, n), pattern.shape[1]))
    rhs_rows = np.empty((min(WINDOW, n) * k, 1))
    done = 0  # steps taken so far
    while done < n:
        end = min(done + WINDOW, n)
        rhs = rhs_rows[: (end - done) * k]
        rhs[:] = 0.0
        rhs[:k, 0] = (out[done] @ left) * scaled[done]
        band = _band(pattern, scaled[done:end], band_rows[: end - done])
        solution, info = lapack.dtbtrs(band, rhs, uplo="L", diag="U", overwrite_b=1)
        if info != 0:
            raise ComputationError(f"LAPACK tbtrs failed (info {info}) in the forward-backward pass")
        vectors = solution.reshape(end - done, k)
        sums = row_sums(vectors)
        kept = end - done if sums.min() > SAFE_SUM else int(np.argmin(sums > SAFE_SUM))
        if kept == 0:  # one step past a sharp drop, normalised as it is
            log_total += _normalise_into(out, done + 1, (out[done] @ left) * right[done])
            done += 1
            continue
        np.divide(vectors[:kept], sums[:kept, None], out=out[done + 1 : done + 1 + kept])
        log_total += float(np.log(sums[kept - 1]) + log_rho[done + kept] - log_rho[done])
        done += kept
    return out, log_total


def _band_pattern(left: np.ndarray) -> np.ndarray:
    """(K, K 2K): pattern[j, (i, K + j - i)] = -left[i, j], zero elsewhere (see ``_band``)."""
    k = left.shape[0]
    i, j = np.indices((k, k))
    pattern = np.zeros((k, k, 2 * k))
    pattern[j, i, k - i + j] = -left[i, j]
    return pattern.reshape(k, -1)


def _band(pattern: np.ndarray, right: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The lower-triangular band (LAPACK storage, band[row - column, column]) of the system
    u_t - (u_{t-1} left) * right[t-1] = 0 in the unknowns u_1 .. u_m of m = len(right) steps,
    ordered (t, state): row (t, j) meets column (t - 1, i) at offset K + j - i with
    -left[i, j] right[t-1][j]; the unit diagonal (offset 0) is implied by diag="U". Written
    into ``rows`` (m, K 2K), its transpose's layout (column, offset), so that the
    Fortran-ordered (2K, m K) array LAPACK reads is a view, by one product
    right @ ``_band_pattern(left)``, which writes that layout directly."""
    m, k = right.shape
    rows[-1] = 0.0  # nothing couples the window's last step to the next window
    np.matmul(right[1:], pattern, out=rows[:-1])
    return rows.reshape(m * k, 2 * k).T


def _normalise_into(out: np.ndarray, row: int, vector: np.ndarray) -> float:
    """out[row] = vector / sum(vector); log sum(vector). ComputationError if the sum is zero."""
    total = vector.sum()
    if not total > 0:
        raise ComputationError("the hidden Markov model gives a sample zero probability")
    out[row] = vector / total
    return float(np.log(total))


def row_sums(x: np.ndarray) -> np.ndarray:
    """Sums of the rows of x (n, K): as a matrix-vector product, several times faster than
    numpy's reduction along a short last axis."""
    return x @ np.ones(x.shape[1])


def row_max(x: np.ndarray) -> np.ndarray:
    """Largest entry of each row of x (n, K), reduced along the long axis of a transposed copy
    (numpy's reduction along a short last axis is slow)."""
    return np.ascontiguousarray(x.T).max(axis=0)


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


def log_likelihood(model: HiddenMarkov, trials: list[np.ndarray], known: list[np.ndarray] | None = None) -> float:
    """log p of all trials (and of the known states, if any)."""
    return float(sum(forward_backward(model, log_b).loglik for log_b in trial_densities(model, trials, known)))


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
    start: HiddenMarkov, trials: list[np.ndarray], *, max_iter: int, tol: float, known: list[np.ndarray] | None = None
) -> EMResult[HiddenMarkov]:
    """Baum-Welch from ``start`` until an iteration gains less than ``tol`` log-likelihood per
    observed value, or ``max_iter`` iterations. known: per trial the known states (``clamp``)."""

    def expect(model: HiddenMarkov) -> tuple[list[Posterior], float]:
        posteriors = [forward_backward(model, log_b) for log_b in trial_densities(model, trials, known)]
        return posteriors, float(sum(p.loglik for p in posteriors))

    return iterate_em(
        start,
        expect,
        lambda model, posteriors: maximise(model, trials, posteriors),
        lambda model: log_likelihood(model, trials, known),
        n_values=sum(x.size for x in trials),
        max_iter=max_iter,
        tol=tol,
    )
