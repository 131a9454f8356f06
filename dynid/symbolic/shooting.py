"""Output-error refinement of identified coefficients by multiple shooting.

Equation-error fits (the weak form, smoothed derivatives) regress on the noisy samples, so noise
enters twice, in the targets and inside the terms (errors in variables), and on a short record
the weak form must use short test functions to keep enough rows for model selection. Once the
support is chosen, the maximum-likelihood coefficients under white measurement noise of std
sigma_i minimise instead the misfit of simulated trajectories to the samples,

    sum_s sum_k sum_i ((x_i(t_sk; a_s, Xi) - y_sk,i) / sigma_i)^2,

over the coefficients Xi on the selected support, the constants inside the selected terms (c in
x/(c + x)) and one initial state a_s per segment s (multiple shooting: Bock & Plitt 1984; for
sparse regression models, the output-error refinement discussed by Kaheman et al. 2022 and
Ribera et al. 2022). Every segment starts from its own
fitted state, so a chaotic model's divergence over a whole record never enters the fit. A
segment lasts one decorrelation time of the data (``weak_form.decorrelation_samples``): long
enough that the trajectories carry far more information about Xi than a derivative does, short
enough that the fit starting from the equation-error estimate stays in its basin.

Numerics: classical RK4 on the sample grid, sub-steps doubled until halving the step moves the
trajectories by less than ``STEP_TOLERANCE`` of the noise; forward sensitivities (d x / d a_s,
d x / d Xi, d x / d c) integrated alongside with the library's derivatives from sympy;
Levenberg-Marquardt on the Gauss-Newton normal equations, whose arrow structure (segment states
couple only through Xi) is solved by the Schur complement, so the cost grows with the number of
segments only linearly. Segments are integrated together, vectorised over segments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Trial
from dynid.symbolic.cache import CACHE
from dynid.symbolic.library import TermSet

#: Shortest segment (samples): with d free initial values per segment, shorter ones waste data.
MIN_SEGMENT = 9
#: Most samples one segment compares (its integration runs through them in sequence, while all
#: segments are integrated at once); longer segments use every stride-th sample.
MAX_NODES = 65
#: RK4 sub-steps per sample interval are doubled up to this many.
MAX_SUBSTEPS = 16
#: Integration error allowed, as a fraction of the noise std (halving-the-step test).
STEP_TOLERANCE = 0.01
MAX_ITERATIONS = 40
#: Stop when an accepted step lowers the misfit by less than this fraction.
RELATIVE_DECREASE = 1e-8
#: Noise std floor, relative to the largest variable's, so a noise-free column has finite weight.
SIGMA_FLOOR = 1e-3


@dataclass(frozen=True)
class ShootingFit:
    """The refined coefficients (d, P) and constants ({name: value}, every constant of the term
    set, the selected terms' ones refined) and how the fit went.

    misfit_before / misfit_after: RMS of the noise-standardised residuals (about 1 when the
    model reproduces the samples to within their noise); cost: their sum of squares at the end
    (-2 log-likelihood up to a constant, over ``residuals`` values, of which ``dof`` remain
    after the fitted coefficients, constants and segment states). coefficient_std (d, P): the
    standard error of each fitted coefficient (0 off the support), from the Gauss-Newton
    curvature of the misfit with the segment states profiled out (``_Normal.parameter_std``).
    """

    coefficients: np.ndarray
    constants: dict[str, float]
    segments: int
    segment_samples: int
    stride: int
    substeps: int
    iterations: int
    misfit_before: float
    misfit_after: float
    cost: float
    residuals: int
    dof: int
    states: np.ndarray  # (segments, d) fitted initial states, to start a related fit from
    coefficient_std: np.ndarray

    def details(self) -> dict[str, Any]:
        return {
            "segments": self.segments,
            "segment_samples": self.segment_samples,
            "stride": self.stride,
            "substeps": self.substeps,
            "iterations": self.iterations,
            "misfit_before": self.misfit_before,
            "misfit_after": self.misfit_after,
        }


def refine_by_shooting(
    termset: TermSet,
    coefficients: np.ndarray,
    trials: Sequence[Trial],
    noise: np.ndarray,
    *,
    support: np.ndarray | None = None,
    states: np.ndarray | None = None,
    segment_samples: int | None = None,
    enough: float = 0.0,
) -> ShootingFit | None:
    """Refine the nonzero entries of ``coefficients`` (d, P; d x/dt = coefficients @ Theta(x, u)
    over ``termset``) and the constants of the terms they multiply by multiple shooting on
    ``trials`` (see the module docstring).

    noise: (d,) measurement-noise std per variable, in the units of x. support: (d, P) bool, the
    entries to fit (default: the nonzero ones; a zero entry inside it starts at 0). states:
    initial segment states to start from (``ShootingFit.states`` of a fit on the same trials;
    default: the samples). segment_samples: samples per segment (default: one decorrelation
    time, at least ``MIN_SEGMENT``). enough: the RMS standardised misfit at which iterating
    stops (0: until converged; on clean data, where ``noise`` is the precision asked for, 1:
    the trajectories already match to it, often before the first step). A step that moves a constant out of its term's bounds
    (``Term.bounds``) or across zero is refused. Returns None when nothing can be refined (an
    empty support, no trial as long as one segment, or a trajectory of the starting model that
    leaves the finite numbers).
    """
    setup = _Setup.build(termset, coefficients, trials, noise, support, states, segment_samples)
    if setup is None:
        return None
    problem, params, states, substeps = setup.problem, setup.start, setup.states, setup.substeps
    current = problem.evaluate(params, states, substeps)
    if current is None:
        return None
    before, lam, iterations = current.cost, 1e-3, 0
    count = setup.segments.y.size
    for iterations in range(1, MAX_ITERATIONS + 1):
        if current.cost <= enough**2 * count:
            iterations -= 1
            break
        step_params, step_states = current.step(lam)
        proposal = params + step_params
        trial = problem.evaluate(proposal, states + step_states, substeps) if setup.admissible(proposal) else None
        if trial is not None and trial.cost < current.cost:
            decrease = (current.cost - trial.cost) / current.cost
            params, states, current = proposal, states + step_states, trial
            lam = max(lam / 3.0, 1e-12)
            if decrease < RELATIVE_DECREASE:
                break
        else:
            lam *= 4.0
            if lam > 1e10:
                break
    q = setup.rows.size
    refined = np.zeros_like(setup.coefficients)
    refined[setup.rows, setup.cols] = params[:q]
    dof = int(count - params.size - states.size)
    std = np.zeros_like(setup.coefficients)
    std[setup.rows, setup.cols] = current.parameter_std(max(dof, 1))[:q]
    return ShootingFit(
        refined,
        {**termset.constants, **dict(zip(setup.names, map(float, params[q:])))},
        setup.segments.count,
        setup.length,
        setup.stride,
        substeps,
        iterations,
        float(np.sqrt(before / count)),
        float(np.sqrt(current.cost / count)),
        float(current.cost),
        int(count),
        dof,
        states,
        std,
    )


def predicted_decrease(
    termset: TermSet,
    coefficients: np.ndarray,
    trials: Sequence[Trial],
    noise: np.ndarray,
    *,
    support: np.ndarray,
    states: np.ndarray | None = None,
) -> float:
    """The drop in misfit (``ShootingFit.cost`` units) one Gauss-Newton step from this point
    predicts, g^T (J^T J)^-1 g: at a fit of a smaller support, with the added entries at 0, the
    score (Rao) statistic of adding them, which the likelihood-ratio drop equals to second
    order, at the cost of one integration. Arguments as for ``refine_by_shooting``; nan when the
    point cannot be integrated."""
    setup = _Setup.build(termset, coefficients, trials, noise, support, states, None)
    normal = None if setup is None else setup.problem.evaluate(setup.start, setup.states, setup.substeps)
    if normal is None:
        return float("nan")
    step_params, step_states = normal.step(0.0)
    return float(-(normal.g_beta @ step_params + np.sum(normal.g_states * step_states)))


@dataclass
class _Setup:
    """What a shooting fit starts from: the problem, the segments and their plan, the fitted
    entries (rows, cols) and constants (names), the start (params, states), the sub-steps."""

    problem: _Problem
    segments: _Segments
    length: int
    stride: int
    coefficients: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    names: list[str]
    start: np.ndarray
    states: np.ndarray
    substeps: int
    admissible: Callable[[np.ndarray], bool]

    @classmethod
    def build(cls, termset, coefficients, trials, noise, support, states, segment_samples) -> _Setup | None:
        coefficients = np.asarray(coefficients, dtype=float)
        entries = np.argwhere(coefficients != 0 if support is None else np.asarray(support, dtype=bool))
        if entries.size == 0:
            return None
        length, stride = _segment_plan(trials)
        if segment_samples is not None:
            length, stride = segment_samples, 1
        segments = _Segments.cut(trials, length, stride)
        if segments is None:
            return None
        d = coefficients.shape[0]
        sigma = np.asarray(noise, dtype=float).reshape(d)
        sigma = np.maximum(sigma, SIGMA_FLOOR * max(float(np.max(sigma)), np.finfo(float).tiny))
        used = sorted({int(j) for j in entries[:, 1]})
        names = list(dict.fromkeys(c for j in used for c in termset.terms[j].constant_names))
        problem = _Problem(_library_function(termset, names), coefficients.shape, entries, segments, sigma)
        rows, cols = entries[:, 0], entries[:, 1]
        start = np.concatenate([coefficients[rows, cols], [termset.constants[c] for c in names]])
        substeps = problem.choose_substeps(start)
        if substeps is None:
            return None
        states = segments.y[:, 0].copy() if states is None else np.array(states, dtype=float)
        admissible = _admissible(termset, names, start[rows.size:])
        return cls(problem, segments, length, stride, coefficients, rows, cols, names, start, states, substeps, admissible)


def _admissible(termset: TermSet, names: list[str], start: np.ndarray) -> Callable[[np.ndarray], bool]:
    """Whether a parameter vector (coefficients, then the constants ``names``) keeps every
    constant on the side of zero it started on and inside its terms' bounds."""
    low, high = np.full(len(names), -np.inf), np.full(len(names), np.inf)
    for term in termset.terms:
        for name, lo, hi in term.bounds:
            if name in names:
                k = names.index(name)
                low[k], high[k] = max(low[k], lo), min(high[k], hi)
    sign = np.sign(start)
    r = len(names)

    def admissible(params: np.ndarray) -> bool:
        constants = params[params.size - r :] if r else params[:0]
        return bool(np.all((constants >= low) & (constants <= high) & (np.sign(constants) == sign)))

    return admissible


def _segment_plan(trials: Sequence[Trial]) -> tuple[int, int]:
    """(samples per segment, stride): a segment spans one decorrelation time of the data
    (``2 m + 1`` samples, m from ``weak_form.decorrelation_samples``, at least MIN_SEGMENT, at
    most the longest trial); when that is more than MAX_NODES samples, the segment is sampled
    every ``stride``-th sample (see ``_Segments.cut``), or, with inputs, which the integration
    interpolates linearly between the compared samples, cut to MAX_NODES samples."""
    from dynid.symbolic.weak_form import decorrelation_samples

    longest = max(trial.n_samples for trial in trials)
    lags = [decorrelation_samples(trial.x) for trial in trials if trial.n_samples >= MIN_SEGMENT]
    typical = int(np.median(lags)) if lags else MIN_SEGMENT
    length = int(min(max(MIN_SEGMENT, 2 * typical + 1), longest))
    if any(trial.u is not None for trial in trials):
        return min(length, MAX_NODES), 1
    return length, max(1, -(-(length - 1) // (MAX_NODES - 1)))


@dataclass(frozen=True)
class _Segments:
    """S segments of L samples: t (S, L), y (S, L, d), u (S, L, m) or None."""

    t: np.ndarray
    y: np.ndarray
    u: np.ndarray | None

    @property
    def count(self) -> int:
        return int(self.y.shape[0])

    @classmethod
    def cut(cls, trials: Sequence[Trial], length: int, stride: int = 1) -> _Segments | None:
        """Consecutive segments spanning ``length`` samples of each long-enough trial (the last
        one of a trial ends at its last sample and may overlap the one before).

        stride > 1: each trial is first split into its ``stride`` interleaved sub-series
        (samples j, j + stride, ...), and those are cut into segments of the same span, so
        every sample is still used once while a segment compares only (length - 1) // stride + 1
        of them (the integration step is checked against the noise all the same).
        """
        if stride > 1:
            thinned = [trial.slice(j, None, stride) for trial in trials for j in range(stride)]
            return cls.cut(thinned, (length - 1) // stride + 1)
        ts, ys, us = [], [], []
        for trial in trials:
            n = trial.n_samples
            if n < length or not np.all(np.isfinite(trial.x)):
                continue
            starts = list(range(0, n - length + 1, length))
            if starts[-1] + length < n:
                starts.append(n - length)
            for start in starts:
                ts.append(trial.t[start : start + length])
                ys.append(trial.x[start : start + length])
                if trial.u is not None:
                    us.append(trial.u[start : start + length])
        if not ts:
            return None
        return cls(np.asarray(ts, float), np.asarray(ys, float), np.asarray(us, float) if us else None)


def _library_function(termset: TermSet, constants: list[str]) -> Callable[..., tuple[np.ndarray, ...]]:
    """f(x (S, d), u (S, m) or None, values (r,) of ``constants``) -> (Theta (S, P),
    d Theta / d x (S, P, d), d Theta / d constants (S, P, r)), compiled once from the terms'
    sympy forms (common subexpressions shared); other constants keep their term-set values.
    Compiled functions of recent term sets are kept in ``cache.CACHE``: a fit and the score test
    before it, or the candidates of consecutive equations, share one."""
    fixed = tuple(sorted((n, v) for n, v in termset.constants.items() if n not in constants))
    key = (tuple(t.expr for t in termset.terms), termset.n_states, termset.n_inputs, tuple(constants), fixed)
    return CACHE.get("library", key, lambda: _compile_library(termset, constants))


def _compile_library(termset: TermSet, constants: list[str]) -> Callable[..., tuple[np.ndarray, ...]]:
    import sympy

    from dynid.symbolic.user_terms import coordinate_names

    d, m, p, r = termset.n_states, termset.n_inputs, len(termset), len(constants)
    symbols = [sympy.Symbol(name) for name in coordinate_names(d, m)]
    free = [sympy.Symbol(name) for name in constants]
    fixed = {sympy.Symbol(n): v for n, v in termset.constants.items() if n not in constants}
    terms = [termset.symbolic(k).subs(fixed) for k in range(p)]
    gradients = [sympy.diff(term, symbol) for term in terms for symbol in symbols[:d] + free]
    compiled = sympy.lambdify(symbols + free, terms + gradients, modules="numpy", cse=True)

    def evaluate(x: np.ndarray, u: np.ndarray | None, values: np.ndarray) -> tuple[np.ndarray, ...]:
        arguments = list(x.T) + ([] if u is None else list(u.T)) + list(values)
        out = np.empty((p * (1 + d + r), x.shape[0]))
        with np.errstate(all="ignore"):
            for k, value in enumerate(compiled(*arguments)):
                out[k] = value
        gradient = out[p:].reshape(p, d + r, -1).transpose(2, 0, 1)
        return out[:p].T, gradient[:, :, :d], gradient[:, :, d:]

    return evaluate


@dataclass
class _Normal:
    """The misfit at one point and its Gauss-Newton normal equations in arrow form:
    U (S, d, d) per segment state, W (S, d, n) segment state x parameters, V (n, n),
    gradients g_states (S, d) and g_beta (n,)."""

    cost: float
    U: np.ndarray
    W: np.ndarray
    V: np.ndarray
    g_states: np.ndarray
    g_beta: np.ndarray

    def step(self, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """The Levenberg-Marquardt step (parameters (n,), segment states (S, d)) with
        Marquardt's scaling (lam times the diagonal), by the Schur complement."""
        d = self.U.shape[1]
        eye = np.eye(d)
        diagonal = np.einsum("sii->si", self.U)
        # U is positive definite: each segment's first sample alone gives it the identity.
        U = self.U + lam * diagonal[:, :, None] * eye
        V = self.V + lam * np.diag(np.diag(self.V))
        solved_W = np.linalg.solve(U, self.W)
        solved_g = np.linalg.solve(U, self.g_states[:, :, None])[:, :, 0]
        schur = V - np.einsum("sdq,sdr->qr", self.W, solved_W)
        rhs = -self.g_beta + np.einsum("sdq,sd->q", self.W, solved_g)
        step_beta = np.linalg.lstsq(schur, rhs, rcond=None)[0]
        step_states = -(solved_g + np.einsum("sdq,q->sd", solved_W, step_beta))
        return step_beta, step_states

    def parameter_std(self, dof: int) -> np.ndarray:
        """Standard errors (n,) of the parameters at a minimum of the misfit: the square roots of
        the diagonal of s^2 S^-1, S = V - W^T U^-1 W the Schur complement (the curvature with
        every segment's state profiled out, i.e. the inverse of the parameter block of
        (J^T J)^-1) and s^2 = cost / dof the residual variance per degree of freedom, so a
        misestimated noise level does not shrink or widen them (the asymptotic covariance of
        the maximum-likelihood estimate under white measurement noise)."""
        solved_W = np.linalg.solve(self.U, self.W)
        schur = self.V - np.einsum("sdq,sdr->qr", self.W, solved_W)
        variance = np.diag(np.linalg.pinv(schur)) * self.cost / dof
        return np.sqrt(np.maximum(variance, 0.0))


class _Problem:
    """The shooting problem: all segments integrated at once, with their sensitivities.

    Parameters: the q coefficients on ``support`` (rows, columns of Xi), then the r constants
    the library function takes."""

    def __init__(self, library, shape: tuple[int, int], support: np.ndarray, segments: _Segments, sigma: np.ndarray):
        self.library = library
        self.shape = shape
        self.rows, self.cols = support[:, 0], support[:, 1]
        self.segments = segments
        self.sigma = sigma

    def choose_substeps(self, params: np.ndarray) -> int | None:
        """The fewest RK4 sub-steps per sample whose trajectories (at ``params``, from the
        observed initial states) move by less than STEP_TOLERANCE of the noise when the step
        is halved; None if a trajectory is not finite."""
        previous = self._trajectories(params, 1)
        substeps = 1
        while previous is not None and substeps < MAX_SUBSTEPS:
            finer = self._trajectories(params, 2 * substeps)
            if finer is None:
                return None
            change = float(np.max(np.abs(finer - previous) / self.sigma))
            previous, substeps = finer, 2 * substeps
            if change < STEP_TOLERANCE:
                return substeps // 2
        return None if previous is None else substeps

    def _trajectories(self, params: np.ndarray, substeps: int) -> np.ndarray | None:
        out = np.empty_like(self.segments.y)
        for k, point in enumerate(self._integrate(params, self.segments.y[:, 0], substeps, False)):
            if point is None:
                return None
            out[:, k] = point[0]
        return out

    def evaluate(self, params: np.ndarray, states: np.ndarray, substeps: int) -> _Normal | None:
        """Misfit and normal equations at (params, states (S, d)); None if a trajectory or its
        sensitivities are not finite."""
        S, _, d = self.segments.y.shape
        n = params.size
        weight = 1.0 / self.sigma
        normal = _Normal(0.0, np.zeros((S, d, d)), np.zeros((S, d, n)), np.zeros((n, n)), np.zeros((S, d)), np.zeros(n))
        for k, point in enumerate(self._integrate(params, states, substeps, True)):
            if point is None:
                return None
            x, phi, psi = point
            residual = (x - self.segments.y[:, k]) * weight
            phi_w = phi * weight[None, :, None]
            psi_w = psi * weight[None, :, None]
            normal.cost += float(np.sum(residual**2))
            normal.U += np.einsum("sij,sik->sjk", phi_w, phi_w)
            normal.W += np.einsum("sij,sik->sjk", phi_w, psi_w)
            normal.V += np.einsum("sij,sik->jk", psi_w, psi_w)
            normal.g_states += np.einsum("sij,si->sj", phi_w, residual)
            normal.g_beta += np.einsum("sij,si->j", psi_w, residual)
        return normal

    def _integrate(self, params: np.ndarray, states: np.ndarray, substeps: int, sensitivities: bool):
        """Yield (x (S, d), d x / d states (S, d, d), d x / d params (S, d, n)) at every sample
        of the segments (the sensitivities None unless asked for); None, once, where the
        integration leaves the finite numbers."""
        S, _, d = self.segments.y.shape
        q = self.rows.size
        xi = np.zeros(self.shape)
        xi[self.rows, self.cols] = params[:q]
        kappa = params[q:]
        columns = np.arange(q)

        def derivative(x, phi, psi, u):
            theta, by_state, by_constant = self.library(x, u, kappa)
            f = theta @ xi.T
            if not sensitivities:
                return f, None, None
            jacobian = np.einsum("ip,spj->sij", xi, by_state)
            forcing = np.zeros((S, d, params.size))
            forcing[:, self.rows, columns] = theta[:, self.cols]
            forcing[:, :, q:] = np.einsum("ip,spl->sil", xi, by_constant)
            return f, jacobian @ phi, jacobian @ psi + forcing

        def moved(point, slope, steps):  # point + step * slope, component by component
            return tuple(None if v is None else v + h * s for v, s, h in zip(point, slope, steps))

        point = (states.copy(), None, None)
        if sensitivities:
            point = (point[0], np.broadcast_to(np.eye(d), (S, d, d)).copy(), np.zeros((S, d, params.size)))
        yield point
        with np.errstate(all="ignore"):
            for h, inputs in self._steps(substeps):
                hh = (h, h[:, :, None], h[:, :, None])
                for u0, um, u1 in inputs:
                    a = derivative(*point, u0)
                    b = derivative(*moved(point, a, [0.5 * v for v in hh]), um)
                    c = derivative(*moved(point, b, [0.5 * v for v in hh]), um)
                    e = derivative(*moved(point, c, hh), u1)
                    slope = tuple(
                        None if w is None else (w + 2 * x + 2 * y + z) / 6.0 for w, x, y, z in zip(a, b, c, e)
                    )
                    point = moved(point, slope, hh)
                if not all(v is None or np.all(np.isfinite(v)) for v in point):
                    yield None
                    return
                yield point

    def _steps(self, substeps: int):
        """Per sample interval: (sub-step h (S, 1), [(u at start, middle, end of each sub-step)])."""
        t, u = self.segments.t, self.segments.u
        for k in range(t.shape[1] - 1):
            h = ((t[:, k + 1] - t[:, k]) / substeps)[:, None]
            if u is None:
                yield h, [(None, None, None)] * substeps
                continue
            du = (u[:, k + 1] - u[:, k]) / substeps
            yield h, [
                (u[:, k] + j * du, u[:, k] + (j + 0.5) * du, u[:, k] + (j + 1) * du)
                for j in range(substeps)
            ]
