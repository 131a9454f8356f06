"""PCMCI-ParCorr: dynid against tigramite's PCMCI(ParCorr), same data, same settings.

    python benchmarks/causal_pcmci_vs_tigramite.py            # 3 seeds x 3 repeats (~3 min)
    python benchmarks/causal_pcmci_vs_tigramite.py --quick    # smoke run, 8 variables; no file

Data: per seed, a stable sparse VAR(2) with 20 variables and 1000 samples (lag-1 autodependence
of every variable plus 20 random cross-links at lags 1-2, |coefficient| 0.3-0.5). Both sides run
PCMCI with tau_min=1, tau_max=3, pc_alpha=0.2, alpha=0.05 and Benjamini-Hochberg FDR, in one
process, interleaved (timing.py); inputs (dynid's Dataset, tigramite's DataFrame) are built
outside the timed calls, and tigramite gets a fresh PCMCI and ParCorr per call (its CI-test
cache would otherwise answer the repeats).

FDR families differ by design: dynid adjusts over the cross-links only (self-links are not
edges), tigramite's ``fdr_method='fdr_bh'`` over every lagged link, self-links included. The
timed tigramite call is ``run_pcmci(fdr_method='none')`` followed by ``get_corrected_pvalues``
(exactly what ``run_pcmci(fdr_method='fdr_bh')`` does inside), so the raw p-values are kept for
the like-with-like comparison: the link sets are compared under each family, both sides' raw
MCI p-values adjusted the same way.

Prints a table and writes benchmarks/results/causal_pcmci.json (quick runs only print).
Goal: dynid >= 5x faster, identical links.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from timing import interleaved, summarize

from dynid.causal import CausalGraph, CausalSettings, adjust_pvalues
from dynid.causal.pcmci import PCMCI, PCMCIParams
from dynid.data.dataset import Dataset

HERE = Path(__file__).resolve().parent
TAU_MAX, PC_ALPHA, ALPHA = 3, 0.2, 0.05
GOAL_SPEEDUP = 5.0
Link = tuple[int, int, int]  # (source, target, lag)


def sparse_var(
    seed: int, d: int, n: int, n_links: int, burn: int = 200
) -> tuple[np.ndarray, set[Link]]:
    """(n, d) samples of a random stable sparse VAR(2) and its true cross-links."""
    rng = np.random.default_rng(seed)
    while True:
        coef = np.zeros((2, d, d))  # [lag - 1, target, source]
        coef[0][np.diag_indices(d)] = rng.uniform(0.3, 0.6, d)
        pairs = rng.permutation([(s, t) for s in range(d) for t in range(d) if s != t])[:n_links]
        lags = rng.integers(1, 3, n_links)
        signs = rng.choice([-1.0, 1.0], n_links)
        for (s, t), lag, sign in zip(pairs, lags, signs):
            coef[lag - 1, t, s] = sign * rng.uniform(0.3, 0.5)
        companion = np.block([[coef[0], coef[1]], [np.eye(d), np.zeros((d, d))]])
        if np.max(np.abs(np.linalg.eigvals(companion))) < 0.95:
            break
    noise = rng.standard_normal((n + burn, d))
    x = np.zeros_like(noise)
    for t in range(2, n + burn):
        x[t] = coef[0] @ x[t - 1] + coef[1] @ x[t - 2] + noise[t]
    truth = {(int(s), int(t), int(lag)) for (s, t), lag in zip(pairs, lags)}
    return x[burn:], truth


def run_dynid(data: Dataset) -> CausalGraph:
    settings = CausalSettings(max_lag=TAU_MAX, alpha=ALPHA, correction="bh")
    return PCMCI(PCMCIParams(pc_alpha=PC_ALPHA)).discover(data, settings)


def run_tigramite(frame: Any) -> dict[str, Any]:
    """tigramite's ParCorr-PCMCI: parents, raw MCI values/p-values, and its fdr_bh q-values."""
    from tigramite.independence_tests.parcorr import ParCorr
    from tigramite.pcmci import PCMCI as TigramitePCMCI

    method = TigramitePCMCI(frame, ParCorr(significance="analytic"), verbosity=0)
    raw = method.run_pcmci(tau_min=1, tau_max=TAU_MAX, pc_alpha=PC_ALPHA, alpha_level=ALPHA,
                           fdr_method="none")
    q = method.get_corrected_pvalues(raw["p_matrix"], tau_min=1, tau_max=TAU_MAX,
                                     fdr_method="fdr_bh")
    return {"parents": method.all_parents, "val": raw["val_matrix"], "p": raw["p_matrix"], "q": q}


