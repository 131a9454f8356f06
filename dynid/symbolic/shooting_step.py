"""Step 4 of ``identify``: continuous-time data get their coefficients and constants refined
by multiple shooting (``shooting.refine_by_shooting``), i.e. by fitting simulated trajectories
to the samples, which the equation-error fits only approximate (under noise, and on clean but
coarse samples through the finite difference's truncation error); then, on noisy data, each
equation may gain the next term of its library when the trajectories' likelihood pays for it by
BIC (``shooting_additions``).
"""

from __future__ import annotations

from dataclasses import replace
from math import log

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.symbolic.library import TermSet
from dynid.symbolic.library_choice import EquationChoice
from dynid.symbolic.noise import estimate_noise
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.refit import refit
from dynid.symbolic.rows import RegressionRows
from dynid.symbolic.shooting import ShootingFit, predicted_decrease, refine_by_shooting


#: Relative precision a noise-free record is fitted to: the noise std shooting weights by is at
#: least this times a variable's RMS, so the RK4 sub-steps aim at a reachable integration error
#: (STEP_TOLERANCE of it) instead of the samples' rounding error.
CLEAN_PRECISION = 1e-8
#: Relative truncation error of clean records' finite-difference targets above which shooting
#: refines them: a tenth of the 1e-6 relative coefficient accuracy aimed at on clean data.
TRUNCATION_TOLERANCE = 1e-7


def shooting_applies(rows: RegressionRows, params: SymbolicParams) -> bool:
    """Whether shooting runs: on continuous-time records that are noisy (there it is the
    maximum-likelihood fit that the equation-error fits only approximate) or clean but coarsely
    sampled. On clean data it removes the finite difference's truncation error (O(h^4) at step
    h: -0.96 for a one-term -x^3 on 150 samples) down to the integration error, which the RK4
    sub-steps hold below ``CLEAN_PRECISION``; it pays when that truncation error, relative to
    the targets' RMS, exceeds ``TRUNCATION_TOLERANCE`` in some equation (coefficients are then
    off by about as much), and on densely sampled clean records only costs time."""
    if not params.shooting or params.discrete:
        return False
    if not _clean(rows):
        return True
    scale = np.sqrt(np.mean(rows.targets**2, axis=0))
    return bool(np.any(rows.target_error > TRUNCATION_TOLERANCE * scale))


def _clean(rows: RegressionRows) -> bool:
    return rows.details.get("derivative") == ["finite_difference"]


def adds_terms(rows: RegressionRows) -> bool:
    """Whether ``shooting_additions`` runs: on noisy data only. Its test is a likelihood ratio
    under white measurement noise; on clean data the residuals are the integration's and the
    samples' own rounding errors, systematic and far below any term's contribution, which such
    a test would read as evidence for spurious terms (measured: a 1e-9 x^2 beside -x^3)."""
    return not _clean(rows)


def shoot(
    termset: TermSet, coefficients: np.ndarray, trials: list[Trial], noise: np.ndarray, rows: RegressionRows
) -> ShootingFit | None:
    """``shooting.refine_by_shooting`` of the selected terms; None if it could not run. On clean
    data it stops once the trajectories match to ``CLEAN_PRECISION`` (densely sampled records
    often do from the start: Duffing on 5000 samples took 25 iterations, 188 s on the loaded
    machine, for coefficients already within 1e-7)."""
    fit = refine_by_shooting(termset, coefficients, trials, noise, enough=1.0 if _clean(rows) else 0.0)
    return fit if fit is not None and np.all(np.isfinite(fit.coefficients)) else None


def shooting_data(data: Dataset) -> tuple[list[Trial], np.ndarray]:
    """The trials shooting fits (those the regression used) and the noise std (d,) pooled over
    them by sample count, at least ``CLEAN_PRECISION`` times each variable's RMS."""
    trials = [trial for trial in data.trials if trial.n_samples >= 7]
    count = sum(trial.n_samples for trial in trials)
    variance = sum(trial.n_samples * estimate_noise(trial.x, trial.t) ** 2 for trial in trials) / count
    power = sum(np.sum(trial.x**2, axis=0) for trial in trials) / count
    return trials, np.maximum(np.sqrt(variance), CLEAN_PRECISION * np.sqrt(power))


