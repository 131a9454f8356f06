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
squares (``refine.refine_constants``).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from math import comb, log

import numpy as np

from dynid.errors import DataError
from dynid.runtime import Steps
from dynid.symbolic.autocorrelation import autocorrelation_time
from dynid.symbolic.folds import Folds, block_labels
from dynid.symbolic.library import TermSet
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.profile import FamilyProfile
from dynid.symbolic.refine import refine_constants
from dynid.symbolic.rows import RegressionRows
from dynid.symbolic.selection import Selection, select_folds
from dynid.symbolic.solvers import lstsq_on_support

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

    @property
    def termset(self) -> TermSet:
        return self.library.termset


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
    best = _best_library(i, candidates, rows, folds, params, rows.noise_time, scoring)
    residual = y[folds.val] - best.library.theta[folds.val] @ best.coef
    tau = autocorrelation_time(residual, block_labels(folds.val))
    if tau > rows.noise_time:
        best = _best_library(i, candidates, rows, folds, params, tau, scoring)
    return best


def _best_library(
    i: int, candidates: list[EvaluatedLibrary], rows: RegressionRows, folds: Folds, params: SymbolicParams, tau: float,
    scoring: Callable[[str], None],
) -> EquationChoice:
    y = rows.targets[:, i]
    best: tuple[tuple[float, int], EquationChoice] | None = None
    for candidate in candidates:
        scoring(candidate.spec)
        choice = _select_in(candidate, y, rows, folds, params, i, tau)
        if choice is None:
            continue
        if params.refine:
            choice = _refine_selection(choice, y, rows, folds, params, i, tau)
        choice = _without_redundant_pairs(choice, y, folds.train)
        key = (_library_criterion(choice), int(choice.support.sum()))
        if best is None or key < best[0]:
            best = (key, choice)
    if best is None:
        raise DataError("no library term could be evaluated on the data (all non-finite)")
    return best[1]


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
    return EquationChoice(choice.library, support, coef, choice.selection, choice.columns)


def _profiled(candidate: EvaluatedLibrary, y: np.ndarray, rows: RegressionRows) -> EvaluatedLibrary:
    """``candidate`` with each family of alternative terms cut to its best member for ``y``."""
    termset, origin, chosen = candidate.profile.choose(y)
    theta = candidate.theta[:, origin].copy()
    if chosen:
        theta[:, chosen] = rows.theta(termset, chosen)
    return EvaluatedLibrary(candidate.spec, termset, theta, np.all(np.isfinite(theta), axis=0))


def _library_criterion(choice: EquationChoice) -> float:
    """The held-out criterion plus 2 ln C(p, k): choosing k terms out of a library of p is a
    search over C(p, k) models, and the best of many candidates fits noise by chance (the
    look-elsewhere effect; Foster & George's risk inflation, the extended-BIC model-space
    term of Chen & Chen 2008). Without it a richer library (trig terms approximating a
    polynomial, say) wins on held-out rows by a margin its size does not justify."""
    p = int(choice.columns.size)
    k = int(choice.support.sum())
    return float(choice.selection.best.criterion) + 2.0 * log(comb(p, k))


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
        candidate = EvaluatedLibrary(choice.library.spec, refined, theta, np.all(np.isfinite(theta), axis=0))
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
