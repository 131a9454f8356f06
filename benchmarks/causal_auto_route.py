"""A default that routes by what the data show (issue 16, round 9): the statistics a ``--method
auto`` could route on, and the AUROC of each method it could route to, per seen data set.

Data (seen only): the CausalDynamics folder ``--data`` (coupled graphs and simple systems; never
a held-out folder), Lorenz-96 N=10 F=10 T=1000 seeds 0-4 of ``causal_lorenz96.py``'s generator,
and the other Lorenz-96 sizes / forcings / steps, sparse VAR(3), VAR(1) and the two hand-built
instantaneous mixtures of ``causal_auto_study.py``; Lorenz-63 and Lorenz-96 with measurement noise.

Per data set: AUROC of granger, sindy, consensus and crosspred (``discover(data, M, seed=0)``,
defaults), each call's CPU seconds in this process (pools' workers not counted) and wall
seconds, and

  sindy_r2_min  smallest held-out R^2 of sindy's selected equations (``extra["validation_r2"]``)
  sindy_terms   largest number of terms an equation keeps
  libraries     the libraries chosen
  inst_*        ``dynid.causal.auto.instantaneous`` per target, for its strongest source: the
                share of the held-out error of a VAR on every variable's lags 1..max_lag that
                the source's present removes, its Diebold-Mariano z; the smallest Bonferroni p
                over the pairs
  lag0_gain, resid_r2, glag   ``causal_auto_study.statistics`` (the earlier study's)
  dep_max       crosspred's largest pair dependence

    PYTHONPATH=. python benchmarks/causal_auto_route.py --data /tmp/cdyn-data

Rows are cached in ``--cache`` (one JSON line per data set, keyed by name) so that a rerun only
computes the data sets not yet there; writes benchmarks/results/causal_auto_route.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "causal_auto_route.json"
METHODS = ("granger", "sindy", "consensus", "crosspred", "auto")


def datasets(folder: str):  # type: ignore[no-untyped-def]
    """(family, name, x, truth, dt) of every seen data set."""
    import causal_auto_study as study
    import causal_lorenz96 as l96

    yield from study.causaldynamics([folder])
    for seed in range(5):
        x, truth = l96.lorenz96(10, 10.0, 1000, seed)
        yield "L96-10", f"L96 N=10 F=10 T=1000 seed {seed}", x, truth, l96.DT
    for n, forcing, dt, seeds in ((10, 40.0, 0.05, (0, 1)), (10, 10.0, 0.01, (0,)),
                                  (20, 10.0, 0.01, (0,)), (20, 10.0, 0.05, (0,)),
                                  (40, 10.0, 0.05, (0,)), (5, 10.0, 0.05, (0,))):
        for seed in seeds:
            x, truth = study.lorenz96(n, forcing, dt, seed)
            yield "L96", f"L96 N={n} F={forcing:g} dt={dt} seed {seed}", x, truth, dt
    for seed in (0, 1):
        x, truth = l96.sparse_var3(10, 1000, seed)
        yield "VAR", f"VAR(3) N=10 seed {seed}", x, truth, 1.0
    x, truth = study.var1(0)
    yield "VAR", "VAR(1) rho 0.95 N=6", x, truth, 1.0
    for name, x, truth in study.mixtures():
        yield "mixture", name, x, truth, 1.0
    yield from noisy()


def noisy():  # type: ignore[no-untyped-def]
    """Fully observed flows with measurement noise (a fraction of each column's standard
    deviation, Gaussian): Lorenz-63 (``simulate("lorenz", n=1000, seed=1)``) and Lorenz-96 N=10
    F=10 seed 0."""
    import causal_lorenz96 as l96
    from dynid.systems import simulate

    sim = simulate("lorenz", n=1000, seed=1)
    lorenz = np.zeros((3, 3), dtype=int)
    for source, target in ((1, 0), (0, 1), (2, 1), (0, 2), (1, 2)):
        lorenz[source, target] = 1
    for level in (0.01, 0.05, 0.1):
        noise = level * sim.x.std(axis=0) * np.random.default_rng(5).standard_normal(sim.x.shape)
        yield "noisy", f"Lorenz-63 noise {level:.0%}", sim.x + noise, lorenz, float(sim.t[1] - sim.t[0])
    x, truth = l96.lorenz96(10, 10.0, 1000, 0)
    for level in (0.01, 0.05):
        noise = level * x.std(axis=0) * np.random.default_rng(6).standard_normal(x.shape)
        yield "noisy", f"L96 N=10 F=10 seed 0 noise {level:.0%}", x + noise, truth, l96.DT


def measure(family: str, name: str, x: np.ndarray, truth: np.ndarray, dt: float,
            methods: tuple[str, ...], row: dict, rerun: tuple[str, ...] = ()) -> dict:
    """``row`` with the AUROC (and route, statistics) of each of ``methods`` not in it yet."""
    import causal_auto_study as study
    import dynid
    from dynid.causal import discover
    from dynid.causal.auto import instantaneous
    from dynid.metrics.causal import auroc

    data = dynid.Dataset.from_arrays(x, dt=dt)
    row = {"family": family, "data": name, "shape": list(x.shape), **row}
    graphs = {}
    for method in (m for m in methods if m not in row or m in rerun):
        start, wall = time.process_time(), time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                graphs[method] = discover(data, method, seed=0)
            except Exception as error:  # noqa: BLE001 - a refusal is a result here
                row[method] = f"error: {error}"
                continue
        row[f"{method}_cpu_s"] = round(time.process_time() - start, 2)
        row[f"{method}_wall_s"] = round(time.perf_counter() - wall, 2)
        row[method] = round(auroc(graphs[method].score_matrix, truth), 3)
    if "sindy" in graphs:
        extra = graphs["sindy"].extra
        row["sindy_r2"] = [round(v, 4) for v in extra["validation_r2"]]
        row["sindy_r2_min"] = round(min(extra["validation_r2"]), 4)
        row["sindy_terms"] = max(extra["n_terms"])
        row["libraries"] = sorted(set(extra["libraries"]))
        row["formulation"] = extra["formulation"]
    if "auto" in graphs:
        row["route"] = graphs["auto"].extra["auto"]["method"]
        row["route_why"] = graphs["auto"].extra["auto"]["reason"]
    if "inst_z" in row:
        return row
    found = instantaneous(data, max_lag=5)
    # Per target, its strongest same-sample source's share and z.
    best = None if found is None else (np.argmax(found.z, axis=0), np.arange(x.shape[1]))
    row["inst_share"] = None if found is None else [round(v, 4) for v in found.share[best]]
    row["inst_z"] = None if found is None else [round(v, 2) for v in found.z[best]]
    row["inst_p_min"] = None if found is None else float(f"{found.p_value.min():.3g}")
    if "crosspred" in graphs:
        dep = np.where(np.eye(x.shape[1], dtype=bool), -np.inf, graphs["crosspred"].extra["dependence"])
        row["dep_max"] = round(float(dep.max()), 3)
    periodic = graphs["crosspred"].extra["own_r2"] > study.PERIODIC if "crosspred" in graphs else \
        np.zeros(x.shape[1], dtype=bool)
    row.update({k: (round(v, 3) if isinstance(v, float) else v)
                for k, v in study.statistics(x, periodic).items()})
    return row


def markdown(rows: list[dict]) -> str:
    """Per data set: route, the statistics it looked at, AUROC of auto, granger and the routed
    method; then per family the means and the routes taken."""
    lines = ["| data | route | sindy min R^2 | max DM z (min p) | auto | granger | sindy | consensus |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        z = "-" if not r.get("inst_z") else f"{max(r['inst_z']):.1f} ({r['inst_p_min']:.2g})"
        stage_b = "-" if r["route"] == "sindy" else z  # (b) is not computed once (a) routes
        lines.append(f"| {r['data']} | {r['route']} | {r.get('sindy_r2_min', float('nan')):.3f} | {stage_b} "
                     f"| {r['auto']:.3f} | {r['granger']:.3f} | {r['sindy']:.3f} | {r['consensus']:.3f} |")
    lines += ["", "| family | data sets | routes | auto | granger | sindy | consensus |",
              "|---|---:|---|---:|---:|---:|---:|"]
    for family in dict.fromkeys(r["family"] for r in rows):
        group = [r for r in rows if r["family"] == family]
        routes = ", ".join(f"{m} {sum(r['route'] == m for r in group)}" for m in ("sindy", "consensus", "granger")
                           if any(r["route"] == m for r in group))
        means = " | ".join(f"{np.mean([r[m] for r in group]):.3f}" for m in ("auto", "granger", "sindy", "consensus"))
        lines.append(f"| {family} | {len(group)} | {routes} | {means} |")
    return "\n".join(lines)


def speed(files: list[str], out: Path) -> None:
    """CPU seconds (user + system, the command and its worker processes) of ``dynid
    discover-causal FILE`` with the default method, one BLAS thread, for each of ``files``."""
    import os
    import resource
    import subprocess

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    rows = []
    for path in files:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "dynid", "discover-causal", path, "--json"],
                              capture_output=True, env=env, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows.append({"data": path, "route": json.loads(done.stdout)["auto"]["method"],
                     "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
                     "wall_s": round(time.perf_counter() - wall, 2)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    out.write_text(json.dumps({"rows": rows}, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="/tmp/cdyn-data", help="CausalDynamics folder (seen)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/causal_auto_route.jsonl"))
    parser.add_argument("--only", default="", help="comma-separated families to run")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="methods to run where a cached row lacks them")
    parser.add_argument("--rerun", default="", help="methods to run again even where cached")
    parser.add_argument("--speed", default="", help="comma-separated CSV files: time the CLI default on each")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import causal_lorenz96 as l96

    l96.limit_threads(1)
    if args.speed:
        speed(args.speed.split(","), HERE / "results" / "causal_auto_speed.json")
        return 0
    done = {}
    if args.cache.exists():
        for line in args.cache.read_text().splitlines():
            row = json.loads(line)
            done[row["data"]] = row
    only = {f for f in args.only.split(",") if f}
    methods = tuple(m for m in args.methods.split(",") if m)
    rerun = tuple(m for m in args.rerun.split(",") if m)
    for family, name, x, truth, dt in datasets(args.data):
        old = done.get(name, {})
        if (only and family not in only) or (all(m in old for m in methods) and not rerun
                                             and "inst_z" in old):
            continue
        done[name] = measure(family, name, x, truth, dt, methods, old, rerun)
        with args.cache.open("a") as handle:  # a later line for the same data set wins
            handle.write(json.dumps(done[name]) + "\n")
        print(json.dumps(done[name]), file=sys.stderr, flush=True)
    order = {family: k for k, family in enumerate(("coupled", "simple", "L96-10", "L96", "VAR", "mixture", "noisy"))}
    rows = sorted(done.values(), key=lambda r: order.get(r["family"], 99))
    result = {"machine": l96.machine_info(), "rows": rows}
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(args.out)
    print(markdown([r for r in rows if "route" in r]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
