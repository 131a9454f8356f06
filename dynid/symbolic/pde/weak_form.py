"""The weak form of a PDE on a uniform space-time grid: integrals against compactly supported
test functions on space-time boxes, with every derivative moved onto the test function.

For u_t = sum_j c_j D^a_j f_j(u) (D^a a spatial derivative, f_j a monomial of the fields),
multiply by a test function psi that vanishes with its derivatives on the boundary of a box B
and integrate by parts (WSINDy for PDEs, Messenger & Bortz 2021; Reinbold, Gurevich & Grigoriev
2020; pysindy's WeakPDELibrary):

    -int_B psi_t u  =  sum_j c_j (-1)^|a_j| int_B (D^a_j psi) f_j(u)

Both sides are integrals of the data itself, never of its derivatives, so noise is averaged,
not amplified. psi is separable, psi(t, x, y) = phi_t(t) phi_x(x) phi_y(y), each factor the
bump phi(s) = (1 - s^2)^p on its box's half-width (s in [-1, 1]); phi vanishes to order p at
both ends, so by-parts is exact for derivatives up to p - 1 and the trapezoid rule (the
quadrature here) has no end corrections below order p (Euler-Maclaurin). With the quadrature
weight folded in, each axis is a matrix K^(k) (boxes, samples) holding D^k phi_box(x_j) h, and
the integral of a field f over every box at once is f contracted with one such matrix per axis.

Boxes: half-width ``m`` samples per axis, centres every ``m // 2`` samples (overlapping, as in
WSINDy); ``default_half_widths`` gives m.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import Polynomial

from dynid.errors import DataError
from dynid.symbolic.autocorrelation import operator_correlation_time

# Boxes per axis that the default half-width aims at, and the least half-width (samples): a
# bump of degree p needs several samples per unit of s for the trapezoid rule to resolve it.
BOXES_PER_AXIS = 8
MIN_HALF_WIDTH = 6


@dataclass(frozen=True)
class AxisKernels:
    """One axis's test functions: ``matrices[k]`` (n_boxes, n) holds D^k phi_box(x_j) * step,
    for k = 0 .. max order; ``half_width`` and ``stride`` in samples."""

    matrices: tuple[np.ndarray, ...]
    half_width: int
    stride: int

    @property
    def n_boxes(self) -> int:
        return self.matrices[0].shape[0]

    @property
    def overlap(self) -> int:
        """How many neighbouring boxes on each side share samples with a box."""
        return -(-2 * self.half_width // self.stride) - 1


def axis_kernels(n: int, step: float, half_width: int, degree: int, max_order: int) -> AxisKernels:
    """Test-function matrices for an axis of n samples ``step`` apart (see ``AxisKernels``);
    DataError when the axis is too short for one box."""
    m = int(half_width)
    if n < 2 * m + 1:
        raise DataError(f"{n} samples along an axis are too few for weak-form boxes of {2 * m + 1}")
    stride = max(1, m // 2)
    s = np.arange(-m, m + 1) / m  # local coordinate of the box's samples
    bump = Polynomial([1.0, 0.0, -1.0]) ** degree
    starts = np.arange(0, n - 2 * m, stride)
    matrices = []
    for order in range(max_order + 1):
        # d/dx = d/ds / (m step); the trapezoid weight is step (the end values are 0).
        row = bump.deriv(order)(s) / (m * step) ** order * step
        matrix = np.zeros((starts.size, n))
        for b, start in enumerate(starts):
            matrix[b, start : start + 2 * m + 1] = row
        matrices.append(matrix)
    return AxisKernels(tuple(matrices), m, stride)


def default_half_widths(shape: tuple[int, ...], degree: int) -> tuple[int, ...]:
    """Half-width (samples) per axis: about n / (2 BOXES_PER_AXIS) so that ~BOXES_PER_AXIS
    disjoint boxes (twice as many overlapping ones) fit, at least ``MIN_HALF_WIDTH`` and the
    bump's degree."""
    return tuple(max(MIN_HALF_WIDTH, degree, n // (2 * BOXES_PER_AXIS)) for n in shape)


def integrate(field: np.ndarray, kernels: list[AxisKernels], orders: tuple[int, ...]) -> np.ndarray:
    """int_B (D^orders psi) field over every box: field (n_t, *n_space) contracted with
    ``kernels[a].matrices[orders[a]]`` along each axis a; returns (n_boxes_t * prod n_boxes_space,)
    in time-major order."""
    result = field
    for axis, (kernel, order) in enumerate(zip(kernels, orders, strict=True)):
        result = np.moveaxis(np.tensordot(kernel.matrices[order], result, axes=(1, axis)), 0, axis)
    return result.ravel()


def noise_correlation_time(kernels: list[AxisKernels], orders: tuple[int, ...]) -> float:
    """Autocorrelation time (rows) of ``integrate(e, kernels, orders)`` for white noise e: the
    product over axes of each axis's (separable covariance), so n_rows / it is the effective
    number of independent rows."""
    tau = 1.0
    for kernel, order in zip(kernels, orders, strict=True):
        tau *= operator_correlation_time(kernel.matrices[order])
    return tau
