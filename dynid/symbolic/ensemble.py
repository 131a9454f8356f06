"""Uncertainty of a sparse fit by ensembles (E-SINDy, Fasel, Kutz, Brunton & Brunton 2022).

`bagging` refits on bootstrap resamples of the rows: it runs a caller's fit — typically the
whole model selection — on every resample and summarises how often each term is kept and how
its coefficient varies. With
`dynid.symbolic.selection.select`, score each bag on its out-of-bag rows::

    bagging(theta, y, lambda t, y, t_oob, y_oob:
            select(t, y, theta_val=t_oob, y_val=y_oob).best.coef, out_of_bag=True, rng=0)

Scored on in-bag rows instead, duplicated rows count as independent evidence, and spurious terms
are kept far more often (measured: benchmarks/README.md, "Symbolic design experiments").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dynid.errors import UsageError
from dynid.symbolic.solvers import RegressionProblem, as_regression


@dataclass(frozen=True, eq=False)
class EnsembleResult:
    """Summary of an ensemble of sparse fits of one equation, p library terms.

    ``inclusion_probability`` (p,): fraction of the models (that could use the term) with a
    nonzero coefficient. ``coef_median``, ``coef_low``, ``coef_high`` (p,): median and
    ``interval`` percentiles of the coefficient over those models, a model that dropped the
    term counting as 0 (the selection is part of the estimator, so its uncertainty is too); all
    three are 0 for a term no model kept. Units: those of the coefficients ``fit`` returns.
    ``coefs`` (n_models, p): every model's coefficients; ``block``: rows per bootstrap block.
    """

    inclusion_probability: np.ndarray
    coef_median: np.ndarray
    coef_low: np.ndarray
    coef_high: np.ndarray
    n_models: int
    coefs: np.ndarray
    block: int | None = None
    interval: tuple[float, float] = (2.5, 97.5)


def bagging(
    theta: np.ndarray,
    y: np.ndarray,
    fit: Callable[..., np.ndarray],
    *,
    n_models: int = 50,
    block: int | None = None,
    rng: np.random.Generator | int | None,
    out_of_bag: bool = False,
    interval: tuple[float, float] = (2.5, 97.5),
) -> EnsembleResult:
    """Bootstrap ensemble: run ``fit`` on ``n_models`` moving-block resamples of the rows.

    ``theta`` (n, p), ``y`` (n,); ``fit(theta_bag, y_bag)`` returns coef (p,). Rows are
    autocorrelated in time, so whole blocks of ``block`` consecutive rows are drawn with
    replacement (moving-block bootstrap, Künsch 1989) until n rows are collected; the default
    block length is `default_block_length`. ``rng`` is a Generator or a seed.

    ``out_of_bag=True`` calls ``fit(theta_bag, y_bag, theta_oob, y_oob)`` instead, with the rows
    no block drew (about 1/e of them) as held-out rows — the natural validation set of a bag:
    scoring a selection on in-bag rows counts duplicated rows as independent evidence, and
    splitting the bag itself would validate on copies of training rows.
    """
    theta, y = _check(theta, y, n_models)
    n = y.size
    block = default_block_length(theta, y) if block is None else int(block)
    if not 1 <= block <= n:
        raise UsageError(f"bootstrap block length {block}: must be between 1 and {n}")
    rng = np.random.default_rng(rng)
    coefs = np.empty((n_models, theta.shape[1]))
    for model in range(n_models):
        rows = moving_block_indices(n, block, rng)
        held_out = []
        if out_of_bag:
            unused = np.ones(n, dtype=bool)
            unused[rows] = False
            if not unused.any():  # only when one block is the whole series
                raise UsageError(f"bootstrap blocks of {block} rows leave no row out of the bag")
            held_out = [theta[unused], y[unused]]
        coefs[model] = _run(fit, theta[rows], y[rows], *held_out)
    return _summarise(coefs, interval, block)


def pivot_interval(estimate: np.ndarray, coefs: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Central ``level`` intervals (p, 2) around the reported ``estimate`` (p,) from an ensemble's
    coefficients ``coefs`` (n_models, p; NaN: a term a model was not offered):
    [estimate - (q_high - m), estimate + (m - q_low)], with q the ensemble's percentiles and m
    its median (the basic, or pivot, bootstrap of Davison & Hinkley 1997, with the median as the
    bootstrap's centre).

    Why not the ensemble's own percentiles: the reported coefficient comes from another
    estimator than the bags' (all rows rather than ~63% distinct ones, constants refined, or
    multiple shooting), so the bags' distribution sits off the estimate by that estimator's
    offset, and on precise data (noise-free Lorenz) its percentiles exclude the estimate
    altogether. What transfers from the bags to the estimate is the spread and shape of the
    deviations around their centre: theta* - m stands for theta_hat - theta (the pivot), which
    the interval inverts, so a right-skewed ensemble gives a longer left arm. Centring on the
    median rather than on the estimate keeps the estimate inside the interval always (its
    percentiles bracket the median). A term no model was offered gets [estimate, estimate].
    """
    estimate = np.asarray(estimate, dtype=float)
    if estimate.size == 0:  # an equation that kept no term (numpy's percentiles of none are empty)
        return np.zeros((0, 2))
    tail = 50.0 * (1.0 - level)
    offered = ~np.isnan(coefs)
    filled = np.where(offered.any(axis=0), coefs, 0.0)
    low, median, high = np.nanpercentile(filled, [tail, 50.0, 100.0 - tail], axis=0)
    return np.column_stack([estimate - (high - median), estimate + (median - low)])


