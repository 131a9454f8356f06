"""dynid symbolic --pde beside pysindy's PDE-FIND (PDELibrary) and weak PDE library
(WeakPDELibrary) on the same data: Burgers, KdV, Kuramoto-Sivashinsky (1-D) and lambda-omega
reaction-diffusion (2-D, two fields), at 0% and 1% noise (Gaussian, 1% of each field's RMS).

Per system, noise and method: whether the identified terms are exactly the true ones (all
fields), the largest relative error over the true coefficients (a missed term counts 100%),
the number of spurious terms, and the wall time of the fit (one run after an untimed warm-up
round of every method, BLAS at one thread).

pysindy settings: the libraries its PDE examples use, of the same reach as dynid's (monomials
to degree 3, spatial derivatives to order 4 in 1-D, 2 in 2-D), STLSQ with normalised columns
at threshold 0.05 and 0.5 (pysindy has no threshold-free selection; two values show how much
the answer hangs on it), the weak library with its defaults (K = 100 subdomains, p = 4).

    python benchmarks/symbolic_pde.py [--quick] [-o benchmarks/results/symbolic_pde.json]

--quick: only the 1-D systems.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from dynid.data.fields import SpaceTimeFields
from dynid.symbolic.pde import PdeParams, identify_pde
from dynid.systems.pde import PDE_SYSTEMS, FieldRun, with_noise

# A term: (multiplying monomial as sorted field letters, differentiated field or "", derivative
# axes as sorted digits 1 = x, 2 = y): pysindy's and dynid's names both map to it.
Key = tuple[str, str, str]


def dynid_keys(name: str, fields: tuple[str, ...]) -> list[Key]:
    """dynid's term names as keys (``lap`` is two keys, one per axis)."""
    axes = {"x": "1", "y": "2"}
    if m := re.fullmatch(r"lap\((\w)\)", name):
        return [("", m.group(1), "11"), ("", m.group(1), "22")]
    if m := re.fullmatch(r"(\w)\*(\w)_([xy]+)", name):  # u*u_x
        return [(m.group(1), m.group(2), "".join(sorted(axes[a] for a in m.group(3))))]
    if m := re.fullmatch(r"(\w)_([xy]+)", name):
        return [("", m.group(1), "".join(sorted(axes[a] for a in m.group(2))))]
    if "(" in name:  # derivatives of products (d_xx(u**2), bilap(u)): never true terms here
        return [(name, "", "")]
    letters = ""
    for field, power in re.findall(r"(\w)(?:\*\*(\d))?", name):
        if field in fields:
            letters += field * int(power or 1)
    return [("".join(sorted(letters)), "", "")]


def pysindy_key(name: str) -> Key:
    """pysindy's names ("uu_1" = u u_x, "u_11", "u^2 v", "u^2 vu_2" = u^2 v u_y, "1") as a key."""
    name = re.sub(r"(\w)\^(\d)", lambda m: m.group(1) * int(m.group(2)), name.replace(" ", ""))
    if "_" not in name:
        return ("".join(sorted(name)) if name != "1" else "", "", "")
    head, digits = name.split("_")
    return ("".join(sorted(head[:-1])), head[-1], "".join(sorted(digits)))


def truth_keys(run: FieldRun) -> list[dict[Key, float]]:
    return [{k: c for name, c in truth.items() for k in dynid_keys(name, run.names)} for truth in run.truth]


def score(found: list[dict[Key, float]], truth: list[dict[Key, float]]) -> dict[str, object]:
    exact = all(set(f) == set(t) for f, t in zip(found, truth))
    errors = [abs(f.get(k, 0.0) - c) / abs(c) for f, t in zip(found, truth) for k, c in t.items()]
    spurious = sum(len(set(f) - set(t)) for f, t in zip(found, truth))
    return {"exact": exact, "max_rel_error": max(errors), "spurious": spurious}


