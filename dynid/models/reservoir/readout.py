"""What both reservoir backends share: per-variable standardisation, the ridge read-out, and
the choice of its ridge by closed-loop skill on held-out blocks of the training data.

The read-out maps features (N, k) to targets (N, d) as ``targets ≈ features @ weights + bias``.
The bias is unpenalised (features and targets are centred before the penalised solve), so the
ridge acts on the shape of the map, not on its level.

Why not GCV: one-step criteria reward the smallest ridge on clean chaotic data (GCV chose 1e-12
for ngrc on Lorenz, whose free run then diverged within 0.1 Lyapunov times, against about 4 at
1e-8), because they never run the map in closed loop. So the ridge is chosen by what a forecast
needs: how many steps a free run started inside a held-out block stays within the valid
prediction threshold of the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from dynid.errors import DataError
from dynid.metrics.forecast import one_step_metrics

# Candidate ridges: penalties on the mean squared error, from effectively none to strong.
RIDGE_GRID = tuple(float(r) for r in 10.0 ** np.arange(-12.0, 1.0))
# Contiguous held-out blocks of the training rows for choosing the ridge; closed-loop steps per
# held-out start, and starts per block.
N_FOLDS = 5
SKILL_HORIZON = 200
SKILL_STARTS = 5

# (weights (C, k, d), bias (C, d), held-out row indices into the design) -> (C,) mean valid
# closed-loop steps of the C read-outs: one call scores every candidate ridge at once.
RolloutSkill = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
Candidate = TypeVar("Candidate")


@dataclass(frozen=True)
class Readout:
    """A fitted ridge read-out: weights (k, d), bias (d,), the ridge used, and every candidate
    ridge's mean valid closed-loop steps on held-out blocks (empty when the ridge was given)."""

    weights: np.ndarray
    bias: np.ndarray
    ridge: float
    skill: dict[float, float]

    def predict(self, features: np.ndarray) -> np.ndarray:
        """(n, k) features -> (n, d) targets."""
        return features @ self.weights + self.bias

    def metrics(
        self, features: np.ndarray, targets: np.ndarray, scale: np.ndarray
    ) -> dict[str, object]:
        """The fit's metrics: the ridge and how it was chosen, and the one-step errors of the
        standardised targets (N, d) mapped back to data units by ``scale`` (d,)."""
        return {
            "ridge": self.ridge,
            # One scored ridge is a given one (scored only to choose other settings).
            "ridge_selected_by": "closed-loop skill" if len(self.skill) > 1 else "fixed",
            "ridge_skill_steps": {f"{r:g}": v for r, v in self.skill.items()},
            "n_obs": int(features.shape[0]),
            **one_step_metrics(targets * scale, self.predict(features) * scale),
        }


class RidgeSolver:
    """The centred normal equations of features (N, k) against targets (N, d), diagonalised
    once and solved for any ridge: minimise mean squared error + ridge * sum of squared
    weights, bias unpenalised. (An eigendecomposition of the k x k Gram matrix, not an SVD of
    the N x k design: a reservoir has hundreds of features and the fit is solved once per
    held-out block.)"""

    def __init__(self, features: np.ndarray, targets: np.ndarray) -> None:
        self.n = features.shape[0]
        if self.n < 2:
            raise DataError(f"the read-out needs at least 2 training rows, the data give {self.n}")
        self.feature_mean = features.mean(axis=0)
        self.target_mean = targets.mean(axis=0)
        centred = features - self.feature_mean
        self.eigenvalues, self.eigenvectors = np.linalg.eigh(centred.T @ centred)
        self.projected = self.eigenvectors.T @ (centred.T @ (targets - self.target_mean))
        top = max(float(self.eigenvalues[-1]), 0.0)
        self.kept = self.eigenvalues > top * max(features.shape) * np.finfo(float).eps

    def solve(self, ridge: float) -> tuple[np.ndarray, np.ndarray]:
        """weights (k, d) and bias (d,); directions of (numerically) zero variance get none."""
        gain = np.where(self.kept, 1.0 / (np.where(self.kept, self.eigenvalues, 1.0)
                                          + self.n * ridge), 0.0)
        weights = self.eigenvectors @ (gain[:, None] * self.projected)
        return weights, self.target_mean - self.feature_mean @ weights


@dataclass(frozen=True)
class Design:
    """One candidate's regression: features (N, k), targets (N, d), and how to score read-outs
    of it in closed loop on held-out rows."""

    features: np.ndarray
    targets: np.ndarray
    rollout_skill: RolloutSkill


