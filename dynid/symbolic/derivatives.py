"""Time derivatives of noisy, short, possibly irregularly sampled records, and smoothed states.

Every method gives both the derivative and the denoised states it implies (``smooth``), so the
term library can be evaluated on states as clean as the derivative it is regressed on.

Methods (``METHODS``), all vectorised over the d columns, all working on 150-sample records:

- ``finite_difference``: Lagrange interpolation on the actual times, 5 points (``order=4``,
  exact for polynomials of degree <= 4: the classical (1, -8, 0, 8, -1) / 12h stencil on a
  uniform grid) or 3 points (``order=2``); off-centre stencils at the two ends.
- ``savgol``: local least-squares polynomial (Savitzky-Golay); ``scipy.signal.savgol_filter`` on
  a uniform grid, the same fit on the actual times otherwise. The window is chosen per column by
  an unbiased estimate of the derivative's mean squared error (see ``choose_savgol``).
- ``spectral``: FFT derivative with a low-pass cut where the signal spectrum meets the noise
  floor; uniform sampling only.
- ``tv``: total-variation regularised differentiation (Chartrand 2011), weight by the
  discrepancy principle.
- ``spline``: natural cubic smoothing spline (Reinsch), weight by generalised cross-validation.

``choose_method`` picks one from the estimated noise (rule and reasons in its docstring).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from dynid.data.dataset import uniform_step
from dynid.symbolic.noise import estimate_noise

METHODS = ("finite_difference", "savgol", "spectral", "tv", "spline")

# --- choose_method thresholds (reasons in choose_method's docstring) ---
# Relative error that noise alone puts on a 5-point finite difference below which it is used.
FD_NOISE_TOL = 0.005
# Noise-to-signal ratio (noise std / data std) above which the smoothing spline is used.
SPLINE_NOISE = 0.1

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


# --------------------------------------------------------------------------------------------
# Entry points


def differentiate(x: np.ndarray, t: np.ndarray, method: str = "auto", **options) -> np.ndarray:
    """Time derivative of each column of ``x``.

    x: (n,) or (n, d) states; t: (n,) strictly increasing times (uniform or not).
    method: one of ``METHODS`` or ``"auto"`` (``choose_method``); options: that method's
    parameters (below), unspecified ones chosen from the data.
    Returns (n, d) derivative in units of x per time unit. ValueError on bad shapes,
    non-increasing times, an unknown method or option, or a method the sampling does not allow.

    Options: finite_difference ``order`` (2 or 4); savgol ``window`` (samples, odd),
    ``polyorder``; spectral ``cutoff`` (cycles per time unit), ``extension``; tv ``alpha``,
    ``max_iter``, ``tol``; spline ``lam`` (time^3). window, polyorder, cutoff, alpha and lam
    take one value or one per column.
    """
    return _run(x, t, method, options)[1]


def smooth(x: np.ndarray, t: np.ndarray, method: str = "auto", **options) -> np.ndarray:
    """The denoised states (n, d) that ``differentiate`` with the same arguments implies.

    finite_difference returns the data unchanged (it assumes no noise).
    """
    return _run(x, t, method, options)[0]


def choose_method(x: np.ndarray, t: np.ndarray) -> tuple[str, dict]:
    """The method and its fully resolved options for these data, from the estimated noise.

    x: (n,) or (n, d); t: (n,). Returns (method, options); ``differentiate(x, t, method,
    **options)`` reproduces ``differentiate(x, t)``. With s = ``estimate_noise`` per column:

    1. ``finite_difference`` (order 4) if noise alone puts less than ``FD_NOISE_TOL`` (0.5%)
       relative error on the 5-point derivative in every column (noise gain s |w|_2 against
       the rms derivative). It is unbiased to O(h^4) and needs no tuning; smoothing could gain
       at most that 0.5%, far below what matters for picking terms. Covers noise-free and
       simulated data and data written with many significant digits.
    2. ``spline`` (GCV) if some column's noise-to-signal ratio s / std(x) exceeds
       ``SPLINE_NOISE`` (10%). On Lorenz-63 (150 to 5000 samples, uniform and irregular) the
       chosen Savitzky-Golay filter is as good as or better than the spline up to ~10% noise,
       and worse above (by up to 1.3x at 20% on 150 samples): its risk estimate gets noisy and
       its windows so wide that a fixed-degree local polynomial no longer fits.
    3. ``savgol`` otherwise, with per-column windows and orders that minimise an unbiased
       estimate of the derivative's mean squared error (``choose_savgol``).

    ``tv`` and ``spectral`` are never picked: TV favours piecewise-constant derivatives
    (kinks, steps) that smooth ODE trajectories lack (2-4x the error of the others on
    Lorenz-63), and the FFT derivative needs uniform sampling and suits near-periodic records.
    """
    x = _as_2d(x)
    t = _check_times(t, x.shape[0])
    noise = estimate_noise(x, t)
    if _fd_noise_error(x, t, noise).max() < FD_NOISE_TOL:
        return "finite_difference", {"order": 4}
    if np.any(noise > SPLINE_NOISE * np.std(x, axis=0)) and x.shape[0] >= 4:
        lam = _SmoothingSpline(np.diff(t)).gcv_penalty(x)
        return "spline", {"lam": tuple(float(value) for value in lam)}
    windows, orders = choose_savgol(x, t, noise)
    return "savgol", {"window": windows, "polyorder": orders}


def _run(x: np.ndarray, t: np.ndarray, method: str, options: dict) -> tuple[np.ndarray, np.ndarray]:
    """(smoothed states, derivative), each (n, d)."""
    x = _as_2d(x)
    t = _check_times(t, x.shape[0])
    if method == "auto":
        method, chosen = choose_method(x, t)
        options = {**chosen, **options}
    if method not in _METHOD_FUNCTIONS:
        raise ValueError(f"unknown differentiation method {method!r}; use one of {METHODS} or auto")
    function = _METHOD_FUNCTIONS[method]
    known = list(inspect.signature(function).parameters)[2:]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"{method} takes options {known}, not {unknown}")
    return function(x, t, **options)


def _as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"states must be (n,) or (n, d), got shape {x.shape}")
    return x


def _check_times(t: np.ndarray, n: int) -> np.ndarray:
    t = np.asarray(t, dtype=float)
    if t.shape != (n,):
        raise ValueError(f"times must have shape ({n},), got {t.shape}")
    if n < 3:
        raise ValueError(f"need at least 3 samples to differentiate, got {n}")
    if not np.all(np.diff(t) > 0):
        raise ValueError("times must be strictly increasing")
    return t


def _per_column(value: object, d: int, name: str) -> list:
    """A per-column option given once (scalar) or per column (sequence of length d)."""
    if value is None or np.ndim(value) == 0:
        return [value] * d
    values = list(value)  # type: ignore[arg-type]
    if len(values) != d:
        raise ValueError(f"option {name} has {len(values)} values for {d} columns")
    return values


# --------------------------------------------------------------------------------------------
# Local polynomial stencils (finite differences and Savitzky-Golay on actual times)


@dataclass(frozen=True)
class Stencil:
    """A banded linear operator on samples: ``out[i] = sum_k weights[i, k] * x[start[i] + k]``.

    start: (n,) first sample index of each row's window; weights: (n, w).
    """

    start: np.ndarray
    weights: np.ndarray

    def apply(self, x: np.ndarray) -> np.ndarray:
        """(n, d) result for (n, d) samples."""
        index = self.start[:, None] + np.arange(self.weights.shape[1])
        return np.einsum("nk,nkd->nd", self.weights, x[index])

    def frobenius2(self) -> float:
        """Squared Frobenius norm: the output variance summed over rows, per unit white noise."""
        return float(np.sum(self.weights**2))

    def inner(self, other: Stencil) -> float:
        """Frobenius inner product with ``other`` (same rows): summed output covariance per unit
        white noise."""
        width = self.weights.shape[1]
        column = (other.start - self.start)[:, None] + np.arange(other.weights.shape[1])
        valid = (column >= 0) & (column < width)
        mine = np.take_along_axis(self.weights, np.clip(column, 0, width - 1), axis=1)
        return float(np.sum(np.where(valid, mine * other.weights, 0.0)))


def local_polynomial(
    t: np.ndarray, window: int, degree: int, rows: np.ndarray | None = None
) -> tuple[Stencil, Stencil]:
    """Stencils (value, derivative) of a least-squares polynomial fit in a sliding window.

    t: (n,) times; window: samples per fit (clipped to n), centred on each sample and shifted
    inwards at the ends; degree < window. ``window == degree + 1`` is Lagrange interpolation,
    i.e. the finite-difference stencil on the actual times. rows: the output samples (all by
    default); the stencils then have one row each. Derivative weights are per time unit.
    """
    n = t.shape[0]
    window = min(window, n)
    if degree >= window:
        raise ValueError(f"polynomial degree {degree} needs more than {window} samples")
    rows = np.arange(n) if rows is None else np.asarray(rows)
    start = np.clip(rows - window // 2, 0, n - window)
    if uniform_step(t) is None:
        value, slope = _fit_rows(t, start, rows, window, degree)
        return Stencil(start, value), Stencil(start, slope)
    # On a uniform grid a row's weights depend only on its place in its window (the interior
    # rows all share one stencil): fit one representative row per place.
    place = rows - start
    places, which = np.unique(place, return_inverse=True)
    representative = np.where(places <= window // 2, places, n - window + places)
    value, slope = _fit_rows(t, representative - places, representative, window, degree)
    return Stencil(start, value[which]), Stencil(start, slope[which])


def _fit_rows(
    t: np.ndarray, start: np.ndarray, rows: np.ndarray, window: int, degree: int
) -> tuple[np.ndarray, np.ndarray]:
    """Value and derivative weights (len(rows), window) of the local fits at ``rows``.

    start: (len(rows),) first sample of each row's window. The fit is in a Legendre basis on the
    window mapped to [-1, 1] (well conditioned); the weights are V G^-1 p(u_i) with G = V^T V,
    one small (degree+1)^2 solve per row however wide the window (V^-T p(u_i) when V is square).
    Rows go in chunks so the (rows, window, degree+1) basis stays small in memory.
    """
    value = np.empty((rows.size, window))
    slope = np.empty((rows.size, window))
    chunk = max(1, 2**17 // (window * (degree + 1)))
    for lo in range(0, rows.size, chunk):
        part = slice(lo, lo + chunk)
        times = t[start[part, None] + np.arange(window)]
        middle = 0.5 * (times[:, :1] + times[:, -1:])
        half_span = 0.5 * (times[:, -1:] - times[:, :1])
        basis, _ = _legendre((times - middle) / half_span, degree, slopes=False)  # (r, w, q)
        here, here_slope = _legendre(((t[rows[part], None] - middle) / half_span)[:, 0], degree)
        targets = np.stack([here, here_slope / half_span], axis=2)  # (r, q, 2)
        if window == degree + 1:
            weights = np.linalg.solve(np.swapaxes(basis, 1, 2), targets)
        else:
            weights = basis @ np.linalg.solve(np.swapaxes(basis, 1, 2) @ basis, targets)
        value[part], slope[part] = weights[..., 0], weights[..., 1]
    return value, slope


def _legendre(u: np.ndarray, degree: int, slopes: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Legendre polynomials P_0..P_degree at u and their derivatives, each (*u.shape, degree+1).

    With ``slopes=False`` the second array is None (the wide window bases need no slopes).
    """
    # One contiguous slab per degree (the recurrence is memory bound); moved last at the end.
    values = np.empty((degree + 1, *u.shape))
    values[0] = 1.0
    if degree >= 1:
        values[1] = u
    for k in range(1, degree):
        values[k + 1] = ((2 * k + 1) * u * values[k] - k * values[k - 1]) / (k + 1)
    derivative = None
    if slopes:
        derivative = np.zeros_like(values)
        if degree >= 1:
            derivative[1] = 1.0
        for k in range(1, degree):
            derivative[k + 1] = derivative[k - 1] + (2 * k + 1) * values[k]
        derivative = np.moveaxis(derivative, 0, -1)
    return np.moveaxis(values, 0, -1), derivative