def significant(q: np.ndarray, cross_only: bool = True) -> set[Link]:
    """Links (source, target, lag >= 1) with q <= ALPHA in a (d, d, tau_max + 1) array."""
    return {(int(s), int(t), int(k)) for s, t, k in np.argwhere(q[:, :, 1:] <= ALPHA) + [0, 0, 1]
            if not (cross_only and s == t)}


def bh_cross(p: np.ndarray) -> np.ndarray:
    """dynid's family: BH over the cross-links at lags >= 1; NaN elsewhere."""
    q = np.full_like(p, np.nan)
    mask = ~np.eye(p.shape[0], dtype=bool)[:, :, None] & (np.arange(p.shape[2]) >= 1)
    q[mask] = adjust_pvalues(p[mask])
    return q


def bh_all_lagged(p: np.ndarray) -> np.ndarray:
    """tigramite's family: BH over every link at lags >= 1, self-links included."""
    q = np.full_like(p, np.nan)
    q[:, :, 1:] = adjust_pvalues(p[:, :, 1:])
    return q


def agreement(graph: CausalGraph, tig: dict[str, Any], truth: set[Link]) -> dict[str, Any]:
    d = len(graph.variables)
    index = {name: i for i, name in enumerate(graph.variables)}
    ours_p, ours_val = graph.extra["p_matrix"], graph.extra["val_matrix"]
    ours_links = {(index[e.source], index[e.target], e.lag) for e in graph.significant_edges}
    ours_parents = {index[name]: [(index[p["source"]], -p["lag"]) for p in parents]
                    for name, parents in graph.extra["parents"].items()}
    theirs_parents = {j: [(int(i), int(lag)) for i, lag in tig["parents"][j]] for j in range(d)}
    found = ours_links & truth
    return {
        "max_abs_diff_val": float(np.max(np.abs(ours_val[:, :, 1:] - tig["val"][:, :, 1:]))),
        "max_rel_diff_p": float(np.max(np.abs(ours_p[:, :, 1:] - tig["p"][:, :, 1:])
                                       / np.maximum(tig["p"][:, :, 1:], 1e-300))),
        "parents_identical": ours_parents == theirs_parents,
        # dynid's edges against tigramite's raw p-values adjusted over dynid's family ...
        "links_identical_cross_family": ours_links == significant(bh_cross(tig["p"])),
        # ... and tigramite's own fdr_bh links against dynid's raw p-values adjusted like them.
        "links_identical_tigramite_family":
            significant(tig["q"]) == significant(bh_all_lagged(ours_p)),
        "n_links_dynid": len(ours_links),
        "n_links_tigramite_fdr_bh": len(significant(tig["q"])),
        "recovery": {"true_links": len(truth), "found": len(found),
                     "false": len(ours_links - truth),
                     "fdp": len(ours_links - truth) / max(len(ours_links), 1)},
    }


def bench_seed(seed: int, d: int, n: int, repeats: int, warmup: int) -> dict[str, Any]:
    from tigramite import data_processing as pp

    x, truth = sparse_var(seed, d, n, n_links=d)
    data, frame = Dataset.from_arrays(x), pp.DataFrame(x)
    last: dict[str, Any] = {}

    def dynid_case() -> None:
        last["dynid"] = run_dynid(data)

    def tigramite_case() -> None:
        last["tigramite"] = run_tigramite(frame)

    times = interleaved({"dynid": dynid_case, "tigramite": tigramite_case}, repeats, warmup)
    result: dict[str, Any] = {"seed": seed, **{side: summarize(t) for side, t in times.items()}}
    result["speedup"] = result["tigramite"]["median_s"] / result["dynid"]["median_s"]
    result["agreement"] = agreement(last["dynid"], last["tigramite"], truth)
    return result


