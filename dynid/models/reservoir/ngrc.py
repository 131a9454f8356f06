"""Next-generation reservoir computing (NG-RC; Gauthier, Bollt, Griffith & Barbosa 2021,
Nat. Commun. 12:5564): a ridge regression of the next increment on polynomial features of
delayed states.

With z the standardised state, the feature vector at sample t is the linear part
``[z_t, z_{t-s}, ..., z_{t-(k-1)s}]`` (k delays, skip s) followed by every unique quadratic
monomial of it (plus the read-out's unpenalised bias, the paper's constant), and the read-out
predicts ``z_{t+1} - z_t``. Forecasts run the map in closed loop from the last
``(k-1)s + 1`` history samples. Unless given, the delays k, the skip s and the ridge are chosen
together by closed-loop skill on held-out blocks of the training data, among the (k, s) whose
long free run keeps the data's state-space occupation and spectrum
(``readout.select_readout`` and its geometry gate: with 5 % noise, k = 3, s = 10 has the best
skill when each lag setting is fitted alone, and its free run is a cycle).

Why the skip is chosen: the paper's s = 1 suits its clean Lorenz samples 0.025 apart; with 5 %
observation noise at dt 0.01, z_t - z_{t-1} is mostly noise, the fitted map's free run left the
attractor (D_stsp 13 over 50,000 steps) while s = 5 kept it (0.19), and the held-out skill ranks
them the same way (164 against 119 valid steps).

Linearised noise training (``lmnt``; Wikner et al. 2024; the ``lmnt`` module): the read-out is
fitted as if every delayed state in its window carried independent noise of variance beta
(standardised units), to first order (``ngrc_feature_jacobian``: the monomials' Jacobian is
analytic). ``-p lmnt=none`` chooses beta jointly with the ridge by held-out skill. Not the
default (0): with 5 % noise (Lorenz, dev records 11-14) ``lmnt=none`` read a median D_stsp of
0.127 / D_H 0.053 against 0.118 / 0.062, choosing beta 1e-4 on two records and other lags with
it, one record better and one worse (benchmarks/README.md, round 11).

Observation noise (``denoise``, on by default; ``denoise`` module): the read-out is fitted on
states smoothed with Savitzky-Golay windows chosen for the noise level estimated from the data,
because noise in the regressors attenuates the fitted map (errors in variables); a forecast
smooths its history with the same windows before starting from its end (so it needs at least
the widest window of history). Clean records stay raw.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.metrics.dsr import leaves_box
from dynid.metrics.forecast import VPT_THRESHOLD
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.models.reservoir.denoise import stored_smoothing, training_states
from dynid.models.reservoir.lmnt import LMNT_GRID, NoisePenalty
from dynid.models.reservoir.readout import (
    ESCAPE_CHECK_STEPS,
    Design,
    Standardiser,
    design_rows,
    held_out_starts,
    longest,
    min_design_rows,
    row_count,
    select_readout,
    setting_metrics,
    valid_steps,
)

__all__ = ["NGRC", "NGRCParams", "ngrc_feature_jacobian", "ngrc_features", "ngrc_rollout"]

# Candidates for the delays k and skip s left unset, each scored by held-out closed-loop skill.
DELAYS = (2, 3)
SKIPS = (1, 5, 10)


@dataclass(frozen=True)
class NGRCParams(Hyperparameters):
    delays: int | None = param(
        None,
        f"k: number of delayed states in the features; none = choose from {DELAYS} by "
        "closed-loop skill on held-out blocks of the training data, among lags whose long "
        "free run keeps the data's geometry",
    )
    skip: int | None = param(
        None, f"s: samples between consecutive delays; none = choose from {SKIPS} the same way"
    )
    ridge: float | None = param(
        None,
        "ridge penalty on the mean squared one-step error of the standardised increment; "
        "none = choose by closed-loop skill on held-out blocks of the training data",
    )
    denoise: bool = param(
        True,
        "fit on (and forecast from) states smoothed by Savitzky-Golay with windows chosen for "
        "the noise level estimated from the data (clean data stay raw); false = raw states",
    )
    lmnt: float | None = param(
        0.0,
        "linearised noise training of the read-out (Wikner et al. 2024): the variance of the "
        "noise on every standardised delayed state it is trained to withstand, to first order; "
        f"0 = none; none = choose from {LMNT_GRID} with the ridge by closed-loop skill on "
        "held-out blocks",
    )

    def __post_init__(self) -> None:
        if self.delays is not None and self.delays < 1:
            raise ValueError(f"delays must be a positive integer or none, not {self.delays}")
        if self.skip is not None and self.skip < 1:
            raise ValueError(f"skip must be a positive integer or none, not {self.skip}")
        if self.ridge is not None and not self.ridge >= 0:
            raise ValueError(f"ridge must be zero, positive or none, not {self.ridge}")
        if self.lmnt is not None and not self.lmnt >= 0:
            raise ValueError(f"lmnt must be zero, positive or none, not {self.lmnt}")

    def lag_candidates(self) -> list[tuple[int, int]]:
        """Every (k, s) of the given values and the grids of those left unset."""
        return list(itertools.product(DELAYS if self.delays is None else (self.delays,),
                                      SKIPS if self.skip is None else (self.skip,)))


def ngrc_features(z: np.ndarray, rows: np.ndarray, delays: int, skip: int) -> np.ndarray:
    """Features (..., len(rows), k d + k d (k d + 1) / 2) at samples ``rows`` of z (..., n, d).

    Columns: z[t - j s] for j = 0..k-1 (d each), then the products of linear columns a <= b in
    ``np.triu_indices`` order. Every row needs t >= (k - 1) s.
    """
    linear = np.concatenate([z[..., rows - j * skip, :] for j in range(delays)], axis=-1)
    first, second = _monomial_pairs(linear.shape[-1])
    return np.concatenate([linear, linear[..., first] * linear[..., second]], axis=-1)


def ngrc_feature_jacobian(z: np.ndarray, rows: np.ndarray, delays: int, skip: int) -> np.ndarray:
    """d features / d linear (len(rows), f, k d): the Jacobian of ``ngrc_features`` at samples
    ``rows`` of z (n, d) with respect to its linear block [z_t, z_{t-s}, ...] (each delayed
    state a separate input, as noise on every sample makes it; ``lmnt`` module)."""
    linear = np.concatenate([z[rows - j * skip] for j in range(delays)], axis=-1)
    width = linear.shape[-1]
    first, second = _monomial_pairs(width)
    coordinates = np.arange(width)
    # d(l_a l_b)/d l_m = [a = m] l_b + [b = m] l_a
    quadratic = ((first[:, None] == coordinates)[None] * linear[:, second, None]
                 + (second[:, None] == coordinates)[None] * linear[:, first, None])
    identity = np.broadcast_to(np.eye(width), (len(rows), width, width))
    return np.concatenate([identity, quadratic], axis=1)


@functools.cache
def _monomial_pairs(width: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(width)`` (read-only), computed once per width: a closed-loop run asks
    for them at every step, and recomputing them took two thirds of the geometry gate's
    10,000-step runs (13 of 19.5 s of ``ngrc_features``, profiled on a 60-sample record)."""
    pairs = np.triu_indices(width)
    for index in pairs:
        index.flags.writeable = False
    return pairs