# --------------------------------------------------------------------------------------------
# Methods: each returns (smoothed (n, d), derivative (n, d))


def _finite_difference(
    x: np.ndarray, t: np.ndarray, order: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """Lagrange-interpolation derivative on the actual times; order 4 (5 points) or 2 (3 points).

    Exact for polynomials of degree <= order; the error is O(h^order) for smooth data. Records
    shorter than order + 1 samples fall back to the largest stencil that fits.
    """
    if order not in (2, 4):
        raise ValueError(f"finite_difference order must be 2 or 4, got {order}")
    points = min(order + 1, x.shape[0])
    _, slope = local_polynomial(t, points, points - 1)
    return x.copy(), slope.apply(x)


def _fd_noise_error(x: np.ndarray, t: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Relative error (d,) that white noise of std ``noise`` puts on the 5-point derivative."""
    _, slope = local_polynomial(t, 5, 4)
    derivative = slope.apply(x)
    noise_rms = noise * np.sqrt(slope.frobenius2() / x.shape[0])
    signal_rms = np.sqrt(np.maximum(np.mean(derivative**2, axis=0) - noise_rms**2, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(signal_rms > 0, noise_rms / signal_rms, np.where(noise_rms > 0, np.inf, 0))


def _savgol(
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
    windows = _per_column(window, d, "window")
    orders = _per_column(3 if polyorder is None else polyorder, d, "polyorder")
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
    fixed = None if polyorder is None else [int(o) for o in _per_column(polyorder, d, "polyorder")]
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
        for window in _candidate_windows(n, order):
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


def _candidate_windows(n: int, order: int) -> list[int]:
    """Odd windows from the smallest over-determined fit up to the record, growing ~20%."""
    largest = n if n % 2 else n - 1
    window = order + 2 + (order % 2 == 0)
    windows = []
    while window <= largest:
        windows.append(window)
        window = max(window + 2, int(window * _SG_GROWTH) | 1)
    return windows


def _spectral(
    x: np.ndarray,
    t: np.ndarray,
    cutoff: float | Sequence[float] | None = None,
    extension: str = "odd",
) -> tuple[np.ndarray, np.ndarray]:
    """FFT derivative with a low-pass cut, for uniform sampling only.

    cutoff: frequency (cycles per time unit) above which Fourier modes are dropped, one value or
    one per column; None puts it where the smoothed periodogram falls to 3x the noise floor
    (beyond it noise dominates the signal and differentiation would amplify it by 2 pi f).
    extension: ``"odd"`` subtracts the line through the two end samples and extends the record
    anti-symmetrically, so its periodic continuation is continuous with a continuous first
    derivative (no Gibbs ringing at the ends of a non-periodic record); ``"periodic"`` uses the
    record as is and suits records covering whole periods.
    """
    step = uniform_step(t)
    if step is None:
        raise ValueError(
            "spectral differentiation needs uniform sampling; "
            "use savgol or spline for irregular times"
        )
    if extension not in ("odd", "periodic"):
        raise ValueError(f"extension must be 'odd' or 'periodic', got {extension!r}")
    n, d = x.shape
    if extension == "odd":
        slope_line = (x[-1] - x[0]) / (t[-1] - t[0])
        line = x[0] + np.outer(t - t[0], slope_line)
        rest = x - line
        extended = np.concatenate([rest, -rest[-2:0:-1]])
    else:
        slope_line, line = np.zeros(d), np.zeros_like(x)
        extended = x
    size = extended.shape[0]
    spectrum = np.fft.rfft(extended, axis=0)
    frequency = np.fft.rfftfreq(size, step)
    cutoffs = _per_column(cutoff, d, "cutoff")
    noise = estimate_noise(x, t) if any(c is None for c in cutoffs) else np.zeros(d)
    keep = np.empty(spectrum.shape)
    for j in range(d):
        limit = cutoffs[j]
        if limit is None:
            dof = 1 if extension == "odd" else 2
            limit = _noise_floor_cutoff(spectrum[:, j], frequency, noise[j], size, dof)
        keep[:, j] = frequency <= limit
    filtered = spectrum * keep
    values = np.fft.irfft(filtered, size, axis=0)[:n] + line
    slopes = np.fft.irfft(2j * np.pi * frequency[:, None] * filtered, size, axis=0)[:n] + slope_line
    return values, slopes


def _noise_floor_cutoff(
    spectrum: np.ndarray, frequency: np.ndarray, noise: float, size: int, dof: int
) -> float:
    """Highest frequency whose locally averaged power exceeds 3x the white-noise level.

    White noise of std s has periodogram |X_k|^2 / N with mean s^2 and a chi-square spread of
    ``dof`` degrees of freedom per bin (2 for complex bins, 1 for the real sine coefficients of
    an odd extension). Powers are averaged over the fewest bins that make a chance excursion
    above 3 s^2 anywhere in the spectrum unlikely (< 1e-3 in all), so the last bin above marks
    where the signal still stands clearly above the noise (signal power >= 2 s^2).
    """
    if noise <= 0:
        return float(frequency[-1])
    bins = spectrum.shape[0]
    width = 3
    import scipy.stats

    while width < bins and scipy.stats.chi2.sf(3 * width * dof, width * dof) > 1e-3 / bins:
        width += 2
    power = np.abs(spectrum) ** 2 / size
    average = np.convolve(power, np.ones(width) / width, mode="same")
    above = np.flatnonzero(average > 3 * noise**2)
    return float(frequency[above[-1]]) if above.size else float(frequency[1])


def _tv(
    x: np.ndarray,
    t: np.ndarray,
    alpha: float | Sequence[float] | None = None,
    max_iter: int = 30,
    tol: float = 1e-5,
) -> tuple[np.ndarray, np.ndarray]:
    """Total-variation regularised derivative (Chartrand 2011), on any time grid.

    Chartrand minimises alpha * TV(u) + 1/2 |A u - f|^2 over the derivative u, with A the
    integration operator (dense). We solve the same problem over the antiderivative g = A u:
    ``1/2 |g - f|^2 + alpha * sum_i |u_{i+3/2} - u_{i+1/2}|`` with u_{i+1/2} the slope of g on
    [t_i, t_{i+1}], so the penalty is a banded second difference and each lagged-diffusivity
    step is one pentadiagonal Cholesky solve (O(n); 10k samples in well under a second).
    alpha (units of x times time; one value or one per column): None chooses it by the
    discrepancy principle, |g - f|^2 = n * noise^2 with the ``estimate_noise`` level.
    The derivative at a sample is the step-weighted mean of the two adjacent slopes.
    """
    n, d = x.shape
    alphas = _per_column(alpha, d, "alpha")
    noise = estimate_noise(x, t) if any(a is None for a in alphas) else np.zeros(d)
    steps = np.diff(t)
    values = np.empty_like(x)
    for j in range(d):
        if alphas[j] is not None:
            values[:, j] = _tv_fit(x[:, j], steps, float(alphas[j]), x[:, j], max_iter, tol)
        else:
            values[:, j] = _tv_discrepancy(x[:, j], steps, noise[j], max_iter, tol)
    slopes_mid = np.diff(values, axis=0) / steps[:, None]
    slopes = np.empty_like(x)
    slopes[0], slopes[-1] = slopes_mid[0], slopes_mid[-1]
    left, right = steps[:-1, None], steps[1:, None]
    slopes[1:-1] = (right * slopes_mid[:-1] + left * slopes_mid[1:]) / (left + right)
    return values, slopes


def _second_difference(steps: np.ndarray) -> np.ndarray:
    """(n-2, 3) coefficients of the slope jumps u_{i+3/2} - u_{i+1/2} on g_i, g_{i+1}, g_{i+2}."""
    left, right = 1 / steps[:-1], 1 / steps[1:]
    return np.stack([left, -left - right, right], axis=1)


def _tv_fit(
    f: np.ndarray, steps: np.ndarray, alpha: float, start: np.ndarray, max_iter: int, tol: float
) -> np.ndarray:
    """Lagged-diffusivity (IRLS) minimiser g (n,) of 1/2 |g - f|^2 + alpha * |D2 g|_1."""
    n = f.shape[0]
    if alpha <= 0 or n < 3:
        return f.copy()
    coef = _second_difference(steps)
    scale = np.ptp(f) / (steps.sum() * np.median(steps)) + 1e-300
    # Smoothing of |.| near zero; tiny against any jump that matters, keeps the weights finite.
    eps = 1e-6 * scale
    g = start.copy()
    for _ in range(max_iter):
        jumps = coef[:, 0] * g[:-2] + coef[:, 1] * g[1:-1] + coef[:, 2] * g[2:]
        weight = alpha / np.sqrt(jumps**2 + eps**2)
        bands = np.zeros((3, n))  # upper banded form for solveh_banded
        bands[2] = 1.0
        for k in range(3):
            bands[2, k : n - 2 + k] += weight * coef[:, k] ** 2
        bands[1, 1 : n - 1] += weight * coef[:, 0] * coef[:, 1]
        bands[1, 2:n] += weight * coef[:, 1] * coef[:, 2]
        bands[0, 2:n] += weight * coef[:, 0] * coef[:, 2]
        try:
            new = scipy.linalg.solveh_banded(bands, f, check_finite=False)
        except np.linalg.LinAlgError:
            # Near-coincident samples make the slope jumps' weights so large that rounding
            # spoils positive definiteness; LU with pivoting still solves the system.
            new = scipy.linalg.solve_banded((2, 2), _full_bands(bands), f, check_finite=False)
        change = np.linalg.norm(new - g) / (np.linalg.norm(new) + 1e-300)
        g = new
        if change < tol:
            break
    return g


def _full_bands(upper: np.ndarray) -> np.ndarray:
    """(5, n) (2, 2)-banded storage of the symmetric matrix given by its (3, n) upper bands."""
    n = upper.shape[1]
    full = np.zeros((5, n))
    full[:3] = upper
    full[3, : n - 1] = upper[1, 1:]
    full[4, : n - 2] = upper[0, 2:]
    return full


def _tv_discrepancy(
    f: np.ndarray, steps: np.ndarray, noise: float, max_iter: int, tol: float
) -> np.ndarray:
    """TV fit whose residual matches the noise, |g - f|^2 = n noise^2 (Morozov), by bisection."""
    n = f.shape[0]
    if noise <= 0:
        return f.copy()
    target = n * noise**2

    def residual(alpha: float, start: np.ndarray) -> tuple[float, np.ndarray]:
        g = _tv_fit(f, steps, alpha, start, max_iter, tol)
        return float(np.sum((g - f) ** 2)), g

    # The residual grows with alpha; bracket the target by factors of 10 from a scale guess.
    low = high = noise * np.median(steps)
    rss, g = residual(low, f)
    while rss > target and low > 1e-12 * noise * np.median(steps):
        high, low = low, low / 10
        rss, g = residual(low, g)
    while rss < target and high < 1e12 * noise * np.median(steps):
        low, high = high, high * 10
        rss, g = residual(high, g)
    for _ in range(20):
        if abs(rss / target - 1) < 0.02:
            break
        middle = np.sqrt(low * high)
        rss, g = residual(middle, g)
        low, high = (middle, high) if rss < target else (low, middle)
    return g


def _spline(
    x: np.ndarray, t: np.ndarray, lam: float | Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Natural cubic smoothing spline per column, penalty chosen by generalised cross-validation.

    Minimises sum_i (x_i - g(t_i))^2 + lam * integral g''(t)^2 dt (Reinsch 1967; Green &
    Silverman 1994, ch. 2), one O(n) banded solve per lam. lam (units of time^3; one value or
    one per column): None minimises GCV(lam) = n |x - g|^2 / (n - tr A)^2 (Craven & Wahba),
    which needs no noise estimate; tr A comes from a Hutchinson estimate with fixed Rademacher
    probes, so the choice is deterministic and 10k samples take well under a second (scipy's
    ``make_smoothing_spline`` GCV loops in Python and fixes lam's search range in absolute
    units, which breaks for times in ms or hours).
    """
    n, d = x.shape
    if n < 4:
        raise ValueError(f"spline differentiation needs at least 4 samples, got {n}")
    spline = _SmoothingSpline(np.diff(t))
    lams = _per_column(lam, d, "lam")
    if any(value is None for value in lams):
        chosen = spline.gcv_penalty(x)
        lams = [chosen[j] if lams[j] is None else lams[j] for j in range(d)]
    values, slopes = np.empty_like(x), np.empty_like(x)
    for j in range(d):
        values[:, j : j + 1], curvature = spline.fit(x[:, j : j + 1], float(lams[j]))
        slopes[:, j : j + 1] = spline.slopes(values[:, j : j + 1], curvature)
    return values, slopes


class _SmoothingSpline:
    """Reinsch form of the natural cubic smoothing spline on knots with the given steps (n-1,).

    With Q (n, n-2) the second-divided-difference matrix and R (n-2, n-2) the tridiagonal
    Gram matrix of the hat functions, the fit g and its interior second derivatives c solve
    (R + lam Q^T Q) c = Q^T y and g = y - lam Q c.
    """

    # Hutchinson probes for tr A, and GCV grid points per decade of lam (12% in bandwidth).
    probes = 16
    per_decade = 5

    def __init__(self, steps: np.ndarray) -> None:
        self.steps = steps
        self.n = steps.shape[0] + 1
        self.coef = _second_difference(steps)  # column i of Q: rows i, i+1, i+2
        c = self.coef
        self.gram = np.zeros((3, self.n - 2))  # R, upper banded form
        self.gram[2] = (steps[:-1] + steps[1:]) / 3
        self.gram[1, 1:] = steps[1:-1] / 6
        self.penalty = np.zeros((3, self.n - 2))  # Q^T Q, upper banded form
        self.penalty[2] = np.sum(c**2, axis=1)
        self.penalty[1, 1:] = c[:-1, 1] * c[1:, 0] + c[:-1, 2] * c[1:, 1]
        self.penalty[0, 2:] = c[:-2, 2] * c[2:, 0]

    def qt(self, y: np.ndarray) -> np.ndarray:
        """Q^T y: (n-2, k) for (n, k)."""
        c = self.coef
        return c[:, :1] * y[:-2] + c[:, 1:2] * y[1:-1] + c[:, 2:] * y[2:]

    def q(self, curvature: np.ndarray) -> np.ndarray:
        """Q c: (n, k) for (n-2, k)."""
        out = np.zeros((self.n, curvature.shape[1]))
        for k in range(3):
            out[k : self.n - 2 + k] += self.coef[:, k : k + 1] * curvature
        return out

    def solve(self, lam: float, rhs: np.ndarray) -> np.ndarray:
        """(R + lam Q^T Q)^-1 rhs for (n-2, k) right-hand sides."""
        return scipy.linalg.solveh_banded(self.gram + lam * self.penalty, rhs, check_finite=False)

    def fit(self, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """Smoothed values (n, k) and interior second derivatives (n-2, k) for data (n, k)."""
        if lam <= 0:
            return y.copy(), self.solve(0.0, self.qt(y))  # the interpolating spline
        curvature = self.solve(lam, self.qt(y))
        return y - lam * self.q(curvature), curvature

    def slopes(self, values: np.ndarray, curvature: np.ndarray) -> np.ndarray:
        """First derivative (n, k) of the cubic spline at the knots."""
        h = self.steps[:, None]
        second = np.pad(curvature, ((1, 1), (0, 0)))  # natural ends: g'' = 0
        chord = np.diff(values, axis=0) / h
        out = np.empty_like(values)
        out[:-1] = chord - h * (2 * second[:-1] + second[1:]) / 6
        out[-1] = chord[-1] + h[-1] * (second[-2] + 2 * second[-1]) / 6
        return out

    def gcv_penalty(self, y: np.ndarray) -> np.ndarray:
        """The lam (d,) minimising GCV per column of y (n, d), over a log grid then a parabola.

        The grid spans equivalent kernel bandwidths (lam / density)^(1/4) from a third of the
        median step to the whole record (Silverman 1984), so it follows the time units.
        """
        n, d = y.shape
        span = float(self.steps.sum())
        density = (n - 1) / span
        low = np.log10(density * (np.median(self.steps) / 3) ** 4)
        high = np.log10(density * span**4)
        grid = np.linspace(low, high, int(np.ceil((high - low) * self.per_decade)) + 1)
        probes = np.random.default_rng(0).choice([-1.0, 1.0], size=(n, self.probes))
        rhs = self.qt(np.hstack([y, probes]))
        scores = np.empty((grid.size, d))
        for k, log_lam in enumerate(grid):
            lam = 10.0**log_lam
            curvature = self.solve(lam, rhs)
            residual2 = lam**2 * np.sum(self.q(curvature[:, :d]) ** 2, axis=0)
            # n - tr A = lam tr(Q M^-1 Q^T), estimated as the mean of z^T Q M^-1 Q^T z.
            free = lam * np.mean(np.sum(rhs[:, d:] * curvature[:, d:], axis=0))
            scores[k] = n * residual2 / max(free, 1e-300) ** 2
        return np.array([10.0 ** _parabola_minimum(grid, np.log(scores[:, j])) for j in range(d)])


def _parabola_minimum(grid: np.ndarray, values: np.ndarray) -> float:
    """Abscissa of the minimum of ``values`` on ``grid``, refined by a parabola through 3 points."""
    k = int(np.argmin(values))
    if k == 0 or k == grid.size - 1:
        return float(grid[k])
    left, mid, right = values[k - 1 : k + 2]
    curvature = left - 2 * mid + right
    if curvature <= 0:
        return float(grid[k])
    shift = 0.5 * (left - right) / curvature
    return float(grid[k] + shift * (grid[1] - grid[0]))


_METHOD_FUNCTIONS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "finite_difference": _finite_difference,
    "savgol": _savgol,
    "spectral": _spectral,
    "tv": _tv,
    "spline": _spline,
}


def finite_difference_suffices(x: np.ndarray, t: np.ndarray) -> bool:
    """Rule 1 of ``choose_method`` alone: whether noise puts under ``FD_NOISE_TOL`` relative
    error on the 5-point finite difference in every column (no window search needed)."""
    x = _as_2d(x)
    t = _check_times(t, x.shape[0])
    return bool(_fd_noise_error(x, t, estimate_noise(x, t)).max() < FD_NOISE_TOL)