def cross_validated_skill(design: Design, ridges: tuple[float, ...]) -> np.ndarray:
    """Mean valid closed-loop steps (len(ridges),) of read-outs fitted without each of
    ``N_FOLDS`` contiguous blocks of the rows and run from starts inside it."""
    rows = np.arange(design.features.shape[0])
    total = np.zeros(len(ridges))
    for held_out in np.array_split(rows, N_FOLDS):
        solver = RidgeSolver(np.delete(design.features, held_out, 0),
                             np.delete(design.targets, held_out, 0))
        weights, biases = zip(*(solver.solve(candidate) for candidate in ridges))
        total += design.rollout_skill(np.stack(weights), np.stack(biases), held_out) / N_FOLDS
    return total


def select_readout(
    candidates: Sequence[Candidate],
    design: Callable[[Candidate], Design],
    ridge: float | None,
) -> tuple[Candidate, Design, Readout, list[float]]:
    """The best of ``candidates`` (settings that change the features, e.g. a reservoir) and
    ridges, its design and its read-out fitted on all rows, and each candidate's best skill.

    ridge None tries every ridge of ``RIDGE_GRID``. Every (candidate, ridge) pair is scored by
    ``cross_validated_skill``; the largest skill wins, ties going to the larger ridge (the
    smoother map), then to the earlier candidate. A single candidate with a given ridge is used
    as it is, unscored. Designs are built one at a time, so only the best is kept in memory.
    """
    if ridge is not None and not ridge >= 0:
        raise ValueError(f"ridge must be zero or positive, not {ridge}")
    ridges = RIDGE_GRID if ridge is None else (float(ridge),)
    if len(candidates) == 1 and ridge is not None:
        only = design(candidates[0])
        weights, bias = RidgeSolver(only.features, only.targets).solve(ridge)
        return candidates[0], only, Readout(weights, bias, float(ridge), {}), []
    best: tuple[tuple[float, float], Candidate, Design, dict[float, float]] | None = None
    best_skills = []
    for candidate in candidates:
        built = design(candidate)
        skill = dict(zip(ridges, cross_validated_skill(built, ridges).tolist()))
        chosen = max(ridges, key=lambda r: (skill[r], r))
        best_skills.append(skill[chosen])
        if best is None or (skill[chosen], chosen) > best[0]:
            best = ((skill[chosen], chosen), candidate, built, skill)
    assert best is not None  # candidates is not empty
    (_, chosen), candidate, built, skill = best
    weights, bias = RidgeSolver(built.features, built.targets).solve(chosen)
    return candidate, built, Readout(weights, bias, chosen, skill), best_skills


def fit_ridge_readout(
    features: np.ndarray,
    targets: np.ndarray,
    ridge: float | None,
    rollout_skill: RolloutSkill,
) -> Readout:
    """The ridge read-out of features (N, k) to targets (N, d); ridge None chooses it from
    ``RIDGE_GRID`` by ``cross_validated_skill`` (``select_readout`` with one candidate)."""
    design = Design(features, targets, rollout_skill)
    return select_readout([None], lambda _: design, ridge)[2]


def held_out_starts(
    held_out: np.ndarray, row_trial: np.ndarray, row_t: np.ndarray, trials_z: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Up to SKILL_STARTS design rows spread over ``held_out``, and the data after each,
    truth (starts, H, d) with H <= SKILL_HORIZON the same for all (a run may pass the block's
    end, never its trial's). row_trial, row_t: each design row's trial and sample index."""
    starts = held_out[:: max(1, len(held_out) // SKILL_STARTS)][:SKILL_STARTS]
    horizon = min(SKILL_HORIZON, *(len(trials_z[row_trial[r]]) - 1 - row_t[r] for r in starts))
    truth = np.stack([trials_z[row_trial[r]][row_t[r] + 1 : row_t[r] + 1 + horizon]
                      for r in starts])
    return starts, truth


def valid_steps(prediction: np.ndarray, truth: np.ndarray, threshold: float) -> np.ndarray:
    """Steps before the RMS over variables of prediction - truth (..., H, d), standardised,
    first exceeds ``threshold``, shape (...); a non-finite step counts as exceeding."""
    error = np.sqrt(np.mean((prediction - truth) ** 2, axis=-1))
    exceeded = ~(error <= threshold)
    return np.where(exceeded.any(axis=-1), exceeded.argmax(axis=-1), error.shape[-1])


@dataclass(frozen=True)
class Standardiser:
    """Per-variable affine scaling ``z = (x - mean) / scale``; mean, scale: (d,), data units.

    Both reservoirs work on standardised states so that one input scaling or feature map suits
    variables of any units.
    """

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def of(cls, trials_x: list[np.ndarray]) -> Standardiser:
        """Mean and standard deviation over all trials (scale 1 for a constant variable)."""
        stacked = np.vstack(trials_x)
        scale = stacked.std(axis=0)
        return cls(stacked.mean(axis=0), np.where(scale > 0, scale, 1.0))

    def forward(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean) / self.scale

    def inverse(self, z: np.ndarray) -> np.ndarray:
        return z * self.scale + self.mean
