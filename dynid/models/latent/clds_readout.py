"""The read-out of ``clds`` as a function of the condition (``-p condition_readout=true``): its
closed-form M-step and the evidence that chooses its prior sd.

C(u) = C + sum_l phihat_l(u) V_l (``ConditionalSystem.observation``): phihat the Fourier
features of A(u)'s basis at unit prior sd, each entry of row i of V_l with prior N(0, s_i^2),
C and the offset c flat (a GP whose constant mean is unknown). Given the condition the
observation of variable i is a linear regression of y_ti on x_t = [phihat(u) (x) z_t; z_t; 1]
with weights w_i = [vec V_.i; C_i; c_i], so the M-step is per variable (R is diagonal): with
M_i = sum_t E[x_t x_t^T] and g_i = sum_t E[x_t] y_ti over the samples where y_ti is observed,

    (M_i + r_i P_i) w_i = g_i,   P_i = diag(s_i^-2 on V, 0 on C_i and c_i),

then r_i = E sum_t (y_ti - w_i^T x_t)^2 / count_i: the brief's Sylvester equation for C with
diagonal R, column by column. Each of the two updates maximises the expected complete-data log
posterior given the other, so MAP-EM stays monotone. The offset stays one for all conditions
(the brief's d): the condition already moves the observed mean through C(u) z*(u).

The prior sd: s_i = rho ||C_i|| / sqrt(n), rho (``readout_sd``) the read-out's change over a
lengthscale as a fraction of its size, set when the read-out is switched on (and kept that
fraction through the start's changes of coordinates, ``clds_system.whitened``), fixed during
EM so that EM stays monotone; rho = none takes the candidate in READOUT_SDS of largest
evidence of the regressions given the smoothed states, V integrated out (Bayesian linear
regression; C_i and c_i flat, so their improper prior adds the same constant to every
candidate):

    log p(y_i | states, s_i) = g'^T L^-1 g' / 2 - log|L| / 2 - L n log s_i + const,
    L = M_i / r_i + P_i,  g' = g_i / r_i.

As s_i -> 0 this tends to the evidence of the fixed read-out (only C_i and c_i), which is
reported beside the candidates ("fixed").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dynid.data.dataset import Trial
from dynid.linear.subspace import VARIANCE_FLOOR
from dynid.models.latent.clds_system import ConditionalSystem
from dynid.models.latent.em import Moments, maximise_first_state

# Candidate relative prior sds of the read-out's dependence on the condition (readout_sd=none).
READOUT_SDS = (0.03, 0.1, 0.3, 1.0)


@dataclass(frozen=True)
class ReadoutSums:
    """Per observed variable (p of them, D = L n + n + 1 regressors): m (p, D, D) = sum_t
    E[x x^T], g (p, D) = sum_t E[x] y, yy (p,) = sum_t y^2, count (p,), over the samples where
    the variable is observed."""

    m: np.ndarray
    g: np.ndarray
    yy: np.ndarray
    count: np.ndarray


def readout_sums(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray,
                 found: list[Moments]) -> ReadoutSums:
    """The regressions' sums (module docstring) of ``trials`` at ``conditions`` (K, M)."""
    n = system.n_latent
    features = system.unit_features(conditions)  # (K, L)
    size = features.shape[1] * n + n + 1
    p = trials[0].x.shape[1]
    m, g = np.zeros((p, size, size)), np.zeros((p, size))
    yy, count = np.zeros(p), np.zeros(p)
    for phi, trial, moment in zip(features, trials, found):
        steps = trial.n_samples
        zz = np.zeros((steps, n + 1, n + 1))  # E[zbar zbar^T], zbar = [z; 1]
        zz[:, :n, :n] = moment.xx[:, :n, :n]
        zz[:, :n, n] = zz[:, n, :n] = moment.x[:, :n]
        zz[:, n, n] = 1.0
        zbar = np.hstack([moment.x[:, :n], np.ones((steps, 1))])
        observed = ~np.isnan(trial.x)
        values = np.where(observed, trial.x, 0.0)
        lift = np.zeros((size, n + 1))  # x = lift @ zbar
        lift[: size - n - 1, :n] = np.kron(phi[:, None], np.eye(n))
        lift[size - n - 1 :, :] = np.eye(n + 1)
        m += lift @ np.einsum("tp,tij->pij", observed.astype(float), zz) @ lift.T
        g += (values.T @ zbar) @ lift.T
        yy += np.sum(values**2, axis=0)
        count += observed.sum(axis=0)
    return ReadoutSums(m, g, yy, count)