def environment() -> dict[str, Any]:
    versions = {name: importlib.metadata.version(name)
                for name in ("dynid", "numpy", "scipy", "tigramite")}
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cores": os.cpu_count(), "load_average": os.getloadavg(), **versions}


def format_table(seeds: list[dict[str, Any]]) -> str:
    header = (f"{'seed':>4} {'dynid s':>9} {'tigramite s':>12} {'speed-up':>9} "
              f"{'same links':>10} {'same parents':>12} {'max rel dp':>10} {'links':>5}")
    lines = [header, "-" * len(header)]
    for r in seeds:
        a = r["agreement"]
        same_links = a["links_identical_cross_family"] and a["links_identical_tigramite_family"]
        same_parents = a["parents_identical"]
        lines.append(f"{r['seed']:>4} {r['dynid']['median_s']:>9.4f} "
                     f"{r['tigramite']['median_s']:>12.3f} {r['speedup']:>8.1f}x "
                     f"{'yes' if same_links else 'NO':>10} {'yes' if same_parents else 'NO':>12} "
                     f"{a['max_rel_diff_p']:>10.1e} {a['n_links_dynid']:>5}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 variables, 1 seed, 1 repeat")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    d, n = (8, 500) if args.quick else (20, 1000)
    seeds, repeats = (1, 1) if args.quick else (args.seeds, args.repeats)

    start = time.perf_counter()
    # One untimed round before the first seed pays imports and first-call costs on both sides.
    per_seed = [bench_seed(seed, d, n, repeats, warmup=int(seed == 0)) for seed in range(seeds)]
    summary = {
        "dynid_median_s": statistics.median(r["dynid"]["median_s"] for r in per_seed),
        "tigramite_median_s": statistics.median(r["tigramite"]["median_s"] for r in per_seed),
        "speedup_median": statistics.median(r["speedup"] for r in per_seed),
        "all_links_identical": all(r["agreement"]["links_identical_cross_family"]
                                   and r["agreement"]["links_identical_tigramite_family"]
                                   for r in per_seed),
        "all_parents_identical": all(r["agreement"]["parents_identical"] for r in per_seed),
        "max_rel_diff_p": max(r["agreement"]["max_rel_diff_p"] for r in per_seed),
    }
    summary["goal_met"] = (summary["speedup_median"] >= GOAL_SPEEDUP
                           and summary["all_links_identical"])
    results = {
        "benchmark": "causal_pcmci_vs_tigramite",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": {"n_variables": d, "n_samples": n, "tau_max": TAU_MAX, "pc_alpha": PC_ALPHA,
                   "alpha": ALPHA, "fdr": "bh", "seeds": seeds, "repeats": repeats,
                   "goal_speedup": GOAL_SPEEDUP},
        "environment": environment(),
        "summary": summary,
        "seeds": per_seed,
        "total_s": time.perf_counter() - start,
    }
    print(f"\nPCMCI-ParCorr, {d} variables x {n} samples, tau_max={TAU_MAX}, pc_alpha={PC_ALPHA}, "
          f"alpha={ALPHA} (BH); medians of {repeats} interleaved runs per seed\n")
    print(format_table(per_seed))
    print(f"\nmedian speed-up {summary['speedup_median']:.1f}x (goal >= {GOAL_SPEEDUP:.0f}x), "
          f"links identical: {summary['all_links_identical']}, "
          f"max relative p-value difference {summary['max_rel_diff_p']:.1e}")
    if args.quick:
        return
    output = HERE / "results" / "causal_pcmci.json"
    output.parent.mkdir(exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {output} ({results['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
