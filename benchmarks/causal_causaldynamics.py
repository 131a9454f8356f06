"""CausalDynamics (Herdeanu et al., NeurIPS 2025 datasets track; PyPI ``causaldynamics``) graphs:
dynid's causal methods beside tigramite PCMCI+, statsmodels VAR Granger and |correlation|.

Two stages, two Python environments (``causaldynamics`` 1.0.0 requires Python <3.11 and
numpy<2, so it cannot share dynid's venv; the recipe is in benchmarks/README.md):

    /work/cdyn-venv/bin/python benchmarks/causal_causaldynamics.py generate --out /tmp/cdyn-data
    PYTHONPATH=. python benchmarks/causal_causaldynamics.py score --data /tmp/cdyn-data

generate (the causaldynamics venv) writes, per graph, ``NAME.csv`` (observed columns x0.., one
row per sample, no time column: dt = 1 sample) and ``NAME.json`` (``{"adjacency": [[...]]}``,
[source][target] 0/1, plus how it was made):
  coupled-K   ``creator.create_scm(10 nodes, node_dim 3, confounders=False, graph="scale-free")``
              (a growing network with redirection 0: a tree, edges from newer to older nodes)
              then ``creator.simulate_system(system_name="random", init_ratios=[1, 1, 0])``:
              each root node is a random 3-D chaotic dysts flow or a 3-D sinusoid driver, and
              each other node is, at the same time step, the sum over its parents of a random
              linear map W x_parent + b of their 3-D states (no activation, not standardized).
              Observed: the first coordinate of each node. Truth: A (source -> target).
  simple-K    ``systems.solve_system(1000 steps, 1 system, NAME)`` for a random 3-D chaotic
              dysts flow; all three coordinates observed. Truth: the Jacobian's structure
              (``systems.get_adjacency_matrix_from_jac``: jac[i, j] != 0 means x_j drives x_i),
              transposed to [source][target]; self-links are not scored.
  Seeds: ``utils.set_rng_seed(seed + K)`` before each graph (the package's own seeding).

score (dynid's venv) runs on every graph, with defaults (``discover(data, method, seed=0)``;
max_lag 5, alpha 0.05, BH):
  dynid-M        every ``--method`` M in ``--methods``; te is left out by default (slow, see
                 "Causal discovery speed" in benchmarks/README.md). neural and ccm (``GUARDED``)
                 run in a child process with ``--budget`` wall seconds per graph (default 900),
                 recorded as "timeout" past it, with their wall and CPU seconds
  corr0          |Pearson correlation| at lag 0 (symmetric: cannot tell the direction)
  sm-var         statsmodels ``VAR(x).fit(3).test_causality(target, [source], kind="f")``
                 (``causal_lorenz96.run_sm_var``: joint F over the 3 lags, BH, -log10 p)
  tigramite-pcmciplus  ``PCMCI(DataFrame(x), ParCorr()).run_pcmciplus(tau_min=0, tau_max=3,
                 pc_alpha=0.05)``; score -log10 of the smallest BH-adjusted p over lags 0..3
  study-*        scores tried for item 4 of issue 16 before any goes into dynid (see the
                 comments above each function and benchmarks/README.md)
and off-diagonal AUROC / AUPRC of each score matrix (``dynid.metrics.causal``), per graph and
their mean per family. A method that raises is recorded with its error ("refused").
Writes benchmarks/results/causal_causaldynamics.json (``--out``). ``--only L1,L2`` runs only those
columns; ``--merge`` keeps the other columns of an existing ``--out`` file and replaces these.
Held-out graphs (seeds 100-104, made after the study's choices were fixed):
``generate --seed 100 --out /tmp/cdyn-heldout`` then ``score --data /tmp/cdyn-heldout --out
benchmarks/results/causal_causaldynamics-heldout.json``. A second held-out set (seeds 200-204,
made while ``crosspred``'s settings were chosen on the first ten and scored once they were
fixed), one graph per process: ``generate --coupled 1 --simple 0 --seed 20K --out DIR`` for K =
0..4, each written as ``coupled-K``; ``--out
benchmarks/results/causal_causaldynamics-heldout2.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "causal_causaldynamics.json"
# A score: (x (n, d), seed) -> (score (d, d) [source][target], wall seconds, extra info).
Runner = Callable[[np.ndarray, int], tuple[np.ndarray, float, dict]]
NODES = 10
SAMPLES = 1000
INIT_RATIOS = [1.0, 1.0, 0.0]  # chaotic, sinusoid, linear drivers on the root nodes
BASELINE_LAG = 3
ALPHA = 0.05
# Methods that take minutes on a 10 x 1,000 coupled graph on the shared machine: each call runs
# in a child process under a wall-clock budget.
GUARDED = {"dynid-neural", "dynid-ccm"}
BUDGET = 900.0


# ------------------------------------------------------------------ generate (causaldynamics venv)


def generate(out: Path, n_coupled: int, n_simple: int, seed: int) -> None:
    import torch
    from causaldynamics.creator import create_scm, simulate_system
    from causaldynamics.systems import (
        get_3d_chaotic_system_names,
        get_adjacency_matrix_from_jac,
        solve_system,
    )
    from causaldynamics.utils import set_rng_seed

    out.mkdir(parents=True, exist_ok=True)
    for k in range(n_coupled):
        set_rng_seed(seed + k)
        adj, w, b, _, _ = create_scm(NODES, 3, confounders=False, graph="scale-free")
        da = simulate_system(adj, w, b, num_timesteps=SAMPLES, num_nodes=NODES,
                             init_ratios=INIT_RATIOS, system_name="random")
        x = np.asarray(da.values)[:, :, 0]  # (time, node): the first coordinate of each node
        truth = np.asarray(torch.as_tensor(adj).numpy(), dtype=int)
        _write(out, f"coupled-{k}", x, truth, {"family": "coupled", "seed": seed + k,
                                               "init_ratios": INIT_RATIOS})
    names = sorted(get_3d_chaotic_system_names())
    k = made = 0
    while made < n_simple:
        set_rng_seed(seed + 1000 + k)
        k += 1
        name = names[int(np.random.randint(len(names)))]
        try:
            jac = get_adjacency_matrix_from_jac(name)
        except NotImplementedError:  # dysts flows without an analytic Jacobian
            continue
        if jac is None:
            continue
        data = solve_system(SAMPLES, 1, name)
        if data is None or not np.all(np.isfinite(data.numpy())):
            continue
        x = data.numpy()[:, 0, :]
        truth = np.asarray(jac, dtype=int).T  # jac[i, j]: x_j -> x_i; stored [source][target]
        np.fill_diagonal(truth, 0)
        if truth.sum() == 0 or truth.sum() == 6:  # AUROC needs a link and a non-link
            continue
        _write(out, f"simple-{made}", x, truth, {"family": "simple", "system": name,
                                                 "seed": seed + 1000 + k - 1})
        made += 1


def _write(out: Path, name: str, x: np.ndarray, truth: np.ndarray, meta: dict) -> None:
    header = ",".join(f"x{i}" for i in range(x.shape[1]))
    tmp = out / f".{name}.csv.tmp"
    np.savetxt(tmp, x, delimiter=",", header=header, comments="", fmt="%.9g")
    tmp.replace(out / f"{name}.csv")
    tmp = out / f".{name}.json.tmp"
    tmp.write_text(json.dumps({**meta, "adjacency": truth.tolist()}, indent=1))
    tmp.replace(out / f"{name}.json")
    print(f"wrote {name}: {x.shape} {int(truth.sum())} links", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------- score (dynid venv)


def corr0(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    start = time.perf_counter()
    score = np.abs(np.nan_to_num(np.corrcoef(x, rowvar=False)))
    np.fill_diagonal(score, 0.0)
    return score, time.perf_counter() - start, {}


# Study (item 3 of issue 16): scores built on delay embeddings, tried here before any goes into
# dynid. A coupled child is, at the same time step, a linear map of its parents' 3-D states, of
# which only the first coordinate is observed; by Takens' theorem the delays of that coordinate
# stand in for the hidden ones, so regressions on delay vectors that include lag 0 can see links
# that lagged tests (which need the past to add to the target's own past) cannot.
EMBED_LAGS = 10


def _embed(x: np.ndarray, lags: int) -> np.ndarray:
    """(n - lags, d, lags + 1): x[t - l, i] at [t - lags, i, l], each column standardized."""
    z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    n = z.shape[0]
    return np.stack([z[lags - l: n - l] for l in range(lags + 1)], axis=2)


def _rss(design: np.ndarray, y: np.ndarray) -> float:
    a = np.column_stack([np.ones(len(y)), design])
    coef, *_ = np.linalg.lstsq(a, y, rcond=1e-10)
    return float(np.sum((y - a @ coef) ** 2))


def embed_r2(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    """score[i, j]: R^2 of x_j(t) on x_i's delay vector (x_i(t), ..., x_i(t - EMBED_LAGS))."""
    start = time.perf_counter()
    e = _embed(x, EMBED_LAGS)
    d = x.shape[1]
    score = np.zeros((d, d))
    for j in range(d):
        y = e[:, j, 0]
        tss = float(np.sum(y ** 2))
        for i in range(d):
            if i != j:
                score[i, j] = 1.0 - _rss(e[:, i, :], y) / tss
    return score, time.perf_counter() - start, {}


