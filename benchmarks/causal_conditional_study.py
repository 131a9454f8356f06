"""Conditional cross-prediction on CausalDynamics-like coupled graphs (issue 16, round 9): does
testing a pair given the target's strongest other upstream candidate rank the links better than
crosspred's pairwise dependence, alone and inside ``consensus``?

Data (never /tmp/cdyn-heldout*, /tmp/gen or any other unseen set):
  like-K     graphs built here the way ``causaldynamics`` builds its "coupled" ones
             (``coupled_like``), so that many more than the few seen graphs can be scored: a
             growing-network tree of 10 nodes (the package's GNR with redirection 0: node k
             links to an older node with probability proportional to its in-degree + 1, node 0
             once more), each node's W (3 x 3) and b (3) standard normal, roots a 3-D chaotic
             flow (ten hand-coded dysts flows at dysts' parameters, 100 samples per period as
             dysts' ``make_trajectory``, 500 transient samples dropped) or a 3-D sinusoid
             (``drive_sin``: amplitude U(-1, 1), phase U(0, 2 pi), up to 10 periods over 20
             radians), half and half; every other node the sum over its parents p of W_p x_p +
             b_p at the same sample; the first coordinate observed. Differences from the
             package: ten flows instead of ~100, float64 sinusoids (the package's are float32),
             numpy's generator instead of torch's.
  coupled / simple   the seen CausalDynamics graphs in ``--data`` (default /tmp/cdyn-data)
  L96, VAR, mixture  ``causal_auto_study.datasets``' other families (Lorenz-96 N = 5-40, sparse
             VAR(3), VAR(1) at 0.95, two instantaneous mixtures of chaotic roots)

Scores (off-diagonal AUROC, ``dynid.metrics.causal``):
  crosspred-pairwise  ``-p conditional=false`` (crosspred before round 9)
  crosspred           the default: dependence = max(marginal, partial given the upstream k)
  partial-only        the partial dependence alone
  pc-removal          min(marginal, partial): the PC use of the same test (a pair stays only if
                      it is still dependent given k)
  partial-any-k       the partial given the target's strongest other candidate, upstream or
                      not (the conditioning set PC would take without an order)
  pcmci               ``discover(data, "pcmci")``
  consensus-pairwise  ``consensus`` over crosspred-pairwise and pcmci (before round 9)
  consensus           ``consensus`` over crosspred and pcmci (the default members)
For the like-K graphs, which keep their hidden states, each true link's share of its target's
variance (var of W_p x_p's first row over var of the target) and the per-link AUROC of the two
consensus scores by share band: how much of the loss is links too small to see.

    PYTHONPATH=. python benchmarks/causal_conditional_study.py [--like 60] [--data DIR]

Writes benchmarks/results/causal_conditional_study.json and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "causal_conditional_study.json"
NODES, SAMPLES, TRANSIENT = 10, 1000, 500
SHARE_BANDS = ((0.0, 0.01), (0.01, 0.2), (0.2, np.inf))

# name: (right-hand side, period in time units (dysts' metadata), dysts' initial condition)
FLOWS = {
    "Lorenz": (lambda s: [10 * (s[1] - s[0]), s[0] * (28 - s[2]) - s[1],
                          s[0] * s[1] - 2.667 * s[2]], 1.5008, [-9.79, -15.04, 20.53]),
    "Rossler": (lambda s: [-s[1] - s[2], s[0] + 0.2 * s[1], 0.2 + s[2] * (s[0] - 5.7)],
                5.9086, [6.51, 0.48, 0.34]),
    "Chen": (lambda s: [35 * (s[1] - s[0]), -7 * s[0] - s[0] * s[2] + 28 * s[1],
                        s[0] * s[1] - 3 * s[2]], 0.58689, [3.27, 5.30, 19.44]),
    "SprottB": (lambda s: [s[1] * s[2], s[0] - s[1], 1 - s[0] * s[1]], 11.05, [1.69, 1.48, -0.54]),
    "SprottC": (lambda s: [s[1] * s[2], s[0] - s[1], 1 - s[0] ** 2], 8.8852, [-0.47, -0.27, 1.94]),
    "Halvorsen": (lambda s: [-1.4 * s[0] - 4 * s[1] - 4 * s[2] - s[1] ** 2,
                             -1.4 * s[1] - 4 * s[2] - 4 * s[0] - s[2] ** 2,
                             -1.4 * s[2] - 4 * s[0] - 4 * s[1] - s[0] ** 2],
                  1.4889, [-8.68, -2.47, 0.07]),
    "Thomas": (lambda s: [-1.85 * s[0] + 10 * np.sin(s[1]), -1.85 * s[1] + 10 * np.sin(s[2]),
                          -1.85 * s[2] + 10 * np.sin(s[0])], 4.969, [2.2, 2.36, 3.22]),
    "SprottD": (lambda s: [-s[1], s[0] + s[2], s[0] * s[2] + 3 * s[1] ** 2],
                4.8333, [-1.34, -0.21, 0.33]),
    "NoseHoover": (lambda s: [s[1], -s[0] + s[1] * s[2], 1.5 - s[1] ** 2],
                   5.8673, [-1.98, 0.25, 0.79]),
    "Rucklidge": (lambda s: [-2 * s[0] + 6.7 * s[1] - s[1] * s[2], s[0], -s[2] + s[1] ** 2],
                  6.0721, [1.93, 3.19, 5.78]),
}


def flow(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 3) states of dysts flow ``name`` at 100 samples per period from a scaled start."""
    from scipy.integrate import solve_ivp

    rhs, period, start = FLOWS[name]
    t = np.arange(n + TRANSIENT) * period / 100.0
    sol = solve_ivp(lambda _, s: rhs(s), (0.0, t[-1]), np.array(start) * rng.random(), t_eval=t,
                    method="LSODA", rtol=1e-8, atol=1e-10)
    return sol.y.T[TRANSIENT:]


