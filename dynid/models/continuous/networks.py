"""The torch networks of the continuous-time backends (imported only when one is fitted or
loaded, so that listing backends does not import torch).

Each is a ``Dynamics`` (``dynid.models.continuous.integrate``): ``field(x, u)`` gives dx/dt and
``step`` one fixed solver step. States and inputs are the backends' standardised ones, in
float64 (B, d) and (B, m).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn.functional import softplus

from dynid.models.continuous.integrate import rk4_step
from dynid.training.networks import mlp


# The hidden activations a field's MLP may have, by their -p name.
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "silu": nn.SiLU}


def _mlp(inputs: int, width: int, depth: int, outputs: int,
         activation: str = "tanh") -> nn.Sequential:
    """An MLP (``ACTIVATIONS``); the last layer starts small so training starts from a
    near-zero field."""
    network = mlp(inputs, width, depth, outputs, ACTIVATIONS[activation])
    with torch.no_grad():
        network[-1].weight.mul_(0.1)
        network[-1].bias.zero_()
    return network


def _with_inputs(x: torch.Tensor, u: torch.Tensor | None) -> torch.Tensor:
    return x if u is None else torch.cat([x, u], dim=1)


class _RK4:
    """Mixin: the fixed step is classical RK4 on ``field``."""

    def step(self, x: torch.Tensor, h: torch.Tensor, u0: torch.Tensor | None,
             u_half: torch.Tensor | None, u1: torch.Tensor | None) -> torch.Tensor:
        return rk4_step(self, x, h, u0, u_half, u1)  # type: ignore[arg-type]


class NeuralField(_RK4, nn.Module):
    """dx/dt = f(x, u), f an MLP of d + m inputs (hidden ``activation``, a name in
    ``ACTIVATIONS``); with ``affine``, plus a linear map A (d, d + m) of [x, u] (the MLP's
    output bias is the constant), A starting at zero."""

    def __init__(self, d: int, m: int, width: int, depth: int, affine: bool = False,
                 activation: str = "tanh") -> None:
        super().__init__()
        self.net = _mlp(d + m, width, depth, d, activation)
        # Zero, drawn from no generator: the MLP starts as it would without the linear path.
        self.linear = nn.Parameter(torch.zeros(d, d + m)) if affine else None

    def start_affine(self, a: torch.Tensor, b: torch.Tensor) -> None:
        """Start the field at A = a (d, d + m) and constant b (d,) plus the MLP's small part."""
        assert self.linear is not None, "the field has no linear map"
        with torch.no_grad():
            self.linear.copy_(a)
            self.net[-1].bias.copy_(b)

    def field(self, x: torch.Tensor, u: torch.Tensor | None) -> torch.Tensor:
        inputs = _with_inputs(x, u)
        dx = self.net(inputs)
        return dx if self.linear is None else dx + inputs @ self.linear.T


