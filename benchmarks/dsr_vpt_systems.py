"""Valid prediction time of dynid models on the catalogue's chaotic flows (issue 13's goal:
median VPT >= 8 Lyapunov times across noise-free systems with 10k samples, >= 12 on Lorenz-63).

Per system (every catalogue system with a positive largest Lyapunov exponent): 10,000 clean
samples at the system's default dt from its default start; the model is fitted on them; VPT
(normalised error threshold 0.4, dynid.metrics.forecast) over ``--starts`` forecasts from clean
histories on an independent trajectory (another start, a transient of ``TRANSIENT_LT``
Lyapunov times dropped), in Lyapunov times, censored at ``--horizon-lt``. Results go to
results/dsr_vpt_systems.json as each finishes; a table goes to stdout.

    python benchmarks/dsr_vpt_systems.py [--models symbolic,ngrc] [--systems lorenz,chen]
        [--starts 9] [--horizon-lt 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.metrics.forecast import valid_prediction_time
from dynid.systems import SYSTEMS, simulate

HERE = Path(__file__).resolve().parent
N_TRAIN = 10_000
TRANSIENT_LT = 20  # Lyapunov times dropped from the independent trajectory's start


def chaotic_systems() -> list[str]:
    return [name for name, spec in SYSTEMS.items()
            if spec.kind == "ode" and spec.lyapunov and spec.lyapunov[0] > 0]


def evaluate(system: str, model_name: str, starts: int, horizon_lt: float) -> dict:
    spec = SYSTEMS[system]
    lam, dt = spec.lyapunov[0], spec.dt
    train = simulate(system, n=N_TRAIN).x
    data = Dataset.from_arrays(train, t=dt * np.arange(N_TRAIN), variables=list(spec.variables))
    started = time.perf_counter()
    model = api.fit(data, model_name, [], seed=0).model
    fit_seconds = time.perf_counter() - started
    horizon = int(np.ceil(horizon_lt / (lam * dt)))
    transient = int(np.ceil(TRANSIENT_LT / (lam * dt)))
    window = max(model.history_length, 1)
    x0 = np.asarray(spec.x0) + 0.1 * np.std(train, axis=0)
    reference = simulate(system, n=transient + window + horizon * starts, x0=x0).x[transient:]
    scale = reference.std(axis=0)
    vpts = []
    for k in range(starts):
        s = window + k * horizon
        trial = Trial(dt * np.arange(window), reference[s - window : s])
        predicted, _ = api.rollout(model, trial, horizon)
        vpts.append(valid_prediction_time(predicted, reference[s : s + horizon], scale, dt) * lam)
    return {"system": system, "model": model_name, "fit_seconds": round(fit_seconds, 2),
            "vpt_lyapunov_median": float(np.median(vpts)), "vpt_lyapunov": np.round(vpts, 3).tolist(),
            "censored_at": horizon * dt * lam, "load_average": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="symbolic,ngrc")
    parser.add_argument("--systems", default=",".join(chaotic_systems()))
    parser.add_argument("--starts", type=int, default=9)
    parser.add_argument("--horizon-lt", type=float, default=20.0)
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "dsr_vpt_systems.json"))
    args = parser.parse_args()
    output = Path(args.output)
    results = json.loads(output.read_text())["results"] if output.exists() else []
    machine = {"platform": platform.platform(), "cpus": os.cpu_count()}
    for system in args.systems.split(","):
        for name in args.models.split(","):
            try:
                row = evaluate(system, name, args.starts, args.horizon_lt)
            except Exception as exc:  # noqa: BLE001 - record the failure, keep benchmarking
                row = {"system": system, "model": name, "error": repr(exc)[:300]}
            results = [r for r in results if (r["system"], r["model"]) != (system, name)] + [row]
            output.parent.mkdir(exist_ok=True)
            output.write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")
            print(json.dumps(row), flush=True)
    best: dict[str, float] = {}
    for row in results:
        if "vpt_lyapunov_median" in row:
            best[row["system"]] = max(best.get(row["system"], 0.0), row["vpt_lyapunov_median"])
    for system, vpt in best.items():
        print(f"{system:14s} best median VPT {vpt:6.2f} Lyapunov times")
    if best:
        print(f"median over systems: {np.median(list(best.values())):.2f}")


if __name__ == "__main__":
    main()
