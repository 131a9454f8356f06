"""Integrating a learned vector field between (irregular) sample times, in torch, batched.

Every solver works interval by interval: interval k of each batch row runs from sample k to
sample k+1 over its own length ``deltas[:, k]``, so rows with different time grids (segments of
irregularly sampled trials) are integrated together. Inputs are controls interpolated linearly
between their samples. Two solvers:

- fixed-step: ``substeps`` equal steps of a one-step scheme per interval (classical RK4 by
  default; a model may bring its own scheme, e.g. ``hnn``'s leapfrog);
- adaptive: Dormand-Prince 5(4) with error control, on each interval rescaled to unit length
  (dx/ds = delta f(x, u(s)), s in [0, 1]), so one step-size sequence serves the whole batch.

Gradients flow through the solver's operations (discretise-then-optimise), which for the small
networks here is cheaper and more accurate than an adjoint solve. torch is imported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from dynid.errors import ComputationError

if TYPE_CHECKING:
    import torch

# Dormand & Prince (1980) 5(4) tableau: nodes c, stages a, 5th-order weights b, and the
# difference e = b - b* to the embedded 4th-order solution.
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)
# An interval needing more adaptive steps than this has a stiff or exploding field.
MAX_ADAPTIVE_STEPS = 10_000


class Dynamics(Protocol):
    """A learned continuous-time model as the solvers see it."""

    def field(self, x: torch.Tensor, u: torch.Tensor | None) -> torch.Tensor:
        """dx/dt (B, d) at states x (B, d) and inputs u (B, m) or None."""
        ...

    def step(self, x: torch.Tensor, h: torch.Tensor, u0: torch.Tensor | None,
             u_half: torch.Tensor | None, u1: torch.Tensor | None) -> torch.Tensor:
        """One fixed step of length h (B, 1) from x (B, d); inputs at its start, middle, end."""
        ...


def rk4_step(dynamics: Dynamics, x: torch.Tensor, h: torch.Tensor, u0: torch.Tensor | None,
             u_half: torch.Tensor | None, u1: torch.Tensor | None) -> torch.Tensor:
    """The classical fourth-order Runge-Kutta step."""
    k1 = dynamics.field(x, u0)
    k2 = dynamics.field(x + 0.5 * h * k1, u_half)
    k3 = dynamics.field(x + 0.5 * h * k2, u_half)
    k4 = dynamics.field(x + h * k3, u1)
    return x + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def _control(controls: torch.Tensor | None, k: int, s: float) -> torch.Tensor | None:
    """Inputs (B, m) at fraction s of interval k, linear between samples k and k+1."""
    if controls is None:
        return None
    return controls[:, k] + s * (controls[:, k + 1] - controls[:, k])


def solve(dynamics: Dynamics, x0: torch.Tensor, deltas: torch.Tensor,
          controls: torch.Tensor | None = None, *, substeps: int = 1,
          adaptive: bool = False, rtol: float = 1e-6, atol: float = 1e-8) -> torch.Tensor:
    """States (B, K+1, d) at the sample times, from x0 (B, d) at the first.

    deltas: (B, K) interval lengths; controls: (B, K+1, m) inputs at the sample times or None.
    Fixed-step: ``substeps`` steps of ``dynamics.step`` per interval; adaptive: Dormand-Prince
    with relative and absolute tolerances ``rtol``, ``atol``.
    """
    import torch

    states = [x0]
    x = x0
    for k in range(deltas.shape[1]):
        delta = deltas[:, k : k + 1]
        if adaptive:
            x = _dopri5_interval(dynamics, x, delta, controls, k, rtol, atol)
        else:
            h = delta / substeps
            for j in range(substeps):
                x = dynamics.step(x, h, _control(controls, k, j / substeps),
                                  _control(controls, k, (j + 0.5) / substeps),
                                  _control(controls, k, (j + 1) / substeps))
        states.append(x)
    return torch.stack(states, dim=1)


def _dopri5_interval(dynamics: Dynamics, x: torch.Tensor, delta: torch.Tensor,
                     controls: torch.Tensor | None, k: int, rtol: float,
                     atol: float) -> torch.Tensor:
    """x at the end of interval k, integrated over s in [0, 1] with dx/ds = delta f."""
    import torch

    s, h = 0.0, 0.5
    for _ in range(MAX_ADAPTIVE_STEPS):
        h = min(h, 1.0 - s)
        stages: list[torch.Tensor] = []
        for c, a in zip(_C, _A):
            point = x + h * sum((w * stage for w, stage in zip(a, stages) if w), torch.zeros_like(x))
            stages.append(delta * dynamics.field(point, _control(controls, k, s + c * h)))
        # The last stage is evaluated at the 5th-order solution (first same as last).
        new = x + h * sum(w * stage for w, stage in zip(_A[-1], stages[:-1]) if w)
        error = h * sum(w * stage for w, stage in zip(_E, stages) if w)
        scale = atol + rtol * torch.maximum(x.detach().abs(), new.detach().abs())
        norm = float(torch.sqrt(torch.mean((error.detach() / scale) ** 2)))
        if norm <= 1.0:
            s, x = s + h, new
            if s >= 1.0 - 1e-12:
                return x
        if not torch.isfinite(new).all():
            raise ComputationError("the learned vector field blew up during integration")
        # Standard controller: safety 0.9, growth between 0.2x and 5x.
        h *= min(5.0, max(0.2, 0.9 * (norm if norm > 0 else 1e-10) ** -0.2))
    raise ComputationError(
        f"the adaptive solver needed over {MAX_ADAPTIVE_STEPS} steps for one interval; the "
        "learned field is stiff: use -p solver=rk4 with more substeps")
