"""One equation's choice within one library: which terms, selected on held-out folds
(``selection.select_folds``), with the constants inside the selected terms refined between
selections (``refine_selection``), and the criterion that compares choices across libraries
(``library_criterion``). ``choice`` runs this for every candidate library of every equation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from dynid.symbolic.folds import Folds
from dynid.symbolic.library import TermSet
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.profile import FamilyProfile
from dynid.symbolic.refine import refine_constants
from dynid.symbolic.rows import RegressionRows
from dynid.symbolic.selection import Selection, model_space_penalty, select_folds

# Rounds of select -> refine constants -> select again for libraries with constants.
REFINE_ROUNDS = 3


@dataclass
class EvaluatedLibrary:
    """A library evaluated on the regression rows: theta (N, p); usable: finite columns."""

    spec: str
    termset: TermSet
    theta: np.ndarray
    usable: np.ndarray
    profile: FamilyProfile | None = None  # when the library has families of alternative terms


@dataclass
class EquationChoice:
    """The selected support of one equation in one library (coef over the library's columns)."""

    library: EvaluatedLibrary
    support: np.ndarray
    coef: np.ndarray
    selection: Selection
    columns: np.ndarray
    # Other libraries' best choices that came within choice.RIVAL_MARGIN, best first.
    rivals: tuple[EquationChoice, ...] = field(default=())
    # The model-space penalty of the generated terms in the support (``extension.extended``).
    search_penalty: float = 0.0

    @property
    def termset(self) -> TermSet:
        return self.library.termset

    def with_support(self, support: np.ndarray, coef: np.ndarray) -> EquationChoice:
        """This choice with another support and coefficients (same library and selection)."""
        return replace(self, support=support, coef=coef)

    def term_expressions(self) -> frozenset[str]:
        """The selected terms with their constants' values: what tells two choices apart."""
        return frozenset(self.termset.expression(int(k)) for k in np.flatnonzero(self.support))


def library_criterion(choice: EquationChoice) -> float:
    """The held-out criterion plus the ``choice_penalty`` of the choice."""
    return float(choice.selection.best.criterion) + choice_penalty(choice)


def choice_penalty(choice: EquationChoice) -> float:
    """``selection.model_space_penalty`` of the choice's support in its library (without it
    a richer library wins on held-out rows by a margin its size does not justify), plus the
    choice's own ``search_penalty``."""
    return model_space_penalty(int(choice.columns.size), int(choice.support.sum())) + choice.search_penalty


def select_in(
    candidate: EvaluatedLibrary, y: np.ndarray, rows: RegressionRows, folds: Folds, params: SymbolicParams, i: int, tau: float,
) -> EquationChoice | None:
    columns = np.flatnonzero(candidate.usable)
    if columns.size == 0:
        return None
    theta = candidate.theta[:, columns]
    selection = select_folds(
        theta,
        y,
        folds.pairs,
        criterion=params.criterion,
        max_terms=params.max_terms,
        error_floor=float(rows.target_error[i]),
        tau=tau,
    )
    support = np.zeros(len(candidate.termset), dtype=bool)
    support[columns[selection.best.support]] = True
    coef = np.zeros(len(candidate.termset))
    coef[columns] = selection.best.coef
    return EquationChoice(candidate, support, coef, selection, columns)


def refine_selection(
    choice: EquationChoice, y: np.ndarray, rows: RegressionRows, folds: Folds, params: SymbolicParams, i: int, tau: float,
) -> EquationChoice:
    """Select -> refine the selected terms' constants on the training rows -> select again with
    the refined terms, until the support is stable: the library's initial constants are only
    guesses, and the criterion must compare the shapes at their best constants."""
    for _ in range(REFINE_ROUNDS):
        termset = choice.termset
        if not any(termset.terms[k].constants for k in np.flatnonzero(choice.support)):
            return choice
        if rows.weights is None:
            states, inputs = rows.states[folds.train], None if rows.inputs is None else rows.inputs[folds.train]
            transform = None
        else:
            states, inputs = rows.states, rows.inputs
            weights = rows.weights[folds.train]
            transform = lambda columns: weights @ columns  # noqa: E731
        constants, _ = refine_constants(
            termset, choice.support, choice.coef, states, inputs, y[folds.train], transform=transform
        )
        terms = [
            replace(t, constants=tuple((name, float(constants[name])) for name, _ in t.constants))
            for t in termset.terms
        ]
        refined = TermSet(terms, termset.n_states, termset.n_inputs)
        theta = rows.theta(refined)
        # Columns the library left out stay out (only the selected terms' constants moved).
        usable = np.all(np.isfinite(theta), axis=0) & choice.library.usable
        candidate = EvaluatedLibrary(choice.library.spec, refined, theta, usable)
        again = select_in(candidate, y, rows, folds, params, i, tau)
        if again is None:
            return choice
        stable = np.array_equal(again.support, choice.support)
        choice = again
        if stable:
            break
    return choice
