"""SING: variational inference for a latent SDE with a sparse-GP drift by natural gradients
(Hu, Smith, Linderman, NeurIPS 2025; written from ../shared/METHODS.md section 2, not from
the authors' code).

Model, on a grid of step ``step`` (the data's dt / substeps), states z_i in R^D:
    z_{i+1} | z_i ~ N(z_i + step f(z_i), step I)        (Euler-Maruyama; diffusion fixed at I)
    f(z) = h(z) + g(z),  h(z) = theta^T [z; 1]            (the prior mean: a linear drift)
    g_d(z) = k_Z(z)^T K^-1 u_d + (GP remainder),  u_d ~ N(0, K)   (inducing values at Z)
    y_t = C z_t + offset + v_t,  v_t ~ N(0, diag(r)),   z_0 ~ N(m0, p0) per trial
The diffusion is held at the identity: it fixes the latent scale (C absorbs the rest), as in
SING. The GP part is the sparse GP whose remainder g - k_Z^T K^-1 u has variance
k(z, z) - k_Z^T K^-1 k_Z (the SVGP bound), so its expected square enters the ELBO. The prior
mean h (INFERRED, dynid's choice) is why free runs return from far out: a zero-mean GP's drift
reverts to zero (the mean) or to a prior draw (a function drawn from q(u)) away from the data,
where nothing then restores the state, while h, fitted to the data, is restoring wherever they
are stationary (E[(z - c)^T f(z)] = -D/2 under the stationary law for unit diffusion, so the
least-squares slope is negative on average). theta (D + 1, D) maximises the ELBO in closed
form given q(z) and q(u) (a weighted least-squares problem), like q(u) given theta.

Variational family: q(z) a Gaussian Markov chain over the grid (``chain.Natural``) times
q(u_d) = N(mu_d, S). The ELBO's part that depends on q(z),
    E_q[log p(y, z | u)] = observations + first states + Brownian part + drift part,
is written in the chain's mean parameters (E z_i, E z_i z_i^T, E z_i z_{i+1}^T); the drift
part needs E f, E[df/dz] and E|f|^2 under each Gaussian marginal, exact for the RBF kernel
(``kernels.py``), and E[(z_{i+1} - z_i) f(z_i)] follows from Stein's lemma with the lag-one
cross-covariance. Its gradient in the mean parameters (autodiff) is the natural parameter
vector of the best local Gaussian-Markov approximation; SING's step is
    lambda <- (1 - rho) lambda + rho grad_mu E_q[log p(y, z | u)],
with the moments of lambda from the banded Cholesky smoother (``chain.moments``). The step
size here adapts (INFERRED, dynid's choice, not the authors' fixed ramp): a step that lowers
the ELBO, or leaves the precision indefinite, is undone and rho halved; an accepted one grows
rho by 1.5, up to 1. q(u) has the closed form of the brief, S = K (K + Psi2)^-1 K and
mu = K (K + Psi2)^-1 b; the kernel's variance and lengthscale maximise the ELBO with q(u) at
that optimum (a few L-BFGS steps, kept only if the bound rises).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from dynid.data.dataset import Trial
from dynid.models.latent.em import Moments as EMMoments
from dynid.models.latent.em import Observation, maximise_observation
from dynid.models.sde.chain import Moments, Natural, moments
from dynid.models.sde.kernels import gram, psi_statistics

if TYPE_CHECKING:
    import torch

# Relative jitter on the inducing-point Gram matrix (times the kernel variance).
JITTER = 1e-6
# L-BFGS iterations and evaluations of one kernel-hyperparameter update (each evaluation
# costs one pass over the grid; the hyperparameters move little from one outer iteration on).
KERNEL_ITERATIONS = 4
KERNEL_EVALUATIONS = 6
# The step size never falls below this (a step of 1e-6 changes nothing that matters).
MIN_RHO = 1e-6
# Inference on new data stops once the step size falls to this: near the optimum the ELBO's
# changes are round-off, and steps are undone for that alone.
SPENT_RHO = 1e-3


@dataclass(frozen=True)
class Grid:
    """All trials on one time grid, laid end to end.

    step: grid spacing (time units); links (N-1,) whether grid points i and i+1 belong to one
    trial (a transition of the SDE joins them); starts (K,) the grid index of each trial's
    first point; observed (n,) the grid index of every sample (trials in order); y (n, p)
    the samples (NaN: missing).
    """

    step: float
    links: np.ndarray
    starts: np.ndarray
    observed: np.ndarray
    y: np.ndarray

    @property
    def n_points(self) -> int:
        return self.links.size + 1


def lay_out(trials: list[Trial], dt: float, substeps: int) -> Grid:
    """The grid of ``substeps`` points per sample interval of ``dt`` over ``trials``."""
    links, starts, observed = [], [], []
    first = 0
    for trial in trials:
        points = (trial.n_samples - 1) * substeps + 1
        starts.append(first)
        observed.append(first + substeps * np.arange(trial.n_samples))
        links.append(np.ones(points - 1, dtype=bool))
        links.append(np.zeros(1, dtype=bool))
        first += points
    return Grid(step=dt / substeps, links=np.concatenate(links)[:-1], starts=np.asarray(starts),
                observed=np.concatenate(observed), y=np.concatenate([trial.x for trial in trials]))


@dataclass(frozen=True)
class Kernel:
    """The RBF kernel's variance s^2 and lengthscale l, and the inducing points (M, D)."""

    variance: float
    lengthscale: float
    inducing: np.ndarray


