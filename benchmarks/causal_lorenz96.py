"""Causal discovery on Lorenz-96 and a sparse VAR(3): dynid's methods against tigramite PCMCI
(ParCorr) and statsmodels Granger tests, AUROC / AUPRC / wall time, in one run.

    python benchmarks/causal_lorenz96.py            # full grid, 3 seeds (~10-15 min, 2 cores)
    python benchmarks/causal_lorenz96.py --quick    # smoke run (< 3 min); writes *-quick files

Data
  Lorenz-96 (``dynid.systems.simulate("lorenz96")``), N in {10, 20}, F in {10, 40},
  T in {500, 1000}, dt = 0.05 (Tank et al., "Neural Granger Causality", TPAMI 2021; dynid's
  default dt is 0.01). Per seed the start is x0 = F + 0.1 * N(0, 1) per site; the first BURN
  samples are simulated and dropped. Truth: x_{i-2}, x_{i-1}, x_{i+1} (mod N) -> x_i.
  Sparse VAR(3), N = 20, T in {500, 1000}: built here (``sparse_var3``): lag-1 self-dependence
  0.2-0.5 on every variable plus 2N random cross-links (source != target) at a random lag 1-3,
  |coefficient| 0.2-0.45 with random sign, redrawn until the companion matrix has spectral
  radius <= 0.9; Gaussian innovations, 500 burn-in samples dropped. Truth: the cross-links.

Methods (max_lag = tau_max = 3 everywhere, including the VAR(3), whose true order it is;
alpha = 0.05 with Benjamini-Hochberg where a method has p-values)
  dynid-granger       ``discover(data, "granger")``: conditional VAR(3); its score is the joint
                      F-test over all lags of a pair, BH-adjusted, -log10 p (since issue 16;
                      before, the smallest per-lag p, and the joint test was a separate column)
  dynid-granger-gl    ``discover(data, "granger", ["penalty=group-lasso"])`` (skipped if rejected)
  dynid-pcmci         ``discover(data, "pcmci")``: ParCorr, pc_alpha 0.2
  dynid-neural        ``discover(data, "neural")``: cMLP, default options (lam chosen per
                      target on a held-out path, 1-SE rule)
  dynid-neural-lam    ``discover(data, "neural", ["lam=0.01"])``: one fit at a fixed penalty
                      (Tank et al. also score AUROC from weight norms at fixed penalties)
  dynid-neural-2t     dynid-neural with torch at 2 threads (all else runs at 1; see THREADS)
  dynid-te, -ccm      default options
  tigramite-pcmci     ``PCMCI(DataFrame(x), ParCorr()).run_pcmci(tau_min=1, tau_max=3,
                      pc_alpha=0.2)``; fresh objects inside the timed call
  sm-granger-biv      statsmodels ``grangercausalitytests(x[:, [target, source]], maxlag=3)`` per
                      ordered pair (bivariate, lag orders 1..3, ssr F-test)
  sm-var-cond         statsmodels ``VAR(x).fit(3)`` once, then ``test_causality(target,
                      [source], kind="f")`` per ordered pair (conditional on all others)
Which datasets each method runs on: ``Plan.runs`` / ``RULES`` (also in the output).
dynid-neural-2t, -te and -ccm run once (smallest setting, first seed) in a child process with a
60 s budget (``GUARDED``) and are recorded as skipped past it.

Threads: BLAS (threadpoolctl) and torch run single-threaded (``--threads``, default 1). The
machine this was written for has 2 cores shared with other jobs; at 2 threads OpenBLAS/OpenMP
workers spin for a busy core and small problems get 2-20x slower, which would swamp the
comparison. Every method gets the same setting. Imports and first-call costs are paid by an
untimed warm-up on a small VAR before the run.

Scores: every dynid method's own ``score_matrix``. The baselines get dynid's summary: p-values
BH-adjusted over the off-diagonal family (as dynid does), then ``-log10`` of the smallest over
lags (lag orders for the bivariate test), floored at 1e-300 (score <= 300). The adjustment and
summary are outside the timed calls (they take microseconds). AUROC / AUPRC over the
off-diagonal entries: ``dynid.metrics.causal`` (sklearn as fallback). Times: wall seconds of the
call alone (inputs are built outside), on a machine shared with other jobs; the load average is
recorded before and after.

Writes benchmarks/results/causal_lorenz96.json (every run's numbers + machine info) and
causal_lorenz96.md (tables); ``--quick`` writes causal_lorenz96-quick.{json,md}.
Goals (issue "dynid discover-causal"): best dynid AUROC >= 0.98 on L96 N=20 F=10 T=1000 and
>= 0.90 on F=40 T=500; dynid PCMCI >= 5x faster than tigramite (time ratio reported here; link
identity is checked by causal_pcmci_vs_tigramite.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

import dynid
from dynid.causal import adjust_pvalues, discover
from dynid.systems import simulate

try:
    from dynid.metrics.causal import auprc as _auprc
    from dynid.metrics.causal import auroc as _auroc

    METRICS_SOURCE = "dynid.metrics.causal"
except ImportError:  # pragma: no cover - only before dynid.metrics.causal exists
    from sklearn.metrics import average_precision_score, roc_auc_score

    def _flat(score: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = ~np.eye(score.shape[0], dtype=bool)
        return np.asarray(score, float)[keep], np.asarray(truth)[keep].astype(int)

    def _auroc(score: np.ndarray, truth: np.ndarray) -> float:
        return float(roc_auc_score(*_flat(score, truth)[::-1]))

    def _auprc(score: np.ndarray, truth: np.ndarray) -> float:
        return float(average_precision_score(*_flat(score, truth)[::-1]))

    METRICS_SOURCE = "sklearn.metrics"

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DT = 0.05
BURN = 500
X0_SPREAD = 0.1
MAX_LAG = 3
PC_ALPHA = 0.2
ALPHA = 0.05
P_FLOOR = 1e-300
GOALS = {"auroc_n20_f10_t1000": 0.98, "auroc_f40_t500": 0.90, "pcmci_speedup": 5.0}

NEURAL_LAM = 0.01
DYNID_METHODS = ["dynid-granger", "dynid-granger-gl", "dynid-pcmci",
                 "dynid-neural", "dynid-neural-lam", "dynid-neural-2t", "dynid-te", "dynid-ccm"]
BASELINES = ["tigramite-pcmci", "sm-granger-biv", "sm-var-cond"]
METHODS = DYNID_METHODS + BASELINES
DYNID_CALLS: dict[str, tuple[str, list[str]]] = {
    "dynid-granger": ("granger", []),
    "dynid-granger-gl": ("granger", ["penalty=group-lasso"]),
    "dynid-pcmci": ("pcmci", []),
    "dynid-neural-lam": ("neural", [f"lam={NEURAL_LAM:g}"]),
    "dynid-neural": ("neural", []),
    "dynid-neural-2t": ("neural", []),
    "dynid-te": ("te", []),
    "dynid-ccm": ("ccm", []),
}
LEGEND = {
    "dynid-granger": "dynid conditional VAR Granger; score -log10 BH-p of the joint F-test",
    "dynid-granger-gl": "dynid granger -p penalty=group-lasso (score: entry penalty)",
    "dynid-pcmci": "dynid PCMCI ParCorr, pc_alpha 0.2",
    "dynid-neural": "dynid cMLP neural Granger, defaults (lam path + 1-SE); score: weight norms",
    "dynid-neural-lam": f"dynid cMLP at fixed -p lam={NEURAL_LAM:g} (one fit)",
    "dynid-neural-2t": "dynid-neural with torch at 2 threads",
    "dynid-te": "dynid transfer entropy (KSG), defaults",
    "dynid-ccm": "dynid convergent cross mapping, defaults",
    "tigramite-pcmci": "tigramite 5.2 PCMCI(ParCorr) run_pcmci(tau_min=1, tau_max=3, pc_alpha=0.2)",
    "sm-granger-biv": "statsmodels grangercausalitytests per pair (bivariate), ssr F",
    "sm-var-cond": "statsmodels VAR(3).test_causality per pair (conditional), F",
}
# Run in a child process with a timeout (seconds); over it, the run is recorded as skipped.
GUARDED = {"dynid-neural-2t": 60.0, "dynid-te": 60.0, "dynid-ccm": 60.0}
# Threads for BLAS (threadpoolctl) and torch; --threads. On 2 cores shared with other jobs, 2
# threads oversubscribe: OpenBLAS/OpenMP workers spin for a core, and small problems get 2-20x
# slower (dynid-pcmci, tigramite, statsmodels VAR and torch alike). "dynid-neural-2t" is the
# default neural method with torch at 2 threads, run once to show this.
THREADS = 1


# ---------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Setting:
    system: str  # "lorenz96" or "var3"
    n_vars: int
    forcing: float | None
    n_samples: int

    @property
    def label(self) -> str:
        if self.system == "lorenz96":
            return f"L96 N={self.n_vars} F={self.forcing:g} T={self.n_samples}"
        return f"VAR(3) N={self.n_vars} T={self.n_samples}"


def lorenz96(n_vars: int, forcing: float, n_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(T, N) Lorenz-96 samples dt = DT apart after a burn-in, and the true graph [source][target]."""
    rng = np.random.default_rng([96, seed])
    x0 = forcing + X0_SPREAD * rng.standard_normal(n_vars)
    sim = simulate("lorenz96", n=n_samples + BURN, dt=DT, params={"N": n_vars, "F": forcing},
                   seed=seed, x0=[float(v) for v in x0])
    truth = np.zeros((n_vars, n_vars), dtype=int)
    for i in range(n_vars):
        for offset in (-2, -1, 1):
            truth[(i + offset) % n_vars, i] = 1
    return np.ascontiguousarray(sim.x[BURN:]), truth


