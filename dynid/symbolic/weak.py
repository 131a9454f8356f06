"""Weak (integral) form of the equation-discovery regression (WSINDy).

Instead of regressing noisy pointwise derivatives, ``x' = Theta(x) Xi`` is multiplied by
compactly supported test functions phi_k and integrated over time (Messenger & Bortz 2021,
"Weak SINDy: Galerkin-based data-driven model selection"; Reinbold, Gurevich & Grigoriev 2020).
Integration by parts moves the derivative onto phi_k, which vanishes at its window's ends:

    integral phi_k x' dt = - integral phi_k' x dt,

so each window gives one row of ``G @ Xi ~ B`` with

    G[k] = integral phi_k Theta dt   (K, p),      B[k] = - integral phi_k' x dt   (K, d).

No derivative of the data is taken, and the integrals average zero-mean noise away.

Test functions: phi_k(t) = C_k ((t - a_k)(b_k - t))^degree on [a_k, b_k], zero elsewhere, with
C_k such that the (discrete) integral of phi_k is 1; the rows of G are then weighted averages of
the library and the rows of B averaged derivatives (units of x per time). Windows of one width
(to a sampling interval: their ends are samples) overlap, centres a quarter width apart by
default, and never leave the record or cross trials.

Quadrature (``quadrature``): the trapezoid rule on a uniform grid (spectrally accurate here);
on an irregular grid, the exact test function against the piecewise-linear interpolant of the
data (product integration: O(h^2), and noise-stable where samples cluster).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dynid.data.dataset import uniform_step

# The corner frequency sits this many standard deviations into the tail of the test
# function's (near-Gaussian) Fourier transform (WSINDy's tau-hat; there phi-hat is down to
# e^-1/2). WSINDy suggests 2; 1 (narrower windows) was more accurate on every Lorenz-63 record
# we measured (150 to 2000 samples, 0-5% noise), by up to 2x on short ones.
TAU_HAT = 1.0
# Fewest samples across a window: below this the quadrature, not the noise, limits accuracy.
MIN_WINDOW_SAMPLES = 17
# With the default spacing, all trials together give at least this many rows per library term.
ROWS_PER_TERM = 5


def weak_system(
    theta: np.ndarray,
    x: np.ndarray,
    t: np.ndarray,
    *,
    n_windows: int | None = None,
    window: float | None = None,
    degree: int = 4,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Weak-form regression system of one trial: ``G @ Xi ~ B``.

    theta: (n, p) library evaluated at the samples; x: (n, d) states; t: (n,) strictly
    increasing times (irregular is fine). n_windows: test functions (evenly spaced centres;
    default: centres a quarter width apart). window: full width b - a in time units (default:
    chosen, see ``weak_system_trials``). degree: exponent of the test functions (smoothness at
    the window ends).

    Returns G (K, p), B (K, d) and info: ``K``, ``window`` (time units), ``degree``,
    ``windows`` (K, 2) [a, b], ``trial`` (K,) zeros, ``rule`` (how the width was set: "given",
    "corner", "rows", or "record" when a trial was shorter than it), ``corner_frequency``
    (rad per time unit; None when the width was given), ``samples_per_window`` (median).
    """
    return weak_system_trials([theta], [x], [t], n_windows=n_windows, window=window, degree=degree)