@dataclass(frozen=True)
class InducingPosterior:
    """q(u_d) = N(mean[:, d], cov): mean (M, D), cov (M, M) shared by the D drift outputs."""

    mean: np.ndarray
    cov: np.ndarray


@dataclass(frozen=True)
class SDEModel:
    """The kernel, q(u), the read-out with the first states' prior (``readout.c`` (p, D),
    ``offset`` (p,), ``r`` (p,), ``m0`` (D,), ``p0`` (D, D); ``readout.d`` is (p, 0)) and the
    drift's prior mean h(z) = trend^T [z; 1], trend (D + 1, D) (latent units per unit time)."""

    kernel: Kernel
    drift: InducingPosterior
    readout: Observation
    trend: np.ndarray

    @property
    def n_latent(self) -> int:
        return self.kernel.inducing.shape[1]


@dataclass(frozen=True)
class Posterior:
    """q(z) on a grid: its natural parameters, their moments, the ELBO's q(z)-dependent part
    (E_q log p(y, z | u) + H[q(z)], nats) and the step size to continue with."""

    natural: Natural
    moments: Moments
    value: float
    rho: float


# -- torch pieces ------------------------------------------------------------------------------
def _tensor(x: np.ndarray | float) -> torch.Tensor:
    import torch

    return torch.as_tensor(np.asarray(x, dtype=float), dtype=torch.float64)


@dataclass(frozen=True)
class _DriftStatistics:
    """What q(u)'s and the trend's updates and the drift part of the ELBO need from q(z), sums
    over the transitions i with x_i = [z_i; 1]: b (M, D) = sum E[k_Z(z_i) (z_{i+1} - z_i)^T],
    psi2 (M, M) = step sum E[k_Z(z_i) k_Z(z_i)^T], moved (D + 1, D) = sum E[x_i (z_{i+1} -
    z_i)^T], linear (D + 1, D + 1) = step sum E[x_i x_i^T], mixed (M, D + 1) = step sum
    E[k_Z(z_i) x_i^T]; n the number of transitions."""

    b: torch.Tensor
    psi2: torch.Tensor
    moved: torch.Tensor
    linear: torch.Tensor
    mixed: torch.Tensor
    n: int


