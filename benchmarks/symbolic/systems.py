"""Benchmark systems with known equations, and their simulation.

Each ``System`` gives its right-hand side as sympy-parsable strings over x0..x{d-1} with numeric
parameters, a training initial condition ``x0`` and a second one ``x0_new`` (for the new-IC
re-simulation test), and the time span of each record length. The sampling step is

    dt = span / (samples - 1),   span = ``spans[samples]``,

so the 150-sample records cover at least ~2 characteristic periods (or the whole transient, for
systems that settle), and the 5000-sample records cover ~8-25 periods for periodic or
quasi-periodic systems. Chaotic systems get a long span of ~5-10 Lyapunov times only: the
new-IC re-simulation is scored over the record's full length, and beyond that horizon even a
model with 1e-4 coefficient errors decorrelates from the truth. Transients (1-D systems,
SIR, the enzyme cascade) use the same span for both lengths (5000 samples are then denser,
not longer).

``category`` is derived, not declared: "polynomial" when every right-hand side is a polynomial
in the states, else "non-polynomial". ``python systems.py`` integrates every system from both
initial conditions and reports blow-ups, ranges and timings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

LENGTHS = (150, 5000)
# solve_ivp settings for the ground-truth trajectories.
METHOD, RTOL, ATOL = "DOP853", 1e-10, 1e-12


@dataclass(frozen=True)
class System:
    name: str
    rhs: tuple[str, ...]
    x0: tuple[float, ...]
    x0_new: tuple[float, ...]
    spans: dict[int, float]  # record length (samples) -> time span
    chaotic: bool = False
    note: str = ""
    variables: tuple[str, ...] = field(default=())

    @property
    def dimension(self) -> int:
        return len(self.rhs)

    @property
    def names(self) -> list[str]:
        return list(self.variables) or [f"x{i}" for i in range(self.dimension)]

    @cached_property
    def symbols(self) -> tuple:
        import sympy as sp

        return sp.symbols([f"x{i}" for i in range(self.dimension)])

    @cached_property
    def expressions(self) -> list:
        """The right-hand sides as sympy expressions (exact rationals where written so)."""
        import sympy as sp

        scope = {str(s): s for s in self.symbols}
        return [sp.sympify(text, locals=scope) for text in self.rhs]

    @property
    def category(self) -> str:
        polynomial = all(e.is_polynomial(*self.symbols) for e in self.expressions)
        return "polynomial" if polynomial else "non-polynomial"

    @cached_property
    def _function(self):
        import sympy as sp

        return sp.lambdify(self.symbols, self.expressions, "numpy")

    def f(self, t: float, x: np.ndarray) -> np.ndarray:
        return np.asarray(self._function(*x), dtype=float)

    def times(self, samples: int) -> np.ndarray:
        return np.linspace(0.0, self.spans[samples], samples)

    def simulate(self, samples: int, x0: tuple[float, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(t (n,), x (n, d)) from ``x0`` (default: the training IC) on the record's grid."""
        return integrate(self.f, self.x0 if x0 is None else x0, self.times(samples))


