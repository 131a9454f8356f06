"""Learned Koopman basis: low-rank singular functions by the nested LoRA objective (Jeong, Ryu,
Yun & Wornell, NeurIPS 2025; ../shared/METHODS.md section 4).

Two feature maps, f on x_t and g on x_{t+1}, each ``[1, z, MLP(z)]`` of the standardised state
z: the constant mode first (the trivial singular pair, sigma = 1, as the authors' centering
wrapper), then the state (so the states are read out of the basis exactly and linearly), then
k learned functions. With N snapshot pairs, the moment matrices M_f = E f f', M_g = E g' g'^T
(g' = g(x_{t+1})) and T = E f g'^T, the loss is the LoRA loss with joint nesting:

    L = -2 sum_i w_i T_ii + sum_ij min(w_i, w_j) (M_f)_ij (M_g)_ij,   w_i = (n - i + 1) / n,

the average over prefixes 1..n of ||K - sum_{j<=i} f_j (x) g_j||^2_HS minus a constant, so its
minimisers are the top singular subspaces of the Koopman operator K: L^2(rho_1) -> L^2(rho_0),
ordered. No inverse enters the loss; it is minimised by Adam on minibatches.

After training, in float64 over all training pairs (the CCA step of the brief): whiten
W_f = M_f^-1/2, W_g = M_g^-1/2 (eigenvalues below 1e-7 of the largest dropped), SVD
W_f T W_g^T = U S V^T with S clipped to [0, 1 - 1e-7] (the singular values), alignments
A_f = S^1/2 U^T W_f, A_g = S^1/2 V^T W_g, and the Koopman matrix on the aligned basis
phi = A_f f: Kmat = A_g E_rho1[g f^T] A_f^T, so K (phi^T u) = phi^T (Kmat u); its eigenvalues are
the Koopman eigenvalue estimates.

A caveat the tests measure: for a deterministic invertible flow, K is an isometry from
L^2(rho_1) onto L^2(rho_0) (||K g||_rho0 = ||g||_rho1): every singular value is 1 and any g with
f = g o F is a minimiser, so the objective does not single out an invariant subspace; the
method is meant for stochastic dynamics (a compact K), where the top singular functions are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from dynid.models.operator.networks import mlp

# Whitening drops moment eigenvalues below this fraction of the largest, and singular values
# are clipped below 1 by this much (as the authors' estimator does).
WHITENING_FLOOR = 1e-7
SINGULAR_CLIP = 1e-7


class SingularFunctionPair(nn.Module):
    """The feature maps f (left, on x_t) and g (right, on x_{t+1}): standardised states
    (B, d) -> features (B, 1 + d + k)."""

    def __init__(self, d: int, k: int, width: int, depth: int) -> None:
        super().__init__()
        self.f = mlp(d, width, depth, k)
        self.g = mlp(d, width, depth, k)

    @staticmethod
    def features(net: nn.Module, z: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.ones_like(z[:, :1]), z, net(z)], dim=1)

    def nested_lora_loss(self, pairs: torch.Tensor) -> torch.Tensor:
        """The jointly nested LoRA loss of pairs (B, 2, d) = [z_t, z_{t+1}]."""
        return nested_lora_loss(self.features(self.f, pairs[:, 0]),
                                self.features(self.g, pairs[:, 1]))


def nested_lora_loss(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """The jointly nested LoRA loss (batch means) of features f(x_t) ``left`` and g(x_{t+1})
    ``right``, (B, n) each, modes in order of importance."""
    b, n = left.shape
    w = torch.arange(n, 0, -1, dtype=left.dtype) / n
    correlation = -2.0 * torch.sum(w * torch.mean(left * right, dim=0))
    metric = torch.sum(torch.minimum(w[:, None], w[None, :])
                       * (left.T @ left / b) * (right.T @ right / b))
    return correlation + metric


@dataclass(frozen=True)
class SingularFunctionEstimate:
    """The CCA step's result: ``singular_values`` (r,) by decreasing size; ``align_f`` (r, n)
    A_f, phi = A_f f; ``operator`` (r, r) Kmat, with K (phi^T u) = phi^T Kmat u."""

    singular_values: np.ndarray
    align_f: np.ndarray
    operator: np.ndarray


def cca_estimate(left_now: np.ndarray, right_later: np.ndarray,
                 left_later: np.ndarray) -> SingularFunctionEstimate:
    """The CCA + LoRA estimator from features over N training pairs: f(x_t) ``left_now``
    (N, n), g(x_{t+1}) ``right_later`` (N, n), f(x_{t+1}) ``left_later`` (N, n)."""
    n_pairs = left_now.shape[0]
    whiten_f = _inverse_sqrt(left_now.T @ left_now / n_pairs)
    whiten_g = _inverse_sqrt(right_later.T @ right_later / n_pairs)
    cross = left_now.T @ right_later / n_pairs
    u, s, vt = np.linalg.svd(whiten_f @ cross @ whiten_g.T, full_matrices=False)
    s = np.clip(s, 0.0, 1.0 - SINGULAR_CLIP)
    root = np.sqrt(s)[:, None]
    align_f = root * (u.T @ whiten_f)
    align_g = root * (vt @ whiten_g)
    operator = align_g @ (right_later.T @ left_later / n_pairs) @ align_f.T
    return SingularFunctionEstimate(s, np.ascontiguousarray(align_f), operator)


def _inverse_sqrt(moments: np.ndarray) -> np.ndarray:
    """W (r, n) with W M W^T = I_r on the span of the symmetric (n, n) ``moments`` (r: the
    eigenvalues above the floor)."""
    values, vectors = np.linalg.eigh(moments)
    keep = values > WHITENING_FLOOR * values[-1]
    return (vectors[:, keep] / np.sqrt(values[keep])).T


@dataclass(frozen=True)
class LearnedLift:
    """The lifted state of the learned basis: phi(z) = A_f f(z) (aligned left singular
    functions) of standardised states."""

    network: SingularFunctionPair
    align_f: np.ndarray

    window = 1

    def lift(self, z: np.ndarray) -> np.ndarray:
        """(n, d) standardised states -> (n, r) aligned singular functions."""
        with torch.no_grad():
            features = self.network.features(self.network.f, torch.as_tensor(z, dtype=torch.float64))
        return features.numpy() @ self.align_f.T
