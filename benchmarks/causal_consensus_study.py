"""Which members and which rank combination make a causal default that holds on every family?
(issue 16, "default >= 0.75 on CausalDynamics coupled graphs" without falling below granger
elsewhere.)

Stage 1 runs each member method (``discover(data, M, seed=0)``, defaults) once on every data
set of ``causal_auto_study.datasets`` (the seen CausalDynamics sets: coupled and simple;
Lorenz-96 at several sizes and steps; sparse VAR(3) and a VAR(1) at 0.95; two instantaneous
mixtures of chaotic roots) and keeps its score matrix in ``--cache`` (one ``.npz`` per data
set, arrays only). Stage 2 scores, from the cache, every combination rule over every subset of
members: off-diagonal AUROC per data set, mean per family. Rules (``r_m``: member m's
off-diagonal scores turned into ranks scaled to (0, 1], ties averaged):

  borda     mean over members of r_m (Borda count)
  max       max over members of r_m (the link any member ranks high)
  geo       geometric mean of r_m (rank product)
  votes     the members calling the pair significant, plus the borda mean rank (what
            ``--method consensus`` does: ``dynid.causal.consensus.combine``)
  cauchy    Cauchy combination of the members' p-values (Liu and Xie, JASA 115:393, 2020),
            only for members that give p-values (granger, pcmci, pcmciplus), read back from
            their scores as 10 ** -score: each member's pair summary (granger's best-order
            joint test, the smallest over lags for pcmci and pcmciplus), adjusted as the
            member adjusts it, so an approximation of the pair's p-value

    PYTHONPATH=. python benchmarks/causal_consensus_study.py [--cache DIR]

Never point it at /tmp/cdyn-heldout4 or /tmp/cdyn-simple4 (kept unseen for the coordinator).
Writes benchmarks/results/causal_consensus_study.json and prints the table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "causal_consensus_study.json"
SEEN = ("/tmp/cdyn-data", "/tmp/cdyn-heldout", "/tmp/cdyn-heldout2", "/tmp/cdyn-heldout3")
MEMBERS = ("granger", "crosspred", "pcmciplus", "pcmci")
WITH_P = {"granger", "pcmci", "pcmciplus"}
FAMILIES = ("coupled", "simple", "L96", "VAR", "mixture")


def cauchy(p_values: list[np.ndarray]) -> np.ndarray:
    """Cauchy combination p-value of equally weighted p-values (element-wise)."""
    p = np.clip(np.stack(p_values), 1e-300, 1.0 - 1e-16)
    t = np.mean(np.tan((0.5 - p) * np.pi), axis=0)
    return 0.5 - np.arctan(t) / np.pi


def combine(rule: str, scores: list[np.ndarray], adjacency: list[np.ndarray]) -> np.ndarray:
    if rule == "votes":
        from dynid.causal.consensus import combine as consensus

        return consensus(scores, adjacency)[0]
    if rule == "cauchy":
        p = cauchy([10.0 ** -s for s in scores])
        return -np.log10(np.maximum(p, 1e-300))
    from dynid.causal.consensus import member_ranks

    r = np.stack([member_ranks(s) for s in scores])
    if rule == "borda":
        return r.mean(axis=0)
    if rule == "max":
        return r.max(axis=0)
    if rule == "geo":
        return np.exp(np.log(np.maximum(r, 1e-12)).mean(axis=0))
    raise ValueError(rule)


def build_cache(cache: Path, dirs: list[str]) -> None:
    import causal_auto_study as study
    import dynid
    from dynid.causal import discover

    cache.mkdir(parents=True, exist_ok=True)
    for family, name, x, truth, dt in study.datasets(dirs):
        path = cache / (name.replace("/", "__").replace(" ", "_") + ".npz")
        if path.exists():
            continue
        data = dynid.Dataset.from_arrays(x, dt=dt)
        arrays = {"truth": truth, "family": np.array(family), "name": np.array(name)}
        for method in MEMBERS:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graph = discover(data, method, seed=0)
            arrays[method] = graph.score_matrix
            arrays[f"{method}_adjacency"] = graph.adjacency
            if method == "crosspred":
                arrays["crosspred_dependence"] = graph.extra["dependence"]
            arrays[f"{method}_seconds"] = np.array(time.perf_counter() - start)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **arrays)
        tmp.replace(path)
        print(f"cached {name}", file=sys.stderr, flush=True)


def evaluate(cache: Path) -> dict:
    from dynid.metrics.causal import auroc

    rows = []
    for path in sorted(cache.glob("*.npz")):
        if path.name.endswith(".tmp.npz"):
            continue
        z = np.load(path)
        truth, family, name = z["truth"], str(z["family"]), str(z["name"])
        row = {"family": family, "data": name, "auroc": {}, "significance": {}}
        off = ~np.eye(len(truth), dtype=bool)
        calls = {m: z[f"{m}_adjacency"].astype(bool) & off for m in MEMBERS}
        calls["majority:crosspred+pcmci"] = calls["crosspred"] & calls["pcmci"]
        for label, called in calls.items():  # true links called, links called, true links
            row["significance"][label] = [int((called & (truth == 1)).sum()), int(called.sum()),
                                          int(truth[off].sum())]
        for m in MEMBERS:
            row["auroc"][m] = auroc(z[m], truth)
        for size in (2, 3, 4):
            for subset in itertools.combinations(MEMBERS, size):
                scores = [z[m] for m in subset]
                adjacency = [z[f"{m}_adjacency"] for m in subset]
                for rule in ("borda", "max", "geo", "votes", "cauchy"):
                    if rule == "cauchy" and not set(subset) <= WITH_P:
                        continue
                    row["auroc"][f"{rule}:{'+'.join(subset)}"] = auroc(
                        combine(rule, scores, adjacency), truth)
        rows.append(row)
    summary: dict = {}
    by_set: dict = {}
    for family in FAMILIES:
        fam = [r for r in rows if r["family"] == family]
        if not fam:
            continue
        summary[family] = {key: float(np.mean([r["auroc"][key] for r in fam]))
                           for key in fam[0]["auroc"]}
        for r in fam:  # CausalDynamics rows by folder, the rest by family
            group = f"{r['data'].split('/')[0]}:{family}" if "/" in r["data"] else family
            by_set.setdefault(group, []).append(r)
    per_set = {group: {key: float(np.mean([r["auroc"][key] for r in members]))
                       for key in members[0]["auroc"]} for group, members in by_set.items()}
    significance = {family: {label: np.sum([r["significance"][label] for r in rows
                                            if r["family"] == family], axis=0).tolist()
                             for label in rows[0]["significance"]}
                    for family in summary}
    return {"rows": rows, "summary": summary, "per_set": per_set, "significance": significance}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=",".join(SEEN))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/consensus-cache"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import causal_lorenz96 as l96

    l96.limit_threads(1)
    build_cache(args.cache, [d for d in args.data.split(",") if d])
    result = {"machine": l96.machine_info(), **evaluate(args.cache)}
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(args.out)
    summary = result["summary"]
    keys = sorted(summary["coupled"], key=lambda k: -summary["coupled"][k])
    print("| score | " + " | ".join(summary) + " |")
    for key in keys:
        print(f"| {key} | " + " | ".join(f"{summary[f][key]:.3f}" for f in summary) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
