"""How ``clds`` (``clds.py``) is fitted: its hyperparameters, MAP-EM (E-step: per trial, the
Kalman filter and RTS smoother of the LDS at its condition, ``dynid.linear.kalman``, shared with
``lds``; M-step: ``clds_mstep.py``), the start, and the choice of the prior.

The lengthscale and b's prior sd (``lengthscale=none``, ``drive_sd=none``): after
PRELIMINARY_ITERATIONS of EM at PRELIMINARY_LENGTHSCALE and PRELIMINARY_DRIVE_SD, the pair in
LENGTHSCALES x DRIVE_SDS with the largest marginal likelihood of the transition regression given
the smoothed states (``clds_mstep.log_evidence``); then EM runs to convergence at that pair.
Type-II maximum likelihood on expected statistics (an approximation: the states' uncertainty
enters only through their second moments). b needs its own scale because in the whitened
coordinates it is measured in latent noise sds per step: tens for a fixed point far from the
origin in a quiet system, where a prior sd of 1 would shrink it.

Why the start is not the pooled lds as it is: see ``pooled_start``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dynid.data.dataset import Trial
from dynid.models.base import Hyperparameters, param
from dynid.models.latent.clds_mstep import (
    log_evidence,
    maximise,
    regression,
    residual_covariance,
    transition_sums,
)
from dynid.models.latent.clds_readout import with_readout
from dynid.models.latent.clds_system import ConditionalSystem, course, whitened
from dynid.models.latent.em import Moments, expectations
from dynid.models.latent.fourier import FourierBasis
from dynid.models.latent.iterations import EMResult, iterate_em
from dynid.models.latent.lds import fit_discrete

# Candidate lengthscales (units of the training conditions' range) for lengthscale=none, and the
# preliminary fit whose smoothed states choose among them.
LENGTHSCALES = (0.125, 0.25, 0.5, 1.0, 2.0)
PRELIMINARY_LENGTHSCALE = 0.5
# Candidate prior sds of b(u) for drive_sd=none (whitened units: latent noise sds per step),
# and the one of the preliminary fit.
DRIVE_SDS = (1.0, 3.0, 10.0, 30.0, 100.0)
PRELIMINARY_DRIVE_SD = 10.0
PRELIMINARY_ITERATIONS = 30
# EM iterations of the pooled lds that starts the fit (one A for every condition), and rounds
# of EM with a free Q after it (``pooled_start``).
START_ITERATIONS = 10
START_ROUNDS = 5


@dataclass(frozen=True)
class CLDSParams(Hyperparameters):
    latent: int = param(2, "number of latent states n")
    lengthscale: float | None = param(
        None,
        "lengthscale of the GP prior over the condition, in units of the training conditions' "
        "range; none: the candidate 0.125..2 with the largest marginal likelihood of the "
        "transition regression after a preliminary fit (with one condition it does not matter)",
    )
    prior_sd: float = param(1.0, "prior standard deviation of every entry of A(u)")
    drive_sd: float | None = param(
        None,
        "prior standard deviation of every entry of b(u), in latent noise sds per step; none: "
        "the candidate 1..100 with the largest marginal likelihood, chosen with the lengthscale",
    )
    condition_readout: bool = param(
        False,
        "the read-out C(u) depends on the condition too (a GP prior on its entries in the same "
        "Fourier weight space; C's mean and the offset flat); false: one C for all conditions",
    )
    readout_sd: float | None = param(
        None,
        "with condition_readout: prior sd of C(u)'s change with the condition, as a fraction "
        "of each row's RMS entry; none: the candidate 0.03..1 with the largest marginal "
        "likelihood of the observation regressions after a preliminary fit",
    )
    max_frequencies: int = param(24, "Fourier frequencies per condition column at most")
    max_iter: int = param(200, "EM iterations at most")
    tol: float = param(
        1e-6, "EM stops when an iteration gains less MAP objective than this per observed value"
    )

    def __post_init__(self) -> None:
        if self.latent < 1:
            raise ValueError(f"latent must be at least 1, not {self.latent}")
        if self.lengthscale is not None and not self.lengthscale > 0:
            raise ValueError(f"lengthscale must be positive, not {self.lengthscale}")
        if not self.prior_sd > 0:
            raise ValueError(f"prior_sd must be positive, not {self.prior_sd}")
        if self.drive_sd is not None and not self.drive_sd > 0:
            raise ValueError(f"drive_sd must be positive, not {self.drive_sd}")
        if self.readout_sd is not None and not self.readout_sd > 0:
            raise ValueError(f"readout_sd must be positive, not {self.readout_sd}")
        if self.max_frequencies < 1:
            raise ValueError(f"max_frequencies must be at least 1, not {self.max_frequencies}")
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be at least 1, not {self.max_iter}")
        if not self.tol >= 0:
            raise ValueError(f"tol must be non-negative, not {self.tol}")


@dataclass(frozen=True)
class FittedSystem:
    """The final EM's result; each candidate prior's evidence (keyed "kappa,drive_sd"; None
    when both were given); with condition_readout, the read-out's (``clds_readout.with_readout``;
    None without)."""

    result: EMResult[ConditionalSystem]
    prior_log_evidence: dict[str, float] | None
    readout_log_evidence: dict[str, float] | None


def fit_system(trials: list[Trial], conditions: np.ndarray, params: CLDSParams) -> FittedSystem:
    """The model of ``trials`` (without inputs) at their ``conditions`` (K, M): the pooled
    start, the priors' choice where ``params`` leaves them open (after a preliminary EM), the
    read-out's dependence on the condition if asked, then MAP-EM."""
    kappa = PRELIMINARY_LENGTHSCALE if params.lengthscale is None else params.lengthscale
    drive = PRELIMINARY_DRIVE_SD if params.drive_sd is None else params.drive_sd
    basis = FourierBasis.over(conditions, kappa, params.prior_sd, params.max_frequencies)
    start = pooled_start(trials, conditions, params.latent, basis, drive / params.prior_sd, params.tol)
    distinct = len(np.unique(conditions, axis=0))
    choose = params.drive_sd is None or (params.lengthscale is None and distinct > 1)
    evidence = readout_evidence = None
    if choose or (params.condition_readout and params.readout_sd is None):
        start = run_em(start, trials, conditions, max_iter=PRELIMINARY_ITERATIONS, tol=params.tol).model
    if choose:
        start, evidence = choose_prior(start, trials, conditions, params)
    if params.condition_readout:
        found, _ = expect(start, trials, conditions)
        start, readout_evidence = with_readout(start, trials, conditions, found, params.readout_sd)
        # The fixed read-out's latent noise also held the read-out's change with the condition:
        # too large a latent scale for this model, which EM with Q = I would shrink only slowly.
        start = free_noise_rounds(start, trials, conditions)
    result = run_em(start, trials, conditions, max_iter=params.max_iter, tol=params.tol)
    return FittedSystem(result, evidence, readout_evidence or None)


