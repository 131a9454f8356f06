"""Causal links read off identified governing equations: ``x_j -> x_i`` when ``x_j`` enters the
sparse equation of ``dx_i/dt`` (or of ``x_i[k+1]`` for a map).

In a deterministic, fully observed system ``dx/dt = f(x)`` the causal graph is the sparsity of
the Jacobian: ``x_j`` drives ``x_i`` iff ``df_i/dx_j`` is not identically zero, i.e. iff a term
of ``f_i`` contains ``x_j``. When ``f`` is a sparse sum of library terms (polynomial flows:
Lorenz, Rossler, Sprott's systems, Lorenz-96), sparse identification of the equations (SINDy,
Brunton, Proctor & Kutz, PNAS 113:3932, 2016) finds those terms, and with them the graph. The
fit is ``dynid symbolic``'s own machinery, with nothing tuned here:

1. Regression rows (``symbolic.rows``): finite-difference derivatives of clean data, the weak
   (integral) form of noisy data, chosen from the estimated noise; blocked cross-validation
   folds (``symbolic.folds``).
2. Libraries ``poly1 .. poly{max_degree}``; per equation the library and the support with the
   lowest held-out AICc (or BIC) pooled over the folds (``symbolic.choice``). A library with
   more columns than a tenth of the regression rows is not tried (``_ROWS_PER_TERM``): its fit
   would rest on fewer than ten rows per coefficient (the events-per-variable rule of thumb of
   regression, Peduzzi et al., J Clin Epidemiol 49:1373, 1996), and its subset search is what
   would make ten variables slow (poly3 of 10 variables has 286 columns).
3. Evidence per link: the equation's selection repeated on ``ensemble`` moving-block bootstrap
   bags of the rows, each scored on its out-of-bag rows with the same floor under the error
   (a finite difference's truncation error) as the selection on all rows (E-SINDy, Fasel, Kutz,
   Brunton & Brunton, Proc R Soc A 478:20210904, 2022; ``symbolic.identify.equation_ensemble``).
   ``inclusion[j, i]``: the fraction of bags whose equation ``i`` keeps a term containing
   ``x_j``.

``score_matrix[j, i] = (bags + c / (1 + c)) / ensemble`` with ``bags = ensemble *
inclusion[j, i]`` and ``c = contribution[j, i]`` of the least-squares fit of equation ``i`` on
the whole chosen library: the inclusion probability, ties (most often between links no bag
kept) broken by how much ``x_j``'s terms carry when nothing is selected, by less than one bag.
``contribution[j, i]``: the sum over the terms containing ``x_j`` of ``|coef| sd(term) /
sd(target)``. A link is significant when the equation selected on all rows (refitted on all
rows, as ``dynid symbolic`` reports it) has a term containing ``x_j``; there is no p-value.

When not to use it: partial observation (a hidden variable's terms are not in any library),
instantaneous mixing of hidden states, stochastic driving, or equations that are not sums of
library terms (exponentials, piecewise-linear pieces: the polynomial stand-in may use variables
the true term does not; ``-p terms`` adds such terms to every library).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import comb
from typing import Literal

import numpy as np
from threadpoolctl import threadpool_limits

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.common import check_values, check_whole
from dynid.causal.graph import CausalGraph, Edge
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.params import Hyperparameters, param
from dynid.runtime import SilentProgress, Steps
from dynid.symbolic.choice import choose_equations
from dynid.symbolic.folds import make_folds
from dynid.symbolic.identify import equation_ensemble, evaluated_library, user_library
from dynid.symbolic.library import TermSet
from dynid.symbolic.library_choice import EquationChoice
from dynid.symbolic.options import CRITERIA, DERIVATIVES, SymbolicParams
from dynid.symbolic.refit import refit
from dynid.symbolic.rows import RegressionRows, regression_rows
from dynid.symbolic.solvers import lstsq_on_support

# Regression rows per library column a library needs to be tried (module docstring, step 2).
_ROWS_PER_TERM = 10
# State coordinates in a term's expression: terms are written in x0.., u0.. (inputs) and c0..
# (constants), so "x" followed by digits is always a state.
_STATE = re.compile(r"\bx(\d+)\b")


@dataclass(frozen=True)
class SindyParams(Hyperparameters):
    """``-p`` options of ``--method sindy``."""

    max_degree: int = param(3, "highest polynomial degree of the libraries tried (poly1 up to it)")
    ensemble: int = param(20, "bootstrap bags whose selections give each link's inclusion probability")
    criterion: Literal["aicc", "bic"] = param("aicc", "information criterion on held-out rows that picks terms and library")
    derivative: str = param("auto", "auto (from the estimated noise), finite_difference, savgol, spectral, tv, spline, or weak (integral form)")
    discrete: bool = param(False, "the data are a map x[k+1] = f(x[k]) rather than samples of a flow")
    terms: str = param("", "extra terms added to every library, comma-separated expressions in the variable names, e.g. 'abs(x+1), exp(y)'")

    def __post_init__(self) -> None:
        check_whole("max_degree", self.max_degree, 1)
        check_whole("ensemble", self.ensemble, 1)
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {', '.join(CRITERIA)}")
        if self.derivative not in DERIVATIVES:
            raise ValueError(f"derivative must be one of {', '.join(DERIVATIVES)}")

    def symbolic(self) -> SymbolicParams:
        """The symbolic pipeline's settings: polynomial terms only (no generated terms, no
        constants to refine), the bootstrap of ``ensemble`` bags."""
        return SymbolicParams(
            criterion=self.criterion, derivative=self.derivative, discrete=self.discrete,
            terms=self.terms, ensemble=self.ensemble, generate=False, refine=False, shooting=False,
        )


class SparseEquations(CausalMethod):
    """``--method sindy``: links read off sparse governing equations (module docstring).

    Edges: one per ordered pair at lag 1 (the source's value at one sample drives the target's
    change to the next): ``strength`` = ``contribution`` of the source's terms in the target's
    selected equation (0 when none is selected), ``p_value`` NaN, ``significant`` when the
    selected equation has a term containing the source. ``extra``: ``inclusion`` and
    ``contribution`` (d, d) ``[source][target]``, ``equations`` (variable -> the selected
    right-hand side, as ``dynid symbolic`` writes it: sympy-parseable with the names of
    ``symbols``, symbol -> the variable's or input's name), ``libraries`` (the library
    chosen per equation), ``validation_r2`` and ``n_terms`` per equation (``held_out_r2`` of the
    support the held-out selection chose, and the selected support's size), ``formulation``.
    ``--max-lag`` and ``--alpha`` are not used.
    """

    name = "sindy"
    use_when = (
        "deterministic, smooth, fully observed low-dimensional systems whose equations are "
        "sums of polynomial terms (chaotic flows such as Lorenz, Rossler, Sprott, Lorenz-96): "
        "the graph is the equations' Jacobian; not for partial observation, instantaneous "
        "mixing of hidden states, or stochastic data"
    )
    summary = "links from sparse governing equations (SINDy) and their bootstrap inclusion"
    Params = SindyParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        return self.graph(data, settings, self.equations(data))

    def equations(self, data: Dataset) -> SelectedEquations:
        """Step 1-2 of the module docstring: each equation's library and support."""
        params = self.params
        assert isinstance(params, SindyParams)
        check_values(data, "sindy")
        symbolic = params.symbolic()
        # BLAS at one thread, as in symbolic.identify: the products are small.
        with threadpool_limits(1, user_api="blas"):
            rows = regression_rows(data, symbolic)
            folds = make_folds(rows)
            user = user_library(data, symbolic)
            extra = 0 if user is None else len(user.terms(data.n_variables, data.n_inputs))
            libraries = [evaluated_library(spec, user, data, rows, folds.train)
                         for spec in library_specs(data.n_variables + data.n_inputs, extra,
                                                   len(rows.targets), params.max_degree)]
            d = data.n_variables
            chosen = choose_equations(d, libraries, rows, folds, symbolic,
                                      Steps(SilentProgress(), d), list(data.variables))
        return SelectedEquations(rows, chosen)

    def graph(self, data: Dataset, settings: CausalSettings, selected: SelectedEquations) -> CausalGraph:
        """Step 3 and the graph, from ``selected = self.equations(data)``."""
        params = self.params
        assert isinstance(params, SindyParams)
        symbolic = params.symbolic()
        rows, chosen = selected.rows, selected.chosen
        with threadpool_limits(1, user_api="blas"):
            try:
                links = [_equation_links(i, choice, rows, symbolic, settings.seed)
                         for i, choice in enumerate(chosen)]
            except UsageError as error:  # options are checked already: the bootstrap's rows
                raise DataError(f"{data.source}: sindy: {error}; the record is too short for "
                                "the bootstrap, use more samples") from None
        return _graph(data, settings, params, selected, links)


@dataclass(frozen=True)
class SelectedEquations:
    """The regression ``rows`` and each equation's chosen library and support (``chosen``, one
    per variable); ``validation_r2`` and ``n_terms`` (d,) of each selected support."""

    rows: RegressionRows
    chosen: list[EquationChoice]

    @property
    def validation_r2(self) -> np.ndarray:
        return np.array([held_out_r2(choice.selection.best.val_error, self.rows.targets[:, i])
                         for i, choice in enumerate(self.chosen)])

    @property
    def n_terms(self) -> np.ndarray:
        return np.array([int(np.count_nonzero(choice.support)) for choice in self.chosen])


def library_specs(coordinates: int, extra: int, n_rows: int, max_degree: int) -> list[str]:
    """``poly1``, and ``poly2 .. poly{max_degree}`` whose columns (monomials in ``coordinates``
    states and inputs, plus ``extra`` user terms) number at most a ``_ROWS_PER_TERM``-th of the
    ``n_rows`` regression rows."""
    return ["poly1"] + [f"poly{k}" for k in range(2, max_degree + 1)
                        if (comb(coordinates + k, k) + extra) * _ROWS_PER_TERM <= n_rows]


@dataclass(frozen=True)
class EquationLinks:
    """What equation ``i`` says of every source j, each (d,): ``bags`` that kept a term
    containing j; ``tie_break``, the contribution of j's terms to the least-squares fit on the
    whole chosen library; ``selected``, whether the equation selected on all rows holds such a
    term, and ``strength``, their contribution there; ``terms`` (k,) and ``coefficients``
    (k,): that equation's selected terms (in coordinates x0.., u0..) and their coefficients."""

    bags: np.ndarray
    tie_break: np.ndarray
    selected: np.ndarray
    strength: np.ndarray
    terms: tuple[str, ...]
    coefficients: np.ndarray


def _equation_links(i: int, choice: EquationChoice, rows: RegressionRows, params: SymbolicParams,
                    seed: int | None) -> EquationLinks:
    """The ``EquationLinks`` of equation ``i``, whose library and support ``choice`` holds."""
    termset = choice.termset
    contains = term_states(termset)  # (p, d)
    y = rows.targets[:, i]
    # The bags' selections floored at the targets' systematic error, as the selection on all
    # rows is: on clean data a term fitting a finite difference's truncation error never pays.
    _, coefs = equation_ensemble(choice, y, params, i, seed, float(rows.target_error[i]))
    kept = np.nan_to_num(coefs) != 0
    theta, usable = choice.library.theta, choice.library.usable
    dense = np.zeros(len(termset))
    dense[usable] = lstsq_on_support(theta[:, usable], y, np.ones(int(usable.sum()), dtype=bool))
    coef, _ = refit(i, choice, rows, params)
    return EquationLinks(
        bags=(kept @ contains > 0).sum(axis=0),
        tie_break=contributions(theta, y, dense) @ contains,
        selected=(coef != 0) @ contains > 0,
        strength=contributions(theta, y, coef) @ contains,
        terms=tuple(termset.names[k] for k in np.flatnonzero(coef)),
        coefficients=coef[coef != 0],
    )


def held_out_r2(val_error: float, y: np.ndarray) -> float:
    """1 - val_error^2 / var(y): the share of the targets' ``y`` (N,) variance that the selected
    equation predicts on held-out rows (``val_error``: its RMS residual pooled over the
    cross-validation folds, units of y). 1 for a constant target predicted exactly, -inf for one
    it misses."""
    variance = float(np.var(y))
    if variance > 0:
        return 1.0 - val_error**2 / variance
    return 1.0 if val_error == 0 else float("-inf")


def term_states(termset: TermSet) -> np.ndarray:
    """(p, d) float 0/1: whether term k contains state j."""
    out = np.zeros((len(termset), termset.n_states))
    for k, name in enumerate(termset.names):
        out[k, [int(j) for j in _STATE.findall(name)]] = 1.0
    return out


def contributions(theta: np.ndarray, y: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """(p,) ``|coef_k| sd(theta_k) / sd(y)``: the share of the target's variation each term of
    ``theta`` (N, p) carries in the fit ``coef`` (p,) of ``y`` (N,)."""
    sd = np.std(y)
    spread = np.std(np.where(np.isfinite(theta), theta, 0.0), axis=0)
    return np.abs(coef) * spread / (sd if sd > 0 else 1.0)


def _graph(data: Dataset, settings: CausalSettings, params: SindyParams, selected: SelectedEquations,
           links: list[EquationLinks]) -> CausalGraph:
    """The CausalGraph [source][target] of the per-equation ``links``."""
    rows, chosen = selected.rows, selected.chosen
    d = data.n_variables
    bags = np.column_stack([link.bags for link in links])
    tie_break = np.column_stack([link.tie_break for link in links])
    strength = np.column_stack([link.strength for link in links])
    off = ~np.eye(d, dtype=bool)
    adjacency = np.column_stack([link.selected for link in links]) & off
    score = np.where(off, (bags + tie_break / (1.0 + tie_break)) / params.ensemble, 0.0)
    names = data.variables
    edges = [Edge(names[j], names[i], 1, float(strength[j, i]), float("nan"), bool(adjacency[j, i]))
             for j in range(d) for i in range(d) if i != j]
    symbols, equations = _equations(data, links, rows.formulation == "map")
    return CausalGraph(
        variables=names, method=SparseEquations.name, max_lag=settings.max_lag,
        alpha=settings.alpha, edges=edges, score_matrix=score, adjacency=adjacency,
        extra={"inclusion": np.where(off, bags / params.ensemble, 0.0), "contribution": strength,
               "equations": equations, "symbols": symbols,
               "libraries": [choice.library.spec for choice in chosen],
               "validation_r2": selected.validation_r2.tolist(),
               "n_terms": selected.n_terms.tolist(),
               "formulation": rows.formulation, "hyperparameters": params.to_dict(),
               "dt": data.dt},
    )


def _equations(data: Dataset, links: list[EquationLinks], discrete: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The symbols (symbol -> the variable's or input's name) and, per variable, the
    right-hand side of its selected equation, as ``dynid symbolic`` writes them
    (``build_term_result``: sympy-parseable, full-precision coefficients)."""
    from dynid.symbolic.expressions import build_term_result

    equations: dict[str, str] = {}
    symbols: dict[str, str] = {}
    for i, (name, link) in enumerate(zip(data.variables, links)):
        # Each equation has its own library: one result per equation, of its own terms only.
        coefficients = np.zeros((data.n_variables, len(link.terms)))
        coefficients[i] = link.coefficients
        result = build_term_result(data.variables, data.inputs, link.terms, coefficients, discrete=discrete)
        equations[name], symbols = result["equations"][i]["rhs"], result["symbols"]
    return symbols, equations
