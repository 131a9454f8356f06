"""``dynid states`` of plrnn/alrnn on a fitted model's own free run fed back (round 10): how far
the states' unobserved latents, inferred by the forecast's 25-step warm-up, are from the run's
own, whether the AL-RNN's subregions agree, and the states' CPU cost.

    python benchmarks/rnn_states_feedback.py BACKEND SEED [-p values without -p ...]

The model is fitted on the x coordinate of 3000 Lorenz-63 samples (simulate's seed SEED), so
M - 1 latents are unobserved; its free run of 5000 steps from the state the data give is the
ground truth, its first latent (in data units) the record fed to ``api.states``.
"""
import sys
import time

import numpy as np
import torch
from dynid import api
from dynid.data.dataset import Dataset
from dynid.systems import simulate
from dynid.models.rnn.gtf import rollout

backend, seed = sys.argv[1], int(sys.argv[2])
params = sys.argv[3:]
x = simulate("lorenz", n=3000, dt=0.01, seed=seed).x
data = Dataset.from_arrays(x[:, :1], dt=0.01, variables=["x"])
c0 = time.process_time()
model = api.fit(data, backend, params, seed=seed, device="cpu").model
fit_s = time.process_time() - c0
# The model's own free run from the state the data give, its latents the ground truth.
z0 = model._start_states(*model._batch_of_one(data.trials[0].slice(3000 - model.history_length)))
with torch.no_grad():
    z = rollout(model.cell_, z0, 5000, torch.zeros(1, 5000, 0))[0][0].numpy().astype(float)
n = model.n_variables
record = Dataset.from_arrays(z[:, :n] * model.scale_ + model.mean_, dt=0.01, variables=["x"])
c0 = time.process_time()
found = api.states(model, record)
states_s = time.process_time() - c0
w = model.warmup
err = np.abs(found.means[w:] - z[w:])
spread = z.std(axis=0)
print(f"{backend} seed {seed} M={model.latent} warmup={w} fit {fit_s:.1f} CPU s, states of 5000 samples {states_s:.2f} CPU s")
print(f"  observed max err {err[:, :n].max():.2e}; unobserved max err / sd: {np.max(err[:, n:] / spread[n:]):.2e}, median {np.median(err[:, n:] / spread[n:]):.2e}")
if found.state is not None:
    true = np.array([int(''.join('1' if v > 0 else '0' for v in row), 2) for row in z[w:, model.latent - model.params.pwl:]])
    print(f"  subregions agree on {np.mean(found.state[w:] == true):.4f} of samples; visited {len(np.unique(true))}")
