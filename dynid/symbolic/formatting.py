"""Human renderings of an equations result (see ``expressions.build_result``): text and LaTeX.

Both read only the result dict, so they work as well on a result loaded back from JSON.
Coefficients are shown to ``precision`` significant digits (default 6); a coefficient of exactly 1 after rounding is
left out of a non-constant term ("x y", not "1 x y").
"""

from __future__ import annotations

from functools import partial
from typing import Any

DEFAULT_PRECISION = 6


def format_text(result: dict[str, Any], precision: int = DEFAULT_PRECISION) -> str:
    """One line per equation, "dx/dt = -10 x + 10 y" (maps: "x[k+1] = ..."; PDEs:
    "u_t = -u u_x + 0.1 u_xx"), then symbol notes."""
    number = partial(_number_text, precision=_checked(precision))
    discrete = result.get("discrete", False)
    lines = []
    for equation in result["equations"]:
        lines.append(_equation_line(equation, discrete, number, pde=result.get("pde", False)))
        lines += _uncertainty_lines(equation["terms"], number)
    lines += _symbol_notes(result, "where {symbol} = {name}")
    return "\n".join(lines) + "\n"


def equation_text(equation: dict[str, Any], discrete: bool,
                  precision: int = DEFAULT_PRECISION) -> str:
    """One equation of a result as one plain line: "dx/dt = -10 x + 10 y" or "x[k+1] = ..."."""
    return _equation_line(equation, discrete, partial(_number_text, precision=_checked(precision)))


def _equation_line(equation: dict[str, Any], discrete: bool, number: Any, pde: bool = False) -> str:
    lhs = f"{equation['lhs']}_t" if pde else f"{equation['lhs']}[k+1]" if discrete else f"d{equation['lhs']}/dt"
    pieces = [(_text_term(t["term"]), t["coefficient"]) for t in equation["terms"]]
    return f"{lhs} = {_join(pieces, number, ' ')}"


def _checked(precision: int) -> int:
    from dynid.errors import UsageError

    if not 1 <= precision <= 17:
        raise UsageError(f"--precision {precision}: expected 1 to 17 significant digits")
    return precision


def _uncertainty_lines(terms: list[dict[str, Any]], number: Any) -> list[str]:
    """"    x   -9.99988  95% [-10.0001, -9.9996]  inclusion 1.00" per term, when the result has
    bootstrap uncertainty."""
    lines = []
    for term in terms:
        if "inclusion_probability" not in term:
            continue
        low, high = term["interval"]
        lines.append(
            f"    {_text_term(term['term']):<14} {number(term['coefficient']):>11}"
            f"  95% [{number(low)}, {number(high)}]"
            f"  inclusion {term['inclusion_probability']:.2f}"
        )
    return lines


def format_latex(result: dict[str, Any], precision: int = DEFAULT_PRECISION) -> str:
    r"""One line per equation, "\dot{x} = - 10 x + 10 y" (maps: "{x}_{k+1} = ..."), then notes.

    The notes for renamed symbols are LaTeX comments ("% x0 = temp (K)").
    """
    import sympy

    number = partial(_number_latex, precision=_checked(precision))
    discrete = result.get("discrete", False)
    names = {symbol: sympy.Symbol(symbol) for symbol in result["symbols"]}
    lines = []
    for equation in result["equations"]:
        target = sympy.latex(names[equation["lhs"]])
        lhs = rf"\partial_t {target}" if result.get("pde") else f"{{{target}}}_{{k+1}}" if discrete else rf"\dot{{{target}}}"
        pieces = [
            (sympy.latex(sympy.sympify(t["term"], locals=names)), t["coefficient"])
            for t in equation["terms"]
        ]
        lines.append(f"{lhs} = {_join(pieces, number, ' ')}")
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


def _number_text(value: float, precision: int) -> str:
    return format(value, f".{precision}g")


def _number_latex(value: float, precision: int) -> str:
    mantissa, _, exponent = format(value, f".{precision}g").partition("e")
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
