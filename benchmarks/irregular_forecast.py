"""signature and ltc on irregularly sampled records: fit time and forecast NRMSE.

Two systems, each sampled at a median step with every gap jittered by +-50 %:
- damped linear oscillator x' = A x (A = [[-0.05, 2], [-2, -0.05]], period pi), step 0.1,
  300 samples; forecast one period past the end of the record, against the exact solution;
- van der Pol (mu = 1, period about 6.66), step 0.05, 4 trajectories of 300 samples from
  random starts (issue 14's setting for node); forecast one period from the first ``window``
  samples of a fifth trajectory (a new initial condition), against an accurate solution.
Optionally with Gaussian noise of ``--noise`` times each variable's standard deviation.
NRMSE: RMSE over the horizon and variables / the data's standard deviation (pooled).

    python benchmarks/irregular_forecast.py [--noise 0.01] [-o results/irregular_forecast.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import scipy.integrate
import scipy.linalg

from dynid import api
from dynid.data.dataset import Dataset, Trial

A = np.array([[-0.05, 2.0], [-2.0, -0.05]])
MODELS = {"signature": [], "signature depth 3": ["depth=3"], "ltc": []}


def jittered_times(rng: np.random.Generator, step: float, n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(step * (1 + rng.uniform(-0.5, 0.5, n - 1)))])


def vanderpol(x0: np.ndarray, t: np.ndarray) -> np.ndarray:
    def field(_: float, x: np.ndarray) -> list[float]:
        return [x[1], (1 - x[0] ** 2) * x[1] - x[0]]

    return scipy.integrate.solve_ivp(field, (t[0], t[-1]), x0, t_eval=t, rtol=1e-10,
                                     atol=1e-10).y.T


def cases(noise: float, rng: np.random.Generator) -> dict[str, tuple[Dataset, Trial, callable]]:
    """name -> (training data, forecast history, truth(times))."""
    t = jittered_times(rng, 0.1, 300)
    x = np.stack([scipy.linalg.expm(A * s) @ [2.0, 0.0] for s in t])
    noisy = x + noise * x.std(axis=0) * rng.standard_normal(x.shape)
    linear = (Dataset.from_arrays(noisy, t=t), Trial(t, noisy),
              lambda times: np.stack([scipy.linalg.expm(A * s) @ [2.0, 0.0] for s in times]))
    starts = rng.uniform(-2.5, 2.5, size=(5, 2))
    runs = []
    for x0 in starts:
        tt = jittered_times(rng, 0.05, 300)
        xx = vanderpol(x0, tt)
        runs.append((tt, xx + noise * xx.std(axis=0) * rng.standard_normal(xx.shape)))
    (t5, x5) = runs[-1]
    history = Trial(t5[:40], x5[:40])

    def vdp_truth(times: np.ndarray) -> np.ndarray:
        return vanderpol(vanderpol(starts[-1], t5[:40])[-1], np.concatenate([[t5[39]], times]))[1:]

    data = Dataset.from_arrays([xx for _, xx in runs[:-1]], t=[tt for tt, _ in runs[:-1]])
    return {"damped oscillator": linear, "van der pol": (data, history, vdp_truth)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noise", type=float, default=0.0)
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for system, (data, history, truth) in cases(args.noise, rng).items():
        scale = np.vstack([trial.x for trial in data.trials]).std()
        period = np.pi if system == "damped oscillator" else 6.66
        for label, params in MODELS.items():
            name = label.split()[0]
            load = os.getloadavg()[0]
            started = time.perf_counter()
            model = api.fit(data, name, params, seed=0, device="cpu").model
            seconds = time.perf_counter() - started
            horizon = int(np.ceil(period / model.dt_))
            forecast = model.simulate(history, horizon)
            expected = truth(history.t[-1] + model.dt_ * np.arange(1, horizon + 1))
            nrmse = float(np.sqrt(np.mean((forecast - expected) ** 2)) / scale)
            rows.append({"system": system, "model": label, "params": params, "noise": args.noise,
                         "fit_seconds": round(seconds, 2), "nrmse_one_period": nrmse,
                         "epochs": model.metrics_.get("epochs"), "load_average_1min": load})
            print(f"{system:18s} {label:18s} fit {seconds:7.2f} s  NRMSE {nrmse:.4f}  "
                  f"(load {load:.1f})", flush=True)
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "processor": platform.processor()}, "rows": rows}
    if args.output is not None:
        args.output.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
