"""Empirical dynamic modelling (Sugihara & May 1990; Sugihara 1994): forecasts from the library
of delay-embedded training states, without a parametric model.

Each variable is standardised and embedded with E lags tau samples apart (a multivariate
embedding: D = E d coordinates for d variables), the state at t being
``[z_t, z_{t-tau}, ..., z_{t-(E-1)tau}]``. The next sample is predicted as z_t plus an
increment learned from the library:

- simplex: the exponentially weighted mean (weights exp(-distance / nearest distance)) of the
  increments of the D + 1 nearest library states (a scipy cKDTree). Increments rather than
  values, so that a finely sampled flow is not smeared by its neighbours' spread;
- S-map: a linear regression of the increment on the state over the whole library, weighted by
  exp(-theta distance / mean distance) from the query. theta = 0 is one global linear (VAR)
  model; the larger theta, the more local (nonlinear) the map.

Unless given, (E, tau) are chosen by simplex leave-out skill and then theta by S-map leave-out
skill: the training rows are split into ``FOLDS`` contiguous blocks, each predicted one step
ahead from a library without it, and skill is the mean over variables of the correlation
between predicted and observed increments. A forecast runs the predictor in closed loop from the
last (E - 1) tau + 1 history samples. Observation noise is averaged over the neighbours (simplex)
or the kernel (S-map); nothing else filters it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.models.reservoir.readout import Standardiser

if TYPE_CHECKING:
    from scipy.spatial import cKDTree

__all__ = ["EDM", "EDMParams"]

# (library states (N, D), their increments (N, d), queries (q, D)) -> predicted increments (q, d)
Predictor = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

FOLDS = 5
TAUS = (1, 2, 4, 8, 16)
THETAS = (0.0, 0.1, 0.3, 0.5, 1.0, 2.0, 4.0, 8.0)
# Held-out rows scored per fold when choosing: enough for a stable correlation, bounded cost.
QUERIES_PER_FOLD = 400
# Distances per block of S-map queries (rows x library), to bound memory.
SMAP_BLOCK = 2_000_000
# Ridge on the S-map normal equations, relative to their trace: keeps a degenerate
# neighbourhood (a one-sided kernel at large theta) solvable without shrinking real structure.
SMAP_RIDGE = 1e-8


@dataclass(frozen=True)
class EDMParams(Hyperparameters):
    method: str = param("smap", "simplex (nearest neighbours) or smap (kernel-weighted local linear)")
    E: int | None = param(None, "embedding dimension (lags per variable); none = choose by simplex leave-out skill")
    tau: int | None = param(None, "samples between lags; none = choose by simplex leave-out skill")
    theta: float | None = param(None, "S-map locality; none = choose by leave-out skill (0 = global linear)")
    max_E: int = param(6, "largest embedding dimension tried when E is chosen")

    def __post_init__(self) -> None:
        if self.method not in ("simplex", "smap"):
            raise ValueError(f"method must be simplex or smap, not {self.method!r}")
        for name in ("E", "tau"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be a positive integer or none, not {value}")
        if self.theta is not None and not self.theta >= 0:
            raise ValueError(f"theta must be zero, positive or none, not {self.theta}")
        if self.max_E < 1:
            raise ValueError(f"max_E must be a positive integer, not {self.max_E}")


def embed(z: np.ndarray, rows: np.ndarray, E: int, tau: int) -> np.ndarray:
    """States (len(rows), E d) at samples ``rows`` of z (n, d): lag 0 of every variable, then
    lag tau, ... (every row needs t >= (E - 1) tau)."""
    return np.concatenate([z[rows - j * tau] for j in range(E)], axis=1)


def simplex_increments(
    library: np.ndarray, increments: np.ndarray, queries: np.ndarray,
    tree: cKDTree | None = None,
) -> np.ndarray:
    """Predicted increments (q, d) at queries (q, D): the exp(-distance / nearest)-weighted
    mean of the increments (N, d) of the D + 1 nearest library states (N, D); ``tree``, the
    library's cKDTree when the caller keeps one."""
    from scipy.spatial import cKDTree

    tree = cKDTree(library) if tree is None else tree
    k = min(library.shape[1] + 1, len(library))
    distance, index = tree.query(queries, k=k)
    distance, index = distance.reshape(len(queries), k), index.reshape(len(queries), k)
    nearest = np.maximum(distance[:, :1], 1e-12)
    weights = np.exp(-distance / nearest)
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("qk,qkd->qd", weights, increments[index])


