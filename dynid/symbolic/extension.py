"""Step 2b of ``identify`` for one equation: terms from outside the chosen library
(``generated``), added when they lower the library criterion by more than the price of searching
for them (``extended``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import log

import numpy as np

from dynid.symbolic.folds import Folds
from dynid.symbolic.generated import candidate_terms, screen
from dynid.symbolic.library import Term, TermSet
from dynid.symbolic.library_choice import (
    EquationChoice,
    EvaluatedLibrary,
    library_criterion,
    refine_selection,
    select_in,
)
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.rows import RegressionRows

#: Generated terms added to one equation at most (``extended``).
GENERATED_ROUNDS = 2
#: Library terms of an extended choice tried for removal at most (``extended``).
MAX_DROPPED = 4


def extended(
    choice: EquationChoice, y: np.ndarray, rows: RegressionRows, folds: Folds, params: SymbolicParams, i: int,
    tau: float,
) -> EquationChoice:
    """The choice with up to ``GENERATED_ROUNDS`` terms from outside its library
    (``generated``), each round the best of the ``generated.MAX_SCREENED`` shapes that explain
    most of its training residual, kept when the library plus that term, selected and refined
    again on the held-out folds, lowers the library criterion after a model-space penalty of
    2 ln M per generated term in the support, M the shapes generated: the Bonferroni / risk-
    inflation price (Foster & George 1994) of taking the best of M candidates, so that a
    larger search does not buy spurious terms (as 2 ln C(p, k) does for the library's own);
    plus AIC's 2 per constant fitted inside a generated term (the criterion counts columns
    only), so x**2 beats x**2.00003.

    Bounded in time by counts: M shapes screened by one projection per grid point each, and
    at most MAX_SCREENED x GENERATED_ROUNDS + MAX_DROPPED further per-fold selections."""
    terms = candidate_terms(choice.termset, choice.support, rows.states)
    if not terms:
        return choice
    search = _GeneratedSearch(y, rows, folds, params, i, tau, len(choice.termset), 2.0 * log(len(terms)), choice.rivals)
    best, value = choice, library_criterion(choice)
    for _ in range(GENERATED_ROUNDS):
        improved = None
        for found in screen(terms, best.termset, best.support, y, rows, folds.train, best.library.theta):
            extended = search.select(_with_term(best.library, found.term, rows))
            if extended is not None and library_criterion(extended) < value:
                value, improved = library_criterion(extended), extended
        if improved is None:
            break
        best = improved
    if best is choice:
        return choice
    # A library term that generated ones made redundant can stay selected, fitting what is left
    # of a constant's error (x**3/(x**3 + 582) at 2e-4 beside x/(x + c)): each selected library
    # term (MAX_DROPPED at most) is taken out of the library in turn, and the choice selected
    # without it kept when its criterion is no higher.
    for k in [int(k) for k in np.flatnonzero(best.support) if k < search.original][:MAX_DROPPED]:
        if not best.support[k]:
            continue
        usable = best.library.usable.copy()
        usable[k] = False
        reduced = search.select(replace(best.library, usable=usable))
        if reduced is not None and library_criterion(reduced) <= value:
            best, value = reduced, library_criterion(reduced)
    return best


@dataclass(frozen=True)
class _GeneratedSearch:
    """How ``extended`` selects in a library with generated columns: those from ``original``
    on; ``price`` = 2 ln M (M the shapes generated), charged per generated term selected."""

    y: np.ndarray
    rows: RegressionRows
    folds: Folds
    params: SymbolicParams
    i: int
    tau: float
    original: int
    price: float
    rivals: tuple[EquationChoice, ...]

    def select(self, library: EvaluatedLibrary) -> EquationChoice | None:
        """The choice in ``library`` (constants refined), with its generated terms' penalty."""
        choice = select_in(library, self.y, self.rows, self.folds, self.params, self.i, self.tau)
        if choice is None:
            return None
        if self.params.refine:
            choice = refine_selection(choice, self.y, self.rows, self.folds, self.params, self.i, self.tau)
        added = [choice.termset.terms[k] for k in np.flatnonzero(choice.support[self.original:]) + self.original]
        penalty = sum(self.price + 2.0 * len(term.constants) for term in added)
        return replace(choice, rivals=self.rivals, search_penalty=penalty)


def _with_term(library: EvaluatedLibrary, term: Term, rows: RegressionRows) -> EvaluatedLibrary:
    """``library`` with ``term`` as its last column (its constants renamed after the library's)."""
    used = [int(name[1:]) for t in library.termset.terms for name in t.constant_names]
    term = term.renumbered(max(used, default=-1) + 1)
    termset = TermSet([*library.termset.terms, term], library.termset.n_states, library.termset.n_inputs)
    column = rows.theta(termset, [len(termset) - 1])
    theta = np.hstack([library.theta, column])
    return EvaluatedLibrary(f"{library.spec}+generated", termset, theta, np.all(np.isfinite(theta), axis=0))
