"""Exact DMD (Tu et al. 2014) and DMDc (Proctor et al. 2016) on snapshot matrices.

The algorithms behind the ``dmd`` backend, and behind ``koopman``, which runs exact DMD on lifted
snapshots. Columns are snapshots: x (d, N) at step k, y (d, N) at step k+1. Each algorithm
works on ``SnapshotFactors``, which come either from the matrices (SVD) or from their Gram
matrices (running sums of a file read in chunks); ``exact_dmd`` and ``dmdc`` take the matrices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dynid.errors import DataError, UsageError
from dynid.linear.rank import numerical_rank, optimal_hard_threshold_rank


@dataclass(frozen=True)
class DMDOperators:
    """A (d, d), B (d, m); reduced (r, r) operator and lift (d, r) with A lift = lift reduced,
    so an eigenvector w of ``reduced`` gives the mode ``lift @ w`` of A."""

    a: np.ndarray
    b: np.ndarray
    reduced: np.ndarray
    lift: np.ndarray


def choose_rank(
    requested: int | None, s: np.ndarray, shape: tuple[int, int], what: str
) -> int:
    """The requested rank, checked against the data, or the optimal hard threshold's."""
    numerical = numerical_rank(s, shape)
    if numerical == 0:
        raise DataError("the snapshot matrix is zero; DMD needs data that vary")
    if requested is None:
        return optimal_hard_threshold_rank(s, shape)
    limit = min(shape)
    if requested > limit:
        raise UsageError(
            f"-p {what}={requested} exceeds the largest possible, {limit}; choose at most {limit}"
        )
    # Singular values at round-off level would blow up their inverse: never keep them.
    return min(requested, numerical)


@dataclass(frozen=True)
class SnapshotFactors:
    """What DMD uses of a snapshot matrix M (q, N) and the targets Y (d, N): the left singular
    vectors ``u`` (q, q') and singular values ``s`` (q',) of M, its ``shape``, and
    ``targets_on_right(r)`` = Y V_r S_r^-1 (d, r), V_r the leading r right singular vectors."""

    u: np.ndarray
    s: np.ndarray
    shape: tuple[int, int]
    targets_on_right: Callable[[int], np.ndarray]

    @classmethod
    def of(cls, m: np.ndarray, y: np.ndarray) -> SnapshotFactors:
        """From the matrices themselves (SVD)."""
        u, s, vt = np.linalg.svd(m, full_matrices=False)
        return cls(u, s, m.shape, lambda r: y @ vt[:r].T / s[:r])

    @classmethod
    def from_gram(cls, gram: np.ndarray, cross: np.ndarray, n: int) -> SnapshotFactors:
        """From M M' (q, q), Y M' (d, q) and N, as running sums give them: M M' = U S^2 U', and
        Y V_r S_r^-1 = Y M' U_r S_r^-2."""
        values, vectors = np.linalg.eigh(gram)
        s = np.sqrt(np.clip(values[::-1], 0.0, None))
        u = vectors[:, ::-1]
        return cls(u, s, (gram.shape[0], n), lambda r: cross @ u[:, :r] / s[:r] ** 2)


def exact_dmd(x: np.ndarray, y: np.ndarray, rank: int | None) -> tuple[DMDOperators, int]:
    """Exact DMD of the (d, N) snapshots ``x`` at k and ``y`` at k+1 (see ``exact_dmd_of``)."""
    return exact_dmd_of(SnapshotFactors.of(x, y), rank)


def exact_dmd_of(x: SnapshotFactors, rank: int | None) -> tuple[DMDOperators, int]:
    """Tu et al.'s exact DMD: A = Y V_r S_r^-1 U_r^T from the rank-r SVD X = U S V^T.

    x: the factors of the (d, N) snapshots at k, with Y those at k+1. The reduced operator is
    U_r^T Y V_r S_r^-1 (r, r); its eigenvalues are the nonzero eigenvalues of A and
    Y V_r S_r^-1 w are the exact modes. rank: r, or None for the optimal hard threshold.
    Returns the operators and r.
    """
    r = choose_rank(rank, x.s, x.shape, "rank")
    lift = x.targets_on_right(r)  # (d, r)
    basis = x.u[:, :r]
    operators = DMDOperators(
        a=lift @ basis.T, b=np.zeros((x.shape[0], 0)), reduced=basis.T @ lift, lift=lift
    )
    return operators, r


def dmdc(
    y: np.ndarray, omega: np.ndarray, d: int, rank: int | None, input_rank: int | None
) -> tuple[DMDOperators, int, int]:
    """DMDc of the (d, N) states ``y`` at k+1 and the (d + m, N) stacked [x_k; u_k] ``omega``
    (see ``dmdc_of``)."""
    return dmdc_of(SnapshotFactors.of(y, y), SnapshotFactors.of(omega, y), d, rank, input_rank)


def dmdc_of(
    y: SnapshotFactors, omega: SnapshotFactors, d: int, rank: int | None, input_rank: int | None
) -> tuple[DMDOperators, int, int]:
    """Proctor et al.'s DMDc with unknown B.

    y: the factors of the (d, N) states at k+1; omega: those of the (d + m, N) stacked
    [x_k; u_k], with Y the states at k+1.
    [A B] = Y V~ S~^-1 U~^T from the rank-p SVD of omega; both are then projected onto the
    leading r left singular vectors U^ of Y (the output space): reduced = U^T A U^,
    A = U^ reduced U^T, B = U^ U^T B. With r = d no projection is needed.
    Returns the operators, r and p.
    """
    r = choose_rank(rank, y.s, y.shape, "rank")
    p = choose_rank(input_rank, omega.s, omega.shape, "input_rank")
    if input_rank is None:
        # Fewer than r input-space directions would leave zero eigenvalues in the r modes.
        p = min(max(p, r), numerical_rank(omega.s, omega.shape))
    gain = omega.targets_on_right(p) @ omega.u[:, :p].T  # (d, d + m) = [A B]
    a, b = gain[:, :d], gain[:, d:]
    if r < d:
        basis = y.u[:, :r]
        reduced = basis.T @ a @ basis
        a, b = basis @ reduced @ basis.T, basis @ (basis.T @ b)
    else:
        basis, reduced = np.eye(d), a
    return DMDOperators(a=a, b=b, reduced=reduced, lift=basis), r, p
