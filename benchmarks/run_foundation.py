"""Foundation benchmarks: dynid against pysindy / PyDMD used directly, and CLI start-up.

    python benchmarks/run_foundation.py            # full run (a few minutes)
    python benchmarks/run_foundation.py --quick    # smoke run: small files, few repetitions

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timing import command, interleaved, summarize

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
# The real console script next to this Python, run directly: `dynid` on PATH may be a wrapper
# (a pyenv shim costs tens of ms per call) that is no part of dynid.
_SCRIPT = Path(PYTHON).with_name("dynid")
DYNID = str(_SCRIPT) if _SCRIPT.exists() else shutil.which("dynid") or "dynid"
GOAL_RATIO = 1.2
GOAL_STARTUP_S = 0.3


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
    """CPU, cores, RAM, load and the versions that matter."""
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
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
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
    dynid_fit = command([DYNID, "fit", data, "--model", model, "-o", model_file])
    # One untimed run first, with --json: it warms the caches and says what dynid chose.
    fitted = json.loads(command([DYNID, "fit", data, "--model", model, "-o", model_file,
                                 "--json"])())
    rank = fitted["metrics"].get("rank")
    ref_file = work / f"{model}-reference.{'npz' if model == 'dmd' else 'npy'}"
    ref_argv = [PYTHON, HERE / "reference.py", model, data, ref_file]
    if model == "dmd":
        ref_argv += ["--rank", rank]
    samples = interleaved({"dynid": dynid_fit, "reference": command(ref_argv)}, repeats)
    return {
        **{side: summarize(times) for side, times in samples.items()},
        "dynid_argv": [DYNID, "fit", str(data), "--model", model, "-o", str(model_file)],
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
    rows = []

    def add(name: str, ours: float, reference: float | None, ok: bool, goal: str) -> None:
        ratio = ours / reference if reference else None
        rows.append({"benchmark": name, "dynid_s": ours, "reference_s": reference,
                     "ratio": ratio, "goal": goal, "ok": ok})

    for key, label in (("sindy_end_to_end", "sindy fit, end to end"),
                       ("dmd_end_to_end", "dmd fit, end to end")):
        r = results[key]
        ours, ref = r["dynid"]["median_s"], r["reference"]["median_s"]
        add(label, ours, ref, ours / ref <= GOAL_RATIO, f"<= {GOAL_RATIO}x")
    for model in ("sindy", "dmd"):
        r = results["in_process"][model]
        ours, ref = r["dynid"]["median_s"], r["reference"]["median_s"]
        add(f"{model} fit, in process", ours, ref, ours / ref <= GOAL_RATIO, f"<= {GOAL_RATIO}x")
    s = results["startup"]
    floor = s["python -c pass"]["median_s"]
    for name in ("dynid --help", "import dynid.cli.app"):
        ours = s[name]["median_s"]
        add(name, ours, floor, ours < GOAL_STARTUP_S, f"< {GOAL_STARTUP_S} s")
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    header = f"{'benchmark':<26} {'dynid s':>9} {'reference s':>12} {'ratio':>7}  {'goal':<9} ok"
    lines = [header, "-" * len(header)]
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
        lines.append(f"{r['benchmark']:<26} {r['dynid_s']:>9.3f} {r['reference_s']:>12.3f} "
                     f"{ratio:>7}  {r['goal']:<9} {'yes' if r['ok'] else 'NO'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small files, few repetitions")
    parser.add_argument("--data-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "dynid-benchmarks",
                        help="where simulated data files are cached")
    parser.add_argument("--fresh-data", action="store_true", help="re-simulate the data files")
    parser.add_argument("-o", "--output", type=Path, help="JSON results path")
    args = parser.parse_args()
    config = QUICK if args.quick else FULL
    output = args.output or HERE / "results" / (
        "foundation-quick.json" if args.quick else "foundation.json")
    started = time.perf_counter()

    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "config": vars(config),
        "machine": machine(),
    }
    sindy_data, results["sindy_data"] = simulated(SINDY_DATA, config.samples, args.data_dir,
                                                  args.fresh_data)
    dmd_data, results["dmd_data"] = simulated(DMD_DATA, config.samples, args.data_dir,
                                              args.fresh_data)
    with tempfile.TemporaryDirectory(prefix="dynid-bench-") as tmp:
        work = Path(tmp)
        print("sindy end to end ...", file=sys.stderr)
        results["sindy_end_to_end"] = fit_end_to_end("sindy", sindy_data, work, config.repeats)
        print("dmd end to end ...", file=sys.stderr)
        results["dmd_end_to_end"] = fit_end_to_end("dmd", dmd_data, work, config.repeats)
    print("start-up ...", file=sys.stderr)
    results["startup"] = startup(config.startup_repeats)
    print("in-process fits ...", file=sys.stderr)
    results["in_process"] = fit_in_process(sindy_data, dmd_data,
                                           results["dmd_end_to_end"]["rank"], config.repeats)
    results["table"] = table_rows(results)
    results["total_s"] = time.perf_counter() - started
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]

    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    m = results["machine"]
    print(f"\n{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM; Python {m['python']}, "
          f"numpy {m['numpy']}, pysindy {m['pysindy']}, pydmd {m['pydmd']}")
    print(f"medians of {config.repeats} interleaved runs (start-up: {config.startup_repeats}); "
          f"reference = pysindy / PyDMD directly, or `python -c pass` for start-up\n")
    print(format_table(results["table"]))
    for key in ("sindy_end_to_end", "dmd_end_to_end"):
        a = results[key]["agreement"]
        print(f"{key}: max |dynid - reference| {a['what']} = {a['max_abs_diff']}")
    print(f"load average at start {m['load_average_at_start']}, at end "
          f"{results['load_average_at_end']} (other work on the machine skews timings)")
    print(f"\nwrote {output} ({results['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
