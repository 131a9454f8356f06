"""Reference fits straight through pysindy and PyDMD: what dynid's backends are measured against.

As a script, timed end to end by run_foundation.py (start-up, imports, CSV reading, fit, writing
the result all included)::

    python benchmarks/reference.py sindy DATA.csv OUT.npy            # coefficients (d, n_features)
    python benchmarks/reference.py dmd DATA.csv OUT.npz --rank R     # eigs (r,), modes (d, r)

The fit functions are imported by inprocess.py for the fit-only timings. The script imports only
numpy, pandas and the one library it fits with.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

# dynid's sindy backend defaults (dynid/models/sindy.py: SINDyParams and FD_ORDER).
SINDY_DEGREE = 2
STLSQ_THRESHOLD = 0.1
STLSQ_ALPHA = 0.05
FD_ORDER = 4


def read_csv(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Times (N,) from column 't' and states (N, d) from every other column."""
    frame = pd.read_csv(path)
    return frame["t"].to_numpy(dtype=float), frame.drop(columns="t").to_numpy(dtype=float)


def fit_sindy(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """pysindy with dynid's defaults: polynomial degree 2 with bias, STLSQ, 4th-order FD."""
    import pysindy as ps

    model = ps.SINDy(
        optimizer=ps.STLSQ(threshold=STLSQ_THRESHOLD, alpha=STLSQ_ALPHA),
        feature_library=ps.PolynomialLibrary(degree=SINDY_DEGREE, include_bias=True),
        differentiation_method=ps.FiniteDifference(order=FD_ORDER, axis=-2),
    )
    model.fit(x, t=t)
    return np.asarray(model.coefficients(), dtype=float)


def fit_dmd(x: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """PyDMD exact DMD of rank ``rank`` on snapshots x (N, d); returns (eigs, modes)."""
    from pydmd import DMD

    dmd = DMD(svd_rank=rank, exact=True)
    dmd.fit(x.T)  # PyDMD wants (d, N): one snapshot per column
    return np.asarray(dmd.eigs), np.asarray(dmd.modes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=("sindy", "dmd"))
    parser.add_argument("data")
    parser.add_argument("output")
    parser.add_argument("--rank", type=int, help="dmd: SVD rank (use the one dynid picked)")
    args = parser.parse_args(argv)
    t, x = read_csv(args.data)
    if args.model == "sindy":
        np.save(args.output, fit_sindy(t, x))
    else:
        if args.rank is None:
            parser.error("dmd needs --rank")
        eigs, modes = fit_dmd(x, args.rank)
        with open(args.output, "wb") as handle:  # exactly this path: np.savez would add .npz
            np.savez(handle, eigs=eigs, modes=modes)


if __name__ == "__main__":
    main()
