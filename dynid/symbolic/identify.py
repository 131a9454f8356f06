"""Governing equations without hand tuning: the ``dynid symbolic`` pipeline, step by step.

1. Regression rows (``rows``): derivatives of clean data, the weak (integral) form of noisy
   data, or x[k+1] of a map; blocked cross-validation folds over them (``folds``).
2. Candidate libraries of growing richness (``AUTO_LIBRARIES``, plus user terms in each),
   evaluated on the rows; per equation the library and terms with the lowest held-out
   criterion (``choice``).
3. The chosen support refitted on all rows, constants inside nonlinear terms refined
   (``refit``).
4. Continuous-time data: coefficients and constants refined by multiple shooting (on clean
   data this removes the finite difference's truncation error); other libraries' choices that
   came close on the equation errors compared with the winner by their trajectories
   (``rivals``); and on noisy data terms the trajectories' likelihood supports added
   (``shooting_step``).
5. Uncertainty: a moving-block bootstrap ensemble repeats the whole selection on each bag
   (E-SINDy, ``ensemble``), giving every term an inclusion probability and, re-centred on the
   reported coefficient, a coefficient interval; coefficients step 4 refined get the interval
   of that fit instead (``_add_uncertainty``).

Here the steps are put together, and every equation's terms merged into one term list.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dynid.data.dataset import Dataset
from dynid.runtime import Progress, SilentProgress, Steps
from dynid.symbolic.choice import choose_equations
from dynid.symbolic.ensemble import bagging, pivot_interval
from dynid.symbolic.folds import make_folds
from dynid.symbolic.library import CustomLibrary, Term, TermSet, parse_library_spec
from dynid.symbolic.library_choice import EquationChoice, EvaluatedLibrary
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.profile import FamilyProfile
from dynid.symbolic.refit import refit, selected_terms
from dynid.symbolic.rivals import settle_rivals
from dynid.symbolic.rows import RegressionRows, regression_rows
from dynid.symbolic.selection import select
from dynid.symbolic.shooting_step import adds_terms, shoot, shooting_additions, shooting_applies, shooting_data
from dynid.symbolic.user_terms import parse_user_terms

#: The standard normal's 97.5% quantile: a central 95% interval is +- this many standard errors.
NORMAL_95 = 1.959963984540054

# Libraries tried by library="auto", as parse_library_spec strings, simplest first.
AUTO_LIBRARIES = (
    "poly1", "poly2", "poly3", "poly2+trig", "poly1+trigdiff", "poly1+saturating", "poly1+explog", "poly1+xexplog"
)


@dataclass
class EquationResult:
    """One identified equation over the final term list (see ``Identification``)."""

    library: str
    criterion: float
    validation_r2: float
    pareto: list[dict[str, Any]]
    inclusion_probability: np.ndarray | None = None
    interval: np.ndarray | None = None  # (P, 2) low, high


@dataclass
class Identification:
    """The identified model: ``coefficients`` (d, P) over ``termset`` (P terms, coordinates
    x0.., u0.., constants substituted), so d x/dt (or x[k+1]) = coefficients @ Theta(x, u)."""

    termset: TermSet
    coefficients: np.ndarray
    equations: list[EquationResult]
    metrics: dict[str, Any] = field(default_factory=dict)


def identify(
    data: Dataset, params: SymbolicParams = SymbolicParams(), *, seed: int | None = None,
    progress: Progress | None = None,
) -> Identification:
    """Identify governing equations in ``data`` (see the module docstring for the method);
    ``seed`` makes the bootstrap ensemble repeatable. ``progress`` hears which equation and
    library is being worked on, counted per equation over the sweep and the ensemble; it never
    changes the result."""
    # BLAS at one thread: the pipeline's products and factorisations are small (p <= a few
    # hundred columns), and OpenBLAS's second thread spin-waits for a core that others hold.
    # Measured on the shared 2-core machine (load ~7), one equation's poly3 sweep on 10 x 3,000
    # Lorenz-96 rows: 28.8 s CPU with two threads, 2.2 s with one (benchmarks/README.md).
    with threadpool_limits(1, user_api="blas"):
        return _identify(data, params, seed, progress)


def _identify(data: Dataset, params: SymbolicParams, seed: int | None, progress: Progress | None) -> Identification:
    d = data.n_variables
    names = list(data.variables)
    steps = Steps(progress or SilentProgress(), d * (2 if params.ensemble else 1))
    rows = regression_rows(data, params)
    folds = make_folds(rows)
    train, val = folds.train, folds.val
    user = user_library(data, params)
    candidates = []
    for spec in _library_specs(params):
        steps.start(f"evaluating library {spec}")
        candidates.append(evaluated_library(spec, user, data, rows, train))
    chosen = choose_equations(d, candidates, rows, folds, params, steps, names)

    refits = [refit(i, choice, rows, params) for i, choice in enumerate(chosen)]
    selected, start, origins = selected_terms(chosen, refits, data)
    shooting = None
    if shooting_applies(rows, params):
        steps.start("multiple shooting")
        trials, noise = shooting_data(data)
        shooting = shoot(selected, start, trials, noise, rows)
        if shooting is not None and any(choice.rivals for choice in chosen):
            steps.start("rival libraries compared by trajectories")
            chosen, refits, shooting = settle_rivals(chosen, refits, shooting, data, rows, params, trials, noise)
            selected, start, origins = selected_terms(chosen, refits, data)
        if shooting is not None and adds_terms(rows):
            chosen, selected, start, origins, shooting = shooting_additions(
                chosen, selected, start, origins, rows, params, shooting, trials, noise
            )
    coefficients, constants = (start, selected.constants) if shooting is None else (shooting.coefficients, shooting.constants)
    # Final term list: every equation's selected terms, constants substituted, deduplicated.
    expressions: dict[str, int] = {}
    columns = np.array(
        [expressions.setdefault(selected.expression(j, constants), len(expressions)) for j in range(len(selected))],
        dtype=int,
    )
    final = TermSet([_plain_term(e) for e in expressions], data.n_variables, data.n_inputs)
    mappings = [{k: int(columns[j]) for j, k in origin.items()} for origin in origins]
    coefficients = _on_final(coefficients, columns, len(final))
    std = None if shooting is None else _on_final(shooting.coefficient_std, columns, len(final))
    theta_val = rows.theta(final)[val] if len(final) else np.zeros((int(val.sum()), 0))
    equations = []
    for i, (choice, mapping) in enumerate(zip(chosen, mappings)):
        ensemble = None
        if params.ensemble:
            steps.start(f"{names[i]}: ensemble of {params.ensemble}")
            ensemble = equation_ensemble(choice, rows.targets[:, i], params, i, seed)
            steps.finish(f"ensemble of {names[i]}")
        result = _equation_result(choice, theta_val @ coefficients[i], rows.targets[val, i])
        if ensemble is not None:
            _add_uncertainty(result, mapping, ensemble, coefficients[i], None if std is None else std[i])
        equations.append(result)
    _warn_without_skill(names, equations)
    metrics = {
        "formulation": rows.formulation,
        **rows.details,
        "criterion": params.criterion,
        "libraries_tried": [c.spec for c in candidates],
        "n_terms": int(np.count_nonzero(coefficients)),
    }
    if shooting is not None:
        metrics["shooting"] = shooting.details()
    return Identification(final, coefficients, equations, metrics)


def _warn_without_skill(names: list[str], equations: list[EquationResult]) -> None:
    """One warning per equation that predicts its held-out rows worse than their mean (R^2 < 0):
    its variable's change is not a function of the recorded variables in any library tried (one
    coordinate of a higher-dimensional system) or the record is too short to show one, and the
    equation says nothing about it."""
    for name, equation in zip(names, equations, strict=True):
        if equation.validation_r2 < 0:
            warnings.warn(
                f"symbolic: no equation for {name} predicts its held-out rows better than their mean "
                f"(validation R^2 {equation.validation_r2:.3g}): too few samples, or dynamics that "
                "involve variables the file does not hold (try a delay embedding or a latent model)",
                stacklevel=2,
            )


def _library_specs(params: SymbolicParams) -> list[str]:
    return list(AUTO_LIBRARIES) if params.library == "auto" else [params.library]


def user_library(data: Dataset, params: SymbolicParams) -> CustomLibrary | None:
    """``params.terms`` as a library over ``data``'s coordinates; None without terms."""
    if not params.terms.strip():
        return None
    return CustomLibrary(parse_user_terms(params.terms, list(data.variables), list(data.inputs)))


