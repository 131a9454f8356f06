"""One benchmark case: simulate a system, add noise, fit both tools, score them -> one row.

Noise: observation noise, N(0, (level * std of each clean variable)^2), seeded per case from
crc32("system|noise|samples"), so every run sees the same data. Scores compare against the
clean trajectories; both re-simulations start from the exact (clean) initial condition and run
as many samples as the training record, on its grid.
"""

from __future__ import annotations

import math
import signal
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from fitters import Fitted, fit_dynid, fit_pysindy
from metrics import compare, r2
from systems import BY_NAME, System

DYNID_PARAMS = ("ensemble=0",)


@dataclass(frozen=True)
class Case:
    """One dataset; ``dynid_params`` are the -p style settings of the dynid fit."""

    system: str
    noise: float
    samples: int
    dynid_params: tuple[str, ...] = DYNID_PARAMS

    @property
    def key(self) -> tuple[str, float, int]:
        return self.system, self.noise, self.samples

    @property
    def seed(self) -> int:
        return zlib.crc32(f"{self.system}|{self.noise}|{self.samples}".encode())


def noisy(x: np.ndarray, level: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return x + level * x.std(axis=0) * rng.standard_normal(x.shape)


def run_case(case: Case, timeout_s: float) -> dict[str, Any]:
    """The row of ``case``: its description plus one result dict per tool."""
    system = BY_NAME[case.system]
    t, clean = system.simulate(case.samples)
    _, clean_new = system.simulate(case.samples, system.x0_new)
    x = noisy(clean, case.noise, case.seed)
    row: dict[str, Any] = {
        "system": system.name,
        "category": system.category,
        "dimension": system.dimension,
        "chaotic": system.chaotic,
        "noise": case.noise,
        "samples": case.samples,
        "dt": float(t[1] - t[0]),
    }
    fits = {
        "dynid": lambda: fit_dynid(t, x, system.symbols, case.dynid_params),
        "pysindy": lambda: fit_pysindy(t, x, system.symbols),
    }
    for tool, fit in fits.items():
        row[tool] = evaluate(fit, system, clean, clean_new, timeout_s)
    return row


def evaluate(fit, system: System, clean: np.ndarray, clean_new: np.ndarray, timeout_s: float) -> dict[str, Any]:
    """Fit (within ``timeout_s``), then structure, coefficient error and both R^2 values."""
    out: dict[str, Any] = {"error": None, "simulation_errors": []}
    try:
        with deadline(timeout_s):
            fitted: Fitted | None = fit()
    except Exception as exc:  # noqa: BLE001 - any failure of a tool is a result
        fitted = None
        out["error"] = f"{type(exc).__name__}: {exc}"[:500]
    comparison = compare(system.expressions, None if fitted is None else fitted.equations, system.symbols)
    out.update(
        recovered=comparison.recovered,
        coefficient_error=comparison.coefficient_error,
        missing=comparison.missing,
        spurious=comparison.spurious,
        wrong_constants=comparison.wrong_constants,
        seconds=math.nan if fitted is None else fitted.seconds,
        equations=None if fitted is None else [str(e.evalf(4)) for e in fitted.equations],
        info={} if fitted is None else fitted.info,
    )
    for key, x0, truth in (("r2_train", system.x0, clean), ("r2_new", system.x0_new, clean_new)):
        predicted = None
        if fitted is not None:
            try:
                with deadline(timeout_s):
                    predicted = fitted.simulate(np.asarray(x0, dtype=float), truth.shape[0])
            except Exception as exc:  # noqa: BLE001 - divergence, solver failure, timeout
                out["simulation_errors"].append(f"{key}: {type(exc).__name__}: {exc}"[:300])
        out[key] = r2(truth, predicted)
    return out


@contextmanager
def deadline(seconds: float):
    """Raise TimeoutError in the block after ``seconds`` (main thread of a process only)."""

    def expire(signum, frame):  # noqa: ARG001
        raise TimeoutError(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


if __name__ == "__main__":  # python cases.py SYSTEM NOISE SAMPLES: one case, printed
    import json
    import sys

    started = time.perf_counter()
    result = run_case(Case(sys.argv[1], float(sys.argv[2]), int(sys.argv[3])), timeout_s=120)
    print(json.dumps(result, indent=1, default=str))
    print(f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