def shooting_additions(
    chosen: list[EquationChoice], selected: TermSet, start: np.ndarray, origins: list[dict[int, int]],
    rows: RegressionRows, params: SymbolicParams, fit: ShootingFit, trials: list[Trial], noise: np.ndarray,
) -> tuple[list[EquationChoice], TermSet, np.ndarray, list[dict[int, int]], ShootingFit]:
    """Equation by equation, the chosen library's best support with one term more, kept when the
    trajectories' likelihood pays for it by BIC: the drop in the noise-standardised misfit
    (``fit.cost``, -2 log L), measured in units of the larger model's residual variance per
    degree of freedom (so a misestimated noise level does not make the test lenient), must
    exceed ln(residuals) plus 2 ln(p - k), the risk inflation of taking the best of the p - k
    possible additions (Foster & George 1994). Held-out equation errors of noisy records (the
    weak form's short test functions) miss weak terms that the trajectories show (scores
    measured: benchmarks/README.md, "Symbolic design experiments").

    A candidate is screened first by its score statistic (``shooting.predicted_decrease`` at the
    current fit, one integration) and fitted, warm-started from the current fit, only when that
    reaches half the penalty. The accepted term is appended to ``selected`` (the columns of
    ``start`` and ``origins`` follow). Returns (chosen, selected, start, origins, fit).
    """
    for i, choice in enumerate(chosen):
        k = int(choice.support.sum())
        larger = next((c for c in choice.selection.all if c.n_terms == k + 1), None)
        if larger is None:
            continue
        support = np.zeros(len(choice.termset), dtype=bool)
        support[choice.columns[larger.support]] = True
        added = np.flatnonzero(support & ~choice.support)
        if added.size != 1 or np.any(choice.support & ~support):  # a swap as well: not a one-term test
            continue
        grown = choice.with_support(support, choice.coef)
        coef, constants = refit(i, grown, rows, params)
        if np.count_nonzero(coef) != k + 1:
            continue
        # The current fit's terms at its constants, then the new term with its own constants.
        term = choice.termset.terms[int(added[0])]
        fresh = {c: f"c{len(fit.constants) + j}" for j, c in enumerate(term.constant_names)}
        new = replace(term, constants=tuple((c, float(constants[c])) for c in term.constant_names)).renamed(fresh)
        current = [replace(t, constants=tuple((c, fit.constants[c]) for c in t.constant_names)) for t in selected.terms]
        trial_terms = TermSet([*current, new], selected.n_states, selected.n_inputs)
        coefficients = np.hstack([fit.coefficients, np.zeros((len(chosen), 1))])
        entries = coefficients != 0
        entries[i, -1] = True
        penalty = log(fit.residuals) + 2.0 * log(int(choice.columns.size) - k)
        scale = fit.cost / max(fit.dof, 1)
        score = predicted_decrease(trial_terms, coefficients, trials, noise, support=entries, states=fit.states)
        if not score / scale >= penalty / 2:
            continue
        trial = refine_by_shooting(trial_terms, coefficients, trials, noise, support=entries, states=fit.states)
        if trial is None or not np.all(np.isfinite(trial.coefficients)):
            continue
        if (fit.cost - trial.cost) / (trial.cost / max(trial.dof, 1)) > penalty:
            column = len(selected)
            chosen = [*chosen[:i], choice.with_support(support, coef), *chosen[i + 1:]]
            selected, fit = trial_terms, trial
            start = np.hstack([start, np.zeros((len(chosen), 1))])
            origins = [*origins[:i], {**origins[i], column: int(added[0])}, *origins[i + 1:]]
            for j, library_column in origins[i].items():
                start[i, j] = coef[library_column]
    return chosen, selected, start, origins, fit
