"""plrnn and alrnn on Lorenz-63 with issue 13's 50,000-step protocol (``dsr_lorenz.py``'s).

The data, references and measures are ``dsr_lorenz.py``'s, reused, not copied: per condition
(``clean`` full state; ``noisy``, full state with 5 % observation noise; ``x-only``, x with 1 %
noise as the 3-D delay embedding x_t, x_{t-10}, x_{t-20}) and data seed, one fit on 10,000
samples at dt 0.01, then D_stsp and D_H of a 50,000-step free run from the end of the training
data against each of three independent clean 50,000-step trajectories (median over them), and
the median VPT (Lyapunov times) of ``--starts`` forecasts from clean histories.

Fit time: the CPU seconds of ``api.fit`` (torch on one thread, so the CPU time is the time the
fit takes on an idle core), with its wall time and the machine's other load beside it
(``timing.OtherLoad``: cores busy with other work). Results go to results/plrnn_lorenz.json.

    python benchmarks/plrnn_lorenz.py                       # plrnn, all conditions, seed 1
    python benchmarks/plrnn_lorenz.py --models alrnn --conditions clean -p epochs=20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import dsr_lorenz
from dsr_lorenz import Condition, Runner, clean_references, conditions, dynid_model, evaluate
from timing import OtherLoad

HERE = Path(__file__).resolve().parent


def timed(backend: str, params: list[str], record: dict) -> Callable[[Condition],
                                                                     tuple[Runner, int]]:
    """``dsr_lorenz.dynid_model``'s fit, its CPU and wall seconds and the other load kept in
    ``record``."""
    fit = dynid_model(backend, params)

    def timed_fit(condition: Condition) -> tuple[Runner, int]:
        with OtherLoad() as load:
            started, cpu = time.perf_counter(), time.process_time()
            fitted = fit(condition)
            record.update(fit_cpu_s=round(time.process_time() - cpu, 1),
                          fit_wall_s=round(time.perf_counter() - started, 1),
                          other_load_cores=load.cores)
        return fitted

    return timed_fit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", default="clean,noisy,x-only")
    parser.add_argument("--models", default="plrnn")
    parser.add_argument("--seeds", default="1", help="data seeds, comma-separated")
    parser.add_argument("-p", dest="params", action="append", default=[],
                        help="extra KEY=VALUE for every fit")
    parser.add_argument("--free-run", type=int, default=50_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "plrnn_lorenz.json"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = conditions(clean_references(args.free_run), args.free_run,
                      args.conditions.split(","), seeds)
    machine = {"platform": platform.platform(), "cpus": os.cpu_count()}
    results = []
    for condition in runs:
        for backend in args.models.split(","):
            timing: dict = {}
            # evaluate() looks models up by name in dsr_lorenz.MODELS.
            dsr_lorenz.MODELS[backend] = timed(backend, args.params, timing)
            row = evaluate(condition, backend, args.free_run, args.starts, args.horizon)
            row.update(timing, params=args.params, load_average=os.getloadavg())
            print(json.dumps(row), flush=True)
            results.append(row)
            Path(args.output).write_text(
                json.dumps({"machine": machine, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
