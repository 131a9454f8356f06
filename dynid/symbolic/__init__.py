"""Symbolic output: identified equations as JSON, text and LaTeX, with sympy-safe symbols.

``equations_result(model)`` gives the ``dynid symbolic`` JSON of a fitted SINDy-type backend;
``format_text`` / ``format_latex`` render it. sympy is imported on first use, not here.
"""

from dynid.symbolic.expressions import (
    assign_symbols,
    build_result,
    build_term_result,
    equations_result,
    feature_expression,
    is_plain_symbol,
)
from dynid.symbolic.formatting import format_latex, format_text

__all__ = [
    "assign_symbols",
    "build_result",
    "build_term_result",
    "equations_result",
    "feature_expression",
    "format_latex",
    "format_text",
    "is_plain_symbol",
]
