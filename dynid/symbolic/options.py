"""The hyperparameters of the symbolic pipeline: what ``identify`` does, what the ``symbolic``
backend stores in its model file, and what ``dynid symbolic -p`` sets. Every field has a
default that needs no tuning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dynid.errors import UsageError
from dynid.params import Hyperparameters, param
from dynid.symbolic.library import parse_library_spec

DERIVATIVES = ("auto", "finite_difference", "savgol", "spectral", "tv", "spline", "weak")
CRITERIA = ("aicc", "bic")


@dataclass(frozen=True)
class SymbolicParams(Hyperparameters):
    """What ``identify`` does (the one-line docs below are what ``dynid models`` shows); the
    bootstrap's seed is an argument of ``identify``, not a hyperparameter. Bad values raise
    ValueError naming the field (``Hyperparameters.parse`` turns it into a UsageError)."""

    library: str = param("auto", "term library: auto (a sweep of poly1..3, trig, saturating Hill shapes, exp/log, v*exp(v), v*log(v), chosen per equation on held-out data) or a spec like poly3+trig, poly2*trig, trigdiff, rational, saturating, explog, xexplog")
    terms: str = param("", "extra user terms, comma-separated expressions in the variable names, e.g. 'sin(x-y), x/(1+x**2)'")
    derivative: str = param("auto", "auto (from the estimated noise), finite_difference, savgol, spectral, tv, spline, or weak (integral form)")
    criterion: Literal["aicc", "bic"] = param("aicc", "information criterion on held-out rows that picks terms and library")
    max_terms: int | None = param(None, "most terms per equation (none: no cap)")
    ensemble: int = param(20, "bootstrap models for inclusion probabilities and intervals (0: none)")
    discrete: bool = param(False, "discrete-time map x[k+1] = f(x[k], u[k]) instead of an ODE")
    refine: bool = param(True, "refine constants inside nonlinear terms (x/(c+x)) by nonlinear least squares")
    generate: bool = param(True, "try terms outside the libraries, generated from each equation's chosen terms (fitted powers, sigmoids, saturating shapes and their products), kept only when the held-out criterion pays for the larger search")
    shooting: bool = param(True, "continuous-time data: refit coefficients and constants to simulated trajectories (multiple shooting); on noisy data also add terms their likelihood supports")
    jobs: int = param(1, "worker processes for the per-equation sweeps (0: one per CPU); results do not depend on it")

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {', '.join(CRITERIA)}")
        if self.derivative not in DERIVATIVES:
            raise ValueError(f"derivative must be one of {', '.join(DERIVATIVES)}")
        if self.jobs < 0:
            raise ValueError("jobs must be >= 0")
        if self.ensemble < 0:
            raise ValueError("ensemble must be >= 0")
        if self.max_terms is not None and self.max_terms < 1:
            raise ValueError("max_terms must be >= 1")
        if self.library != "auto":
            try:
                parse_library_spec(self.library)
            except UsageError as exc:
                raise ValueError(f"library: {exc}") from None

