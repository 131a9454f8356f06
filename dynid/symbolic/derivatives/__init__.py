"""Time derivatives of noisy, short, possibly irregularly sampled records, and smoothed states.

Every method gives both the derivative and the denoised states it implies (``smooth``), so the
term library can be evaluated on states as clean as the derivative it is regressed on.

Methods (``METHODS``), one module each, all vectorised over the d columns, all working on
150-sample records: ``finite_difference``, ``savgol``, ``spectral`` (uniform sampling only),
``tv`` and ``spline``. ``base`` dispatches to them (``differentiate``, ``smooth``) and picks one
from the estimated noise (``choose_method``, rule and reasons in its docstring); ``stencils``
holds the local polynomial fits on the actual times that finite differences and Savitzky-Golay
share.
"""

from dynid.symbolic.derivatives.base import (
    METHODS,
    choose_method,
    derivative_correlation_time,
    differentiate,
    finite_difference_suffices,
    smooth,
)
from dynid.symbolic.derivatives.stencils import Stencil, local_polynomial

__all__ = [
    "METHODS",
    "Stencil",
    "choose_method",
    "derivative_correlation_time",
    "differentiate",
    "finite_difference_suffices",
    "local_polynomial",
    "smooth",
]
