"""dynid's ``hmm`` EM beside hmmlearn's GaussianHMM (full covariances), from the same start, on a
known 3-state, 2-variable Gaussian HMM: seconds per EM iteration and the log-likelihood after
the same number of iterations.

Both start from dynid's k-means++ start (seed 0). hmmlearn runs with its priors off
(covars_prior=0, covars_weight=1, means_weight=0: plain maximum likelihood, as dynid's); dynid
adds its covariance floor (1e-6 of the data's variance) in every M-step, too small to show in
the log-likelihood's printed digits.

    python benchmarks/hmm_vs_hmmlearn.py [--samples 2000] [--iterations 20] [-o results/hmm.json]

Then CPU time per iteration (``time.process_time``, the robust figure on a loaded machine) in
CPU_ROUNDS alternating rounds of CPU_ITERATIONS iterations of each library, printed.

"dynid" runs the compiled forward-backward (numba), "dynid-numpy" the LAPACK-banded numpy
fallback used where numba is missing (its first call compiles, or loads the cached code, before
any timing).
"""

from __future__ import annotations

from pathlib import Path

import time

import numpy as np
from timing import compare_em, em_arguments

from dynid.models.latent import forward_backward_choice, forward_backward_lapack, markov
from dynid.models.latent.emissions import Gaussian, covariance_floor
from dynid.models.latent.hmm import HMM, _kmeans_labels, _start_from_labels

HERE = Path(__file__).resolve().parent
CPU_ROUNDS, CPU_ITERATIONS = 8, 10
TRANSITION = np.array([[0.95, 0.03, 0.02], [0.02, 0.95, 0.03], [0.03, 0.02, 0.95]])
MEANS = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])


def known_hmm(samples: int, seed: int = 0) -> np.ndarray:
    """Observations (samples, 2): means MEANS, sd 0.7, transition matrix TRANSITION."""
    rng = np.random.default_rng(seed)
    z = np.empty(samples, dtype=int)
    z[0] = 0
    for t in range(1, samples):
        z[t] = rng.choice(3, p=TRANSITION[z[t - 1]])
    return MEANS[z] + 0.7 * rng.normal(size=(samples, 2))


def start(x: np.ndarray) -> markov.HiddenMarkov:
    labels = _kmeans_labels([x], HMM._features, 3, np.random.default_rng(0))
    return _start_from_labels([x], labels, 3, Gaussian, covariance_floor([x]))


class DynidEM:
    """dynid's Baum-Welch, one iteration per call; numpy: with the numpy fallback's passes."""

    def __init__(self, x: np.ndarray, numpy: bool = False) -> None:
        self.x, self.model = x, start(x)
        chosen = forward_backward_lapack.forward_backward if numpy else forward_backward_choice.compiled()
        self.passes = forward_backward_choice.Passes(fixed=chosen)
        markov.forward_backward(self.model, self.model.emission.log_density(x), self.passes)  # numba's first call

    def __call__(self) -> None:
        posterior = markov.forward_backward(self.model, self.model.emission.log_density(self.x), self.passes)
        self.model = markov.maximise(self.model, [self.x], [posterior])

    def log_likelihood(self) -> float:
        return markov.log_likelihood(self.model, [self.x], passes=self.passes)


class HmmlearnEM:
    """hmmlearn's GaussianHMM from dynid's start, one iteration per call."""

    def __init__(self, x: np.ndarray) -> None:
        from hmmlearn.hmm import GaussianHMM

        first = start(x)
        self.x = x
        self.model = GaussianHMM(
            n_components=3, covariance_type="full", n_iter=1, tol=0.0, init_params="", params="stmc",
            covars_prior=0.0, covars_weight=1.0, means_weight=0.0, implementation="scaling",
        )
        self.model.startprob_ = first.initial
        self.model.transmat_ = first.transition
        self.model.means_ = first.emission.means
        self.model.covars_ = first.emission.covs

    def __call__(self) -> None:
        self.model.fit(self.x)

    def log_likelihood(self) -> float:
        return float(self.model.score(self.x))


def cpu_per_iteration(runs: dict[str, DynidEM | HmmlearnEM]) -> dict[str, list[float]]:
    """Milliseconds of CPU time per iteration of each run, per round (alternating order)."""
    found: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(CPU_ROUNDS):
        for name in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
            start = time.process_time()
            for _ in range(CPU_ITERATIONS):
                runs[name]()
            found[name].append(1000 * (time.process_time() - start) / CPU_ITERATIONS)
    return found


def main() -> None:
    args = em_arguments(__doc__.splitlines()[0], HERE / "results" / "hmm_vs_hmmlearn.json")
    import hmmlearn

    x = known_hmm(args.samples)
    runs = {"dynid": DynidEM(x), "dynid-numpy": DynidEM(x, numpy=True), "hmmlearn": HmmlearnEM(x)}
    compare_em(
        runs,
        samples=args.samples, iterations=args.iterations,
        start_log_likelihood=markov.log_likelihood(start(x), [x]), start="k-means++ start",
        output=args.output, versions={"hmmlearn_version": hmmlearn.__version__},
    )
    for name, rounds in cpu_per_iteration(runs).items():
        print(f"  {name:<11} CPU {np.median(rounds):.2f} ms/iteration (median of {CPU_ROUNDS} rounds; "
              f"{min(rounds):.2f}-{max(rounds):.2f})")


if __name__ == "__main__":
    main()