def run_dynid(run: FieldRun) -> list[dict[Key, float]]:
    data = SpaceTimeFields(run.names, run.values, run.t, run.space, run.space_names, "benchmark")
    result = identify_pde(data, PdeParams(ensemble=0))
    found = []
    for row in result.coefficients:
        terms: dict[Key, float] = {}
        for k in np.flatnonzero(row):
            for key in dynid_keys(result.terms[k].name, run.names):
                terms[key] = float(row[k])
        found.append(terms)
    return found


def run_pysindy(run: FieldRun, weak: bool, threshold: float) -> list[dict[Key, float]]:
    import pysindy as ps

    dims = len(run.space)
    u = np.moveaxis(run.values, 0, -1)  # (n_t, *space, fields)
    u = np.moveaxis(u, 0, dims)  # pysindy: (*space, n_t, fields)
    functions = ps.PolynomialLibrary(degree=3, include_bias=False)
    order = 4 if dims == 1 else 2
    if weak:
        grid = np.stack(np.meshgrid(*run.space, run.t, indexing="ij"), axis=-1)
        library = ps.WeakPDELibrary(function_library=functions, derivative_order=order, spatiotemporal_grid=grid,
                                    include_bias=True, is_uniform=True)
    else:
        spatial = run.space[0] if dims == 1 else np.stack(np.meshgrid(*run.space, indexing="ij"), axis=-1)
        library = ps.PDELibrary(function_library=functions, derivative_order=order, spatial_grid=spatial,
                                include_bias=True, is_uniform=True)
    model = ps.SINDy(feature_library=library, optimizer=ps.STLSQ(threshold=threshold, alpha=1e-5, normalize_columns=True))
    model.fit(u, t=float(run.t[1] - run.t[0]), feature_names=list(run.names))
    names = model.get_feature_names()
    found = []
    for row in model.coefficients():
        terms: dict[Key, float] = {}
        for k in np.flatnonzero(row):
            key = pysindy_key(names[k].replace(" ", ""))
            terms[key] = terms.get(key, 0.0) + float(row[k])
        found.append(terms)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("-o", "--output", type=Path, default=Path(__file__).parent / "results" / "symbolic_pde.json")
    args = parser.parse_args()
    systems = [s for s in PDE_SYSTEMS if not (args.quick and s == "lambda-omega")]
    methods = {
        "dynid": run_dynid,
        "pysindy PDE-FIND, threshold 0.05": lambda r: run_pysindy(r, False, 0.05),
        "pysindy PDE-FIND, threshold 0.5": lambda r: run_pysindy(r, False, 0.5),
        "pysindy weak, threshold 0.05": lambda r: run_pysindy(r, True, 0.05),
        "pysindy weak, threshold 0.5": lambda r: run_pysindy(r, True, 0.5),
    }
    rows = []
    warnings.filterwarnings("ignore")  # pysindy's convergence and deprecation chatter
    with threadpool_limits(1):
        warm = PDE_SYSTEMS["burgers"]()
        for fit in methods.values():  # untimed: first imports (sympy, pysindy), caches
            fit(warm)
        for system in systems:
            clean = PDE_SYSTEMS[system]()
            truth = truth_keys(clean)
            for noise in (0.0, 0.01):
                run = with_noise(clean, noise, seed=0) if noise else clean
                for method, fit in methods.items():
                    start = time.perf_counter()
                    try:
                        found = fit(run)
                        row = score(found, truth)
                    except Exception as exc:  # a peer library failing is a result, not a crash
                        row = {"exact": False, "max_rel_error": float("nan"), "spurious": 0, "error": str(exc)[:100]}
                    row.update(system=system, noise=noise, method=method, seconds=time.perf_counter() - start)
                    rows.append(row)
                    print(f"{system:22s} {noise:4.0%} {method:34s} exact={row['exact']!s:5s} "
                          f"max_rel_err={row['max_rel_error']:.2e} spurious={row['spurious']:3d} "
                          f"{row['seconds']:6.2f}s", flush=True)
    machine = {"python": sys.version.split()[0], "platform": platform.platform(), "processor": platform.processor()}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
