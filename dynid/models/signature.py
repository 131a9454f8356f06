"""Log-signature features of sliding path windows with a ridge read-out of the next increment,
for irregularly sampled records (Lyons' rough-path view of a time series: Morrill, Fermanian,
Kidger & Lyons 2021, "A generalised signature method for multivariate time series").

With z the standardised state and tau = t / dt (dt: the median sampling step, so tau counts
typical steps), the window at sample t is the polygon through the last w points (tau, z) - time
is a channel, so the features see how far apart the samples were. Its features are
phi = [z_t, log-signature of the window to ``depth``] (``features.logsignature``), and with
h = tau_(t+1) - tau_t the gap to the next sample, the read-out predicts the mean rate

    (z_(t+1) - z_t) / h  =  [phi, h, h phi] @ weights + bias,

the ``h phi`` terms carrying the step-size dependence of a discrete step (exp(A h) - 1) / h to
first order. Forecasts iterate this map from the last w history samples at the model's median
step dt. Unless given, the ridge is chosen by closed-loop skill on held-out blocks of the
training data (``reservoir.readout.fit_ridge_readout``); the features are scaled to unit
standard deviation first, so one penalty suits levels of different orders of magnitude.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.metrics.forecast import VPT_THRESHOLD
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.models.features.logsignature import MAX_DEPTH, logsignature_words, lyndon_words
from dynid.models.reservoir.readout import (
    Standardiser,
    fit_ridge_readout,
    held_out_starts,
    valid_steps,
)

__all__ = ["Signature", "SignatureParams", "signature_design", "signature_rollout"]


@dataclass(frozen=True)
class SignatureParams(Hyperparameters):
    window: int = param(4, "w: samples in each path window (w - 1 segments)")
    depth: int = param(2, "log-signature depth: 1 (increments), 2 (adds signed areas) or 3")
    basepoint: bool = param(
        True, "start each window's path at the origin (the data mean), so the log-signature "
              "sees where the window is, not only its shape: products of the state with the "
              "window's increments (nonlinear dynamics need them)")
    ridge: float | None = param(
        None,
        "ridge penalty on the mean squared error of the standardised rate, on unit-variance "
        "features; none = choose by closed-loop skill on held-out blocks of the training data",
    )

    def __post_init__(self) -> None:
        if self.window < 2:
            raise ValueError(f"window must be at least 2 samples, not {self.window}")
        if not 1 <= self.depth <= MAX_DEPTH:
            raise ValueError(f"depth must be 1, 2 or 3, not {self.depth}")
        if self.ridge is not None and not self.ridge >= 0:
            raise ValueError(f"ridge must be zero, positive or none, not {self.ridge}")


def n_design_columns(n_variables: int, depth: int) -> int:
    """Columns of ``signature_design`` for d variables: 2 len(phi) + 1."""
    phi = n_variables + len(lyndon_words(n_variables + 1, depth))
    return 2 * phi + 1


def signature_design(
    z: np.ndarray, tau: np.ndarray, gap: np.ndarray, params: SignatureParams
) -> np.ndarray:
    """Design rows (..., f) = [phi, h, h phi] of windows z (..., w, d) at times tau (..., w)
    (median steps) with gaps h (...) to the next sample; phi = [z at the window's end,
    log-signature of the polygon through (tau, z)], that polygon starting at (tau_0, 0) with
    ``params.basepoint``."""
    path = np.concatenate([tau[..., None], z], axis=-1)
    if params.basepoint:
        origin = np.zeros_like(path[..., :1, :])
        origin[..., 0, 0] = tau[..., 0]
        path = np.concatenate([origin, path], axis=-2)
    phi = np.concatenate([z[..., -1, :], logsignature_words(path, params.depth)], axis=-1)
    h = gap[..., None]
    return np.concatenate([phi, h, h * phi], axis=-1)


def signature_rollout(
    weights: np.ndarray,
    bias: np.ndarray,
    feature_scale: np.ndarray,
    window: np.ndarray,
    tau: np.ndarray,
    params: SignatureParams,
) -> np.ndarray:
    """Closed-loop runs (..., steps, d) after ``window`` (..., w, d), standardised.

    tau (..., w + steps): the times of the window's samples and of the forecast's, in median
    steps; weights (..., f, d) and bias (..., 1, d) act on design columns divided by
    feature_scale (f,), broadcasting against the runs' leading axes, so one call runs several
    read-outs (candidate ridges) from several starts.
    """
    w = window.shape[-2]
    steps = tau.shape[-1] - w
    runs = np.broadcast_shapes(weights.shape[:-2], bias.shape[:-2], window.shape[:-2],
                               tau.shape[:-1])
    z = np.empty((*runs, w + steps, window.shape[-1]))
    z[..., :w, :] = window
    for k in range(steps):
        times = tau[..., k : k + w]
        gap = tau[..., k + w] - tau[..., k + w - 1]
        design = signature_design(z[..., k : k + w, :], np.broadcast_to(times, z.shape[:-2] + (w,)),
                                  np.broadcast_to(gap, z.shape[:-2]), params) / feature_scale
        rate = (design[..., None, :] @ weights)[..., 0, :] + bias[..., 0, :]
        z[..., k + w, :] = z[..., k + w - 1, :] + gap[..., None] * rate
    return z[..., w:, :]


# Weight of the tie-break in ``closed_loop_skill``: below the 1 / (N_FOLDS * SKILL_STARTS) step
# that separates two different mean valid-step counts, so it only orders ties.
TIE_BREAK = 0.01


def closed_loop_skill(runs: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Mean valid steps (...,) of runs (..., starts, H, d) against truth (starts, H, d), both
    standardised, plus ``TIE_BREAK`` * exp(-RMS error over the horizon / VPT threshold).

    Why the tie-break: on smooth or clean data every small ridge stays valid for the whole
    horizon, and the read-out's rule (ties to the larger ridge) then takes the most biased
    of them; the error within the horizon still tells them apart.
    """
    with np.errstate(all="ignore"):
        error = np.sqrt(np.mean((runs - truth) ** 2, axis=(-3, -2, -1)))
    closeness = np.where(np.isfinite(error), np.exp(-error / VPT_THRESHOLD), 0.0)
    return valid_steps(runs, truth, VPT_THRESHOLD).mean(axis=-1) + TIE_BREAK * closeness


