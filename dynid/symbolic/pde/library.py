"""The PDE term library: monomials of the fields and spatial derivatives of monomials, each
evaluated in the weak form (``weak_form.integrate``), so no derivative of the data is taken.

Terms (fields u, v, ...; space x or x, y):
- monomials of degree 0 .. ``max_degree``: ``1``, ``u``, ``u**2``, ``u*v``, ``u**3``, ...
- spatial derivatives of the monomials of degree 1 .. ``DERIVED_DEGREE`` (2):
  1-D, orders 1 .. ``max_order``: ``u_x``, ``u_xx``, ``u_xxx``, ``u_xxxx``, ``u*u_x`` (that is
  (u^2)_x / 2, so Burgers' and KdV's coefficients read as usual), ``d_xx(u**2)``, ``d_x(u*v)``;
  2-D, isotropic and first order: ``u_x``, ``u_y``, ``lap(u)`` (u_xx + u_yy), ``u*u_x``,
  ``lap(u**2)``, ``d_x(u*v)``; with ``max_order`` >= 4 also ``bilap(u)``, ``bilap(u**2)``, ...
Names parse with sympy (unknown functions such as ``d_xx`` and ``lap`` stay symbolic).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations_with_replacement

import numpy as np

from dynid.symbolic.pde.weak_form import AxisKernels, integrate

# Highest degree of a monomial under a spatial derivative: (u^2)_x carries Burgers' and KdV's
# advection; higher ones are rare in physical models and would grow the library fast.
DERIVED_DEGREE = 2

# An operator: a sum of coefficient * mixed partial derivative (orders per spatial axis).
Operator = tuple[tuple[float, tuple[int, ...]], ...]


@dataclass(frozen=True)
class PdeTerm:
    """One library column: ``scale`` * ``operator`` applied to the monomial with ``exponents``
    (one per field), named ``name``."""

    name: str
    exponents: tuple[int, ...]
    operator: Operator
    scale: float = 1.0


def build_library(fields: tuple[str, ...], space: tuple[str, ...], max_degree: int, max_order: int) -> list[PdeTerm]:
    """The library's terms (module doc) for field names ``fields`` and spatial axes ``space``."""
    dims = len(space)
    identity: Operator = ((1.0, (0,) * dims),)
    monomials = [
        exponents for degree in range(max_degree + 1) for exponents in _monomials(len(fields), degree)
    ]
    terms = [PdeTerm(_monomial_name(fields, e), e, identity) for e in monomials]
    for named_op in _operators(space, max_order):
        for exponents in monomials:
            if 1 <= sum(exponents) <= DERIVED_DEGREE:
                terms.append(_derived(fields, exponents, *named_op))
    return terms


def evaluate(terms: list[PdeTerm], values: np.ndarray, kernels: list[AxisKernels]) -> np.ndarray:
    """The weak-form columns (n_rows, len(terms)): (-1)^|a| int (D^a psi) f(u) per box, f the
    term's monomial of ``values`` (n_fields, n_t, *n_space)."""
    monomials: dict[tuple[int, ...], np.ndarray] = {}
    columns = []
    for term in terms:
        if term.exponents not in monomials:
            monomials[term.exponents] = np.prod([v**e for v, e in zip(values, term.exponents)], axis=0)
        f = monomials[term.exponents]
        column = sum(
            c * (-1) ** sum(orders) * integrate(f, kernels, (0, *orders)) for c, orders in term.operator
        )
        columns.append(term.scale * column)
    return np.column_stack(columns)


def _monomials(n_fields: int, degree: int) -> list[tuple[int, ...]]:
    out = []
    for combo in combinations_with_replacement(range(n_fields), degree):
        out.append(tuple(combo.count(i) for i in range(n_fields)))
    return out


def _monomial_name(fields: tuple[str, ...], exponents: tuple[int, ...]) -> str:
    parts = [name if e == 1 else f"{name}**{e}" for name, e in zip(fields, exponents) if e]
    return "*".join(parts) or "1"


def _operators(space: tuple[str, ...], max_order: int) -> list[tuple[str, Operator]]:
    """(suffix, operator) pairs: ("x", d/dx), ("xx", ...) in 1-D; first derivatives, "lap" and
    "bilap" in 2-D. A suffix of letters names a plain partial derivative."""
    dims = len(space)
    if dims == 1:
        return [(space[0] * k, ((1.0, (k,)),)) for k in range(1, max_order + 1)]
    unit = [tuple(int(a == b) for b in range(dims)) for a in range(dims)]
    operators: list[tuple[str, Operator]] = [(name, ((1.0, u),)) for name, u in zip(space, unit)]
    if max_order >= 2:
        operators.append(("lap", tuple((1.0, tuple(2 * x for x in u)) for u in unit)))
    if max_order >= 4:
        # (sum_a d_a^2)^2 = sum_a d_a^4 + 2 sum_{a<b} d_a^2 d_b^2
        fourth = [(1.0, tuple(4 * x for x in u)) for u in unit]
        mixed = [(2.0, tuple(2 * (x + y) for x, y in zip(u, w))) for u, w in zip(unit, unit[1:])]
        operators.append(("bilap", tuple(fourth + mixed)))
    return operators


def _derived(fields: tuple[str, ...], exponents: tuple[int, ...], suffix: str, operator: Operator) -> PdeTerm:
    """The operator applied to a monomial, named as the module doc says."""
    inner = _monomial_name(fields, exponents)
    plain = suffix.isalpha() and suffix not in ("lap", "bilap")
    if sum(exponents) == 1:
        name = f"{inner}_{suffix}" if plain else f"{suffix}({inner})"
        return PdeTerm(name, exponents, operator)
    square = max(exponents) == 2
    if plain and square and len(suffix) == 1:
        # (f^2)_x = 2 f f_x: the column is scaled by 1/2 so that it is f*f_x.
        f = fields[exponents.index(2)]
        return PdeTerm(f"{f}*{f}_{suffix}", exponents, operator, 0.5)
    return PdeTerm(f"d_{suffix}({inner})" if plain else f"{suffix}({inner})", exponents, operator)
