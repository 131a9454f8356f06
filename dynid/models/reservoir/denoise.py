"""Observation noise out of the reservoirs' regressors: a Savitzky-Golay smoother whose window is
chosen from the data's own noise level.

Why: a ridge read-out fitted on noisy states is an errors-in-variables regression; noise in the
features attenuates the fitted map (regression dilution), and the closed loop shows it. On
10,000 Lorenz-63 samples with 5 % observation noise, ngrc's free run oscillated at 1.302 per
time unit where the data oscillate at 1.314-1.330 (the z spectrum's peak), which the spectral
distance D_H reads as a different attractor; fitted on the smoothed record, the peak sits at
the data's. Targets are computed from the smoothed states too, so the map learned is that of
the smoothed trajectory.

The window (and polynomial order) per variable minimises Stein's unbiased risk estimate of the
smoothed values against the noise-free ones: for a linear smoother S applied to y = s + e
(white noise of sd sigma, ``dynid.symbolic.noise.estimate_noise``),

    E |S y - s|^2 = E |S y - y|^2 + 2 sigma^2 tr(S) - n sigma^2,

and the raw record (S = I) has risk n sigma^2, so a smoother is used only where its estimated
risk is lower: on clean data (sigma near 0) the record stays as it is. The criterion is on the
values, not on the increments, because the values are the regressors whose noise biases the
fit; the noise left on the increment targets only adds variance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.models.base import expect_array
from dynid.models.reservoir.readout import Standardiser, longest
from dynid.symbolic.derivatives.savgol import candidate_windows
from dynid.symbolic.noise import estimate_noise

# Polynomial orders tried (windows: odd, growing about 20 %, ``candidate_windows``).
ORDERS = (3, 5)
# Windows past a variable's best one that must all score worse before the search stops.
PATIENCE = 3
# Trials shorter than this many samples stay raw (too short to estimate the noise level).
MIN_SAMPLES = 30


@dataclass(frozen=True)
class Smoothing:
    """The smoother of one variable: an odd window in samples and a polynomial order; window 1
    (order 0) is the raw record."""

    window: int
    order: int

    def apply(self, y: np.ndarray) -> np.ndarray:
        """The smoothed column (n,) of y (n,)."""
        if self.window == 1:
            return y.copy()
        import scipy.signal  # costly to import: only when a smoother runs

        return scipy.signal.savgol_filter(y, self.window, self.order, mode="interp")

    def trace(self, n: int) -> float:
        """tr(S) of the smoother on n samples (n >= window). Each row of S is a least-squares
        polynomial fit over a window evaluated at one of its points, whose diagonal entry is
        the fit's leverage there: the centre's on interior rows, and the first (last) points'
        on the edge rows (``mode="interp"`` fits the first / last window once)."""
        if self.window == 1:
            return float(n)
        positions = np.linspace(-1.0, 1.0, self.window)
        basis, _ = np.linalg.qr(np.vander(positions, self.order + 1))
        leverage = np.sum(basis**2, axis=1)  # (window,), symmetric
        half = self.window // 2
        return float(leverage[half] * (n - 2 * half) + 2 * leverage[:half].sum())


RAW = Smoothing(1, 0)


def choose_smoothing(y: np.ndarray, noise: float) -> tuple[Smoothing, float]:
    """The smoother of y (n,) with the least estimated risk (module docstring) for white noise
    of sd ``noise``, and that risk per sample (noise^2 for the raw record)."""
    n = len(y)
    best, best_risk = RAW, noise**2
    for order in ORDERS:
        order_risk, since_best = np.inf, 0
        for window in candidate_windows(n, order):
            candidate = Smoothing(window, order)
            risk = (np.sum((candidate.apply(y) - y) ** 2) + 2 * noise**2 * candidate.trace(n)) / n
            risk -= noise**2
            if risk < order_risk:
                order_risk, since_best = risk, 0
            else:
                since_best += 1
            if risk < best_risk:
                best, best_risk = candidate, risk
            if since_best >= PATIENCE:
                break
    return best, float(best_risk)


def denoise(trials: list[np.ndarray]) -> tuple[list[np.ndarray], list[list[Smoothing]]]:
    """Each trial (n_i, d), uniformly sampled, smoothed variable by variable with its
    ``choose_smoothing`` for the noise level ``estimate_noise`` reads from that trial, and the
    smoothers used (per trial, per variable). Trials under MIN_SAMPLES stay raw."""
    smoothed, used = [], []
    for x in trials:
        if len(x) < MIN_SAMPLES:
            smoothed.append(x.copy())
            used.append([RAW] * x.shape[1])
            continue
        # The estimate depends on the sample times only through their ratios: uniform = indices.
        noise = estimate_noise(x, np.arange(len(x), dtype=float))
        choices = [choose_smoothing(x[:, j], float(noise[j]))[0] for j in range(x.shape[1])]
        smoothed.append(np.column_stack([c.apply(x[:, j]) for j, c in enumerate(choices)]))
        used.append(choices)
    return smoothed, used


@dataclass(frozen=True)
class StateSmoothing:
    """One smoother per variable, as a fit chose them (those of its longest trial): a forecast
    smooths its history with them, so the read-out starts from states like those it was fitted
    on."""

    smoothers: tuple[Smoothing, ...]

    @classmethod
    def raw(cls, d: int) -> StateSmoothing:
        return cls((RAW,) * d)

    @classmethod
    def from_array(cls, windows_orders: np.ndarray) -> StateSmoothing:
        """From ``array()``'s (d, 2) windows and orders (a model file's)."""
        return cls(tuple(Smoothing(int(w), int(o)) for w, o in windows_orders))

    def array(self) -> np.ndarray:
        """(d, 2) integers: each variable's window and polynomial order."""
        return np.array([[s.window, s.order] for s in self.smoothers], dtype=np.int64)

    @property
    def span(self) -> int:
        """Samples the widest smoother fits at once (1 when raw)."""
        return max(s.window for s in self.smoothers)

    def apply(self, z: np.ndarray) -> np.ndarray:
        """z (n, d) smoothed column by column; needs n >= ``span``."""
        if len(z) < self.span:
            raise ValueError(f"smoothing needs {self.span} samples, got {len(z)}")
        return np.column_stack([s.apply(z[:, j]) for j, s in enumerate(self.smoothers)])

    def metrics(self) -> dict[str, object]:
        return {"smoothing_windows": [s.window for s in self.smoothers],
                "smoothing_orders": [s.order for s in self.smoothers]}


def training_states(
    trials_x: list[np.ndarray], scaling: Standardiser, smooth: bool
) -> tuple[list[np.ndarray], StateSmoothing]:
    """The standardised training trials (n_i, d) both reservoirs regress on, ``denoise``d when
    ``smooth``, and the smoothing of the longest trial (raw when not ``smooth``)."""
    trials_z = [scaling.forward(x) for x in trials_x]
    if not smooth:
        return trials_z, StateSmoothing.raw(trials_z[0].shape[1])
    trials_z, used = denoise(trials_z)
    return trials_z, StateSmoothing(tuple(used[longest(trials_z)]))


def stored_smoothing(arrays: dict[str, np.ndarray], d: int) -> StateSmoothing:
    """The smoothing of a model file; files from before the reservoirs smoothed hold none and
    were fitted on raw states."""
    if "smoothing" not in arrays:
        return StateSmoothing.raw(d)
    return StateSmoothing.from_array(expect_array(arrays, "smoothing", (d, 2)))
