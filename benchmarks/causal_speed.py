"""Every ``--method`` with its defaults on 10 variables x 1,000 samples: wall time and answers.

    python benchmarks/causal_speed.py                       # every method, writes results/causal_speed.json
    python benchmarks/causal_speed.py --methods te,ccm      # some methods
    python benchmarks/causal_speed.py --reference OLD.json  # also compare the links with an earlier run

Data: Lorenz-96, N = 10, F = 10, T = 1000, dt = 0.05 after a burn-in (``causal_lorenz96.lorenz96``,
seed 0); truth x_{i-2}, x_{i-1}, x_{i+1} -> x_i. Each method runs once through
``dynid.causal.discover`` with its default -p options, ``--max-lag`` 5, ``--alpha`` 0.05, BH,
seed 0, BLAS and torch at 2 threads (the goal is "on 2 cores"). Recorded per method: wall
seconds and CPU seconds of this process and its worker processes (on a machine shared with other jobs, CPU seconds of a
single-threaded method are what an idle machine's wall time would be), off-diagonal AUROC / AUPRC of its ``score_matrix``, and its significant links
(source, target, lag); for te and ccm the null samples drawn and the worker processes. With ``--reference`` the links are compared with an earlier run (e.g. of
the code before a speed-up): the "same answers" check. Goal (issue 16): every method < 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

import numpy as np

from causal_lorenz96 import _auprc, _auroc, limit_threads, lorenz96, machine_info

from dynid.causal import discover, registry

HERE = Path(__file__).resolve().parent
GOAL_SECONDS = 30.0
MAX_LAG = 5


def run(methods: list[str], threads: int) -> dict:
    limit_threads(threads)
    x, truth = lorenz96(10, 10.0, 1000, 0)
    from dynid.data.dataset import Dataset

    data = Dataset.from_arrays(x, dt=0.05)
    discover(data, "granger", max_lag=1)  # imports and first-call costs, untimed
    out = {"machine": machine_info(), "threads": threads, "goal_seconds": GOAL_SECONDS,
           "methods": {}}
    for name in methods:
        if registry.get(name).trains:
            import torch

            torch.set_num_threads(threads)
        start, cpu_start = time.perf_counter(), cpu_seconds()
        graph = discover(data, name, max_lag=MAX_LAG, alpha=0.05, seed=0)
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
        links = sorted([e.source, e.target, e.lag] for e in graph.significant_edges)
        out["methods"][name] = {
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "auroc": round(_auroc(graph.score_matrix, truth), 4),
            "auprc": round(_auprc(graph.score_matrix, truth), 4),
            "n_links": len(links),
            "links": links,
        }
        for key in ("permutations_done", "null_samples_done"):  # te, ccm: their null samples
            if key in graph.extra:
                out["methods"][name]["null_samples"] = int(np.sum(graph.extra[key]))
        if "normal_null" in graph.extra:  # te: tests settled by the fitted normal null
            out["methods"][name]["normal_null_tests"] = int(np.sum(graph.extra["normal_null"]))
        if "workers" in graph.extra:
            out["methods"][name]["workers"] = graph.extra["workers"]
        print(f"{name:>10}: {seconds:7.1f} s wall, {cpu:7.1f} s CPU  AUROC {out['methods'][name]['auroc']:.3f}  "
              f"{len(links)} links", flush=True)
    out["machine"]["loadavg_end"] = list(os.getloadavg())
    return out


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished worker processes (te, ccm)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def compare(now: dict, reference: dict) -> None:
    for name, result in now["methods"].items():
        before = reference["methods"].get(name)
        if before is None:
            continue
        same = result["links"] == before["links"]
        print(f"{name:>10}: {before['seconds']:7.1f} s -> {result['seconds']:7.1f} s, "
              f"links {'the same' if same else 'DIFFER'} "
              f"(AUROC {before['auroc']:.3f} -> {result['auroc']:.3f})")
        result["reference_seconds"] = before["seconds"]
        result["same_links_as_reference"] = same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(registry.names()))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "causal_speed.json")
    args = parser.parse_args()
    result = run(args.methods.split(","), args.threads)
    if args.reference:
        compare(result, json.loads(args.reference.read_text()))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