def default_block_length(theta: np.ndarray, y: np.ndarray) -> int:
    """Rows per bootstrap block for theta (n, p), y (n,): max(n^(1/3), tau), at most n // 2.

    n^(1/3) is the asymptotically optimal growth of the block length (Hall, Horowitz & Jing
    1995); tau, the lag at which the autocorrelation of the full least-squares residual first
    drops below 1/e, makes a block span the noise's correlation time (smoothed derivatives and
    weak-form windows correlate neighbouring rows), so a resample keeps that dependence.
    """
    n = y.size
    problem = RegressionProblem.from_data(theta, y)
    residual = y - theta @ problem.to_coef(problem.fit(np.ones(problem.p, dtype=bool)))
    return int(min(max(round(n ** (1 / 3)), _efolding_lag(residual), 1), max(n // 2, 1)))


def _efolding_lag(x: np.ndarray) -> int:
    """First lag at which the autocorrelation of x (n,) falls below 1/e (FFT, O(n log n))."""
    x = x - x.mean()
    n = x.size
    spectrum = np.fft.rfft(x, 2 * n)  # zero-padded: linear, not circular, correlation
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    if acf[0] <= 0:
        return 1
    below = np.flatnonzero(acf / acf[0] < np.exp(-1))
    return int(below[0]) if below.size else n


def moving_block_indices(n: int, block: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices (n,) of one moving-block bootstrap resample of n rows in blocks of ``block``."""
    starts = rng.integers(0, n - block + 1, size=-(-n // block))
    return (starts[:, None] + np.arange(block)).ravel()[:n]


def _check(theta: np.ndarray, y: np.ndarray, n_models: int) -> tuple[np.ndarray, np.ndarray]:
    if n_models < 1:
        raise UsageError(f"ensemble of {n_models} models: need at least 1")
    return as_regression(theta, y)


def _run(fit: Callable[..., np.ndarray], theta: np.ndarray, *data: np.ndarray) -> np.ndarray:
    coef = np.asarray(fit(theta, *data), dtype=float)
    if coef.shape != (theta.shape[1],):
        raise ValueError(
            f"fit returned coefficients of shape {coef.shape}, not ({theta.shape[1]},)"
        )
    return coef


def _summarise(
    coefs: np.ndarray, interval: tuple[float, float], block: int | None
) -> EnsembleResult:
    """Statistics over models of coefs (n_models, p); NaN marks a term a model was not offered."""
    offered = ~np.isnan(coefs)
    counts = offered.sum(axis=0)
    kept = (coefs != 0) & offered
    inclusion = np.divide(kept.sum(axis=0), counts, out=np.zeros(coefs.shape[1]), where=counts > 0)
    # A term never offered has no statistics: report 0 like a term never kept.
    filled = np.where(offered.any(axis=0), coefs, 0.0)
    low, median, high = np.nanpercentile(filled, [interval[0], 50.0, interval[1]], axis=0)
    return EnsembleResult(
        inclusion_probability=inclusion,
        coef_median=median,
        coef_low=low,
        coef_high=high,
        n_models=coefs.shape[0],
        coefs=coefs,
        block=block,
        interval=tuple(interval),
    )
