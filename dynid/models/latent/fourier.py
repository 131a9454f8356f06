"""Weight-space Gaussian process over a covariate: regular Fourier features of a squared-
exponential kernel wrapped on a torus (the basis of the CLDS brief, ``METHODS.md`` §1).

A function f(u) of the covariate u (M columns) is f(u) = sum_l w_l phi_l(u) with w_l ~ N(0, 1);
then f ~ GP(0, k) with k(u, u') = sum_l phi_l(u) phi_l(u'). Each covariate column is first
scaled to z = (u - lo) / span, so the training conditions lie in [0, 1]; on it, with period P,

    phi_0 = sqrt(s_0),  phi_{m,cos}(z) = sqrt(s_m) cos(2 pi m z / P),  phi_{m,sin} likewise sin,
    s_0 = c_0, s_m = 2 c_m (m >= 1), c_m proportional to exp(-2 pi^2 (kappa / P)^2 m^2),

scaled so that sum_m s_m = 1: the Fourier series of a Gaussian kernel of lengthscale kappa
(in units of the training range) periodised with period P, with k(z, z) = 1. Several columns
take the tensor product of their 1-D features (a product kernel), times ``sd`` squared.

Why periodic, and the period: the regular features are deterministic and few (2N - 1 per
column, no seed), and P = 1 + 2 MARGIN + 6 kappa keeps the wrap-around at least three
lengthscales away from every point of the covered range [-MARGIN, 1 + MARGIN], so within it the
kernel is the squared-exponential one to within exp(-4.5). Frequencies whose weight s_m falls
below SPECTRUM_FLOOR times s_0 are dropped (they change the kernel by less than that).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from dynid.errors import DataError

# The covered range reaches this fraction of the training range beyond either end.
MARGIN = 0.25
# Frequencies of relative spectral weight below this are left out.
SPECTRUM_FLOOR = 1e-8
# Grid points per covariate column at which a model tabulates its dynamics (one column; with
# several, GRID_POINTS_MULTI per column).
GRID_POINTS = 41
GRID_POINTS_MULTI = 11


@dataclass(frozen=True)
class FourierBasis:
    """lo, span (M,): the covariate scaling z = (u - lo) / span; lengthscale (of z, i.e. in
    units of the training range) and sd of the GP; frequencies: N, the features per column are
    1 + 2 (N - 1)."""

    lo: np.ndarray
    span: np.ndarray
    lengthscale: float
    sd: float
    frequencies: int

    @classmethod
    def over(cls, conditions: np.ndarray, lengthscale: float, sd: float, max_frequencies: int) -> FourierBasis:
        """The basis over training ``conditions`` (K, M): their range scaled to [0, 1] (a column
        whose conditions are all equal keeps its units: span 1), and as many frequencies as
        the spectrum needs above SPECTRUM_FLOOR, at most ``max_frequencies``."""
        lo = conditions.min(axis=0) if conditions.size else np.zeros(conditions.shape[1])
        span = conditions.max(axis=0) - lo if conditions.size else np.ones(conditions.shape[1])
        span = np.where(span > 0, span, 1.0)
        ratio = lengthscale / period(lengthscale)
        needed = math.floor(math.sqrt(-math.log(SPECTRUM_FLOOR) / (2 * math.pi**2)) / ratio) + 1
        return cls(lo=lo, span=span, lengthscale=lengthscale, sd=sd, frequencies=min(needed, max_frequencies))

    @property
    def n_columns(self) -> int:
        return int(self.lo.shape[0])

    @property
    def size(self) -> int:
        """L, the number of features."""
        return (2 * self.frequencies - 1) ** self.n_columns

    def scaled(self, u: np.ndarray) -> np.ndarray:
        """z (G, M) of covariate values u (G, M)."""
        return (u - self.lo) / self.span

    def features(self, u: np.ndarray) -> np.ndarray:
        """phi (G, L) at covariate values u (G, M); (G, 1) of sd with no columns."""
        z = self.scaled(np.atleast_2d(u))
        out = np.full((z.shape[0], 1), self.sd)
        weights = np.sqrt(_spectrum(self.lengthscale, self.frequencies))
        angles = 2 * math.pi * np.arange(1, self.frequencies) / period(self.lengthscale)
        for column in range(self.n_columns):
            phase = z[:, column : column + 1] * angles
            one = np.hstack([np.full((z.shape[0], 1), weights[0]),
                             weights[1:] * np.cos(phase), weights[1:] * np.sin(phase)])
            out = np.einsum("gi,gj->gij", out, one).reshape(z.shape[0], -1)
        return out

    def covered(self) -> tuple[np.ndarray, np.ndarray]:
        """The covariate range (lowest (M,), highest (M,)) the model answers for."""
        return self.lo - MARGIN * self.span, self.lo + (1 + MARGIN) * self.span

    def grid(self) -> np.ndarray:
        """Covariate values (G, M) spanning the covered range: a tensor grid (one point with
        no columns)."""
        per_column = GRID_POINTS if self.n_columns == 1 else GRID_POINTS_MULTI
        low, high = self.covered()
        axes = [np.linspace(a, b, per_column) for a, b in zip(low, high)]
        points = list(itertools.product(*axes))
        return np.array(points, dtype=float).reshape(len(points), self.n_columns)

    def check_covered(self, u: np.ndarray, names: tuple[str, ...]) -> None:
        """DataError naming the column when a covariate value ``u`` (M,) lies outside the
        covered range, where the periodic basis would wrap around."""
        low, high = self.covered()
        for k, name in enumerate(names):
            if not low[k] - 1e-9 * self.span[k] <= u[k] <= high[k] + 1e-9 * self.span[k]:
                raise DataError(
                    f"input {name!r} = {u[k]:g} lies outside [{low[k]:g}, {high[k]:g}], the training "
                    f"conditions' range and {MARGIN:.0%} of it either side, where the model's "
                    "Gaussian-process basis is valid"
                )

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "basis_lo": self.lo, "basis_span": self.span,
            "basis_settings": np.array([self.lengthscale, self.sd, float(self.frequencies)]),
        }

    @classmethod
    def from_arrays(cls, lo: np.ndarray, span: np.ndarray, settings: np.ndarray) -> FourierBasis:
        """The inverse of ``arrays``."""
        return cls(lo=lo, span=span, lengthscale=float(settings[0]), sd=float(settings[1]),
                   frequencies=int(settings[2]))


def period(lengthscale: float) -> float:
    """P: the covered range [-MARGIN, 1 + MARGIN] plus three lengthscales either side."""
    return 1 + 2 * MARGIN + 6 * lengthscale


def _spectrum(lengthscale: float, frequencies: int) -> np.ndarray:
    """s_0 .. s_{N-1} (module docstring), normalised over all frequencies (the sum converges
    fast: the terms fall as exp(-m^2))."""
    ratio = lengthscale / period(lengthscale)
    m = np.arange(0, max(frequencies, math.ceil(10 / ratio)) + 1)
    c = np.exp(-2 * math.pi**2 * ratio**2 * m**2)
    s = np.concatenate([c[:1], 2 * c[1:]])
    return s[:frequencies] / s.sum()