def embed_partial(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    """score[i, j]: log of the residual sum of squares of x_j(t) on every other variable's delay
    vector (lag 0 included) without x_i's over that with it (a lag-0-inclusive Granger)."""
    start = time.perf_counter()
    e = _embed(x, EMBED_LAGS)
    d = x.shape[1]
    score = np.zeros((d, d))
    for j in range(d):
        y = e[:, j, 0]
        others = [i for i in range(d) if i != j]
        full = _rss(np.concatenate([e[:, i, :] for i in others], axis=1), y)
        for i in others:
            rest = np.concatenate([e[:, k, :] for k in others if k != i], axis=1)
            score[i, j] = math.log(max(_rss(rest, y), 1e-300) / max(full, 1e-300))
    return score, time.perf_counter() - start, {}


# Study, second idea: orient the lag-0 correlation by a non-Gaussianity asymmetry. In a linear
# non-Gaussian model x -> y with independent noise, the likelihood ratio of x -> y against y -> x
# is R = H(y) + H(r_x|y) - H(x) - H(r_y|x) for standardised x, y and least-squares residuals r
# (Hyvarinen and Smith, "Pairwise likelihood ratios for estimation of non-Gaussian structural
# equation models", JMLR 14:111, 2013; the entropy approximation of Hyvarinen, NIPS 1998, as in
# LiNGAM's pairwise measure), R > 0 meaning x -> y. Score: |corr| damped where R says "reverse".
_ENTROPY_K1, _ENTROPY_K2, _ENTROPY_GAMMA = 79.047, 7.4129, 0.37457


def _entropy(u: np.ndarray) -> float:
    """Differential entropy of standardised ``u`` (n,), maximum-entropy approximation (nats)."""
    u = (u - u.mean()) / u.std()
    return float((1 + math.log(2 * math.pi)) / 2
                 - _ENTROPY_K1 * (np.mean(np.log(np.cosh(u))) - _ENTROPY_GAMMA) ** 2
                 - _ENTROPY_K2 * np.mean(u * np.exp(-u ** 2 / 2)) ** 2)


def lingam_oriented(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    """score[i, j] = |corr(x_i, x_j)| / (1 + exp(-50 R(i -> j))); ``orientation`` in the info:
    the likelihood ratios R (d, d)."""
    start = time.perf_counter()
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    corr = np.corrcoef(z, rowvar=False)
    d = x.shape[1]
    ratio = np.zeros((d, d))
    for i in range(d):
        for j in range(d):
            if i != j:
                r = corr[i, j]
                ratio[i, j] = (_entropy(z[:, j]) + _entropy(z[:, i] - r * z[:, j])
                               - _entropy(z[:, i]) - _entropy(z[:, j] - r * z[:, i]))
    score = np.abs(corr) / (1 + np.exp(-50 * ratio))
    np.fill_diagonal(score, 0.0)
    return score, time.perf_counter() - start, {}


# Study, third idea (2026-12-02): split the problem into "are i and j dependent" and "which way".
# The graphs make every observed node a linear mixture of its ancestral root systems' states, so
# (in a tree) two nodes depend only when one is an ancestor of the other, and a child's signal
# holds its parent's plus its other parents'. (a) Dependence: |corr| at lag 0, but tested as
# Fisher's z with Bartlett's effective sample size n / (1 + 2 sum_k rho_i(k) rho_j(k))
# (Bartlett, JRSS Suppl. 8, 1946; Pyper and Peterman, CJFAS 55:2127, 1998): slow drivers (a
# sinusoid root covers at most ~3 periods in 1,000 samples) correlate strongly by chance, and
# this discounts them. (b) Direction, the principle of convergent cross
# mapping (Sugihara et al., Science 338:496, 2012): the effect's reconstruction holds the cause,
# so i -> j when x_i(t) is better recovered from x_j's delay window than x_j(t) from x_i's. The
# coupling is linear in the hidden states, so the recovery here is a linear regression on a
# two-sided window x(t - 40), x(t - 36), ..., x(t + 40) (chosen on the 5 study graphs; simplex
# cross-mapping from the child's manifold failed: a child mixing 5-7 chaotic parents is too
# high-dimensional for 1,000 samples, and the asymmetry of its kNN skill was near chance).
# Study graphs 0.759 (granger 0.679); held-out graphs (seeds 100-104) 0.601 (dynid pcmci 0.667):
# not added to dynid (benchmarks/README.md, "CausalDynamics graphs").
XMAP_HALF, XMAP_STEP, XMAP_RIDGE = 40, 4, 1e-6
# Bartlett's sum runs to lag n / BARTLETT_FRACTION (10 chosen on the study graphs; Pyper and
# Peterman's n / 5 gave 0.736 there instead of 0.759 for study-neff-xmap).
BARTLETT_FRACTION = 10


def _standardized(x: np.ndarray) -> np.ndarray:
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def window_r2(x: np.ndarray, half: int = XMAP_HALF, step: int = XMAP_STEP) -> np.ndarray:
    """(d, d) ``[i, j]``: R^2 of x_j(t) regressed on x_i(t + k), k = -half, -half + step, ..,
    half (least squares with an intercept, rows with the whole window only)."""
    z = _standardized(x)
    n, d = z.shape
    rows = slice(half, n - half)
    window = np.stack([z[half + k: n - half + k] for k in range(-half, half + 1, step)], axis=2)
    y = z[rows]
    r2 = np.zeros((d, d))
    for i in range(d):
        design = np.column_stack([np.ones(len(y)), window[:, i, :]])
        # The window of a smooth signal is nearly collinear: a tiny ridge keeps it solvable.
        gram = design.T @ design + XMAP_RIDGE * len(y) * np.eye(design.shape[1])
        coef = np.linalg.solve(gram, design.T @ y)
        r2[i] = 1.0 - np.var(y - design @ coef, axis=0) / np.var(y, axis=0)
    np.fill_diagonal(r2, 0.0)
    return r2


def crossmap_direction(x: np.ndarray) -> np.ndarray:
    """(d, d) ``[source][target]`` 1.0 where the target's window recovers the source better than
    the reverse (``window_r2``), else 0.0."""
    r2 = window_r2(x)
    return (r2.T > r2).astype(float)


def _autocorrelations(z: np.ndarray, max_lag: int) -> np.ndarray:
    """(max_lag + 1, d) sample autocorrelations of standardized columns ``z`` (n, d)."""
    n = len(z)
    return np.array([np.mean(z[k:] * z[: n - k], axis=0) for k in range(max_lag + 1)])


def effective_samples(x: np.ndarray) -> np.ndarray:
    """(d, d) Bartlett's effective sample size of the correlation of each pair of columns."""
    n = len(x)
    rho = _autocorrelations(_standardized(x), n // BARTLETT_FRACTION)[1:]
    return np.clip(n / (1.0 + 2.0 * np.einsum("ki,kj->ij", rho, rho)), 4.0, n)


def effective_z(x: np.ndarray) -> np.ndarray:
    """(d, d) Fisher's z of |corr| at lag 0 times sqrt(n_eff - 3); 0 on the diagonal."""
    r = np.abs(np.nan_to_num(np.corrcoef(x, rowvar=False)))
    z = np.arctanh(np.clip(r, 0.0, 1.0 - 1e-9)) * np.sqrt(effective_samples(x) - 3.0)
    np.fill_diagonal(z, 0.0)
    return z


def neff_crossmap(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    """score[i, j] = effective_z[i, j] * (0.5 + direction[i, j]): the dependence, three times
    larger in the direction the cross-map asymmetry points."""
    start = time.perf_counter()
    score = effective_z(x) * (0.5 + crossmap_direction(x))
    return score, time.perf_counter() - start, {}


def partial_crossmap(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    """score[i, j]: for i oriented i -> j by ``crossmap_direction``, the partial correlation at
    lag 0 of x_i and x_j given the other sources so oriented into j (Fisher's z, effective sample
    size less the conditioning set); 0 for pairs oriented j -> i. A child's small parents are
    hidden under its large ones; the partial correlation removes the large ones first."""
    start = time.perf_counter()
    z = _standardized(x)
    n, d = z.shape
    direction = crossmap_direction(x)
    n_eff = effective_samples(x)
    score = np.zeros((d, d))
    for j in range(d):
        parents = np.flatnonzero(direction[:, j])
        for i in parents:
            given = np.column_stack([np.ones(n), z[:, parents[parents != i]]])
            coef, *_ = np.linalg.lstsq(given, z[:, [i, j]], rcond=1e-10)
            ri, rj = (z[:, [i, j]] - given @ coef).T
            partial = abs(ri @ rj) / math.sqrt(max((ri @ ri) * (rj @ rj), 1e-300))
            dof = max(n_eff[i, j] - 3.0 - (given.shape[1] - 1), 1.0)
            score[i, j] = math.atanh(min(partial, 1.0 - 1e-9)) * math.sqrt(dof)
    return score, time.perf_counter() - start, {}


def tigramite_pcmciplus(x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    from causal_lorenz96 import summary_score
    from tigramite.data_processing import DataFrame
    from tigramite.independence_tests.parcorr import ParCorr
    from tigramite.pcmci import PCMCI

    start = time.perf_counter()
    pcmci = PCMCI(dataframe=DataFrame(x), cond_ind_test=ParCorr(), verbosity=0)
    out = pcmci.run_pcmciplus(tau_min=0, tau_max=BASELINE_LAG, pc_alpha=ALPHA)
    elapsed = time.perf_counter() - start
    score = summary_score(np.asarray(out["p_matrix"], dtype=float))
    links = np.asarray(out["graph"]) != ""
    return score, elapsed, {"n_significant": int(links.any(axis=2).sum() - np.trace(links.any(axis=2)))}


def run_dynid(method: str, x: np.ndarray, seed: int) -> tuple[np.ndarray, float, dict]:
    import dynid
    from dynid.causal import discover

    data = dynid.Dataset.from_arrays(x)
    start = time.perf_counter()
    graph = discover(data, method, seed=seed)
    elapsed = time.perf_counter() - start
    cross = ~np.eye(x.shape[1], dtype=bool)
    return (np.asarray(graph.score_matrix, dtype=float), elapsed,
            {"n_significant": int(np.asarray(graph.adjacency)[cross].sum())})


def dynid_runner(method: str) -> Runner:
    return functools.partial(run_dynid, method)


def score(data_dir: Path, methods: list[str], out_path: Path, only: set[str] | None = None,
          merge: bool = False, budget: float = BUDGET) -> dict:
    import causal_lorenz96 as l96

    l96.limit_threads(1)
    runners: dict[str, Runner] = {f"dynid-{m}": dynid_runner(m) for m in methods}
    runners.update({"corr0": corr0, "sm-var": l96.run_sm_var,
                    "tigramite-pcmciplus": tigramite_pcmciplus,
                    "study-embed-r2": embed_r2, "study-embed-partial": embed_partial,
                    "study-lingam": lingam_oriented,
                    "study-neff-xmap": neff_crossmap, "study-partial-xmap": partial_crossmap})
    if only is not None:
        runners = {label: run for label, run in runners.items() if label in only}
    graphs = sorted(p.stem for p in data_dir.glob("*.json"))
    result = {"machine": l96.machine_info(), "data": str(data_dir), "graphs": {}, "summary": {}}
    if merge and out_path.exists():
        earlier = json.loads(out_path.read_text())
        result["graphs"] = earlier["graphs"]
        # The runs whose columns were kept: machine, date and load of each.
        result["earlier_runs"] = [*earlier.get("earlier_runs", []), earlier["machine"]]
    result["machine"]["columns"] = sorted(runners)
    for name in graphs:
        meta = json.loads((data_dir / f"{name}.json").read_text())
        truth = np.asarray(meta["adjacency"], dtype=int)
        x = np.loadtxt(data_dir / f"{name}.csv", delimiter=",", skiprows=1, ndmin=2)
        row = result["graphs"].setdefault(name, {"methods": {}})
        row.update({"family": meta["family"], "n_links": int(truth.sum()),
                    "meta": {k: v for k, v in meta.items() if k != "adjacency"}})
        for label, run in runners.items():
            guard = budget if label in GUARDED else None
            cell = row["methods"][label] = _run_one(run, x, truth, guard)
            print(f"{name:>10} {label:>20}: {_fmt_cell(cell)}", file=sys.stderr, flush=True)
    result["summary"] = summarize(result["graphs"])
    result["machine"]["loadavg_end"] = list(os.getloadavg())
    tmp = out_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(out_path)
    return result


def _run_one(run: Runner, x: np.ndarray, truth: np.ndarray, budget: float | None = None) -> dict:
    """One method on one graph: its AUROC / AUPRC, wall and CPU seconds, or "refused" (it
    raised), "timeout" or "failed" (its child process died); with a ``budget`` (wall seconds)
    it runs in a child process."""
    import causal_lorenz96 as l96

    if budget is None:
        status, answer = _call(run, x)
    else:
        status, answer = _call_in_child(run, x, budget)
    if status == "timeout":
        return {"status": "timeout", "budget_seconds": budget}
    if status == "failed":
        return {"status": "failed", "error": answer}
    if status != "ok":
        return {"status": "refused", "error": answer}
    s, elapsed, info = answer
    return {"status": "ok", "auroc": round(l96._auroc(s, truth), 4),
            "auprc": round(l96._auprc(s, truth), 4), "seconds": round(elapsed, 2), **info}


def _call(run: Runner, x: np.ndarray) -> tuple[str, object]:
    cpu = time.process_time()
    try:
        s, elapsed, info = run(x, 0)
    except Exception as exc:  # noqa: BLE001 - a refusal is a result here
        return "error", f"{type(exc).__name__}: {exc}"
    return "ok", (s, elapsed, {**info, "cpu_seconds": round(time.process_time() - cpu, 2)})


def _child(conn, run: Runner, x: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    import causal_lorenz96 as l96

    l96.limit_threads(1)
    conn.send(_call(run, x))
    conn.close()


def _call_in_child(run: Runner, x: np.ndarray, budget: float) -> tuple[str, object]:
    """``_call`` in a spawned child process; ("timeout", None) past ``budget`` wall seconds."""
    ctx = mp.get_context("spawn")  # not fork: a forked child of a torch/OpenMP parent can hang
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, run, x), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(budget):
            return parent.recv()
        return "timeout", None
    except EOFError:  # the child died before answering (killed, out of memory, a crash)
        proc.join(5)
        return "failed", f"the child process ended without a result (exit code {proc.exitcode})"
    finally:
        if proc.is_alive():
            proc.terminate()  # our own child, by its handle
        proc.join(5)
        parent.close()


def summarize(graphs: dict) -> dict:
    """Mean AUROC / AUPRC per family and method over the graphs the method answered."""
    out: dict = {}
    for row in graphs.values():
        for label, cell in row["methods"].items():
            agg = out.setdefault(row["family"], {}).setdefault(
                label, {"auroc": [], "auprc": [], "seconds": [], "not_ok": 0})
            if cell["status"] != "ok":
                agg["not_ok"] += 1
                continue
            for key in ("auroc", "auprc", "seconds"):
                agg[key].append(cell[key])
    for fam in out.values():
        for label, agg in fam.items():
            fam[label] = {"n": len(agg["auroc"]), "not_ok": agg["not_ok"],
                          **{k: (round(float(np.mean(agg[k])), 3) if agg[k] else None)
                             for k in ("auroc", "auprc", "seconds")}}
    return out


def _fmt_cell(cell: dict) -> str:
    if cell["status"] != "ok":
        return f"{cell['status']} {cell.get('error') or ''}".strip()
    return f"AUROC {cell['auroc']:.3f} AUPRC {cell['auprc']:.3f} {cell['seconds']:.1f} s"


def print_summary(summary: dict) -> None:
    for fam, methods in summary.items():
        print(f"\n{fam}: mean AUROC / AUPRC / s (graphs answered, not answered)")
        for label, agg in sorted(methods.items(), key=lambda kv: -(kv[1]["auroc"] or 0)):
            if agg["auroc"] is None:
                print(f"  {label:>20}: -  ({agg['n']}, {agg['not_ok']})")
                continue
            print(f"  {label:>20}: {agg['auroc']:.3f} / {agg['auprc']:.3f} / {agg['seconds']:.1f}"
                  f"  ({agg['n']}, {agg['not_ok']})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    gen = sub.add_parser("generate", help="make the graphs (causaldynamics venv)")
    gen.add_argument("--out", type=Path, default=Path("/tmp/cdyn-data"))
    gen.add_argument("--coupled", type=int, default=5, help="number of coupled graphs")
    gen.add_argument("--simple", type=int, default=10, help="number of simple systems")
    gen.add_argument("--seed", type=int, default=0)
    sc = sub.add_parser("score", help="score every method on them (dynid venv)")
    sc.add_argument("--data", type=Path, default=Path("/tmp/cdyn-data"))
    sc.add_argument("--methods",
                    default="granger,pcmci,pcmciplus,dynamic,crosspred,consensus,sindy,neural,ccm")
    sc.add_argument("--out", type=Path, default=RESULTS)
    sc.add_argument("--only", default=None, help="comma-separated columns to run (default all)")
    sc.add_argument("--merge", action="store_true",
                    help="keep the other columns of an existing --out file")
    sc.add_argument("--budget", type=float, default=BUDGET,
                    help="wall seconds per graph for " + ", ".join(sorted(GUARDED)))
    args = parser.parse_args()
    if args.stage == "generate":
        generate(args.out, args.coupled, args.simple, args.seed)
        return 0
    sys.path.insert(0, str(HERE))
    only = {label for label in args.only.split(",") if label} if args.only else None
    result = score(args.data, [m for m in args.methods.split(",") if m], args.out, only=only,
                   merge=args.merge, budget=args.budget)
    print_summary(result["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
