"""Identified equations as data: safe symbol names, library terms as sympy, the JSON result.

The result (``dynid symbolic --format json``, see CONTRACT.md)::

    {"variables": [...], "inputs": [...], "symbols": {"x0": "original name", ...},
     "discrete": false,
     "equations": [{"lhs": "x", "rhs": "-10.0*x + 10.0*y",
                    "terms": [{"term": "x", "coefficient": -10.0, "feature": "x0"}, ...]}],
     "metrics": {...}}

``symbols`` maps every symbol used in ``lhs``/``rhs``/``term`` to its original column name (an
identity entry when the name is kept). ``rhs`` carries coefficients at full float precision and
parses with ``sympy.sympify(rhs, locals={s: sympy.Symbol(s) for s in symbols})`` (with no locals
too: every symbol is chosen to parse as a plain Symbol). sympy is imported inside functions only.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import sympy

_TRIG = re.compile(r"^(sin|cos)\((\d+) (\w+)\)$")
_FACTOR = re.compile(r"^(\w+)(?:\^(\d+))?$")


def is_plain_symbol(name: str) -> bool:
    """Whether ``name`` can be used as is: an identifier that sympify reads as Symbol(name).

    Rules out keywords and sympy's own names (E, I, S, N, O, Q, pi, beta, gamma, sin, ...).
    """
    if not name.isidentifier() or keyword.iskeyword(name):
        return False
    import sympy

    try:
        parsed = sympy.sympify(name)
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError):
        return False
    return isinstance(parsed, sympy.Symbol) and parsed.name == name


def assign_symbols(
    variables: Sequence[str], inputs: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """A distinct sympy-safe symbol per variable and per input, in order.

    Names that are plain symbols (``is_plain_symbol``) are kept; any other variable i becomes
    ``x{i}`` (input j: ``u{j}``), suffixed ``_1``, ``_2``, ... if that collides with a kept name.
    """
    names = [*variables, *inputs]
    kept = [name if is_plain_symbol(name) else None for name in names]
    used = {name for name in kept if name is not None}
    if len(used) < sum(name is not None for name in kept):  # duplicate column names
        raise ValueError("variable and input names must be distinct")
    symbols: list[str] = []
    for position, (name, keep) in enumerate(zip(names, kept, strict=True)):
        if keep is not None:
            symbols.append(keep)
            continue
        prefix, index = ("x", position) if position < len(variables) else (
            "u",
            position - len(variables),
        )
        candidate, suffix = f"{prefix}{index}", 0
        while candidate in used:
            suffix += 1
            candidate = f"{prefix}{index}_{suffix}"
        used.add(candidate)
        symbols.append(candidate)
    return symbols[: len(variables)], symbols[len(variables) :]


def feature_expression(feature: str, coordinates: Mapping[str, str]) -> sympy.Expr:
    """The sympy expression of one library term named in pysindy's notation.

    feature: "1", "x0", "x0^2 x1" (a monomial: space-separated factors, "^p" powers),
    "sin(1 x0)", "cos(2 u1)" (Fourier terms); coordinates: token -> symbol name, e.g.
    {"x0": "x", "x1": "y"}. Raises ValueError for a name outside this grammar or an unknown token.
    """
    import sympy

    def symbol(token: str) -> sympy.Symbol:
        if token not in coordinates:
            raise ValueError(f"library term {feature!r} uses unknown coordinate {token!r}")
        return sympy.Symbol(coordinates[token])

    if feature == "1":
        return sympy.Integer(1)
    trig = _TRIG.match(feature)
    if trig:
        function = sympy.sin if trig.group(1) == "sin" else sympy.cos
        return function(int(trig.group(2)) * symbol(trig.group(3)))
    expression = sympy.Integer(1)
    for factor in feature.split(" "):
        match = _FACTOR.match(factor)
        if not match:
            raise ValueError(f"cannot read library term {feature!r}")
        expression *= symbol(match.group(1)) ** int(match.group(2) or 1)
    return expression


def default_coordinates(n_variables: int, n_inputs: int) -> list[str]:
    """pysindy's default coordinate tokens: x0..x{d-1} for states, u0..u{m-1} for inputs."""
    return [f"x{i}" for i in range(n_variables)] + [f"u{j}" for j in range(n_inputs)]


