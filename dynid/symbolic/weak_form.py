"""The weak (integral) form of dx/dt = Xi Theta(x): regression without differentiating data.

Multiply by a smooth test function phi_k with compact support [a_k, b_k] and integrate by parts
(phi_k vanishes at both ends):  int phi_k Theta(x) dt Xi = - int phi_k' x dt.  Both sides are
integrals of the data, which average measurement noise instead of amplifying it (Messenger &
Bortz 2021, WSINDy; Reinbold, Gurevich & Grigoriev 2020). With the quadrature weights folded in,
each side is a linear operator on the samples: G = Phi @ Theta(x), B = -dPhi @ x.

Test functions: phi(t) = ((t - a)(b - t))^p / max, p = ``DEGREE``; supports of ``2 m + 1``
samples whose centres step by ``m // 2`` samples (overlapping windows). The half-width m is the
data's decorrelation time (the first lag where the mean autocorrelation of the centred states
drops below 1/e), at most n / ``MIN_WINDOWS`` and at least ``MIN_HALF_WIDTH``: a window about one
correlation time wide averages the noise over many samples but does not blur the dynamics' own
time scale, and the cap keeps enough rows (about 2 * MIN_WINDOWS) for held-out selection when
the record is one slow relaxation (whose "correlation time" is the whole record).
Composite Simpson quadrature on the actual times (uneven-step weights; product integration
against the linear interpolant where neighbouring steps differ by more than a factor 2), so
irregular sampling works.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

DEGREE = 4
MIN_HALF_WIDTH = 4
MIN_WINDOWS = 40


def integration_operator(
    t: np.ndarray, x: np.ndarray, *, half_width: int | None = None
) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
    """(Phi, dPhi), each (K, n) sparse: row k holds phi_k(t_j) w_j and phi_k'(t_j) w_j.

    t: (n,) increasing times; x: (n, d) states (only used to choose the window width);
    half_width: samples on each side of a window centre (default: the rule in the module doc).
    Then ``Phi @ Theta`` (K, p) and ``-(dPhi @ x)`` (K, d) are the weak-form regression rows.
    """
    n = t.shape[0]
    m = decorrelation_samples(x) if half_width is None else int(half_width)
    m = int(np.clip(m, MIN_HALF_WIDTH, max(MIN_HALF_WIDTH, n // MIN_WINDOWS)))
    if n < 2 * m + 1:
        raise ValueError(f"{n} samples are too few for weak-form windows of {2 * m + 1}")
    stride = max(1, m // 2)
    rows, cols, values, slopes = [], [], [], []
    for k, start in enumerate(range(0, n - 2 * m, stride)):
        index = np.arange(start, start + 2 * m + 1)
        a, b = t[index[0]], t[index[-1]]
        s = t[index]
        scale = ((b - a) / 2.0) ** (2 * DEGREE)  # phi's maximum, so values are O(1)

        def phi(s, a=a, b=b, scale=scale):
            return ((s - a) * (b - s)) ** DEGREE / scale

        def dphi(s, a=a, b=b, scale=scale):
            return DEGREE * ((s - a) * (b - s)) ** (DEGREE - 1) * (a + b - 2 * s) / scale

        rows.append(np.full(index.size, k))
        cols.append(index)
        values.append(_quadrature_row(s, phi))
        slopes.append(_quadrature_row(s, dphi))
    shape = (len(rows), n)
    r, c = np.concatenate(rows), np.concatenate(cols)
    phi_op = sparse.csr_matrix((np.concatenate(values), (r, c)), shape=shape)
    dphi_op = sparse.csr_matrix((np.concatenate(slopes), (r, c)), shape=shape)
    return phi_op, dphi_op


def decorrelation_samples(x: np.ndarray) -> int:
    """First lag (samples) where the mean autocorrelation of x's centred columns is < 1/e."""
    x = np.asarray(x, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    centred = x - x.mean(axis=0)
    n = centred.shape[0]
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(centred, size, axis=0)
    acf = np.fft.irfft(np.abs(spectrum) ** 2, size, axis=0)[:n]
    with np.errstate(invalid="ignore", divide="ignore"):
        acf = acf / acf[0]
    finite = np.isfinite(acf)
    counts = finite.sum(axis=1)
    # Constant columns have no autocorrelation (NaN); a record of only those has none at all.
    mean = np.where(counts > 0, np.sum(np.where(finite, acf, 0.0), axis=1) / np.maximum(counts, 1), np.nan)
    below = np.flatnonzero(mean < np.exp(-1.0))
    return int(below[0]) if below.size else n // 6


# 5-point Gauss-Legendre nodes and weights on [0, 1]: exact for the degree-9 products of a
# test function (degree 8) or its slope with a hat function.
_GAUSS_NODES, _GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(5)
_GAUSS_NODES, _GAUSS_WEIGHTS = (_GAUSS_NODES + 1) / 2, _GAUSS_WEIGHTS / 2


def _quadrature_row(s: np.ndarray, f) -> np.ndarray:
    """Entries r_j with sum_j r_j x_j ~ int f(t) x(t) dt over [s_0, s_-1] (odd count of points
    s: an even number of intervals), f a known smooth function (a test function or its slope).

    Composite Simpson, f(s_j) w_j, on pairs of intervals of similar length; exact for piecewise
    quadratics, the classical 1-4-2-...-4-1 h/3 when uniform. On a pair whose lengths differ by
    more than a factor 2 Simpson's end weights (2 - h1/h0, 2 - h0/h1) turn negative and
    amplify the noise without bound (uniformly random times have ratios of 100 and more); such
    a pair integrates f exactly against the linear interpolant of x instead (product
    integration), whose entries are bounded by int |f| and never change sign with f.
    """
    weights, product = np.zeros(s.size), np.zeros(s.size)
    for j in range(0, s.size - 2, 2):
        h0, h1 = s[j + 1] - s[j], s[j + 2] - s[j + 1]
        if 0.5 <= h1 / h0 <= 2.0:
            span = h0 + h1
            weights[j] += span / 6 * (2 - h1 / h0)
            weights[j + 1] += span**3 / (6 * h0 * h1)
            weights[j + 2] += span / 6 * (2 - h0 / h1)
            continue
        for left, h in ((j, h0), (j + 1, h1)):
            values = f(s[left] + h * _GAUSS_NODES) * _GAUSS_WEIGHTS * h
            product[left] += values @ (1 - _GAUSS_NODES)
            product[left + 1] += values @ _GAUSS_NODES
    return f(s) * weights + product
