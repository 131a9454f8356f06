"""``identify_pde``: PDEs u_t = sum_j c_j D^a_j f_j(u, v, ...) from space-time fields.

1. Weak-form rows (``weak_form``): one row per space-time box, target -int psi_t u, library
   columns (``library``) integrated against the box's test function with derivatives moved onto
   it.
2. Per field, the same held-out selection as the ODE path (``selection.select_folds``): the
   STLSQ path and exact best subsets searched on training boxes, the number of terms chosen by
   AICc (or BIC) pooled over blocked folds that hold out contiguous ranges of time boxes (with
   the boxes overlapping them left out of training), the effective number of rows counted
   through the test functions' noise correlation (``weak_form.noise_correlation_time``), plus
   the model-space penalty 2 ln C(p, k) (``model_space_penalty``).
3. The chosen support refitted by least squares on all boxes.
4. Uncertainty as in the ODE path (``ensemble``): the whole selection repeated on moving-block
   bootstrap bags of the boxes, scored on the out-of-bag ones, giving inclusion probabilities
   and pivot intervals centred on the reported coefficient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dynid.data.fields import SpaceTimeFields
from dynid.errors import DataError, UsageError
from dynid.symbolic.expressions import assign_symbols
from dynid.symbolic.ensemble import bagging, pivot_interval
from dynid.symbolic.folds import VALIDATION_FRACTION, Folds, n_folds, train_validation_split
from dynid.symbolic.identify import EquationResult
from dynid.symbolic.pde.library import PdeTerm, build_library, evaluate
from dynid.symbolic.pde.options import PdeParams
from dynid.symbolic.pde.weak_form import AxisKernels, axis_kernels, default_half_widths, integrate, noise_correlation_time
from dynid.symbolic.selection import Candidate, Selection, model_space_penalty, select, select_folds
from dynid.symbolic.solvers import lstsq_on_support

# Degree p of the bump (1 - s^2)^p. Its k-th derivative vanishes to order p - k at the box
# edges, which bounds the trapezoid rule's accuracy on the u_xxxx columns: measured on
# noise-free Burgers, KdV and Kuramoto-Sivashinsky, p = 6 leaves relative errors of 1e-4 to 3e-3
# and spurious terms fitting them, p = 12 errors of 1e-9 to 6e-4 and the exact terms; p = 16
# concentrates the bump on a few samples of small boxes (2-D, 64^2 grid: wrong terms).
DEGREE = 12


@dataclass
class PdeIdentification:
    """The identified PDEs: d(field i)/dt = coefficients[i] @ terms, ``coefficients``
    (n_fields, P) over the library ``terms`` (P); one ``EquationResult`` per field."""

    fields: tuple[str, ...]
    space: tuple[str, ...]
    terms: list[PdeTerm]
    coefficients: np.ndarray
    equations: list[EquationResult]
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WeakRows:
    """The weak-form regression: ``theta`` (N, P) library columns, ``targets`` (N, n_fields),
    ``folds`` over the N boxes, ``tau`` the targets' noise correlation time (rows)."""

    theta: np.ndarray
    targets: np.ndarray
    folds: Folds
    tau: float
    kernels: list[AxisKernels]


def identify_pde(data: SpaceTimeFields, params: PdeParams = PdeParams(), *, seed: int | None = None) -> PdeIdentification:
    """Identify a PDE per field of ``data`` (module doc); ``seed`` makes the bootstrap repeatable."""
    with threadpool_limits(1, user_api="blas"):  # small products: see symbolic.identify
        return _identify(data, params, seed)


def _identify(data: SpaceTimeFields, params: PdeParams, seed: int | None) -> PdeIdentification:
    # Terms are named in the output's symbols (a field "u (m/s)" becomes a valid identifier).
    symbols, _ = assign_symbols(data.names, [])
    terms = build_library(tuple(symbols), data.space_names, params.max_degree, params.max_order)
    rows = weak_rows(data, terms, params)
    coefficients = np.zeros((len(data.names), len(terms)))
    equations = []
    for i in range(len(data.names)):
        y = rows.targets[:, i]
        selection = select_folds(
            rows.theta, y, rows.folds.pairs, criterion=params.criterion, max_terms=params.max_terms, tau=rows.tau
        )
        best = penalised_best(selection)
        coefficients[i] = _refit(rows.theta, y, best.support)
        result = _equation_result(selection, best, terms, rows, y)
        if params.ensemble:
            _add_uncertainty(result, rows, y, coefficients[i], params, None if seed is None else seed + 7919 * i)
        equations.append(result)
    kernels = rows.kernels
    metrics = {
        "formulation": "weak-pde",
        "rows": int(rows.theta.shape[0]),
        "boxes": [k.n_boxes for k in kernels],
        "half_widths": [k.half_width for k in kernels],
        "test_function_degree": _degree(params),
        "noise_correlation_time": float(rows.tau),
        "library_size": len(terms),
        "criterion": params.criterion,
        "n_terms": int(np.count_nonzero(coefficients)),
    }
    return PdeIdentification(data.names, data.space_names, terms, coefficients, equations, metrics)


