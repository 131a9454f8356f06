"""Files per second of ``dynid fit DIR --each --model var`` with --jobs 1 and --jobs 2, and the
runner's per-file overhead.

Overhead per file = the marginal wall time of one more file in a batch (from batches of
``--files`` and of a tenth as many, so that start-up cancels) times the number of workers, minus
the time the same work (read, fit, write the model file) takes through the Python API in one
process. The machine's own ceiling is measured beside it: the same in-process loop in one
process against two copies of it at once (2 x t_one / t_two); a runner cannot beat it, and on
virtual machines whose two vCPUs share a physical core it stays well below 2. Results: a table on
stdout and ``results/batch_throughput.json``.

    python benchmarks/batch_throughput.py [--files 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import OtherLoad, command, interleaved, summarize  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "batch_throughput.json"


def make_files(folder: Path, count: int, samples: int = 200) -> None:
    """``count`` small CSV files of a stable 2-variable VAR(1), one seed each."""
    folder.mkdir(parents=True, exist_ok=True)
    a = np.array([[0.8, 0.1], [-0.2, 0.7]])
    for k in range(count):
        rng = np.random.default_rng(k)
        x = np.zeros((samples, 2))
        for i in range(1, samples):
            x[i] = a @ x[i - 1] + rng.normal(size=2)
        pd.DataFrame({"t": np.arange(samples) * 0.1, "x": x[:, 0], "y": x[:, 1]}).to_csv(
            folder / f"rec{k:04d}.csv", index=False)


def api_seconds_per_file(folder: Path, out: Path) -> float:
    """In-process time of read + fit + save per file (the work without the runner)."""
    from dynid import api
    from dynid.data import load
    from dynid.modelfile import save_model

    files = sorted(folder.iterdir())
    # One untimed file first: the backend's modules load on first use, as in each worker once.
    api.fit(load(str(files[0])), "var", None, seed=0, device="cpu")
    start = time.perf_counter()
    for path in files:
        result = api.fit(load(str(path)), "var", None, seed=0, device="cpu")
        save_model(result.model, str(out / f"{path.stem}.dynid"), result.metadata)
    return (time.perf_counter() - start) / len(files)


def api_loop_processes(folder: Path, out: Path, copies: int):  # noqa: ANN201
    """A case that runs ``copies`` processes at once, each doing ``api_seconds_per_file`` over
    ``folder`` (writing into its own folder under ``out``)."""
    def run() -> None:
        running = []
        for k in range(copies):
            (out / str(k)).mkdir(parents=True, exist_ok=True)
            running.append(subprocess.Popen([sys.executable, __file__, "--api-loop", str(folder),
                                             str(out / str(k))], stdout=subprocess.DEVNULL))
        if any(process.wait() != 0 for process in running):
            raise RuntimeError("the in-process loop failed")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--api-loop", nargs=2, metavar=("FOLDER", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.api_loop:
        print(api_seconds_per_file(Path(args.api_loop[0]), Path(args.api_loop[1])))
        return
    small = max(2, args.files // 10)
    loadavg_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_files(root / "big", args.files)
        make_files(root / "small", small)
        (root / "api").mkdir()

        def batch(folder: str, jobs: int):  # noqa: ANN202
            return command([sys.executable, "-m", "dynid", "fit", root / folder, "--each", "--model", "var",
                            "-q", "--jobs", str(jobs), "-o", root / f"out-{folder}-{jobs}" / "{stem}.dynid"])

        cases = {f"{folder}, --jobs {jobs}": batch(folder, jobs) for folder in ("big", "small") for jobs in (1, 2)}
        cases.update({f"in-process loop x{copies}": api_loop_processes(root / "big", root / f"loop{copies}", copies)
                      for copies in (1, 2)})
        with OtherLoad() as load:
            samples = interleaved(cases, repeats=args.repeats, warmup=1)
            api_s = api_seconds_per_file(root / "small", root / "api")
    medians = {name: summarize(s)["median_s"] for name, s in samples.items()}
    report: dict[str, object] = {"files": args.files, "small_batch_files": small, "cpus": os.cpu_count(),
                                 "other_load_cores": load.cores, "loadavg_1min_at_start": loadavg_at_start,
                                 "loadavg_1min_at_end": os.getloadavg()[0],
                                 "api_seconds_per_file": api_s, "samples": {k: summarize(v) for k, v in samples.items()}}
    print(f"{args.files} files; other load {load.cores} cores (load average {loadavg_at_start:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end); in-process read+fit+save {api_s * 1e3:.1f} ms/file")
    for jobs in (1, 2):
        big, few = medians[f"big, --jobs {jobs}"], medians[f"small, --jobs {jobs}"]
        marginal = (big - few) / (args.files - small)
        overhead = marginal * jobs - api_s
        report[f"jobs{jobs}"] = {"wall_s": big, "files_per_s": args.files / big,
                                 "marginal_s_per_file": marginal, "overhead_s_per_file": overhead}
        print(f"--jobs {jobs}: {args.files / big:6.1f} files/s (wall {big:.2f} s), "
              f"marginal {marginal * 1e3:.1f} ms/file, overhead {overhead * 1e3:.1f} ms/file per worker")
    speedup = medians["big, --jobs 1"] / medians["big, --jobs 2"]
    ceiling = 2 * medians["in-process loop x1"] / medians["in-process loop x2"]
    report["speedup_jobs2"] = speedup
    report["machine_ceiling_2_processes"] = ceiling
    print(f"--jobs 2 / --jobs 1 throughput: {speedup:.2f}x; two in-process loops at once against one: "
          f"{ceiling:.2f}x (the machine's ceiling)")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
