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
overlap (centres half a half-width apart by default) and never leave the record or cross trials.

Quadrature is on the actual sample times: a composite rule that integrates, on each interval,
the cubic through the four nearest samples (O(h^4) on any grid; on a uniform grid its interior
weights are exactly the trapezoid's, which is spectrally accurate here because the integrands
vanish smoothly at the window ends).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dynid.data.dataset import uniform_step

# The corner frequency sits this many standard deviations into the tail of the test
# function's (near-Gaussian) Fourier transform (WSINDy's tau-hat; phi-hat is down to e^-2).
TAU_HAT = 2.0
# Fewest samples across a window: below this the quadrature, not the noise, limits accuracy.
MIN_WINDOW_SAMPLES = 17


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
    default: centres every half half-width). window: full width b - a in time units (default:
    ``choose_window``). degree: exponent of the test functions (smoothness at the window ends).

    Returns G (K, p), B (K, d) and info: ``K``, ``window`` (time units), ``degree``,
    ``windows`` (K, 2) [a, b], ``trial`` (K,) zeros, ``rule`` ("given" or "corner", or "record"
    when a trial was shorter than the width),
    ``corner_frequency`` (rad per time unit, None when given), ``samples_per_window``.
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
    """
    if not (len(thetas) == len(xs) == len(ts)) or not ts:
        raise ValueError("need the same positive number of library, state and time arrays")
    if degree < 1:
        raise ValueError(f"test-function degree must be >= 1, got {degree}")
    trials = [_check_trial(th, x, t) for th, x, t in zip(thetas, xs, ts, strict=True)]
    corner = None
    if window is None:
        window, corner = choose_window([x for _, x, _ in trials], [t for _, _, t in trials], degree)
        rule = "corner"
    else:
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}")
        rule = "given"
    rows_g, rows_b, spans, owner, sizes = [], [], [], [], []
    for index, (theta, x, t) in enumerate(trials):
        phi, dphi, span = test_functions(t, window, degree, n_windows)
        weights = quadrature_weights(t)
        rows_g.append((phi * weights) @ theta)
        rows_b.append(-(dphi * weights) @ x)
        spans.append(span)
        owner.append(np.full(span.shape[0], index))
        sizes.append(np.count_nonzero(phi, axis=1))
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


def test_functions(
    t: np.ndarray, window: float, degree: int, n_windows: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Test functions phi_k and phi_k' sampled at t, and their supports.

    t: (n,) times; window: support width (time units), clipped to the record; n_windows: how
    many (default: centres every quarter window). Returns phi (K, n), dphi (K, n) per time
    unit, and spans (K, 2) [a_k, b_k]. On a uniform grid the supports start and end on samples.
    Each phi_k is scaled to unit integral under ``quadrature_weights``.
    """
    span = float(t[-1] - t[0])
    width = min(window, span)
    step = uniform_step(t)
    if step is not None:
        width = max(2, round(width / step)) * step  # ends on samples
    room = span - width
    if n_windows is None:
        n_windows = int(np.floor(room / (width / 4) + 1e-9)) + 1
    starts = t[0] + np.linspace(0.0, room, max(int(n_windows), 1))
    if step is not None:
        starts = t[0] + np.round((starts - t[0]) / step) * step
    half = width / 2
    centre = starts + half
    s = (t[None, :] - centre[:, None]) / half  # (K, n), in [-1, 1] on the support
    inside = np.abs(s) < 1
    base = np.where(inside, 1 - s**2, 0.0)
    psi = base**degree
    dpsi = np.where(inside, -2 * degree * s * base ** (degree - 1), 0.0) / half
    scale = 1.0 / (psi @ quadrature_weights(t))
    spans = np.column_stack([starts, starts + width])
    return psi * scale[:, None], dpsi * scale[:, None], spans


def quadrature_weights(t: np.ndarray) -> np.ndarray:
    """Weights w (n,) with sum_i w_i f(t_i) ~ integral of f over [t_0, t_-1], any grid.

    On each interval the cubic through the four nearest samples is integrated (shifted
    inwards at the ends), so the rule is exact for cubics and O(h^4); on a uniform grid the
    interior weights equal the trapezoid's (h). Fewer than 4 samples: trapezoid.
    """
    t = np.asarray(t, dtype=float)
    n = t.shape[0]
    if n < 4:
        return np.convolve(np.diff(t), [0.5, 0.5]) if n > 1 else np.zeros(n)
    steps = np.diff(t)
    first = np.clip(np.arange(n - 1) - 1, 0, n - 4)  # stencil start of each interval
    nodes = t[first[:, None] + np.arange(4)]  # (n-1, 4)
    # Local coordinates: the interval is [0, 1]; solve for weights matching the moments.
    local = (nodes - t[:-1, None]) / steps[:, None]
    vander = np.swapaxes(local[..., None] ** np.arange(4), 1, 2)  # (n-1, 4 powers, 4 nodes)
    moments = 1.0 / np.arange(1, 5)  # integral of u^k over [0, 1]
    local_weights = np.linalg.solve(vander, np.broadcast_to(moments[:, None], (n - 1, 4, 1)))[..., 0]
    weights = np.zeros(n)
    np.add.at(weights, first[:, None] + np.arange(4), local_weights * steps[:, None])
    return weights


def choose_window(
    xs: Sequence[np.ndarray], ts: Sequence[np.ndarray], degree: int = 4
) -> tuple[float, float]:
    """Test-function width (time units) by WSINDy's corner-point rule; also the corner (rad/time).

    The corner frequency w* is where the data's spectrum meets the noise floor (or, noise
    free, where it has decayed): the change point of a two-segment linear fit to the
    cumulative mean |FFT| (Messenger & Bortz). phi = (1 - s^2)^degree ~ exp(-degree s^2) is
    near-Gaussian with time std L / sqrt(2 degree) for half-width L, so its transform has
    std sqrt(2 degree) / L; putting w* ``TAU_HAT`` (2) stds into that tail,
    L = TAU_HAT sqrt(2 degree) / w*, makes every window pass the signal's band and filter the
    band above it, where noise dominates. Several trials: median corner. The width is kept
    to at least ``MIN_WINDOW_SAMPLES`` samples for the quadrature.
    """
    corners, steps = [], []
    for x, t in zip(xs, ts, strict=True):
        corners.append(corner_frequency(np.asarray(x, dtype=float), np.asarray(t, dtype=float)))
        steps.append(float(np.median(np.diff(t))))
    corner = float(np.median(corners))
    width = 2 * TAU_HAT * np.sqrt(2 * degree) / corner
    return max(width, (MIN_WINDOW_SAMPLES - 1) * float(np.median(steps))), corner


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
