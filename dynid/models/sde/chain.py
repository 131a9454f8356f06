"""Gaussian Markov chains over a time grid in natural parameters, and their moments.

A chain of N states z_i in R^D has the density q(z) proportional to
    exp( sum_i h_i^T z_i - 1/2 sum_i z_i^T J_i z_i - sum_i z_i^T L_i z_{i+1} ),
i.e. a block-tridiagonal precision with diagonal blocks J_i and off-diagonal blocks L_i. An
L_i of zero cuts the chain (independent trials laid end to end). ``moments`` turns natural
parameters into means, marginal covariances and lag-one cross-covariances: the banded Cholesky
factor from LAPACK, the means by two banded triangular solves, and the covariances by the
backward recursion Sigma_i = P_i + G_i Sigma_{i+1} G_i^T (the RTS smoother's, read off the
factor) evaluated as a doubling scan, log2(N) batched steps instead of N small ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_solve_banded, cholesky_banded


@dataclass(frozen=True)
class Natural:
    """Natural parameters of a chain: h (N, D), J (N, D, D) symmetric, L (N-1, D, D)."""

    h: np.ndarray
    J: np.ndarray
    L: np.ndarray

    def blend(self, target: Natural, rho: float) -> Natural:
        """(1 - rho) self + rho target: the natural-gradient (mirror-descent) step."""
        return Natural(*((1 - rho) * a + rho * b for a, b in
                         ((self.h, target.h), (self.J, target.J), (self.L, target.L))))


@dataclass(frozen=True)
class Moments:
    """means (N, D); covs (N, D, D) marginal covariances; cross (N-1, D, D) Cov(z_i, z_{i+1});
    log_det the log-determinant of the precision (for the entropy)."""

    means: np.ndarray
    covs: np.ndarray
    cross: np.ndarray
    log_det: float

    def entropy(self) -> float:
        """Differential entropy of the chain, in nats."""
        n, d = self.means.shape
        return 0.5 * n * d * math.log(2 * math.pi * math.e) - 0.5 * self.log_det

    def second(self) -> np.ndarray:
        """E[z_i z_i^T] (N, D, D)."""
        return self.covs + np.einsum("ni,nj->nij", self.means, self.means)

    def lagged(self) -> np.ndarray:
        """E[z_i z_{i+1}^T] (N-1, D, D)."""
        return self.cross + np.einsum("ni,nj->nij", self.means[:-1], self.means[1:])


def moments(natural: Natural) -> Moments | None:
    """The chain's moments; None when the precision is not positive definite."""
    n, d = natural.h.shape
    band = _lower_band(natural.J, natural.L)
    try:
        factor = cholesky_banded(band, lower=True)
    except LinAlgError:
        return None
    if not np.all(np.isfinite(factor)):
        return None
    means = cho_solve_banded((factor, True), natural.h.reshape(-1)).reshape(n, d)
    diag, below = _blocks(factor, n, d)
    inv_diag = np.linalg.inv(diag)  # D_i^-1, lower triangular
    # P_i = D_i^-T D_i^-1 and G_i = -D_i^-T B_i^T, B_i the factor's block (i+1, i).
    p = np.einsum("nki,nkj->nij", inv_diag, inv_diag)
    g = -np.einsum("nki,nlk->nil", inv_diag[:-1], below)
    covs = _backward_scan(g, p)
    covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
    cross = np.einsum("nij,njk->nik", g, covs[1:])
    log_det = 2.0 * float(np.sum(np.log(factor[0])))
    return Moments(means, covs, cross, log_det)


def _lower_band(J: np.ndarray, L: np.ndarray) -> np.ndarray:
    """The precision in LAPACK's lower band storage: band[r - c, c] = Lambda[r, c], lower
    bandwidth 2D - 1 (block (i+1, i) of Lambda is L_i^T)."""
    n, d, _ = J.shape
    band = np.zeros((2 * d, n * d))
    a, b = np.meshgrid(np.arange(d), np.arange(d), indexing="ij")  # row a, column b of a block
    lower = a >= b
    cols = (np.arange(n)[:, None] * d + b[lower][None, :])
    band[(a - b)[lower][None, :].repeat(n, 0), cols] = J[:, a[lower], b[lower]]
    if n > 1:
        cols = np.arange(n - 1)[:, None, None] * d + b[None]
        band[np.broadcast_to(d + a - b, cols.shape), cols] = np.swapaxes(L, 1, 2)
    return band


def _blocks(factor: np.ndarray, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The lower Cholesky factor's diagonal blocks (N, D, D) and sub-diagonal blocks (N-1, D, D)
    from its band storage."""
    a, b = np.meshgrid(np.arange(d), np.arange(d), indexing="ij")
    lower = (a >= b)
    diag = np.zeros((n, d, d))
    cols = np.arange(n)[:, None, None] * d + b[None]
    diag[:, lower] = factor[np.broadcast_to(np.where(lower, a - b, 0), cols.shape), cols][:, lower]
    below = factor[np.broadcast_to(d + a - b, cols[:-1].shape), cols[:-1]]
    return diag, below


def _backward_scan(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Sigma (N, D, D) solving Sigma_i = P_i + G_i Sigma_{i+1} G_i^T with Sigma_{N-1} = P_{N-1}.

    Doubling: after the pass with stride s, Sigma_i = B_i + A_i Sigma_{i+s} A_i^T (Sigma beyond
    the end being zero), so ceil(log2 N) passes leave B = Sigma.
    """
    n = p.shape[0]
    a = np.zeros_like(p)
    a[:-1] = g
    b = p.copy()
    stride = 1
    while stride < n:
        head = slice(0, n - stride)
        b_new = b.copy()
        b_new[head] = b[head] + np.einsum("nij,njk,nlk->nil", a[head], b[stride:], a[head])
        a_new = np.zeros_like(a)
        a_new[head] = np.einsum("nij,njk->nik", a[head], a[stride:])
        a, b = a_new, b_new
        stride *= 2
    return b