class ConvexPotential(nn.Module):
    """A fully input-convex network F (Amos et al. 2017), normalised at a learnable minimum x0
    (the Bregman divergence of F at x0) plus a small quadratic:

        H(x) = F(x) - F(x0) - grad F(x0) . (x - x0) + eps |x - x0|^2

    F's hidden-to-hidden and output weights are softplus of free parameters (non-negative) and its
    activations softplus (convex, non-decreasing), so F is convex; hence H is convex with
    H(x0) = 0, grad H(x0) = 0, H >= 0, and the quadratic makes the minimum unique and H radially
    unbounded (bounded sublevel sets). eps is ``QUADRATIC``.

    grad F is computed in closed form by a hand-written backward pass through the layers (the
    derivative of softplus is the logistic sigmoid), not by autograd: a port-Hamiltonian field
    needs grad H at every solver stage, and autograd would build and differentiate a second
    graph there (double backward in training, a graph even in free runs). The closed form is
    ordinary tensor operations, so training differentiates it once, like any network.
    """

    QUADRATIC = 1e-3

    def __init__(self, d: int, width: int, depth: int) -> None:
        super().__init__()
        self.first = nn.Linear(d, width)
        self.skips = nn.ModuleList(nn.Linear(d, width) for _ in range(depth - 1))
        self.hidden = nn.ParameterList(
            nn.Parameter(torch.randn(width, width) / width - 2.0) for _ in range(depth - 1))
        self.out_hidden = nn.Parameter(torch.randn(width) / width - 2.0)
        self.out_skip = nn.Linear(d, 1)
        self.minimum = nn.Parameter(torch.zeros(d))

    def _layers(self, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The hidden-to-hidden weights (non-negative) and every layer's pre-activation (B, width)."""
        hidden = [softplus(h) for h in self.hidden]
        pre = [self.first(x)]
        for skip, weight in zip(self.skips, hidden):
            pre.append(softplus(pre[-1]) @ weight.T + skip(x))
        return hidden, pre

    def convex(self, x: torch.Tensor) -> torch.Tensor:
        """F(x) (B,)."""
        _, pre = self._layers(x)
        return softplus(pre[-1]) @ softplus(self.out_hidden) + self.out_skip(x)[:, 0]

    def convex_gradient(self, x: torch.Tensor) -> torch.Tensor:
        """grad F(x) (B, d), by the backward pass written out: dF/dz of the last layer is the
        output weights; through each layer z = softplus(a), a = z_prev W^T + S x, dF/da =
        dF/dz * sigmoid(a), which reaches x through S (the first layer's weights at the
        bottom) and z_prev through W."""
        hidden, pre = self._layers(x)
        upstream = softplus(self.out_hidden).expand_as(pre[-1])
        grad = self.out_skip.weight.expand(x.shape[0], -1)
        for layer in range(len(pre) - 1, 0, -1):
            through = upstream * torch.sigmoid(pre[layer])
            grad = grad + through @ self.skips[layer - 1].weight
            upstream = through @ hidden[layer - 1]
        return grad + (upstream * torch.sigmoid(pre[0])) @ self.first.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """H(x) (B,)."""
        x0 = self.minimum[None, :]
        shift = x - x0
        f = self.convex(torch.cat([x, x0]))  # one pass for both
        return (f[:-1] - f[-1] - shift @ self.convex_gradient(x0)[0]
                + self.QUADRATIC * shift.pow(2).sum(dim=1))

    def gradient(self, x: torch.Tensor) -> torch.Tensor:
        """grad H(x) (B, d) = grad F(x) - grad F(x0) + 2 eps (x - x0)."""
        x0 = self.minimum[None, :]
        g = self.convex_gradient(torch.cat([x, x0]))  # one pass for both
        return g[:-1] - g[-1] + 2.0 * self.QUADRATIC * (x - x0)


def gradient(energy: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """grad H at x (B, d); part of the autograd graph only while one is being built."""
    building = torch.is_grad_enabled()
    with torch.enable_grad():
        point = x if x.requires_grad else x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(energy(point).sum(), point, create_graph=building)
    return g


class PortHamiltonianField(_RK4, nn.Module):
    """dx/dt = (J - R) grad H(x) + G u with J = A - A^T (skew), R = L L^T (L lower triangular,
    so R is positive semidefinite), H a ``ConvexPotential`` and G constant (d, m).

    With u = 0, dH/dt = -grad H^T R grad H <= 0: H never increases along the true flow. R starts
    near zero (nearly conservative) and G at zero, as in Roth et al. (2025).
    """

    def __init__(self, d: int, m: int, width: int, depth: int) -> None:
        super().__init__()
        self.energy = ConvexPotential(d, width, depth)
        self.a = nn.Parameter(0.1 * torch.randn(d, d))
        # Not zero: the gradient of L L^T vanishes at L = 0, so a zero L would never move.
        self.l = nn.Parameter(0.01 * torch.randn(d, d))
        self.g = nn.Parameter(torch.zeros(d, m))

    def hamiltonian(self, x: torch.Tensor) -> torch.Tensor:
        """H(x) (B,)."""
        return self.energy(x)

    def structure(self) -> torch.Tensor:
        """J - R (d, d)."""
        low = torch.tril(self.l)
        return (self.a - self.a.T) - low @ low.T

    def dissipation(self) -> torch.Tensor:
        """R (d, d)."""
        low = torch.tril(self.l)
        return low @ low.T

    def field(self, x: torch.Tensor, u: torch.Tensor | None) -> torch.Tensor:
        dx = self.energy.gradient(x) @ self.structure().T
        return dx if u is None else dx + u @ self.g.T


class SeparableHamiltonian(nn.Module):
    """H(q, p) = T(p) + V(q) with T, V scalar MLPs; x = (q, p), n = d / 2 pairs.

    dq/dt = c dT/dp, dp/dt = -c dV/dq with c (n,) = 1 / (scale_q scale_p) per pair: the
    canonical equations in the backend's standardised coordinates, so H is the energy in the
    data's own units. The fixed step is leapfrog (Stormer-Verlet), symplectic and time
    reversible: the energy error stays bounded over any horizon instead of drifting.
    """

    def __init__(self, d: int, width: int, depth: int, coupling: torch.Tensor) -> None:
        super().__init__()
        self.n = d // 2
        self.kinetic = _mlp(self.n, width, depth, 1)
        self.potential = _mlp(self.n, width, depth, 1)
        self.register_buffer("coupling", coupling)

    def hamiltonian(self, x: torch.Tensor) -> torch.Tensor:
        """H(x) (B,)."""
        return self.kinetic(x[:, self.n :])[:, 0] + self.potential(x[:, : self.n])[:, 0]

    def _dq(self, p: torch.Tensor) -> torch.Tensor:
        return self.coupling * gradient(lambda v: self.kinetic(v)[:, 0], p)

    def _dp(self, q: torch.Tensor) -> torch.Tensor:
        return -self.coupling * gradient(lambda v: self.potential(v)[:, 0], q)

    def field(self, x: torch.Tensor, u: torch.Tensor | None) -> torch.Tensor:
        return torch.cat([self._dq(x[:, self.n :]), self._dp(x[:, : self.n])], dim=1)

    def step(self, x: torch.Tensor, h: torch.Tensor, u0: torch.Tensor | None,
             u_half: torch.Tensor | None, u1: torch.Tensor | None) -> torch.Tensor:
        q, p = x[:, : self.n], x[:, self.n :]
        p = p + 0.5 * h * self._dp(q)
        q = q + h * self._dq(p)
        p = p + 0.5 * h * self._dp(q)
        return torch.cat([q, p], dim=1)
