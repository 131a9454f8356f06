"""The one timing helper every benchmark uses, plus small helpers around it.

``interleaved`` runs several cases round-robin (dynid, reference, dynid, reference, ...) so
that slow drifts of a shared machine hit both sides alike, and returns every wall time.
"""

from __future__ import annotations

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
