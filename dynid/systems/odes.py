"""The continuous-time systems of the catalogue: right-hand sides, defaults and integration.

Every right-hand side is written on ``x[0], x[1], ...`` rows so that it also evaluates a batch of
states given as a ``(d, k)`` array.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from scipy.integrate import solve_ivp

from dynid.errors import ComputationError, UsageError

from ._spec import Field, Implementation, Params, define

# Tight, because tests expect SINDy to recover coefficients within 1% from these trajectories.
RTOL = 1e-10
ATOL = 1e-12

# rad per time unit; pairwise incommensurate so that no finite sum of them repeats.
FORCING_FREQUENCIES = (0.7, float(np.sqrt(2.0)), float(np.sqrt(7.0)))


def integrate(field: Field, x0: np.ndarray, t: np.ndarray) -> np.ndarray:
    """States ``(len(t), d)`` of ``x' = field(t, x)`` from ``x(t[0]) = x0``, sampled at ``t``."""
    solution = solve_ivp(
        lambda s, y: field(s, y, None),
        (float(t[0]), float(t[-1])),
        x0,
        method="DOP853",
        t_eval=t,
        rtol=RTOL,
        atol=ATOL,
    )
    x = solution.y.T
    if not solution.success or x.shape[0] != t.size or not np.isfinite(x).all():
        raise ComputationError(
            f"integration failed before t={t[-1]:g} ({solution.message}); "
            "try other parameters, a smaller initial state or fewer samples"
        )
    return x


def _ode(
    *,
    field: Callable[[Params], Field],
    forcing: Callable[[np.ndarray], np.ndarray] | None = None,
    **spec,
) -> Implementation:
    """An ODE system; ``forcing(t)`` gives its ``(n, m)`` input, which ``field`` also computes
    itself when called with ``u=None``."""

    def trajectory(params: Params, x0: np.ndarray, t: np.ndarray, rng: np.random.Generator):
        return integrate(field(params), x0, t), None if forcing is None else forcing(t)

    return define(kind="ode", field=field, trajectory=trajectory, **spec)


def _lorenz(p: Params) -> Field:
    sigma, rho, beta = p["sigma"], p["rho"], p["beta"]

    def f(t, x, u=None):
        return np.array([
            sigma * (x[1] - x[0]),
            x[0] * (rho - x[2]) - x[1],
            x[0] * x[1] - beta * x[2],
        ])

    return f


def _rossler(p: Params) -> Field:
    a, b, c = p["a"], p["b"], p["c"]

    def f(t, x, u=None):
        return np.array([-x[1] - x[2], x[0] + a * x[1], b + x[2] * (x[0] - c)])

    return f


def _chen(p: Params) -> Field:
    a, b, c = p["a"], p["b"], p["c"]

    def f(t, x, u=None):
        return np.array([a * (x[1] - x[0]), (c - a) * x[0] - x[0] * x[2] + c * x[1],
                         x[0] * x[1] - b * x[2]])

    return f


def _sprott_b(p: Params) -> Field:
    def f(t, x, u=None):
        return np.array([x[1] * x[2], x[0] - x[1], 1.0 - x[0] * x[1]])

    return f


def _sprott_c(p: Params) -> Field:
    def f(t, x, u=None):
        return np.array([x[1] * x[2], x[0] - x[1], 1.0 - x[0] ** 2])

    return f


def _chua(p: Params) -> Field:
    alpha, beta, m0, m1 = p["alpha"], p["beta"], p["m0"], p["m1"]

    def f(t, x, u=None):
        # Chua's diode: slope m0 inside |x| < 1, m1 outside, continuous at the breakpoints.
        diode = m1 * x[0] + 0.5 * (m0 - m1) * (np.abs(x[0] + 1.0) - np.abs(x[0] - 1.0))
        return np.array([alpha * (x[1] - x[0] - diode), x[0] - x[1] + x[2], -beta * x[1]])

    return f


def _vanderpol(p: Params) -> Field:
    mu = p["mu"]

    def f(t, x, u=None):
        return np.array([x[1], mu * (1.0 - x[0] ** 2) * x[1] - x[0]])

    return f


def _lotka_volterra(p: Params) -> Field:
    alpha, beta, gamma, delta = p["alpha"], p["beta"], p["gamma"], p["delta"]

    def f(t, x, u=None):
        return np.array([x[0] * (alpha - beta * x[1]), x[1] * (delta * x[0] - gamma)])

    return f


def _duffing(p: Params) -> Field:
    alpha, beta, delta = p["alpha"], p["beta"], p["delta"]

    def f(t, x, u=None):
        return np.array([x[1], -delta * x[1] - alpha * x[0] - beta * x[0] ** 3])

    return f