def weak_rows(data: SpaceTimeFields, terms: list[PdeTerm], params: PdeParams) -> WeakRows:
    """The weak-form regression of ``data`` over ``terms`` (``WeakRows``)."""
    shape = data.values.shape[1:]
    degree = _degree(params)
    widths = params.widths() or default_half_widths(shape, degree)
    if len(widths) != len(shape):
        raise UsageError(f"-p half_widths gives {len(widths)} values; the data has {len(shape)} axes (t, {', '.join(data.space_names)})")
    kernels = [
        axis_kernels(n, step, m, degree, params.max_order if a else 1)
        for a, (n, step, m) in enumerate(zip(shape, data.steps, widths))
    ]
    time_derivative = (1,) + (0,) * (len(shape) - 1)
    targets = np.column_stack([-integrate(u, kernels, time_derivative) for u in data.values])
    theta = evaluate(terms, data.values, kernels)
    return WeakRows(theta, targets, time_folds(kernels), noise_correlation_time(kernels, time_derivative), kernels)


def time_folds(kernels: list[AxisKernels]) -> Folds:
    """Blocked folds over the boxes: each holds out a contiguous range of time boxes (all their
    space boxes), and the boxes overlapping it in time belong to neither set, so no training
    box integrates samples a held-out box does."""
    n_time = kernels[0].n_boxes
    per_time = int(np.prod([k.n_boxes for k in kernels[1:]]))
    pairs, seen = [], set()
    for fold in range(n_folds(VALIDATION_FRACTION)):
        train, val = train_validation_split([n_time], VALIDATION_FRACTION, gap=kernels[0].overlap, fold=fold)
        if train.any() and val.any() and val.tobytes() not in seen:
            seen.add(val.tobytes())
            pairs.append((np.repeat(train, per_time), np.repeat(val, per_time)))
    if not pairs:
        raise DataError(f"{n_time} time boxes are too few to hold any out for model selection; a longer record is needed")
    return Folds(pairs)


def _degree(params: PdeParams) -> int:
    """The bump's degree: ``DEGREE``, or more when derivatives of higher order need it
    (by-parts needs D^k phi to vanish at the edges for every k below the highest order)."""
    return max(DEGREE, params.max_order + 2)


def penalised_best(selection: Selection) -> Candidate:
    """The candidate of ``selection`` with the lowest criterion plus ``model_space_penalty``."""
    p = selection.all[0].support.size
    return min(selection.all, key=lambda c: (c.criterion + model_space_penalty(p, c.n_terms), c.n_terms))


def _refit(theta: np.ndarray, y: np.ndarray, support: np.ndarray) -> np.ndarray:
    """Least squares on ``support`` over all boxes, without the terms that contribute less than
    least squares resolves (sqrt(eps) of the target's RMS): on noise-free data the quadrature's
    round-off-level residual is otherwise "explained" by terms of coefficient 1e-10."""
    floor = np.sqrt(np.finfo(float).eps) * float(np.sqrt(np.mean(y**2)))
    coef = np.zeros(theta.shape[1])
    while support.any():
        coef = lstsq_on_support(theta, y, support)
        resolved = support & (np.sqrt(np.mean((theta * coef) ** 2, axis=0)) >= floor)
        if np.array_equal(resolved, support):
            break
        support = resolved
    return np.where(support, coef, 0.0)


def _equation_result(
    selection: Selection, best: Candidate, terms: list[PdeTerm], rows: WeakRows, y: np.ndarray
) -> EquationResult:
    """Criterion, held-out R^2 of fold 0's fit of ``best``, and the Pareto front of one equation."""
    val = rows.folds.val
    coef = best.coef
    residual = y[val] - rows.theta[val] @ coef
    variance = float(np.var(y[val]))
    r2 = 1.0 - float(np.mean(residual**2)) / variance if variance > 0 else float("nan")
    pareto = [
        {
            "n_terms": int(c.n_terms),
            "validation_rmse": float(c.val_error),
            "criterion": float(c.criterion),
            "terms": [terms[int(k)].name for k in np.flatnonzero(c.support)],
        }
        for c in selection.pareto
    ]
    return EquationResult("pde", float(best.criterion), r2, pareto)


def _add_uncertainty(
    result: EquationResult, rows: WeakRows, y: np.ndarray, estimate: np.ndarray, params: PdeParams, rng: int | None
) -> None:
    """Inclusion probabilities and 95% pivot intervals (``ensemble.pivot_interval``) around
    ``estimate`` (P,) from the selection repeated on bootstrap bags of the boxes."""

    def fit(theta_bag, y_bag, theta_oob, y_oob):  # type: ignore[no-untyped-def]
        chosen = select(theta_bag, y_bag, theta_val=theta_oob, y_val=y_oob, criterion=params.criterion, max_terms=params.max_terms, tau=rows.tau)
        return _refit(theta_bag, y_bag, penalised_best(chosen).support)

    # Blocks of whole time slabs, as long as the boxes overlapping in time: shorter ones would
    # leave out-of-bag boxes sharing samples (and their noise) with in-bag neighbours.
    time_kernel = rows.kernels[0]
    block = (time_kernel.overlap + 1) * (y.size // time_kernel.n_boxes)
    bags = bagging(rows.theta, y, fit, n_models=params.ensemble, block=block, rng=rng, out_of_bag=True)
    result.inclusion_probability = bags.inclusion_probability
    result.interval = pivot_interval(estimate, bags.coefs)
