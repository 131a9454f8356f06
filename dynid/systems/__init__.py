"""Simulated systems with known dynamics: the catalogue behind ``dynid simulate``.

``simulate(name, ...)`` gives a ``Simulation``; ``rhs(name)`` the true dynamics to compare
identified models with; ``SYSTEMS`` lists every ``SystemSpec``. ``linear_matrix``,
``var_coefficients`` and ``var_graph`` give the ground truth of the ``linear`` and ``var``
systems, ``oscillator_forcing`` the input of ``forced-oscillator``.
"""

from __future__ import annotations

from ._spec import Simulation, SystemSpec
from .catalogue import SYSTEMS, rhs, simulate
from .maps import VAR_BURN_IN, var_coefficients, var_graph
from .odes import linear_matrix, oscillator_forcing

__all__ = [
    "SYSTEMS",
    "Simulation",
    "SystemSpec",
    "VAR_BURN_IN",
    "linear_matrix",
    "oscillator_forcing",
    "rhs",
    "simulate",
    "var_coefficients",
    "var_graph",
]
