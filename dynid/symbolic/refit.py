"""Step 3 of ``identify``: each equation's chosen terms fitted again on all rows, their
constants refined (``refit``), and all equations' terms side by side (``selected_terms``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dynid.data.dataset import Dataset
from dynid.symbolic.library import TermSet
from dynid.symbolic.library_choice import REFINE_ROUNDS, EquationChoice
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.refine import refine_constants
from dynid.symbolic.rows import RegressionRows
from dynid.symbolic.solvers import lstsq_on_support


def refit(
    i: int, choice: EquationChoice, rows: RegressionRows, params: SymbolicParams,
) -> tuple[np.ndarray, dict[str, float]]:
    """Least squares on the chosen support over all rows, then constants refined (if any)."""
    y = rows.targets[:, i]
    termset, support = choice.termset, choice.support
    if not support.any():
        return np.zeros(len(termset)), termset.constants
    theta = choice.library.theta
    coef = lstsq_on_support(theta, y, support)
    constants = termset.constants
    # A term contributing less than the targets' own systematic error, or less than the
    # relative precision least squares resolves (sqrt(eps) of the target), is not supported by
    # the data (e.g. 1e-9 x absorbing a refined constant's last digits): drop it. Checked again
    # after the constants are refined, since a term may only have made up for a constant's error.
    floor = max(float(rows.target_error[i]), np.sqrt(np.finfo(float).eps) * float(np.sqrt(np.mean(y**2))))
    for _ in range(REFINE_ROUNDS):
        contribution = np.sqrt(np.mean((theta * coef) ** 2, axis=0))
        resolved = support & (contribution >= floor)
        if resolved.any() and not np.array_equal(resolved, support):
            support = resolved
            coef = lstsq_on_support(theta, y, support)
        if not params.refine:
            break
        transform = None if rows.weights is None else (lambda columns: rows.weights @ columns)
        refined, coef = refine_constants(
            termset, support, coef, rows.states, rows.inputs, y, constants=constants, transform=transform
        )
        if refined == constants:
            break
        constants = refined
        theta = rows.theta(termset, constants=constants)
    return coef, constants


def selected_terms(
    chosen: list[EquationChoice], refits: list[tuple[np.ndarray, dict[str, float]]], data: Dataset
) -> tuple[TermSet, np.ndarray, list[dict[int, int]]]:
    """Every equation's selected terms side by side, each equation's constants renamed apart
    (two equations may refine one library constant to different values): (term set of P
    columns, coefficients (d, P) zero outside each equation's own columns, per equation
    {column: library column})."""
    terms, origins, renamed = [], [], 0
    for choice, (coef, constants) in zip(chosen, refits):
        names = dict.fromkeys(c for k in np.flatnonzero(coef) for c in choice.termset.terms[int(k)].constant_names)
        renaming = {c: f"c{renamed + j}" for j, c in enumerate(names)}
        renamed += len(names)
        origin = {}
        for k in np.flatnonzero(coef):  # the refit may drop unresolved terms
            term = choice.termset.terms[int(k)]
            valued = replace(term, constants=tuple((c, float(constants[c])) for c in term.constant_names))
            origin[len(terms)] = int(k)
            terms.append(valued.renamed(renaming))
        origins.append(origin)
    selected = TermSet(terms, data.n_variables, data.n_inputs)
    coefficients = np.zeros((len(chosen), len(terms)))
    for i, ((coef, _), origin) in enumerate(zip(refits, origins)):
        for j, k in origin.items():
            coefficients[i, j] = coef[k]
    return selected, coefficients, origins
