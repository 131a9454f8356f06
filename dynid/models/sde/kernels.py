"""The RBF kernel k(x, x') = s^2 exp(-|x - x'|^2 / (2 l^2)) of the drift's GP prior, its
expectations under Gaussian states, and the grid of inducing points.

The expectations are exact (no quadrature): for x ~ N(m, S) and inducing points z_j,
    psi1_j = E[k(x, z_j)]       = s^2 |I + S/l^2|^-1/2 exp(-1/2 (m - z_j)^T (S + l^2 I)^-1 (m - z_j))
    grad_j = E[dk(x, z_j)/dx]   = -(S + l^2 I)^-1 (m - z_j) psi1_j      (Stein: d psi1_j / dm)
    psi2_jk = E[k(x, z_j) k(x, z_k)] = s^4 |I + 2S/l^2|^-1/2 exp(-|z_j - z_k|^2 / (4 l^2))
                                     exp(-1/2 (m - zbar)^T (S + l^2/2 I)^-1 (m - zbar)),
zbar = (z_j + z_k)/2. Written in torch so that gradients with respect to the state moments
(SING's natural-gradient step) and the kernel hyperparameters come from autodiff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    import torch

    Array = TypeVar("Array", np.ndarray, torch.Tensor)


@dataclass(frozen=True)
class PsiStatistics:
    """Kernel expectations at N Gaussian states against M inducing points: psi1 (N, M), grad
    (N, M, D), psi2 (N, M, M)."""

    psi1: torch.Tensor
    grad: torch.Tensor
    psi2: torch.Tensor


def gram(a: Array, b: Array, variance: Array | float, lengthscale: Array | float) -> Array:
    """k(a_i, b_j) (len(a), len(b)) for points a (n, D), b (m, D): numpy arrays or tensors."""
    scaled = -0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / lengthscale**2
    return variance * (np.exp(scaled) if isinstance(scaled, np.ndarray) else scaled.exp())


def psi_statistics(means: torch.Tensor, covs: torch.Tensor, inducing: torch.Tensor,
                   variance: torch.Tensor, lengthscale: torch.Tensor) -> PsiStatistics:
    """The expectations of the module docstring for states N(means (N, D), covs (N, D, D))."""
    import torch

    d = means.shape[1]
    eye = torch.eye(d, dtype=means.dtype)
    ell2 = lengthscale**2
    diff = means[:, None, :] - inducing[None, :, :]  # (N, M, D)
    wide = torch.linalg.inv(covs + ell2 * eye)  # (N, D, D)
    solved = torch.einsum("nij,nmj->nmi", wide, diff)
    scale1 = torch.linalg.det(eye + covs / ell2) ** -0.5
    psi1 = variance * scale1[:, None] * (-0.5 * (diff * solved).sum(-1)).exp()
    grad = -solved * psi1[..., None]
    mid = 0.5 * (inducing[:, None, :] + inducing[None, :, :])  # (M, M, D)
    apart = ((inducing[:, None, :] - inducing[None, :, :]) ** 2).sum(-1)  # (M, M)
    narrow = torch.linalg.inv(covs + 0.5 * ell2 * eye)
    offset = means[:, None, None, :] - mid[None]  # (N, M, M, D)
    quad = torch.einsum("nabi,nij,nabj->nab", offset, narrow, offset)
    scale2 = torch.linalg.det(eye + 2 * covs / ell2) ** -0.5
    psi2 = variance**2 * scale2[:, None, None] * (-0.25 * apart / ell2 - 0.5 * quad).exp()
    return PsiStatistics(psi1, grad, psi2)


def inducing_grid(low: np.ndarray, high: np.ndarray, per_dim: int) -> np.ndarray:
    """A regular grid of per_dim^D points (per_dim^D, D) spanning the box [low, high]."""
    axes = [np.linspace(lo, hi, per_dim) for lo, hi in zip(low, high)]
    return np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