def weak_system_trials(
    thetas: Sequence[np.ndarray],
    xs: Sequence[np.ndarray],
    ts: Sequence[np.ndarray],
    *,
    n_windows: int | None = None,
    window: float | None = None,
    degree: int = 4,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """``weak_system`` over several trials: one window width for all, rows stacked by trial.

    thetas, xs, ts: per trial (n_i, p), (n_i, d), (n_i,). n_windows is per trial. Windows
    never cross trials; a trial shorter than the width gets one window over its whole record.
    info["trial"] (K,) gives the trial of each row; other keys as in ``weak_system``.

    Width when not given: ``choose_window`` (corner rule), then, with the default spacing,
    narrowed if needed (but not below ``MIN_WINDOW_SAMPLES``) so that all trials together give
    at least ``ROWS_PER_TERM * p`` rows (``info["rule"] == "rows"``): a few wide windows over
    a short record all average the same stretch of data and cannot separate p terms (on
    150-sample Lorenz-63 records, 25 rows instead of 15 cut the coefficient error by ~1/3).
    """
    if not (len(thetas) == len(xs) == len(ts)) or not ts:
        raise ValueError("need the same positive number of library, state and time arrays")
    if degree < 1:
        raise ValueError(f"test-function degree must be >= 1, got {degree}")
    trials = [_check_trial(th, x, t) for th, x, t in zip(thetas, xs, ts, strict=True)]
    if len({(th.shape[1], x.shape[1]) for th, x, _ in trials}) > 1:
        raise ValueError("trials differ in their number of library terms or variables")
    corner = None
    if window is None:
        window, corner = choose_window([x for _, x, _ in trials], [t for _, _, t in trials], degree)
        rule = "corner"
        if n_windows is None:
            times = [t for _, _, t in trials]
            narrower = _width_for_rows(times, ROWS_PER_TERM * trials[0][0].shape[1])
            narrower = max(narrower, _min_width(times))
            if narrower < window:
                window, rule = narrower, "rows"
    elif window <= 0:
        raise ValueError(f"window must be positive, got {window}")
    else:
        rule = "given"
    rows_g, rows_b, spans, owner, sizes = [], [], [], [], []
    for index, (theta, x, t) in enumerate(trials):
        g, b, span = _trial_rows(theta, x, t, window, degree, n_windows)
        rows_g.append(g)
        rows_b.append(b)
        spans.append(span)
        owner.append(np.full(span.shape[0], index))
        sizes.append(np.searchsorted(t, span[:, 1]) - np.searchsorted(t, span[:, 0]) - 1)
        if window > t[-1] - t[0]:
            rule = "record"  # the trial is shorter than the width: one window over all of it
    spans_all = np.concatenate(spans)
    info = {
        "K": int(spans_all.shape[0]),
        "window": float(window),
        "degree": degree,
        "windows": spans_all,
        "trial": np.concatenate(owner),
        "rule": rule,
        "corner_frequency": corner,
        "samples_per_window": float(np.median(np.concatenate(sizes))),
    }
    return np.concatenate(rows_g), np.concatenate(rows_b), info


def _trial_rows(
    theta: np.ndarray, x: np.ndarray, t: np.ndarray, window: float, degree: int,
    n_windows: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """G (K, p), B (K, d) and the supports (K, 2) of one trial."""
    p = theta.shape[1]
    nodes, weights, values = quadrature(t, np.hstack([theta, x]), degree)
    span = window_spans(t, window, n_windows)
    g = np.empty((span.shape[0], p))
    b = np.empty((span.shape[0], x.shape[1]))
    # Each test function lives on a short stretch of nodes: integrate over that only.
    lows = np.searchsorted(nodes, span[:, 0], side="left")
    highs = np.searchsorted(nodes, span[:, 1], side="right")
    for k, (low, high) in enumerate(zip(lows, highs, strict=True)):
        phi, dphi = test_function(nodes[low:high], span[k, 0], span[k, 1], degree)
        w = weights[low:high]
        scale = 1.0 / (phi @ w)  # unit integral: the rows of G are averages
        g[k] = scale * ((phi * w) @ values[low:high, :p])
        b[k] = -scale * ((dphi * w) @ values[low:high, p:])
    return g, b, span


def _width_for_rows(ts: list[np.ndarray], rows: int) -> float:
    """Largest width whose default windows (centres a quarter width apart) number >= rows.

    A trial of span T holds floor(4 (T - w) / w) + 1 windows, about 4 T / w - 3.
    """
    spans = np.array([t[-1] - t[0] for t in ts])
    width = 4 * spans.sum() / (rows + 3 * len(ts))
    while width > 0 and sum(_default_count(span, width) for span in spans) < rows:
        width *= 0.95
    return float(width)


def _default_count(span: float, width: float) -> int:
    """Number of default windows of ``width`` in a record of ``span`` (centres width/4 apart)."""
    if width >= span:
        return 1
    return int(np.floor((span - width) / (width / 4) + 1e-9)) + 1


def _check_trial(theta: np.ndarray, x: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, ...]:
    theta = np.asarray(theta, dtype=float)
    x = np.asarray(x, dtype=float)
    t = np.asarray(t, dtype=float)
    theta = theta[:, None] if theta.ndim == 1 else theta
    x = x[:, None] if x.ndim == 1 else x
    n = t.shape[0]
    if t.ndim != 1 or x.shape[0] != n or theta.shape[0] != n:
        raise ValueError(f"shapes disagree: t {t.shape}, x {x.shape}, theta {theta.shape}")
    if n < 5:
        raise ValueError(f"the weak form needs at least 5 samples per trial, got {n}")
    if not np.all(np.diff(t) > 0):
        raise ValueError("times must be strictly increasing")
    return theta, x, t


def window_spans(t: np.ndarray, window: float, n_windows: int | None = None) -> np.ndarray:
    """Supports (K, 2) [a_k, b_k] of the test functions of a record sampled at t (n,).

    window: width (time units), clipped to the record; n_windows: how many (default: centres a
    quarter width apart). The ends are sample times, so the integrands are polynomial on every
    sampling interval (exact Gauss quadrature on irregular grids, exact trapezoid ends on
    uniform ones); on an irregular grid the widths vary by up to a sampling interval.
    """
    span = float(t[-1] - t[0])
    width = min(window, span)
    count = _default_count(span, width) if n_windows is None else max(int(n_windows), 1)
    first = _nearest(t, t[0] + np.linspace(0.0, span - width, count))
    last = np.maximum(_nearest(t, t[first] + width), first + 2)
    keep = last < t.shape[0]
    return np.column_stack([t[first[keep]], t[last[keep]]])


def test_function(at: np.ndarray, a: float, b: float, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """phi = (1 - s^2)^degree with s = (2 t - a - b) / (b - a), and dphi/dt, at times ``at``.

    Zero outside [a, b]; unnormalised (peak 1; ``weak_system`` scales it to unit integral).
    dphi is per time unit.
    """
    half = (b - a) / 2
    s = (at - (a + half)) / half
    inside = np.abs(s) < 1
    base = np.where(inside, 1 - s**2, 0.0)
    phi = base**degree
    dphi = np.where(inside, -2 * degree * s * base ** (degree - 1), 0.0) / half
    return phi, dphi


def _nearest(t: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Index of the sample nearest to each of ``times`` (clipped to the record)."""
    right = np.clip(np.searchsorted(t, times), 1, t.shape[0] - 1)
    return np.where(times - t[right - 1] <= t[right] - times, right - 1, right)


def quadrature(
    t: np.ndarray, values: np.ndarray, degree: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes (m,), weights (m,) and data at the nodes (m, k) for integrals over the record.

    values: (n, k) data at the sample times t; degree: the test functions'.

    Uniform t: the samples with trapezoid weights, spectrally accurate here because every
    integrand phi_k f vanishes with ``degree`` derivatives at its window ends (Euler-Maclaurin).
    Irregular t: product integration. The data are interpolated linearly between samples and
    multiplied by the exact test function, integrated with ``degree + 1`` Gauss-Legendre nodes
    per interval (exact for that polynomial product). Only the data's interpolation errs,
    O(h^2), and it never amplifies noise: the weights on the samples are positive for G and
    bounded for B. Measured on Lorenz-63 with Poisson sample times this beats the trapezoid
    rule (2-10x) and, on noisy data, any cubic interpolant through the samples, whose
    overshoot between clustered noisy samples is unbounded.
    """
    steps = np.diff(t)
    if uniform_step(t) is not None:
        weights = np.concatenate([[0.0], steps]) / 2 + np.concatenate([steps, [0.0]]) / 2
        return t, weights, values
    points, gauss = np.polynomial.legendre.leggauss(degree + 1)
    where = (points + 1) / 2  # Gauss points as fractions of each interval
    nodes = (t[:-1, None] + steps[:, None] * where).ravel()
    weights = (steps[:, None] * gauss / 2).ravel()
    left, right = values[:-1, None, :], values[1:, None, :]
    inside = (left + (right - left) * where[None, :, None]).reshape(-1, values.shape[1])
    return nodes, weights, inside


def choose_window(
    xs: Sequence[np.ndarray], ts: Sequence[np.ndarray], degree: int = 4
) -> tuple[float, float]:
    """Test-function width (time units) by WSINDy's corner-point rule; also the corner (rad/time).

    The corner frequency w* is where the data's spectrum meets the noise floor (or, noise
    free, where it has decayed): the change point of a two-segment linear fit to the
    cumulative mean |FFT| (Messenger & Bortz). phi = (1 - s^2)^degree ~ exp(-degree s^2) is
    near-Gaussian with time std L / sqrt(2 degree) for half-width L, so its transform has
    std sqrt(2 degree) / L; putting w* ``TAU_HAT`` (1) std into that tail,
    L = TAU_HAT sqrt(2 degree) / w*, makes every window pass the signal's band and filter the
    band above it, where noise dominates. Several trials: median corner. The width is kept
    to at least ``MIN_WINDOW_SAMPLES`` samples for the quadrature.
    """
    corners = [
        corner_frequency(np.asarray(x, dtype=float), np.asarray(t, dtype=float))
        for x, t in zip(xs, ts, strict=True)
    ]
    corner = float(np.median(corners))
    width = 2 * TAU_HAT * np.sqrt(2 * degree) / corner
    return max(width, _min_width(list(ts))), corner


def _min_width(ts: list[np.ndarray]) -> float:
    """The width spanning ``MIN_WINDOW_SAMPLES`` samples at the median sampling step."""
    return (MIN_WINDOW_SAMPLES - 1) * float(np.median(np.concatenate([np.diff(t) for t in ts])))


def corner_frequency(x: np.ndarray, t: np.ndarray) -> float:
    """Angular frequency (rad per time unit) where the spectrum of x (n, d) turns into its floor.

    Irregular samples are first interpolated linearly onto a uniform grid of the same size;
    each column has the line through its end values removed (no jump at the periodic wrap)
    and is scaled to unit spread so that all variables count alike.
    """
    x = x[:, None] if x.ndim == 1 else x
    n = t.shape[0]
    step = (t[-1] - t[0]) / (n - 1)
    grid = t[0] + step * np.arange(n)
    if uniform_step(t) is None:
        x = np.column_stack([np.interp(grid, t, column) for column in x.T])
    ramp = np.linspace(0.0, 1.0, n)[:, None]
    rest = x - x[:1] - ramp * (x[-1:] - x[:1])
    rest = rest - rest.mean(axis=0)
    spread = rest.std(axis=0)
    rest = rest[:, spread > 0] / spread[spread > 0]
    if rest.shape[1] == 0:
        return np.pi / step  # constant data: no band to protect
    magnitude = np.abs(np.fft.rfft(rest, axis=0))[1:].mean(axis=1)
    cumulative = np.cumsum(magnitude)
    k = _change_point(cumulative / cumulative[-1]) + 1  # +1: the zero frequency was dropped
    return 2 * np.pi * k / (n * step)


def _change_point(y: np.ndarray) -> int:
    """Index splitting y into two runs best fitted by separate straight lines (least squares)."""
    m = y.shape[0]
    if m < 4:
        return m // 2
    i = np.arange(m, dtype=float)

    def sse(sums: list[np.ndarray]) -> np.ndarray:
        count, sx, sy, sxx, sxy, syy = sums
        var_x = sxx - sx**2 / count
        cov = sxy - sx * sy / count
        with np.errstate(divide="ignore", invalid="ignore"):
            explained = np.where(var_x > 0, cov**2 / var_x, 0.0)
        return syy - sy**2 / count - explained

    parts = [np.ones(m), i, y, i * i, i * y, y * y]
    left = [np.cumsum(p) for p in parts]  # sums over [0, k]
    total = [p.sum() for p in parts]
    right = [tot - lft for tot, lft in zip(total, left, strict=True)]  # sums over (k, m)
    split = np.arange(1, m - 2)  # both runs keep at least 2 points
    cost = sse([lft[split] for lft in left]) + sse([rgt[split] for rgt in right])
    return int(split[np.argmin(cost)])
