"""Issue 15's gpsde goals on double-well data the tests do not use (other seeds).

1. SING against plain gradient VI: the same model (a gpsde fit, parameters then held), the same
   data, the same Gaussian Markov family for q(z), the same start (the drift-free posterior).
   SING takes natural-gradient steps on the natural parameters; the baseline takes Adam steps
   on the mean and the Cholesky factor of the precision (log-diagonal), the usual unconstrained
   parameters of this family, with the ELBO's gradient by autodiff through a dense inverse. For
   each, the iterations and seconds until the ELBO is within ``--gap`` nats of the best either
   reached, for gaps of 10, 1 and 0.1 times ``--gap`` (Adam at each of several learning rates).
2. The stationary histogram of a long ``--sample`` free run of a fitted gpsde against the
   truth's exact stationary law (goal: KL <= 0.1), for several data seeds.

    python benchmarks/gpsde_sing.py [--samples 500] [--adam-iterations 3000] [--seeds 3]
                                    [--fit-samples 3000] [--run 100000] [-o results/gpsde_sing.json]
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

from test_gpsde import DT, double_well, histogram_kl  # noqa: E402

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


def stationary(seeds: int, fit_samples: int, run: int) -> list[dict]:
    out = []
    for seed in range(seeds):
        dataset = data(fit_samples, seed=100 + seed)
        began = time.perf_counter()
        model = api.fit(dataset, "gpsde", ["max_iter=50"], seed=0, device="cpu").model
        fit_seconds = time.perf_counter() - began
        path = api.forecast(model, dataset, run, sample=True, seed=seed).x[:, 0]
        out.append({"seed": 100 + seed, "fit_samples": fit_samples, "run": run,
                    "kl": histogram_kl(path[1000:]),
                    # The training data's own histogram: how far from the law they happened to be.
                    "data_kl": histogram_kl(dataset.trials[0].x[:, 0]),
                    "iterations": model.metrics_["iterations"],
                    "stopped": model.metrics_["stopped"], "fit_seconds": fit_seconds})
        print(out[-1], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--adam-iterations", type=int, default=3000)
    parser.add_argument("--gap", type=float, default=0.1)
    parser.add_argument("--rates", default="0.003,0.01,0.03,0.1")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--fit-samples", type=int, default=3000)
    parser.add_argument("--run", type=int, default=100_000)
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "gpsde_sing.json"))
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "python": platform.python_version(), "load_average": os.getloadavg()}}
    result["convergence"] = convergence(args.samples, args.adam_iterations, args.gap, rates)
    print(json.dumps(result["convergence"], indent=1), flush=True)
    result["stationary"] = stationary(args.seeds, args.fit_samples, args.run)
    Path(args.output).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
