"""The goals of issue 12 for ``lds`` measured on data the tests do not use (other seeds):
discrete eigenvalues with 30% of cells missing (goal: within 0.02, matched), continuous
eigenvalues from irregular timestamps (goal: within 3%; and the same data interpolated onto a
grid and fitted there), and the coverage of --interval 0.9 over many rollouts (goal 0.85-0.95).

For the irregular case it also prints what decides whether a miss is the optimiser's or the
data's: the log-likelihood of the fitted and of the true parameters on the same data (a fit
below the truth has not found the maximum), and the Cramer-Rao bound on each eigenvalue from
the whole continuous path observed without noise (``path_bound``): no estimator from the
sparser, noisy samples can do better than it.

``--determined`` fits only the irregular case, on a second system chosen by that bound rather
than by our fit: two lightly damped oscillations (-0.1 +- 3i, -0.2 +- 10i) that 3000 such samples
determine (bound 0.82% and 0.35% relative sd), where the first system's decays -1 and -2 are not
(16.5% and 11.7%): a 3% goal can be judged there.

    python benchmarks/lds_goals.py [--samples 3000] [--seeds 3] [-o results/lds_goals.json]
    python benchmarks/lds_goals.py --determined [--seeds 2]   # writes results/lds_goals_determined.json
    python benchmarks/lds_goals.py --path-check 20   # only the bound's Monte-Carlo check
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from test_ctlds import (  # noqa: E402
    DETERMINED_CONTINUOUS, TRUE_CONTINUOUS, dataset, interpolated_fit, irregular_times, matched_relative_errors,
    relative_error, simulate_irregular, true_continuous,
)
from test_lds import TRUE_EIGENVALUES, matched_error, simulate_lds, true_system  # noqa: E402

from dynid import api  # noqa: E402
from dynid.data.dataset import Dataset, Trial  # noqa: E402
from dynid.linear.continuous import ContinuousStateSpace  # noqa: E402
from dynid.linear.kalman import kalman_filter  # noqa: E402


def path_bound(model: ContinuousStateSpace, horizon: float) -> np.ndarray:
    """Standard deviations (n,) of the eigenvalues of F that the Cramer-Rao bound allows from
    the stationary path z(t) over ``horizon`` time units observed exactly: the Fisher
    information of vec(F) (row-major) is horizon * kron(Sigma^-1, P), with P the stationary
    covariance (F P + P F^T + Sigma = 0), and d lambda_k = w_k^T dF v_k (w_k the rows of
    V^-1). A lower bound for any estimate from noisy samples at discrete times."""
    covariance = solve_continuous_lyapunov(model.f, -model.sigma)
    inverse_information = np.linalg.inv(horizon * np.kron(np.linalg.inv(model.sigma), covariance))
    _, right = np.linalg.eig(model.f)
    left = np.linalg.inv(right)
    out = []
    for k in range(model.n_latent):
        gradient = np.outer(left[k], right[:, k]).ravel()
        out.append(np.sqrt(sum(g @ inverse_information @ g for g in (gradient.real, gradient.imag))))
    return np.array(out)


def discrete(samples: int, seed: int) -> dict[str, float]:
    _, y = simulate_lds(true_system(), samples, seed=100 + seed, missing=0.3)
    data = Dataset.from_arrays(y, dt=0.1, variables=[f"y{i}" for i in range(y.shape[1])])
    start = time.perf_counter()
    model = api.fit(data, "lds", {"latent": 4, "max_iter": 100}, device="cpu").model
    seconds = time.perf_counter() - start
    # Coverage: 200 rollouts of 10 steps after 50 samples of fresh data.
    _, fresh = simulate_lds(true_system(), 200 * 60, seed=200 + seed)
    covered = []
    for k in range(200):
        window = fresh[k * 60:(k + 1) * 60]
        band = model.predictive(Trial(np.arange(50) * 0.1, window[:50]), 10, None, 0.9)
        covered.append((band.lower <= window[50:]) & (window[50:] <= band.upper))
    return {"eigenvalue_error": matched_error(model.eigenvalues(), TRUE_EIGENVALUES),
            "coverage_0.9": float(np.mean(covered)), "fit_seconds": seconds}


def irregular(samples: int, seed: int, eigenvalues: np.ndarray = TRUE_CONTINUOUS) -> dict[str, float]:
    """lds on ``samples`` irregular times (steps uniform in [0.02, 0.2]) of the known system
    with these continuous ``eigenvalues`` (4,), 30% of cells missing, beside the same data
    interpolated onto a grid at the median step and fitted there."""
    truth = true_continuous(eigenvalues=tuple(eigenvalues))
    t = irregular_times(samples, seed=300 + seed)
    y = simulate_irregular(truth, t, seed=400 + seed, missing=0.3)
    start, cpu_start = time.perf_counter(), time.process_time()
    model = api.fit(dataset(y, t), "lds", {"latent": 4, "max_iter": 100}, device="cpu").model
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    found = model.continuous_eigenvalues()
    gridded = interpolated_fit(y, t)
    return {"samples": samples, "time_units": float(t[-1] - t[0]),
            "true_eigenvalues": [str(v) for v in eigenvalues],
            "continuous_relative_error": relative_error(found, eigenvalues),
            "relative_error_per_eigenvalue": list(np.round(matched_relative_errors(found, eigenvalues), 4)),
            "continuous_eigenvalues": [str(np.round(v, 3)) for v in found],
            "path_bound_relative_sd": list(np.round(relative_path_bound(truth, eigenvalues, float(t[-1] - t[0])), 4)),
            "log_likelihood_fit": float(kalman_filter(model.model_.course(t), y).loglik.sum()),
            "log_likelihood_truth": float(kalman_filter(truth.course(t), y).loglik.sum()),
            "interpolated_relative_error": relative_error(gridded.continuous_eigenvalues_, eigenvalues),
            "interpolated_relative_error_per_eigenvalue": list(np.round(matched_relative_errors(gridded.continuous_eigenvalues_, eigenvalues), 4)),
            "interpolated_eigenvalues": [str(np.round(v, 3)) for v in gridded.continuous_eigenvalues_],
            "em_iterations": model.metrics_["em_iterations"], "fit_seconds": seconds, "fit_cpu_seconds": cpu_seconds}


def relative_path_bound(truth: ContinuousStateSpace, eigenvalues: np.ndarray, horizon: float) -> np.ndarray:
    """``path_bound`` over |eigenvalue| (n,), in the order of ``eigenvalues``."""
    nearest = np.abs(np.linalg.eigvals(truth.f)[None, :] - eigenvalues[:, None]).argmin(axis=1)
    return path_bound(truth, horizon)[nearest] / np.abs(eigenvalues)


def exact_path_spread(seeds: int, horizon: float, step: float = 0.01) -> np.ndarray:
    """Relative root-mean-square errors (4,) of the eigenvalues of logm(A) / step, A by least
    squares on the true path sampled exactly every ``step`` over ``horizon`` (no observation
    noise, no gaps: close to the whole path), over ``seeds`` paths: a check of ``path_bound``."""
    from scipy.linalg import logm
    from scipy.optimize import linear_sum_assignment

    model = true_continuous()
    a, _, q = (x[0] for x in model.transitions(np.array([step])))
    root, n = np.linalg.cholesky(q), int(horizon / step)
    squared = np.zeros(4)
    for seed in range(seeds):
        noise = np.random.default_rng(seed).normal(size=(n, 4)) @ root.T
        z = np.zeros((n, 4))
        for k in range(1, n):
            z[k] = a @ z[k - 1] + noise[k]
        found = np.linalg.eigvals(np.real(logm(np.linalg.lstsq(z[:-1], z[1:], rcond=None)[0].T)) / step)
        rows, cols = linear_sum_assignment(np.abs(found[:, None] - TRUE_CONTINUOUS[None, :]))
        squared[cols] += np.abs(found[rows] - TRUE_CONTINUOUS[cols]) ** 2
    return np.sqrt(squared / seeds) / np.abs(TRUE_CONTINUOUS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "lds_goals.json"))
    parser.add_argument("--path-check", type=int, default=0, metavar="SEEDS",
                        help="only compare path_bound with the spread of exact-path estimates over SEEDS paths")
    parser.add_argument("--determined", action="store_true",
                        help="only the irregular fit, on two lightly damped oscillations the samples determine")
    args = parser.parse_args()
    if args.determined:
        output = args.output if args.output != parser.get_default("output") else str(HERE / "results" / "lds_goals_determined.json")
        rows = []
        for seed in range(args.seeds):
            rows.append({"seed": seed, **irregular(args.samples, seed, DETERMINED_CONTINUOUS)})
            print(json.dumps(rows[-1]), flush=True)
        Path(output).write_text(json.dumps({"samples": args.samples, "rows": rows}, indent=1))
        return
    if args.path_check:
        horizon = float(irregular_times(args.samples, seed=300)[-1])
        print(json.dumps({"horizon": horizon, "eigenvalues": [str(v) for v in TRUE_CONTINUOUS],
                          "path_bound_relative_sd": list(relative_path_bound(true_continuous(), TRUE_CONTINUOUS, horizon)),
                          "exact_path_relative_rmse": list(exact_path_spread(args.path_check, horizon))}))
        return
    rows = []
    for seed in range(args.seeds):
        row = {"seed": seed, **discrete(args.samples, seed), **{f"irregular_{k}": v for k, v in irregular(args.samples, seed).items()}}
        print(json.dumps(row), flush=True)
        rows.append(row)
    Path(args.output).write_text(json.dumps({"samples": args.samples, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
