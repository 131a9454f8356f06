"""Which forward-backward passes a fit runs: numba's compiled ones (``forward_backward_numba``)
or the LAPACK-banded numpy ones (``forward_backward_lapack``); the two agree to rounding (1e-10,
tested).

The compiled passes cost 10-25x less CPU per pass but a price once per process: importing
numba and loading its cached machine code, ``COMPILED_START`` (2.5 s the first time ever, when
it compiles). A fit of a few hundred samples, or of a fixed number of states (tens of passes,
up to 20,000 samples), never earns that back; ``states=auto`` (hundreds of passes) does from
about 2,000 samples: the crossover is where one fit's passes cover about COMPILED_START /
SAVED_PER_VALUE = 1.4 million samples x states. How many passes a fit will run is unknown
beforehand (EM stops when it converges), so ``Passes`` decides as it goes, by the rent-or-buy
rule: the numpy passes while the CPU time the compiled ones would have saved so far, counting
the next pass, stays below ``COMPILED_START``; the compiled ones from then on. That never costs
much more than twice the cheaper of the two choices made in hindsight, and nothing extra where
numba cannot pay (a 500-sample ``states=3`` fit: 0.09 CPU s, against 0.74 s with numba).

The rule counts the fit's own passes only, not whether this process loaded numba for an earlier
fit: a fit gives the same numbers whatever ran before it in the process.

Measured with ``benchmarks/hmm_first_call.py`` (CPU seconds, ``OPENBLAS_NUM_THREADS=1``, the
shared 2-core machine under load; benchmarks/README.md, "numba's start-up against the numpy
passes").
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from dynid.models.latent import forward_backward_lapack

# (initial (K,), transition (K, K), log densities (steps, K), probabilities out (steps, K),
# transitions out (K, K)) -> log-likelihood: both modules' ``forward_backward``.
ForwardBackward = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], float]

# CPU s of a process's first compiled pass: importing numba and loading the cached code
# (measured 0.6-0.9 s; compiling, once per installation: 2.5-2.7 s).
COMPILED_START = 0.7
# CPU s the compiled passes save per pass (numpy's per-call overhead; measured 0.2-0.4 ms) and
# per sample x state (0.4-0.7 us; 100-10,000 steps x 2, 3, 6 states).
SAVED_PER_PASS = 3e-4
SAVED_PER_VALUE = 5e-7


class Passes:
    """The forward-backward passes of one fit (module docstring); ``fixed``: always these."""

    def __init__(self, fixed: ForwardBackward | None = None) -> None:
        self._fixed = fixed
        self._saved = 0.0  # CPU s the compiled passes would have saved over the passes so far

    def next(self, steps: int, states: int) -> ForwardBackward:
        """The implementation for the next pass, over ``steps`` samples and ``states`` states."""
        if self._fixed is not None:
            return self._fixed
        self._saved += SAVED_PER_PASS + SAVED_PER_VALUE * steps * states
        return compiled() if self._saved >= COMPILED_START else forward_backward_lapack.forward_backward


@functools.cache
def compiled() -> ForwardBackward:
    """numba's compiled forward-backward, or the LAPACK-banded one where numba is missing (or
    cannot cache its code). numba is imported here, at the first compiled pass, not with this
    module: importing it costs about half a second that ``dynid --help`` and models without a
    chain need not pay."""
    try:
        from dynid.models.latent import forward_backward_numba
    # RuntimeError: numba finds no writable place for its cache ("no locator available").
    except (ImportError, RuntimeError):
        return forward_backward_lapack.forward_backward
    return forward_backward_numba.forward_backward
