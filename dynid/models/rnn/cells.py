"""The latent maps z_t -> z_{t+1} of the piecewise-linear RNNs, as torch modules.

Both are linear inside each subregion of latent space cut out by their ReLUs, so each cell gives
its step, its Jacobian (for the GTF forcing strength and eigenvalues) and the activation
pattern that names the subregion a state lies in. Shapes: z (..., M) latent states, u (..., m)
external inputs (m may be 0). Imported lazily: importing this module imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def _talathi_vartak(m: int, generator: torch.Generator) -> torch.Tensor:
    """The (M, M) matrix K = R^T R / M + I (R standard normal) scaled to spectral radius 1:
    its diagonal starts A and its off-diagonal W of the PLRNN (Talathi & Vartak, 2016), so the
    initial linear part is close to the identity and neither explodes nor forgets at once."""
    r = torch.randn(m, m, generator=generator)
    k = r.T @ r / m + torch.eye(m)
    return k / torch.linalg.eigvalsh(k).max()


def _uniform(shape: tuple[int, ...], fan_in: int, generator: torch.Generator) -> torch.Tensor:
    bound = 1.0 / max(fan_in, 1) ** 0.5
    return (torch.rand(shape, generator=generator) * 2.0 - 1.0) * bound


def _spectral_norms(matrices: torch.Tensor) -> torch.Tensor:
    """The largest singular values (...) of matrices (..., M, M), as the square root of the
    largest eigenvalue of J^T J: a third of the CPU of an SVD per matrix, and the same to
    float rounding (measured: 4e-7 relative in float32)."""
    return torch.linalg.eigvalsh(matrices.mT @ matrices)[..., -1].clamp_min(0.0).sqrt()


class LatentCell(nn.Module):
    """What both cells share: the diagonal ``A`` (M,) and the input weights ``C`` (M, m)."""

    def __init__(self, k: torch.Tensor, inputs: int, generator: torch.Generator) -> None:
        """k: the (M, M) Talathi-Vartak matrix, whose diagonal starts A."""
        super().__init__()
        self.latent = k.shape[0]
        self.A = nn.Parameter(torch.diagonal(k).clone())
        self.C = nn.Parameter(_uniform((self.latent, inputs), inputs, generator))

    def drive(self, u: torch.Tensor) -> torch.Tensor | None:
        """The input term C u (..., M) of inputs u (..., m); None without inputs."""
        return None if self.C.shape[1] == 0 else u @ self.C.T

    def stepper(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The autonomous map z (B, M) -> z' (B, M), with whatever it derives from the weights
        computed once (a rollout calls it every step)."""
        raise NotImplementedError

    def forward(self, z: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """One step from z (B, M) with inputs u (B, m)."""
        drive = self.drive(u)
        step = self.stepper()(z)
        return step if drive is None else step + drive

    def slopes(self, z: torch.Tensor) -> torch.Tensor:
        """The slopes (..., K) of the K piecewise-linear units at states z (..., M): equal
        rows, same linear subregion."""
        raise NotImplementedError

    def region_jacobian(self, slopes: torch.Tensor) -> torch.Tensor:
        """The Jacobian d z_{t+1} / d z_t (..., M, M) in the subregion of ``slopes`` (..., K)."""
        raise NotImplementedError

    def jacobian(self, z: torch.Tensor) -> torch.Tensor:
        """d z_{t+1} / d z_t at states z (..., M): (..., M, M)."""
        return self.region_jacobian(self.slopes(z))

    def pullback(self, states: torch.Tensor) -> Callable[[int, torch.Tensor], torch.Tensor]:
        """For states z (B, T, M): the map (t, v (B, M)) -> v J_t (B, M), J_t the Jacobian at
        z[:, t] (backpropagation through a step), with what it needs computed once."""
        jacobians = self.jacobian(states).unbind(1)

        def pull(t: int, v: torch.Tensor) -> torch.Tensor:
            return torch.bmm(v[:, None], jacobians[t])[:, 0]

        return pull

    def region_norms(self, states: torch.Tensor) -> torch.Tensor:
        """The spectral norms |J| (...) of the Jacobians at states (..., M)."""
        return _spectral_norms(self.jacobian(states))


class ShallowPLRNN(LatentCell):
    """The clipped shallow PLRNN (Hess et al., ICML 2023):

        z_{t+1} = A * z_t + W1 (relu(W2 z_t + h2) - relu(W2 z_t)) + h1 + C u_t

    A (M,), W1 (M, H), W2 (H, M), h1 (M,), h2 (H,). The clipping bounds the nonlinearity by
    |W1 h2|, so orbits stay bounded when |A| < 1. Jacobian diag(A) + W1 diag(D) W2 with
    D = 1[W2 z > -h2] - 1[W2 z > 0] in {-1, 0, 1}: three regimes per hidden unit.
    """

    def __init__(self, latent: int, hidden: int, inputs: int, generator: torch.Generator) -> None:
        super().__init__(_talathi_vartak(latent, generator), inputs, generator)
        self.W1 = nn.Parameter(_uniform((latent, hidden), hidden, generator))
        self.W2 = nn.Parameter(_uniform((hidden, latent), latent, generator))
        self.h1 = nn.Parameter(torch.zeros(latent))
        # The reference code's bound for h2 is 1/sqrt(H), its length (not 1/sqrt(M)).
        self.h2 = nn.Parameter(_uniform((hidden,), hidden, generator))

    def stepper(self) -> Callable[[torch.Tensor], torch.Tensor]:
        # W1 (relu(W2 z + h2) - relu(W2 z)) = [W1, -W1] relu([W2; W2] z + [h2; 0]): four
        # operations a step instead of seven (their count, not their size, is the cost).
        inner = torch.cat([self.W2, self.W2])
        inner_bias = torch.cat([self.h2, torch.zeros_like(self.h2)])
        outer = torch.cat([self.W1, -self.W1], dim=1)

        def step(z: torch.Tensor) -> torch.Tensor:
            return torch.addcmul(F.linear(F.relu(F.linear(z, inner, inner_bias)), outer, self.h1),
                                 self.A, z)

        return step

    def slopes(self, z: torch.Tensor) -> torch.Tensor:
        # 1[w2z > -h2] - 1[w2z > 0] is nonzero exactly where the two tests differ, and then
        # has the sign of h2: half the operations on (B T, H) arrays of the difference of two
        # converted masks.
        w2z = z @ self.W2.T
        h2 = self.h2.detach()
        return torch.logical_xor(w2z > -h2, w2z > 0) * torch.sign(h2)

    def region_jacobian(self, slopes: torch.Tensor) -> torch.Tensor:
        # (W1 diag(s) W2)_mk = sum_h s_h W1_mh W2_hk: one product of the slopes with the
        # (H, M M) array W1_mh W2_hk, not one (M, H) @ (H, M) product per state.
        m = self.latent
        products = (self.W1.T[:, :, None] * self.W2[:, None, :]).reshape(-1, m * m)
        coupling = (slopes @ products).reshape(*slopes.shape[:-1], m, m)
        return torch.diag_embed(self.A.expand(*slopes.shape[:-1], m)) + coupling


class ALRNN(LatentCell):
    """The almost-linear RNN (Brenner et al., NeurIPS 2024), as its reference code
    (DurstewitzLab/ALRNN-DSR, ``src/models/alrnn.jl``) has it:

        z_{t+1} = A * z_t + W phi(z_t) + h + C u_t,
        phi(z) = [z_1 .. z_{M-P}, relu(z_{M-P+1}) .. relu(z_M)]

    A (M,), W (M, M), h (M,). Only the last P units are piecewise linear, so there are at most
    2^P linear subregions, named by the signs of those P units. W is full: on a linear unit its
    diagonal only adds to A, but on a piecewise-linear unit i it gives the unit its own slope on
    each side of 0 (A_i below, A_i + W_ii above), which a zero diagonal would forbid. Jacobian
    diag(A) + W diag(1, .., 1, 1[z_{M-P+1:} > 0]).

    Initialisation as the reference's ``initialize_A_W_h``: A the diagonal of the
    Talathi-Vartak matrix, W ~ N(0, ``W_INIT_SD``^2), h = 0, so the untrained map contracts
    (eigenvalues near A, in (0, 1)). The Talathi-Vartak matrix's off-diagonal as W instead (as
    the shPLRNN's, dynid before) makes diag(A) + W that whole matrix, whose largest eigenvalue is
    1 by construction: training then starts on the margin of instability and learned real
    eigenvalues above 1 that the free runs left along (benchmarks/README.md, alrnn).
    """

    W_INIT_SD = 0.01

    def __init__(self, latent: int, pwl: int, inputs: int, generator: torch.Generator) -> None:
        super().__init__(_talathi_vartak(latent, generator), inputs, generator)
        self.pwl = pwl
        self.W = nn.Parameter(torch.randn(latent, latent, generator=generator) * self.W_INIT_SD)
        self.h = nn.Parameter(torch.zeros(latent))

    def stepper(self) -> Callable[[torch.Tensor], torch.Tensor]:
        # phi(z) = max(z, [-inf .. -inf, 0 .. 0]): three operations a step (their count, not
        # their size, is the cost at M = 20), not five with a ReLU of a slice and two products.
        floor = self._phi_floor()
        a, w, h = self.A, self.W, self.h

        def step(z: torch.Tensor) -> torch.Tensor:
            return torch.addcmul(F.linear(torch.maximum(z, floor), w, h), a, z)

        return step

    def _phi_floor(self) -> torch.Tensor:
        """(M,) -inf on the linear units, 0 on the piecewise-linear: phi(z) = max(z, floor)."""
        floor = torch.zeros_like(self.A.detach())
        floor[: self.latent - self.pwl] = -math.inf
        return floor

    def slopes(self, z: torch.Tensor) -> torch.Tensor:
        return (z[..., self.latent - self.pwl:] > 0).to(z.dtype)

    def region_jacobian(self, slopes: torch.Tensor) -> torch.Tensor:
        diagonal = torch.diag_embed(self.A.expand(*slopes.shape[:-1], self.latent))
        return diagonal + self.W * self._unit_slopes(slopes)[..., None, :]

    def _unit_slopes(self, slopes: torch.Tensor) -> torch.Tensor:
        """dphi/dz (..., M): 1 on the linear units, ``slopes`` (..., P) on the others."""
        ones = slopes.new_ones((*slopes.shape[:-1], self.latent - self.pwl))
        return torch.cat([ones, slopes], dim=-1)

    def region_norms(self, states: torch.Tensor) -> torch.Tensor:
        # One Jacobian per subregion, and a batch visits at most 2^P of them: each distinct
        # subregion's norm is computed once, not one SVD of an M x M matrix per state (those
        # were 60 % of a training batch of the defaults at M = 20).
        # The subregions are found as the integers the P slope bits spell: a 1-D unique, where
        # one over (B T, P) rows sorts rows (60 times the CPU); P > 62 bits would overflow.
        slopes = self.slopes(states)
        rows = slopes.reshape(-1, self.pwl)
        if self.pwl > 62:
            regions, which = torch.unique(rows, dim=0, return_inverse=True)
        else:
            bits = torch.arange(self.pwl, device=rows.device)
            codes, which = torch.unique((rows.long() << bits).sum(-1), return_inverse=True)
            regions = ((codes[:, None] >> bits) & 1).to(rows.dtype)
        return _spectral_norms(self.region_jacobian(regions))[which].reshape(slopes.shape[:-1])

    def pullback(self, states: torch.Tensor) -> Callable[[int, torch.Tensor], torch.Tensor]:
        # v J_t = v * A + (v W) * dphi/dz(z_t): one (B, M) product a step, no (B, T, M, M)
        # Jacobians built.
        unit_slopes = self._unit_slopes(self.slopes(states)).unbind(1)
        a, w = self.A, self.W

        def pull(t: int, v: torch.Tensor) -> torch.Tensor:
            return torch.addcmul(v * a, v @ w, unit_slopes[t])

        return pull
