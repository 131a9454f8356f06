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

Selecting within one library is ``library_choice``, terms from outside the libraries
``extension``, the final fit ``refit``.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from dynid.errors import DataError
from dynid.runtime import Steps
from dynid.symbolic.autocorrelation import autocorrelation_time
from dynid.symbolic.extension import extended
from dynid.symbolic.folds import Folds, block_labels
from dynid.symbolic.library_choice import (
    EquationChoice,
    EvaluatedLibrary,
    library_criterion,
    refine_selection,
    select_in,
)
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.rows import RegressionRows
from dynid.symbolic.solvers import lstsq_on_support

#: Other libraries' choices whose criterion is within this of the winner's are its rivals, for
#: the trajectories to settle (``rivals``): 2 ln of a likelihood ratio of e^10, "very strong"
#: evidence on Kass & Raftery's (1995) scale twice over. Equation-error criteria misjudge by
#: such margins when their targets carry systematic error: -x^3 on 150 clean samples (x0 = 3,
#: t in [0, 15]) loses to -7.04 x + 7.08 sin x by 10.7, through the finite difference's
#: truncation error, which the trajectories do not have.
RIVAL_MARGIN = 20.0
#: Rivals kept per equation at most (each costs a multiple-shooting fit).
MAX_RIVALS = 2


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
        best = extended(best, y, rows, folds, params, i, tau)
    return best


def _best_library(
    i: int, candidates: list[EvaluatedLibrary], rows: RegressionRows, folds: Folds, params: SymbolicParams, tau: float,
    scoring: Callable[[str], None],
) -> EquationChoice:
    y = rows.targets[:, i]
    scored: list[tuple[tuple[float, int], EquationChoice]] = []
    for candidate in candidates:
        scoring(candidate.spec)
        choice = select_in(candidate, y, rows, folds, params, i, tau)
        if choice is None:
            continue
        if params.refine:
            choice = refine_selection(choice, y, rows, folds, params, i, tau)
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
