#!/usr/bin/env bash
# Regenerates every file in sample_data/ (deterministic: same files on every machine).
set -euo pipefail
cd "$(dirname "$0")"

# Lorenz-63, noise-free, dt 0.01, 4000 samples.
dynid simulate lorenz --n 4000 -o lorenz.csv

# Van der Pol oscillator, three trials of different lengths and initial states, 1% noise,
# gathered into one HDF5 file: /trials/trialK/{data,t}, one group per trial.
dynid simulate vanderpol --n 1500 --x0 2,0 --noise 0.01 --seed 1 -o vdp_0.h5
dynid simulate vanderpol --n 1000 --x0 -1,1 --noise 0.01 --seed 2 -o vdp_1.h5
dynid simulate vanderpol --n 800 --x0 0.5,-2 --noise 0.01 --seed 3 -o vdp_2.h5
python - <<'PY'
import h5py
with h5py.File("vanderpol_trials.h5", "w") as out:
    group = out.create_group("trials")
    for k in range(3):
        with h5py.File(f"vdp_{k}.h5", "r") as src:
            trial = group.create_group(f"trial{k}")
            data = trial.create_dataset("data", data=src["data"][()], compression="gzip")
            data.attrs["columns"] = src["data"].attrs["columns"]
            trial.create_dataset("t", data=src["t"][()], compression="gzip")
PY
rm vdp_0.h5 vdp_1.h5 vdp_2.h5

# Damped oscillator driven by the input column u (sum of three incommensurate sines).
dynid simulate forced-oscillator --n 3000 -o forced_oscillator.csv

# Sparse VAR(2), 5 variables, known graph: x0->x1 (lag 1), x1->x2 (lag 2), x3->x4 (lag 1),
# x0->x3 (lag 2), plus self-loops; unit Gaussian innovations.
dynid simulate var --n 2000 --seed 0 -o var5.csv