class Signature(Backend):
    """Log-signature features of path windows, ridge read-out of the next rate.

    Fitted arrays (d variables, f design columns): ``mean``, ``scale`` (d,) the standardisation
    in data units; ``feature_scale`` (f,) the design columns' standard deviations;
    ``weights`` (f, d) and ``bias`` (d,) map scaled design rows to the standardised rate per
    median step.
    """

    name = "signature"
    summary = "log-signature (time as a channel) of sliding windows, ridge; irregular sampling"
    Params = SignatureParams
    capabilities = Capabilities(uniform_steps=False)

    @property
    def history_length(self) -> int:
        return self.params.window  # type: ignore[attr-defined]

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: SignatureParams = self.params  # type: ignore[assignment]
        w = params.window
        scaling = Standardiser.of([trial.x for trial in data.trials])
        trials_z = [scaling.forward(trial.x) for trial in data.trials]
        trials_tau = [trial.t / self.dt_ for trial in data.trials]
        where = [(i, t) for i, z in enumerate(trials_z) for t in range(w - 1, len(z) - 1)]
        if len(where) < 2:
            raise DataError(f"the signature model needs trials longer than window + 1 = {w + 1} samples")
        row_trial, row_t = np.array(where).T
        designs, rates = [], []
        for i, (z, tau) in enumerate(zip(trials_z, trials_tau)):
            rows = row_t[row_trial == i]
            if rows.size == 0:
                continue
            windows = np.stack([z[r + 1 - w : r + 1] for r in rows])
            times = np.stack([tau[r + 1 - w : r + 1] for r in rows])
            gaps = tau[rows + 1] - tau[rows]
            designs.append(signature_design(windows, times, gaps, params))
            rates.append((z[rows + 1] - z[rows]) / gaps[:, None])
        design, rate = np.vstack(designs), np.vstack(rates)
        spread = design.std(axis=0)
        feature_scale = np.where(spread > 0, spread, 1.0)
        features = design / feature_scale

        def rollout_skill(weights: np.ndarray, bias: np.ndarray, held_out: np.ndarray) -> np.ndarray:
            """Per read-out in weights (C, f, d), bias (C, d): the mean valid steps (C,) of free
            runs from the ``held_out_starts`` of ``held_out``, on the data's own times."""
            starts, truth = held_out_starts(held_out, row_trial, row_t, trials_z)
            horizon = truth.shape[1]
            windows = np.stack([trials_z[row_trial[r]][row_t[r] + 1 - w : row_t[r] + 1] for r in starts])
            times = np.stack([trials_tau[row_trial[r]][row_t[r] + 1 - w : row_t[r] + 1 + horizon]
                              for r in starts])
            runs = signature_rollout(weights[:, None], bias[:, None, None], feature_scale,
                                     windows, times, params)  # (C, starts, horizon, d)
            return closed_loop_skill(runs, truth)

        with np.errstate(all="ignore"):  # diverging candidate runs are scored, not reported
            readout = fit_ridge_readout(features, rate, params.ridge, rollout_skill)
        self.mean_, self.scale_ = scaling.mean, scaling.scale
        self.feature_scale_ = feature_scale
        self.weights_, self.bias_ = readout.weights, readout.bias
        self.metrics_ = {
            # one-step errors of the rate, data units per median step
            **readout.metrics(features, rate, scaling.scale),
            "n_features": int(features.shape[1]),
        }

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> np.ndarray:
        # Past the data the samples come at the model's median step, as forecast times do.
        return self.simulate_at(history, history.t[-1] + self.dt_ * np.arange(1, steps + 1))

    def simulate_at(self, history: Trial, times: np.ndarray) -> np.ndarray:
        """The free run (len(times), d) after ``history`` at the increasing future ``times``
        (data units, after history's last time): irregular forecast times are the model's to
        take, as its features see every gap."""
        self._check_history(history, len(times), None)
        params: SignatureParams = self.params  # type: ignore[assignment]
        w = params.window
        scaling = Standardiser(self.mean_, self.scale_)
        tau = (np.concatenate([history.t[-w:], times]) - history.t[-1]) / self.dt_
        run = signature_rollout(self.weights_, self.bias_[None], self.feature_scale_,
                                scaling.forward(history.x[-w:]), tau, params)
        return scaling.inverse(run)

    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        return {"mean": self.mean_, "scale": self.scale_, "feature_scale": self.feature_scale_,
                "weights": self.weights_, "bias": self.bias_}

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d = self.n_variables
        f = n_design_columns(d, self.params.depth)  # type: ignore[attr-defined]
        self.mean_ = expect_array(arrays, "mean", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        self.feature_scale_ = expect_array(arrays, "feature_scale", (f,)).astype(float)
        self.weights_ = expect_array(arrays, "weights", (f, d)).astype(float)
        self.bias_ = expect_array(arrays, "bias", (d,)).astype(float)
