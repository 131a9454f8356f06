"""Candidate terms outside the fixed libraries, generated from an equation's chosen terms and
screened against its residuals (step 2b of ``identify``; ``choice.extend_by_generated_terms``
scores the survivors).

Generated shapes, in the coordinates v = x0.., with constants c fitted:

* powers with a fitted exponent, v**c (coordinates whose data are all > 0);
* saturating shapes v/(v + c), c/(c + v), v**2/(v**2 + c) (the same coordinates);
* sigmoids 1/(1 + exp(c0*v + c1)) (every coordinate);
* products of each selected term and each coordinate with a coordinate (one polynomial degree
  more) and with the saturating shapes (x y/(1 + x) beside logistic growth).

Screening: each shape's constants start on a grid (``_grid``); every grid column, with the
selected columns projected out on the training rows, is scored by how much of the residual it
explains, (v . r)^2 / |v|^2, and the shape keeps its best grid point. Only the
``MAX_SCREENED`` best shapes go on to the full held-out selection with refined constants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product

import numpy as np

from dynid.symbolic.library import Term, TermSet
from dynid.symbolic.rows import RegressionRows

#: Shapes per round that get the full held-out selection (each costs one per-fold selection
#: with constant refinement).
MAX_SCREENED = 3
#: Exponents v**c starts from (integers are the polynomial libraries').
POWER_GRID = (0.25, 0.5, 0.75, 1.25, 1.5, 1.75, 2.5, 3.5)
#: Quantiles of a coordinate's data that saturation constants and sigmoid midpoints start at.
QUANTILES = (0.1, 0.3, 0.5, 0.7, 0.9)
#: Sigmoid slopes start at these multiples of 1 / std(v), either sign.
SLOPES = (1.0, 3.0, 10.0)


@dataclass(frozen=True)
class Generated:
    """A screened candidate: ``term`` with its constants at their best grid point, and the
    training-row residual sum of squares it explains."""

    term: Term
    explained: float


def candidate_terms(termset: TermSet, support: np.ndarray, states: np.ndarray) -> list[Term]:
    """The generated shapes (module docstring) for an equation whose selected terms are
    ``termset.terms[support]``; states (n, d): the samples, for which coordinates are positive.
    Constants are named c0, c1, ... within each term; starting values are set by the screen."""
    d = termset.n_states
    names = [f"x{j}" for j in range(d)]
    positive = [name for j, name in enumerate(names) if np.min(states[:, j]) > 0]
    saturating = [(v, f"{v}/({v} + c0)") for v in positive] + [(v, f"c0/(c0 + {v})") for v in positive]
    # v**c written exp(c*log(v)), as the term parser asks (numeric values print as v**c).
    shapes = [f"exp(c0*log({v}))" for v in positive] + [shape for _, shape in saturating]
    shapes += [f"{v}**2/({v}**2 + c0)" for v in positive]
    shapes += [f"1/(1 + exp(c0*{v} + c1))" for v in names]
    selected = [termset.expression(int(k)) for k in np.flatnonzero(support)]
    factors = list(dict.fromkeys(e for e in (*selected, *names) if e != "1"))
    shapes += [f"({a})*{v}" for a in factors for v in names]
    # v times v's own saturating shapes is in the span of v and those shapes: not a new term.
    shapes += [f"({a})*{shape}" for a in factors for v, shape in saturating if a != v]
    terms = [_term(shape) for shape in dict.fromkeys(shapes)]
    known = {str(termset.symbolic(k)) for k in range(len(termset))}
    return [term for term in terms if str(term.sympy(d, termset.n_inputs)) not in known]


def screen(
    terms: list[Term], termset: TermSet, support: np.ndarray, y: np.ndarray, rows: RegressionRows,
    train: np.ndarray, theta: np.ndarray,
) -> list[Generated]:
    """The ``MAX_SCREENED`` terms that explain most of the training residual of y (N,) after
    the selected columns of theta (N, p) over ``termset``, each at its best grid point."""
    basis = np.linalg.qr(theta[train][:, support])[0] if support.any() else np.zeros((int(train.sum()), 0))
    residual = y[train] - basis @ (basis.T @ y[train])
    found: list[Generated] = []
    for term in terms:
        single = TermSet([term], termset.n_states, termset.n_inputs)
        best: Generated | None = None
        for values in _grid(term, rows.states):
            column = rows.theta(single, constants=values)[train, 0]
            if not np.all(np.isfinite(column)):
                continue
            column = column - basis @ (basis.T @ column)
            norm = float(column @ column)
            if norm <= 1e-12 * max(float(residual @ residual), np.finfo(float).tiny):
                continue
            explained = float(column @ residual) ** 2 / norm
            if best is None or explained > best.explained:
                start = tuple((name, float(values[name])) for name in term.constant_names)
                best = Generated(Term(term.expr, start, term.kind), explained)
        if best is not None:
            found.append(best)
    found.sort(key=lambda g: -g.explained)
    return found[:MAX_SCREENED]


def _grid(term: Term, states: np.ndarray) -> list[dict[str, float]]:
    """Starting constants of a generated term (module docstring), from the data of the
    coordinate inside its shape."""
    if not term.constants:
        return [{}]
    shape = term.expr
    v = _shaped_coordinate(shape)
    values = states[:, int(v[1:])]
    quantiles = np.quantile(values, QUANTILES)
    if f"exp(c0*log({v}))" in shape:
        return [{"c0": p} for p in POWER_GRID]
    if "exp(" in shape:
        scale = 1.0 / max(float(np.std(values)), np.finfo(float).tiny)
        slopes = [sign * s * scale for s in SLOPES for sign in (1.0, -1.0)]
        return [{"c0": a, "c1": -a * m} for a, m in product(slopes, quantiles)]
    if f"{v}**2" in shape:
        return [{"c0": float(q) ** 2} for q in quantiles]
    return [{"c0": float(q)} for q in quantiles]


def _shaped_coordinate(shape: str) -> str:
    """The coordinate inside a shape's constant-bearing part (the last factor of a product)."""
    tail = shape.split(")*")[-1]
    return re.findall(r"x\d+", tail)[0]


def _term(shape: str) -> Term:
    constants = tuple((c, 1.0) for c in ("c0", "c1") if c in _symbols(shape))
    kind = "exp" if "exp(" in shape else ("rational" if "/(" in shape else "polynomial")
    if ")*" in shape:
        kind = "product"
    return Term(shape, constants, kind)


def _symbols(expression: str) -> set[str]:
    return set(re.findall(r"\b[cxu]\d+\b", expression))