def _lorenz96_size(p: Params) -> int:
    return int(p["N"])


def _check_lorenz96(p: Params) -> None:
    # The stencil reaches from i-2 to i+1: fewer than 4 sites would couple a site with itself.
    if p["N"] != int(p["N"]) or p["N"] < 4:
        raise UsageError(
            f"parameter 'N' of system 'lorenz96' must be an integer >= 4, got {p['N']:g}"
        )


def _lorenz96(p: Params) -> Field:
    forcing = p["F"]

    def f(t, x, u=None):
        x = np.asarray(x)
        ahead, behind, two_behind = (np.roll(x, shift, axis=0) for shift in (-1, 1, 2))
        return (ahead - two_behind) * behind - x + forcing

    return f


def _lorenz96_x0(p: Params) -> np.ndarray:
    # The uniform state x = F is an unstable equilibrium; the kick on x0 lets chaos develop.
    x0 = np.full(_lorenz96_size(p), p["F"])
    x0[0] += 0.01
    return x0


def linear_matrix(params: Mapping[str, float] | None = None) -> np.ndarray:
    """The ``(4, 4)`` matrix ``A`` of the ``linear`` system ``x' = A x``.

    ``A`` is ``Q B Q^T`` with ``B`` block-diagonal, one damped rotation per oscillator, and ``Q`` a
    fixed Householder reflection that mixes all four states. Its eigenvalues are exactly
    ``-damping1 ± i*omega1`` and ``-damping2 ± i*omega2``.
    """
    p = LINEAR.resolve(params)
    blocks = np.zeros((4, 4))
    for k in (1, 2):
        rate, omega = p[f"damping{k}"], p[f"omega{k}"]
        i = 2 * (k - 1)
        blocks[i : i + 2, i : i + 2] = [[-rate, omega], [-omega, -rate]]
    v = np.array([1.0, 2.0, 3.0, 4.0])
    q = np.eye(4) - 2.0 * np.outer(v, v) / (v @ v)
    return q @ blocks @ q.T


def _linear(p: Params) -> Field:
    a = linear_matrix(p)

    def f(t, x, u=None):
        return a @ x

    return f


def oscillator_forcing(t: float | np.ndarray) -> np.ndarray:
    """The input ``u(t)`` driving ``forced-oscillator``: a sum of unit sines at FORCING_FREQUENCIES.

    ``t`` scalar gives shape ``(1,)``; ``t`` of shape ``(n,)`` gives ``(n, 1)``.
    """
    return np.sin(np.multiply.outer(t, FORCING_FREQUENCIES)).sum(axis=-1, keepdims=True)


def _forced_oscillator(p: Params) -> Field:
    k, c = p["k"], p["c"]

    def f(t, x, u=None):
        drive = oscillator_forcing(t)[..., 0] if u is None else u[0]
        return np.array([x[1], -k * x[0] - c * x[1] + drive])

    return f


LINEAR = _ode(
    name="linear",
    description="stable 4-D linear ODE x' = A x: two damped oscillators in mixed coordinates",
    reference="designed here; linear_matrix() gives A, eigenvalues -damping_k ± i*omega_k",
    params={"damping1": 0.05, "omega1": 1.0, "damping2": 0.1, "omega2": 2.5},
    dt=0.02,
    n=2000,
    variables=("x0", "x1", "x2", "x3"),
    x0=(1.0, 1.0, 1.0, 1.0),
    field=_linear,
)

