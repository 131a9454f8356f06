"""EM for the continuous-time model of ``dynid.linear.continuous`` from samples at arbitrary
times (continuous-discrete Kalman filter and RTS smoother in the E-step).

The observation and first-state parameters have the closed-form M-step of ``em.py``. The
dynamics' do not: the expected complete-data log-likelihood of the transitions,

    -1/2 sum_k [ log det Q(h_k) + tr( Q(h_k)^-1 E[(z_{k+1} - A(h_k) z_k - B(h_k) u_k)(...)^T] ) ],

depends on F, G and Sigma through matrix exponentials of each interval h_k. It is maximised
numerically (scipy's L-BFGS-B, torch gradients through the exponentials),
started from the current parameters and kept only if it improved: a generalised EM, so the
log-likelihood still never decreases.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

from dynid.data.dataset import Trial
from dynid.linear.continuous import ContinuousStateSpace, discretise
from dynid.models.latent.em import Moments, fit_by_em, maximise_observation
from dynid.models.latent.iterations import EMResult

# L-BFGS iterations per M-step: the M-step need only improve, and EM's next E-step moves the
# target anyway.
MAXIMISER_ITERATIONS = 30


def maximise(model: ContinuousStateSpace, trials: list[Trial], found: list[Moments]) -> ContinuousStateSpace:
    """The M-step (module docstring)."""
    f, g, sigma = _maximise_dynamics(model, trials, found)
    seen = maximise_observation(trials, found, model.n_latent)
    return ContinuousStateSpace(
        f=f, g=g, sigma=sigma, c=seen.c, d=seen.d, offset=seen.offset, r=seen.r, m0=seen.m0, p0=seen.p0
    )


def _maximise_dynamics(
    model: ContinuousStateSpace, trials: list[Trial], found: list[Moments]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import torch

    n = model.n_latent
    as_tensor = lambda parts: torch.from_numpy(np.concatenate(parts))  # noqa: E731
    h = as_tensor([np.diff(trial.t) for trial in trials])
    s00 = as_tensor([moment.xx[:-1] for moment in found])  # E[x_k x_k^T]
    s10 = as_tensor([moment.zx for moment in found])  # E[z_{k+1} x_k^T]
    s11 = as_tensor([moment.xx[1:, :n, :n] for moment in found])  # E[z_{k+1} z_{k+1}^T]

    def unpack(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        f, g, root = torch.split(theta, [n * n, n * m, n * n])
        lower = torch.tril(root.reshape(n, n))
        return f.reshape(n, n), g.reshape(n, m), lower @ lower.T

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        """The negative expected log-likelihood per interval and its gradient."""
        point = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
        a, b, q = discretise(*unpack(point), h)
        phi = torch.cat([a, b], dim=2)  # (K, n, n + m)
        cross = phi @ s10.transpose(1, 2)
        residual = s11 - cross - cross.transpose(1, 2) + phi @ s00 @ phi.transpose(1, 2)
        factor, info = torch.linalg.cholesky_ex(q)
        if bool(info.any()):
            return math.inf, np.zeros_like(theta)
        logdet = 2 * torch.log(torch.diagonal(factor, dim1=1, dim2=2)).sum()
        trace = torch.diagonal(torch.cholesky_solve(residual, factor), dim1=1, dim2=2).sum()
        value = (logdet + trace) / h.shape[0]
        value.backward()
        return float(value.detach()), point.grad.numpy()

    m = model.g.shape[1]
    start = np.concatenate([model.f.ravel(), model.g.ravel(), np.linalg.cholesky(model.sigma).ravel()])
    before = objective(start)[0]
    found = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": MAXIMISER_ITERATIONS})
    if not found.fun < before:
        return model.f, model.g, model.sigma
    with torch.no_grad():
        f, g, sigma = unpack(torch.from_numpy(found.x))
    return f.numpy().copy(), g.numpy().copy(), sigma.numpy().copy()


def fit_continuous_em(
    start: ContinuousStateSpace, trials: list[Trial], *, max_iter: int, tol: float
) -> EMResult[ContinuousStateSpace]:
    """EM from ``start`` on trials sampled at their own times (``Trial.t``)."""
    return fit_by_em(
        start, trials, lambda model, trial: model.course(trial.t, trial.u), maximise,
        max_iter=max_iter, tol=tol,
    )
