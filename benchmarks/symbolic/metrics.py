"""Scoring identified equations against the truth: structure, coefficients, re-simulation R^2.

Structure rule (documented in the report):

* Each right-hand side is expanded (``sympy.expand``) and split into additive terms
  (``Add.make_args``). A term is written coefficient * N / D with N and D polynomials in the
  states and in the non-polynomial atoms that occur (sin(..), cos(..), exp(..), log(..));
  ``together``/``fraction`` give N and D, both are scaled to leading coefficient 1 (lex order)
  and the scale moves into the coefficient. So 1.5*x/(0.5 + x), 3*x/(1 + 2*x) all become
  coefficient * x/(x + c).
* A term's *shape* is (the monomials of N, the monomials of D, the atoms), i.e. the term with
  every constant inside it replaced by a placeholder; its *inner constants* are the remaining
  (non-leading) coefficients of N and D (the c above). Numbers inside sin/cos/exp/log arguments
  are part of the atom (rounded to 3 decimals).
* Terms whose |coefficient| < 1e-12 are absent.
* An equation is recovered when the multiset of shapes equals the truth's and every inner
  constant is within a factor of 2 of the true one (same rational shape, a "slightly different
  constant"); a system is recovered when all its equations are.

Coefficient error (recovered systems only, else NaN): the largest relative error over all true
terms of the outer coefficient and of the inner constants.

R^2 of a re-simulated trajectory: per variable 1 - SSE/SST against the noise-free truth,
averaged over variables, clipped at -1; NaN/inf or a diverged simulation count as -1.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

ZERO = 1e-12
CONSTANT_FACTOR = 2.0
R2_FLOOR = -1.0
_ATOMS = (sp.sin, sp.cos, sp.exp, sp.log)


@dataclass(frozen=True)
class Term:
    shape: tuple
    coefficient: float
    constants: tuple[float, ...]
    label: str  # readable, for failure lists


@dataclass
class Comparison:
    recovered: bool
    coefficient_error: float
    missing: list[str] = field(default_factory=list)  # "eq i: term" present in truth only
    spurious: list[str] = field(default_factory=list)  # "eq i: term" present in the result only
    wrong_constants: list[str] = field(default_factory=list)


def terms(expression, symbols) -> list[Term]:
    """The additive terms of ``expression`` with their shapes (see the module docstring)."""
    out = []
    for term in sp.Add.make_args(sp.expand(expression)):
        if term == 0:
            continue
        coefficient, rest = term.as_coeff_Mul()
        parsed = _split(rest, symbols)
        if parsed is None:
            out.append(_opaque(float(coefficient), rest))
            continue
        scale, shape, constants, normalized = parsed
        value = float(coefficient) * scale
        if abs(value) >= ZERO:
            out.append(Term(shape, value, constants, _label(normalized)))
    return out


def _split(rest, symbols):
    """(scale, shape, inner constants, N/D scaled to leading coefficients 1) of a
    coefficient-free term, or None if it is not of the N/D form."""
    rest = rest.replace(_is_atom, _canonical_atom)
    numerator, denominator = sp.fraction(sp.together(rest))
    atoms = sorted(filter(_is_atom, rest.atoms(*_ATOMS)), key=str)
    generators = [*symbols, *atoms]
    try:
        polys = [sp.Poly(part, *generators) for part in (numerator, denominator)]
    except sp.PolynomialError:
        return None
    if any(p.is_zero or not all(c.is_number for c in p.coeffs()) for p in polys):
        return None
    leads = [float(p.LC(order="lex")) for p in polys]
    if not all(math.isfinite(v) and v != 0 for v in leads):
        return None
    shape: list = [tuple(str(a) for a in atoms)]
    constants: list[float] = []
    for poly, lead in zip(polys, leads):
        monomials = poly.monoms(order="lex")
        shape.append(tuple(monomials))
        constants += [float(c) / lead for c in poly.coeffs(order="lex")[1:]]
    normalized = _monic(polys[0], leads[0], generators) / _monic(polys[1], leads[1], generators)
    return leads[0] / leads[1], tuple(shape), tuple(constants), normalized


def _is_atom(e) -> bool:
    """A non-polynomial function of the states (log(10) is a number, not an atom)."""
    return e.func in _ATOMS and bool(e.free_symbols)


def _canonical_atom(atom):
    """sin(1.0*x0) -> sin(x0): numbers inside function arguments as rationals (3 decimals)."""
    argument = atom.args[0].xreplace({f: sp.Rational(round(float(f), 3)).limit_denominator(1000)
                                      for f in atom.args[0].atoms(sp.Float)})
    return atom.func(argument)


def _opaque(coefficient: float, rest) -> Term:
    """A term outside the N/D form (e.g. sqrt): its shape is its text with numbers blanked."""
    # Floats and non-integer rationals alike (x**(3/2) in a truth, x**1.5 in a fit).
    numbers = sorted((n for n in rest.atoms(sp.Number) if not n.is_Integer), key=str)
    blank = rest.xreplace({f: sp.Symbol(f"c{k}") for k, f in enumerate(numbers)})
    return Term(("opaque", sp.srepr(blank)), coefficient, tuple(float(f) for f in numbers), _label(rest))


def _monic(poly, lead: float, generators):
    """The polynomial divided by its leading coefficient, numbers rounded for display."""
    return sp.Add(*[
        _display_number(float(c) / lead) * sp.Mul(*[g**e for g, e in zip(generators, monomial)])
        for monomial, c in zip(poly.monoms(order="lex"), poly.coeffs(order="lex"))
    ])


def _display_number(value: float):
    return sp.Integer(round(value)) if value == round(value) else sp.Float(value, 3)


def _label(rest) -> str:
    return str(rest.xreplace({f: sp.Float(f, 3) for f in rest.atoms(sp.Float)}))


def compare(truth: list, found: list | None, symbols) -> Comparison:
    """Structure recovery and coefficient error of ``found`` (one expression per equation)."""
    if found is None:
        return Comparison(False, math.nan, missing=["(no model)"])
    result = Comparison(True, 0.0)
    errors: list[float] = []
    for i, (true_rhs, found_rhs) in enumerate(zip(truth, found, strict=True)):
        expected = _by_shape(terms(true_rhs, symbols))
        obtained = _by_shape(terms(found_rhs, symbols))
        for shape, true_terms in expected.items():
            got = obtained.get(shape, [])
            for term in true_terms[len(got):]:
                result.missing.append(f"eq{i}: {term.label}")
            for true_term, found_term in zip(true_terms, got):
                if not _constants_close(true_term.constants, found_term.constants):
                    result.wrong_constants.append(f"eq{i}: {found_term.label} (true {true_term.label})")
                errors.append(_relative(found_term.coefficient, true_term.coefficient))
                errors += [_relative(f, t) for f, t in zip(found_term.constants, true_term.constants)]
        for shape, found_terms in obtained.items():
            extra = found_terms[len(expected.get(shape, [])):]
            result.spurious += [f"eq{i}: {_signed(t)}" for t in extra]
    result.recovered = not (result.missing or result.spurious or result.wrong_constants)
    result.coefficient_error = max(errors, default=0.0) if result.recovered else math.nan
    return result


def _signed(term: Term) -> str:
    return f"{term.coefficient:.3g}" + ("" if term.label == "1" else f"*{term.label}")


def _by_shape(items: list[Term]) -> dict[tuple, list[Term]]:
    grouped: dict[tuple, list[Term]] = defaultdict(list)
    for item in items:
        grouped[item.shape].append(item)
    return grouped


def _constants_close(true: tuple[float, ...], found: tuple[float, ...]) -> bool:
    return len(true) == len(found) and all(
        t == f or (t * f > 0 and 1 / CONSTANT_FACTOR <= f / t <= CONSTANT_FACTOR)
        for t, f in zip(true, found)
    )


def _relative(found: float, true: float) -> float:
    return abs(found - true) / abs(true)


def r2(truth: np.ndarray, predicted: np.ndarray | None) -> float:
    """Mean over variables of 1 - SSE/SST, clipped at -1; None/non-finite/short -> -1."""
    if predicted is None or predicted.shape != truth.shape or not np.all(np.isfinite(predicted)):
        return R2_FLOOR
    sse = np.sum((truth - predicted) ** 2, axis=0)
    sst = np.maximum(np.sum((truth - truth.mean(axis=0)) ** 2, axis=0), np.finfo(float).tiny)
    value = float(np.mean(1.0 - sse / sst))
    return max(value, R2_FLOOR) if math.isfinite(value) else R2_FLOOR