ODE_SYSTEMS = (
    _ode(
        name="lorenz",
        description="Lorenz 1963 chaotic convection model (3 states)",
        reference="Lorenz (1963), J. Atmos. Sci. 20:130; the classic chaotic parameters; "
                  "Lyapunov exponents from Sprott, Chaos and Time-Series Analysis (2003)",
        params={"sigma": 10.0, "rho": 28.0, "beta": 8.0 / 3.0},
        dt=0.01,
        n=5000,
        variables=("x", "y", "z"),
        x0=(-8.0, 8.0, 27.0),
        field=_lorenz,
        lyapunov=(0.9056, 0.0, -14.5723),
    ),
    _ode(
        name="rossler",
        description="Rössler chaotic attractor (3 states)",
        reference="Rössler (1976), Phys. Lett. A 57:397; c=5.7 is the standard chaotic case; "
                  "Lyapunov exponents from Sprott, Chaos and Time-Series Analysis (2003)",
        params={"a": 0.2, "b": 0.2, "c": 5.7},
        dt=0.02,
        n=5000,
        variables=("x", "y", "z"),
        x0=(1.0, 1.0, 1.0),
        field=_rossler,
        lyapunov=(0.0714, 0.0, -5.3943),
    ),
    _ode(
        name="chen",
        description="Chen 1999 chaotic attractor, a dual of Lorenz's (3 states)",
        reference="Chen & Ueta (1999), Int. J. Bifurc. Chaos 9:1465; Lyapunov exponents from "
                  "Sprott, Chaos and Time-Series Analysis (2003)",
        params={"a": 35.0, "b": 3.0, "c": 28.0},
        dt=0.005,
        n=5000,
        variables=("x", "y", "z"),
        x0=(-10.0, 0.0, 37.0),
        field=_chen,
        lyapunov=(2.0272, 0.0, -12.0272),
    ),
    _ode(
        name="sprott-b",
        description="Sprott case B x'=yz, y'=x-y, z'=1-xy: a chaotic flow with 5 terms",
        reference="Sprott (1994), Phys. Rev. E 50:R647, case B, with its Lyapunov exponents",
        params={},
        dt=0.05,
        n=5000,
        variables=("x", "y", "z"),
        x0=(0.05, 0.05, 0.05),
        field=_sprott_b,
        lyapunov=(0.2101, 0.0, -1.2101),
    ),
    _ode(
        name="sprott-c",
        description="Sprott case C x'=yz, y'=x-y, z'=1-x^2: a chaotic flow with 5 terms",
        reference="Sprott (1994), Phys. Rev. E 50:R647, case C, with its Lyapunov exponents",
        params={},
        dt=0.05,
        n=5000,
        variables=("x", "y", "z"),
        x0=(0.05, 0.05, 0.05),
        field=_sprott_c,
        lyapunov=(0.1633, 0.0, -1.1633),
    ),
    _ode(
        name="double-scroll",
        description="Chua's circuit, dimensionless: the double-scroll attractor (3 states)",
        reference="Chua, Komuro & Matsumoto (1986), IEEE Trans. Circuits Syst. 33:1072; "
                  "Lyapunov exponents computed here (QR method, 4 orbits of 2000 time units, "
                  "standard error 0.01), not taken from a publication",
        params={"alpha": 15.6, "beta": 28.0, "m0": -8.0 / 7.0, "m1": -5.0 / 7.0},
        dt=0.01,
        n=5000,
        variables=("x", "y", "z"),
        x0=(0.7, 0.0, 0.0),
        field=_chua,
        lyapunov=(0.431, 0.0, -4.235),
    ),
    _ode(
        name="vanderpol",
        description="van der Pol oscillator x'=y, y'=mu(1-x^2)y-x: a limit cycle",
        reference="van der Pol (1926), Phil. Mag. 2:978",
        params={"mu": 1.0},
        dt=0.01,
        n=3000,
        variables=("x", "y"),
        x0=(2.0, 0.0),
        field=_vanderpol,
    ),
    _ode(
        name="lotka-volterra",
        description="Lotka-Volterra predator-prey x'=x(alpha-beta y), y'=y(delta x-gamma)",
        reference="Lotka (1925), Volterra (1926); defaults from the SciPy Cookbook example",
        params={"alpha": 1.0, "beta": 0.1, "gamma": 1.5, "delta": 0.075},
        dt=0.01,
        n=3000,
        variables=("x", "y"),
        x0=(10.0, 5.0),
        field=_lotka_volterra,
    ),
    _ode(
        name="duffing",
        description="unforced damped double-well Duffing x'=y, y'=-delta y-alpha x-beta x^3",
        reference="Guckenheimer & Holmes (1983) §2.2 double well; x0 starts above the barrier",
        params={"alpha": -1.0, "beta": 1.0, "delta": 0.1},
        dt=0.01,
        n=5000,
        variables=("x", "y"),
        x0=(2.0, 0.0),
        field=_duffing,
    ),
    _ode(
        name="lorenz96",
        description="Lorenz 1996 ring of N sites x_i'=(x_{i+1}-x_{i-2})x_{i-1}-x_i+F",
        reference="Lorenz (1996), ECMWF Seminar on Predictability; F=8 is chaotic",
        params={"N": 10.0, "F": 8.0},
        dt=0.01,
        n=5000,
        variables=lambda p: tuple(f"x{i}" for i in range(_lorenz96_size(p))),
        x0=_lorenz96_x0,
        field=_lorenz96,
        check=_check_lorenz96,
    ),
    LINEAR,
    _ode(
        name="forced-oscillator",
        description="damped oscillator x'=v, v'=-k x-c v+u driven by a sum of three sines u",
        reference="designed here; u(t) = sin(0.7 t) + sin(sqrt(2) t) + sin(sqrt(7) t)",
        params={"k": 4.0, "c": 0.2},
        dt=0.01,
        n=3000,
        variables=("x", "v"),
        inputs=("u",),
        x0=(1.0, 0.0),
        field=_forced_oscillator,
        forcing=oscillator_forcing,
    ),
)
