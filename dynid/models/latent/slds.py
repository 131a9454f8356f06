"""``slds``: a switching linear dynamical system, K regimes of linear-Gaussian latent dynamics
observed through one shared linear-Gaussian emission (the model is in ``switching.py``).

Inference: structured mean-field variational EM (Ghahramani & Hinton 2000), q(s) q(z) with
both chains kept whole. Why this one:
- each coordinate update is exact and closed-form (q(z): a block-tridiagonal Gaussian solve;
  q(s): the hidden-Markov forward-backward that ``hmm`` uses; the M-step: weighted least
  squares), so a fit is deterministic and its objective, the evidence lower bound, never
  decreases (tested), which makes a bad fit visible rather than noisy;
- GPB2 / IMM filtering with Kim's smoother collapses the regime mixture by moment matching at
  every step: cheap, but the parameter updates it feeds are not those of any objective;
- Laplace-EM (Zoltowski et al. 2020) is needed when q(z) is not Gaussian in closed form
  (recurrent or Poisson SLDS); here it would only add a Newton solver;
- blocked Gibbs sampling is asymptotically exact but random and slow to mix across regimes.
The price of the factorisation: q(s) and q(z) are independent, so regime posteriors are
overconfident near switches (probabilities close to 0 or 1).

Start: the data projected on their first ``latent`` principal components, an ``arhmm`` fitted
to that projection (with its k-means and random starts) gives q(s), the regimes' A_k, b_k, Q_k
and the chain; C, d from the principal components, r from the residual variance (at least 10%
of each variable's variance, so that the first q(z) smooths). ``dynid states`` of new data
starts q(s) from the fitted regimes' autoregressive densities of the data projected back
through C, then sweeps q(z), q(s) to convergence with the parameters fixed.

Forecasts (``simulate``) use q(z_T), q(s_T) of the history: latent means propagated as
m_h = sum_k p_h(k) (A_k m_{h-1} + b_k) (the arhmm approximation) and y = C m + d. No predictive
intervals. Partially known regimes (``--labels``) clamp q(s) as in ``hmm``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.models.base import Capabilities, Hyperparameters, LatentStates, expect_array, param
from dynid.models.latent import markov, switching
from dynid.models.latent.emissions import Autoregressive, covariance_floor
from dynid.models.latent.forward_backward_choice import Passes
from dynid.models.latent.hmm import ARHMM, MarkovParams, mixture_rollout
from dynid.models.latent.iterations import EMResult, iterate_em
from dynid.models.latent.labelled import KnownStatesBackend
from dynid.models.latent.switching import Switching, TrialPosterior

# The smallest observation noise of the start, as a fraction of each variable's variance.
START_NOISE = 0.1
# Coordinate-ascent sweeps at most when inferring the states of new data (``states``).
STATE_SWEEPS = 100


@dataclass(frozen=True)
class SLDSParams(Hyperparameters):
    regimes: int = param(2, "number of regimes K (each its own linear latent dynamics)")
    latent: int = param(0, "latent dimension n; 0: as many as the observed variables")
    restarts: int = param(4, "random starts of the arhmm that starts the fit, besides its k-means one")
    max_iter: int = param(200, "variational EM iterations at most")
    tol: float = param(1e-6, "EM stops when an iteration gains less ELBO than this per observed value")

    def __post_init__(self) -> None:
        if self.regimes < 1:
            raise ValueError(f"regimes must be at least 1, not {self.regimes}")
        if self.latent < 0:
            raise ValueError(f"latent must be non-negative, not {self.latent}")
        if self.restarts < 0:
            raise ValueError(f"restarts must be non-negative, not {self.restarts}")
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be at least 1, not {self.max_iter}")
        if not self.tol >= 0:
            raise ValueError(f"tol must be non-negative, not {self.tol}")


@dataclass
class _Iterate:
    """What variational EM iterates: the parameters and q(s) of every trial."""

    model: Switching
    regime_probabilities: list[np.ndarray]


class SLDS(KnownStatesBackend):
    """Switching LDS. Fitted arrays (K regimes, n latent, p observed): ``initial`` (K,),
    ``transition`` (K, K), ``dynamics`` (K, n, n), ``offsets`` (K, n), ``noise`` (K, n, n),
    ``C`` (p, n), ``offset`` (p,), ``R`` (p,) diagonal observation noise variances,
    ``initial_mean`` (n,), ``initial_cov`` (n, n), ``floor`` (), ``elbo`` (iterations,) the
    evidence lower bound history."""

    name = "slds"
    summary = "switching linear dynamical system: K regimes of latent linear dynamics (structured variational EM)"
    Params = SLDSParams
    capabilities = Capabilities(uniform_steps=True, inputs=False, nan=True, stochastic=True, labels=True)

    # -- fitting -----------------------------------------------------------------------------
    def _fit_known(self, data: Dataset, known: list[np.ndarray] | None, seed: int | None) -> None:
        params: SLDSParams = self.params  # type: ignore[assignment]
        trials = [trial.x for trial in data.trials]
        if any(y.shape[0] < 3 for y in trials):
            raise DataError(f"{data.source}: every trial needs at least three samples")
        if known is not None and max(int(np.max(k)) for k in known) >= params.regimes:
            raise DataError(f"{data.source}: --labels has regimes beyond regimes={params.regimes}")
        start = _start(data, params, known, seed)
        passes = Passes()

        def expect(current: _Iterate) -> tuple[list[TrialPosterior], float]:
            swept = [
                switching.infer(current.model, y, q, None if known is None else known[n], passes)
                for n, (y, q) in enumerate(zip(trials, current.regime_probabilities))
            ]
            return [post for post, _ in swept], float(sum(elbo for _, elbo in swept))

        def maximise(current: _Iterate, posteriors: list[TrialPosterior]) -> _Iterate:
            return _Iterate(
                switching.maximise(current.model, trials, posteriors),
                [post.regimes.probabilities for post in posteriors],
            )

        result: EMResult[_Iterate] = iterate_em(
            start,
            expect,
            maximise,
            lambda current: expect(current)[1],
            n_values=int(sum(np.sum(~np.isnan(y)) for y in trials)),
            max_iter=params.max_iter,
            tol=params.tol,
        )
        self.model_ = result.model.model
        self.elbo_ = np.asarray(result.history)
        self.metrics_.update(
            regimes=params.regimes,
            latent=self.model_.n_latent,
            elbo=result.history[-1],
            em_iterations=len(result.history) - 1,
            converged=result.converged,
        )

    # -- inference ---------------------------------------------------------------------------
    def _posterior(self, y: np.ndarray, known: np.ndarray | None) -> TrialPosterior:
        """q(z), q(s) of one trial under the fitted parameters (module docstring)."""
        model, passes = self.model_, Passes()
        log_b = markov.clamp(_projected_log_densities(model, y), known)
        regimes = markov.forward_backward(model.chain, log_b, passes).probabilities
        previous = -np.inf
        for _ in range(STATE_SWEEPS):
            post, elbo = switching.infer(model, y, regimes, known, passes)
            regimes = post.regimes.probabilities
            if elbo - previous < self.params.tol * y.size:  # type: ignore[attr-defined]
                break
            previous = elbo
        return post

    def states(self, data: Dataset, labels: list[np.ndarray] | None = None) -> LatentStates:
        """Per sample: the Viterbi regime of q(s)'s chain, q(s), and q(z)'s means and sds."""
        self._check_fitted()
        posteriors = [self._posterior(trial.x, None if labels is None else labels[n]) for n, trial in enumerate(data.trials)]
        return LatentStates(
            names=tuple(f"z_{i}" for i in range(self.model_.n_latent)),
            t=np.concatenate([trial.t for trial in data.trials]),
            trial=np.concatenate([np.full(trial.n_samples, n) for n, trial in enumerate(data.trials)]),
            means=np.concatenate([post.latent.means for post in posteriors]),
            sds=np.sqrt(np.concatenate([np.diagonal(post.latent.covs, axis1=1, axis2=2) for post in posteriors])),
            state=np.concatenate([markov.viterbi(self.model_.chain, post.log_b) for post in posteriors]),
            probabilities=np.concatenate([post.regimes.probabilities for post in posteriors]),
        )

    def _simulate(self, history: Trial, steps: int, future_inputs: np.ndarray | None) -> np.ndarray:
        """C m_h + d with m_h = sum_k p_h(k) (A_k m_{h-1} + b_k) from q(z_T), q(s_T)."""
        model = self.model_
        post = self._posterior(history.x, None)
        weights = model.chain.forecast(post.regimes.probabilities[-1], steps)
        latent = mixture_rollout(_regime_maps(model), weights, post.latent.means[-1])
        return latent @ model.emission.T + model.emission_offset

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues (per step) of every regime's A_k, regime after regime: (K n,)."""
        self._check_fitted()
        return np.concatenate(np.linalg.eigvals(self.model_.dynamics))

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        m = self.model_
        return {
            "initial": m.chain.initial,
            "transition": m.chain.transition,
            "dynamics": m.dynamics,
            "offsets": m.offsets,
            "noise": m.noise,
            "C": m.emission,
            "offset": m.emission_offset,
            "R": m.emission_noise,
            "initial_mean": m.initial_mean,
            "initial_cov": m.initial_cov,
            "floor": np.array(m.floor),
            "elbo": self.elbo_,
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        k, n, _ = expect_array(arrays, "dynamics", (None, None, None)).shape
        p = self.n_variables
        self.model_ = Switching(
            chain=markov.Chain(expect_array(arrays, "initial", (k,)), expect_array(arrays, "transition", (k, k))),
            dynamics=expect_array(arrays, "dynamics", (k, n, n)),
            offsets=expect_array(arrays, "offsets", (k, n)),
            noise=expect_array(arrays, "noise", (k, n, n)),
            emission=expect_array(arrays, "C", (p, n)),
            emission_offset=expect_array(arrays, "offset", (p,)),
            emission_noise=expect_array(arrays, "R", (p,)),
            initial_mean=expect_array(arrays, "initial_mean", (n,)),
            initial_cov=expect_array(arrays, "initial_cov", (n, n)),
            floor=float(expect_array(arrays, "floor", ())),
        )
        self.elbo_ = expect_array(arrays, "elbo", (None,)).astype(float)


def _regime_maps(model: Switching) -> Autoregressive:
    """The regimes' latent maps z -> A_k z + b_k as an autoregressive emission."""
    return Autoregressive(model.dynamics, model.offsets, model.noise, model.floor)


def _projected_log_densities(model: Switching, y: np.ndarray) -> np.ndarray:
    """The regimes' autoregressive log densities (T, K) of y projected to the latent space by
    C's pseudo-inverse (NaN cells as the variable's offset): a cheap start for q(s)."""
    filled = np.where(np.isnan(y), model.emission_offset, y)
    return _regime_maps(model).log_density((filled - model.emission_offset) @ np.linalg.pinv(model.emission).T)


def _start(data: Dataset, params: SLDSParams, known: list[np.ndarray] | None, seed: int | None) -> _Iterate:
    """The start of the module docstring: principal components, then an arhmm on them."""
    trials = [trial.x for trial in data.trials]
    pooled = np.concatenate(trials)
    centre = np.nanmean(pooled, axis=0)
    variance = np.nanvar(pooled, axis=0)
    n = params.latent or pooled.shape[1]
    if n > pooled.shape[1]:
        raise DataError(f"{data.source}: latent={n} exceeds the {pooled.shape[1]} observed variables")
    filled = [np.where(np.isnan(y), centre, y) - centre for y in trials]
    _, _, vt = np.linalg.svd(np.concatenate(filled), full_matrices=False)
    c = vt[:n].T  # (p, n), orthonormal columns
    projected = [y @ c for y in filled]
    residual = np.concatenate([y - z @ c.T for y, z in zip(filled, projected)])
    floor = covariance_floor(filled)
    r = np.maximum(np.mean(residual**2, axis=0), START_NOISE * variance) + floor
    arhmm = ARHMM(MarkovParams(states=str(params.regimes), restarts=params.restarts))
    latent_data = Dataset.from_arrays(projected, dt=data.dt or 1.0)
    arhmm.fit(latent_data, seed=seed, labels=known)
    regimes = arhmm.states(latent_data, labels=known).probabilities
    emission: Autoregressive = arhmm.model_.emission  # type: ignore[assignment]
    z = np.concatenate(projected)
    model = Switching(
        chain=markov.Chain(arhmm.model_.initial, arhmm.model_.transition),
        dynamics=emission.dynamics,
        offsets=emission.offsets,
        noise=emission.covs,
        emission=c,
        emission_offset=centre,
        emission_noise=r,
        initial_mean=np.mean([zt[0] for zt in projected], axis=0),
        initial_cov=np.cov(z.T).reshape(n, n) + floor * np.eye(n),
        floor=floor,
    )
    splits = np.cumsum([y.shape[0] for y in trials])[:-1]
    return _Iterate(model, np.split(regimes, splits))