def build_result(
    variables: Sequence[str],
    inputs: Sequence[str],
    feature_names: Sequence[str],
    coefficients: np.ndarray,
    *,
    discrete: bool = False,
    metrics: Mapping[str, Any] | None = None,
    coordinates: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The JSON-ready equations of dx/dt = coefficients @ features (or x[k+1] = ...).

    coefficients: (d, n_features), row i is the equation of variables[i]; feature_names:
    (n_features,) in pysindy's notation over ``coordinates`` (default: x0.., then u0..).
    Zero coefficients are left out; an equation with none has rhs "0".
    """
    coefficients = np.asarray(coefficients, dtype=float)
    if coefficients.shape != (len(variables), len(feature_names)):
        raise ValueError(
            f"coefficients have shape {coefficients.shape}, expected "
            f"({len(variables)}, {len(feature_names)})"
        )
    tokens = list(coordinates or default_coordinates(len(variables), len(inputs)))
    var_symbols, input_symbols = assign_symbols(variables, inputs)
    coordinate_symbols = dict(zip(tokens, [*var_symbols, *input_symbols], strict=True))
    terms = [str(feature_expression(f, coordinate_symbols)) for f in feature_names]
    return assemble_result(
        variables, inputs, terms, list(feature_names), coefficients, discrete=discrete, metrics=metrics
    )


def build_term_result(
    variables: Sequence[str],
    inputs: Sequence[str],
    expressions: Sequence[str],
    coefficients: np.ndarray,
    *,
    discrete: bool = False,
    metrics: Mapping[str, Any] | None = None,
    term_details: Sequence[Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """``build_result`` for terms given as expressions over coordinates x0.., u0.. (as the
    ``dynid.symbolic.library`` term sets write them, constants substituted).

    term_details: per equation, per term (same order as ``expressions``) extra JSON fields for
    the term entry, e.g. ``inclusion_probability`` and ``interval`` (only nonzero terms are used).
    """
    import sympy

    from dynid.symbolic.user_terms import parse_coordinate_expression

    coefficients = np.asarray(coefficients, dtype=float)
    var_symbols, input_symbols = assign_symbols(variables, inputs)
    tokens = default_coordinates(len(variables), len(inputs))
    substitution = {
        sympy.Symbol(token): sympy.Symbol(symbol)
        for token, symbol in zip(tokens, [*var_symbols, *input_symbols], strict=True)
    }
    terms = [
        str(parse_coordinate_expression(e, len(variables), len(inputs)).xreplace(substitution))
        for e in expressions
    ]
    return assemble_result(
        variables, inputs, terms, list(expressions), coefficients,
        discrete=discrete, metrics=metrics, term_details=term_details,
    )


def assemble_result(
    variables: Sequence[str],
    inputs: Sequence[str],
    terms: list[str],
    features: list[str],
    coefficients: np.ndarray,
    *,
    discrete: bool,
    metrics: Mapping[str, Any] | None,
    term_details: Sequence[Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The result dict from terms already written in the output symbols (``terms``, as
    ``assign_symbols`` names the variables); ``term_details[i][k]``: extra entries of term k
    in equation i (intervals, inclusion probabilities)."""
    var_symbols, input_symbols = assign_symbols(variables, inputs)
    equations = []
    for i, (lhs, row) in enumerate(zip(var_symbols, coefficients, strict=True)):
        kept = np.flatnonzero(row)
        entries = []
        for k in kept:
            entry = {"term": terms[k], "coefficient": float(row[k]), "feature": features[k]}
            if term_details is not None:
                entry.update(term_details[i][k])
            entries.append(entry)
        equations.append(
            {
                "lhs": lhs,
                "rhs": _join_rhs([(terms[k], float(row[k])) for k in kept]),
                "terms": entries,
            }
        )
    return {
        "variables": list(variables),
        "inputs": list(inputs),
        "symbols": dict(zip([*var_symbols, *input_symbols], [*variables, *inputs], strict=True)),
        "discrete": bool(discrete),
        "equations": equations,
        "metrics": dict(metrics or {}),
    }


def equations_result(model: Any) -> dict[str, Any]:
    """The result of a fitted equation backend: its own ``equations_result()`` when it has one
    (the ``symbolic`` backend), else ``build_result`` from a SINDy-type backend's
    ``variables_``, ``inputs_``, ``feature_names_``, ``coefficients_`` (d, n_features),
    ``discrete_`` and ``metrics_``.
    """
    if hasattr(model, "equations_result"):
        return model.equations_result()
    return build_result(
        model.variables_,
        model.inputs_,
        model.feature_names_,
        model.coefficients_,
        discrete=getattr(model, "discrete_", False),
        metrics=model.metrics_,
    )


def _join_rhs(terms: list[tuple[str, float]]) -> str:
    """"c1*t1 + c2*t2 - ..." with repr-precision coefficients; "1" terms are bare constants."""
    text = ""
    for term, c in terms:
        magnitude = repr(abs(c)) if term == "1" else f"{abs(c)!r}*{term}"
        if not text:
            text = f"-{magnitude}" if c < 0 else magnitude
        else:
            text += f" - {magnitude}" if c < 0 else f" + {magnitude}"
    return text or "0"