def smap_increments(
    library: np.ndarray, increments: np.ndarray, queries: np.ndarray, theta: float
) -> np.ndarray:
    """Predicted increments (q, d): per query, the least-squares fit of increments (N, d) on
    [1, state] over the library (N, D), weighted by exp(-theta distance / mean distance)."""
    design = np.hstack([np.ones((len(library), 1)), library])  # (N, P)
    p = design.shape[1]
    outer = (design[:, :, None] * design[:, None, :]).reshape(len(library), p * p)
    cross = (design[:, :, None] * increments[:, None, :]).reshape(len(library), -1)
    out = np.empty((len(queries), increments.shape[1]))
    block = max(1, SMAP_BLOCK // len(library))
    squared_library = np.sum(library**2, axis=1)
    for start in range(0, len(queries), block):
        q = queries[start : start + block]
        squared = np.sum(q**2, axis=1)[:, None] - 2 * q @ library.T + squared_library
        distance = np.sqrt(np.maximum(squared, 0.0))
        weights = np.exp(-theta * distance / np.maximum(distance.mean(axis=1, keepdims=True), 1e-12))
        gram = (weights @ outer).reshape(len(q), p, p)
        rhs = (weights @ cross).reshape(len(q), p, -1)
        ridge = SMAP_RIDGE * np.trace(gram, axis1=1, axis2=2)[:, None, None] * np.eye(p)
        coefficients = np.linalg.solve(gram + ridge, rhs)  # (q, P, d)
        point = np.hstack([np.ones((len(q), 1)), q])
        out[start : start + len(q)] = np.einsum("qp,qpd->qd", point, coefficients)
    return out


def skill(predicted: np.ndarray, observed: np.ndarray) -> float:
    """Mean over variables of the Pearson correlation of predicted and observed (n, d); a
    variable without variance in either counts 0."""
    p = predicted - predicted.mean(axis=0)
    o = observed - observed.mean(axis=0)
    norm = np.sqrt(np.sum(p**2, axis=0) * np.sum(o**2, axis=0))
    return float(np.mean(np.where(norm > 0, np.sum(p * o, axis=0) / np.where(norm > 0, norm, 1), 0)))


@dataclass
class _Library:
    """Embedded training rows: states (N, D), increments (N, d), next values (N, d)."""

    states: np.ndarray
    increments: np.ndarray


def _library(trials_z: list[np.ndarray], E: int, tau: int) -> _Library | None:
    first = (E - 1) * tau
    parts = [(embed(z, np.arange(first, len(z) - 1), E, tau), np.diff(z[first:], axis=0))
             for z in trials_z if len(z) > first + 1]
    if not parts:
        return None
    return _Library(np.vstack([s for s, _ in parts]), np.vstack([i for _, i in parts]))


def _leave_out(
    library: _Library, predict: Predictor
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predicted and observed increments (n, d) and the current states' lag-0 part (n, d) of
    up to QUERIES_PER_FOLD rows spread over each of FOLDS contiguous blocks, each block
    predicted by ``predict(states, increments, queries)`` from the other blocks."""
    rows = np.arange(len(library.states))
    d = library.increments.shape[1]
    predicted, observed, current = [], [], []
    for held_out in np.array_split(rows, FOLDS):
        queries = held_out[:: max(1, len(held_out) // QUERIES_PER_FOLD)]
        keep = np.ones(len(rows), dtype=bool)
        keep[held_out] = False
        predicted.append(predict(library.states[keep], library.increments[keep],
                                 library.states[queries]))
        observed.append(library.increments[queries])
        current.append(library.states[queries, :d])
    return np.vstack(predicted), np.vstack(observed), np.vstack(current)


class EDM(Backend):
    """Simplex or S-map forecasts over a delay-embedded library.

    Fitted arrays: ``mean``, ``scale`` (d,) the standardisation; ``states`` (N, E d) the
    library's embedded states and ``increments`` (N, d) their next standardised increments.
    ``metrics_`` records the chosen E, tau, theta and the leave-out skill of every candidate.
    """

    name = "edm"
    summary = "empirical dynamic modelling: delay embedding, simplex or S-map forecasts"
    Params = EDMParams
    capabilities = Capabilities(uniform_steps=True)
    params: EDMParams

    @property
    def history_length(self) -> int:
        if not hasattr(self, "E_"):  # before fitting: the given embedding, else one sample
            return ((self.params.E or 1) - 1) * (self.params.tau or 1) + 1
        return (self.E_ - 1) * self.tau_ + 1

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        scaling = Standardiser.of([trial.x for trial in data.trials])
        trials_z = [scaling.forward(trial.x) for trial in data.trials]
        longest = max(len(z) for z in trials_z)
        # tau only matters from E = 2 on: E = 1 is tried once.
        dimensions = [self.params.E] if self.params.E else range(1, self.params.max_E + 1)
        taus = [self.params.tau] if self.params.tau else TAUS
        candidates = [(E, tau) for E in dimensions for tau in (taus if E > 1 else taus[:1])
                      if (E - 1) * tau < longest // 4]
        if not candidates:
            # Kept: (E - 1) tau < longest // 4, so the least embedding needs 4 ((E - 1) tau + 1).
            span = min((E - 1) * tau for E in dimensions for tau in taus)
            raise DataError(f"the edm model needs a trial of at least 4 ((E - 1) tau + 1) = "
                            f"{4 * (span + 1)} samples; the longest has {longest}")
        by_embedding: dict[tuple[int, int], float] = {}
        for E, tau in candidates:
            library = _library(trials_z, E, tau)
            if library is None or len(library.states) < 2 * FOLDS * (E * len(data.variables) + 2):
                continue
            by_embedding[E, tau] = skill(*_leave_out(library, simplex_increments)[:2])
        if not by_embedding:
            raise DataError("the edm model needs more samples than its embedding has coordinates")
        # The best skill; among equals (to 1e-3) the shortest embedding window, then fewest lags.
        best = max(by_embedding.values())
        self.E_, self.tau_ = min(
            (key for key, value in by_embedding.items() if value >= best - 1e-3),
            key=lambda key: ((key[0] - 1) * key[1], key[0]),
        )
        simplex_skill = {f"{E},{tau}": value for (E, tau), value in by_embedding.items()}
        library = _library(trials_z, self.E_, self.tau_)
        assert library is not None
        theta_skill: dict[str, float] = {}
        theta = self.params.theta
        if self.params.method == "smap" and theta is None:
            for candidate in THETAS:
                predict = _smap(candidate)
                theta_skill[f"{candidate:g}"] = skill(*_leave_out(library, predict)[:2])
            top = max(theta_skill.values())
            theta = min(c for c in THETAS if theta_skill[f"{c:g}"] >= top - 1e-4)
        self.theta_ = float(theta or 0.0)
        self.mean_, self.scale_ = scaling.mean, scaling.scale
        self.states_, self.increments_ = library.states, library.increments
        predicted, observed, current = _leave_out(library, self._predictor())
        self.metrics_ = {
            "E": self.E_,
            "tau": self.tau_,
            "theta": self.theta_ if self.params.method == "smap" else None,
            "library_size": int(len(library.states)),
            "simplex_skill": simplex_skill,
            "theta_skill": theta_skill,
            # Skill as EDM usually reports it, on the next values, and on the increments.
            "leave_out_rho": skill(current + predicted, current + observed),
            "leave_out_increment_rho": skill(predicted, observed),
        }

    def _predictor(self) -> Predictor:
        return simplex_increments if self.params.method == "simplex" else _smap(self.theta_)

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        from scipy.spatial import cKDTree

        scaling = Standardiser(self.mean_, self.scale_)
        window = self.history_length
        z = np.empty((window + steps, self.n_variables))
        z[:window] = scaling.forward(history.x[-window:])
        tree = cKDTree(self.states_) if self.params.method == "simplex" else None
        for t in range(window - 1, window - 1 + steps):
            query = embed(z, np.array([t]), self.E_, self.tau_)
            if tree is not None:
                step = simplex_increments(self.states_, self.increments_, query, tree)
            else:
                step = smap_increments(self.states_, self.increments_, query, self.theta_)
            z[t + 1] = z[t] + step[0]
        return scaling.inverse(z[window:])

    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        return {"mean": self.mean_, "scale": self.scale_, "states": self.states_,
                "increments": self.increments_, "embedding": np.array([self.E_, self.tau_]),
                "theta": np.array([self.theta_])}

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d = self.n_variables
        self.E_, self.tau_ = (int(v) for v in expect_array(arrays, "embedding", (2,)))
        self.theta_ = float(expect_array(arrays, "theta", (1,))[0])
        self.mean_ = expect_array(arrays, "mean", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        self.states_ = expect_array(arrays, "states", (None, self.E_ * d)).astype(float)
        self.increments_ = expect_array(arrays, "increments", (len(self.states_), d)).astype(float)


def _smap(theta: float) -> Predictor:
    """The S-map predictor at locality ``theta``."""
    return lambda states, increments, queries: smap_increments(states, increments, queries, theta)
