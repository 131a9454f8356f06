"""Lyapunov exponents of a map by the QR method (Benettin et al. 1980; Eckmann & Ruelle 1985).

A map ``step`` advances states (K, D) by one step of ``dt`` time units. Along an orbit, the
tangent directions Q (D, D) are pushed through the step's Jacobian J and re-orthonormalised,
J Q = Q' R; the exponents are the time averages of log |R_ii| / dt, largest first. With no
``jacobian``, J Q is taken by forward finite differences of ``step`` along Q's columns (the
perturbation is ``epsilon`` times the orbit's scale), so any map one can evaluate works; for a
flow, pass its one-sample (or k-sample) map and the matching dt.

K orbits from K starts run side by side and their exponents are averaged; the standard error
comes from the spread of the exponents over ``BLOCKS`` consecutive blocks of every orbit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Blocks per orbit for the standard error of the exponents.
BLOCKS = 10
# Relative finite-difference step: large against a solver's rounding (~1e-8 relative for the
# integrated equation models) and small against the orbit's curvature.
EPSILON = 1e-6

StepFunction = Callable[[np.ndarray], np.ndarray]
JacobianFunction = Callable[[np.ndarray], np.ndarray]

__all__ = ["LyapunovSpectrum", "lyapunov_spectrum"]


@dataclass(frozen=True)
class LyapunovSpectrum:
    """exponents (c,) in 1/time units, largest first; standard_error (c,) of each; ``time``
    the orbit time averaged over (steps * dt, per orbit) and ``orbits`` how many."""

    exponents: np.ndarray
    standard_error: np.ndarray
    time: float
    orbits: int

    @property
    def largest(self) -> float:
        return float(self.exponents[0])

    @property
    def kaplan_yorke_dimension(self) -> float:
        """j + (sum of the first j exponents) / |exponent j+1|, j the largest count whose sum
        is >= 0: the attractor's dimension estimate (0 when the largest exponent is negative,
        D when all sums stay non-negative)."""
        sums = np.cumsum(self.exponents)
        j = int(np.sum(sums >= 0))
        if j == 0:
            return 0.0
        if j == len(self.exponents):
            return float(j)
        return float(j + sums[j - 1] / abs(self.exponents[j]))


def lyapunov_spectrum(
    step: StepFunction,
    states: np.ndarray,
    dt: float,
    steps: int,
    *,
    jacobian: JacobianFunction | None = None,
    count: int | None = None,
    transient: int = 0,
    epsilon: float = EPSILON,
) -> LyapunovSpectrum:
    """The ``count`` largest Lyapunov exponents (all D by default) of ``step`` from ``states``
    (K, D) or (D,).

    step: states (n, D) -> (n, D) one step of ``dt`` later (finite differences call it on
    K (count + 1) rows at once). jacobian: states (K, D) -> (K, D, D), d step_i / d state_j,
    or None. transient: steps run first to settle the orbits and directions, not averaged.
    A ValueError for bad arguments; an orbit that leaves the finite numbers gives NaN exponents.
    """
    x = np.atleast_2d(np.asarray(states, dtype=float)).copy()
    k, d = x.shape
    count = d if count is None else count
    if not (np.isfinite(dt) and dt > 0) or steps < BLOCKS or transient < 0 or not 1 <= count <= d:
        raise ValueError(f"need dt > 0, steps >= {BLOCKS}, transient >= 0 and 1 <= count <= "
                         f"{d} (dt={dt}, steps={steps}, transient={transient}, count={count})")
    q = np.broadcast_to(np.eye(d)[:, :count], (k, d, count)).copy()
    scale = np.maximum(np.abs(x).max(), 1.0)
    sums = np.zeros((BLOCKS, k, count))
    block = np.minimum(np.arange(steps) * BLOCKS // steps, BLOCKS - 1)
    for n in range(-transient, steps):
        x, pushed = _advance(step, jacobian, x, q, epsilon * scale)
        q, r = np.linalg.qr(pushed)
        if n >= 0:
            with np.errstate(divide="ignore"):
                sums[block[n]] += np.log(np.abs(np.diagonal(r, axis1=1, axis2=2)))
    lengths = np.bincount(block, minlength=BLOCKS) * dt
    # Column i of R measures the i-th fastest direction (Gram-Schmidt order), so the exponents
    # come out largest first without sorting.
    rates = sums / lengths[:, None, None]  # (blocks, K, D): each block's and orbit's exponents
    exponents = sums.sum(axis=0).mean(axis=0) / (steps * dt)
    spread = rates.reshape(BLOCKS * k, count).std(axis=0, ddof=1)
    return LyapunovSpectrum(
        exponents=exponents,
        standard_error=spread / np.sqrt(BLOCKS * k),
        time=steps * dt,
        orbits=k,
    )


def _advance(
    step: StepFunction,
    jacobian: JacobianFunction | None,
    x: np.ndarray,
    q: np.ndarray,
    h: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The next states (K, D) and the pushed directions J Q (K, D, c) of q (K, D, c)."""
    k, d = x.shape
    c = q.shape[2]
    if jacobian is not None:
        return step(x), jacobian(x) @ q
    # Rows: the K states, then each state moved by h along each of its c directions.
    moved = x[:, None, :] + h * np.swapaxes(q, 1, 2)  # (K, c, D): [orbit, column, coordinate]
    out = step(np.concatenate([x, moved.reshape(k * c, d)]))
    nxt = out[:k]
    pushed = (out[k:].reshape(k, c, d) - nxt[:, None, :]) / h
    return nxt, np.swapaxes(pushed, 1, 2)
