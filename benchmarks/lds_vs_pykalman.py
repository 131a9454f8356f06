"""dynid's ``lds`` EM beside pykalman's, from the same start, on a known 4-latent / 8-observed
LDS: seconds per EM iteration and the log-likelihood after the same number of iterations.

Both start from dynid's subspace (N4SID) start. The models differ in two details, said in the
output: pykalman's EM estimates a full observation covariance R (dynid's a diagonal one, which
is what makes NaN cells cheap), and it keeps the observation offset fixed (dynid's EM estimates
it). pykalman handles only whole missing rows, so the comparison is on complete data.

    python benchmarks/lds_vs_pykalman.py [--samples 2000] [--iterations 20] [-o results/lds.json]
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from timing import compare_em, em_arguments

from dynid.data.dataset import Trial
from dynid.linear.kalman import StateSpace, kalman_filter
from dynid.linear.subspace import subspace_start
from dynid.models.latent.em import expectations, maximise

HERE = Path(__file__).resolve().parent


def known_lds(samples: int, seed: int = 0) -> np.ndarray:
    """Observations (samples, 8) of an LDS with eigenvalues 0.95 e^{+-0.3i}, 0.8, 0.6 in a
    random basis, Q = I, observation noise sd 0.3."""
    rng = np.random.default_rng(seed)
    rotation = 0.95 * np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    dynamics = np.zeros((4, 4))
    dynamics[:2, :2], dynamics[2, 2], dynamics[3, 3] = rotation, 0.8, 0.6
    basis = rng.normal(size=(4, 4))
    a = basis @ dynamics @ np.linalg.inv(basis)
    c = rng.normal(size=(8, 4))
    z = np.zeros(4)
    y = np.empty((samples, 8))
    for t in range(samples):
        y[t] = c @ z + 1.0 + 0.3 * rng.normal(size=8)
        z = a @ z + rng.normal(size=4)
    return y


def log_likelihood(model: StateSpace, y: np.ndarray) -> float:
    return float(kalman_filter(model, y).loglik.sum())


class DynidEM:
    """dynid's EM, one iteration per call."""

    def __init__(self, y: np.ndarray) -> None:
        self.trial, self.model = Trial(np.arange(y.shape[0], dtype=float), y), subspace_start([y], 4)

    def __call__(self) -> None:
        found, _ = expectations([self.model.course(self.trial.n_samples)], [self.trial])
        self.model = maximise(self.model, [self.trial], found)

    def log_likelihood(self) -> float:
        return log_likelihood(self.model, self.trial.x)


class PykalmanEM:
    """pykalman's EM from dynid's start, one iteration per call."""

    def __init__(self, y: np.ndarray) -> None:
        from pykalman import KalmanFilter

        start = subspace_start([y], 4)
        self.y = y
        self.kf = KalmanFilter(
            transition_matrices=start.a, observation_matrices=start.c,
            transition_covariance=start.q, observation_covariance=np.diag(start.r),
            transition_offsets=np.zeros(4), observation_offsets=start.offset,
            initial_state_mean=start.m0, initial_state_covariance=start.p0,
            em_vars=["transition_matrices", "observation_matrices", "transition_covariance",
                     "observation_covariance", "initial_state_mean", "initial_state_covariance"],
        )

    def __call__(self) -> None:
        self.kf = self.kf.em(self.y, n_iter=1)

    def log_likelihood(self) -> float:
        return float(self.kf.loglikelihood(self.y))


def main() -> None:
    args = em_arguments(__doc__.splitlines()[0], HERE / "results" / "lds_vs_pykalman.json")
    import pykalman

    y = known_lds(args.samples)
    compare_em(
        {"dynid": DynidEM(y), "pykalman": PykalmanEM(y)},
        samples=args.samples, iterations=args.iterations,
        start_log_likelihood=log_likelihood(subspace_start([y], 4), y), start="subspace start",
        output=args.output,
        versions={"pykalman_version": pykalman.__version__ if hasattr(pykalman, "__version__") else "unknown"},
    )


if __name__ == "__main__":
    main()
