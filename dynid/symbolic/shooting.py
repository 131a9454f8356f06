"""Output-error refinement of identified coefficients by multiple shooting.

Equation-error fits (the weak form, smoothed derivatives) regress on the noisy samples, so noise
enters twice, in the targets and inside the terms (errors in variables), and on a short record
the weak form must use short test functions to keep enough rows for model selection. Once the
support is chosen, the maximum-likelihood coefficients under white measurement noise of std
sigma_i minimise instead the misfit of simulated trajectories to the samples,

    sum_s sum_k sum_i ((x_i(t_sk; a_s, Xi) - y_sk,i) / sigma_i)^2,

over the coefficients Xi on the selected support and one initial state a_s per segment s
(multiple shooting: Bock & Plitt 1984; for sparse regression models, the output-error refinement
discussed by Kaheman et al. 2022 and Ribera et al. 2022). Every segment starts from its own
fitted state, so a chaotic model's divergence over a whole record never enters the fit. A
segment lasts one decorrelation time of the data (``weak_form.decorrelation_samples``): long
enough that the trajectories carry far more information about Xi than a derivative does, short
enough that the fit starting from the equation-error estimate stays in its basin.

Numerics: classical RK4 on the sample grid, sub-steps doubled until halving the step moves the
trajectories by less than ``STEP_TOLERANCE`` of the noise; forward sensitivities (d x / d a_s,
d x / d Xi) integrated alongside with the library's state Jacobian from sympy;
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
    """The refined coefficients (d, P) and how the fit went.

    misfit_before / misfit_after: RMS of the noise-standardised residuals (about 1 when the
    model reproduces the samples to within their noise).
    """

    coefficients: np.ndarray
    segments: int
    segment_samples: int
    stride: int
    substeps: int
    iterations: int
    misfit_before: float
    misfit_after: float

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
    termset: Any,
    coefficients: np.ndarray,
    trials: Sequence[Trial],
    noise: np.ndarray,
    *,
    segment_samples: int | None = None,
) -> ShootingFit | None:
    """Refine the nonzero entries of ``coefficients`` (d, P; d x/dt = coefficients @ Theta(x, u)
    over ``termset``) by multiple shooting on ``trials`` (see the module docstring).

    noise: (d,) measurement-noise std per variable, in the units of x. segment_samples: samples
    per segment (default: one decorrelation time, at least ``MIN_SEGMENT``). Returns None when
    nothing can be refined (no nonzero coefficient, no trial as long as one segment, or a
    trajectory of the starting model that leaves the finite numbers).
    """
    coefficients = np.asarray(coefficients, dtype=float)
    support = np.argwhere(coefficients != 0)
    if support.size == 0:
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
    problem = _Problem(_library_function(termset), coefficients, support, segments, sigma)
    substeps = problem.choose_substeps()
    if substeps is None:
        return None
    beta, states = coefficients[support[:, 0], support[:, 1]], segments.y[:, 0].copy()
    current = problem.evaluate(beta, states, substeps)
    if current is None:
        return None
    before, lam, iterations = current.cost, 1e-3, 0
    for iterations in range(1, MAX_ITERATIONS + 1):
        step_beta, step_states = current.step(lam)
        trial = problem.evaluate(beta + step_beta, states + step_states, substeps)
        if trial is not None and trial.cost < current.cost:
            decrease = (current.cost - trial.cost) / current.cost
            beta, states, current = beta + step_beta, states + step_states, trial
            lam = max(lam / 3.0, 1e-12)
            if decrease < RELATIVE_DECREASE:
                break
        else:
            lam *= 4.0
            if lam > 1e10:
                break
    refined = np.zeros_like(coefficients)
    refined[support[:, 0], support[:, 1]] = beta
    count = segments.y.size
    return ShootingFit(
        refined,
        segments.count,
        length,
        stride,
        substeps,
        iterations,
        float(np.sqrt(before / count)),
        float(np.sqrt(current.cost / count)),
    )


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


def _library_function(termset: Any) -> Callable[[np.ndarray, np.ndarray | None], tuple[np.ndarray, np.ndarray]]:
    """f(x (S, d), u (S, m) or None) -> (Theta (S, P), d Theta / d x (S, P, d)), compiled once
    from the terms' sympy forms (common subexpressions shared)."""
    import sympy

    from dynid.symbolic.user_terms import coordinate_names

    d, m, p = termset.n_states, termset.n_inputs, len(termset)
    symbols = [sympy.Symbol(name) for name in coordinate_names(d, m)]
    values = {sympy.Symbol(name): value for name, value in termset.constants.items()}
    terms = [termset.symbolic(k).subs(values) for k in range(p)]
    gradients = [sympy.diff(term, symbol) for term in terms for symbol in symbols[:d]]
    compiled = sympy.lambdify(symbols, terms + gradients, modules="numpy", cse=True)

    def evaluate(x: np.ndarray, u: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        columns = list(x.T) + ([] if u is None else list(u.T))
        out = np.empty((p * (1 + d), x.shape[0]))
        with np.errstate(all="ignore"):
            for k, value in enumerate(compiled(*columns)):
                out[k] = value
        return out[:p].T, out[p:].reshape(p, d, -1).transpose(2, 0, 1)

    return evaluate


@dataclass
class _Normal:
    """The misfit at one point and its Gauss-Newton normal equations in arrow form:
    U (S, d, d) per segment state, W (S, d, q) segment state x coefficients, V (q, q),
    gradients g_states (S, d) and g_beta (q,)."""

    cost: float
    U: np.ndarray
    W: np.ndarray
    V: np.ndarray
    g_states: np.ndarray
    g_beta: np.ndarray

    def step(self, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """The Levenberg-Marquardt step (coefficients (q,), segment states (S, d)) with
        Marquardt's scaling (lam times the diagonal), by the Schur complement."""
        d = self.U.shape[1]
        eye = np.eye(d)
        diagonal = np.einsum("sii->si", self.U)
        U = self.U + lam * diagonal[:, :, None] * eye + 1e-300 * eye
        V = self.V + lam * np.diag(np.diag(self.V))
        solved_W = np.linalg.solve(U, self.W)
        solved_g = np.linalg.solve(U, self.g_states[:, :, None])[:, :, 0]
        schur = V - np.einsum("sdq,sdr->qr", self.W, solved_W)
        rhs = -self.g_beta + np.einsum("sdq,sd->q", self.W, solved_g)
        step_beta = np.linalg.lstsq(schur, rhs, rcond=None)[0]
        step_states = -(solved_g + np.einsum("sdq,q->sd", solved_W, step_beta))
        return step_beta, step_states


class _Problem:
    """The shooting problem: integrate all segments with their sensitivities."""

    def __init__(self, library, coefficients: np.ndarray, support: np.ndarray, segments: _Segments, sigma: np.ndarray):
        self.library = library
        self.shape = coefficients.shape
        self.rows, self.cols = support[:, 0], support[:, 1]
        self.segments = segments
        self.sigma = sigma
        self.start = coefficients

    def _xi(self, beta: np.ndarray) -> np.ndarray:
        xi = np.zeros(self.shape)
        xi[self.rows, self.cols] = beta
        return xi

    def choose_substeps(self) -> int | None:
        """The fewest RK4 sub-steps per sample whose trajectories (starting model, observed
        initial states) move by less than STEP_TOLERANCE of the noise when the step is halved."""
        beta = self.start[self.rows, self.cols]
        states = self.segments.y[:, 0]
        previous = self._trajectories(beta, states, 1)
        substeps = 1
        while previous is not None and substeps < MAX_SUBSTEPS:
            finer = self._trajectories(beta, states, 2 * substeps)
            if finer is None:
                return None
            change = float(np.max(np.abs(finer - previous) / self.sigma))
            previous, substeps = finer, 2 * substeps
            if change < STEP_TOLERANCE:
                return substeps // 2
        return None if previous is None else substeps

    def _trajectories(self, beta: np.ndarray, states: np.ndarray, substeps: int) -> np.ndarray | None:
        xi = self._xi(beta)
        out = np.empty_like(self.segments.y)
        x = states.copy()
        out[:, 0] = x
        for k, (h, inputs) in enumerate(self._steps(substeps)):
            for u0, um, u1 in inputs:
                k1 = self.library(x, u0)[0] @ xi.T
                k2 = self.library(x + 0.5 * h * k1, um)[0] @ xi.T
                k3 = self.library(x + 0.5 * h * k2, um)[0] @ xi.T
                k4 = self.library(x + h * k3, u1)[0] @ xi.T
                x = x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
            if not np.all(np.isfinite(x)):
                return None
            out[:, k + 1] = x
        return out

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

    def evaluate(self, beta: np.ndarray, states: np.ndarray, substeps: int) -> _Normal | None:
        """Misfit and normal equations at (beta, states); None if a trajectory is not finite."""
        xi = self._xi(beta)
        S, L, d = self.segments.y.shape
        q = beta.size
        weight = 1.0 / self.sigma
        x = states.copy()
        phi = np.broadcast_to(np.eye(d), (S, d, d)).copy()
        psi = np.zeros((S, d, q))
        normal = _Normal(0.0, np.zeros((S, d, d)), np.zeros((S, d, q)), np.zeros((q, q)), np.zeros((S, d)), np.zeros(q))
        self._accumulate(normal, x, phi, psi, 0, weight)

        def derivative(x, phi, psi, u):
            theta, gradient = self.library(x, u)
            jacobian = np.einsum("ip,spj->sij", xi, gradient)
            forcing = np.zeros((S, d, q))
            forcing[:, self.rows, np.arange(q)] = theta[:, self.cols]
            return theta @ xi.T, jacobian @ phi, jacobian @ psi + forcing

        with np.errstate(all="ignore"):
            for k, (h, inputs) in enumerate(self._steps(substeps)):
                hh = h[:, :, None]
                for u0, um, u1 in inputs:
                    a = derivative(x, phi, psi, u0)
                    b = derivative(x + 0.5 * h * a[0], phi + 0.5 * hh * a[1], psi + 0.5 * hh * a[2], um)
                    c = derivative(x + 0.5 * h * b[0], phi + 0.5 * hh * b[1], psi + 0.5 * hh * b[2], um)
                    e = derivative(x + h * c[0], phi + hh * c[1], psi + hh * c[2], u1)
                    x = x + h / 6.0 * (a[0] + 2 * b[0] + 2 * c[0] + e[0])
                    phi = phi + hh / 6.0 * (a[1] + 2 * b[1] + 2 * c[1] + e[1])
                    psi = psi + hh / 6.0 * (a[2] + 2 * b[2] + 2 * c[2] + e[2])
                if not (np.all(np.isfinite(x)) and np.all(np.isfinite(psi))):
                    return None
                self._accumulate(normal, x, phi, psi, k + 1, weight)
        return normal

    def _accumulate(self, normal: _Normal, x, phi, psi, k: int, weight: np.ndarray) -> None:
        residual = (x - self.segments.y[:, k]) * weight
        phi_w = phi * weight[None, :, None]
        psi_w = psi * weight[None, :, None]
        normal.cost += float(np.sum(residual**2))
        normal.U += np.einsum("sij,sik->sjk", phi_w, phi_w)
        normal.W += np.einsum("sij,sik->sjk", phi_w, psi_w)
        normal.V += np.einsum("sij,sik->jk", psi_w, psi_w)
        normal.g_states += np.einsum("sij,si->sj", phi_w, residual)
        normal.g_beta += np.einsum("sij,si->j", psi_w, residual)
