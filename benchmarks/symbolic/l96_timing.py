"""Time of the default ``dynid symbolic FILE`` on Lorenz-96 with 10 variables x 3,000 rows
(issue 11: it ran over five minutes), and whether its equations have the true structure.

The data are ``dynid simulate lorenz96 --n 3000`` (F = 8); the real CLI runs on them as a
subprocess with ``--json --seed 0`` (the bootstrap's seed, so every run gives the same
output), ``--repeats`` times (benchmarks/timing.py, no warm-up: one run
is long). Wall time depends on what else the machine runs, so the CPU time of the runs and the
cores other work kept busy meanwhile are recorded too. Structure: every equation must be
dx_i/dt = x_{i-1} x_{i+1} - x_{i-1} x_{i-2} - x_i + 8, exactly these four terms, coefficients
within 1% of the truth.

    python benchmarks/symbolic/l96_timing.py [--repeats 3] > result.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/timing.py
from timing import OtherLoad, command, interleaved, summarize  # noqa: E402

D, ROWS, FORCING = 10, 3000, 8.0


def true_rhs(i: int) -> dict[tuple[int, ...], float]:
    """Equation i of Lorenz-96 as {sorted variable indices of a monomial: coefficient}."""
    def at(k: int) -> int:
        return k % D

    return {
        tuple(sorted((at(i - 1), at(i + 1)))): 1.0,
        tuple(sorted((at(i - 1), at(i - 2)))): -1.0,
        (i,): -1.0,
        (): FORCING,
    }


def identified_rhs(rhs: str, names: list[str]) -> dict[tuple[int, ...], float]:
    """The polynomial ``rhs`` (sympy syntax, variables ``names``) as {monomial: coefficient}."""
    import sympy

    symbols = sympy.symbols(names)
    poly = sympy.Poly(sympy.expand(sympy.sympify(rhs, locals=dict(zip(names, symbols)))), *symbols)
    found = {}
    for powers, coefficient in poly.terms():
        found[tuple(k for k, power in enumerate(powers) for _ in range(power))] = float(coefficient)
    return found


def check_structure(document: dict[str, Any]) -> dict[str, Any]:
    """Per equation: exact structure? largest relative coefficient error."""
    names = document["variables"]
    report = []
    for i, equation in enumerate(document["equations"]):
        truth, found = true_rhs(i), identified_rhs(equation["rhs"], names)
        error = max(abs(found.get(m, 0.0) - c) / abs(c) for m, c in truth.items())
        report.append({"lhs": equation["lhs"], "rhs": equation["rhs"],
                       "exact_structure": set(found) == set(truth) and error < 0.01,
                       "max_relative_coefficient_error": error})
    return {"all_exact": all(r["exact_structure"] for r in report), "equations": report}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "l96.csv"
        data = subprocess.run([sys.executable, "-m", "dynid", "simulate", "lorenz96", "--n", str(ROWS)],
                              capture_output=True, text=True, check=True).stdout
        path.write_text(data)
        run = command([sys.executable, "-m", "dynid", "symbolic", path, "--json", "--seed", "0"])
        outputs: list[str] = []
        cpu_before = os.times()
        with OtherLoad() as load:
            wall = interleaved({"symbolic": lambda: outputs.append(run())}, args.repeats, warmup=0)["symbolic"]
        cpu_after = os.times()
    cpu = (cpu_after.children_user + cpu_after.children_system
           - cpu_before.children_user - cpu_before.children_system) / args.repeats
    result = {
        "command": f"python -m dynid symbolic lorenz96-{D}x{ROWS}.csv --json --seed 0",
        "wall": summarize(wall),
        "cpu_s_per_run": round(cpu, 2),
        "other_load_cores": load.cores,  # CPU cores busy with other work meanwhile
        "load_average": os.getloadavg(),
        "structure": check_structure(json.loads(outputs[-1])),
        "same_output_every_run": len(set(outputs)) == 1,  # --seed makes the ensemble repeatable
    }
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
