"""What the causal methods share, in one place, so that no method imports another.

- Data checks: values every lag-based method needs (``check_values``), enough samples for the
  lags (``check_series``, ``check_lagged_regression``), columns that vary over the rows used
  (``check_columns_after_lags``). One message per problem, naming the file and the column.
- Redundant columns (``redundant_columns``): exact or near linear copies of other columns at the
  same time step, which regression-based tests cannot separate from what they copy.
- Self-predicted columns (``self_predicted_columns``): columns that their own last few values
  predict exactly (a clean sinusoid), whose lags beyond that order are copies of the first ones.
- Penalised (sparse) methods: the check of a given penalty ``lam``, how the penalty was set
  (``lambda_rule``) and the 1-SE rule that chooses it from validation errors.
- Permutation and surrogate tests: how many null samples one link needs to pass the
  multiple-testing correction.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.linear.design import lagged_design

# A permutation test never runs fewer null samples than this by default.
_MIN_PERMUTATIONS = 99
# A column whose variance the earlier columns explain (same time step) to within this fraction is
# redundant: R^2 >= 0.999, a variance inflation factor >= 1000 (|correlation| >= 0.9995 for a
# copy of one column), where a test of it given the others has almost no power and, for an exact
# copy, is undefined.
_REDUNDANT_UNEXPLAINED = 1e-3
# A kept column counts as part of what a redundant one copies above this share of the largest
# standardised coefficient.
_COPY_SHARE = 0.05
# A column whose residual sum of squares is below this fraction of its variance is fitted exactly:
# rounding of a noise-free recurrence leaves ~1e-30, measurement noise of one part in 1e10 already
# leaves 1e-20.
EXACT_FIT = 1e-20


# -- data checks -----------------------------------------------------------------------------------
def usable_rows(data: Dataset, start: int) -> int:
    """Rows a lagged method gets from targets at samples ``start..n-1`` of every trial."""
    return sum(max(trial.n_samples - start, 0) for trial in data.trials)


def check_values(data: Dataset, method: str) -> None:
    """DataError for missing/infinite values, a constant column, or irregular sampling.

    ``method`` names the method in the message (e.g. "Granger", "PCMCI").
    """
    x, _ = data.stacked()
    for j in np.flatnonzero(~np.isfinite(x).all(axis=0)):
        raise DataError(
            f"{data.source}: column '{data.variables[j]}' has missing or infinite values; "
            "choose a --nan policy that removes them"
        )
    for j in np.flatnonzero(np.all(x == x[0], axis=0)):
        raise DataError(
            f"{data.source}: column '{data.variables[j]}' is constant; drop it, "
            "it cannot cause or be caused"
        )
    if data.dt is None:
        raise DataError(
            f"{data.source}: {method} lags count samples, so the trials need one common, uniform "
            "time step; interpolate onto a uniform grid first with --resample DT"
        )


def check_series(data: Dataset, method: str, *, enough: bool, requirement: str) -> None:
    """DataError unless ``data`` suits a lag-based method: ``check_values``, then ``enough``
    samples, ``requirement`` saying how many are needed and what to change."""
    check_values(data, method)
    if not enough:
        raise DataError(f"{data.source}: {method} needs at least {requirement}")


def check_lagged_regression(data: Dataset, lags: int, min_rows: int, need: str) -> None:
    """DataError for data no lagged regression can use (the Granger-type methods).

    Fewer than ``min_rows`` regression rows (a trial of n samples gives ``n - lags``); ``need``
    names what needs the rows, for the message, e.g. "max_lag=5 with 4 variables". Then
    ``check_values`` (missing values, a constant column, irregular sampling).
    """
    n_rows = usable_rows(data, lags)
    if n_rows < min_rows:
        if data.n_trials == 1:
            raise DataError(
                f"{data.source}: {need} needs at least {min_rows + lags} samples, "
                f"got {data.n_samples}; use a smaller --max-lag"
            )
        raise DataError(
            f"{data.source}: {need} needs at least {min_rows} regression rows (a trial of n "
            f"samples gives n - {lags}), the {data.n_trials} trials give {n_rows}; use a smaller "
            "--max-lag or longer trials"
        )
    check_values(data, "Granger")


def check_columns_after_lags(data: Dataset, columns: np.ndarray, set_aside: int) -> None:
    """DataError for a variable constant over the rows used (it varied only in the first
    ``set_aside`` samples of each trial, which lags take). ``columns`` (rows, k * d): lagged
    copies of the variables, column ``c`` holding variable ``c % d``."""
    d = data.n_variables
    for col in np.flatnonzero(np.all(columns == columns[0], axis=0)):
        raise DataError(
            f"{data.source}: column '{data.variables[col % d]}' is constant once the first "
            f"{set_aside} samples of each trial are set aside for lags; drop it"
        )


@dataclass(frozen=True)
class Redundancy:
    """Column ``column`` is (nearly) a linear combination of ``copies`` (kept columns, earlier in
    the file) at the same time step; ``r_squared`` of that fit. Indices into the variables."""

    column: int
    copies: tuple[int, ...]
    r_squared: float

    def message(self, data: Dataset, consequence: str) -> str:
        """One warning line naming the columns; ``consequence`` says what the method did."""
        copies = ", ".join(f"'{data.variables[k]}'" for k in self.copies)
        kind = "an exact" if self.r_squared > 1.0 - 1e-12 else "a near"
        return (
            f"{data.source}: column '{data.variables[self.column]}' is {kind} linear copy of "
            f"{copies} at the same time step (R^2 = {self.r_squared:.6f}); {consequence}"
        )


def redundant_columns(x: np.ndarray) -> list[Redundancy]:
    """The columns of ``x`` (rows, d), no column constant, that earlier columns explain with
    R^2 >= 0.999 at the same row, scanning left to right: of two copies the later one is the
    redundant one, and each column is fitted on the earlier columns not found redundant.

    Works on the correlation matrix (d, d), so its cost does not grow with the rows.
    """
    z = x - x.mean(axis=0)
    z /= np.linalg.norm(z, axis=0)
    corr = z.T @ z
    kept: list[int] = []
    found: list[Redundancy] = []
    for j in range(corr.shape[0]):
        if kept:
            coef = np.linalg.lstsq(corr[np.ix_(kept, kept)], corr[kept, j], rcond=None)[0]
            r_squared = float(min(coef @ corr[kept, j], 1.0))
            if 1.0 - r_squared <= _REDUNDANT_UNEXPLAINED:
                share = np.abs(coef) / np.abs(coef).max()
                copies = tuple(kept[k] for k in np.flatnonzero(share > _COPY_SHARE))
                found.append(Redundancy(j, copies, r_squared))
                continue
        kept.append(j)
    return found


@dataclass(frozen=True)
class SelfPrediction:
    """Column ``column`` is exactly a linear function (with intercept) of its own previous
    ``order`` values, ``order`` in 1..max_lag, e.g. 2 for a sampled sinusoid
    (``x_t = 2 cos(w dt) x_{t-1} - x_{t-2}``). Its past holds all there is to predict it, so no
    link into it can be tested, and its lags beyond ``order`` are linear combinations of the
    first ``order`` lags, so they cannot be separated from them either."""

    column: int
    order: int

    def message(self, data: Dataset) -> str:
        """One warning line naming the column and the links that cannot be tested."""
        values = "value" if self.order == 1 else f"{self.order} values"
        return (
            f"{data.source}: column '{data.variables[self.column]}' is exactly predicted by its "
            f"own last {values} (a noise-free recurrence, e.g. a clean sinusoid); no link into "
            f"it can be tested, nor from its lags beyond {self.order} (combinations of lags "
            f"1..{self.order}): those links are reported with p = 1, strength 0"
        )


def self_predicted_columns(
    data: Dataset, max_lag: int, exact_fit: float = EXACT_FIT
) -> list[SelfPrediction]:
    """The variables that their own lags 1..order (``order <= max_lag``, the smallest that fits)
    predict with an intercept to within ``exact_fit`` of their variance, on the rows a lagged
    method with ``max_lag`` uses (each trial's samples ``max_lag..n-1``). A method whose own
    test takes looser fits for exact passes its bound (ParCorr: 1e-12, which a sinusoid written
    with 6 significant digits reaches), so that the two agree."""
    found: list[SelfPrediction] = []
    for j in range(data.n_variables):
        own = lagged_design([trial.x[:, [j]] for trial in data.trials], max_lag, trend=False)
        target = own.targets[:, 0] - own.targets[:, 0].mean()
        # Lags 1..order are the leading columns, so one QR gives every order's fit.
        q = np.linalg.qr(own.regressors - own.regressors.mean(axis=0))[0]
        for order in range(1, max_lag + 1):
            residual = target - q[:, :order] @ (q[:, :order].T @ target)
            if residual @ residual <= exact_fit * (target @ target):
                found.append(SelfPrediction(j, order))
                break
    return found


def not_separable(found: list[SelfPrediction], d: int, max_lag: int) -> np.ndarray:
    """(d, d, max_lag + 1) [source][target][lag]: the cross-links (source != target) that the
    self-predicted columns ``found`` leave untestable: every link into one, and every link from
    one at lag 0 or beyond its ``order`` (its value then is a combination of its lags 1..order,
    which a test of another link may hold)."""
    out = np.zeros((d, d, max_lag + 1), dtype=bool)
    for item in found:
        out[:, item.column, :] = True
        out[item.column, :, 0] = True
        out[item.column, :, item.order + 1:] = True
    out[np.arange(d), np.arange(d), :] = False
    return out


def report_self_predicted(data: Dataset, found: list[SelfPrediction]) -> dict[str, list]:
    """One Python warning per self-predicted column in ``found``; returns what a method's
    ``extra`` says of them: ``warnings`` (those lines) and ``self_predicted`` (``{"column",
    "order"}`` each)."""
    notes = [item.message(data) for item in found]
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return {
        "warnings": notes,
        "self_predicted": [
            {"column": data.variables[item.column], "order": item.order} for item in found
        ],
    }


# -- penalised methods -----------------------------------------------------------------------------
def check_lambda(lam: float | None) -> None:
    """ValueError unless ``lam`` is None or a finite number > 0 (for Params.__post_init__)."""
    if lam is not None and not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be a number > 0 (or none, to choose it), got {lam!r}")


def lambda_rule(lam: float | None, chosen_by: str) -> str:
    """How the penalty was set, for ``extra["lambda_rule"]``: "given", or the rule that chose
    it (``chosen_by``)."""
    return "given" if lam is not None else chosen_by


def mean_and_standard_error(squared: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean of squared validation errors over the rows (``axis``) and its standard error, the
    spread of the squared errors over sqrt(rows): rows count as independent (they are for
    white innovations)."""
    return squared.mean(axis=axis), squared.std(axis=axis) / np.sqrt(squared.shape[axis])


def one_standard_error(
    error: np.ndarray, se: np.ndarray, lambdas: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The 1-SE rule (Hastie, Tibshirani & Friedman, ESL 7.10) per target, favouring sparsity.

    error, se: (K, d) mean validation error of K path points and its standard error; lambdas:
    (K,) or (K, d) their penalties, distinct along the path. A point is within when its error
    is at most the smallest error plus that minimum's standard error. Returns the index (d,) of
    the largest penalty within, and the within flags (K, d).
    """
    targets = np.arange(error.shape[1])
    best = np.argmin(error, axis=0)
    within = error <= (error[best, targets] + se[best, targets])[None, :]
    penalties = np.broadcast_to(np.asarray(lambdas, dtype=float).reshape(len(error), -1),
                                error.shape)
    return np.argmax(np.where(within, penalties, -np.inf), axis=0), within


# -- permutation and surrogate tests ---------------------------------------------------------------
def default_permutations(n_tests: int, alpha: float, correction: str) -> int:
    """The fewest permutations at which one link among ``n_tests`` can pass ``correction``.

    The floor ``1 / (n + 1)`` times the family size (1 without correction) must reach ``alpha``.
    """
    family = 1 if correction == "none" else n_tests
    return max(_MIN_PERMUTATIONS, math.ceil(family / alpha))


def lone_link_can_pass(n_permutations: int, n_tests: int, alpha: float, correction: str) -> bool:
    """Whether one link with the smallest possible p-value survives ``correction`` at ``alpha``.

    False means too few permutations: only BH with many equally strong links can still reject.
    """
    family = 1 if correction == "none" else n_tests
    return family / (n_permutations + 1) <= alpha


def check_whole(name: str, value: Any, least: int) -> None:
    """ValueError unless ``value`` is a whole number >= ``least`` (for ``__post_init__``)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")
