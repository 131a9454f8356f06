"""Can the data say when to use ``crosspred`` instead of ``granger``? Candidate statistics for a
``--method auto`` default (issue 16: default >= 0.75 on CausalDynamics coupled graphs without
falling below granger on Lorenz-96, VAR and the "simple" family), measured on every data set a
switch must get right:

  coupled   CausalDynamics coupled graphs (``causal_causaldynamics.py generate``): crosspred's
            data, where granger is near chance; the three seen sets (``--data``; never the
            held-out set reserved for a finished method)
  simple    CausalDynamics simple systems (one 3-D dysts flow, all coordinates observed):
            granger's, where crosspred is below it
  L96, VAR  Lorenz-96 at several sizes and sampling steps, sparse VAR(3) and a strongly
            autocorrelated VAR(1): granger's
  mixture   Lorenz and Rossler roots mixed at the same sample into children, an unrelated Chen
            node (as in tests/test_causal_crosspred.py): instantaneous by construction

Per data set: AUROC of granger and crosspred (``discover(data, M)``, defaults), and

  glag      mean over targets of log(MSE own past / MSE every variable's past), both out of
            sample (``crosspred.blocked_cv_r2``, ridge 1e-6, lags 1..5): does the past of the
            others improve a target's forecast, as Granger's tests assume?
  glag_rest the same over the targets that are not periodic to the eye of crosspred: its
            own-past predictability 20 samples ahead (``own_r2``) below 0.999
  lag0_gain mean over targets of the best single other node's gain with lags 0..4 less its
            best gain with lags 1..5 (log MSE, own past in both): the instantaneous part
  resid_r2  median over targets of the R^2 of a VAR(5) residual on the other residuals at the
            same sample (lag-0 residual dependence, Geweke's instantaneous feedback)
  dep_max   crosspred's largest dependence (mean out-of-sample R^2 of a pair, both ways)

    PYTHONPATH=. python benchmarks/causal_auto_study.py   # ~5 min on the shared 2-core machine

Writes benchmarks/results/causal_auto_study.json and prints the table; findings in
benchmarks/README.md, "A default that switches to crosspred".
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
RESULTS = HERE / "results" / "causal_auto_study.json"
SEEN = ("/tmp/cdyn-data", "/tmp/cdyn-heldout", "/tmp/cdyn-heldout2")
LAGS = 5
RIDGE = 1e-6  # near least squares: the statistic is about the model, not about shrinkage
FOLDS = 5
PERIODIC = 0.999  # crosspred own_r2 (20 samples ahead) above which a target counts as periodic


def causaldynamics(dirs: list[str]):  # type: ignore[no-untyped-def]
    for folder in dirs:
        for meta_path in sorted(Path(folder).glob("*.json")):
            meta = json.loads(meta_path.read_text())
            x = np.loadtxt(meta_path.with_suffix(".csv"), delimiter=",", skiprows=1, ndmin=2)
            yield meta["family"], f"{Path(folder).name}/{meta_path.stem}", x, \
                np.asarray(meta["adjacency"], dtype=int), 1.0


def lorenz96(n: int, forcing: float, dt: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from dynid.systems import simulate

    x0 = forcing + 0.1 * np.random.default_rng(seed).standard_normal(n)
    x = simulate("lorenz96", n=1500, dt=dt, params={"N": n, "F": forcing}, x0=x0).x[500:]
    truth = np.zeros((n, n), dtype=int)
    for i in range(n):
        truth[[(i - 2) % n, (i - 1) % n, (i + 1) % n], i] = 1
    return x, truth


def var1(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Six AR(1) series at 0.95 with two links 0 -> 1 and 2 -> 3 at lag 1, unit noise."""
    rng = np.random.default_rng(seed)
    a = 0.95 * np.eye(6)
    a[1, 0] = a[3, 2] = 0.3  # [target, source]
    x = np.zeros((1200, 6))
    for k in range(1, len(x)):
        x[k] = a @ x[k - 1] + rng.standard_normal(6)
    truth = (a.T != 0).astype(int)
    np.fill_diagonal(truth, 0)
    return x[200:], truth


