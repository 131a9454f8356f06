"""Dictionaries (observables) for EDMD: functions psi of the state, or of a short window of past
states, in which the Koopman operator is approximated by a matrix.

Every dictionary works on standardised states z = (x - center) / scale and returns, per sample,
the features ``[1, z_k (d values), extra...]``: the constant in column 0 and the current state in
columns 1..d, so the states are read out of the lifted state exactly and linearly
(x = center + scale * psi[1:d+1]). Kinds:

- ``PolynomialDictionary``: all monomials of z up to a total degree (includes 1 and z).
- ``RBFDictionary``: 1, z and Gaussians exp(-|z - c|^2 / (2 width^2)) around centres c.
- ``DelayDictionary``: 1, z_k, z_{k-1}, ..., z_{k-q+1} (Hankel / delay-embedded DMD).
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
        distances = np.linalg.norm(centers[:, None, :] - centers[None, :, :], axis=2)
        pairwise = distances[np.triu_indices(n_centers, k=1)]
        width = float(np.median(pairwise)) if pairwise.size else 1.0
        return cls(centers=centers, width=width if width > 0 else 1.0)

    def lift(self, z: np.ndarray) -> np.ndarray:
        """(n, d) standardised states -> (n, 1 + d + c) features."""
        squared = np.sum((z[:, None, :] - self.centers[None, :, :]) ** 2, axis=2)
        gaussians = np.exp(-squared / (2 * self.width**2))
        return np.hstack([np.ones((z.shape[0], 1)), z, gaussians])


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
        blocks = [z[self.delays - 1 - lag : self.delays - 1 - lag + n] for lag in range(self.delays)]
        return np.hstack([np.ones((n, 1)), *blocks])


Dictionary = PolynomialDictionary | RBFDictionary | DelayDictionary