def expect(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray) -> tuple[list[Moments], float]:
    """The E-step's moments and the MAP objective log p(y | theta) + log p(W)."""
    courses = [course(system.at(u), trial.n_samples) for trial, u in zip(trials, conditions)]
    found, loglik = expectations(courses, trials)
    return found, loglik + system.log_prior()


def run_em(start: ConditionalSystem, trials: list[Trial], conditions: np.ndarray, *,
           max_iter: int, tol: float) -> EMResult[ConditionalSystem]:
    """MAP-EM from ``start`` (``iterate_em``'s stopping rule on the MAP objective)."""
    return iterate_em(
        start,
        lambda system: expect(system, trials, conditions),
        lambda system, found: maximise(system, trials, conditions, found),
        lambda system: expect(system, trials, conditions)[1],
        n_values=sum(int(np.sum(~np.isnan(trial.x))) for trial in trials),
        max_iter=max_iter,
        tol=tol,
    )


def pooled_start(trials: list[Trial], conditions: np.ndarray, n: int, basis: FourierBasis,
                 drive_scale: float, tol: float) -> ConditionalSystem:
    """One lds fitted to every trial as a conditional system whose A does not depend on the
    condition (only the constant feature has weights), then START_ROUNDS of EM with a free Q,
    each followed by the change of coordinates that makes Q = I (``whitened``).

    Why the rounds: the pooled lds's Q also holds the differences between conditions, so its
    coordinates are too small for the conditional model; with Q fixed, EM would take hundreds
    of iterations to grow them (C and the latent scale change slowly), while the Q M-step finds
    the scale at once. The likelihood does not decrease in these rounds; the MAP-EM after them
    keeps Q = I."""
    pooled = fit_discrete(trials, n, START_ITERATIONS, tol).model
    weights = np.zeros((basis.size, n + 1, n))
    constant = float(basis.features(conditions[:1])[0, 0])  # the one feature constant in u
    weights[0, :n] = pooled.a.T / constant
    system = ConditionalSystem(weights=weights, c=pooled.c, offset=pooled.offset, r=pooled.r,
                               m0=pooled.m0, p0=pooled.p0, basis=basis, drive_scale=drive_scale)
    return free_noise_rounds(whitened(system, pooled.q), trials, conditions)


def free_noise_rounds(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray) -> ConditionalSystem:
    """START_ROUNDS of EM with a free Q, each followed by the change of coordinates that makes
    Q = I (``whitened``): the latent scale found at once (``pooled_start``)."""
    for _ in range(START_ROUNDS):
        found, _ = expect(system, trials, conditions)
        system = maximise(system, trials, conditions, found)
        system = whitened(system, residual_covariance(system, conditions, found))
    return system


def choose_prior(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray,
                 params: CLDSParams) -> tuple[ConditionalSystem, dict[str, float]]:
    """The start of the final EM at the lengthscale and drive sd of largest evidence (module
    docstring), over the candidates of those not fixed by ``params``, and each pair's evidence
    (keyed "kappa,drive_sd")."""
    found, _ = expect(system, trials, conditions)
    kappas = LENGTHSCALES if params.lengthscale is None else (params.lengthscale,)
    drives = DRIVE_SDS if params.drive_sd is None else (params.drive_sd,)
    evidence: dict[tuple[float, float], float] = {}
    for kappa in kappas:
        features = FourierBasis.over(conditions, kappa, params.prior_sd, params.max_frequencies).features(conditions)
        for drive in drives:
            sums = transition_sums(found, drive / params.prior_sd)
            evidence[kappa, drive] = log_evidence(*regression(features, *sums))
    # Ties (as in kappa with one condition, whose evidence cannot depend on it): the smoothest.
    kappa, drive = max(sorted(evidence, key=lambda pair: (-pair[0], pair[1])), key=evidence.__getitem__)
    basis = FourierBasis.over(conditions, kappa, params.prior_sd, params.max_frequencies)
    chosen = maximise(replace(system, basis=basis, drive_scale=drive / params.prior_sd), trials, conditions, found)
    return chosen, {f"{k:g},{d:g}": value for (k, d), value in evidence.items()}
