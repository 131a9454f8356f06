"""Dictionaries (observables) for EDMD: functions psi of the state, or of a short window of past
states, in which the Koopman operator is approximated by a matrix.

Every dictionary works on standardised states z = (x - center) / scale and returns, per sample,
the features ``[1, z_k (d values), extra...]``: the constant in column 0 and the current state in
columns 1..d, so the states are read out of the lifted state exactly and linearly
(x = center + scale * psi[1:d+1]). Kinds:

- ``PolynomialDictionary``: all monomials of z up to a total degree (includes 1 and z).
- ``RBFDictionary``: 1, z and Gaussians exp(-|z - c|^2 / (2 width^2)) around centres c.
- ``DelayDictionary``: 1, z_k, z_{k-1}, ..., z_{k-q+1} (Hankel / delay-embedded DMD).
- ``NystromDictionary``: 1, z and Nystrom features of a Gaussian kernel (kernel EDMD; with every
  training state a landmark this is the exact kernel EDMD feature space).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dynid.errors import DataError


@dataclass(frozen=True)
class PolynomialDictionary:
    """Monomials z^e for every exponent row e of ``exponents`` (F, d), ordered by total degree
    (row 0 all zeros = the constant, rows 1..d the unit vectors = the states)."""

    exponents: np.ndarray

    @classmethod
    def of_degree(cls, d: int, degree: int) -> PolynomialDictionary:
        rows = [np.zeros(d, dtype=np.int64)]
        for total in range(1, degree + 1):
            for combo in itertools.combinations_with_replacement(range(d), total):
                rows.append(np.bincount(np.array(combo), minlength=d).astype(np.int64))
        return cls(exponents=np.array(rows))

    window = 1

    def lift(self, z: np.ndarray) -> np.ndarray:
        """(n, d) standardised states -> (n, F) monomials."""
        return np.prod(z[:, None, :] ** self.exponents[None, :, :], axis=2)


@dataclass(frozen=True)
class RBFDictionary:
    """Gaussians around ``centers`` (c, d) with one ``width`` (standardised units)."""

    centers: np.ndarray
    width: float

    window = 1

    @classmethod
    def from_states(cls, z: np.ndarray, n_centers: int, seed: int | None) -> RBFDictionary:
        """Centres by k-means (k-means++ start, seeded) on the (n, d) standardised states; width
        by the median heuristic: the median distance between distinct centres."""
        from scipy.cluster.vq import kmeans2

        unique = np.unique(z, axis=0)
        if unique.shape[0] < n_centers:
            raise DataError(
                f"-p centers={n_centers}: the data have only {unique.shape[0]} distinct states; "
                "choose fewer centres"
            )
        centers, _ = kmeans2(unique, n_centers, minit="++", seed=np.random.default_rng(seed))
        return cls(centers=centers, width=median_distance(centers))

    def lift(self, z: np.ndarray) -> np.ndarray:
        """(n, d) standardised states -> (n, 1 + d + c) features."""
        gaussians = gaussian_kernel(z, self.centers, self.width)
        return np.hstack([np.ones((z.shape[0], 1)), z, gaussians])


@dataclass(frozen=True)
class NystromDictionary:
    """Nystrom features of the Gaussian kernel k(z, z') = exp(-|z - z'|^2 / (2 width^2)):
    phi(z) = k(z, landmarks) @ projection, projection (m, p) = U_p Lambda_p^-1/2 from the
    eigendecomposition of the landmarks' Gram matrix, so phi(a) . phi(b) = k(a, b) on the
    landmarks' span (kernel EDMD in explicit, p-dimensional coordinates)."""

    landmarks: np.ndarray
    width: float
    projection: np.ndarray

    window = 1

    # Gram eigenvalues below this fraction of the largest are dropped: their inverse square
    # root would multiply round-off by more than 1e4.
    RELATIVE_EIGENVALUE_FLOOR = 1e-8

    @classmethod
    def from_states(
        cls, z: np.ndarray, n_landmarks: int, seed: int | None
    ) -> NystromDictionary:
        """Landmarks: a seeded subsample of the distinct (n, d) standardised states (all of
        them when there are at most ``n_landmarks``); width by the median heuristic."""
        unique = np.unique(z, axis=0)
        if unique.shape[0] > n_landmarks:
            chosen = np.random.default_rng(seed).choice(unique.shape[0], n_landmarks, replace=False)
            unique = unique[np.sort(chosen)]
        width = median_distance(unique)
        values, vectors = np.linalg.eigh(gaussian_kernel(unique, unique, width))
        keep = values > cls.RELATIVE_EIGENVALUE_FLOOR * values[-1]
        # C order, as a model file restores it, so a restored model lifts bit-identically.
        projection = np.ascontiguousarray(vectors[:, keep] / np.sqrt(values[keep]))
        return cls(landmarks=unique, width=width, projection=projection)

    def lift(self, z: np.ndarray) -> np.ndarray:
        """(n, d) standardised states -> (n, 1 + d + p) features."""
        features = gaussian_kernel(z, self.landmarks, self.width) @ self.projection
        return np.hstack([np.ones((z.shape[0], 1)), z, features])


@dataclass(frozen=True)
class DelayDictionary:
    """The last ``delays`` standardised states, newest first."""

    delays: int

    @property
    def window(self) -> int:
        return self.delays

    def lift(self, z: np.ndarray) -> np.ndarray:
        """(n, d) standardised states -> (n - delays + 1, 1 + delays d) windows, row i ending at
        sample i + delays - 1."""
        n = z.shape[0] - self.delays + 1
        newest = self.delays - 1
        blocks = [z[newest - lag : newest - lag + n] for lag in range(self.delays)]
        return np.hstack([np.ones((n, 1)), *blocks])


Dictionary = PolynomialDictionary | RBFDictionary | DelayDictionary | NystromDictionary


def gaussian_kernel(a: np.ndarray, b: np.ndarray, width: float) -> np.ndarray:
    """(n, m) exp(-|a_i - b_j|^2 / (2 width^2)) for points a (n, d) and b (m, d)."""
    # The expanded square needs (n, m) memory, not (n, m, d); clipped for its round-off.
    squared = np.sum(a**2, axis=1)[:, None] + np.sum(b**2, axis=1)[None, :] - 2 * a @ b.T
    return np.exp(-np.clip(squared, 0.0, None) / (2 * width**2))


def median_distance(points: np.ndarray) -> float:
    """The median heuristic for a Gaussian width: the median distance between distinct points
    (m, d); 1 when there are fewer than two or they coincide."""
    distances = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)
    pairwise = distances[np.triu_indices(points.shape[0], k=1)]
    width = float(np.median(pairwise)) if pairwise.size else 1.0
    return width if width > 0 else 1.0