def integrate(f, x0, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ground-truth integration of dx/dt = f(t, x) on the grid ``t``; raises if it fails."""
    from scipy.integrate import solve_ivp

    solution = solve_ivp(
        f, (t[0], t[-1]), np.asarray(x0, dtype=float), method=METHOD, t_eval=t, rtol=RTOL, atol=ATOL
    )
    if not solution.success or solution.y.shape[1] != t.size or not np.all(np.isfinite(solution.y)):
        raise RuntimeError(f"integration failed: {solution.message}")
    return t, solution.y.T


def _spans(short: float, long: float | None = None) -> dict[int, float]:
    return {150: short, 5000: short if long is None else long}


SYSTEMS: tuple[System, ...] = (
    # ---- 1-D -----------------------------------------------------------------------------
    System("logistic", ("x0/2*(1 - x0/4)",), (0.2,), (6.0,), _spans(16),
           note="r=0.5, K=4; training grows from 0.2, new IC decays from above K"),
    System("cubic", ("x0 - x0**3",), (0.05,), (1.6,), _spans(8)),
    System("michaelis_menten_decay", ("-3/2*x0/(1/2 + x0)",), (4.0,), (2.5,), _spans(5),
           note="V=1.5, K=0.5"),
    System("hill_activation", ("x0**2/(1 + x0**2) - 2/5*x0",), (0.6,), (3.0,), _spans(30),
           note="bistable (0 and 2, threshold 0.5); the issue's 0.5*x has a double root at 1, "
                "so the decay rate is 0.4"),
    System("gompertz", ("3/5*x0*(log(10) - log(x0))",), (0.5,), (15.0,), _spans(10),
           note="r=0.6, K=10: terms x and x*log(x)"),
    # ---- 2-D -----------------------------------------------------------------------------
    System("damped_linear_oscillator", ("-x0/10 + 2*x1", "-2*x0 - x1/10"), (2.0, 0.0), (0.0, -1.5),
           _spans(8, 25), note="period pi, decay time 10"),
    System("van_der_pol", ("x1", "(1 - x0**2)*x1 - x0"), (2.0, 0.0), (-0.5, 0.5), _spans(14, 70),
           note="mu=1, period ~6.7"),
    System("lotka_volterra", ("11/10*x0 - 2/5*x0*x1", "x0*x1/10 - 2/5*x1"), (10.0, 5.0), (6.0, 2.0),
           _spans(25, 150), note="period ~10-14"),
    System("duffing", ("x1", "-x1/10 + x0 - x0**3"), (2.0, 0.0), (-1.5, 0.5), _spans(12, 60),
           note="double well, damping 0.1"),
    System("brusselator", ("1 - 4*x0 + x0**2*x1", "3*x0 - x0**2*x1"), (1.0, 1.0), (2.0, 2.0),
           _spans(16, 100), note="a=1, b=3, period ~7"),
    System("selkov", ("-x0 + 2/25*x1 + x0**2*x1", "3/5 - 2/25*x1 - x0**2*x1"), (0.5, 1.5), (1.0, 0.5),
           _spans(25, 150), note="a=0.08, b=0.6 glycolysis limit cycle"),
    System("pendulum", ("x1", "-sin(x0)"), (2.0, 0.0), (0.5, 1.0), _spans(17, 100),
           note="large swing, period ~8.4"),
    System("damped_pendulum", ("x1", "-3/20*x1 - sin(x0)"), (2.8, 0.0), (-2.0, 0.5), _spans(16, 60)),
    System("fitzhugh_nagumo", ("x0 - x0**3/3 - x1 + 1/2", "2/25*(x0 + 7/10 - 4/5*x1)"),
           (-1.0, 1.0), (1.5, -0.5), _spans(75, 400), note="relaxation oscillation, period ~37"),
    System("kuramoto_pair", ("1 + sin(x1 - x0)/5", "3/2 + sin(x0 - x1)/5"), (0.0, 1.0), (0.0, -2.0),
           _spans(42, 200),
           note="phases unwrapped (grow ~1.25/time); phase slip period ~21. R^2 is flattered by "
                "the linear trend"),
    # ---- 3-D -----------------------------------------------------------------------------
    System("lorenz", ("10*(x1 - x0)", "x0*(28 - x2) - x1", "x0*x1 - 8/3*x2"), (-8.0, 8.0, 27.0),
           (5.0, -5.0, 20.0), _spans(1.5, 8), chaotic=True, note="Lyapunov exponent 0.9"),
    System("rossler", ("-x1 - x2", "x0 + x1/5", "1/5 + x2*(x0 - 57/10)"), (-5.0, 0.0, 0.05),
           (2.0, -3.0, 0.1), _spans(12, 60), chaotic=True, note="Lyapunov exponent 0.07, period ~6"),
    System("chen", ("35*(x1 - x0)", "-7*x0 - x0*x2 + 28*x1", "x0*x1 - 3*x2"), (-10.0, 0.0, 37.0),
           (-3.0, 2.0, 20.0), _spans(1.0, 3), chaotic=True, note="Lyapunov exponent ~2"),
    System("sprott_a", ("x1", "-x0 + x1*x2", "1 - x1**2"), (0.0, 5.0, 0.0), (0.0, 4.0, 0.5),
           _spans(12, 60), chaotic=True, note="conservative; chaotic sea"),
    System("sprott_b", ("x1*x2", "x0 - x1", "1 - x0*x1"), (0.1, 0.1, 0.1), (1.0, -1.0, 0.5),
           _spans(12, 60), chaotic=True),
    System("sprott_c", ("x1*x2", "x0 - x1", "1 - x0**2"), (0.1, 0.1, 0.1), (1.0, -1.0, 0.5),
           _spans(12, 60), chaotic=True),
    System("sir", ("-x0*x1/2", "x0*x1/2 - x1/10", "x1/10"), (0.99, 0.01, 0.0), (0.8, 0.05, 0.15),
           _spans(100), note="beta=0.5, gamma=0.1; x0+x1+x2 is conserved (collinear library)"),
    System("thomas", ("sin(x1) - 0.208186*x0", "sin(x2) - 0.208186*x1", "sin(x0) - 0.208186*x2"),
           (1.0, 1.1, -0.01), (-1.0, 0.5, 2.0), _spans(40, 200), chaotic=True,
           note="cyclically symmetric, b=0.208186"),
    System("enzyme_cascade",
           ("3/5 - 3/2*x0/(1/2 + x0)", "3/2*x0/(1/2 + x0) - 6/5*x1/(1 + x1)", "6/5*x1/(1 + x1) - 2/5*x2"),
           (3.0, 0.1, 0.1), (0.1, 3.0, 0.5), _spans(20),
           note="Michaelis-Menten chain with constant influx; settles at (1/3, 1, 3/2)"),
    System("goodwin", ("1/(1 + x2**10) - x0/5", "x0 - x1/5", "x1 - x2/5"), (0.157, 0.363, 1.362),
           (0.05, 0.6, 2.2), _spans(40, 200),
           note="Hill exponent 10 repression; training IC on the limit cycle (period ~20)"),
    System("hastings_powell",
           ("x0*(1 - x0) - 5*x0*x1/(1 + 3*x0)",
            "5*x0*x1/(1 + 3*x0) - x1*x2/10/(1 + 2*x1) - 2/5*x1",
            "x1*x2/10/(1 + 2*x1) - x2/100"),
           (0.8, 0.2, 8.0), (0.5, 0.3, 9.0), _spans(40, 300), chaotic=True,
           note="Holling type II food chain; top predator on a slow (~100) time scale"),
    # ---- 4-D -----------------------------------------------------------------------------
    System("coupled_oscillators", ("x1", "-2*x0 + x2", "x3", "x0 - 2*x2"), (1.0, 0.0, 0.0, 0.0),
           (0.0, 0.5, -0.5, 0.0), _spans(13, 120), note="two masses, three springs; frequencies 1, sqrt(3)"),
    System("henon_heiles", ("x2", "x3", "-x0 - 2*x0*x1", "-x1 - x0**2 + x1**2"), (0.0, 0.1, 0.4, 0.2),
           (0.1, -0.1, 0.3, 0.25), _spans(13, 120), note="energy ~0.105 (< 1/6)"),
    System("competitive_lv4",
           ("x0*(1 - x0 - 109/100*x1 - 38/25*x2)",
            "18/25*x1*(1 - x1 - 11/25*x2 - 34/25*x3)",
            "153/100*x2*(1 - 233/100*x0 - x2 - 47/100*x3)",
            "127/100*x3*(1 - 121/100*x0 - 51/100*x1 - 7/20*x2 - x3)"),
           (0.3, 0.4, 0.3, 0.4), (0.5, 0.2, 0.2, 0.3), _spans(40, 400), chaotic=True,
           note="Vano et al. (2006) chaotic 4-species competition"),
    System("lorenz96_4", ("(x1 - x2)*x3 - x0 + 8", "(x2 - x3)*x0 - x1 + 8",
                          "(x3 - x0)*x1 - x2 + 8", "(x0 - x1)*x2 - x3 + 8"),
           (8.01, 8.0, 8.0, 8.0), (1.0, 2.0, -1.0, 3.0), _spans(3, 12), chaotic=True, note="F=8, 4 sites"),
)

# Forms outside the fixed libraries (issue 17 item 6): dynid's own systems, not textbook ones.
# Each needs a term that no library of the sweep lists: a saturating loss beside logistic growth,
# a non-integer power, a sigmoid with two fitted constants, a polynomial times a saturating term.
OUTSIDE_LIBRARIES: tuple[System, ...] = (
    System("harvested_logistic", ("x0 - x0**2/6 - 3/2*x0/(1 + x0)",), (1.2,), (7.0,), _spans(12),
           note="logistic growth with a saturating (Holling II) harvest; stable at 4.30, threshold 0.70"),
    System("power_decay", ("1/2 - x0**(3/2)",), (3.0,), (0.05,), _spans(8),
           note="constant influx, loss x^1.5; settles at 0.63"),
    System("sigmoid_switch", ("2/(1 + exp(3 - 2*x0)) - x0/2",), (1.0,), (3.5,), _spans(12),
           note="sigmoid self-activation with decay; bistable (0.45 and 3.97, threshold ~0.86), both ICs go to the high state"),
    System("saturating_predation", ("x0*(1 - x0/4) - x0*x1/(1 + x0)", "x0*x1/(1 + x0) - 3/5*x1"),
           (2.0, 1.0), (3.0, 0.5), _spans(40, 200),
           note="x y/(1 + x) predation on logistic prey; settles on a spiral to (1.5, 1.56)"),
)
SYSTEMS = SYSTEMS + OUTSIDE_LIBRARIES

BY_NAME = {system.name: system for system in SYSTEMS}


def check(systems=SYSTEMS) -> list[str]:
    """Integrate every system at every length from both ICs; one report line each."""
    lines = []
    for system in systems:
        for label, x0 in (("train", system.x0), ("new", system.x0_new)):
            for samples in LENGTHS:
                start = time.perf_counter()
                try:
                    _, x = system.simulate(samples, x0)
                    status = (f"min {np.round(x.min(0), 3).tolist()} max {np.round(x.max(0), 3).tolist()} "
                              f"std {np.round(x.std(0), 3).tolist()}")
                except RuntimeError as exc:
                    status = f"FAILED {exc}"
                seconds = time.perf_counter() - start
                lines.append(f"{system.name:26s} {system.category:15s} {label:5s} n={samples:<5d} "
                             f"{seconds:5.2f}s {status}")
    return lines


if __name__ == "__main__":
    print(f"{len(SYSTEMS)} systems:", ", ".join(
        f"{d}-D {sum(s.dimension == d for s in SYSTEMS)}" for d in (1, 2, 3, 4)),
        "|", sum(s.category == "polynomial" for s in SYSTEMS), "polynomial")
    print("\n".join(check()))
