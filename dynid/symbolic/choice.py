"""Step 2 of ``identify`` for one equation: which library and which terms of it.

Candidate libraries of growing richness, each scored per equation by ``selection.select_folds``:
the STLSQ path and exact best subsets, searched on training rows, the number of terms chosen by
AICc (or BIC) on held-out contiguous blocks pooled over the folds (every row held out once).
Across libraries the lowest held-out criterion wins, so a richer library is used only when it
predicts held-out rows better. All libraries share one effective number of held-out rows (rows
over the autocorrelation time of the targets' noise, raised to that of the winner's residuals
when those are more correlated), so their criteria are on one scale. Libraries with families of
alternative terms (Hill shapes of every exponent) are first cut to one member per family at its
best constant for the equation (``profile``). Then (``refit``) the chosen support is refitted
on all rows and the constants inside nonlinear terms (x/(c + x)) are refined by nonlinear least
squares (``refine.refine_constants``). The best choices of other libraries that come close
(``RIVAL_MARGIN``) stay beside the winner as its rivals, for the trajectories to settle
(``rivals``).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import log

import numpy as np

from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.runtime import Steps
from dynid.symbolic.autocorrelation import autocorrelation_time
from dynid.symbolic.folds import Folds, block_labels
from dynid.symbolic.generated import candidate_terms, screen
from dynid.symbolic.library import Term, TermSet
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.profile import FamilyProfile
from dynid.symbolic.refine import refine_constants
from dynid.symbolic.rows import RegressionRows
from dynid.symbolic.selection import Selection, model_space_penalty, select_folds
from dynid.symbolic.solvers import lstsq_on_support

# Rounds of select -> refine constants -> select again for libraries with constants.
REFINE_ROUNDS = 3
#: Other libraries' choices whose criterion is within this of the winner's are its rivals, for
#: the trajectories to settle (``rivals``): 2 ln of a likelihood ratio of e^10, "very strong"
#: evidence on Kass & Raftery's (1995) scale twice over. Equation-error criteria misjudge by
#: such margins when their targets carry systematic error: -x^3 on 150 clean samples (x0 = 3,
#: t in [0, 15]) loses to -7.04 x + 7.08 sin x by 10.7, through the finite difference's
#: truncation error, which the trajectories do not have.
RIVAL_MARGIN = 20.0
#: Rivals kept per equation at most (each costs a multiple-shooting fit).
MAX_RIVALS = 2
#: Generated terms added to one equation at most (``_extended``).
GENERATED_ROUNDS = 2
#: Library terms of an extended choice tried for removal at most (``_extended``).
MAX_DROPPED = 4


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
    # Other libraries' best choices that came within RIVAL_MARGIN, best first.
    rivals: tuple[EquationChoice, ...] = field(default=())
    # The model-space penalty of the generated terms in the support (``_extended``).
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


# What forked sweep workers read (set just before the pool forks, so nothing is pickled there).
_SHARED: tuple[()] | tuple[list[EvaluatedLibrary], RegressionRows, Folds, SymbolicParams] = ()


def choose_equations(
    d: int, candidates: list[EvaluatedLibrary], rows: RegressionRows, folds: Folds, params: SymbolicParams,
    steps: Steps, names: list[str],
) -> list[EquationChoice]:
    """``_best_equation`` for every equation, in ``params.jobs`` forked processes when > 1;
    ``steps`` counts the equations done (``names``: theirs), and in one process also says
    which library is being scored."""
    jobs = params.jobs if params.jobs > 0 else (os.cpu_count() or 1)
    jobs = min(jobs, d)
    if jobs <= 1:
        chosen = []
        for i, name in enumerate(names):
            def scoring(spec: str, name: str = name) -> None:
                steps.start(f"{name}: library {spec}")

            chosen.append(_best_equation(i, candidates, rows, folds, params, scoring))
            steps.finish(f"selected {name}")
        return chosen
    global _SHARED
    _SHARED = (candidates, rows, folds, params)
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            chosen = []
            for i, choice in enumerate(pool.imap(_best_equation_shared, range(d))):
                chosen.append(choice)
                steps.finish(f"selected {names[i]}")
            return chosen
    finally:
        _SHARED = ()


def _best_equation_shared(i: int) -> EquationChoice:
    return _best_equation(i, *_SHARED, lambda spec: None)


def _best_equation(
    i: int, candidates: list[EvaluatedLibrary], rows: RegressionRows, folds: Folds, params: SymbolicParams,
    scoring: Callable[[str], None],
) -> EquationChoice:
    """The library and support with the lowest held-out criterion for equation ``i``;
    ``scoring(spec)`` is called as each library's turn comes.

    Every library is scored with one effective number of rows (``selection.select_folds``): first
    with the targets' noise correlation time; when the winner's held-out residuals are more
    correlated than that (systematic error, e.g. a derivative's truncation error, which the
    noise model does not describe), all libraries are scored again with the residuals' time.
    """
    y = rows.targets[:, i]
    candidates = [c if c.profile is None else _profiled(c, y, rows) for c in candidates]
    tau = rows.noise_time
    best = _best_library(i, candidates, rows, folds, params, tau, scoring)
    residual = y[folds.val] - best.library.theta[folds.val] @ best.coef
    correlated = autocorrelation_time(residual, block_labels(folds.val))
    if correlated > tau:
        tau = correlated
        best = _best_library(i, candidates, rows, folds, params, tau, scoring)
    if params.generate:
        scoring("generated terms")
        best = _extended(best, y, rows, folds, params, i, tau)
    return best


def _best_library(
    i: int, candidates: list[EvaluatedLibrary], rows: RegressionRows, folds: Folds, params: SymbolicParams, tau: float,
    scoring: Callable[[str], None],
) -> EquationChoice:
    y = rows.targets[:, i]
    scored: list[tuple[tuple[float, int], EquationChoice]] = []
    for candidate in candidates:
        scoring(candidate.spec)
        choice = _select_in(candidate, y, rows, folds, params, i, tau)
        if choice is None:
            continue
        if params.refine:
            choice = _refine_selection(choice, y, rows, folds, params, i, tau)
        choice = _without_redundant_pairs(choice, y, folds.train)
        scored.append(((library_criterion(choice), int(choice.support.sum())), choice))
    if not scored:
        raise DataError("no library term could be evaluated on the data (all non-finite)")
    scored.sort(key=lambda item: item[0])
    (best_key, best), rivals, seen = scored[0], [], {scored[0][1].term_expressions()}
    for key, choice in scored[1:]:
        if len(rivals) == MAX_RIVALS or key[0] > best_key[0] + RIVAL_MARGIN:
            break
        terms = choice.term_expressions()
        if choice.support.any() and terms not in seen:
            seen.add(terms)
            rivals.append(choice)
    return replace(best, rivals=tuple(rivals))


def _without_redundant_pairs(choice: EquationChoice, y: np.ndarray, train: np.ndarray) -> EquationChoice:
    """Activation and repression of one exponent sharing c sum to 1: where both are selected,
    keep the activation and the constant term instead (the same fit, written the usual way)."""
    termset, support = choice.termset, choice.support.copy()
    names = termset.names
    if "1" not in names:
        return choice
    seen: set[tuple[str, str]] = set()
    for k in np.flatnonzero(support):
        term = termset.terms[k]
        if not term.family or len(term.constants) != 1:
            continue
        key = (term.family, term.constants[0][0])
        if key in seen:
            support[k] = False
            support[names.index("1")] = True
        seen.add(key)
    if np.array_equal(support, choice.support):
        return choice
    coef = lstsq_on_support(choice.library.theta[train], y[train], support)
    return choice.with_support(support, coef)


def _profiled(candidate: EvaluatedLibrary, y: np.ndarray, rows: RegressionRows) -> EvaluatedLibrary:
    """``candidate`` with each family of alternative terms cut to its best member for ``y``."""
    termset, origin, chosen = candidate.profile.choose(y)
    theta = candidate.theta[:, origin].copy()
    if chosen:
        theta[:, chosen] = rows.theta(termset, chosen)
    return EvaluatedLibrary(candidate.spec, termset, theta, np.all(np.isfinite(theta), axis=0))


def library_criterion(choice: EquationChoice) -> float:
    """The held-out criterion plus the ``choice_penalty`` of the choice."""
    return float(choice.selection.best.criterion) + choice_penalty(choice)


def choice_penalty(choice: EquationChoice) -> float:
    """``selection.model_space_penalty`` of the choice's support in its library (without it
    a richer library wins on held-out rows by a margin its size does not justify), plus the
    choice's own ``search_penalty``."""
    return model_space_penalty(int(choice.columns.size), int(choice.support.sum())) + choice.search_penalty


def _extended(
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
    """How ``_extended`` selects in a library with generated columns: those from ``original``
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
        choice = _select_in(library, self.y, self.rows, self.folds, self.params, self.i, self.tau)
        if choice is None:
            return None
        if self.params.refine:
            choice = _refine_selection(choice, self.y, self.rows, self.folds, self.params, self.i, self.tau)
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


def _select_in(
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


def _refine_selection(
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
        again = _select_in(candidate, y, rows, folds, params, i, tau)
        if again is None:
            return choice
        stable = np.array_equal(again.support, choice.support)
        choice = again
        if stable:
            break
    return choice


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