def evaluated_library(
    spec: str, user: CustomLibrary | None, data: Dataset, rows: RegressionRows, train: np.ndarray
) -> EvaluatedLibrary:
    """Library ``spec`` (plus the ``user`` terms) evaluated on ``rows``; families of alternative
    terms get their profile over the ``train`` rows (N,) bool."""
    library = parse_library_spec(spec)
    if user is not None:
        library = library + user
    termset = TermSet.build(library, data.n_variables, data.n_inputs, rows.states, rows.inputs)
    theta = rows.theta(termset)
    usable = np.all(np.isfinite(theta), axis=0)
    profile = None
    if any(term.family for term in termset.terms):
        profile = FamilyProfile(termset, theta, usable, train, rows.theta)
    return EvaluatedLibrary(spec, termset, theta, usable, profile)


def _on_final(values: np.ndarray, columns: np.ndarray, p: int) -> np.ndarray:
    """values (d, P) over the selected terms summed onto the final term list's p columns
    (``columns`` (P,): each selected term's final column)."""
    return np.vstack([np.bincount(columns, weights=row, minlength=p) for row in values])


def _plain_term(expression: str) -> Term:
    return Term(expression, (), "custom")


def equation_ensemble(
    choice: EquationChoice, y: np.ndarray, params: SymbolicParams, i: int, seed: int | None,
    error_floor: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """E-SINDy: (inclusion probability (p,), every bag's coefficients (n_models, p), NaN off the
    columns the selection was offered) over the library's p columns, from the whole selection
    repeated on moving-block bootstrap bags (held out: out-of-bag rows); equation ``i`` draws
    its bags from ``seed + 7919 i``. ``error_floor``: the targets' own systematic RMS error,
    as ``selection.select`` takes it (``RegressionRows.target_error``)."""
    columns = choice.columns

    def fit(theta_bag, y_bag, theta_oob, y_oob):  # type: ignore[no-untyped-def]
        chosen = select(
            theta_bag, y_bag, theta_val=theta_oob, y_val=y_oob,
            criterion=params.criterion, max_terms=params.max_terms, error_floor=error_floor,
        )
        return chosen.best.coef

    theta = choice.library.theta[:, columns]
    rng = None if seed is None else seed + 7919 * i
    result = bagging(theta, y, fit, n_models=params.ensemble, rng=rng, out_of_bag=True)
    p = len(choice.termset)
    inclusion, coefs = np.zeros(p), np.full((result.n_models, p), np.nan)
    inclusion[columns] = result.inclusion_probability
    coefs[:, columns] = result.coefs
    return inclusion, coefs


def _equation_result(choice: EquationChoice, predicted: np.ndarray, observed: np.ndarray) -> EquationResult:
    """The equation's library, criterion, held-out R^2 of ``predicted`` against ``observed``
    (validation rows) and Pareto front; no uncertainty yet (``_add_uncertainty``)."""
    variance = float(np.var(observed))
    r2 = 1.0 - float(np.mean((observed - predicted) ** 2)) / variance if variance > 0 else float("nan")
    names = choice.termset.names
    pareto = [
        {
            "n_terms": int(c.n_terms),
            "validation_rmse": float(c.val_error),
            "criterion": float(c.criterion),
            "terms": [names[int(choice.columns[k])] for k in np.flatnonzero(c.support)],
        }
        for c in choice.selection.pareto
    ]
    return EquationResult(choice.library.spec, float(choice.selection.best.criterion), r2, pareto)


def _add_uncertainty(
    result: EquationResult,
    mapping: dict[int, int],
    ensemble: tuple[np.ndarray, np.ndarray],
    coefficients: np.ndarray,
    std: np.ndarray | None,
) -> None:
    """Inclusion probabilities and 95% intervals (final columns) of one equation whose reported
    coefficients (P,) came from the equation-error fit (``std`` None) or from multiple shooting
    (``std`` (P,), their standard errors). ``mapping``: {library column: final column}.

    Each interval comes from the estimator that produced the coefficient, and contains it:
    the bootstrap ensemble re-centred on the coefficient (``ensemble.pivot_interval``) for the
    equation-error fit, whose selection the bags repeat; for shooting, the estimate +- 1.96
    standard errors of that maximum-likelihood fit, since the bags' equation-error estimator
    is a different and (under noise) less efficient one, whose spread would misstate the
    reported coefficient's."""
    inclusion, coefs = ensemble
    library, final = list(mapping), list(mapping.values())
    result.inclusion_probability = np.zeros(coefficients.size)
    result.inclusion_probability[final] = inclusion[library]
    result.interval = np.zeros((coefficients.size, 2))
    estimate = coefficients[final]
    if std is None:
        result.interval[final] = pivot_interval(estimate, coefs[:, library])
    else:
        half = NORMAL_95 * std[final]
        result.interval[final] = np.column_stack([estimate - half, estimate + half])
