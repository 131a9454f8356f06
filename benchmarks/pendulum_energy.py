"""Issue 14 goals for ``phnn`` and ``hnn`` on a pendulum theta'' = -sin(theta) - gamma theta'
(states theta, omega; energy E = omega^2 / 2 + 1 - cos(theta)), trained on 8 trials of 10 time
units (``--trials``) sampled every 0.05 with 2 % Gaussian noise (of each variable's standard deviation).

- damped (gamma = 0.1), ``phnn``: a free run of 100x the training horizon (1000 time units)
  stays bounded and its energy never increases; forecasts track the true continuation of each
  training trial over the first 8 time units with NRMSE <= 0.1.
- undamped (gamma = 0), ``hnn``: the energy drifts by <= 1 % over 100 periods where a plain
  ``node`` drifts; the same tracking.

    python benchmarks/pendulum_energy.py damped phnn [-p key=value ...]
    python benchmarks/pendulum_energy.py undamped hnn|node [-p key=value ...]

Prints one JSON line. Energy drift: |mean E over the last period - mean E over the first| /
mean E over the first, of the true energy function evaluated on the model's free run, and the
same for the model's own learned energy where it has one.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy.integrate import solve_ivp

from dynid import api
from dynid.data.dataset import Dataset, Trial

DT = 0.05
HORIZON = 10.0  # time units per training trial
TRACK = 8.0  # time units of tracking
DAMPING = {"damped": 0.1, "undamped": 0.0}


def pendulum(gamma: float):
    def f(t: float, x: np.ndarray) -> list[float]:
        return [x[1], -np.sin(x[0]) - gamma * x[1]]
    return f


def exact(gamma: float, x0: np.ndarray, t: np.ndarray) -> np.ndarray:
    return solve_ivp(pendulum(gamma), (t[0], t[-1]), x0, t_eval=t, rtol=1e-11,
                     atol=1e-11).y.T


def energy(x: np.ndarray) -> np.ndarray:
    return 0.5 * x[:, 1] ** 2 + 1.0 - np.cos(x[:, 0])


def training_data(gamma: float, trials: int = 8, noise: float = 0.02, seed: int = 0
                  ) -> tuple[Dataset, list[np.ndarray]]:
    """The noisy trials and each one's clean state at its end (for the continuation)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(HORIZON / DT)) + 1) * DT
    runs, ends = [], []
    for _ in range(trials):
        x0 = np.array([rng.uniform(-1.5, 1.5), rng.uniform(-1.0, 1.0)])
        clean = exact(gamma, x0, t)
        noisy = clean + noise * clean.std(axis=0) * rng.standard_normal(clean.shape)
        runs.append(Trial(t=t, x=noisy))
        ends.append(clean[-1])
    return Dataset(trials=tuple(runs), variables=("theta", "omega"), dt=DT), ends


def tracking_nrmse(model, gamma: float, data: Dataset, ends: list[np.ndarray]) -> list[float]:
    """Per trial: NRMSE of the forecast from the trial's (noisy) end over TRACK time units
    against the true continuation of its clean end."""
    steps = int(round(TRACK / DT))
    t = np.arange(steps + 1) * DT
    scores = []
    for trial, end in zip(data.trials, ends):
        truth = exact(gamma, end, t)[1:]
        predicted = model.simulate(trial, steps, None)
        scores.append(float(np.mean(np.sqrt(np.mean((predicted - truth) ** 2, axis=0))
                                    / data_spread(data))))
    return scores


def data_spread(data: Dataset) -> np.ndarray:
    return np.vstack([trial.x for trial in data.trials]).std(axis=0)


def drift(values: np.ndarray, period_steps: int) -> float:
    first, last = values[:period_steps].mean(), values[-period_steps:].mean()
    return float(abs(last - first) / abs(first))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=sorted(DAMPING))
    parser.add_argument("model", choices=("phnn", "hnn", "node"))
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("-p", dest="params", action="append", default=[])
    args = parser.parse_args()
    gamma = DAMPING[args.system]
    data, ends = training_data(gamma, trials=args.trials)
    started = time.perf_counter()
    model = api.fit(data, args.model, args.params, seed=0, device="cpu").model
    seconds = time.perf_counter() - started
    tracking = tracking_nrmse(model, gamma, data, ends)
    # A free run 100x the training horizon from the first trial's start.
    steps = int(round(100 * HORIZON / DT))
    run_started = time.perf_counter()
    free = model.simulate(Trial(t=np.zeros(1), x=data.trials[0].x[:1]), steps, None)
    run_seconds = time.perf_counter() - run_started
    true_energy = energy(free)
    period_steps = int(round(2 * np.pi / DT))  # the small-amplitude period, about 6.3
    result = {
        "system": args.system, "model": args.model, "params": args.params,
        "trials": args.trials,
        "fit_seconds": round(seconds, 1), "free_run_seconds": round(run_seconds, 1),
        "metrics": model.metrics_,
        "tracking_nrmse_8": tracking, "tracking_goal_met": max(tracking) <= 0.1,
        "free_run_max_abs": np.abs(free).max(axis=0).tolist(),
        "bounded": bool(np.isfinite(free).all() and np.abs(free).max() < 10 * np.abs(
            np.vstack([t.x for t in data.trials])).max()),
        "true_energy_drift_100_periods": drift(true_energy, period_steps),
        "true_energy_start_end": [float(true_energy[0]), float(true_energy[-1])],
    }
    if hasattr(model, "energy"):
        learned = model.energy(free)
        increases = np.diff(learned)
        result["learned_energy_drift_100_periods"] = drift(learned, period_steps)
        result["learned_energy_largest_increase"] = float(increases.max())
        result["learned_energy_non_increasing"] = bool(
            increases.max() <= 1e-9 * max(abs(learned[0]), 1.0))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
