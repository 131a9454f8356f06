"""The one timing helper every benchmark uses, plus small helpers around it.

``interleaved`` runs several cases round-robin (dynid, reference, dynid, reference, ...) so
that slow drifts of a shared machine hit both sides alike, and returns every wall time.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def interleaved(
    cases: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Wall seconds of each case, ``repeats`` times, after ``warmup`` untimed rounds.

    Every round runs each case once; odd rounds run them in reverse order, so no case always
    runs first (right after the other has warmed or flushed caches).
    """
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(warmup + repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            cases[name]()
            elapsed = time.perf_counter() - start
            if round_ >= warmup:
                samples[name].append(elapsed)
    return samples


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    """Median, spread and the raw samples (seconds)."""
    return {
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "n": len(samples),
        "samples_s": [round(s, 6) for s in samples],
    }


def command(argv: Sequence[str | Path], cwd: Path | None = None) -> Callable[[], str]:
    """A case that runs ``argv`` as a subprocess and returns its stdout; raises on failure."""
    args = [str(a) for a in argv]

    def run() -> str:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} exited with {done.returncode}:\n{done.stderr.strip()}"
            )
        return done.stdout

    return run


class OtherLoad:
    """Average CPU cores busy with *other* work while the block ran (Linux; else None).

    Busy time of the whole machine (/proc/stat) minus the CPU time of this process and the
    children it waited for: about 0 on a quiet machine, 1 when another process kept a core busy.
    Sets ``cores`` on exit.
    """

    def __enter__(self) -> OtherLoad:
        self._start = (_machine_busy_s(), _own_cpu_s(), time.perf_counter())
        self.cores: float | None = None
        return self

    def __exit__(self, *exc: object) -> None:
        busy, own, wall = _machine_busy_s(), _own_cpu_s(), time.perf_counter()
        if busy is not None and self._start[0] is not None:
            other = (busy - self._start[0]) - (own - self._start[1])
            self.cores = round(max(other, 0.0) / (wall - self._start[2]), 2)


def wait_until_quiet(max_cores: float = 0.3, max_wait_s: float = 120.0) -> float | None:
    """Wait (up to ``max_wait_s``) until other work uses at most ``max_cores``; returns the last
    reading, in cores (None where it cannot be measured)."""
    deadline = time.perf_counter() + max_wait_s
    while True:
        with OtherLoad() as load:
            time.sleep(1.0)
        if load.cores is None or load.cores <= max_cores or time.perf_counter() > deadline:
            return load.cores


def _machine_busy_s() -> float | None:
    try:
        with open("/proc/stat") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # user .. steal, no guest


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def em_arguments(description: str, output: Path) -> Any:
    """The command line of an EM comparison: --samples, --iterations, -o (default ``output``)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("-o", "--output", default=str(output))
    return parser.parse_args()


class EMRun:
    """One library's EM for ``compare_em``: calling it runs one iteration."""

    def __call__(self) -> None: ...

    def log_likelihood(self) -> float: ...


def compare_em(
    runs: Mapping[str, EMRun], *, samples: int, iterations: int, start_log_likelihood: float,
    start: str, output: str, versions: Mapping[str, str],
) -> None:
    """``iterations`` EM iterations of every run, interleaved so load drifts hit them alike;
    seconds per iteration and the final log-likelihood written to ``output`` (JSON) and printed.
    start: what the runs start from, for the printed line; versions: the reference libraries'."""
    import json
    import platform

    seconds = interleaved(runs, repeats=iterations, warmup=0)
    results = {
        "samples": samples, "iterations": iterations, "start_log_likelihood": start_log_likelihood,
        **{name: {"seconds_per_iteration": summarize(seconds[name]),
                  "log_likelihood": run.log_likelihood()} for name, run in runs.items()},
        **versions,
        "machine": platform.platform(), "python": platform.python_version(),
    }
    Path(output).write_text(json.dumps(results, indent=2) + "\n")
    print(f"{samples} samples, {iterations} EM iterations from the same {start} "
          f"(log-likelihood {start_log_likelihood:.4f}):")
    for name in runs:
        row = results[name]
        print(f"  {name:<9} {1000 * row['seconds_per_iteration']['median_s']:8.1f} ms/iteration (median), "
              f"final log-likelihood {row['log_likelihood']:.4f}")
