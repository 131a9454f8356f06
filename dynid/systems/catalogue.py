"""The catalogue of simulated systems and the two entry points, ``simulate`` and ``rhs``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from dynid.errors import UsageError

from ._spec import Field, Implementation, Simulation, SystemSpec, finite_float
from .maps import MAP_SYSTEMS
from .odes import ODE_SYSTEMS

_IMPLEMENTATIONS: dict[str, Implementation] = {
    system.spec.name: system for system in (*ODE_SYSTEMS, *MAP_SYSTEMS)
}

SYSTEMS: dict[str, SystemSpec] = {name: system.spec for name, system in _IMPLEMENTATIONS.items()}
"""Every system by name, in the order ``dynid simulate --list`` shows them."""


def _lookup(name: str) -> Implementation:
    try:
        return _IMPLEMENTATIONS[name]
    except (KeyError, TypeError):
        raise UsageError(
            f"unknown system {name!r}; valid systems: {', '.join(_IMPLEMENTATIONS)}"
        ) from None


def rhs(name: str, params: Mapping[str, float] | None = None) -> Field:
    """The true dynamics ``f(t, x, u=None)`` of system ``name`` with ``params`` over its defaults.

    For an ODE, ``f`` is ``dx/dt``; for a map, the next state. ``x`` has shape ``(d,)`` or
    ``(d, k)``. ``forced-oscillator`` uses its own input ``u(t)`` when ``u`` is None. ``var``'s
    state is the stacked ``[x_t, x_{t-1}]`` of shape ``(10,)`` and ``f`` its noise-free step.
    """
    system = _lookup(name)
    return system.field(system.resolve(params))


def simulate(
    name: str,
    *,
    n: int | None = None,
    dt: float | None = None,
    noise: float = 0.0,
    seed: int = 0,
    params: Mapping[str, float] | None = None,
    x0: Sequence[float] | None = None,
) -> Simulation:
    """Simulate system ``name``: ``n`` samples ``dt`` apart, from ``t = 0``.

    ``n``, ``dt``, ``x0`` default to the system's spec, ``params`` override its defaults.
    ``noise`` is the observation noise's standard deviation as a fraction of each variable's own
    standard deviation (0.01 = 1%); inputs get none. ``seed`` drives that noise and, independently,
    the innovations of stochastic systems; the result is a function of the arguments alone.
    Raises UsageError on an unknown system or parameter and on a bad value.
    """
    system = _lookup(name)
    spec = system.spec
    p = system.resolve(params)
    n = spec.n if n is None else _count(n)
    dt = spec.dt if dt is None else finite_float(dt, "dt")
    if dt <= 0:
        raise UsageError(f"dt must be > 0, got {dt:g}")
    noise = finite_float(noise, "noise")
    if noise < 0:
        raise UsageError(f"noise must be >= 0, got {noise:g}")
    variables = system.variables_for(p)
    start = system.initial_state_for(p) if x0 is None else _initial_state(x0, variables)
    observation_rng, innovation_rng = _generators(seed)

    t = np.arange(n) * dt
    x, u = system.trajectory(p, start, t, innovation_rng)
    if noise > 0:
        x = x + noise * x.std(axis=0) * observation_rng.standard_normal(x.shape)
    return Simulation(t=t, x=x, u=u, variables=variables, inputs=spec.inputs)


def _count(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise UsageError(f"n must be an integer, got {n!r}")
    if n < 2:
        raise UsageError(f"n must be at least 2, got {n}")
    return int(n)


def _initial_state(x0: Sequence[float], variables: tuple[str, ...]) -> np.ndarray:
    values = [finite_float(v, "x0") for v in np.atleast_1d(np.asarray(x0, dtype=object))]
    if len(values) != len(variables):
        raise UsageError(
            f"x0 needs {len(variables)} values ({', '.join(variables)}), got {len(values)}"
        )
    return np.array(values)


def _generators(seed: object) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent (observation, innovation) generators: adding noise leaves the innovations as
    they were."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
    observation, innovation = np.random.SeedSequence(int(seed)).spawn(2)
    return np.random.default_rng(observation), np.random.default_rng(innovation)
