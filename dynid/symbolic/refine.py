"""Refinement of the constants inside selected terms (c in x0/(c + x0)) by nonlinear least squares.

Variable projection (Golub & Pereyra 1973): for constants theta the linear coefficients are the
least-squares solution beta(theta) = A(theta)^+ y, so only theta is optimised, on the residual
r(theta) = A(theta) beta(theta) - y, with Kaufman's Jacobian (I - P_A) (dA/dtheta) beta. A constant
that must stay positive (in a rational term or a denominator, starting positive) is optimised as
log c, within four decades of its start; a half-saturation constant that crossed zero would put a
pole inside the data.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dynid.symbolic.library import TermSet

#: Positive constants may move this many decades either way from their start.
MAX_DECADES = 4.0


def refine_constants(
    termset: TermSet,
    support_mask: np.ndarray,
    coefs: np.ndarray,
    x: np.ndarray,
    u: np.ndarray | None,
    y: np.ndarray,
    *,
    constants: dict[str, float] | None = None,
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
    max_nfev: int = 100,
) -> tuple[dict[str, float], np.ndarray]:
    """Jointly fit the selected terms' constants and the equation's coefficients.

    support_mask: (p,) bool, the selected terms; coefs: (p,) their current coefficients (the
    baseline: the result is never worse); x (n, d), u (n, m) or None: the samples the terms are
    evaluated on; y (n,): the targets of one equation (e.g. dx_i/dt, in units of x_i per time).
    constants: start values (default the term set's initial ones); transform: a linear map of the
    evaluated columns, (n, s) -> (n', s), when the targets are not pointwise (weak form: integrals
    against test functions); y then has n' rows.

    Returns (all constants, with the selected terms' ones refined; coefficients (p,), zero off the
    support). Unchanged copies when no selected term has a constant. The constants are per
    equation: two equations may refine the same symbol to different values.
    """
    support = np.flatnonzero(np.asarray(support_mask, dtype=bool))
    start = {**termset.constants, **(constants or {})}
    coefs = np.asarray(coefs, dtype=float).copy()
    names = list(dict.fromkeys(c for i in support for c in termset.terms[i].constant_names))
    if not names:
        return start, coefs
    problem = _Projection(termset, support, names, start, x, u, np.ravel(y), transform)
    theta0 = problem.theta(start)
    span = np.where(problem.positive, MAX_DECADES * np.log(10.0), np.inf)
    lower, upper = theta0 - span, theta0 + span
    for k, name in enumerate(names):  # a term's own bounds (where its constant is identifiable)
        limits = [b for i in support for b in termset.terms[i].bounds if b[0] == name]
        if limits and problem.positive[k]:
            lower[k] = max(lower[k], max(np.log(b[1]) for b in limits))
            upper[k] = min(upper[k], min(np.log(b[2]) for b in limits))
            theta0[k] = min(max(theta0[k], lower[k]), upper[k])

    from scipy.optimize import least_squares

    result = least_squares(
        problem.residual,
        theta0,
        jac=problem.jacobian,
        bounds=(lower, upper),
        x_scale=np.where(problem.positive, 1.0, np.maximum(np.abs(theta0), 1e-3)),
        max_nfev=max_nfev,
        # Tight tolerances: a constant that is off by 1e-8 leaves a residual that spurious terms
        # can then fit on clean data.
        xtol=1e-13,
        ftol=1e-13,
        gtol=1e-13,
    )
    refined = problem.values(result.x)
    fit = problem.solve(refined)
    baseline = np.sum((problem.design(start) @ coefs[support] - problem.y) ** 2)
    if fit is None or not np.sum(fit[2] ** 2) < (baseline if np.isfinite(baseline) else np.inf):
        return start, coefs
    new = np.zeros_like(coefs)
    new[support] = fit[1]
    return {**start, **refined}, new


# (A (N, k) design at the constants, beta (k,) its least-squares coefficients, residual (N,)).
_Fit = tuple[np.ndarray, np.ndarray, np.ndarray]


class _Projection:
    """The variable-projection problem of one equation: theta -> (A, beta, residual)."""

    def __init__(self, termset, support, names, start, x, u, y, transform) -> None:
        self.termset, self.support, self.names = termset, support, names
        self.x, self.u, self.y, self.transform = x, u, y, transform
        self.start = start
        self.positive = np.array(
            [_must_stay_positive(termset, support, c, start[c]) for c in names], dtype=bool
        )
        self._last: tuple[bytes, _Fit | None] | None = None
        # A failed evaluation (NaN/inf columns) gets a residual far worse than any real fit.
        self.penalty = np.full(len(y), 1e3 * (1.0 + np.max(np.abs(y))))

    def theta(self, values: dict[str, float]) -> np.ndarray:
        raw = np.array([values[c] for c in self.names])
        return np.where(self.positive, np.log(np.where(self.positive, raw, 1.0)), raw)

    def values(self, theta: np.ndarray) -> dict[str, float]:
        raw = np.where(self.positive, np.exp(theta), theta)
        return {**self.start, **dict(zip(self.names, map(float, raw), strict=True))}

    def design(self, values: dict[str, float]) -> np.ndarray:
        columns = self.termset.evaluate(self.x, self.u, values, self.support)
        return columns if self.transform is None else self.transform(columns)

    def solve(self, values: dict[str, float]) -> _Fit | None:
        """(A, beta, residual) at these constants, or None where A is not finite."""
        a = self.design(values)
        if not np.all(np.isfinite(a)):
            return None
        beta = np.linalg.lstsq(a, self.y, rcond=None)[0]
        return a, beta, a @ beta - self.y

    def _cached(self, theta: np.ndarray) -> _Fit | None:
        # least_squares asks for the residual and then the Jacobian at the same point.
        key = theta.tobytes()
        if self._last is None or self._last[0] != key:
            self._last = (key, self.solve(self.values(theta)))
        return self._last[1]

    def residual(self, theta: np.ndarray) -> np.ndarray:
        fit = self._cached(theta)
        return self.penalty if fit is None else fit[2]

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        fit = self._cached(theta)
        if fit is None:
            return np.zeros((len(self.y), len(self.names)))
        a, beta, _ = fit
        values = self.values(theta)
        gradients = self.termset.gradient_wrt_constants(self.x, self.u, values, self.support)
        q = np.linalg.qr(a)[0]
        jacobian = np.empty((len(self.y), len(self.names)))
        for k, name in enumerate(self.names):
            da = gradients[name] if self.transform is None else self.transform(gradients[name])
            v = da @ beta * (values[name] if self.positive[k] else 1.0)  # chain rule for log c
            jacobian[:, k] = v - q @ (q.T @ v)
        return jacobian


def _must_stay_positive(termset: TermSet, support: np.ndarray, name: str, value: float) -> bool:
    """Whether constant ``name`` keeps its (positive) sign: it sits in a rational term or in a
    denominator of a selected term."""
    if value <= 0:
        return False
    import sympy

    for i in support:
        term = termset.terms[i]
        if name not in term.constant_names:
            continue
        denominator = sympy.fraction(sympy.together(termset.symbolic(i)))[1]
        if term.kind == "rational" or sympy.Symbol(name) in denominator.free_symbols:
            return True
    return False
