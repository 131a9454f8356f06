"""Issue 15's gpsde goals on double-well data the tests do not use (other seeds).

1. SING against plain gradient VI: the same model (a gpsde fit, parameters then held), the same
   data, the same Gaussian Markov family for q(z), the same start (the drift-free posterior).
   SING takes natural-gradient steps on the natural parameters; the baseline takes Adam steps
   on the mean and the Cholesky factor of the precision (log-diagonal), the usual unconstrained
   parameters of this family, with the ELBO's gradient by autodiff through a dense inverse. For
   each, the iterations and seconds until the ELBO is within ``--gap`` nats of the best either
   reached, for gaps of 10, 1 and 0.1 times ``--gap`` (Adam at each of several learning rates).
2. The stationary histogram of a long ``--sample`` free run of a fitted gpsde against the
   truth's exact stationary law (goal: KL <= 0.1), for several data seeds; beside it a free run
   of the posterior-mean drift (no function drawn from q(u)), the training record's own
   histogram, and an oracle: the stationary law of a cubic drift (the truth's family) and a
   diffusion fitted by least squares to the increments of the *true, noise-free* latent path,
   which is what the record itself says about the wells, whatever the method.

    python benchmarks/gpsde_sing.py [--samples 500] [--adam-iterations 3000] [--seeds 100,101,102]
                                    [--fit-samples 3000] [--run 100000] [--jobs 1] [--skip-convergence]
                                    [-o results/gpsde_sing.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from test_gpsde import DT, double_well, histogram_kl, kl_edges, observed_bins, stationary_bins  # noqa: E402

from dynid import api  # noqa: E402
from dynid.data.dataset import Dataset  # noqa: E402
from dynid.models.sde import sing  # noqa: E402


def data(samples: int, seed: int) -> Dataset:
    _, y = double_well(samples, seed=seed)
    return Dataset.from_arrays(y[:, None], dt=DT, variables=["y"])


def sing_course(grid: sing.Grid, model: sing.SDEModel, iterations: int) -> tuple[list[float], list[float]]:
    """ELBO (the q(z) part) and elapsed seconds after each SING step from the start."""
    posterior = sing.start(grid, model)
    values, seconds, began = [posterior.value], [0.0], time.perf_counter()
    for _ in range(iterations):
        posterior = sing.sing_steps(posterior, grid, model, 1)
        values.append(posterior.value)
        seconds.append(time.perf_counter() - began)
    return values, seconds


def adam_course(grid: sing.Grid, model: sing.SDEModel, iterations: int, lr: float) -> tuple[list[float], list[float]]:
    """The same for Adam on (mean, log-diagonal and sub-diagonal of the precision's Cholesky
    factor), 1 latent dimension, dense algebra."""
    import torch

    start = sing.start(grid, model)
    n = grid.n_points
    precision = np.diag(start.natural.J[:, 0, 0]) + np.diag(start.natural.L[:, 0, 0], 1) + np.diag(start.natural.L[:, 0, 0], -1)
    factor = np.linalg.cholesky(precision)
    mean = torch.tensor(start.moments.means, dtype=torch.float64, requires_grad=True)
    log_diag = torch.tensor(np.log(np.diag(factor)), requires_grad=True)
    below = torch.tensor(np.diag(factor, -1).copy(), requires_grad=True)
    optimiser = torch.optim.Adam([mean, log_diag, below], lr=lr)

    def elbo() -> torch.Tensor:
        lower = torch.diag(log_diag.exp()) + torch.diag(below, -1)
        cov = torch.cholesky_inverse(lower)
        m = mean
        second = torch.diagonal(cov)[:, None, None] + (m[:, :, None] * m[:, None, :])
        lagged = torch.diagonal(cov, 1)[:, None, None] + (m[:-1, :, None] * m[1:, None, :])
        entropy = 0.5 * n * math.log(2 * math.pi * math.e) - log_diag.sum()
        return sing._expected_log_joint((m, second, lagged), grid, model) + entropy

    values, seconds, began = [], [], time.perf_counter()
    for _ in range(iterations):
        optimiser.zero_grad()
        loss = -elbo()
        values.append(-float(loss.detach()))  # the ELBO after the steps so far
        seconds.append(time.perf_counter() - began)
        loss.backward()
        optimiser.step()
    values.append(float(elbo().detach()))
    seconds.append(time.perf_counter() - began)
    return values, seconds


def first_within(values: list[float], seconds: list[float], target: float) -> dict[str, float | None]:
    for k, value in enumerate(values):
        if value >= target:
            return {"iterations": k, "seconds": seconds[k]}
    return {"iterations": None, "seconds": None}


def convergence(samples: int, adam_iterations: int, gap: float, rates: list[float]) -> dict:
    import torch

    torch.set_num_threads(1)
    dataset = data(samples, seed=11)
    fitted = api.fit(dataset, "gpsde", ["max_iter=20"], seed=0, device="cpu").model
    grid = sing.lay_out(list(dataset.trials), DT, 1)
    model = fitted.model_
    sing_values, sing_seconds = sing_course(grid, model, 30)
    adam = {lr: adam_course(grid, model, adam_iterations, lr) for lr in rates}
    best = max(max(sing_values), *(max(v) for v, _ in adam.values()))
    gaps = [10 * gap, gap, gap / 10]
    return {"samples": samples, "best_elbo": best, "start_elbo": sing_values[0],
            "sing": {"final_elbo": sing_values[-1],
                     **{f"within_{g:g}_nats": first_within(sing_values, sing_seconds, best - g) for g in gaps}},
            "adam": {str(lr): {"final_elbo": v[-1], "seconds_per_iteration": s[-1] / adam_iterations,
                               **{f"within_{g:g}_nats": first_within(v, s, best - g) for g in gaps}}
                     for lr, (v, s) in adam.items()}}


def oracle_kl(z: np.ndarray) -> float:
    """KL(truth || the stationary law p ~ exp(2 int f / s^2) of the cubic f and the s^2 fitted
    by least squares to the increments of the true latent path z (n,)), binned as
    ``histogram_kl``: how far the record's own evidence about the drift is from the truth."""
    rate = (z[1:] - z[:-1]) / DT
    powers = np.vander(z[:-1], 4, increasing=True)  # 1, z, z^2, z^3
    coef = np.linalg.lstsq(powers, rate, rcond=None)[0]
    diffusion = float(np.mean((rate - powers @ coef) ** 2)) * DT
    grid = np.linspace(-3, 3, 6001)
    potential = np.polynomial.polynomial.polyint(coef)  # int f
    log_density = 2 * np.polynomial.polynomial.polyval(grid, potential) / diffusion
    edges = kl_edges()
    truth, model = stationary_bins(edges), observed_bins(grid, np.exp(log_density - log_density.max()), edges)
    return float(np.sum(truth * np.log(truth / model)))


