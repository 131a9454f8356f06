"""Foundation benchmarks: dynid against pysindy / PyDMD used directly, and CLI start-up.

    python benchmarks/run_foundation.py            # full run (a few minutes)
    python benchmarks/run_foundation.py --quick    # smoke run: small files, few repetitions
    python benchmarks/run_foundation.py --blas-threads 1   # on a busy machine (see README.md)

Measures, with medians over interleaved repetitions:

1. ``dynid fit LORENZ.csv --model sindy -o m.dynid`` end to end (a subprocess of the real
   console script) against ``benchmarks/reference.py sindy`` (pandas + pysindy with the same
   configuration, coefficients written with numpy.save), on a noise-free 100k-sample Lorenz file.
2. The same for ``--model dmd`` against PyDMD (exact DMD, the rank dynid picked) on a
   Lorenz-96 file with N = 40 sites and 100k samples.
3. ``dynid --help`` and ``python -c "import dynid.cli.app"`` wall time (goal < 0.3 s), with
   ``python -c pass`` as the floor.
4. The fits alone in one process (inprocess.py), with a profile of dynid's fit.

Prints a table and writes everything to benchmarks/results/foundation.json (quick runs:
foundation-quick.json). Data files are simulated once and cached in a temp folder.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timing import OtherLoad, command, interleaved, summarize, wait_until_quiet

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
# The real console script next to this Python, run directly: `dynid` on PATH may be a wrapper
# (a pyenv shim costs tens of ms per call) that is no part of dynid.
_SCRIPT = Path(PYTHON).with_name("dynid")
DYNID = str(_SCRIPT) if _SCRIPT.exists() else shutil.which("dynid") or "dynid"
GOAL_RATIO = 1.2
GOAL_STARTUP_S = 0.3
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class Config:
    samples: int  # rows of each simulated data file
    repeats: int  # timed repetitions of each fit comparison
    startup_repeats: int  # timed repetitions of the start-up commands


FULL = Config(samples=100_000, repeats=7, startup_repeats=25)
QUICK = Config(samples=10_000, repeats=3, startup_repeats=5)


@dataclass(frozen=True)
class DataSpec:
    system: str
    dt: float
    params: tuple[str, ...] = ()

    def filename(self, n: int) -> str:
        params = "".join(f"-{p.replace('=', '')}" for p in self.params)
        return f"{self.system}{params}-n{n}-dt{self.dt:g}.csv"


SINDY_DATA = DataSpec("lorenz", 0.001)
DMD_DATA = DataSpec("lorenz96", 0.01, ("N=40",))


# -- setup ---------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """CPU, cores, RAM and the versions that matter."""
    import numpy

    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    cpu = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
                if ln.startswith("model name")), platform.processor())
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    mem_kb = next((int(ln.split()[1]) for ln in meminfo.splitlines()
                   if ln.startswith("MemTotal")), 0)
    blas = numpy.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    versions = {name: importlib.metadata.version(name)
                for name in ("dynid", "numpy", "pandas", "pyarrow", "pysindy", "pydmd")}
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kb / 2**20, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "blas": f"{blas.get('name', '?')} {blas.get('version', '')}".strip(),
        **versions,
    }


def simulated(spec: DataSpec, n: int, folder: Path, fresh: bool) -> tuple[Path, dict[str, Any]]:
    """``dynid simulate`` the file once; later runs reuse it (and report the first run's time)."""
    path = folder / spec.filename(n)
    sidecar = path.with_suffix(".json")
    cached = not fresh and path.exists() and sidecar.exists()
    if not cached:
        folder.mkdir(parents=True, exist_ok=True)
        argv = [DYNID, "simulate", spec.system, "--n", n, "--dt", spec.dt, "-o", path, "-q"]
        for p in spec.params:
            argv += ["-p", p]
        seconds = interleaved({"simulate": command(argv)}, repeats=1, warmup=0)["simulate"][0]
        sidecar.write_text(json.dumps({"simulate_s": seconds, "argv": [str(a) for a in argv]}))
    info = json.loads(sidecar.read_text())
    return path, {"path": str(path), "samples": n, "dt": spec.dt, "system": spec.system,
                  "params": list(spec.params), "simulate_s": info["simulate_s"],
                  "simulate_argv": info["argv"], "cached": cached}


# -- benchmarks ------------------------------------------------------------------------------------
def fit_end_to_end(model: str, data: Path, work: Path, repeats: int) -> dict[str, Any]:
    """``dynid fit DATA --model MODEL -o m.dynid`` against reference.py, both as subprocesses."""
    model_file = work / f"{model}.dynid"
    dynid_argv = [DYNID, "fit", data, "--model", model, "-o", model_file]
    # One untimed run first, with --json: it warms the caches and says what dynid chose.
    fitted = json.loads(command([*dynid_argv, "--json"])())
    rank = fitted["metrics"].get("rank")
    ref_file = work / f"{model}-reference.{'npz' if model == 'dmd' else 'npy'}"
    ref_argv = [PYTHON, HERE / "reference.py", model, data, ref_file]
    if model == "dmd":
        ref_argv += ["--rank", rank]
    samples = interleaved({"dynid": command(dynid_argv), "reference": command(ref_argv)}, repeats)
    return {
        **{side: summarize(times) for side, times in samples.items()},
        "dynid_argv": [str(a) for a in dynid_argv],
        "reference_argv": [str(a) for a in ref_argv],
        "dynid_reported_fit_s": fitted["fit_seconds"],
        "rank": rank,
        "agreement": agreement(model, model_file, ref_file),
    }


def agreement(model: str, model_file: Path, ref_file: Path) -> dict[str, Any]:
    """Did both sides fit the same thing? Largest |difference| of the coefficients/eigenvalues."""
    import numpy as np

    import dynid

    arrays = dynid.load_model(str(model_file)).model.arrays()
    if model == "sindy":
        ours, theirs = arrays["coefficients"], np.load(ref_file)
    else:
        ours = np.sort_complex(arrays["eigenvalues"])
        theirs = np.sort_complex(np.load(ref_file)["eigs"])
    same_shape = ours.shape == theirs.shape
    diff = float(np.max(np.abs(ours - theirs))) if same_shape else None
    return {"what": "coefficients" if model == "sindy" else "eigenvalues",
            "shapes": [list(ours.shape), list(theirs.shape)], "max_abs_diff": diff}


def startup(repeats: int) -> dict[str, Any]:
    """CLI start-up: help, the app import, and bare Python as the floor."""
    cases = {
        "dynid --help": command([DYNID, "--help"]),
        "import dynid.cli.app": command([PYTHON, "-c", "import dynid.cli.app"]),
        "python -c pass": command([PYTHON, "-c", "pass"]),
    }
    samples = interleaved(cases, repeats)
    return {name: summarize(times) for name, times in samples.items()} | {"dynid_script": DYNID}


def fit_in_process(sindy: Path, dmd: Path, rank: int, repeats: int) -> dict[str, Any]:
    """inprocess.py in its own process; it prints JSON."""
    out = command([PYTHON, HERE / "inprocess.py", "--sindy", sindy, "--dmd", dmd,
                   "--rank", rank, "--repeats", repeats])()
    return json.loads(out)


# -- report ----------------------------------------------------------------------------------------
def table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per comparison; "other_cores" is what else kept the CPUs busy meanwhile."""
    rows = []

    def add(name: str, group: str, ours: float, reference: float, goal: str) -> None:
        ratio = ours / reference
        ok = ratio <= GOAL_RATIO if goal == "ratio" else ours < GOAL_STARTUP_S
        rows.append({
            "benchmark": name, "dynid_s": ours, "reference_s": reference, "ratio": ratio,
            "goal": f"<= {GOAL_RATIO}x" if goal == "ratio" else f"< {GOAL_STARTUP_S} s",
            "ok": ok, "other_cores": results[group]["other_load_cores"]["during"],
        })

    for model in ("sindy", "dmd"):
        r = results[f"{model}_end_to_end"]
        add(f"{model} fit, end to end", f"{model}_end_to_end",
            r["dynid"]["median_s"], r["reference"]["median_s"], "ratio")
    for model in ("sindy", "dmd"):
        r = results["in_process"][model]
        add(f"{model} fit, in process", "in_process",
            r["dynid"]["median_s"], r["reference"]["median_s"], "ratio")
    s = results["startup"]
    for name in ("dynid --help", "import dynid.cli.app"):
        add(name, "startup", s[name]["median_s"], s["python -c pass"]["median_s"], "startup")
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'benchmark':<24} {'dynid s':>8} {'reference s':>12} {'ratio':>6}  "
              f"{'goal':<9} {'ok':<3} {'other load':>10}")
    lines = [header, "-" * len(header)]
    for r in rows:
        other = "-" if r["other_cores"] is None else f"{r['other_cores']:.2f}"
        lines.append(f"{r['benchmark']:<24} {r['dynid_s']:>8.3f} {r['reference_s']:>12.3f} "
                     f"{r['ratio']:>5.2f}x  {r['goal']:<9} {'yes' if r['ok'] else 'NO':<3} "
                     f"{other:>10}")
    return "\n".join(lines)


def report(results: dict[str, Any], output: Path) -> None:
    m, c = results["machine"], results["config"]
    print(f"\n{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM; Python {m['python']}, "
          f"numpy {m['numpy']}, pysindy {m['pysindy']}, pydmd {m['pydmd']}")
    threads = c["blas_threads"] or "library default"
    print(f"medians of {c['repeats']} interleaved runs (start-up: {c['startup_repeats']}); "
          f"BLAS threads: {threads}; "
          "reference = pysindy / PyDMD directly, or `python -c pass` for start-up; "
          "other load = CPU cores busy with other work meanwhile\n")
    print(format_table(results["table"]))
    for model in ("sindy", "dmd"):
        a = results[f"{model}_end_to_end"]["agreement"]
        print(f"{model}: max |dynid - reference| over the {a['what']} = {a['max_abs_diff']:.3g}")
    print(f"\nwrote {output} ({results['total_s']:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small files, few repetitions")
    parser.add_argument("--data-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "dynid-benchmarks",
                        help="where simulated data files are cached")
    parser.add_argument("--fresh-data", action="store_true", help="re-simulate the data files")
    parser.add_argument("--max-wait", type=float, default=30.0,
                        help="seconds to wait, before each benchmark, for other work on the "
                        "machine to stop (0: do not wait)")
    parser.add_argument("--blas-threads", type=int,
                        help="threads for OpenBLAS/MKL/OpenMP in every timed process (default: "
                        "the libraries' own choice); 1 keeps timings sane on a busy machine, "
                        "where spinning BLAS threads fight other processes for the cores")
    parser.add_argument("-o", "--output", type=Path, help="JSON results path")
    args = parser.parse_args()
    if args.blas_threads:
        for variable in BLAS_THREAD_VARIABLES:  # inherited by every subprocess timed below
            os.environ[variable] = str(args.blas_threads)
    config = QUICK if args.quick else FULL
    output = args.output or HERE / "results" / (
        "foundation-quick.json" if args.quick else "foundation.json")
    started = time.perf_counter()
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "config": vars(config) | {"blas_threads": args.blas_threads},
        "machine": machine(),
    }
    sindy_data, results["sindy_data"] = simulated(
        SINDY_DATA, config.samples, args.data_dir, args.fresh_data)
    dmd_data, results["dmd_data"] = simulated(
        DMD_DATA, config.samples, args.data_dir, args.fresh_data)

    def measure(key: str, benchmark: Callable[..., dict[str, Any]], *params: Any) -> None:
        print(f"{key} ...", file=sys.stderr)
        quiet = wait_until_quiet(max_wait_s=args.max_wait)
        with OtherLoad() as load:
            results[key] = benchmark(*params)
        results[key]["other_load_cores"] = {"before": quiet, "during": load.cores}

    with tempfile.TemporaryDirectory(prefix="dynid-bench-") as tmp:
        measure("sindy_end_to_end", fit_end_to_end, "sindy", sindy_data, Path(tmp),
                config.repeats)
        measure("dmd_end_to_end", fit_end_to_end, "dmd", dmd_data, Path(tmp), config.repeats)
    measure("startup", startup, config.startup_repeats)
    measure("in_process", fit_in_process, sindy_data, dmd_data,
            results["dmd_end_to_end"]["rank"], config.repeats)
    results["table"] = table_rows(results)
    results["total_s"] = time.perf_counter() - started

    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    report(results, output)


if __name__ == "__main__":
    main()
