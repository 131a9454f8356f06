"""Exact DMD (Tu et al. 2014) and DMDc (Proctor et al. 2016) on snapshot matrices.

The algorithms behind the ``dmd`` backend, and behind ``koopman``, which runs exact DMD on lifted
snapshots. Columns are snapshots: x (d, N) at step k, y (d, N) at step k+1.
"""

from __future__ import annotations

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


def exact_dmd(x: np.ndarray, y: np.ndarray, rank: int | None) -> tuple[DMDOperators, int]:
    """Tu et al.'s exact DMD: A = Y V_r S_r^-1 U_r^T from the rank-r SVD X = U S V^T.

    x, y: (d, N) snapshots at k and k+1. The reduced operator is U_r^T Y V_r S_r^-1 (r, r);
    its eigenvalues are the nonzero eigenvalues of A and Y V_r S_r^-1 w are the exact modes.
    rank: r, or None for the optimal hard threshold. Returns the operators and r.
    """
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    r = choose_rank(rank, s, x.shape, "rank")
    lift = y @ vt[:r].T / s[:r]  # (d, r)
    basis = u[:, :r]
    operators = DMDOperators(
        a=lift @ basis.T, b=np.zeros((x.shape[0], 0)), reduced=basis.T @ lift, lift=lift
    )
    return operators, r


def dmdc(
    y: np.ndarray, omega: np.ndarray, d: int, rank: int | None, input_rank: int | None
) -> tuple[DMDOperators, int, int]:
    """Proctor et al.'s DMDc with unknown B.

    y: (d, N) states at k+1; omega: (d + m, N) stacked [x_k; u_k].
    [A B] = Y V~ S~^-1 U~^T from the rank-p SVD of omega; both are then projected onto the
    leading r left singular vectors U^ of Y (the output space): reduced = U^T A U^,
    A = U^ reduced U^T, B = U^ U^T B. With r = d no projection is needed.
    Returns the operators, r and p.
    """
    uo, so, vto = np.linalg.svd(omega, full_matrices=False)
    uy, sy, _ = np.linalg.svd(y, full_matrices=False)
    r = choose_rank(rank, sy, y.shape, "rank")
    p = choose_rank(input_rank, so, omega.shape, "input_rank")
    if input_rank is None:
        # Fewer than r input-space directions would leave zero eigenvalues in the r modes.
        p = min(max(p, r), numerical_rank(so, omega.shape))
    gain = (y @ vto[:p].T / so[:p]) @ uo[:, :p].T  # (d, d + m) = [A B]
    a, b = gain[:, :d], gain[:, d:]
    if r < d:
        basis = uy[:, :r]
        reduced = basis.T @ a @ basis
        a, b = basis @ reduced @ basis.T, basis @ (basis.T @ b)
    else:
        basis, reduced = np.eye(d), a
    return DMDOperators(a=a, b=b, reduced=reduced, lift=basis), r, p
