"""The discrete-time systems of the catalogue: one step per sample, ``dt`` only labels time."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dynid.errors import ComputationError, UsageError

from ._spec import Field, Implementation, Params, define

VAR_BURN_IN = 200
"""Samples simulated and dropped before a ``var`` run, so that it starts from the stationary law."""

# (source, target, lag) -> weight. Every source precedes its target, so the graph is acyclic, the
# lag matrices are lower triangular and the VAR's poles are those of the self-loops alone: the
# process stays stable for any `coupling`.
_VAR_EDGES = {(0, 1, 1): 0.4, (1, 2, 2): 0.35, (3, 4, 1): 0.4, (0, 3, 2): -0.3}
# Per variable, its own (lag-1, lag-2) coefficients: each a stable AR(2), largest root 0.62.
_VAR_SELF = ((0.5, -0.2), (0.4, 0.0), (0.3, 0.2), (0.6, -0.3), (0.3, 0.0))


def _iterate(field: Field, x0: np.ndarray, t: np.ndarray) -> np.ndarray:
    """States ``(len(t), d)`` of ``x[k+1] = field(t[k], x[k])`` from ``x[0] = x0``."""
    x = np.empty((t.size, x0.size))
    x[0] = x0
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, t.size):
            x[k] = field(t[k - 1], x[k - 1], None)
    if not np.isfinite(x).all():
        raise ComputationError("the map diverged; try other parameters or initial state")
    return x


def _map(*, field, **spec) -> Implementation:
    def trajectory(params: Params, x0: np.ndarray, t: np.ndarray, rng: np.random.Generator):
        return _iterate(field(params), x0, t), None

    return define(kind="map", field=field, trajectory=trajectory, **spec)


def _logistic_coupled(p: Params) -> Field:
    r_x, r_y, beta_xy, beta_yx = p["r_x"], p["r_y"], p["beta_xy"], p["beta_yx"]

    def f(t, x, u=None):
        return np.array([
            x[0] * (r_x - r_x * x[0] - beta_xy * x[1]),
            x[1] * (r_y - r_y * x[1] - beta_yx * x[0]),
        ])

    return f


def var_coefficients(params: Mapping[str, float] | None = None) -> np.ndarray:
    """The ``var`` system's lag matrices, shape ``(p, d, d)`` = ``(2, 5, 5)``.

    ``A[k][target, source]`` multiplies ``x[source]`` at lag ``k + 1`` in the equation of
    ``x[target]``: ``x_t = A[0] x_{t-1} + A[1] x_{t-2} + e_t``.
    """
    p = VAR.resolve(params)
    a = np.zeros((2, len(_VAR_SELF), len(_VAR_SELF)))
    for i, own in enumerate(_VAR_SELF):
        a[:, i, i] = own
    for (source, target, lag), weight in _VAR_EDGES.items():
        a[lag - 1, target, source] = p["coupling"] * weight
    return a


def var_graph(params: Mapping[str, float] | None = None) -> set[tuple[int, int, int]]:
    """The ``var`` system's causal edges between distinct variables, as (source, target, lag)."""
    return set() if VAR.resolve(params)["coupling"] == 0 else set(_VAR_EDGES)


def _companion(a: np.ndarray) -> np.ndarray:
    lags, d, _ = a.shape
    c = np.zeros((lags * d, lags * d))
    c[:d] = np.hstack(list(a))
    c[d:, :-d] = np.eye((lags - 1) * d)
    return c


def _var_field(p: Params) -> Field:
    # A VAR(2) step needs two lags, so the state is the stacked [x_t, x_{t-1}] of shape (2d,).
    companion = _companion(var_coefficients(p))

    def f(t, x, u=None):
        return companion @ x

    return f


def _var_trajectory(p: Params, x0: np.ndarray, t: np.ndarray, rng: np.random.Generator):
    a = var_coefficients(p)
    lags, d, _ = a.shape
    shocks = p["sigma"] * rng.standard_normal((VAR_BURN_IN + t.size, d))
    x = np.empty((lags + shocks.shape[0], d))
    x[:lags] = x0
    for k in range(lags, x.shape[0]):
        x[k] = shocks[k - lags] + sum(a[j] @ x[k - 1 - j] for j in range(lags))
    return x[-t.size :], None


def _check_var(p: Params) -> None:
    if p["sigma"] < 0:
        raise UsageError(f"parameter 'sigma' of system 'var' must be >= 0, got {p['sigma']:g}")


VAR = define(
    name="var",
    description="sparse stable VAR(2) of 5 variables with a known causal graph (var_graph())",
    kind="map",
    reference="designed here; var_coefficients() gives the lag matrices",
    params={"sigma": 1.0, "coupling": 1.0},
    dt=1.0,
    n=2000,
    variables=("x0", "x1", "x2", "x3", "x4"),
    # Washed out by the burn-in: the first returned sample is VAR_BURN_IN steps later.
    x0=(0.0, 0.0, 0.0, 0.0, 0.0),
    field=_var_field,
    trajectory=_var_trajectory,
    check=_check_var,
)

MAP_SYSTEMS = (
    VAR,
    _map(
        name="logistic-coupled",
        description="two coupled logistic maps, x drives y (beta_xy=0): the CCM test case",
        reference="Sugihara et al. (2012), Science 338:496, Fig. 1 (there beta_xy=0.02)",
        params={"r_x": 3.8, "r_y": 3.5, "beta_xy": 0.0, "beta_yx": 0.1},
        dt=1.0,
        n=2000,
        variables=("x", "y"),
        x0=(0.4, 0.2),
        field=_logistic_coupled,
    ),
)
