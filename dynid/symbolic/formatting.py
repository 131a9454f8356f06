"""Human renderings of an equations result (see ``expressions.build_result``): text and LaTeX.

Both read only the result dict, so they work as well on a result loaded back from JSON.
Coefficients are shown to 6 significant digits; a coefficient of exactly 1 after rounding is
left out of a non-constant term ("x y", not "1 x y").
"""

from __future__ import annotations

from typing import Any


def format_text(result: dict[str, Any]) -> str:
    """One line per equation, "dx/dt = -10 x + 10 y" (maps: "x[k+1] = ..."), then symbol notes."""
    discrete = result.get("discrete", False)
    lines = []
    for equation in result["equations"]:
        lhs = f"{equation['lhs']}[k+1]" if discrete else f"d{equation['lhs']}/dt"
        pieces = [(_text_term(t["term"]), t["coefficient"]) for t in equation["terms"]]
        lines.append(f"{lhs} = {_join(pieces, _number_text, ' ')}")
        lines += _uncertainty_lines(equation["terms"])
    lines += _symbol_notes(result, "where {symbol} = {name}")
    return "\n".join(lines) + "\n"


def _uncertainty_lines(terms: list[dict[str, Any]]) -> list[str]:
    """"    x   -9.99988  95% [-10.0001, -9.9996]  inclusion 1.00" per term, when the result has
    bootstrap uncertainty."""
    lines = []
    for term in terms:
        if "inclusion_probability" not in term:
            continue
        low, high = term["interval"]
        lines.append(
            f"    {_text_term(term['term']):<14} {_number_text(term['coefficient']):>11}"
            f"  95% [{_number_text(low)}, {_number_text(high)}]"
            f"  inclusion {term['inclusion_probability']:.2f}"
        )
    return lines


def format_latex(result: dict[str, Any]) -> str:
    r"""One line per equation, "\dot{x} = - 10 x + 10 y" (maps: "{x}_{k+1} = ..."), then notes.

    The notes for renamed symbols are LaTeX comments ("% x0 = temp (K)").
    """
    import sympy

    discrete = result.get("discrete", False)
    names = {symbol: sympy.Symbol(symbol) for symbol in result["symbols"]}
    lines = []
    for equation in result["equations"]:
        target = sympy.latex(names[equation["lhs"]])
        lhs = f"{{{target}}}_{{k+1}}" if discrete else rf"\dot{{{target}}}"
        pieces = [
            (sympy.latex(sympy.sympify(t["term"], locals=names)), t["coefficient"])
            for t in equation["terms"]
        ]
        lines.append(f"{lhs} = {_join(pieces, _number_latex, ' ')}")
    lines += _symbol_notes(result, "% {symbol} = {name}")
    return "\n".join(lines) + "\n"


def _join(pieces: list[tuple[str, float]], number: Any, times: str) -> str:
    """Signed sum of coefficient-term pairs, with term "1" as a bare constant."""
    text = ""
    for term, c in pieces:
        magnitude = number(abs(c))
        if term != "1":
            magnitude = term if magnitude == "1" else f"{magnitude}{times}{term}"
        if not text:
            text = f"-{magnitude}" if c < 0 else magnitude
        else:
            text += f" - {magnitude}" if c < 0 else f" + {magnitude}"
    return text or "0"


def _number_text(value: float) -> str:
    return format(value, ".6g")


def _number_latex(value: float) -> str:
    mantissa, _, exponent = format(value, ".6g").partition("e")
    return rf"{mantissa} \cdot 10^{{{int(exponent)}}}" if exponent else mantissa


def _text_term(term: str) -> str:
    """sympy's "x**2*y" / "sin(2*x)" as "x^2 y" / "sin(2 x)"."""
    return term.replace("**", "^").replace("*", " ")


def _symbol_notes(result: dict[str, Any], template: str) -> list[str]:
    return [
        template.format(symbol=symbol, name=" ".join(name.split()))
        for symbol, name in result["symbols"].items()
        if symbol != name
    ]