def oracles(seeds: int, fit_samples: int) -> list[dict]:
    """The oracle's and the record's own KL on data seeds 100, 101, ... (no fit)."""
    out = []
    for seed in range(100, 100 + seeds):
        z, y = double_well(fit_samples, seed=seed)
        out.append({"seed": seed, "oracle_kl": oracle_kl(z), "data_kl": histogram_kl(y),
                    "right_well_fraction": float(np.mean(z > 0))})
    kl = [row["oracle_kl"] for row in out]
    print(f"oracle KL on {seeds} records: median {np.median(kl):.3g}, worst {max(kl):.3g}, "
          f"over 0.1 on seeds {[row['seed'] for row in out if row['oracle_kl'] > 0.1]}", flush=True)
    return out


def stationary_one(seed: int, fit_samples: int, run: int) -> dict:
    import torch

    torch.set_num_threads(1)
    z, y = double_well(fit_samples, seed=seed)
    dataset = Dataset.from_arrays(y[:, None], dt=DT, variables=["y"])
    began = time.perf_counter()
    model = api.fit(dataset, "gpsde", ["max_iter=50"], seed=0, device="cpu").model
    fit_seconds = time.perf_counter() - began
    path = api.forecast(model, dataset, run, sample=True, seed=seed).x[:, 0]
    # The same run with the posterior-mean drift instead of one drawn from q(u).
    rng = np.random.default_rng(seed)
    field = model.field_
    latent = field.paths(np.zeros((1, model.model_.n_latent)), field.weights[None], run, 1, DT, rng)[:, 0]
    mean_path = model._observed(latent, rng)[:, 0]
    return {"seed": seed, "fit_samples": fit_samples, "run": run,
            "kl": histogram_kl(path[1000:]), "kl_mean_drift": histogram_kl(mean_path[1000:]),
            "data_kl": histogram_kl(y), "oracle_kl": oracle_kl(z), "right_well_fraction": float(np.mean(z > 0)),
            "iterations": model.metrics_["iterations"], "stopped": model.metrics_["stopped"],
            "fit_seconds": fit_seconds}


def stationary(seeds: list[int], fit_samples: int, run: int, jobs: int) -> list[dict]:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        out = list(pool.map(stationary_one, seeds, [fit_samples] * len(seeds), [run] * len(seeds)))
    for row in out:
        print(row, flush=True)
    kl = [row["kl"] for row in out]
    print(f"KL of --sample runs: median {np.median(kl):.3g}, worst {max(kl):.3g}; "
          f"oracle median {np.median([row['oracle_kl'] for row in out]):.3g}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--adam-iterations", type=int, default=3000)
    parser.add_argument("--gap", type=float, default=0.1)
    parser.add_argument("--rates", default="0.003,0.01,0.03,0.1")
    parser.add_argument("--seeds", default="100,101,102", help="data seeds of the stationary runs")
    parser.add_argument("--jobs", type=int, default=1, help="stationary runs in parallel processes")
    parser.add_argument("--skip-convergence", action="store_true")
    parser.add_argument("--oracle-seeds", type=int, default=20,
                        help="the oracle and data KL alone (no fit, seconds) on data seeds 100, 101, ...")
    parser.add_argument("--fit-samples", type=int, default=3000)
    parser.add_argument("--run", type=int, default=100_000)
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "gpsde_sing.json"))
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "python": platform.python_version(), "load_average": os.getloadavg()}}
    if not args.skip_convergence:
        result["convergence"] = convergence(args.samples, args.adam_iterations, args.gap, rates)
        print(json.dumps(result["convergence"], indent=1), flush=True)
    result["oracle"] = oracles(args.oracle_seeds, args.fit_samples)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    result["stationary"] = stationary(seeds, args.fit_samples, args.run, args.jobs)
    Path(args.output).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