def sparse_var3(n_vars: int, n_samples: int, seed: int, burn: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """(T, N) samples of a random stable sparse VAR(3) and its true cross-link graph."""
    rng = np.random.default_rng([3, seed])
    n_links = 2 * n_vars
    pairs = [(s, t) for s in range(n_vars) for t in range(n_vars) if s != t]
    while True:
        coef = np.zeros((3, n_vars, n_vars))  # [lag - 1, target, source]
        coef[0][np.diag_indices(n_vars)] = rng.uniform(0.2, 0.5, n_vars)
        chosen = rng.choice(len(pairs), n_links, replace=False)
        lags = rng.integers(0, 3, n_links)
        values = rng.choice([-1.0, 1.0], n_links) * rng.uniform(0.2, 0.45, n_links)
        for k, lag, value in zip(chosen, lags, values):
            s, t = pairs[k]
            coef[lag, t, s] = value
        companion = np.zeros((3 * n_vars, 3 * n_vars))
        companion[:n_vars] = np.hstack(list(coef))
        companion[n_vars:, :-n_vars] = np.eye(2 * n_vars)
        if np.max(np.abs(np.linalg.eigvals(companion))) <= 0.9:
            break
    x = np.zeros((n_samples + burn, n_vars))
    noise = rng.standard_normal(x.shape)
    for t in range(3, len(x)):
        x[t] = coef[0] @ x[t - 1] + coef[1] @ x[t - 2] + coef[2] @ x[t - 3] + noise[t]
    truth = (np.abs(coef).sum(axis=0).T > 0).astype(int)  # [source][target]
    np.fill_diagonal(truth, 0)
    return np.ascontiguousarray(x[burn:]), truth


def make_data(setting: Setting, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if setting.system == "lorenz96":
        assert setting.forcing is not None
        return lorenz96(setting.n_vars, setting.forcing, setting.n_samples, seed)
    return sparse_var3(setting.n_vars, setting.n_samples, seed)


# ------------------------------------------------------------------------------------ methods


def summary_score(p: np.ndarray) -> np.ndarray:
    """dynid's summary of p-values (d, d, K) [source][target][lag]: BH over the off-diagonal
    entries, -log10 of the smallest over lags, floored at 1e-300, 0 on the diagonal."""
    d = p.shape[0]
    cross = ~np.eye(d, dtype=bool)
    adj = np.ones_like(p)
    adj[cross] = adjust_pvalues(p[cross].ravel(), "bh").reshape(p[cross].shape)
    score = -np.log10(np.maximum(adj.min(axis=2), P_FLOOR))
    return np.where(cross, score, 0.0)


def run_dynid(method: str, x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    name, params = DYNID_CALLS[method]
    data = dynid.Dataset.from_arrays(x, dt=DT)
    if name == "neural":
        import torch

        torch.set_num_threads(2 if method == "dynid-neural-2t" else THREADS)
    start = time.perf_counter()
    graph = discover(data, name, params, max_lag=MAX_LAG, alpha=ALPHA, seed=seed, device="cpu")
    elapsed = time.perf_counter() - start
    cross = ~np.eye(x.shape[1], dtype=bool)
    info: dict[str, Any] = {"n_significant": int(np.asarray(graph.adjacency)[cross].sum())}
    return np.asarray(graph.score_matrix, dtype=float), elapsed, info


def run_tigramite(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    from tigramite.data_processing import DataFrame
    from tigramite.independence_tests.parcorr import ParCorr
    from tigramite.pcmci import PCMCI

    frame = DataFrame(x)
    start = time.perf_counter()
    pcmci = PCMCI(dataframe=frame, cond_ind_test=ParCorr(), verbosity=0)
    out = pcmci.run_pcmci(tau_min=1, tau_max=MAX_LAG, pc_alpha=PC_ALPHA, alpha_level=ALPHA)
    elapsed = time.perf_counter() - start
    p = np.asarray(out["p_matrix"])[:, :, 1:]  # [source][target][lag], lags 1..tau_max
    score = summary_score(p)
    return score, elapsed, {"n_significant": int((score >= -math.log10(ALPHA)).sum())}


def run_sm_bivariate(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    from statsmodels.tsa.stattools import grangercausalitytests

    d = x.shape[1]
    p = np.ones((d, d, MAX_LAG))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(d):
            for t in range(d):
                if s == t:
                    continue
                res = grangercausalitytests(x[:, [t, s]], maxlag=MAX_LAG)
                for lag in range(1, MAX_LAG + 1):
                    p[s, t, lag - 1] = res[lag][0]["ssr_ftest"][1]
    elapsed = time.perf_counter() - start
    score = summary_score(p)
    return score, elapsed, {"n_significant": int((score >= -math.log10(ALPHA)).sum())}


def run_sm_var(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    from statsmodels.tsa.api import VAR

    d = x.shape[1]
    p = np.ones((d, d, 1))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = VAR(x).fit(MAX_LAG)
        for s in range(d):
            for t in range(d):
                if s != t:
                    p[s, t, 0] = fit.test_causality(t, [s], kind="f").pvalue
    elapsed = time.perf_counter() - start
    score = summary_score(p)
    return score, elapsed, {"n_significant": int((score >= -math.log10(ALPHA)).sum())}


RUNNERS: dict[str, Callable[[np.ndarray, int], tuple[np.ndarray, float, dict[str, Any]]]] = {
    "tigramite-pcmci": run_tigramite,
    "sm-granger-biv": run_sm_bivariate,
    "sm-var-cond": run_sm_var,
}


def call(method: str, x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    if method in DYNID_CALLS:
        return run_dynid(method, x, seed)
    return RUNNERS[method](x, seed)


def _child(conn: Any, method: str, x: np.ndarray, seed: int, threads: int) -> None:
    global THREADS
    THREADS = threads
    limit_threads(threads)
    try:
        conn.send(("ok", call(method, x, seed)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def call_with_timeout(method: str, x: np.ndarray, seed: int, timeout: float) -> tuple[str, Any]:
    """Run ``call`` in a child process; ("timeout", None) if it outlives ``timeout`` seconds.

    spawn, not fork: a forked child of a parent that already ran torch/OpenMP can hang."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, method, x, seed, THREADS),
                       daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(timeout):
            return parent.recv()
        return "timeout", None
    except EOFError:
        return "error", f"child exited with code {proc.exitcode}"
    finally:
        if proc.is_alive():
            proc.terminate()  # our own child, by its handle
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        parent.close()


_LIMITS: list[Any] = []


def limit_threads(n: int) -> None:
    """BLAS/OpenMP pools of this process to ``n`` threads (torch: in ``run_dynid``)."""
    from threadpoolctl import threadpool_limits

    _LIMITS.append(threadpool_limits(n))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)  # inherited by spawned children before they import numpy


# ---------------------------------------------------------------------------------------- plan


L96_GOAL_SETTINGS = ("L96 N=20 F=10 T=1000", "L96 N=20 F=40 T=500")


@dataclass
class Plan:
    quick: bool
    settings: list[Setting]
    seeds: list[int]

    def runs(self, method: str, setting: Setting, seed: int) -> bool:
        """Which (method, dataset) pairs run: cheap methods everywhere, costly ones on a subset
        so that the full run stays near 15 minutes on 2 shared cores (see RULES)."""
        first = seed == self.seeds[0]
        label = setting.label
        smallest = label == self.settings[0].label
        if method in ("dynid-granger", "dynid-granger-gl", "dynid-pcmci"):
            return True
        if method in ("dynid-neural-2t", "dynid-te", "dynid-ccm"):
            return not self.quick and smallest and first
        if method == "dynid-neural":
            return first or (setting.system == "lorenz96" and setting.n_vars >= 20)
        return True  # dynid-neural-lam and the baselines
        raise KeyError(method)


RULES = {
    "dynid-neural": "first seed of every setting; every seed on L96 N=20",
    "dynid-neural-2t, -te, -ccm": "smallest setting, first seed, in a child process with a 60 s "
                                  "budget (not in quick)",
    "all other methods": "every setting and seed",
}


def make_plan(quick: bool, seeds: list[int]) -> Plan:
    if quick:
        settings = [Setting("lorenz96", 10, 10.0, 500), Setting("lorenz96", 10, 40.0, 500),
                    Setting("var3", 20, None, 500)]
    else:
        settings = [Setting("lorenz96", n, f, t) for n in (10, 20) for f in (10.0, 40.0)
                    for t in (500, 1000)]
        settings += [Setting("var3", 20, None, t) for t in (500, 1000)]
    return Plan(quick, settings, seeds)


# ------------------------------------------------------------------------------------- running


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("numpy", "scipy", "statsmodels", "tigramite", "torch", "scikit-learn", "dynid"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "loadavg_start": list(os.getloadavg()),
    }


def warm_up(log: Callable[[str], None]) -> None:
    """One untimed call of every in-process method on a small VAR: imports, caches."""
    x, _ = sparse_var3(5, 200, 12345)
    for method in METHODS:
        if method in GUARDED or method == "dynid-neural":
            continue
        try:
            call(method, x, 0)
        except Exception as exc:  # noqa: BLE001 - the timed run reports it
            log(f"warm-up {method}: {type(exc).__name__}: {exc}")


def run(plan: Plan, log: Callable[[str], None]) -> list[dict[str, Any]]:
    warm_up(log)
    records: list[dict[str, Any]] = []
    gl_rejected: str | None = None
    for setting in plan.settings:
        for seed in plan.seeds:
            t0 = time.perf_counter()
            x, truth = make_data(setting, seed)
            log(f"{setting.label} seed={seed}: data {time.perf_counter() - t0:.1f}s, "
                f"{int(truth.sum())} true links")
            for method in METHODS:
                if not plan.runs(method, setting, seed):
                    continue
                rec: dict[str, Any] = {"setting": setting.label, "system": setting.system,
                                       "N": setting.n_vars, "F": setting.forcing,
                                       "T": setting.n_samples, "seed": seed, "method": method}
                if method == "dynid-granger-gl" and gl_rejected:
                    records.append({**rec, "status": "skipped", "note": gl_rejected})
                    continue
                else:
                    try:
                        if method in GUARDED:
                            status, payload = call_with_timeout(method, x, seed, GUARDED[method])
                            if status == "timeout":
                                note = f"over the {GUARDED[method]:.0f} s budget per run"
                                records.append({**rec, "status": "skipped", "note": note})
                                log(f"  {method:19s} skipped: {note}")
                                continue
                            if status == "error":
                                raise RuntimeError(payload)
                            score, elapsed, info = payload
                        else:
                            score, elapsed, info = call(method, x, seed)
                    except Exception as exc:  # noqa: BLE001 - one failure must not stop the run
                        msg = f"{type(exc).__name__}: {exc}"
                        if method == "dynid-granger-gl" and ("penalty" in msg or "lasso" in msg):
                            gl_rejected = f"-p penalty=group-lasso rejected: {msg}"
                        records.append({**rec, "status": "error", "note": msg})
                        log(f"  {method:19s} ERROR {msg}")
                        if os.environ.get("CL96_DEBUG"):
                            traceback.print_exc()
                        continue
                score = np.nan_to_num(np.asarray(score, float), nan=0.0, posinf=1e300,
                                      neginf=-1e300)
                rec.update(status="ok", auroc=_auroc(score, truth), auprc=_auprc(score, truth),
                           time_s=elapsed, **info)
                records.append(rec)
                log(f"  {method:19s} AUROC {rec['auroc']:.3f}  AUPRC {rec['auprc']:.3f}  "
                    f"{elapsed:7.2f}s")
    return records


# ------------------------------------------------------------------------------------- summary


def aggregate(records: list[dict[str, Any]], settings: list[Setting]) -> dict[str, dict[str, Any]]:
    """setting label -> method -> mean AUROC/AUPRC over seeds, median time, n runs, notes."""
    table: dict[str, dict[str, Any]] = {}
    for setting in settings:
        row: dict[str, Any] = {}
        for method in METHODS:
            runs = [r for r in records if r["setting"] == setting.label and r["method"] == method]
            ok = [r for r in runs if r["status"] == "ok"]
            if not runs:
                continue
            cell: dict[str, Any] = {"n": len(ok)}
            if ok:
                cell["auroc"] = statistics.fmean(r["auroc"] for r in ok)
                cell["auprc"] = statistics.fmean(r["auprc"] for r in ok)
                cell["auroc_sd"] = statistics.pstdev(r["auroc"] for r in ok)
                cell["time_s"] = statistics.median(r["time_s"] for r in ok)
            notes = sorted({r["note"] for r in runs if r["status"] != "ok"})
            if notes:
                cell["notes"] = notes
            row[method] = cell
        table[setting.label] = row
    return table


def goals(table: dict[str, dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    def best(label: str) -> tuple[str | None, float | None]:
        row = table.get(label, {})
        cands = [(c["auroc"], m) for m, c in row.items() if m in DYNID_METHODS and "auroc" in c]
        if not cands:
            return None, None
        value, method = max(cands)
        return method, value

    out: dict[str, Any] = {}
    for key, label, goal in (
        ("auroc_n20_f10_t1000", "L96 N=20 F=10 T=1000", GOALS["auroc_n20_f10_t1000"]),
        ("auroc_n20_f40_t500", "L96 N=20 F=40 T=500", GOALS["auroc_f40_t500"]),
        ("auroc_n10_f40_t500", "L96 N=10 F=40 T=500", GOALS["auroc_f40_t500"]),
    ):
        method, value = best(label)
        row = table.get(label, {})
        out[key] = {"setting": label, "goal": goal, "best_dynid_method": method,
                    "best_dynid_auroc": value, "met": None if value is None else value >= goal,
                    "dynid_auroc": {m: c["auroc"] for m, c in row.items()
                                    if m in DYNID_METHODS and "auroc" in c}}
    # PCMCI speed: per dataset the time ratio tigramite / dynid, then the median over datasets.
    ratios = []
    by_key: dict[tuple[str, int], dict[str, float]] = {}
    for r in records:
        if r["status"] == "ok" and r["method"] in ("dynid-pcmci", "tigramite-pcmci"):
            by_key.setdefault((r["setting"], r["seed"]), {})[r["method"]] = r["time_s"]
    for times in by_key.values():
        if len(times) == 2:
            ratios.append(times["tigramite-pcmci"] / times["dynid-pcmci"])
    out["pcmci_speedup"] = {
        "goal": GOALS["pcmci_speedup"],
        "median_ratio": statistics.median(ratios) if ratios else None,
        "min_ratio": min(ratios) if ratios else None,
        "max_ratio": max(ratios) if ratios else None,
        "n_datasets": len(ratios),
        "met": (statistics.median(ratios) >= GOALS["pcmci_speedup"]) if ratios else None,
    }
    return out


def _cols(table: dict[str, dict[str, Any]]) -> list[str]:
    return [m for m in METHODS if any(m in row for row in table.values())]


def _fmt(cell: dict[str, Any] | None, key: str) -> str:
    if cell is None:
        return "-"
    if key not in cell:
        return "skip" if cell.get("notes") else "-"
    value = cell[key]
    if key == "time_s":
        return f"{value:.3f}" if value < 0.1 else f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return f"{value:.3f}"


def markdown(table: dict[str, dict[str, Any]], goal: dict[str, Any], info: dict[str, Any],
             seeds: list[int], quick: bool, elapsed: float) -> str:
    cols = _cols(table)
    lines = [f"# Causal discovery on Lorenz-96 and sparse VAR(3){' (quick)' if quick else ''}", ""]
    lines.append(
        f"{info['date']}; {info['cpu']}, {info['cores']} cores (shared: load average "
        f"{info['loadavg_start'][0]:.1f} at start, {info['loadavg_end'][0]:.1f} at end); "
        f"Python {info['python']}, " + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
        + f". Seeds {seeds}; max_lag 3; dt {DT}; run took {elapsed / 60:.1f} min. "
        "Metrics: mean over seeds (n = runs behind each cell in the last table); time: median "
        "wall seconds per call. Generated by `benchmarks/causal_lorenz96.py`."
    )
    lines += ["", "Methods (max_lag 3; BH at alpha 0.05; baselines scored with dynid's summary: "
              "-log10 of the smallest BH-adjusted p over lags; BLAS and torch at "
              f"{info.get('threads', {}).get('blas', THREADS)} thread(s)):", ""]
    lines += [f"- `{m}`: {LEGEND[m]}" for m in cols]
    for key, title in (("auroc", "AUROC (mean over seeds)"), ("auprc", "AUPRC (mean over seeds)"),
                       ("time_s", "Time, median seconds per run")):
        lines += ["", f"## {title}", "", "| setting | " + " | ".join(cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        for label, row in table.items():
            lines.append(f"| {label} | " + " | ".join(_fmt(row.get(m), key) for m in cols) + " |")
    lines += ["", "## Runs per cell", "", "| setting | " + " | ".join(cols) + " |",
              "|---|" + "---:|" * len(cols)]
    for label, row in table.items():
        lines.append(f"| {label} | " + " | ".join(str(row[m]["n"]) if m in row else "-"
                                                   for m in cols) + " |")
    lines += ["", "## Which runs", ""] + [f"- {k}: {v}" for k, v in RULES.items()]
    lines += ["", "## Goals", ""]
    for key in ("auroc_n20_f10_t1000", "auroc_n20_f40_t500", "auroc_n10_f40_t500"):
        g = goal[key]
        value = "n/a" if g["best_dynid_auroc"] is None else f"{g['best_dynid_auroc']:.3f}"
        verdict = "not run" if g["met"] is None else ("MET" if g["met"] else "NOT MET")
        others = ", ".join(f"{m} {v:.3f}" for m, v in g.get("dynid_auroc", {}).items()
                           if m != g["best_dynid_method"])
        lines.append(f"- {g['setting']}: best dynid AUROC {value} ({g['best_dynid_method']}) vs "
                     f"goal {g['goal']}: **{verdict}**" + (f" (others: {others})" if others else ""))
    s = goal["pcmci_speedup"]
    if s["median_ratio"] is None:
        lines.append("- PCMCI speed-up vs tigramite: not run")
    else:
        lines.append(
            f"- PCMCI time ratio tigramite / dynid: median {s['median_ratio']:.1f}x over "
            f"{s['n_datasets']} datasets (range {s['min_ratio']:.1f}-{s['max_ratio']:.1f}x) vs "
            f"goal {s['goal']:g}x: **{'MET' if s['met'] else 'NOT MET'}**")
    notes = sorted({f"{m}: {n}" for row in table.values() for m, c in row.items()
                    for n in c.get("notes", [])})
    if notes:
        lines += ["", "## Skipped / failed", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def print_table(table: dict[str, dict[str, Any]]) -> None:
    cols = _cols(table)
    width = max(len(label) for label in table) + 1
    for key, title in (("auroc", "AUROC"), ("auprc", "AUPRC"), ("time_s", "median time (s)")):
        print(f"\n{title}")
        print(" " * width + "".join(f"{m:>20s}" for m in cols))
        for label, row in table.items():
            print(f"{label:{width}s}" + "".join(f"{_fmt(row.get(m), key):>20s}" for m in cols))


def main() -> int:
    global THREADS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, < 3 minutes")
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0..k-1 (default 3; 1 quick)")
    parser.add_argument("--threads", type=int, default=THREADS,
                        help="BLAS and torch threads (default 1: the machine is shared)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the .md from the existing .json")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    seeds = list(range(args.seeds if args.seeds is not None else (1 if args.quick else 3)))
    THREADS = args.threads
    if args.render:
        stem = "causal_lorenz96-quick" if args.quick else "causal_lorenz96"
        doc = json.loads((RESULTS / f"{stem}.json").read_text())
        doc["goals"] = goals(doc["summary"], doc["runs"])
        (RESULTS / f"{stem}.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        md = markdown(doc["summary"], doc["goals"], doc["machine"], doc["config"]["seeds"],
                      doc["quick"], doc["elapsed_s"])
        (RESULTS / f"{stem}.md").write_text(md)
        print(md)
        return 0
    limit_threads(THREADS)
    plan = make_plan(args.quick, seeds)
    info = machine_info()
    info["threads"] = {"blas": THREADS, "torch": THREADS, "dynid-neural-2t torch": 2}
    info["metrics"] = METRICS_SOURCE
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f}s] {msg}", flush=True)

    records = run(plan, log)
    elapsed = time.perf_counter() - started
    info["loadavg_end"] = list(os.getloadavg())
    table = aggregate(records, plan.settings)
    goal = goals(table, records)
    print_table(table)
    md = markdown(table, goal, info, seeds, args.quick, elapsed)
    print("\n" + md.split("## Goals", 1)[1].strip() if "## Goals" in md else "")
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stem = "causal_lorenz96-quick" if args.quick else "causal_lorenz96"
        doc = {
            "benchmark": "causal_lorenz96",
            "quick": args.quick,
            "machine": info,
            "config": {
                "dt": DT, "burn_in": BURN, "x0": f"F + {X0_SPREAD} * N(0,1) per site",
                "max_lag": MAX_LAG, "alpha": ALPHA, "pc_alpha": PC_ALPHA,
                "seeds": seeds, "settings": [s.label for s in plan.settings],
                "which_runs": RULES,
                "timeouts_s": GUARDED,
                "neural_lam": NEURAL_LAM,
                "threads": THREADS,
                "baseline_score": "BH over off-diagonal p-values, -log10 of min over lags, "
                                  "floor 1e-300 (dynid's summary)",
            },
            "elapsed_s": elapsed,
            "summary": table,
            "goals": goal,
            "runs": records,
        }
        (RESULTS / f"{stem}.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        (RESULTS / f"{stem}.md").write_text(md)
        print(f"wrote {RESULTS / stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