def mixtures() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Children that are, at each sample, linear maps of Lorenz (A) and Rossler (B) 3-D states;
    Chen (D) unrelated; first coordinates observed. mixture-4: C(A, B); mixture-6 adds E(A) and
    F(B)."""
    from dynid.systems import simulate

    def z(a: np.ndarray) -> np.ndarray:
        return (a - a.mean(axis=0)) / a.std(axis=0)

    a = z(simulate("lorenz", n=1000, dt=0.01, seed=0).x)
    b = z(simulate("rossler", n=1000, dt=0.1, seed=10).x)
    d = z(simulate("chen", n=1000, dt=0.005, seed=20).x)
    c = a @ [1.0, 0.5, 0.0] + b @ [-0.8, 0.6, 0.3]
    e, f = a @ [0.3, -1.0, 0.6], b @ [0.2, 0.9, -0.5]
    out = []
    for name, cols, links in (("mixture-4", [c, a[:, 0], d[:, 0], b[:, 0]], [(1, 0), (3, 0)]),
                              ("mixture-6", [c, a[:, 0], d[:, 0], b[:, 0], e, f],
                               [(1, 0), (3, 0), (1, 4), (3, 5)])):
        truth = np.zeros((len(cols), len(cols)), dtype=int)
        for s, t in links:
            truth[s, t] = 1
        out.append((name, np.column_stack(cols), truth))
    return out


def datasets(dirs: list[str]):  # type: ignore[no-untyped-def]
    import causal_lorenz96 as l96

    yield from causaldynamics(dirs)
    for n, forcing, dt, seeds in ((10, 10.0, 0.05, (0, 1, 2)), (10, 40.0, 0.05, (0, 1)),
                                  (10, 10.0, 0.01, (0,)), (20, 10.0, 0.01, (0,)),
                                  (40, 10.0, 0.05, (0,)), (5, 10.0, 0.05, (0,))):
        for seed in seeds:
            x, truth = lorenz96(n, forcing, dt, seed)
            yield "L96", f"L96 N={n} F={forcing:g} dt={dt} seed {seed}", x, truth, dt
    for seed in (0, 1):
        x, truth = l96.sparse_var3(10, 1000, seed)
        yield "VAR", f"VAR(3) N=10 seed {seed}", x, truth, 1.0
    x, truth = var1(0)
    yield "VAR", "VAR(1) rho 0.95 N=6", x, truth, 1.0
    for name, x, truth in mixtures():
        yield "mixture", name, x, truth, 1.0


def statistics(x: np.ndarray, periodic: np.ndarray) -> dict[str, float]:
    """The statistics of the module docstring for one record ``x`` (n, d); ``periodic`` (d,)
    bool: the targets ``glag_rest`` leaves out."""
    from dynid.causal.crosspred import blocked_cv_r2
    from dynid.linear.design import lagged_design

    z = (x - x.mean(axis=0)) / x.std(axis=0)
    d = z.shape[1]
    design = lagged_design([z], LAGS, trend=False)
    past, now = design.regressors, design.targets  # columns (lag - 1) * d + source

    def cols(i: int, lags: range) -> list[int]:
        return [(k - 1) * d + i for k in lags]

    def mse(regressors: np.ndarray, j: int) -> float:
        return 1.0 - float(blocked_cv_r2(regressors, now[:, [j]], FOLDS, RIDGE)[0])

    glag, lag0_gain = [], []
    for j in range(d):
        own = past[:, cols(j, range(1, LAGS + 1))]
        own_mse = mse(own, j)
        glag.append(np.log(own_mse / mse(past, j)))
        best_now = best_past = -np.inf
        for i in range(d):
            if i == j:
                continue
            with_past = np.column_stack([own, past[:, cols(i, range(1, LAGS + 1))]])
            with_now = np.column_stack([own, now[:, i], past[:, cols(i, range(1, LAGS))]])
            best_past = max(best_past, np.log(own_mse / mse(with_past, j)))
            best_now = max(best_now, np.log(own_mse / mse(with_now, j)))
        lag0_gain.append(best_now - best_past)
    glag_a, rest = np.array(glag), ~periodic
    a = np.column_stack([np.ones(len(now)), past])
    resid = now - a @ np.linalg.lstsq(a, now, rcond=None)[0]
    precision = np.linalg.pinv(np.corrcoef(resid, rowvar=False))
    return {"glag": float(glag_a.mean()),
            "glag_rest": float(glag_a[rest].mean()) if rest.any() else float("nan"),
            "periodic_targets": int(periodic.sum()),
            "lag0_gain": float(np.mean(lag0_gain)),
            "resid_r2": float(np.median(1.0 - 1.0 / np.diag(precision)))}


def run(dirs: list[str]) -> list[dict]:
    import dynid
    from dynid.causal import discover
    from dynid.metrics.causal import auroc

    rows = []
    for family, name, x, truth, dt in datasets(dirs):
        data = dynid.Dataset.from_arrays(x, dt=dt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # granger's redundant-column warnings
            granger = discover(data, "granger")
        cross = discover(data, "crosspred")
        dep = np.where(np.eye(x.shape[1], dtype=bool), -np.inf, cross.extra["dependence"])
        row = {"family": family, "data": name,
               "granger": round(auroc(granger.score_matrix, truth), 3),
               "crosspred": round(auroc(cross.score_matrix, truth), 3),
               "dep_max": round(float(dep.max()), 3),
               **{k: (round(v, 3) if isinstance(v, float) else v)
                  for k, v in statistics(x, cross.extra["own_r2"] > PERIODIC).items()}}
        rows.append(row)
        print("  ".join(f"{k} {v}" for k, v in row.items()), file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=",".join(SEEN),
                        help="comma-separated CausalDynamics folders (seen sets only)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import causal_lorenz96 as l96

    l96.limit_threads(1)
    start = time.time()
    rows = run([d for d in args.data.split(",") if d])
    result = {"machine": l96.machine_info(), "seconds": round(time.time() - start, 1),
              "settings": {"lags": LAGS, "ridge": RIDGE, "folds": FOLDS, "periodic": PERIODIC},
              "rows": rows}
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(args.out)
    keys = ("granger", "crosspred", "glag", "glag_rest", "lag0_gain", "resid_r2", "dep_max")
    print("| family | " + " | ".join(keys) + " |")
    for family in dict.fromkeys(r["family"] for r in rows):
        cells = []
        for key in keys:
            values = [r[key] for r in rows if r["family"] == family and r[key] == r[key]]
            cells.append(f"{min(values):.2f} .. {max(values):.2f}" if values else "-")
        print(f"| {family} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
