"""Savitzky-Golay: local least-squares polynomial; ``scipy.signal.savgol_filter`` on a uniform
grid, the same fit on the actual times otherwise. The window is chosen per column by an unbiased
estimate of the derivative's mean squared error (``choose_savgol``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dynid.data.dataset import uniform_step
from dynid.symbolic.derivatives.grid import per_column
from dynid.symbolic.derivatives.stencils import local_polynomial
from dynid.symbolic.noise import estimate_noise

# Savitzky-Golay search: polynomial orders tried, growth factor between candidate windows, and
# how many candidates past a column's best one must all be worse before the search stops.
_SG_ORDERS = (3, 5)
_SG_GROWTH = 1.2
_SG_PATIENCE = 3
# First reference of the risk estimate (window, degree): degree 7 keeps its bias far below the
# candidates'; 15 points keep its variance moderate even where irregular samples cluster (a
# 5-point interpolation there has near-coincident nodes and a huge variance). At most
# _SG_PASSES searches, each with the reference widened to the previous choice.
_SG_REFERENCE = (15, 7)
_SG_PASSES = 4
# Rows on which the risk is evaluated at most (a regular subset of longer records).
_SG_RISK_ROWS = 1000


def savgol(
    x: np.ndarray,
    t: np.ndarray,
    window: int | Sequence[int] | None = None,
    polyorder: int | Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Savitzky-Golay: least-squares polynomial of ``polyorder`` over ``window`` samples.

    window (odd, in samples), polyorder: one value or one per column. A window is shrunk to fit
    the record; with no window both are chosen by ``choose_savgol`` (only the window when
    polyorder is given); polyorder defaults to 3 when only the window is given.
    """
    n, d = x.shape
    if window is None:
        window, polyorder = choose_savgol(x, t, estimate_noise(x, t), polyorder)
    windows = per_column(window, d, "window")
    orders = per_column(3 if polyorder is None else polyorder, d, "polyorder")
    import scipy.signal  # costly to import; only this method needs it

    step = uniform_step(t)
    values, slopes = np.empty_like(x), np.empty_like(x)
    for j in range(d):
        size, order = _fit_window(int(windows[j]), int(orders[j]), n)
        if step is not None:
            column = x[:, j]
            values[:, j] = scipy.signal.savgol_filter(column, size, order, mode="interp")
            slopes[:, j] = scipy.signal.savgol_filter(
                column, size, order, deriv=1, delta=step, mode="interp"
            )
        else:
            value, slope = local_polynomial(t, size, order)
            values[:, j : j + 1] = value.apply(x[:, j : j + 1])
            slopes[:, j : j + 1] = slope.apply(x[:, j : j + 1])
    return values, slopes


def _fit_window(window: int, order: int, n: int) -> tuple[int, int]:
    """An odd window (centred fits) that fits the record and exceeds the order, and the order."""
    size = max(window, order + 1)
    size = min(size + (size % 2 == 0), n - (n % 2 == 0))
    return size, min(order, size - 1)


def choose_savgol(
    x: np.ndarray,
    t: np.ndarray,
    noise: np.ndarray,
    polyorder: int | Sequence[int] | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per-column Savitzky-Golay (window, polyorder) minimising the derivative's estimated MSE.

    x: (n, d); t: (n,); noise: (d,) noise std (``estimate_noise``); polyorder: fixed order (one
    or per column), or None to search ``_SG_ORDERS``. Returns (windows, polyorders), d each.

    For a linear derivative operator D applied to y = s + e (white noise of std sigma), with a
    reference operator R that is nearly unbiased, a Stein-type unbiased estimate of the mean
    squared error of D y against the true derivative is

        MSE(D) ~ ( |D y - R y|^2 + 2 sigma^2 <D, R>_F - sigma^2 |R|_F^2 ) / n,

    since E|(D - R) y|^2 = |(D - R) s|^2 + sigma^2 |D - R|_F^2 and (D - R) s is D's bias when R
    is unbiased. The last term is common to all D. The sums run over every row (edges
    included; a regular subset of ``_SG_RISK_ROWS`` rows on long records).

    The estimate is only as steady as R is quiet. R starts as a degree-7 fit over 15 samples
    (bias O(h^8), far below the candidates'), then the search is repeated with R widened to the
    window just chosen, still of degree 7 so that its bias stays far below that of the degree
    3 / 5 candidates of the same width, until the choice settles (``_SG_PASSES`` at most).
    Without this a dense, slow signal (hundreds of samples per radian) gets windows several
    times too small. The reference's own bias is ignored, which holds for dense sampling; for
    coarse sampling (a few samples per radian) the estimate favours too small windows.
    """
    n, d = x.shape
    fixed = None if polyorder is None else [int(o) for o in per_column(polyorder, d, "polyorder")]
    # The risk is a mean over rows: on long records a regular subset of rows estimates it
    # just as well and keeps the search cheap with wide windows on irregular grids.
    rows = np.unique(np.linspace(0, n - 1, min(n, _SG_RISK_ROWS)).round().astype(int))
    widths = [_SG_REFERENCE[0]] * d
    for _ in range(_SG_PASSES):
        choice = _savgol_search(x, t, noise, rows, widths, fixed)
        wider = [max(_SG_REFERENCE[0], window) for window, _ in choice]
        if wider == widths:
            break
        widths = wider
    return tuple(w for w, _ in choice), tuple(o for _, o in choice)


def _savgol_search(
    x: np.ndarray,
    t: np.ndarray,
    noise: np.ndarray,
    rows: np.ndarray,
    widths: list[int],
    fixed: list[int] | None,
) -> list[tuple[int, int]]:
    """One pass of ``choose_savgol`` with reference fits of ``widths`` samples (one per column)."""
    n, d = x.shape
    references = []
    for width in widths:
        width = min(width, n)
        references.append(local_polynomial(t, width, min(_SG_REFERENCE[1], width - 2), rows)[1])
    target = np.column_stack([ref.apply(x[:, j : j + 1])[:, 0] for j, ref in enumerate(references)])
    shared = noise**2 * np.array([ref.frobenius2() for ref in references])
    best = np.full(d, np.inf)
    choice = [_fit_window(5, 3 if fixed is None else fixed[j], n) for j in range(d)]
    for order in sorted(set(fixed)) if fixed is not None else _SG_ORDERS:
        wanted = np.array([fixed is None or fixed[j] == order for j in range(d)])
        order_best = np.full(d, np.inf)
        since_best = np.zeros(d, dtype=int)
        for window in candidate_windows(n, order):
            _, slope = local_polynomial(t, window, order, rows)
            inner = np.array([slope.inner(ref) for ref in references])
            risk = (np.sum((slope.apply(x) - target) ** 2, axis=0) + 2 * noise**2 * inner - shared)
            risk /= rows.size
            improved = risk < order_best
            order_best = np.where(improved, risk, order_best)
            since_best = np.where(improved, 0, since_best + 1)
            for j in np.flatnonzero(wanted & (risk < best)):
                best[j], choice[j] = risk[j], (window, order)
            if np.all(since_best[wanted] >= _SG_PATIENCE):
                break
    return choice


def candidate_windows(n: int, order: int) -> list[int]:
    """Odd windows from the smallest over-determined fit up to the record, growing ~20%."""
    largest = n if n % 2 else n - 1
    window = order + 2 + (order % 2 == 0)
    windows = []
    while window <= largest:
        windows.append(window)
        window = max(window + 2, int(window * _SG_GROWTH) | 1)
    return windows