def ngrc_rollout(
    weights: np.ndarray, bias: np.ndarray, windows: np.ndarray, steps: int, delays: int,
    skip: int, box: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Closed-loop runs (..., steps, d) after ``windows`` (..., (k-1)s + 1, d), standardised.

    weights (..., f, d) and bias (..., 1, d) broadcast against the runs' leading axes, so one
    call runs several read-outs (candidate ridges) from several starts. With an escape ``box``
    the runs stop early once one has left it (``readout.FreeRun``): fewer than steps rows.
    """
    size = windows.shape[-2]
    z = np.empty((*windows.shape[:-2], size + steps, windows.shape[-1]))
    z[..., :size, :] = windows
    checked = size
    for t in range(size - 1, size - 1 + steps):
        features = ngrc_features(z, np.array([t]), delays, skip)  # (..., 1, f)
        z[..., t + 1 : t + 2, :] = z[..., t : t + 1, :] + features @ weights + bias
        if box is not None and t + 2 - checked >= ESCAPE_CHECK_STEPS:
            if leaves_box(z[..., checked : t + 2, :], box):
                return z[..., size : t + 2, :]
            checked = t + 2
    return z[..., size:, :]


class NGRC(Backend):
    """NG-RC with a ridge read-out on the increment.

    Fitted arrays (d variables, f features): ``mean``, ``scale`` (d,) the standardisation in
    data units; ``weights`` (f, d) and ``bias`` (d,) map features to the standardised increment.
    """

    name = "ngrc"
    summary = "next-generation reservoir: delayed states, their quadratic monomials, ridge"
    Params = NGRCParams
    capabilities = Capabilities(uniform_steps=True)
    # Files from before the fit denoised its states hold no smoothing: they load as raw.
    legacy_arrays = frozenset({"smoothing"})

    @property
    def history_length(self) -> int:
        """The delay window, widened to the smoothing's span: a forecast smooths the history
        before taking the window from its end."""
        delays, skip = self.lags
        span = self.smoothing_.span if hasattr(self, "smoothing_") else 1
        return (delays - 1) * skip + span

    @property
    def lags(self) -> tuple[int, int]:
        """(k, s): as the fit chose them, or as given before a fit."""
        params: NGRCParams = self.params  # type: ignore[assignment]
        if hasattr(self, "lags_"):
            return self.lags_
        if params.delays is None or params.skip is None:
            self._check_fitted()
        return params.delays, params.skip  # type: ignore[return-value]

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: NGRCParams = self.params  # type: ignore[assignment]
        scaling = Standardiser.of([trial.x for trial in data.trials])
        trials_z, smoothing = training_states([trial.x for trial in data.trials], scaling,
                                              params.denoise)
        candidates = params.lag_candidates()
        first = max((k - 1) * s for k, s in candidates)  # every candidate fits the same rows
        lengths = [len(z) for z in trials_z]
        rows = row_count(lengths, first)
        need = min_design_rows(len(candidates), params.ridge, params.lmnt)
        if rows < need:
            raise DataError(
                f"the ngrc's delays and skip start its features {first} samples into a trial, "
                f"which leaves the read-out n - {first + 1} training rows in a trial of n samples; "
                f"the data give {rows}, and the read-out needs at least {need}: give smaller "
                "-p delays and -p skip, or longer trials")
        row_trial, row_t = design_rows(lengths, first)
        increments = np.vstack([
            z[row_t[row_trial == i] + 1] - z[row_t[row_trial == i]]
            for i, z in enumerate(trials_z)
        ])

        def design(lags: tuple[int, int]) -> Design:
            delays, skip = lags
            window = (delays - 1) * skip + 1
            features = np.vstack([
                ngrc_features(z, row_t[row_trial == i], delays, skip)
                for i, z in enumerate(trials_z)
            ])

            def rollout_skill(
                weights: np.ndarray, bias: np.ndarray, held_out: np.ndarray
            ) -> np.ndarray:
                """Per read-out in weights (C, f, d), bias (C, d): the mean valid steps (C,) of
                free runs from the ``held_out_starts`` of ``held_out``."""
                starts, truth = held_out_starts(held_out, row_trial, row_t, trials_z)
                horizon = truth.shape[1]  # >= 1: every design row has a next sample
                windows = np.stack([trials_z[row_trial[r]][row_t[r] + 1 - window : row_t[r] + 1]
                                    for r in starts])
                windows = np.broadcast_to(windows, (len(weights), *windows.shape))
                runs = ngrc_rollout(weights[:, None], bias[:, None, None], windows, horizon,
                                    delays, skip)  # (C, starts, horizon, d)
                return valid_steps(runs, truth, VPT_THRESHOLD).mean(axis=-1)

            def free_run(weights: np.ndarray, bias: np.ndarray, steps: int,
                         box: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
                """(steps, d): the closed loop continuing the longest trial."""
                return ngrc_rollout(weights, bias, trials_z[reference][-window:], steps,
                                    delays, skip, box)

            noise = None
            if params.lmnt != 0:
                jacobians = np.vstack([
                    ngrc_feature_jacobian(z, row_t[row_trial == i], delays, skip)
                    for i, z in enumerate(trials_z)
                ])

                def noise(rows: np.ndarray) -> NoisePenalty:
                    return NoisePenalty.of_jacobians(jacobians[rows], current=self.n_variables)

            return Design(features, increments, rollout_skill, free_run, noise)

        reference = longest(trials_z)
        with np.errstate(all="ignore"):  # diverging candidate runs are scored, not reported
            lags, chosen, readout, scores = select_readout(
                candidates, design, params.ridge, trials_z[reference], lmnt=params.lmnt)
        self.lags_, self.smoothing_ = lags, smoothing
        self.mean_, self.scale_ = scaling.mean, scaling.scale
        self.weights_, self.bias_ = readout.weights, readout.bias
        self.metrics_ = {
            "delays": lags[0],
            "skip": lags[1],
            **smoothing.metrics(),
            **setting_metrics(scores, lambda lags: f"delays={lags[0]},skip={lags[1]}"),
            **readout.metrics(chosen.features, chosen.targets, scaling.scale),
            "n_features": int(chosen.features.shape[1]),
        }

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        delays, skip = self.lags
        scaling = Standardiser(self.mean_, self.scale_)
        z = self.smoothing_.apply(scaling.forward(history.x[-self.history_length :]))
        run = ngrc_rollout(self.weights_, self.bias_, z[-((delays - 1) * skip + 1) :], steps,
                           delays, skip)
        return scaling.inverse(run)

    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        return {"mean": self.mean_, "scale": self.scale_, "weights": self.weights_,
                "bias": self.bias_, "lags": np.array(self.lags_),
                "smoothing": self.smoothing_.array()}

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d = self.n_variables
        params: NGRCParams = self.params  # type: ignore[assignment]
        if "lags" not in arrays and params.delays is not None and params.skip is not None:
            delays, skip = params.delays, params.skip  # a file from before the lags were chosen
        else:
            delays, skip = (int(v) for v in expect_array(arrays, "lags", (2,)))
        self.lags_ = (delays, skip)
        self.smoothing_ = stored_smoothing(arrays, d)
        linear = delays * d
        self.mean_ = expect_array(arrays, "mean", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        self.weights_ = expect_array(
            arrays, "weights", (linear + linear * (linear + 1) // 2, d)
        ).astype(float)
        self.bias_ = expect_array(arrays, "bias", (d,)).astype(float)