def sinusoid(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 3) ``causaldynamics.systems.drive_sin`` for one node."""
    amplitude, phase = rng.uniform(-1.0, 1.0, 3), rng.uniform(0.0, 2 * np.pi, 3)
    return amplitude * np.sin(np.linspace(0.0, 20.0 * rng.random(3), n) + phase)


def gnr_tree(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, n) [source][target] 0/1: ``causaldynamics``' growing network, redirection 0."""
    adjacency = np.zeros((n, n), dtype=int)
    kernel = np.zeros(n)
    kernel[0] = 1.0
    for i in range(1, n):
        target = rng.choice(i, p=kernel[:i] / kernel[:i].sum())
        adjacency[i, target] = 1
        kernel[target] += 1.0
        kernel[i] += 1.0
    return adjacency


def coupled_like(seed: int) -> dict:
    """One graph (module docstring): ``x`` (n, d) observed, ``truth`` (d, d), ``states`` (n, d,
    3), ``w`` (d, 3, 3), ``roots`` {node: flow name or "sinusoid"}."""
    rng = np.random.default_rng(seed)
    truth = gnr_tree(NODES, rng)
    w, b = rng.standard_normal((NODES, 3, 3)), rng.standard_normal((NODES, 3))
    chaotic = rng.permutation(np.arange(NODES) < NODES // 2)
    names = [list(FLOWS)[k] for k in rng.permutation(len(FLOWS))]
    states = np.zeros((SAMPLES, NODES, 3))
    roots = {}
    for i in np.flatnonzero(truth.sum(axis=0) == 0):
        roots[int(i)] = names[len(roots) % len(names)] if chaotic[i] else "sinusoid"
        states[:, i] = flow(roots[int(i)], SAMPLES, rng) if chaotic[i] else sinusoid(SAMPLES, rng)
    for i in reversed(range(NODES)):  # edges run from newer to older nodes
        for p in np.flatnonzero(truth[:, i]):
            states[:, i] += states[:, p] @ w[p].T + b[p]
    return {"x": states[:, :, 0], "truth": truth, "states": states, "w": w, "roots": roots}


def link_shares(graph: dict) -> dict[tuple[int, int], float]:
    """Each true link's share of its target's variance: var(first row of W_p x_p) / var(x_j)."""
    states, w = graph["states"], graph["w"]
    return {(int(p), int(j)): float((states[:, p] @ w[p, 0]).var() / states[:, j, 0].var())
            for p, j in zip(*np.nonzero(graph["truth"]))}


def datasets(like: int, data_dir: str):  # type: ignore[no-untyped-def]
    import causal_auto_study

    for seed in range(like):
        graph = coupled_like(seed)
        yield "like", f"like-{seed}", graph["x"], graph["truth"], graph
    for family, name, x, truth, _ in causal_auto_study.datasets([data_dir]):
        yield family, name, x, truth, None


def variants(x: np.ndarray) -> tuple[dict, dict, dict]:
    """Every score of the module docstring for one record ``x`` (n, d), the significant links
    (d, d) bool of crosspred and consensus with and without the conditional test, and
    crosspred's CPU seconds with and without it."""
    import dynid
    from dynid.causal import CausalSettings, discover
    from dynid.causal.consensus import consensus_graph
    from dynid.causal.crosspred import (
        CrossPredictionParams,
        _standardized,
        delay_taps,
        delay_vectors,
        first_row,
        partial_r2,
    )

    data = dynid.Dataset.from_arrays(x)
    seconds = {}
    cpu = time.process_time()
    pairwise = discover(data, "crosspred", ["conditional=false"], seed=0)
    seconds["crosspred-pairwise"] = time.process_time() - cpu
    cpu = time.process_time()
    conditional = discover(data, "crosspred", seed=0)
    seconds["crosspred"] = time.process_time() - cpu
    pcmci = discover(data, "pcmci", seed=0)
    settings = CausalSettings(seed=0)
    own = conditional.extra["own_r2"]
    forward = own[:, None] > own[None, :] + 1e-6
    marginal = conditional.extra["marginal_dependence"]

    def oriented(dependence: np.ndarray) -> np.ndarray:
        score = (dependence + 1.0) * (0.5 + forward)
        np.fill_diagonal(score, 0.0)
        return score

    def symmetric(partial: np.ndarray) -> np.ndarray:
        floored = np.maximum(partial, -1.0)
        return (floored + floored.T) / 2.0

    partial = symmetric(conditional.extra["partial_r2"])
    # The same partial R^2 with the strongest other candidate whether upstream or not.
    params = CrossPredictionParams()
    trials = _standardized([x])
    delays = delay_taps(trials)
    start = first_row(delays, params)
    now = delay_vectors(trials, delays, params.dim, start, shift=0)
    y = trials[0][start:]
    anyone = ~np.eye(x.shape[1], dtype=bool)
    any_k = symmetric(partial_r2(now, y, conditional.extra["cross_r2"], marginal, anyone,
                                 params.folds)[0])
    scores = {
        "crosspred-pairwise": pairwise.score_matrix,
        "crosspred": conditional.score_matrix,
        "partial-only": oriented(partial),
        "pc-removal": oriented(np.minimum(marginal, partial)),
        "partial-any-k": oriented(np.maximum(marginal, any_k)),
        "pcmci": pcmci.score_matrix,
    }
    pairwise_consensus = consensus_graph(data, [pairwise, pcmci], settings)
    conditional_consensus = consensus_graph(data, [conditional, pcmci], settings)
    scores["consensus-pairwise"] = pairwise_consensus.score_matrix
    scores["consensus"] = conditional_consensus.score_matrix
    significant = {"crosspred-pairwise": pairwise.adjacency, "crosspred": conditional.adjacency,
                   "consensus-pairwise": pairwise_consensus.adjacency,
                   "consensus": conditional_consensus.adjacency}
    return ({k: np.nan_to_num(np.asarray(v, dtype=float), nan=-np.inf) for k, v in scores.items()},
            {k: np.asarray(v, dtype=bool) for k, v in significant.items()}, seconds)


def per_link_auroc(score: np.ndarray, truth: np.ndarray, shares: dict) -> list[tuple[float, float]]:
    """(share, the fraction of non-links the link outscores, ties half) per true link."""
    off = ~np.eye(len(truth), dtype=bool)
    negatives = score[off & (truth == 0)]
    return [(share, float(np.mean(negatives < score[p, j])
                          + 0.5 * np.mean(negatives == score[p, j])))
            for (p, j), share in shares.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--like", type=int, default=60, help="graphs built by coupled_like")
    parser.add_argument("--data", default="/tmp/cdyn-data")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if "heldout" in args.data or args.data.startswith("/tmp/gen"):
        parser.error("held-out sets are scored once by the coordinator, not studied here")
    sys.path.insert(0, str(HERE))
    import causal_lorenz96 as l96
    from dynid.metrics.causal import auroc

    l96.limit_threads(1)
    warnings.simplefilter("ignore")  # pcmci's self-predicted columns: said once per data set
    rows, links = [], {"consensus-pairwise": [], "consensus": []}
    for family, name, x, truth, graph in datasets(args.like, args.data):
        scores, significant, seconds = variants(x)
        off = ~np.eye(len(truth), dtype=bool)
        row = {"family": family, "name": name,
               "auroc": {k: round(auroc(s, truth), 4) for k, s in scores.items()},
               "significant": {k: {"true": int((a & off & (truth == 1)).sum()),
                                   "false": int((a & off & (truth == 0)).sum()),
                                   "links": int(truth[off].sum())} for k, a in significant.items()},
               "cpu_seconds": {k: round(v, 3) for k, v in seconds.items()}}
        if graph is not None:
            row["roots"] = graph["roots"]
            shares = link_shares(graph)
            for label in links:
                links[label] += per_link_auroc(scores[label], truth, shares)
        rows.append(row)
        print(f"{name:>34}: " + " ".join(f"{k} {v:.3f}" for k, v in row["auroc"].items()),
              file=sys.stderr, flush=True)
    summary = summarize(rows, links)
    result = {"machine": l96.machine_info(), "data": args.data, "like": args.like,
              "rows": rows, "summary": summary}
    result["machine"]["loadavg_end"] = list(os.getloadavg())
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(args.out)
    print(json.dumps(summary, indent=1))
    return 0


def summarize(rows: list[dict], links: dict) -> dict:
    """Mean AUROC per family and score, precision and recall of the significant links; the
    like-K graphs also in halves (seeds below and above
    the middle) with per-graph wins of each score over its round-8 counterpart; per-link AUROC
    of the consensus scores by share band."""
    out: dict = {"mean_auroc": {}, "significant": {}, "wins": {}, "share_bands": {}}
    families = sorted({r["family"] for r in rows})
    for family in families:
        members = [r for r in rows if r["family"] == family]
        out["mean_auroc"][family] = {k: round(float(np.mean([r["auroc"][k] for r in members])), 4)
                                     for k in members[0]["auroc"]}
        out["significant"][family] = {}
        for label in members[0]["significant"]:
            true, false, n_links = (sum(r["significant"][label][k] for r in members)
                                    for k in ("true", "false", "links"))
            out["significant"][family][label] = {
                "precision": round(true / max(true + false, 1), 3),
                "recall": round(true / n_links, 3), "true": true, "called": true + false}
    like = [r for r in rows if r["family"] == "like"]
    half = len(like) // 2
    for label, part in (("like first half", like[:half]), ("like second half", like[half:])):
        if part:
            out["mean_auroc"][label] = {k: round(float(np.mean([r["auroc"][k] for r in part])), 4)
                                        for k in part[0]["auroc"]}
    for family in ("like", "coupled"):
        members = [r for r in rows if r["family"] == family]
        for new, old in (("crosspred", "crosspred-pairwise"), ("consensus", "consensus-pairwise")):
            diff = np.array([r["auroc"][new] - r["auroc"][old] for r in members])
            out["wins"][f"{family}: {new} vs {old}"] = {
                "better": int((diff > 0).sum()), "worse": int((diff < 0).sum()),
                "same": int((diff == 0).sum())}
    for label, values in links.items():
        bands = {}
        for lo, hi in SHARE_BANDS:
            inside = [a for share, a in values if lo <= share < hi]
            mean = round(float(np.mean(inside)), 3) if inside else None
            bands[f"[{lo}, {hi})"] = {"links": len(inside), "mean_link_auroc": mean}
        out["share_bands"][label] = bands
    return out


if __name__ == "__main__":
    sys.exit(main())