def _drift_statistics(means: torch.Tensor, covs: torch.Tensor, cross: torch.Tensor, grid: Grid,
                      inducing: torch.Tensor, variance: torch.Tensor, lengthscale: torch.Tensor) -> _DriftStatistics:
    """Sums over the grid's transitions; cross (N-1, D, D) = Cov(z_i, z_{i+1})."""
    import torch

    links = torch.as_tensor(grid.links)
    start, start_cov = means[:-1][links], covs[:-1][links]
    moved = (means[1:] - means[:-1])[links]
    # E[(z_{i+1} - z_i)_d g(z_i)] = (m_{i+1} - m_i)_d E g + (E[dg/dz] (Cov(z_i, z_{i+1}) - Sigma_i))_d
    gap = (cross - covs[:-1])[links]
    stats = psi_statistics(start, start_cov, inducing, variance, lengthscale)
    b = stats.psi1.T @ moved + torch.einsum("nma,nad->md", stats.grad, gap)
    ones = torch.ones(start.shape[0], 1, dtype=start.dtype)
    x = torch.cat([start, ones], dim=1)  # E[x_i]
    # E[x x^T] = E x E x^T + blockdiag(Sigma_i, 0); E[x (z' - z)^T] = E x (m' - m)^T + [gap; 0].
    second = torch.einsum("ni,nj->ij", x, x)
    second[:-1, :-1] += start_cov.sum(0)
    lagged = x.T @ moved
    lagged[:-1] += gap.sum(0)
    # Stein: E[k_Z(z) z^T] = E[k_Z] m^T + E[dk_Z/dz] Sigma.
    mixed = stats.psi1.T @ x
    mixed[:, :-1] += torch.einsum("nma,nab->mb", stats.grad, start_cov)
    return _DriftStatistics(b, grid.step * stats.psi2.sum(0), lagged, grid.step * second, grid.step * mixed,
                            int(grid.links.sum()))


