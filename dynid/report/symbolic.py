"""Identified equations as a scientist would share them: typeset as MathML (``dx/dt =`` or
``x[k+1] =``; no script or font from outside, browsers render it natively), the terms with
their 95% intervals and inclusion probabilities, each equation's Pareto front of complexity
against held-out error, and the selection per equation. Works on the ``symbolic`` JSON
document (``dynid symbolic --format json``), which ``equation_document`` also makes of a fitted
equation backend (``symbolic``, ``sindy``) read from a model file."""

from __future__ import annotations

from typing import Any

import numpy as np

from dynid.models.base import Backend
from dynid.report.html import Markup, cut, figure, flatten, h3, note, table
from dynid.report.svg import PALETTE, Series, esc, fmt, line_plot
from dynid.symbolic.formatting import equation_text

# Term fields that are shown in their own column or are internal (the library's coordinates).
_TERM_COLUMNS = {"term": "term", "coefficient": "coefficient", "interval": "95% interval",
                 "inclusion_probability": "inclusion probability"}
_INTERNAL = {"feature"}
# Significant digits of the typeset coefficients (and of their plain-text alttext).
_DIGITS = 5
# Per-equation metrics shown as a figure rather than in the selection table.
_FRONT = "pareto"


def equation_document(model: Backend) -> dict[str, Any] | None:
    """The ``symbolic`` document of a fitted equation backend (one with ``equations_result``
    or SINDy's ``feature_names_`` and ``coefficients_``); None for any other model."""
    from dynid.symbolic import equations_result

    if hasattr(model, "equations_result") or (
        hasattr(model, "feature_names_") and hasattr(model, "coefficients_")
    ):
        return equations_result(model)
    return None


# -- MathML --------------------------------------------------------------------------------------
def _parsed(text: str, symbols: dict[str, str], *, evaluate: bool = True) -> Any:
    """``text`` as a sympy expression over the document's symbols, or None when it does not
    parse (shown as plain text then). ``evaluate=False`` keeps a sum's terms in their order."""
    import sympy

    try:
        return sympy.sympify(text, locals={s: sympy.Symbol(s) for s in symbols}, evaluate=evaluate)
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError):
        return None


def _mathml(expression: Any) -> str:
    from sympy.printing.mathml import mathml

    return mathml(expression, printer="presentation")


def lhs_mathml(symbol: str, discrete: bool) -> str:
    """``d symbol / dt``, or ``symbol[k+1]`` for a discrete-time map."""
    import sympy

    name = _mathml(sympy.Symbol(symbol))
    if discrete:
        return f"{name}<mo>[</mo><mi>k</mi><mo>+</mo><mn>1</mn><mo>]</mo>"
    return f"<mfrac><mrow><mi>d</mi>{name}</mrow><mrow><mi>d</mi><mi>t</mi></mrow></mfrac>"


def equation_mathml(equation: dict[str, Any], symbols: dict[str, str], discrete: bool) -> str:
    """One equation of the document as a block ``<math>``: its left side, then each term's
    coefficient (``_DIGITS`` significant digits) times the term, signs pulled out."""
    rhs = []
    for k, term in enumerate(equation.get("terms", [])):
        c = float(term["coefficient"])
        sign = "<mo>\u2212</mo>" if c < 0 else ("<mo>+</mo>" if k else "")
        # A coefficient reads rounded ("1", not fmt's "1 - 3e-07", which is for scores).
        magnitude = f"<mn>{abs(c):.{_DIGITS}g}</mn>"
        expression = _parsed(str(term["term"]), symbols)
        if expression is None:
            factor = f"<mtext>{esc(term['term'])}</mtext>"
        else:
            factor = _mathml(expression)
            if expression.is_Add:  # a sum as one term needs its parentheses
                factor = f"<mrow><mo>(</mo>{factor}<mo>)</mo></mrow>"
        one = expression is not None and expression == 1
        rhs.append(sign + magnitude + ("" if one else f"<mo>&#x2062;</mo>{factor}"))
    right = "".join(rhs) or "<mn>0</mn>"
    left = lhs_mathml(str(equation["lhs"]), discrete)
    # The plain line as alttext: read by screen readers, found by search, kept when copied.
    alt = esc(equation_text(equation, discrete, precision=_DIGITS))
    return (f'<math display="block" alttext="{alt}"><mrow>{left}<mo>=</mo>{right}</mrow>'
            "</math>")


def derivative_text(symbol: str, discrete: bool) -> str:
    """The left side as plain text: ``dx/dt`` or ``x[k+1]``."""
    if discrete:
        return f"{symbol}[k+1]"
    return f"d{symbol}/dt" if symbol.isidentifier() else f"d({symbol})/dt"


# -- tables and the Pareto front -----------------------------------------------------------------
def terms_table(doc: dict[str, Any]) -> str:
    """One row per term: equation, term, coefficient, 95% interval, inclusion probability,
    then any other field the terms carry (in order of first appearance)."""
    discrete = bool(doc.get("discrete"))
    entries = [(derivative_text(str(eq["lhs"]), discrete), term)
               for eq in doc["equations"] for term in eq.get("terms", [])]
    if not entries:
        return note("No terms: every equation is 0.")
    keys = [k for k in _TERM_COLUMNS if any(k in term for _, term in entries)]
    for _, term in entries:
        keys.extend(k for k in term if k not in keys and k not in _INTERNAL)
    rows, cut_note = cut([(lhs, *(term.get(k) for k in keys)) for lhs, term in entries], "terms")
    header = ["equation", *(_TERM_COLUMNS.get(k, k) for k in keys)]
    return table(rows, header=header) + cut_note


