"""Governing equations from data (``dynid symbolic``), in parts as pysindy has them.

``identify`` orchestrates the pipeline (``options.SymbolicParams``): regression ``rows`` over
the time ``derivatives`` (one module per method) or the ``weak_form``, cross-validation
``folds``, term ``library`` with user terms and ``profile`` of term families, sparse
``solvers`` (one module per family), model ``selection``, the per-equation ``choice`` of
library and terms with constants ``refine``-d, ``shooting`` refinement (``shooting_step``),
the bootstrap ``ensemble``; ``noise`` and ``autocorrelation`` estimate what the data's noise
does, ``cache`` keeps compiled functions and subset searches.

Exported here, the output: ``equations_result(model)`` gives the ``dynid symbolic`` JSON of a
fitted SINDy-type backend; ``format_text`` / ``format_latex`` render it. sympy is imported on
first use, not here.
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
