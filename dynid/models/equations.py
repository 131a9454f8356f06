"""Simulation shared by backends whose model is an explicit right-hand side f(x, u).

Continuous time: dx/dt = f(x, u(t)), integrated with LSODA. Discrete time: x[k+1] = f(x[k], u[k]).
A subclass provides ``_rhs(x, u)`` and ``discrete_``; this base does the rest of ``simulate``.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from dynid.data.dataset import Trial
from dynid.errors import ComputationError, DataError, Diverged, UsageError
from dynid.models.base import Backend

# Integration tolerances of simulate: tight enough that integration error stays far below the
# model error on chaotic systems over typical forecast horizons.
RTOL = 1e-8
ATOL = 1e-10
# A forecast whose largest |state| exceeds this multiple of (1 + the largest |state| of the
# history) counts as diverged; stopping there keeps finite-time blow-ups from hanging the solver.
BLOWUP_FACTOR = 1e6


class EquationBackend(Backend):
    """A backend with identified equations: simulate integrates (or iterates) ``_rhs``."""

    @abstractmethod
    def _rhs(self, x: np.ndarray, u: np.ndarray | None) -> np.ndarray:
        """f(x, u) for one state x (d,) and input u (m,) or None -> (d,)."""

    @property
    @abstractmethod
    def discrete_(self) -> bool:
        """True for a map x[k+1] = f(x[k], u[k]), False for an ODE."""

    def equation_lines(self, precision: int = 6) -> list[str] | None:
        """"dx/dt = ..." (ODEs) or "x[k+1] = ..." (maps), then notes on renamed symbols."""
        from dynid.symbolic import equations_result, format_text

        return format_text(equations_result(self), precision).rstrip("\n").splitlines()

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """(steps, d) states at dt_ * (1..steps) after the last history sample.

        ODEs: integrated with inputs interpolated linearly between history.u[-1] (t = 0) and
        future_inputs[k] (t = (k + 1) dt). Maps: x[k+1] = f(x[k], u[k]), so the first step uses
        history.u[-1] and the last row of future_inputs is not needed.
        """
        if steps < 0:
            raise UsageError(f"cannot simulate a negative number of steps ({steps})")
        x0 = np.asarray(history.x[-1], dtype=np.float64)
        if not np.all(np.isfinite(x0)):
            raise DataError("the last history sample has missing or infinite values")
        if steps == 0:
            return np.empty((0, self.n_variables))
        limit = BLOWUP_FACTOR * (1.0 + float(np.nanmax(np.abs(history.x))))
        # Input knots: the last history input at t = 0, then future row k at t = k dt.
        knots = None
        if self.inputs_:
            assert history.u is not None and future_inputs is not None
            knots = np.vstack([history.u[-1:], np.asarray(future_inputs, dtype=np.float64)])
        if self.discrete_:
            return self._iterate_map(x0, steps, knots, limit)
        return self._integrate(x0, steps, knots, limit)

    def _iterate_map(
        self, x0: np.ndarray, steps: int, knots: np.ndarray | None, limit: float
    ) -> np.ndarray:
        out = np.empty((steps, self.n_variables))
        x = x0
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(steps):
                # x[k+1] = f(x[k], u[k]); u at the current sample, i.e. knot k.
                x = self._rhs(x, None if knots is None else knots[k])
                if not (np.all(np.isfinite(x)) and np.max(np.abs(x)) <= limit):
                    out[k:] = np.nan
                    raise Diverged(
                        f"the identified {self.name} map diverged at step {k + 1} of {steps}; try a "
                        "larger threshold or a smaller library",
                        step=k + 1,
                        states=out,
                    )
                out[k] = x
        return out

    def _integrate(
        self, x0: np.ndarray, steps: int, knots: np.ndarray | None, limit: float
    ) -> np.ndarray:
        from scipy.integrate import solve_ivp

        dt = self.dt_
        times = dt * np.arange(1, steps + 1)

        def inputs_at(t: float) -> np.ndarray | None:
            # Piecewise-linear between knots at 0, dt, ..., steps*dt; held constant outside.
            if knots is None:
                return None
            s = min(max(t / dt, 0.0), float(steps))
            k = min(int(s), steps - 1)
            return knots[k] + (s - k) * (knots[k + 1] - knots[k])

        def escaped(t: float, x: np.ndarray) -> float:
            # A non-finite state counts as escaped: the event's root finder needs a sign there.
            size = float(np.max(np.abs(x)))
            return limit - size if np.isfinite(size) else -1.0

        escaped.terminal = True  # type: ignore[attr-defined]
        def rhs(t: float, x: np.ndarray) -> np.ndarray:
            return self._rhs(x, inputs_at(t))

        with np.errstate(over="ignore", invalid="ignore"):
            try:
                solution = solve_ivp(
                    rhs,
                    (0.0, float(times[-1])),
                    x0,
                    method="LSODA",  # switches to BDF when an identified model is stiff
                    t_eval=times,
                    rtol=RTOL,
                    atol=ATOL,
                    events=escaped,
                )
            except ValueError:
                # The escape event's root finder met a state that blew up within one solver
                # step (no sign change to bracket): find the step by stepping the solver by hand.
                step, states = _escape_step(rhs, x0, times, limit)
                raise Diverged(
                    f"the identified {self.name} model diverged (|x| > {limit:.3g} or not finite) "
                    f"near step {step} of {steps}; try a larger threshold or a smaller library",
                    step=step,
                    states=states,
                ) from None
        states = np.full((steps, self.n_variables), np.nan)
        finite = solution.y.T[np.all(np.isfinite(solution.y), axis=0).cumprod(dtype=bool)]
        states[: len(finite)] = finite
        if solution.status == 1:  # the escape event stopped the solver
            where = solution.t_events[0][0]
            raise Diverged(
                f"the identified {self.name} model diverged (|x| > {limit:.3g}) at t = {where:.4g} "
                "after the last history sample; try a larger threshold or a smaller library",
                step=len(finite) + 1,
                states=states,
            )
        if not solution.success or len(finite) < steps:
            raise Diverged(
                f"integrating the identified {self.name} model failed at step {len(finite) + 1} "
                f"of {steps}: {solution.message}",
                step=len(finite) + 1,
                states=states,
            )
        return states



def _escape_step(rhs, x0: np.ndarray, times: np.ndarray, limit: float) -> tuple[int, np.ndarray]:  # type: ignore[no-untyped-def]
    """The first output step (1-based) at which an LSODA solution of ``rhs`` leaves
    ``|x| <= limit`` (or the finite numbers), and the (len(times), d) states before it (NaN after).
    """
    from scipy.integrate import LSODA

    states = np.full((times.size, x0.size), np.nan)
    solver = LSODA(rhs, 0.0, x0, float(times[-1]), rtol=RTOL, atol=ATOL)
    done = 0
    while solver.status == "running" and done < times.size:
        if solver.step() is not None or not np.all(np.isfinite(solver.y)):
            break
        interpolant = solver.dense_output()
        while done < times.size and times[done] <= solver.t:
            x = interpolant(times[done])
            if not (np.all(np.isfinite(x)) and np.max(np.abs(x)) <= limit):
                return done + 1, states
            states[done] = x
            done += 1
    return min(done + 1, times.size), states
