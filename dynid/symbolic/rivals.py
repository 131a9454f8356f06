"""Step 4a of ``identify``: libraries that come close on the equation errors, settled by trajectories.

The held-out criterion compares libraries on equation errors (derivatives or weak-form rows),
whose targets carry systematic error: a coarse finite difference's truncation error, the weak
form's errors in the variables. A surrogate from another library can fit those errors as well
as the true terms fit the dynamics (-x^3 against -7.04 x + 7.08 sin x on 150 clean samples).
Trajectories have no such error. So where another library's best choice for an equation comes
within ``choice.RIVAL_MARGIN`` of the winner (its ``rivals``), every contender is fitted to the
samples by multiple shooting (the other equations as chosen), and a rival replaces the winner
where its trajectory criterion is lower by more than ``STRONG_EVIDENCE``:

    n ln(cost / n) + k ln(n) + 2 ln C(p, k_i)

with n the compared residuals, cost the noise-standardised misfit (``ShootingFit.cost``), k the
fitted parameters (coefficients, constants and segment states), i.e. BIC (Schwarz 1978) with
the noise level estimated (so a misestimated noise level, or the precision floor of clean data,
cancels between contenders), plus the contender's model-space penalty within its own library
(``library_choice.choice_penalty``), as in the equation-error comparison. The winner on held-out
equation errors stands unless the trajectories give strong evidence against it: a difference of
6 on this (2 ln Bayes factor) scale is Kass & Raftery's (1995) "strong". Replacing it at any
difference would let noise decide between terms that are equal on the data (x1 against x0^2
when x1 = x0^2 along the record); the swaps this step exists for differ by thousands.

Bounded in time: at most ``choice.MAX_RIVALS`` extra shooting fits per equation, each of at
most ``shooting.MAX_ITERATIONS`` Levenberg-Marquardt steps.
"""

from __future__ import annotations

from math import log

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.symbolic.library_choice import EquationChoice, choice_penalty
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.refit import refit, selected_terms
from dynid.symbolic.rows import RegressionRows
from dynid.symbolic.shooting import ShootingFit
from dynid.symbolic.shooting_step import shoot

Refit = tuple[np.ndarray, dict[str, float]]

# How much lower a rival's trajectory criterion must be to replace the winner (module docstring).
STRONG_EVIDENCE = 6.0


def trajectory_criterion(fit: ShootingFit) -> float:
    """BIC of a shooting fit with the noise level estimated: n ln(cost / n) + k ln(n), n the
    residuals, k = n - dof the fitted parameters (module docstring)."""
    n = fit.residuals
    cost = max(fit.cost, np.finfo(float).tiny * n)
    return n * log(cost / n) + (n - fit.dof) * log(n)


def settle_rivals(
    chosen: list[EquationChoice], refits: list[Refit], fit: ShootingFit, data: Dataset, rows: RegressionRows,
    params: SymbolicParams, trials: list[Trial], noise: np.ndarray,
) -> tuple[list[EquationChoice], list[Refit], ShootingFit]:
    """Equation by equation, the winner, or the rival with the lowest trajectory criterion where
    that is lower than the winner's by more than ``STRONG_EVIDENCE`` (module docstring), with
    the other equations as chosen so far.
    ``fit``: the shooting fit of ``chosen`` (with ``refits``); returns (chosen, refits, fit) of
    the contenders kept."""
    for i, choice in enumerate(chosen):
        best = trajectory_criterion(fit) + choice_penalty(choice) - STRONG_EVIDENCE
        for rival in choice.rivals:
            contender = [*refits[:i], refit(i, rival, rows, params), *refits[i + 1:]]
            trying = [*chosen[:i], rival, *chosen[i + 1:]]
            selected, start, _ = selected_terms(trying, contender, data)
            rival_fit = shoot(selected, start, trials, noise, rows)
            if rival_fit is None:
                continue
            value = trajectory_criterion(rival_fit) + choice_penalty(rival)
            if value < best:  # the next rival must beat this one outright
                best, chosen, refits, fit = value, trying, contender, rival_fit
    return chosen, refits, fit