def _equation_metrics(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-equation entries of the document's metrics (selection, Pareto front), if any."""
    entries = (doc.get("metrics") or {}).get("equations")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def selection_table(doc: dict[str, Any]) -> str:
    """One row per equation: the library chosen, its criterion, held-out R^2, ... (every
    scalar field of the equation's metrics, the Pareto front aside)."""
    entries = _equation_metrics(doc)
    keys: list[str] = ["variable"] if any("variable" in e for e in entries) else []
    for entry in entries:
        keys.extend(k for k, v in entry.items() if k not in keys and k != _FRONT
                    and (v is None or isinstance(v, (str, int, float, bool))))
    if not entries or not keys:
        return ""
    return h3("Selection per equation") + table(
        [tuple(entry.get(k) for k in keys) for entry in entries], header=keys)


def pareto_figure(doc: dict[str, Any]) -> str:
    """Each equation's Pareto front: held-out RMSE (log scale) against the number of terms,
    the chosen model dotted; "" when the document has no front."""
    discrete = bool(doc.get("discrete"))
    series: list[Series] = []
    for index, entry in enumerate(_equation_metrics(doc)):
        front = [p for p in entry.get(_FRONT) or [] if isinstance(p, dict)]
        points = [(float(p["n_terms"]), float(p["validation_rmse"])) for p in front
                  if isinstance(p.get("n_terms"), (int, float))
                  and isinstance(p.get("validation_rmse"), (int, float))]
        if not points:
            continue
        color = PALETTE[index % len(PALETTE)]
        x, rmse = np.array(points).T
        with np.errstate(divide="ignore"):
            y = np.where(rmse > 0, np.log10(np.where(rmse > 0, rmse, 1.0)), np.nan)
        label = derivative_text(str(entry.get("variable", index)), discrete)
        series.append(Series(label, x, y, color=color, marker=2.5))
        chosen = [k for k, p in enumerate(front) if "criterion" in entry
                  and p.get("criterion") == entry["criterion"]]
        if chosen:  # a larger dot, no legend entry of its own
            k = chosen[0]
            series.append(Series("", x[k : k + 1], y[k : k + 1], color=color, marker=6.0))
    if not series:
        return ""
    return h3("Pareto front") + figure(
        line_plot(series, title="Pareto front", xlabel="terms in the equation",
                  ylabel="log10 held-out RMSE", width=520, height=280),
        "Each equation's best model of every size, by its error on held-out data; the large "
        "dot marks the model chosen by the selection criterion.",
    )


def without_equations(metrics: dict[str, Any] | None) -> dict[str, Any]:
    """Metrics less their per-equation entries (shown as the selection table and the Pareto
    front instead)."""
    return {k: v for k, v in (metrics or {}).items() if k != "equations"}


def equations_block(equations: list[dict[str, Any]], symbols: dict[str, str], discrete: bool) -> str:
    """The ``equations`` of a document (``lhs`` and ``terms`` each) typeset, and a note naming
    the variables that ``symbols`` (symbol -> name) writes as another symbol."""
    renamed = {k: v for k, v in symbols.items() if k != v}
    math = "".join(equation_mathml(eq, symbols, discrete) for eq in equations)
    return Markup(f'<div class="equations">{math}</div>') + (
        note("Symbols: " + ", ".join(f"{k} = {v}" for k, v in renamed.items()) + ".") if renamed else "")


def equations_of_rhs(rhs: dict[str, str], symbols: dict[str, str]) -> list[dict[str, Any]] | None:
    """Equations ``{"lhs", "terms": [{"term", "coefficient"}]}`` (as ``dynid symbolic`` writes
    them) from right-hand sides, variable name -> rhs over ``symbols`` (symbol -> name; a name
    missing from it is its own symbol); None when one does not parse (files of older versions
    wrote names that are not symbols)."""
    import sympy

    symbol_of = {name: symbol for symbol, name in symbols.items()}
    equations = []
    for name, text in rhs.items():
        expression = _parsed(str(text), {**symbols, **{n: n for n in rhs if n not in symbol_of}}, evaluate=False)
        if expression is None:
            return None
        # Unevaluated, the sum keeps the written order; each term evaluated splits off its number.
        pairs = [term.doit().as_coeff_Mul() for term in sympy.Add.make_args(expression)]
        terms = [{"term": str(factor), "coefficient": float(c)} for c, factor in pairs if c != 0]
        equations.append({"lhs": symbol_of.get(name, name), "terms": terms})
    return equations


def symbolic_body(doc: dict[str, Any], *, with_metrics: bool = True) -> str:
    """The document as HTML: equations typeset (under the caller's heading), terms, Pareto
    front, selection per equation and (``with_metrics``) the remaining metrics as a table (no
    raw structures)."""
    symbols = {str(k): str(v) for k, v in (doc.get("symbols") or {}).items()}
    parts = [
        equations_block(doc["equations"], symbols, bool(doc.get("discrete"))),
        h3("Terms"),
        terms_table(doc),
        pareto_figure(doc),
        selection_table(doc),
    ]
    metrics = flatten(without_equations(doc.get("metrics")))
    if with_metrics and metrics:
        parts += [h3("Metrics"), table(metrics, row_headers=True)]
    return "".join(parts)
