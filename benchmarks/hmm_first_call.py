"""When numba's compiled forward-backward repays its start-up: the constants of
``dynid/models/latent/forward_backward_choice.py`` and whole ``hmm`` fits with each choice.

    OPENBLAS_NUM_THREADS=1 python benchmarks/hmm_first_call.py [-o results/hmm_first_call.json]

1. start-up: CPU seconds of a fresh process's first compiled pass (importing numba, then loading
   the cached machine code; and compiling it, with an empty NUMBA_CACHE_DIR), median of
   STARTS fresh processes.
2. per pass: CPU seconds each implementation takes per pass over steps x states, and two
   least-squares fits of the saving, a + b steps states (SAVED_PER_PASS, SAVED_PER_VALUE):
   relative to each saving (the small passes, where a matters, count as much as the large
   ones) and absolute (the large passes, where b matters, dominate).
3. fits: CPU seconds of ``api.fit(..., "hmm")`` on the known 3-state HMM of
   ``hmm_vs_hmmlearn.py``, in fresh processes, with numba's passes throughout, the numpy
   passes throughout, and dynid's choice; every figure includes the fit's imports of numba.
All times are ``time.process_time`` (CPU of the measuring process), robust on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
STARTS = 3
PASS_SHAPES = [(steps, k) for k in (2, 3, 6) for steps in (100, 300, 1000, 3000, 10000)]
FITS = [(samples, states) for states in ("3", "auto") for samples in (500, 2000, 5000, 20000)]
CHOICES = ("numba", "numpy", "dynid")

START_SNIPPET = """
import time, numpy as np
from dynid.models.latent import forward_backward_choice  # and the numpy passes, scipy: as in a fit
start = time.process_time()
passes = forward_backward_choice.compiled()
log_b = np.zeros((10, 3))
passes(np.full(3, 1 / 3), np.full((3, 3), 1 / 3), log_b, np.empty((10, 3)), np.empty((3, 3)))
print(time.process_time() - start)
"""

FIT_SNIPPET = """
import json, sys, time
sys.path.insert(0, {here!r})
from hmm_vs_hmmlearn import known_hmm
from dynid import api
from dynid.data.dataset import Dataset
from dynid.models.latent import forward_backward_choice, forward_backward_lapack
choice, samples, states = {choice!r}, {samples}, {states!r}
if choice != "dynid":
    fixed = forward_backward_lapack.forward_backward if choice == "numpy" else None
    forward_backward_choice.Passes.next = lambda self, steps, k: fixed or forward_backward_choice.compiled()
x = known_hmm(samples)
start = time.process_time()
fit = api.fit(Dataset.from_arrays(x), "hmm", [f"states={{states}}"], seed=0)
print(json.dumps([time.process_time() - start, fit.model.metrics_["log_likelihood"]]))
"""


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, **(env or {})})
    return result.stdout.strip().splitlines()[-1]


def start_up() -> dict[str, float]:
    """CPU s of the first compiled pass in a fresh process: cached code, and compiling."""
    cached = [float(run_python(START_SNIPPET)) for _ in range(STARTS)]
    with tempfile.TemporaryDirectory() as empty:
        compiling = float(run_python(START_SNIPPET, {"NUMBA_CACHE_DIR": empty}))
    return {"cached": statistics.median(cached), "cached_runs": cached, "compiling": compiling}


def per_pass() -> dict[str, object]:
    """CPU s per pass of each implementation, and the saving's fit a + b steps states."""
    from dynid.models.latent import forward_backward_choice, forward_backward_lapack

    compiled = forward_backward_choice.compiled()
    rng = np.random.default_rng(0)
    rows = []
    for steps, k in PASS_SHAPES:
        transition = np.full((k, k), 0.05 / (k - 1)) + np.eye(k) * (0.95 - 0.05 / (k - 1))
        log_b = 2 * rng.normal(size=(steps, k))
        arguments = (np.full(k, 1 / k), transition, log_b, np.empty((steps, k)), np.empty((k, k)))
        compiled(*arguments)  # compiled for this shape's types already; warm caches
        repeats = max(3, 60_000 // (steps * k))
        seconds = {}
        for name, passes in (("numpy", forward_backward_lapack.forward_backward), ("numba", compiled)):
            rounds = []
            for _ in range(5):
                begin = time.process_time()
                for _ in range(repeats):
                    passes(*arguments)
                rounds.append((time.process_time() - begin) / repeats)
            seconds[name] = statistics.median(rounds)
        rows.append({"steps": steps, "states": k, **seconds, "saving": seconds["numpy"] - seconds["numba"]})
        print(f"  {steps:>6} steps x {k} states: numpy {1e3 * seconds['numpy']:.3f} ms, "
              f"numba {1e3 * seconds['numba']:.3f} ms per pass", flush=True)
    saving = np.array([row["saving"] for row in rows])
    design = np.array([[1.0, row["steps"] * row["states"]] for row in rows])
    relative = np.linalg.lstsq(design / saving[:, None], np.ones(len(rows)), rcond=None)[0]
    absolute = np.linalg.lstsq(design, saving, rcond=None)[0]
    return {"rows": rows, "relative_fit": relative.tolist(), "absolute_fit": absolute.tolist()}


def fits() -> list[dict[str, object]]:
    rows = []
    for samples, states in FITS:
        for choice in CHOICES:
            code = FIT_SNIPPET.format(here=str(HERE), choice=choice, samples=samples, states=states)
            seconds, loglik = json.loads(run_python(code))
            rows.append({"samples": samples, "states": states, "choice": choice, "cpu_s": seconds,
                         "log_likelihood": loglik})
            print(f"  {samples:>6} samples, states={states:<4} {choice:<6} {seconds:6.2f} CPU s  "
                  f"log-likelihood {loglik:.10f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=HERE / "results" / "hmm_first_call.json")
    args = parser.parse_args()
    print("start-up of the compiled passes (CPU s):", flush=True)
    first = start_up()
    print(f"  cached code {first['cached']:.2f} (runs {', '.join(f'{s:.2f}' for s in first['cached_runs'])}), "
          f"compiling {first['compiling']:.2f}", flush=True)
    print("per pass:", flush=True)
    passes = per_pass()
    for fit in ("relative_fit", "absolute_fit"):
        a, b = passes[fit]
        print(f"  saving ({fit.replace('_', ' ')}) = {1e3 * a:.3f} ms + {1e9 * b:.0f} ns x steps x states",
              flush=True)
    print("whole hmm fits (fresh processes, CPU s):", flush=True)
    result = {"load_average": os.getloadavg(), "start_up": first, "per_pass": passes, "fits": fits()}
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
