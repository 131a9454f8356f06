"""Regression rows: the targets and the data the term library is evaluated on.

Continuous time: the noise level of each variable is estimated from the data
(``noise.noise_to_signal``). When noise puts under 0.5 % error on a 4th-order finite difference
(``derivatives.finite_difference_suffices``: noise-free or nearly so), the targets are those
derivatives, with a floor at their estimated truncation error; otherwise the weak (integral)
form is used (``weak_form``), which never differentiates the data, or, for records too short
for it, a smoothed derivative chosen per trial (``derivatives.choose_method``). Discrete time
(maps): targets x[k+1], library at x[k].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.symbolic.autocorrelation import operator_correlation_time
from dynid.symbolic.derivatives import (
    choose_method,
    derivative_correlation_time,
    differentiate,
    finite_difference_suffices,
    smooth,
)
from dynid.symbolic.derivatives.finite_difference import truncation_error
from dynid.symbolic.folds import VALIDATION_FRACTION
from dynid.symbolic.library import TermSet
from dynid.symbolic.noise import noise_to_signal
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.weak_form import integration_operator

# The Richardson estimate of a finite difference's truncation error is itself approximate; the
# floor under the selection criterion is this multiple of it, so that terms fitting the
# derivative's systematic error (not the dynamics) never pay off.
TRUNCATION_MARGIN = 2.0
# Below this many weak-form rows (test functions) in all, automatic mode differentiates instead:
# two held-out rows in each of the 5 folds (down to there the weak form still beat a smoothed
# derivative: benchmarks/README.md, "Symbolic design experiments").
MIN_WEAK_ROWS = 2 * round(1 / VALIDATION_FRACTION)


@dataclass
class RegressionRows:
    """Regression rows of all trials: targets (N, d), the data the library is evaluated on
    (states (n, d), inputs (n, m) or None), and how rows relate to those samples."""

    targets: np.ndarray
    states: np.ndarray
    inputs: np.ndarray | None
    rows_per_trial: list[int]
    weights: sparse.csr_matrix | None  # None: rows are samples; weak form: (N, n) integration operator
    formulation: str
    details: dict[str, Any]
    target_error: np.ndarray  # (d,) RMS systematic error of the targets (see selection.select)
    noise_time: float = 1.0  # autocorrelation time (rows) of the targets' noise (selection.select)

    def theta(
        self, termset: TermSet, columns: list[int] | None = None, constants: dict[str, float] | None = None
    ) -> np.ndarray:
        """The terms (all, or ``columns``) on these rows, (N, p), at ``constants`` if given."""
        values = termset.evaluate(self.states, self.inputs, constants, columns)
        return values if self.weights is None else self.weights @ values


def regression_rows(data: Dataset, params: SymbolicParams) -> RegressionRows:
    """The rows of ``data`` for ``params.derivative`` and ``params.discrete`` (module docstring);
    trials under 7 samples are skipped (DataError when all are)."""
    trials = data.trials
    if params.discrete:
        return _map_rows(data)
    short = [k for k, trial in enumerate(trials) if trial.n_samples < 7]
    if len(short) == len(trials):
        raise DataError(f"{data.source}: every trial has fewer than 7 samples; too short to differentiate")
    used = [trial for trial in trials if trial.n_samples >= 7]
    relative = np.max([noise_to_signal(trial.x, trial.t) for trial in used], axis=0)
    method = params.derivative
    if method == "auto":
        clean = all(finite_difference_suffices(trial.x, trial.t) for trial in used)
        method = "finite_difference" if clean else "weak"
    details = {"noise_to_signal": relative.tolist(), "trials_skipped": len(short)}
    if method == "weak":
        try:
            rows = _weak_rows(used, data, details)
        except ValueError as error:  # a trial shorter than one test function
            if params.derivative == "weak":
                raise DataError(f"{data.source}: {error}; the weak form needs longer trials") from None
            rows = None
        if rows is not None and (params.derivative == "weak" or len(rows.targets) >= MIN_WEAK_ROWS):
            return rows
        method = "auto"  # too short for the weak form: a smoothed derivative chosen per trial
    return _strong_rows(used, data, method, details)


def _map_rows(data: Dataset) -> RegressionRows:
    usable = [trial for trial in data.trials if trial.n_samples >= 2]
    states = np.vstack([trial.x[:-1] for trial in usable])
    inputs = None if not data.inputs else np.vstack([trial.u[:-1] for trial in usable])
    targets = np.vstack([trial.x[1:] for trial in usable])
    rows = [t.n_samples - 1 for t in usable]
    return RegressionRows(targets, states, inputs, rows, None, "map", {}, np.zeros(data.n_variables))


def _strong_rows(trials: list[Trial], data: Dataset, method: str, details: dict[str, Any]) -> RegressionRows:
    targets, states, inputs, used_methods, errors, times = [], [], [], [], [], []
    for trial in trials:
        name, opts = choose_method(trial.x, trial.t) if method == "auto" else (method, {})
        used_methods.append(name)
        times.append(derivative_correlation_time(trial.x, trial.t, name, opts))
        targets.append(differentiate(trial.x, trial.t, name, **opts))
        if name == "finite_difference":
            errors.append(truncation_error(trial.x, trial.t, targets[-1]))
        states.append(smooth(trial.x, trial.t, name, **opts))
        if data.inputs:
            inputs.append(trial.u)
    details = {**details, "derivative": sorted(set(used_methods))}
    return RegressionRows(
        np.vstack(targets),
        np.vstack(states),
        np.vstack(inputs) if data.inputs else None,
        [trial.n_samples for trial in trials],
        None,
        "strong",
        details,
        TRUNCATION_MARGIN * np.sqrt(np.mean(np.vstack(errors) ** 2, axis=0))
        if errors
        else np.zeros(data.n_variables),
        max(times),
    )


def _weak_rows(trials: list[Trial], data: Dataset, details: dict[str, Any]) -> RegressionRows:
    operators, slope_operators, targets, windows = [], [], [], []
    for trial in trials:
        phi, dphi = integration_operator(trial.t, trial.x)
        operators.append(phi)
        slope_operators.append(dphi)
        targets.append(-(dphi @ trial.x))
        windows.append(phi.shape[0])
    weights = sparse.block_diag(operators, format="csr")
    # The targets' own noise (slopes @ noise) sets the first-pass correlation time. The library
    # side's noise (weights @ noise through the model's gradient, tau ~2 for these windows) and
    # any lack of fit show up in the winner's residuals, whose correlation time the second pass
    # of choice._best_equation uses when it is longer. Starting from the longer weights time
    # instead left short records too few effective held-out rows and dropped true terms
    # (benchmarks/README.md, "Symbolic design experiments").
    slopes = sparse.block_diag(slope_operators, format="csr")
    noise_time = operator_correlation_time(slopes)
    return RegressionRows(
        np.vstack(targets),
        np.vstack([trial.x for trial in trials]),
        np.vstack([trial.u for trial in trials]) if data.inputs else None,
        windows,
        weights,
        "weak",
        {**details, "derivative": ["weak"], "test_functions": int(sum(windows))},
        np.zeros(data.n_variables),
        noise_time,
    )
