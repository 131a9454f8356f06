"""The two contenders behind one interface: fit on (t, x), return equations and a simulator.

* dynid: ``dynid.fit(Dataset.from_arrays(x, t=t), "symbolic", ["ensemble=0"], seed=0)``;
  equations = coefficients_ @ termset_.names; simulation = the model's own ``simulate``
  (LSODA, rtol 1e-8, atol 1e-10, stopped when |x| > 1e6 (1 + |x0|)).
* pysindy: ``ps.SINDy()`` with every default (degree-2 polynomial library, STLSQ threshold 0.1
  and alpha 0.05, second-order centred finite differences), ``fit(x, t=dt)``; equations = coefficients over its feature
  names; simulation = those equations integrated exactly like dynid's (same solver, tolerances
  and blow-up stop), so the comparison measures the models, not the integrators.

Only the fit call is timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

# Mirrors dynid.models.equations (RTOL, ATOL, BLOWUP_FACTOR) for the pysindy simulations.
RTOL, ATOL, BLOWUP_FACTOR = 1e-8, 1e-10, 1e6


@dataclass
class Fitted:
    """equations: one sympy expression per state over x0..; simulate(x0, n) -> (n, d) on the
    training grid, starting with x0; info: tool-specific notes (dynid's chosen libraries)."""

    equations: list
    seconds: float
    simulate: Callable[[np.ndarray, int], np.ndarray]
    info: dict[str, Any] = field(default_factory=dict)


def fit_dynid(t: np.ndarray, x: np.ndarray, symbols, params=("ensemble=0",), seed: int = 0) -> Fitted:
    """params: symbolic hyperparameters as on the command line (-p key=value)."""
    import dynid

    data = dynid.Dataset.from_arrays(x, t=t)
    start = time.perf_counter()
    result = dynid.fit(data, "symbolic", list(params), seed=seed)
    seconds = time.perf_counter() - start
    model = result.model
    equations = linear_combination(model.coefficients_, model.termset_.names, symbols)

    def simulate(x0: np.ndarray, n: int) -> np.ndarray:
        history = dynid.Trial(t[:1], np.asarray(x0, dtype=float)[None, :])
        return np.vstack([x0, model.simulate(history, n - 1)])

    metrics = model.metrics_
    info = {key: metrics[key] for key in ("library", "derivative", "formulation") if key in metrics}
    return Fitted(equations, seconds, simulate, info)


def fit_pysindy(t: np.ndarray, x: np.ndarray, symbols) -> Fitted:
    import pysindy as ps

    dt = float(t[1] - t[0])
    model = ps.SINDy()
    start = time.perf_counter()
    model.fit(x, t=dt)
    seconds = time.perf_counter() - start
    names = [_pysindy_feature(name) for name in model.get_feature_names()]
    equations = linear_combination(model.coefficients(), names, symbols)
    rhs = sp.lambdify(symbols, equations, "numpy")
    return Fitted(equations, seconds, lambda x0, n: integrate(rhs, x0, dt, n))


def _pysindy_feature(name: str) -> str:
    """pysindy's "x0^2 x1" -> "x0**2*x1"."""
    return "*".join(name.split()).replace("^", "**")


def linear_combination(coefficients: np.ndarray, names: list[str], symbols) -> list:
    """coefficients (d, P) @ terms, as one sympy expression per row (zeros dropped)."""
    scope = {str(s): s for s in symbols}
    terms = [sp.sympify(name, locals=scope) for name in names]
    return [
        sp.Add(*[sp.Float(float(c)) * term for c, term in zip(row, terms) if c != 0])
        for row in np.atleast_2d(coefficients)
    ]


def integrate(rhs: Callable, x0: np.ndarray, dt: float, n: int) -> np.ndarray:
    """(n, d) states of dx/dt = rhs(*x) at 0, dt, ..., (n-1) dt; raises if it diverges/fails."""
    from scipy.integrate import solve_ivp

    x0 = np.asarray(x0, dtype=float)
    limit = BLOWUP_FACTOR * (1.0 + float(np.max(np.abs(x0))))
    d = x0.size

    def f(_t: float, x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(np.asarray(rhs(*x), dtype=float), (d,))

    def escaped(_t: float, x: np.ndarray) -> float:
        return limit - float(np.max(np.abs(x)))

    escaped.terminal = True  # type: ignore[attr-defined]
    times = dt * np.arange(n)
    with np.errstate(over="ignore", invalid="ignore"):
        solution = solve_ivp(f, (0.0, times[-1]), x0, method="LSODA", t_eval=times,
                             rtol=RTOL, atol=ATOL, events=escaped)
    if solution.status != 0 or not np.all(np.isfinite(solution.y)):
        raise RuntimeError(f"simulation diverged or failed: {solution.message}")
    return solution.y.T
