"""Dynamical-systems reconstruction of Lorenz-63 (issue 13's protocol): dynid's esn, ngrc, edm
and symbolic beside reservoirpy's ESN and pysindy, on the same data.

Conditions (training: 10,000 samples at dt 0.01 from the catalogue's start, seed 1 noise):
- ``clean``: the full state, noise-free;
- ``noisy``: the full state with 5 % observation noise (of each variable's sd);
- ``x-only``: x alone with 1 % noise, as a 3-D delay embedding (x_t, x_{t-10}, x_{t-20}).

Per model: fit seconds; D_stsp and D_H (dynid.metrics.dsr) of a 50,000-step free run from the
end of the training data against an independent clean 50,000-step trajectory (another start,
1,000 transient steps dropped), embedded the same way for x-only; the median VPT over
``--starts`` forecasts of ``--horizon`` steps from clean histories on that trajectory, in
Lyapunov times (x 0.9056). Results go to results/dsr_lorenz.json, one entry per (condition,
model), written as each finishes.

    python benchmarks/dsr_lorenz.py [--conditions noisy,x-only,clean] [--models ...]
        [--free-run 50000] [--starts 5] [--horizon 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.metrics.dsr import power_spectrum_distance, state_space_divergence
from dynid.metrics.forecast import valid_prediction_time
from dynid.systems import SYSTEMS, simulate

HERE = Path(__file__).resolve().parent
DT = 0.01
N_TRAIN = 10_000
LAMBDA = SYSTEMS["lorenz"].lyapunov[0]
DELAY = 10  # samples between delay coordinates for x-only (0.1 time units)
TRANSIENT = 1000

# One-step runner of a fitted external model: (history (n, d), steps) -> (steps, d).
Runner = Callable[[np.ndarray, int], np.ndarray]


@dataclass
class Condition:
    name: str
    train: np.ndarray  # (n, d)
    reference: np.ndarray  # (50000, d) clean, independent
    variables: list[str]


def delay_embed(x: np.ndarray) -> np.ndarray:
    """(n, 1) -> (n - 2 DELAY, 3): x_t, x_{t-DELAY}, x_{t-2 DELAY}."""
    n = len(x) - 2 * DELAY
    return np.hstack([x[2 * DELAY :], x[DELAY : DELAY + n], x[:n]])


def conditions(free_run: int, names: list[str]) -> list[Condition]:
    reference = simulate("lorenz", n=free_run + TRANSIENT + 2 * DELAY, dt=DT,
                         x0=[1.0, 1.0, 1.0]).x[TRANSIENT:]
    out = []
    for name in names:
        if name == "clean":
            train = simulate("lorenz", n=N_TRAIN, dt=DT).x
            out.append(Condition(name, train, reference[:free_run], ["x", "y", "z"]))
        elif name == "noisy":
            train = simulate("lorenz", n=N_TRAIN, dt=DT, noise=0.05, seed=1).x
            out.append(Condition(name, train, reference[:free_run], ["x", "y", "z"]))
        elif name == "x-only":
            x = simulate("lorenz", n=N_TRAIN + 2 * DELAY, dt=DT, noise=0.01, seed=1).x[:, :1]
            out.append(Condition(name, delay_embed(x), delay_embed(reference[:, :1])[:free_run],
                                 ["x0", "x1", "x2"]))
    return out


def dynid_model(backend: str, params: list[str]) -> Callable[[Condition], tuple[Runner, int]]:
    def fit(condition: Condition) -> tuple[Runner, int]:
        data = Dataset.from_arrays(condition.train, t=DT * np.arange(len(condition.train)),
                                   variables=condition.variables)
        model = api.fit(data, backend, params, seed=0).model

        def run(history: np.ndarray, steps: int) -> np.ndarray:
            trial = Trial(DT * np.arange(len(history)), history)
            states, _ = api.rollout(model, trial, steps)
            return states

        return run, model.history_length

    return fit


def reservoirpy_esn(condition: Condition) -> tuple[Runner, int]:
    """reservoirpy's ESN as in its Lorenz tutorial: 300 units, leak 0.3, spectral radius 1.25,
    ridge 1e-6, on standardised states, trained to predict the next state."""
    from reservoirpy.nodes import Reservoir, Ridge

    mean, scale = condition.train.mean(axis=0), condition.train.std(axis=0)
    z = (condition.train - mean) / scale
    esn = Reservoir(300, lr=0.3, sr=1.25, seed=0) >> Ridge(ridge=1e-6)
    esn.fit(z[:-1], z[1:], warmup=100)
    warmup = 100

    def run(history: np.ndarray, steps: int) -> np.ndarray:
        esn.reset()
        h = (history[-warmup:] - mean) / scale
        x = esn.run(h)[-1]  # the prediction of the sample after the history
        out = np.full((steps, z.shape[1]), np.nan)
        for k in range(steps):
            if not np.all(np.isfinite(x)):
                break
            out[k] = x
            x = esn.step(x)
        return out * scale + mean

    return run, warmup


def pysindy_model(condition: Condition) -> tuple[Runner, int]:
    """pysindy's defaults: polynomial degree 2, STLSQ threshold 0.1, finite differences. Its
    equations are integrated here (DOP853, rtol 1e-8) from its coefficients and feature names:
    ``SINDy.simulate`` calls scikit-learn per right-hand-side evaluation (215 s for 2,000 steps
    under this machine's load), which would measure pysindy's plumbing, not its model."""
    import pysindy as ps
    from scipy.integrate import solve_ivp

    model = ps.SINDy(feature_library=ps.PolynomialLibrary(degree=2),
                     optimizer=ps.STLSQ(threshold=0.1))
    model.fit(condition.train, t=DT)
    coefficients = model.coefficients()  # (d, features)
    powers = np.array([_powers(name, condition.train.shape[1])
                       for name in model.get_feature_names()])  # (features, d)

    def rhs(t: float, x: np.ndarray) -> np.ndarray:
        return coefficients @ np.prod(x[None, :] ** powers, axis=1)

    def run(history: np.ndarray, steps: int) -> np.ndarray:
        out = np.full((steps, history.shape[1]), np.nan)
        solution = solve_ivp(rhs, (0.0, steps * DT), history[-1], method="DOP853",
                             t_eval=DT * np.arange(1, steps + 1), rtol=1e-8, atol=1e-10,
                             events=_escaped)
        out[: solution.y.shape[1]] = solution.y.T
        return out

    return run, 1


def _escaped(t: float, x: np.ndarray) -> float:
    return 1e4 - float(np.max(np.abs(x)))


_escaped.terminal = True  # type: ignore[attr-defined]


def _powers(name: str, d: int) -> list[int]:
    """Exponents of x0..x{d-1} in a pysindy polynomial feature name ('1', 'x0', 'x0 x1', 'x2^2')."""
    exponents = [0] * d
    for token in name.split():
        if token == "1":
            continue
        base, _, power = token.partition("^")
        exponents[int(base[1:])] += int(power or 1)
    return exponents


MODELS: dict[str, Callable[[Condition], tuple[Runner, int]]] = {
    "esn": dynid_model("esn", []),
    "ngrc": dynid_model("ngrc", []),
    "edm": dynid_model("edm", ["method=simplex"]),
    "symbolic": dynid_model("symbolic", []),
    "reservoirpy-esn": reservoirpy_esn,
    "pysindy": pysindy_model,
}


def evaluate(condition: Condition, name: str, free_run: int, starts: int, horizon: int) -> dict:
    started = time.perf_counter()
    run, window = MODELS[name](condition)
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    free = run(condition.train[-max(window, 1):], free_run)
    run_seconds = time.perf_counter() - started
    finite = bool(np.all(np.isfinite(free)))
    reference = condition.reference
    scale = reference.std(axis=0)
    picks = np.linspace(max(window, 1), len(reference) - horizon - 1, starts).astype(int)
    vpts = []
    for s in picks:
        predicted = run(reference[s - max(window, 1) : s], horizon)
        vpts.append(valid_prediction_time(predicted, reference[s : s + horizon], scale, DT))
    vpt = np.array(vpts) * LAMBDA
    return {
        "condition": condition.name,
        "model": name,
        "fit_seconds": round(fit_seconds, 2),
        "free_run_seconds": round(run_seconds, 2),
        "d_stsp": state_space_divergence(reference, free) if finite else None,
        "d_h": power_spectrum_distance(reference, free) if finite else None,
        "free_run_finite": finite,
        "vpt_lyapunov_median": float(np.median(vpt)),
        "vpt_lyapunov": vpt.round(3).tolist(),
        "vpt_censored_at": horizon * DT * LAMBDA,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", default="noisy,x-only,clean")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--free-run", type=int, default=50_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "dsr_lorenz.json"))
    args = parser.parse_args()
    output = Path(args.output)
    results = json.loads(output.read_text())["results"] if output.exists() else []
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(),
               "load_average": os.getloadavg()}
    for condition in conditions(args.free_run, args.conditions.split(",")):
        second = _independent(condition)
        floor = {
            "condition": condition.name, "model": "clean trajectory (floor)",
            "d_stsp": state_space_divergence(condition.reference, second),
            "d_h": power_spectrum_distance(condition.reference, second),
        }
        results = [r for r in results if (r["condition"], r["model"]) != (condition.name, floor["model"])]
        results.append(floor)
        print(json.dumps(floor), flush=True)
        for name in args.models.split(","):
            try:
                row = evaluate(condition, name, args.free_run, args.starts, args.horizon)
            except Exception as exc:  # noqa: BLE001 - record the failure, keep benchmarking
                row = {"condition": condition.name, "model": name, "error": repr(exc)[:300]}
            row["load_average"] = os.getloadavg()
            results = [r for r in results if (r["condition"], r["model"]) != (condition.name, name)]
            results.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "vpt_lyapunov"}), flush=True)
            output.write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")


def _independent(condition: Condition) -> np.ndarray:
    """A second clean trajectory of the same length from a third start: the floor."""
    n = len(condition.reference)
    x = simulate("lorenz", n=n + TRANSIENT + 2 * DELAY, dt=DT, x0=[-3.0, 5.0, 20.0]).x[TRANSIENT:]
    return delay_embed(x[:, :1])[:n] if condition.name == "x-only" else x[:n]


if __name__ == "__main__":
    main()
