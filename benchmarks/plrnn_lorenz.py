"""plrnn and alrnn on Lorenz-63 (issue 13): valid prediction time and fit time.

Training data: 10 000 samples (dt 0.01) from the catalogue's start; test data: an independent
trajectory of the same attractor (another start, its first 1000 samples dropped as transient).
Scenarios: clean full state; full state with 5 % observation noise (noise sd 5 % of each
variable's sd, on the training data only); x alone with 1 % noise (``latent=3`` for plrnn).

VPT: from ``--starts`` points of the clean test trajectory, each backend forecasts from the
``history_length`` samples before the point (noisy like the training data in the noisy
scenarios); VPT is the first time the normalised error exceeds 0.4 (dynid.metrics.forecast),
in Lyapunov times (lambda_max = 0.9056); the median over starts is reported. D_stsp and D_H
(``dynid.metrics.dsr``): a 50,000-step free run from the end of the training data against an
independent clean 50,000-step trajectory, on the observed variables (x alone, 1-D, in the
x-only scenario). Fit time is the
wall time of one ``api.fit`` (torch threads 1), with the other load on the machine recorded
beside it (``timing.OtherLoad``: cores busy with other work), and its CPU time: on one thread
that is the wall time the fit would take on an idle core.

    python benchmarks/plrnn_lorenz.py                 # writes results/plrnn_lorenz.json
    python benchmarks/plrnn_lorenz.py --only plrnn:clean -p epochs=5
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.metrics.dsr import power_spectrum_distance, state_space_divergence
from dynid.metrics.forecast import valid_prediction_time
from dynid.systems import simulate

from timing import OtherLoad

LYAPUNOV = 0.9056  # largest Lyapunov exponent of Lorenz-63 (sigma 10, rho 28, beta 8/3)
DT = 0.01
HORIZON = 2000  # 18 Lyapunov times
FREE_RUN = 50_000  # steps of the free run that D_stsp and D_H judge
# (backend, scenario): the extra -p settings for partial observation.
CASES = {
    ("plrnn", "clean"): [], ("alrnn", "clean"): [],
    ("plrnn", "noise5"): [], ("alrnn", "noise5"): [],
    ("plrnn", "x_only"): ["latent=3"], ("alrnn", "x_only"): [],
}
NOISE = {"clean": 0.0, "noise5": 0.05, "x_only": 0.01}


def trajectories(noise: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(training data, clean test trajectory, the same with the scenario's noise)."""
    train = simulate("lorenz", n=10_000, noise=noise, seed=seed).x
    test_clean = simulate("lorenz", n=11_000 + HORIZON, x0=(1.0, 1.0, 20.0)).x[1000:]
    test = simulate("lorenz", n=11_000 + HORIZON, x0=(1.0, 1.0, 20.0), noise=noise,
                    seed=seed + 1).x[1000:]
    return train, test_clean, test


def run_case(backend: str, scenario: str, extra: list[str], starts: int, seed: int) -> dict:
    train, test_clean, test = trajectories(NOISE[scenario], seed)
    columns = [0] if scenario == "x_only" else [0, 1, 2]
    names = [("x", "y", "z")[c] for c in columns]
    data = Dataset.from_arrays(train[:, columns], dt=DT, variables=names)
    with OtherLoad() as load:
        started, cpu = time.perf_counter(), time.process_time()
        fitted = api.fit(data, backend, extra, seed=seed, device="cpu")
        fit_s, fit_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    model = fitted.model
    scale = train[:, columns].std(axis=0)
    points = np.linspace(model.history_length + 1, len(test) - HORIZON - 1, starts).astype(int)
    vpts = []
    for p in points:
        history = Trial(np.arange(p) * DT, test[:p, columns])
        with np.errstate(all="ignore"):
            forecast = model.simulate(history, HORIZON)
        vpts.append(valid_prediction_time(forecast, test_clean[p:p + HORIZON, columns], scale, DT)
                    * LYAPUNOV)
    # Geometry: a 50,000-step free run from the end of the training data against an
    # independent clean 50,000-step trajectory of the attractor, on the observed variables.
    reference = simulate("lorenz", n=FREE_RUN + 1000, x0=(-1.0, 3.0, 25.0)).x[1000:, columns]
    history = Trial(np.arange(len(train)) * DT, train[:, columns])
    with np.errstate(all="ignore"):
        free = model.simulate(history, FREE_RUN)
    return {"backend": backend, "scenario": scenario, "params": extra,
            "d_stsp": state_space_divergence(reference, free),
            "d_h": power_spectrum_distance(reference, free),
            "vpt_lyapunov_median": float(np.median(vpts)),
            "vpt_lyapunov": [round(float(v), 3) for v in vpts],
            "fit_s": round(fit_s, 1), "fit_cpu_s": round(fit_cpu_s, 1),
            "other_load_cores": load.cores,
            "metrics": {k: v for k, v in model.metrics_.items() if k != "symbolic_coding"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="cases as backend:scenario")
    parser.add_argument("-p", dest="params", action="append", default=[],
                        help="extra KEY=VALUE for every case")
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output",
                        default=str(Path(__file__).parent / "results" / "plrnn_lorenz.json"))
    args = parser.parse_args()
    chosen = [tuple(c.split(":")) for c in args.only] if args.only else list(CASES)
    results = []
    for backend, scenario in chosen:
        result = run_case(backend, scenario, CASES[(backend, scenario)] + args.params,
                          args.starts, args.seed)
        print(json.dumps(result), flush=True)
        results.append(result)
    Path(args.output).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
