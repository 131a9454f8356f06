"""Wall time of the default ``dynid symbolic FILE`` (default ensemble) on a 3-D system.

The Lorenz system, 10k samples at dt = 0.01 from the benchmark's training IC, is written as a
CSV (t, x, y, z) and the real console script runs on it as a subprocess, interleaved repeats
after one warm-up (benchmarks/timing.py). The same data are also fitted in process (default
ensemble, ensemble=0, and pysindy defaults) to separate start-up and I/O from the fit.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/timing.py
from timing import OtherLoad, command, interleaved, summarize  # noqa: E402

from systems import BY_NAME, integrate  # noqa: E402

_SCRIPT = Path(sys.executable).with_name("dynid")  # the console script itself, not a shim
DYNID = str(_SCRIPT) if _SCRIPT.exists() else shutil.which("dynid") or "dynid"


def time_cli(samples: int = 10_000, repeats: int = 3, system_name: str = "lorenz", dt: float = 0.01) -> dict[str, Any]:
    import dynid
    import pysindy as ps

    system = BY_NAME[system_name]
    t, x = integrate(system.f, system.x0, dt * np.arange(samples))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{system_name}.csv"
        np.savetxt(path, np.column_stack([t, x]), delimiter=",", header="t,x,y,z", comments="", fmt="%.17g")
        run = command([DYNID, "symbolic", path])  # BLAS threads as the user's environment has them
        with OtherLoad() as load:
            cli = summarize(interleaved({"cli": run}, repeats)["cli"])
        text = run()
    data = dynid.Dataset.from_arrays(x, t=t)
    return {
        "system": system_name,
        "samples": samples,
        "dt": dt,
        "command": f"{DYNID} symbolic {system_name}.csv",
        "cli": cli,
        "other_load_cores": load.cores,  # CPU cores busy with other work meanwhile
        "inprocess_default_s": _seconds(lambda: dynid.fit(data, "symbolic", seed=0)),
        "inprocess_ensemble0_s": _seconds(lambda: dynid.fit(data, "symbolic", ["ensemble=0"], seed=0)),
        "inprocess_pysindy_s": _seconds(lambda: ps.SINDy().fit(x, t=dt)),
        "equations": [line.strip() for line in text.splitlines() if line.startswith("d")],
    }


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


if __name__ == "__main__":
    import json

    print(json.dumps(time_cli(repeats=1), indent=1))
