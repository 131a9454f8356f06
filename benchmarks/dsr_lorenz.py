"""Dynamical-systems reconstruction of Lorenz-63 (issue 13's protocol): dynid's esn, ngrc, edm
and symbolic beside reservoirpy's ESN and pysindy, on the same data.

Conditions (training: 10,000 samples at dt 0.01; data seed s takes samples
[(s - 1) 10,000, s 10,000) of the catalogue's trajectory with observation-noise seed s):
- ``clean``: the full state, noise-free;
- ``noisy``: the full state with 5 % observation noise (of each variable's sd);
- ``x-only``: x alone with 1 % noise, as a 3-D delay embedding (x_t, x_{t-10}, x_{t-20});
- ``x-raw``: the same record of x, fitted as one variable; each free run of x is embedded the
  same way before it is measured (forecasts and their VPT are of x).

Per model and data seed: fit seconds; D_stsp and D_H (dynid.metrics.dsr) of a 50,000-step free
run from the end of the training data against each of ``len(REFERENCE_STARTS)`` independent
clean 50,000-step trajectories (1,000 transient steps dropped; embedded the same way for
x-only and x-raw), and their median; with ``--run-starts N`` also from N - 1 earlier ends of
the training data (each run another realisation of the model's attractor), the row's figure
being the median over the N runs (N = 1: the training data's end only); the median VPT over
``--starts`` forecasts of ``--horizon`` steps from clean histories on the first reference, in
Lyapunov times (x 0.9056).

Why several references: the measures of two independent clean 50,000-step runs scatter widely
(D_stsp 0.05-0.65 and D_H 0.036-0.087 over the 30 ordered pairs of six starts: the histogram's
sparse outer cells and the slow switching between the wings), so one pair says little. The floor
row is the median (and range) over all ordered pairs of references, and a model's figure is its
median over references, then over data seeds.

Results go to results/dsr_lorenz.json, one entry per (condition, seed, model), written as each
finishes; ``summary`` holds the medians over seeds.

    python benchmarks/dsr_lorenz.py [--conditions noisy,x-only,clean] [--models ...]
        [--seeds 1,2] [--free-run 50000] [--run-starts 1] [--starts 5] [--horizon 2000]
        [-p esn:draws=6 ...] [--model-seed 0]
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


# Starts of the independent clean reference trajectories (none is the training start).
REFERENCE_STARTS = ((1.0, 1.0, 1.0), (-3.0, 5.0, 20.0), (-8.0, 8.0, 27.0))


@dataclass
class Condition:
    name: str
    seed: int  # data seed: which stretch of the trajectory, which noise
    train: np.ndarray  # (n, d)
    references: list[np.ndarray]  # each (free_run, D), clean, independent, as measured
    variables: list[str]
    # x-raw only: forecasts are scored on x itself (this clean (T, 1) trajectory), and a
    # model's runs of x are embedded before they are measured.
    forecast_reference: np.ndarray | None = None

    def measured(self, run: Runner, history: np.ndarray, steps: int) -> np.ndarray:
        """A free run of ``steps`` samples (steps, D) as the references are: embedded for
        x-raw."""
        if self.forecast_reference is None:
            return run(history, steps)
        return delay_embed(run(history, steps + 2 * DELAY))


def delay_embed(x: np.ndarray) -> np.ndarray:
    """(n, 1) -> (n - 2 DELAY, 3): x_t, x_{t-DELAY}, x_{t-2 DELAY}."""
    n = len(x) - 2 * DELAY
    return np.hstack([x[2 * DELAY :], x[DELAY : DELAY + n], x[:n]])


def clean_references(free_run: int) -> list[np.ndarray]:
    """One clean (free_run + 2 DELAY, 3) trajectory per REFERENCE_STARTS, transient dropped."""
    return [simulate("lorenz", n=free_run + TRANSIENT + 2 * DELAY, dt=DT, x0=list(start)).x[
        TRANSIENT:] for start in REFERENCE_STARTS]


def training_record(seed: int, noise: float, extra: int) -> np.ndarray:
    """Samples [(seed - 1) N_TRAIN, seed N_TRAIN + extra) of the catalogue's trajectory with
    observation noise ``noise`` drawn from ``seed`` (seed 1: the first record, as before)."""
    x = simulate("lorenz", n=seed * N_TRAIN + extra, dt=DT, noise=noise, seed=seed).x
    return x[-(N_TRAIN + extra):]


def conditions(
    references: list[np.ndarray], free_run: int, names: list[str], seeds: list[int]
) -> list[Condition]:
    full = [r[:free_run] for r in references]
    embedded = [delay_embed(r[:, :1])[:free_run] for r in references]
    out = []
    for seed in seeds:
        for name in names:
            if name in ("clean", "noisy"):
                train = training_record(seed, 0.0 if name == "clean" else 0.05, 0)
                out.append(Condition(name, seed, train, full, ["x", "y", "z"]))
            elif name == "x-only":
                x = training_record(seed, 0.01, 2 * DELAY)[:, :1]
                out.append(Condition(name, seed, delay_embed(x), embedded, ["x0", "x1", "x2"]))
            elif name == "x-raw":
                x = training_record(seed, 0.01, 2 * DELAY)[:, :1]
                out.append(Condition(name, seed, x, embedded, ["x"],
                                     forecast_reference=references[0][:, :1]))
    return out


def floor(condition: Condition) -> dict:
    """D_stsp and D_H of every ordered pair of distinct references: the clean-vs-clean floor."""
    pairs = [(a, b) for a in condition.references for b in condition.references if a is not b]
    stsp = [state_space_divergence(a, b) for a, b in pairs]
    spectra = [power_spectrum_distance(a, b) for a, b in pairs]
    return {
        "condition": condition.name, "model": "clean trajectory (floor)",
        "d_stsp": float(np.median(stsp)), "d_h": float(np.median(spectra)),
        "d_stsp_pairs": np.round(stsp, 4).tolist(), "d_h_pairs": np.round(spectra, 4).tolist(),
    }


def dynid_model(
    backend: str, params: list[str], model_seed: int = 0
) -> Callable[[Condition], tuple[Runner, int]]:
    """A dynid backend fitted with ``params`` and ``seed=model_seed`` (the esn's reservoir draw)."""
    def fit(condition: Condition) -> tuple[Runner, int]:
        data = Dataset.from_arrays(condition.train, t=DT * np.arange(len(condition.train)),
                                   variables=condition.variables)
        model = api.fit(data, backend, params, seed=model_seed).model

        def run(history: np.ndarray, steps: int) -> np.ndarray:
            trial = Trial(DT * np.arange(len(history)), history)
            states, _ = api.rollout(model, trial, steps)
            return states

        run.metrics = model.metrics_  # type: ignore[attr-defined]
        return run, model.history_length

    fit.params = list(params)  # type: ignore[attr-defined]
    fit.backend = backend  # type: ignore[attr-defined]
    fit.model_seed = model_seed  # type: ignore[attr-defined]
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


# A dynid fit's metrics recorded beside its figures: what it chose among its candidates.
CHOICE_METRICS = ("draw", "spectral_radius", "leak", "input_scaling", "delays", "skip", "ridge",
                  "lmnt", "lmnt_skill_steps",
                  "setting_free_run_geometry")


def history_ends(length: int, count: int) -> list[int]:
    """Ends of the training histories that free runs continue: the data's end, then count - 1
    earlier ends spread over the data's second half."""
    return [length - (k * length) // (2 * count) for k in range(count)]


def geometry(condition: Condition, free: np.ndarray) -> tuple[list[float], list[float]]:
    """D_stsp and D_H of one free run against each reference (empty for a diverged run)."""
    if not np.all(np.isfinite(free)):
        return [], []
    return ([state_space_divergence(r, free) for r in condition.references],
            [power_spectrum_distance(r, free) for r in condition.references])


def evaluate(condition: Condition, name: str, free_run: int, starts: int, horizon: int,
             run_starts: int = 1) -> dict:
    started, cpu_started = time.perf_counter(), time.process_time()
    run, window = MODELS[name](condition)
    fit_seconds = time.perf_counter() - started
    fit_cpu_seconds = time.process_time() - cpu_started
    window = max(window, 1)
    started = time.perf_counter()
    frees = [condition.measured(run, condition.train[end - window : end], free_run)
             for end in history_ends(len(condition.train), run_starts)]
    run_seconds = (time.perf_counter() - started) / run_starts
    measures = [geometry(condition, free) for free in frees]
    # A diverged run counts as the measures' own values for it (as in ``summary``).
    per_run_stsp = [float(np.median(st)) if st else float("inf") for st, _ in measures]
    per_run_h = [float(np.median(h)) if h else 1.0 for _, h in measures]
    d_stsp = float(np.median(per_run_stsp))
    stsp, spectra = measures[0]  # the run from the data's end: the protocol's single run
    finite = bool(stsp)
    reference = (condition.forecast_reference if condition.forecast_reference is not None
                 else condition.references[0])
    scale = reference.std(axis=0)
    picks = np.linspace(window, len(reference) - horizon - 1, starts).astype(int)
    vpts = []
    for s in picks:
        predicted = run(reference[s - window : s], horizon)
        vpts.append(valid_prediction_time(predicted, reference[s : s + horizon], scale, DT))
    vpt = np.array(vpts) * LAMBDA
    return {
        "condition": condition.name,
        "seed": condition.seed,
        "model": name,
        "params": getattr(MODELS[name], "params", []),
        "model_seed": getattr(MODELS[name], "model_seed", None),
        "fit_seconds": round(fit_seconds, 2),
        "fit_cpu_seconds": round(fit_cpu_seconds, 2),
        "free_run_seconds": round(run_seconds, 2),
        "d_stsp": d_stsp if np.isfinite(d_stsp) else None,
        "d_h": float(np.median(per_run_h)) if np.isfinite(d_stsp) else None,
        "d_stsp_runs": np.round(per_run_stsp, 4).tolist(),
        "d_h_runs": np.round(per_run_h, 4).tolist(),
        "d_stsp_references": np.round(stsp, 4).tolist(),
        "d_h_references": np.round(spectra, 4).tolist(),
        "free_run_finite": finite,
        "vpt_lyapunov_median": float(np.median(vpt)),
        "vpt_lyapunov": vpt.round(3).tolist(),
        "vpt_censored_at": horizon * DT * LAMBDA,
        # What the fit chose, where it says (the esn's draw and setting, the ngrc's lags).
        "chosen": {key: value for key, value in getattr(run, "metrics", {}).items()
                   if key in CHOICE_METRICS},
    }


def summary(results: list[dict]) -> list[dict]:
    """Per (condition, model): the medians over data seeds of D_stsp, D_H and VPT (a diverged
    free run counts as infinite D_stsp and D_H 1, the measures' own values for it)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in results:
        if "seed" in row and "error" not in row:
            groups.setdefault((row["condition"], row["model"]), []).append(row)
    out = []
    for (condition, model), rows in groups.items():
        def median(key: str, diverged: float) -> float:
            return float(np.median([diverged if r[key] is None else r[key] for r in rows]))

        out.append({"condition": condition, "model": model,
                    "seeds": sorted(r["seed"] for r in rows),
                    "d_stsp": median("d_stsp", float("inf")), "d_h": median("d_h", 1.0),
                    "vpt_lyapunov_median": median("vpt_lyapunov_median", 0.0),
                    "fit_seconds": median("fit_seconds", 0.0)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", default="noisy,x-only,clean")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seeds", default="1,2", help="data seeds, comma-separated")
    parser.add_argument("--free-run", type=int, default=50_000)
    parser.add_argument("--run-starts", type=int, default=1,
                        help="free runs per model, from this many training-history ends")
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("-p", "--param", action="append", default=[], metavar="MODEL:KEY=VALUE",
                        help="a hyperparameter of one of dynid's models (repeatable), e.g. "
                             "esn:draws=6")
    parser.add_argument("--model-seed", type=int, default=0,
                        help="the seed of dynid's fits (the esn's reservoir draw); the spread "
                             "over seeds is the spread over random reservoirs")
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "dsr_lorenz.json"))
    args = parser.parse_args()
    for model, setting in (item.split(":", 1) for item in args.param):
        MODELS[model] = dynid_model(model, [*MODELS[model].params, setting])  # type: ignore[attr-defined]
    for name, fit in MODELS.items():
        if hasattr(fit, "backend"):
            MODELS[name] = dynid_model(fit.backend, fit.params, args.model_seed)  # type: ignore[attr-defined]
    output = Path(args.output)
    results = json.loads(output.read_text())["results"] if output.exists() else []
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(),
               "load_average": os.getloadavg()}
    names = args.conditions.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = conditions(clean_references(args.free_run), args.free_run, names, seeds)

    def key(row: dict) -> tuple:
        return row["condition"], row.get("seed"), row["model"]

    def record(row: dict) -> None:
        nonlocal results
        results = [r for r in results if key(r) != key(row)] + [row]
        print(json.dumps({k: v for k, v in row.items() if not k.endswith(("pairs", "lyapunov"))}),
              flush=True)
        output.write_text(json.dumps({"machine": machine, "summary": summary(results),
                                      "results": results}, indent=1) + "\n")

    for condition in {c.name: c for c in runs}.values():  # one floor per condition
        record(floor(condition))
    for condition in runs:
        for name in args.models.split(","):
            try:
                row = evaluate(condition, name, args.free_run, args.starts, args.horizon,
                               args.run_starts)
            except Exception as exc:  # noqa: BLE001 - record the failure, keep benchmarking
                row = {"condition": condition.name, "seed": condition.seed, "model": name,
                       "error": repr(exc)[:300]}
            row["load_average"] = os.getloadavg()
            record(row)


if __name__ == "__main__":
    main()