def maximise_readout(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray,
                     found: list[Moments]) -> ConditionalSystem:
    """The observation and first-state M-step of a system with a read-out that depends on the
    condition (module docstring): V, C, c, then r, and m0, P0."""
    if system.readout_sd is None:
        raise ValueError("the read-out's prior sds are not set")
    n, p = system.n_latent, system.c.shape[0]
    varying = system.basis.size * n
    sums = readout_sums(system, trials, conditions, found)
    normal = sums.m.copy()
    for i in range(p):
        normal[i][np.diag_indices(varying)] += system.r[i] / system.readout_sd[i] ** 2
    w = np.linalg.solve(normal, sums.g[:, :, None])[:, :, 0]  # (p, D)
    residual = sums.yy - 2 * np.einsum("pd,pd->p", w, sums.g) + np.einsum("pd,pde,pe->p", w, sums.m, w)
    scale = max(float(np.mean(sums.yy / sums.count - (sums.g[:, -1] / sums.count) ** 2)), np.finfo(float).tiny)
    m0, p0 = maximise_first_state(found, n)
    return replace(
        system, readout=w[:, :varying].reshape(p, system.basis.size, n).transpose(1, 0, 2),
        c=w[:, varying:varying + n], offset=w[:, -1],
        r=np.maximum(residual / sums.count, VARIANCE_FLOOR * scale), m0=m0, p0=p0,
    )


def readout_log_evidence(sums: ReadoutSums, r: np.ndarray, varying: int, sd: np.ndarray | None) -> float:
    """The evidence (module docstring) summed over the variables, at noise variances r (p,),
    ``varying`` = L n weights of V per variable and their prior sds ``sd`` (p,); None: the
    fixed read-out's (V = 0)."""
    total = 0.0
    for i in range(r.shape[0]):
        kept = slice(varying if sd is None else 0, None)
        lam = sums.m[i][kept, kept] / r[i]
        if sd is not None:
            lam[np.diag_indices(varying)] += 1.0 / sd[i] ** 2
        factor = np.linalg.cholesky(lam)
        whitened = np.linalg.solve(factor, sums.g[i][kept] / r[i])
        total += 0.5 * float(whitened @ whitened) - float(np.sum(np.log(np.diag(factor))))
        if sd is not None:
            total -= varying * math.log(sd[i])
    return total


def with_readout(system: ConditionalSystem, trials: list[Trial], conditions: np.ndarray,
                 found: list[Moments], relative_sd: float | None) -> tuple[ConditionalSystem, dict[str, float]]:
    """``system`` (a fixed read-out) given a read-out that depends on the condition, at the
    relative prior sd rho = ``relative_sd`` (None: the candidate of largest evidence given the
    moments ``found``), after one M-step of it; and the evidence of each candidate and of the
    fixed read-out (keyed by rho, and "fixed"; empty when rho is given)."""
    n, p = system.n_latent, system.c.shape[0]
    reference = np.linalg.norm(system.c, axis=1) / math.sqrt(n)  # RMS entry of each row of C
    reference = np.maximum(reference, np.finfo(float).tiny)
    blank = replace(system, readout=np.zeros((system.basis.size, p, n)))
    evidence: dict[str, float] = {}
    if relative_sd is None:
        sums = readout_sums(blank, trials, conditions, found)
        varying = system.basis.size * n
        evidence["fixed"] = readout_log_evidence(sums, system.r, varying, None)
        scores = {rho: readout_log_evidence(sums, system.r, varying, rho * reference) for rho in READOUT_SDS}
        evidence.update({f"{rho:g}": value for rho, value in scores.items()})
        relative_sd = max(scores, key=scores.__getitem__)
    chosen = replace(blank, readout_sd=relative_sd * reference)
    return maximise_readout(chosen, trials, conditions, found), evidence
