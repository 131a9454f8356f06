"""``--method sindy`` on Lorenz-96 and a sparse VAR(3) (the data of causal_lorenz96.py), and its
cost on 10 variables x 1,000 samples (issue 16, item 5: under 30 s on 2 cores with defaults).

    PYTHONPATH=. python benchmarks/causal_sindy.py            # ~5 min on 2 shared cores

Per dataset: off-diagonal AUROC / AUPRC of ``discover(data, "sindy", seed=0)`` (defaults;
``dt`` the data's 0.05), the libraries chosen, wall and CPU seconds of the call (BLAS at one
thread, as the method sets it). On a shared machine the CPU seconds are what an idle one would
take as wall time: the method runs on one core. The CausalDynamics graphs are scored by
causal_causaldynamics.py (``--only dynid-sindy``). Writes benchmarks/results/causal_sindy.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "causal_sindy.json"
# (label, system, N, F, T, seeds): Tank et al.'s Lorenz-96 settings of causal_lorenz96.py, and
# its VAR(3) (stochastic: the method is not meant for it; reported to show so).
DATASETS = [
    ("L96 N=10 F=10 T=1000", "lorenz96", 10, 10.0, 1000, (0, 1, 2)),
    ("L96 N=10 F=40 T=1000", "lorenz96", 10, 40.0, 1000, (0,)),
    ("L96 N=20 F=10 T=1000", "lorenz96", 20, 10.0, 1000, (0,)),
    ("VAR(3) N=10 T=1000", "var3", 10, None, 1000, (0,)),
]


def main() -> int:
    sys.path.insert(0, str(HERE))
    import causal_lorenz96 as l96
    import dynid
    from dynid.causal import discover

    result = {"machine": l96.machine_info(), "runs": []}
    for label, system, n_vars, forcing, n_samples, seeds in DATASETS:
        for seed in seeds:
            if system == "lorenz96":
                x, truth = l96.lorenz96(n_vars, forcing, n_samples, seed)
            else:
                x, truth = l96.sparse_var3(n_vars, n_samples, seed)
            data = dynid.Dataset.from_arrays(x, dt=l96.DT)
            wall, cpu = time.perf_counter(), time.process_time()
            graph = discover(data, "sindy", seed=0)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            score = np.asarray(graph.score_matrix)
            run = {"data": label, "seed": seed, "auroc": round(l96._auroc(score, truth), 4),
                   "auprc": round(l96._auprc(score, truth), 4),
                   "exact": bool(np.array_equal(np.asarray(graph.adjacency), truth)),
                   "libraries": sorted(set(graph.extra["libraries"])),
                   "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                   "loadavg": list(os.getloadavg())}
            result["runs"].append(run)
            print(json.dumps(run), file=sys.stderr, flush=True)
    result["machine"]["loadavg_end"] = list(os.getloadavg())
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
