"""Issue 15's stationary goal over drift draws: how the KL of a ``--sample`` free run spreads
over the drift function it draws, per data set, and whether the drift's posterior intervals
cover the truth's drift where the data are.

For each data seed (``gpsde_sing.py``'s double well, 3,000 samples; a gpsde fit with
max_iter=50, seed 0, saved under ``--models`` and reused when there):
- ``--draws`` ``--sample`` runs of ``--run`` steps, ``--seed`` 0, 1, ... (one drift function
  drawn from q(u) each), their KL to the truth's stationary law (the first 1,000 steps dropped);
- the posterior-mean drift's run (no function drawn) and the oracle (``gpsde_sing.oracle_kl``);
- coverage: the share of grid points inside the data's central 98 % where the 50 % / 90 %
  posterior intervals of the drift hold the truth's drift in latent units, read through the
  fitted read-out; beside it the same against the Euler-Maruyama drift the data's step
  actually realises (the one-step conditional mean's rate, (E[z_dt | z] - z) / dt, from the fine
  simulator), which is what a grid model of step dt can learn.

    python benchmarks/gpsde_draws.py [--seeds 103,...,111] [--draws 10] [--run 100000] [--jobs 2]
                                     [--models results/gpsde_models] [-o results/gpsde_draws.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from gpsde_sing import oracle_kl  # noqa: E402
from test_gpsde import DT, FINE, GAIN, OFFSET, SIGMA, double_well, histogram_kl  # noqa: E402

from dynid import api  # noqa: E402
from dynid.data.dataset import Dataset  # noqa: E402
from dynid.modelfile import describe_fit, load_model, save_model  # noqa: E402

FIT_SAMPLES = 3000
BURN_IN = 1000


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fitted(seed: int, models: Path):
    """The gpsde fit of data seed ``seed`` (from ``models`` when saved there), its CPU seconds
    (the file's fit_seconds holds them)."""
    z, y = double_well(FIT_SAMPLES, seed=seed)
    dataset = Dataset.from_arrays(y[:, None], dt=DT, variables=["y"])
    path = models / f"gpsde_{seed}.dynid"
    if path.exists():
        saved = load_model(str(path))
        return saved.model, dataset, z, saved.metadata["fit_seconds"]
    began = cpu_seconds()
    model = api.fit(dataset, "gpsde", ["max_iter=50"], seed=0, device="cpu").model
    spent = cpu_seconds() - began
    save_model(model, str(path), describe_fit(model, dataset, seed=0, device="cpu", fit_seconds=spent))
    return model, dataset, z, spent


def euler_drift(z: np.ndarray, seed: int = 0, paths: int = 4000) -> np.ndarray:
    """(E[z(dt) | z(0) = z] - z) / dt at states z (n,) under the fine simulator: the drift
    of the Euler-Maruyama model of step dt that matches the truth's one-step mean."""
    rng = np.random.default_rng(seed)
    h = DT / FINE
    x = np.repeat(z[:, None], paths, axis=1)
    for _ in range(FINE):
        x = x + h * (x - x**3) + SIGMA * np.sqrt(h) * rng.standard_normal(x.shape)
    return (x.mean(axis=1) - z) / DT


def coverage(model, z: np.ndarray) -> dict:
    """Interval coverage of the truth's drift (and the Euler-Maruyama one) on a grid over the
    data's central 98 %, in latent units: truth z = (C w + c - OFFSET) / GAIN for latent w,
    and the truth's drift read back as dw/dt = GAIN / C dz/dt."""
    from scipy.stats import norm

    readout = model.model_.readout
    c, offset = float(readout.c[0, 0]), float(readout.offset[0])
    low, high = np.quantile(z, [0.01, 0.99])
    truth_z = np.linspace(low, high, 200)
    latent = (GAIN * truth_z + OFFSET - offset) / c
    mean = model.field_.mean_at(latent[:, None])[:, 0]
    sd = model.field_.sd_at(latent[:, None])
    out = {}
    for name, drift in (("truth", truth_z - truth_z**3), ("euler", euler_drift(truth_z))):
        target = GAIN / c * drift
        score = np.abs(target - mean) / sd
        out[name] = {f"cover_{int(100 * level)}": float(np.mean(score <= norm.ppf(0.5 + level / 2)))
                     for level in (0.5, 0.9)}
        out[name]["worst_sds"] = float(score.max())
    return out


def stationary_laws(model, draws: int, seed: int = 0) -> dict:
    """KL to the truth of the continuous-time stationary law p(w) ~ exp(2 int f) (unit
    diffusion) of the posterior-mean drift and of ``draws`` drawn drift functions, read out
    with the fitted C, offset and noise into ``histogram_kl``'s bins (mass beyond them in the
    end bins): the runs' KL without their sampling noise or the Euler-Maruyama grid, for many
    draws at little cost. Also each draw's stationary mass beyond the inducing box (the data's
    range plus a margin, where the drift is the GP's prior about the trend; past it a draw is
    the trend alone)."""
    from scipy.stats import norm
    from test_gpsde import kl_edges, stationary_bins

    field, readout = model.field_, model.model_.readout
    inducing = model.model_.kernel.inducing[:, 0]
    width = inducing.max() - inducing.min()
    w = np.linspace(inducing.min() - width, inducing.max() + width, 4001)
    edges = kl_edges()
    truth = stationary_bins(edges)
    truth /= truth.sum()
    cdf = norm.cdf((edges[None, :] - (readout.c[0, 0] * w + readout.offset[0])[:, None]) / np.sqrt(readout.r[0]))
    cdf[:, 0], cdf[:, -1] = 0.0, 1.0  # the end bins hold the mass beyond them
    outside = (w < inducing.min()) | (w > inducing.max())

    def law(f: np.ndarray) -> tuple[float, float]:
        potential = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(w))])
        p = np.exp(2 * (potential - potential.max()))
        p /= p.sum()
        binned = p @ np.diff(cdf, axis=1)
        return float(np.sum(truth * np.log(truth / binned))), float(p[outside].sum())

    weights = field.sample_weights(np.random.default_rng(seed), draws)
    drawn = [law(field.drawn_at(w[:, None, None], weights[j:j + 1])[:, 0, 0]) for j in range(draws)]
    kl = np.array([k for k, _ in drawn])
    beyond = np.array([m for _, m in drawn])
    return {"kl_mean_drift": law(field.mean_at(w[:, None])[:, 0])[0], "draws": draws,
            "kl_median": float(np.median(kl)), "kl_90": float(np.quantile(kl, 0.9)), "kl_worst": float(kl.max()),
            "within_0.1": float(np.mean(kl <= 0.1)),
            "over_0.1_with_5pc_outside": float(np.mean((kl > 0.1) & (beyond > 0.05)) / max(np.mean(kl > 0.1), 1e-12))}


