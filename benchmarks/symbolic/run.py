"""Symbolic identification benchmark: dynid vs pysindy with its defaults.

    python benchmarks/symbolic/run.py              # full: 30 systems x 3 noise x 2 lengths
    python benchmarks/symbolic/run.py --quick      # smoke: 8 systems, 150 samples (< 2 min)
    python benchmarks/symbolic/run.py --jobs 2     # cases in 2 worker processes
    python benchmarks/symbolic/run.py --noise 0.05 --dynid-param derivative=savgol --tag savgol
                                                   # a diagnostic variant -> symbolic-savgol.*

Every case (system x noise x record length) simulates the system, adds seeded observation
noise, fits both tools, and scores structure, coefficients and re-simulations (cases.py,
metrics.py). Writes benchmarks/results/symbolic.json (every row, the aggregates, goals,
timings, machine) and symbolic.md (tables); quick runs write symbolic-quick.*.

BLAS is limited to one thread in every process that fits (threadpoolctl), so both tools run
alike. --jobs N runs cases in N worker processes. Measured on the shared 2-core development
machine (other work kept ~1.6 cores busy): the quick sweep took 26 s with --jobs 2 and 21 s
with --jobs 1, and parallel workers also inflate the measured fit times, hence the default of 1.
The full sweep takes ~4 min there (~1 min quick, including the CLI timing).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/timing.py
from timing import OtherLoad  # noqa: E402

from cases import DYNID_PARAMS, Case, run_case  # noqa: E402
from report import NOISES, compute, goals, markdown  # noqa: E402
from systems import LENGTHS, SYSTEMS  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"
QUICK_SYSTEMS = ("logistic", "michaelis_menten_decay", "van_der_pol", "pendulum", "lorenz",
                 "enzyme_cascade", "goodwin", "coupled_oscillators")
METHOD = [
    "- Structure: each right-hand side is expanded and split into additive terms; a term is "
    "coefficient * N/D with N, D polynomials in the states and in sin/cos/exp/log atoms, both scaled "
    "to leading coefficient 1. Its shape is (monomials of N, monomials of D, atoms); its inner "
    "constants are the other coefficients of N and D (the K of x/(x + K)). Recovered = for every "
    "equation the multiset of shapes equals the truth's (|coefficient| < 1e-12 counts as absent) and "
    "every inner constant is within a factor 2 of the true one (same sign).",
    "- Coefficient error (recovered cases only): largest relative error over all true terms' "
    "coefficients and inner constants.",
    "- R²: per variable 1 - SSE/SST against the noise-free trajectory, averaged over variables, clipped "
    "at -1; a diverged or failed simulation is -1. Both re-simulations start from the exact IC "
    "(training IC, and a second 'new' IC) and run as many samples as the training record.",
    "- dynid is simulated with its own `model.simulate` (LSODA, rtol 1e-8, atol 1e-10, stop when "
    "|x| > 1e6 (1 + |x0|)); pysindy's equations with the same solver, tolerances and stop.",
    "- Noise: x + level * std(x_clean) * N(0, 1) per variable, seeded per case. dt = span / "
    "(samples - 1) with per-system spans (systems.py): 150-sample records cover >= ~2 periods (or "
    "the transient); 5000-sample records ~8-25 periods, chaotic ones ~5-10 Lyapunov times.",
    "- Chaotic systems (Lorenz, Rössler, Chen, Sprott A-C, Thomas, Hastings-Powell, competitive LV4, "
    "Lorenz-96) decorrelate from the truth over the long records even with ~1e-3 coefficient "
    "errors, so their new-IC R² mostly measures the horizon, not the model.",
    "- Each fit and each simulation has a time limit (`--timeout`); going over counts as a failure.",
]


def cases(quick: bool, noises=NOISES, dynid_params=DYNID_PARAMS, names=(), lengths=LENGTHS) -> list[Case]:
    """The cases of the sweep; ``names`` adds systems to the quick set (or, in a full run,
    restricts the sweep to them)."""
    wanted = (*QUICK_SYSTEMS, *names) if quick else names
    systems = [s for s in SYSTEMS if not wanted or s.name in wanted]
    lengths = (150,) if quick else lengths
    # Longest records first, so that a parallel run does not end on one slow straggler.
    return [Case(s.name, noise, n, tuple(dynid_params))
            for n in sorted(lengths, reverse=True) for s in systems for noise in noises]


def _init_worker() -> None:
    """One BLAS thread; warnings off; one untimed fit per tool pays the lazy imports."""
    import warnings

    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    warnings.filterwarnings("ignore")
    run_case(Case("logistic", 0.0, 150), timeout_s=60)


def run_all(todo: list[Case], jobs: int, timeout_s: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def report(row: dict[str, Any]) -> None:
        rows.append(row)
        marks = "  ".join(
            f"{tool} {'ok ' if row[tool]['recovered'] else 'no '} R2new {row[tool]['r2_new']:5.2f} "
            f"{row[tool]['seconds']:6.2f}s" for tool in ("dynid", "pysindy")
        )
        print(f"[{len(rows):3d}/{len(todo)}] {row['system']:26s} {row['noise']:4.0%} {row['samples']:5d}  {marks}",
              flush=True)

    if jobs == 1:
        _init_worker()
        for case in todo:
            report(run_case(case, timeout_s))
    else:
        with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker) as pool:
            futures = [pool.submit(run_case, case, timeout_s) for case in todo]
            for future in as_completed(futures):
                report(future.result())
    order = {case.key: k for k, case in enumerate(todo)}
    rows.sort(key=lambda r: order[r["system"], r["noise"], r["samples"]])
    return rows


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {name: importlib.metadata.version(name) for name in ("numpy", "scipy", "sympy", "pysindy", "dynid")}
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        **versions,
        "platform": platform.platform(),
        "git": _git_revision(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _git_revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "dynid"], cwd=HERE.parents[1],
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted dynid/ changes" if dirty else "")


def _jsonable(value: Any) -> Any:
    """NaN/inf -> None, numpy scalars -> Python, recursively (strict JSON)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 8 systems, 150 samples")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per fit and per simulation")
    parser.add_argument("--no-cli", action="store_true", help="skip the `dynid symbolic` CLI timing")
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild aggregates, goals and the markdown from the existing JSON (no fits)")
    parser.add_argument("--noise", type=float, nargs="+", default=list(NOISES),
                        help="noise levels (fraction of each variable's std); default 0 0.01 0.05")
    parser.add_argument("--dynid-param", action="append", default=[], metavar="KEY=VALUE",
                        help="extra dynid symbolic hyperparameter (diagnostics; repeatable)")
    parser.add_argument("--systems", nargs="+", default=[], metavar="NAME",
                        help="with --quick: systems added to the quick set; else: only these systems")
    parser.add_argument("--samples", type=int, nargs="+", default=list(LENGTHS), choices=LENGTHS,
                        help="record lengths of a full run (default: all)")
    parser.add_argument("--tag", help="suffix of the output files (symbolic[-quick]-TAG.json/.md)")
    args = parser.parse_args()
    stem = "-".join(filter(None, ["symbolic", "quick" if args.quick else None, args.tag]))
    if args.report_only:
        write(stem, rerender(json.loads((RESULTS / f"{stem}.json").read_text())))
        return

    unknown = sorted(set(args.systems) - {s.name for s in SYSTEMS})
    if unknown:
        parser.error(f"unknown systems {unknown}")
    dynid_params = [*DYNID_PARAMS, *args.dynid_param]
    todo = cases(args.quick, args.noise, dynid_params, tuple(args.systems), tuple(args.samples))
    started = time.perf_counter()
    with OtherLoad() as load:
        rows = run_all(todo, args.jobs, args.timeout)
    sweep_s = time.perf_counter() - started
    cli = None
    if not args.no_cli:
        from cli_timing import time_cli

        cli = time_cli(repeats=1 if args.quick else 3)
    computed = compute(rows)
    document = {
        "machine": machine(),
        "config": {
            "quick": args.quick,
            "diagnostic": bool(args.dynid_param) or sorted(args.noise) != sorted(NOISES)
            or bool(args.systems) or sorted(args.samples) != sorted(LENGTHS),
            "jobs": args.jobs,
            "timeout_s": args.timeout,
            **describe(rows),
            "dynid_call": f'dynid.fit(Dataset.from_arrays(x, t=t), "symbolic", {dynid_params!r}, seed=0)',
            "pysindy_call": "ps.SINDy().fit(x, t=dt)",
        },
        "timings": {"wall_s": time.perf_counter() - started, "sweep_s": sweep_s,
                    "sweep_other_load_cores": load.cores, "cli": cli},
        "aggregates": computed,
        "goals": goals(computed, None if cli is None else cli["cli"]["median_s"]),
        "method": METHOD,
        "rows": rows,
    }
    write(stem, document)
    print(f"done in {time.perf_counter() - started:.0f} s")