def _gram(inducing: torch.Tensor, variance: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    import torch

    m = inducing.shape[0]
    return gram(inducing, inducing, variance, lengthscale) + JITTER * variance * torch.eye(m, dtype=torch.float64)


def _drift_value(stats: _DriftStatistics, mean: torch.Tensor, cov: torch.Tensor, k: torch.Tensor,
                 variance: torch.Tensor, trend: torch.Tensor, step: float) -> torch.Tensor:
    """sum_i E[(z_{i+1} - z_i)^T f(z_i)] - step/2 E|f(z_i)|^2 (the drift part of E log p),
    f = h + g: the GP's terms, the trend's, and the cross term -step E[h^T g]."""
    import torch

    d = mean.shape[1]
    factor = torch.linalg.cholesky(k)
    k_inv = torch.cholesky_inverse(factor)
    weights = k_inv @ mean
    q = weights @ weights.T + d * (k_inv @ cov @ k_inv - k_inv)
    gp = (stats.b * weights).sum() - 0.5 * (stats.psi2 * q).sum() - 0.5 * step * stats.n * d * variance
    linear = (stats.moved * trend).sum() - 0.5 * (trend * (stats.linear @ trend)).sum()
    return gp + linear - (weights * (stats.mixed @ trend)).sum()


def _kl_inducing(mean: torch.Tensor, cov: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """KL[q(u) || p(u)] summed over the D outputs, p(u_d) = N(0, K)."""
    import torch

    m, d = mean.shape
    factor = torch.linalg.cholesky(k)
    cov_factor = torch.linalg.cholesky(cov)
    whitened = torch.linalg.solve_triangular(factor, cov_factor, upper=False)
    centred = torch.linalg.solve_triangular(factor, mean, upper=False)
    log_ratio = 2 * (torch.log(torch.diagonal(factor)).sum() - torch.log(torch.diagonal(cov_factor)).sum())
    return 0.5 * (d * ((whitened**2).sum() - m + log_ratio) + (centred**2).sum())


def _optimal_inducing(stats: _DriftStatistics, k: torch.Tensor, trend: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q(u)'s closed form: mean K (K + Psi2)^-1 (b - mixed trend) (the increments less the
    trend's share), cov K (K + Psi2)^-1 K (+ jitter)."""
    import torch

    factor = torch.linalg.cholesky(k + stats.psi2)
    a = torch.linalg.solve_triangular(factor, k, upper=False)
    mean = a.T @ torch.linalg.solve_triangular(factor, stats.b - stats.mixed @ trend, upper=False)
    cov = a.T @ a
    cov = 0.5 * (cov + cov.T) + JITTER * torch.diagonal(k).mean() * torch.eye(k.shape[0], dtype=k.dtype)
    return mean, cov


def _expected_log_joint(mean_params: tuple[torch.Tensor, torch.Tensor, torch.Tensor], grid: Grid,
                        model: SDEModel) -> torch.Tensor:
    """E_q[log p(y, z | u)] as a function of the chain's mean parameters (m, E zz^T, E z z'^T)."""
    import torch

    m, second, lagged = mean_params
    covs = second - torch.einsum("ni,nj->nij", m, m)
    cross = lagged - torch.einsum("ni,nj->nij", m[:-1], m[1:])
    obs = model.readout
    c, offset, r = _tensor(obs.c), _tensor(obs.offset), _tensor(obs.r)
    # Observations: -1/2 sum over observed cells of log 2 pi r + ((y - C m - offset)^2 + C S C^T) / r.
    seen = torch.as_tensor(~np.isnan(grid.y))
    y = _tensor(np.nan_to_num(grid.y))
    at = torch.as_tensor(grid.observed)
    residual = (y - m[at] @ c.T - offset) ** 2 + torch.einsum("pi,nij,pj->np", c, covs[at], c)
    total = -0.5 * torch.where(seen, torch.log(2 * math.pi * r) + residual / r, 0.0).sum()
    # First states of the trials.
    starts = torch.as_tensor(grid.starts)
    p0 = _tensor(obs.p0)
    first = m[starts] - _tensor(obs.m0)
    spread = covs[starts] + torch.einsum("ni,nj->nij", first, first)
    total = total - 0.5 * (len(grid.starts) * torch.logdet(2 * math.pi * p0)
                           + torch.einsum("ij,nji->", torch.linalg.inv(p0), spread))
    # Brownian part of the transitions: -1/(2 step) E|z_{i+1} - z_i|^2 - D/2 log(2 pi step).
    links = torch.as_tensor(grid.links)
    d, step = m.shape[1], grid.step
    moved = ((m[1:] - m[:-1])[links] ** 2).sum()
    moved_spread = (torch.einsum("nii->n", covs[1:]) + torch.einsum("nii->n", covs[:-1])
                    - 2 * torch.einsum("nii->n", cross))[links].sum()
    total = total - (moved + moved_spread) / (2 * step) - 0.5 * d * math.log(2 * math.pi * step) * int(grid.links.sum())
    kernel = model.kernel
    variance, lengthscale, inducing = _tensor(kernel.variance), _tensor(kernel.lengthscale), _tensor(kernel.inducing)
    stats = _drift_statistics(m, covs, cross, grid, inducing, variance, lengthscale)
    k = _gram(inducing, variance, lengthscale)
    return total + _drift_value(stats, _tensor(model.drift.mean), _tensor(model.drift.cov), k, variance,
                                _tensor(model.trend), step)


def _target(found: Moments, grid: Grid, model: SDEModel) -> tuple[Natural, float]:
    """The natural-gradient target grad_mu E_q[log p(y, z | u)] as natural parameters, and
    E_q[log p(y, z | u)] itself."""
    import torch

    m = _tensor(found.means).requires_grad_(True)
    second = _tensor(found.second()).requires_grad_(True)
    lagged = _tensor(found.lagged()).requires_grad_(True)
    value = _expected_log_joint((m, second, lagged), grid, model)
    gm, gs, gl = torch.autograd.grad(value, (m, second, lagged))
    gs = gs.numpy()
    # Statistics z_i z_i^T pair with -J_i / 2, z_i z_{i+1}^T with -L_i.
    return Natural(h=gm.numpy(), J=-(gs + np.swapaxes(gs, 1, 2)), L=-gl.numpy()), float(value.detach())


# -- SING ------------------------------------------------------------------------------------
def start(grid: Grid, model: SDEModel) -> Posterior:
    """q(z) under the GP's prior (q(u) = p(u): the GP's expected terms do not depend on q(z)
    then), the exact posterior of the linear SDE dz = h(z) dt + dW (Brownian latents while the
    trend is zero), which one step reaches."""
    d = model.n_latent
    prior = replace(model, drift=InducingPosterior(np.zeros((model.kernel.inducing.shape[0], d)),
                                                   _gram(_tensor(model.kernel.inducing), _tensor(model.kernel.variance),
                                                         _tensor(model.kernel.lengthscale)).numpy()))
    n = grid.n_points
    anywhere = Moments(np.zeros((n, d)), np.broadcast_to(np.eye(d), (n, d, d)).copy(),
                       np.zeros((n - 1, d, d)), 0.0)
    natural, _ = _target(anywhere, grid, prior)
    found = moments(natural)
    if found is None:
        raise ArithmeticError("the drift-free posterior is not positive definite")
    return evaluate(natural, found, grid, model, rho=1.0)


def evaluate(natural: Natural, found: Moments, grid: Grid, model: SDEModel, rho: float) -> Posterior:
    """The Posterior of ``natural`` (with its ``found`` moments) under ``model``."""
    _, value = _target(found, grid, model)
    return Posterior(natural, found, value + found.entropy(), rho)


def sing_steps(posterior: Posterior, grid: Grid, model: SDEModel, steps: int) -> Posterior:
    """``steps`` natural-gradient steps on q(z) with q(u) and the parameters held (module
    docstring); the ELBO never decreases."""
    current = posterior
    target, _ = _target(current.moments, grid, model)
    rho = current.rho
    for _ in range(steps):
        natural = current.natural.blend(target, rho)
        found = moments(natural)
        if found is not None:
            proposed_target, value = _target(found, grid, model)
            value += found.entropy()
            if value >= current.value:
                current, target = Posterior(natural, found, value, rho), proposed_target
                rho = min(1.0, 1.5 * rho)
                continue
        rho = max(MIN_RHO, 0.5 * rho)
    return replace(current, rho=rho)


def infer(grid: Grid, model: SDEModel, *, max_steps: int, tol: float) -> Posterior:
    """q(z) for a fitted model: from the drift-free start, SING steps until one gains less
    than ``tol`` nats per grid point, or ``max_steps``, or the step size is spent."""
    posterior = start(grid, model)
    for _ in range(max_steps):
        before = posterior.value
        posterior = sing_steps(posterior, grid, model, 1)
        gain = posterior.value - before  # 0 after a step undone (rho halved): try again
        if 0 < gain < tol * grid.n_points or posterior.rho <= SPENT_RHO:
            break
    return posterior


def moments_of(posterior: Posterior) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tensors-free copies (means, covs, cross) for the q(u) and kernel updates."""
    found = posterior.moments
    return found.means, found.covs, found.cross


def update_drift(posterior: Posterior, grid: Grid, model: SDEModel) -> SDEModel:
    """q(u) at its closed-form optimum given q(z)."""
    stats, k = _statistics_of(posterior, grid, model.kernel)
    mean, cov = _optimal_inducing(stats, k, _tensor(model.trend))
    return replace(model, drift=InducingPosterior(mean.numpy(), cov.numpy()))


def _statistics_of(posterior: Posterior, grid: Grid, kernel: Kernel) -> tuple[_DriftStatistics, torch.Tensor]:
    """The drift statistics of q(z) and the inducing points' Gram matrix K (M, M)."""
    variance, lengthscale, inducing = _tensor(kernel.variance), _tensor(kernel.lengthscale), _tensor(kernel.inducing)
    means, covs, cross = (_tensor(a) for a in moments_of(posterior))
    stats = _drift_statistics(means, covs, cross, grid, inducing, variance, lengthscale)
    return stats, _gram(inducing, variance, lengthscale)


def update_trend(posterior: Posterior, grid: Grid, model: SDEModel) -> SDEModel:
    """The trend at its closed-form optimum given q(z) and q(u): the ELBO's trend terms are
    sum(moved * T) - 1/2 tr(T^T linear T) - sum(W * mixed T) with W = K^-1 mean(q(u)), so
    T = linear^-1 (moved - mixed^T W)."""
    import torch

    stats, k = _statistics_of(posterior, grid, model.kernel)
    weights = torch.cholesky_solve(_tensor(model.drift.mean), torch.linalg.cholesky(k))
    trend = torch.linalg.solve(stats.linear, stats.moved - stats.mixed.T @ weights)
    return replace(model, trend=trend.numpy())


def collapsed_drift_bound(posterior: Posterior, grid: Grid, kernel: Kernel, model_trend: np.ndarray,
                          log_hyper: torch.Tensor | None = None) -> torch.Tensor:
    """The drift part of the ELBO minus KL[q(u) || p(u)] with q(u) at its optimum for the
    trend ``model_trend`` (D + 1, D), as a function of log(variance, lengthscale)
    (``log_hyper``; default the kernel's)."""
    import torch

    if log_hyper is None:
        log_hyper = _tensor(np.log([kernel.variance, kernel.lengthscale]))
    variance, lengthscale = torch.exp(log_hyper[0]), torch.exp(log_hyper[1])
    inducing = _tensor(kernel.inducing)
    means, covs, cross = (_tensor(a) for a in moments_of(posterior))
    stats = _drift_statistics(means, covs, cross, grid, inducing, variance, lengthscale)
    k = _gram(inducing, variance, lengthscale)
    trend = _tensor(model_trend)
    mean, cov = _optimal_inducing(stats, k, trend)
    return _drift_value(stats, mean, cov, k, variance, trend, grid.step) - _kl_inducing(mean, cov, k)


def update_kernel(posterior: Posterior, grid: Grid, model: SDEModel) -> SDEModel:
    """The kernel hyperparameters after a few L-BFGS steps on the collapsed bound (kept only if
    it rises), and q(u) at its optimum for them."""
    import torch
    from scipy.optimize import minimize

    kernel = model.kernel

    def loss(log_hyper: np.ndarray) -> tuple[float, np.ndarray]:
        at = _tensor(log_hyper).requires_grad_(True)
        try:
            value = -collapsed_drift_bound(posterior, grid, kernel, model.trend, at)
        except RuntimeError:  # a Cholesky failure at an extreme trial point
            return math.inf, np.zeros(2)
        (gradient,) = torch.autograd.grad(value, at)
        return float(value.detach()), gradient.numpy()

    start = np.log([kernel.variance, kernel.lengthscale])
    before = loss(start)[0]
    found = minimize(loss, start, jac=True, method="L-BFGS-B",
                     options={"maxiter": KERNEL_ITERATIONS, "maxfun": KERNEL_EVALUATIONS})
    if np.all(np.isfinite(found.x)) and found.fun < before:
        variance, lengthscale = np.exp(found.x)
        kernel = Kernel(float(variance), float(lengthscale), kernel.inducing)
    return update_drift(posterior, grid, replace(model, kernel=kernel))


def update_readout(posterior: Posterior, grid: Grid, trials: list[Trial], model: SDEModel) -> SDEModel:
    """C, offset, r and the first states' prior maximising the expected log-likelihood (the
    closed form shared with ``lds``'s EM)."""
    found = posterior.moments
    second = found.second()
    per_trial, first = [], 0
    for trial in trials:
        at = grid.observed[first:first + trial.n_samples]
        per_trial.append(EMMoments(found.means[at], second[at], np.zeros((0, model.n_latent, 0))))
        first += trial.n_samples
    return replace(model, readout=maximise_observation(trials, per_trial, model.n_latent))


def elbo(posterior: Posterior, model: SDEModel) -> float:
    """The whole ELBO: the q(z) part minus KL[q(u) || p(u)]."""
    kernel = model.kernel
    k = _gram(_tensor(kernel.inducing), _tensor(kernel.variance), _tensor(kernel.lengthscale))
    return posterior.value - float(_kl_inducing(_tensor(model.drift.mean), _tensor(model.drift.cov), k))
