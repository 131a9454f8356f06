"""CPU time of ``lds`` with latent=auto: each candidate size's fit (seconds, EM iterations, held-out
score) and the whole default fit, on Lorenz-63 (``dynid simulate lorenz``) and on the true
4-latent / 8-observed LDS of tests/test_lds.py.

    python benchmarks/lds_latent_search.py --samples 400 --every-size   # all n = 1..8, as before
    python benchmarks/lds_latent_search.py --samples 400 4000           # the default fit

Prints one JSON line per (system, samples); --every-size fits every n at the default settings
(the search without its early stop) and reports each n's cost.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from dynid import api  # noqa: E402
from dynid.data.dataset import Dataset  # noqa: E402
from dynid.models.latent.lds import LDSParams, fit_discrete, held_out_split, held_out_score  # noqa: E402
from dynid.systems import simulate  # noqa: E402
from test_lds import simulate_lds, true_system  # noqa: E402


def lorenz(samples: int) -> Dataset:
    run = simulate("lorenz", n=samples, noise=0.01, seed=0)
    return Dataset.from_arrays(run.x, dt=float(run.t[1] - run.t[0]), variables=list(run.variables))


def lds4(samples: int) -> Dataset:
    _, y = simulate_lds(true_system(), samples, seed=2, missing=0.1)
    return Dataset.from_arrays(y, dt=0.1, variables=[f"y{i}" for i in range(y.shape[1])])


def every_size(data: Dataset) -> list[dict[str, float]]:
    """Each n = 1..max_latent fitted as latent=auto's candidates are: CPU s, iterations, score."""
    params = LDSParams()
    trials = list(data.trials)
    training, cuts = held_out_split(trials)
    rows = []
    for n in range(1, params.max_latent + 1):
        start = time.process_time()
        result = fit_discrete(training, n, params.max_iter, params.tol)
        rows.append({
            "n": n,
            "cpu_s": round(time.process_time() - start, 2),
            "iterations": len(result.history) - 1,
            "held_out": round(held_out_score(result.model, trials, cuts), 2),
        })
    return rows


def default_fit(data: Dataset) -> dict[str, object]:
    start = time.process_time()
    model = api.fit(data, "lds", {}, device="cpu").model
    return {
        "cpu_s": round(time.process_time() - start, 2),
        "latent": model.metrics_["latent"],
        "sizes_tried": sorted(int(n) for n in model.metrics_["held_out_log_likelihood"]),
        "em_iterations_final": model.metrics_["em_iterations"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[400, 4000])
    parser.add_argument("--systems", nargs="+", default=["lorenz", "lds4"])
    parser.add_argument("--every-size", action="store_true")
    args = parser.parse_args()
    for name in args.systems:
        for samples in args.samples:
            data = {"lorenz": lorenz, "lds4": lds4}[name](samples)
            found = every_size(data) if args.every_size else default_fit(data)
            print(json.dumps({"system": name, "samples": samples, "result": found}), flush=True)


if __name__ == "__main__":
    main()