def describe(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the rows cover: systems per category, noise levels, record lengths."""
    return {
        "systems": len({r["system"] for r in rows}),
        "polynomial": len({r["system"] for r in rows if r["category"] == "polynomial"}),
        "non_polynomial": len({r["system"] for r in rows if r["category"] == "non-polynomial"}),
        "noises": sorted({r["noise"] for r in rows}),
        "lengths": sorted({r["samples"] for r in rows}),
    }


def rerender(document: dict[str, Any]) -> dict[str, Any]:
    """The document with aggregates and goals recomputed from its rows (JSON nulls -> NaN)."""
    rows = _nan(document["rows"])
    cli = document["timings"].get("cli")
    computed = compute(rows)
    return {**document, "config": {**document["config"], **describe(rows)},
            "aggregates": computed, "method": METHOD,
            "goals": goals(computed, None if cli is None else cli["cli"]["median_s"])}


def _nan(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (math.nan if v is None and k in ("coefficient_error", "seconds") else _nan(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_nan(v) for v in value]
    return value


def write(stem: str, document: dict[str, Any]) -> None:
    document = _jsonable(document)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(document, indent=1, allow_nan=False) + "\n")
    text = markdown(document)
    (RESULTS / f"{stem}.md").write_text(text)
    print(text.split("## Per system")[0])
    print(f"wrote {RESULTS / stem}.json and .md")


if __name__ == "__main__":
    main()
