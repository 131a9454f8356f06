"""Records shared by the catalogue: the public spec and result, and the private implementation."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from dynid.errors import UsageError

Params = dict[str, float]
Field = Callable[..., np.ndarray]
"""``f(t, x, u=None) -> array``: an ODE's time derivative, or a map's next state.

``x`` has shape ``(d,)``, or ``(d, k)`` to evaluate ``k`` states at once; the result has ``x``'s
shape. ``u`` has shape ``(m,)`` (or ``(m, k)``) for systems with inputs.
"""


@dataclass(frozen=True)
class SystemSpec:
    """What ``dynid simulate --list`` shows about one system, with its default settings.

    ``dt`` and ``n`` are the default sampling interval (in the system's own time units; 1 for maps)
    and number of samples; ``x0`` the default initial state, one value per entry of ``variables``.
    ``lyapunov``: the Lyapunov spectrum at the default parameters (1/time units, largest
    first; empty where none is catalogued); ``reference`` names its source (a publication, or
    says it was computed here).
    """

    name: str
    description: str
    variables: tuple[str, ...]
    inputs: tuple[str, ...]
    params: dict[str, float]
    dt: float
    n: int
    x0: tuple[float, ...]
    kind: str
    reference: str
    lyapunov: tuple[float, ...] = ()


@dataclass(frozen=True)
class Simulation:
    """One simulated run.

    ``t``: ``(n,)`` sample times, starting at 0. ``x``: ``(n, d)`` states, with observation noise
    when it was asked for. ``u``: ``(n, m)`` noise-free inputs, or None for autonomous systems.
    """

    t: np.ndarray
    x: np.ndarray
    u: np.ndarray | None
    variables: tuple[str, ...]
    inputs: tuple[str, ...]


Trajectory = Callable[[Params, np.ndarray, np.ndarray, np.random.Generator],
                      tuple[np.ndarray, np.ndarray | None]]


@dataclass(frozen=True)
class Implementation:
    """How one system is computed. Private to ``dynid.systems``.

    ``field(params)`` gives the system's ``Field``. ``trajectory(params, x0, t, rng)`` gives the
    noise-free ``(x, u)`` at times ``t``; ``rng`` is for systems with intrinsic noise.
    ``variables``/``initial_state`` are only needed where they depend on the parameters, and
    ``check`` validates parameter values beyond being finite numbers.
    """

    spec: SystemSpec
    field: Callable[[Params], Field]
    trajectory: Trajectory
    variables: Callable[[Params], tuple[str, ...]] | None = None
    initial_state: Callable[[Params], np.ndarray] | None = None
    check: Callable[[Params], None] | None = None

    def resolve(self, params: Mapping[str, float] | None) -> Params:
        """The defaults overridden by ``params``; UsageError on an unknown key or a bad value."""
        resolved = dict(self.spec.params)
        for key, value in (params or {}).items():
            if key not in resolved:
                raise UsageError(
                    f"unknown parameter '{key}' for system '{self.spec.name}'; "
                    f"valid parameters: {', '.join(self.spec.params)}"
                )
            resolved[key] = finite_float(value, f"parameter '{key}' of system '{self.spec.name}'")
        if self.check is not None:
            self.check(resolved)
        return resolved

    def variables_for(self, params: Params) -> tuple[str, ...]:
        return self.spec.variables if self.variables is None else self.variables(params)

    def initial_state_for(self, params: Params) -> np.ndarray:
        if self.initial_state is None:
            return np.array(self.spec.x0, dtype=float)
        return self.initial_state(params)


def finite_float(value: object, what: str) -> float:
    """``value`` as a finite float, else UsageError naming ``what``."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise UsageError(f"{what} must be finite, got {value!r}")
    return number


def define(
    *,
    name: str,
    description: str,
    kind: str,
    reference: str,
    params: Params,
    dt: float,
    n: int,
    variables: tuple[str, ...] | Callable[[Params], tuple[str, ...]],
    x0: tuple[float, ...] | Callable[[Params], np.ndarray],
    field: Callable[[Params], Field],
    trajectory: Trajectory,
    inputs: tuple[str, ...] = (),
    check: Callable[[Params], None] | None = None,
    lyapunov: tuple[float, ...] = (),
) -> Implementation:
    """Build an Implementation; ``variables`` and ``x0`` may be functions of the parameters, and
    the spec then lists their values at the defaults."""
    spec = SystemSpec(
        name=name,
        description=description,
        variables=variables(params) if callable(variables) else variables,
        inputs=inputs,
        params=dict(params),
        dt=dt,
        n=n,
        x0=tuple(float(v) for v in (x0(params) if callable(x0) else x0)),
        kind=kind,
        reference=reference,
        lyapunov=lyapunov,
    )
    return Implementation(
        spec,
        field,
        trajectory,
        variables=variables if callable(variables) else None,
        initial_state=x0 if callable(x0) else None,
        check=check,
    )
