"""Fit-only timings, in one process: no start-up, imports or file I/O on either side.

Run by run_foundation.py in its own process (so the driver never imports the fitting libraries);
prints one JSON document on stdout::

    python benchmarks/inprocess.py --sindy LORENZ.csv --dmd L96.csv --rank R --repeats N

Each side reads its data once, the way it does end to end (dynid.load / pandas), then the fits
alone are timed, interleaved, after one untimed warm-up round that also pays the lazy imports.
A cProfile of one more dynid fit attributes its time to dynid's own functions.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
from collections.abc import Callable
from typing import Any

import dynid
from reference import fit_dmd, fit_sindy, read_csv
from timing import interleaved, summarize

PACKAGE_DIR = os.path.dirname(dynid.__file__)


def compare(
    dynid_fit: Callable[[], object], reference_fit: Callable[[], object], repeats: int
) -> dict[str, Any]:
    samples = interleaved({"dynid": dynid_fit, "reference": reference_fit}, repeats)
    result: dict[str, Any] = {side: summarize(times) for side, times in samples.items()}
    result["dynid_profile"] = profile(dynid_fit)
    return result


def profile(fit: Callable[[], object], top: int = 10) -> dict[str, Any]:
    """One profiled call: cumulative seconds of dynid's own functions, and the top self times."""
    profiler = cProfile.Profile()
    profiler.runcall(fit)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [
        (_label(where), cumulative, own)
        for where, (_, _, own, cumulative, _) in stats.items()
    ]
    ours = [row for row in rows if row[0].startswith("dynid/")]
    return {
        "total_s": round(max(row[1] for row in rows), 4),
        "dynid_cumulative_s": {
            name: round(cum, 4) for name, cum, _ in sorted(ours, key=lambda r: -r[1])[:top]
        },
        "top_self_s": {
            name: round(own, 4) for name, _, own in sorted(rows, key=lambda r: -r[2])[:top]
        },
    }


def _label(where: tuple[str, int, str]) -> str:
    filename, _, function = where
    if filename.startswith(PACKAGE_DIR):
        filename = "dynid" + filename[len(PACKAGE_DIR):]
    elif "site-packages" in filename:
        filename = filename.split("site-packages" + os.sep, 1)[1]
    elif filename == "~":  # a builtin: "<method 'reduce' of ...>", "<function f at 0x...>"
        return re.sub(r" at 0x[0-9a-f]+", "", function)
    return f"{filename}:{function}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sindy", required=True, help="CSV for the sindy comparison")
    parser.add_argument("--dmd", required=True, help="CSV for the dmd comparison")
    parser.add_argument("--rank", type=int, required=True, help="DMD rank (dynid's choice)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    data = dynid.load(args.sindy)
    t, x = read_csv(args.sindy)
    sindy = compare(lambda: dynid.fit(data, "sindy"), lambda: fit_sindy(t, x), args.repeats)

    data = dynid.load(args.dmd)
    _, x = read_csv(args.dmd)
    dmd = compare(
        lambda: dynid.fit(data, "dmd"), lambda: fit_dmd(x, args.rank), args.repeats
    )
    print(json.dumps({"sindy": sindy, "dmd": dmd}))


if __name__ == "__main__":
    main()
