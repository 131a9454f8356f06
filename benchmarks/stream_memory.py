"""Peak memory and speed of ``dynid fit BIG.csv --model var|dmd`` on a file larger than
--max-memory (read in chunks), one subprocess per model, its peak resident memory from
``getrusage``. Results: a table on stdout and ``results/stream_memory.json``.

    python benchmarks/stream_memory.py [--megabytes 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "stream_memory.json"


def make_file(path: Path, megabytes: float) -> None:
    """A 3-variable VAR(1) block of 20,000 rows written again and again up to ``megabytes``."""
    rng = np.random.default_rng(0)
    a = np.array([[0.5, 0.1, 0.0], [-0.2, 0.6, 0.1], [0.0, 0.2, 0.4]])
    x = np.zeros((20000, 3))
    for k in range(1, len(x)):
        x[k] = a @ x[k - 1] + rng.normal(size=3)
    block = "".join(f"{p!r},{q!r},{r!r}\n" for p, q, r in x.tolist()).encode()
    with open(path, "wb") as handle:
        handle.write(b"a,b,c\n")
        while handle.tell() < megabytes * 1e6:
            handle.write(block)


def peak_of_child(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of one subprocess run alone."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    # RUSAGE_CHILDREN holds the largest child so far; each model's run is the largest yet or
    # about equal (the same reader), so the figure is its own within the noise.
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1000)
    args = parser.parse_args()
    report: dict[str, object] = {"cpus": os.cpu_count(), "loadavg_1min_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.csv"
        make_file(path, args.megabytes)
        size_mb = path.stat().st_size / 1e6
        report["file_mb"] = size_mb
        print(f"{size_mb:.0f} MB file; load average {os.getloadavg()[0]:.1f}")
        for model in ("var", "dmd"):
            wall, peak = peak_of_child([sys.executable, "-m", "dynid", "fit", str(path), "--model", model,
                                        "--max-memory", "64M", "-q", "-o", str(Path(tmp) / f"{model}.dynid")])
            report[model] = {"wall_s": wall, "peak_rss_mb": peak, "mb_per_s": size_mb / wall}
            print(f"{model}: {wall:6.1f} s ({size_mb / wall:5.1f} MB/s), peak resident {peak:6.0f} MB")
    report["loadavg_1min_at_end"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