def sampled_runs(model, dataset: Dataset, seed: int, draws: int, run: int) -> dict:
    """The KL of ``draws`` ``--sample`` runs (--seed 0, 1, ...) and of the posterior-mean drift's."""
    began = cpu_seconds()
    kls = [histogram_kl(api.forecast(model, dataset, run, sample=True, seed=s).x[BURN_IN:, 0]) for s in range(draws)]
    sample_cpu = cpu_seconds() - began
    rng = np.random.default_rng(seed)
    field = model.field_
    latent = field.paths(np.zeros((1, 1)), field.weights[None], run, 1, DT, rng)[:, 0]
    return {"kl_draws": kls, "kl_median": float(np.median(kls)), "kl_worst": float(max(kls)),
            "draws_within_0.1": float(np.mean(np.array(kls) <= 0.1)),
            "kl_mean_drift": histogram_kl(model._observed(latent, rng)[BURN_IN:, 0]),
            "sample_cpu_s_each": sample_cpu / draws}


def one(seed: int, draws: int, run: int, models: str, laws: int) -> dict:
    import torch

    torch.set_num_threads(1)
    model, dataset, z, fit_cpu = fitted(seed, Path(models))
    row = {"seed": seed, "oracle_kl": oracle_kl(z), "coverage": coverage(model, z), "fit_cpu_s": fit_cpu,
           "kernel": [model.model_.kernel.variance, model.model_.kernel.lengthscale],
           "iterations": model.metrics_.get("iterations")}
    if laws:
        row["stationary_laws"] = stationary_laws(model, laws)
    if draws:
        row.update(sampled_runs(model, dataset, seed, draws, run))
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="103,104,105,106,107,108,109,110,111")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--run", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--laws", type=int, default=0,
                        help="also the stationary laws of this many drawn drifts (no runs when --draws 0)")
    parser.add_argument("--models", default=str(HERE / "results" / "gpsde_models"))
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "gpsde_draws.json"))
    args = parser.parse_args()
    from concurrent.futures import ProcessPoolExecutor

    Path(args.models).mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    wall = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, seeds, [args.draws] * len(seeds), [args.run] * len(seeds),
                             [args.models] * len(seeds), [args.laws] * len(seeds)))
    summary: dict[str, float] = {"wall_s": time.perf_counter() - wall}
    if args.draws:
        every = [kl for row in rows for kl in row["kl_draws"]]
        summary.update(median_of_medians=float(np.median([r["kl_median"] for r in rows])),
                       worst_median=max(r["kl_median"] for r in rows),
                       draws_within_0_1=float(np.mean(np.array(every) <= 0.1)), draws=len(every))
    if args.laws:
        summary["laws_within_0_1"] = float(np.mean([r["stationary_laws"]["within_0.1"] for r in rows]))
    print(json.dumps(summary))
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()},
              "args": vars(args), "rows": rows, "summary": summary}
    Path(args.output).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
